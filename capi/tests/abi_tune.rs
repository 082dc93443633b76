//! Tuning a prepared space through a C measure callback (`dashrank_space_tune`): the same
//! measurements, fastest candidate and speedup as `Model::tune`, failed measurements skipped,
//! the output capacity checked before anything is measured.

mod abi_support;

use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};

use abi_support::*;
use dashrank::schedule::space::{AnySpace, MatrixShape, SpaceOptions};
use dashrank::workflow;
use dashrank::CostModel;
use dashrank_capi::*;

/// The measure callback: a deterministic "runtime" from the toolchain text, failing every
/// third candidate; it counts its calls through `user_data`.
unsafe extern "C" fn fake_measure(
    user_data: *mut c_void,
    request: *const dashrank_measure_request,
    out_ms: *mut f64,
) -> bool {
    let calls = unsafe { &mut *(user_data as *mut Vec<(usize, String, bool)>) };
    let r = unsafe { &*request };
    let text = unsafe { CStr::from_ptr(r.toolchain) }
        .to_str()
        .unwrap()
        .to_owned();
    let line = unsafe { CStr::from_ptr(r.line) }.to_str().unwrap();
    assert!(!line.is_empty());
    calls.push((r.index, text.clone(), r.is_default));
    if calls.len() % 3 == 0 {
        return false;
    }
    unsafe { *out_ms = fake_ms(&text) };
    true
}

fn fake_ms(text: &str) -> f64 {
    1.0 + (text.bytes().map(u64::from).sum::<u64>() % 97) as f64 / 10.0
}

#[test]
fn tuning_through_a_c_callback_equals_model_tune() {
    let f = Fixture::new("tiny-cognate");
    let mut s = space("sparsetir-spmm");
    let mut cands = f.prepare(s);
    let shape = MatrixShape::from(&f.pattern);
    let rust_space = AnySpace::from_name("sparsetir-spmm", &SpaceOptions::default()).unwrap();
    let want_cands = workflow::prepare(&f.rust, None, &rust_space, &shape).unwrap();
    let rust_matrix = f.rust.embed_matrix(&f.pattern).unwrap();
    let mut rust_calls = 0;
    let want = f
        .rust
        .tune(&rust_matrix, &want_cands, 6, |i| {
            rust_calls += 1;
            let text = want_cands.render(i, "band").unwrap();
            (rust_calls % 3 != 0).then(|| fake_ms(&text))
        })
        .unwrap();

    let mut calls: Vec<(usize, String, bool)> = Vec::new();
    let mut result = std::mem::MaybeUninit::<dashrank_tune_result>::zeroed();
    let mut ms = vec![
        dashrank_measurement {
            ranked: dashrank_ranked {
                index: 0,
                score: 0.0,
                rank: 0,
                is_default: false
            },
            ok: false,
            ms: 0.0
        };
        7
    ];
    let mut n = 0;
    let name = c("band");
    ok(unsafe {
        dashrank_space_tune(
            f.model,
            f.matrix,
            cands,
            6,
            name.as_ptr(),
            Some(fake_measure),
            (&mut calls as *mut Vec<(usize, String, bool)>).cast(),
            result.as_mut_ptr(),
            ms.as_mut_ptr(),
            ms.len(),
            &mut n,
        )
    });
    let result = unsafe { result.assume_init() };
    assert_eq!(n, want.measurements.len());
    assert_eq!(calls.len(), n);
    for ((got, call), m) in ms.iter().zip(&calls).zip(&want.measurements) {
        assert_eq!((got.ranked.index, call.0), (m.index, m.index));
        assert_eq!((got.ok, got.ms.is_nan()), (m.ms.is_some(), m.ms.is_none()));
        if let Some(t) = m.ms {
            assert_eq!(got.ms, t);
        }
        assert_eq!(call.2, m.is_default);
        assert_eq!(call.1, want_cands.render(m.index, "band").unwrap());
    }
    assert!(calls.last().unwrap().2 || want.ranking.default_position < 6);
    let best = want.best.unwrap();
    assert!(result.has_best);
    assert_eq!(
        (result.best_index, result.best_ms),
        (best.index, best.ms.unwrap())
    );
    assert_eq!(result.default_index, want_cands.default_index());
    assert_eq!(result.measured, n);
    assert_eq!(
        result.failed,
        want.measurements.iter().filter(|m| m.ms.is_none()).count()
    );
    assert!(result.failed > 0, "every third measurement fails");
    match want.speedup_over_default() {
        Some(x) => assert_eq!(result.speedup_over_default, x),
        None => assert!(result.speedup_over_default.is_nan()),
    }
    assert!(result.best_ms <= result.default_ms || result.default_ms.is_nan());

    // The measurement array is checked before anything runs; NULL skips it.
    calls.clear();
    let mut need = 0;
    let mut r2 = std::mem::MaybeUninit::<dashrank_tune_result>::zeroed();
    let user: *mut c_void = (&mut calls as *mut Vec<(usize, String, bool)>).cast();
    expect(
        unsafe {
            dashrank_space_tune(
                f.model,
                f.matrix,
                cands,
                6,
                null(),
                Some(fake_measure),
                user,
                r2.as_mut_ptr(),
                ms.as_mut_ptr(),
                2,
                &mut need,
            )
        },
        dashrank_status::InsufficientSize,
        "measurements",
    );
    assert_eq!(need, 7);
    assert!(
        calls.is_empty(),
        "nothing measured before the capacity check"
    );
    ok(unsafe {
        dashrank_space_tune(
            f.model,
            f.matrix,
            cands,
            2,
            null(),
            Some(fake_measure),
            user,
            r2.as_mut_ptr(),
            null_mut(),
            0,
            &mut need,
        )
    });
    assert!(need <= 3 && calls.len() == need);
    expect(
        unsafe {
            dashrank_space_tune(
                f.model,
                f.matrix,
                cands,
                2,
                null(),
                None,
                user,
                r2.as_mut_ptr(),
                null_mut(),
                0,
                null_mut(),
            )
        },
        dashrank_status::NullArgument,
        "measure",
    );
    ok(unsafe { dashrank_space_candidates_free(&mut cands) });
    ok(unsafe { dashrank_space_free(&mut s) });
}

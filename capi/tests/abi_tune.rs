//! Tuning a prepared space through a C measure callback (`dashrank_space_tune`): the same
//! measurements, fastest candidate and speedup as `Model::tune`, failed measurements skipped,
//! the output capacity checked before anything is measured.

mod abi_support;

use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};

use abi_support::*;
use dashrank::schedule::space::{AnyConfig, AnySpace, MatrixShape, SpaceOptions};
use dashrank::workflow;
use dashrank::{CostModel, SpaceCandidates, TuneResult};
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

/// What `fake_measure` records through `user_data`: index, toolchain text, is-default.
type Calls = Vec<(usize, String, bool)>;

#[test]
fn tuning_through_a_c_callback_equals_model_tune() {
    let f = Fixture::new("tiny-cognate");
    let mut s = space("sparsetir-spmm");
    let mut cands = f.prepare(s);
    let (want_cands, want) = model_tune(&f);

    let mut calls = Calls::new();
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
    let mut result = std::mem::MaybeUninit::<dashrank_tune_result>::zeroed();
    let name = c("band");
    ok(unsafe {
        dashrank_space_tune(
            f.model,
            f.matrix,
            cands,
            6,
            name.as_ptr(),
            Some(fake_measure),
            (&mut calls as *mut Calls).cast(),
            result.as_mut_ptr(),
            ms.as_mut_ptr(),
            ms.len(),
            &mut n,
        )
    });
    let result = unsafe { result.assume_init() };
    assert_eq!(n, want.measurements.len());
    assert_eq!(calls.len(), n);
    measurements_equal_model_tune(&ms, &calls, &want, &want_cands);
    assert!(calls.last().unwrap().2 || want.ranking.default_position < 6);
    result_equals_model_tune(&result, n, &want, &want_cands);

    // The measurement array is checked before anything runs; NULL skips it.
    calls.clear();
    measurement_capacity_is_checked_before_measuring(&f, cands, &mut calls, &mut ms);
    ok(unsafe { dashrank_space_candidates_free(&mut cands) });
    ok(unsafe { dashrank_space_free(&mut s) });
}

/// `Model::tune` of the top 6 of the same space, failing every third measurement as
/// `fake_measure` does.
fn model_tune(f: &Fixture) -> (SpaceCandidates<AnyConfig>, TuneResult) {
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
    (want_cands, want)
}

/// The C measurements and callback calls are `want`'s, in order: index, time or failure,
/// default flag and rendered toolchain text.
fn measurements_equal_model_tune(
    ms: &[dashrank_measurement],
    calls: &Calls,
    want: &TuneResult,
    want_cands: &SpaceCandidates<AnyConfig>,
) {
    for ((got, call), m) in ms.iter().zip(calls).zip(&want.measurements) {
        assert_eq!((got.ranked.index, call.0), (m.index, m.index));
        assert_eq!((got.ok, got.ms.is_nan()), (m.ms.is_some(), m.ms.is_none()));
        if let Some(t) = m.ms {
            assert_eq!(got.ms, t);
        }
        assert_eq!(call.2, m.is_default);
        assert_eq!(call.1, want_cands.render(m.index, "band").unwrap());
    }
}

/// The C summary is `want`'s: best, default, counts (some failed), speedup.
fn result_equals_model_tune(
    result: &dashrank_tune_result,
    n: usize,
    want: &TuneResult,
    want_cands: &SpaceCandidates<AnyConfig>,
) {
    let best = want.best.as_ref().unwrap();
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
}

/// Too short a measurement array fails before any measurement; a NULL array is skipped; a
/// NULL callback is refused.
fn measurement_capacity_is_checked_before_measuring(
    f: &Fixture,
    cands: *const dashrank_space_candidates,
    calls: &mut Calls,
    ms: &mut [dashrank_measurement],
) {
    let mut need = 0;
    let mut r2 = std::mem::MaybeUninit::<dashrank_tune_result>::zeroed();
    let user: *mut c_void = (calls as *mut Calls).cast();
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
}

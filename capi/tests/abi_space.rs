//! The C ABI of whole schedule spaces (`dashrank_space_*`): enumerate a toolchain's space for
//! a matrix with per-candidate statuses, rank it with the default always reported, render
//! candidates in the toolchain's form; every result equals the Rust API's, and every misuse
//! returns its code. Tuning through a C callback is in `abi_tune.rs`.
//!
//! `scripts/ffi.sh` runs the same calls from C (`ffi-examples/c/taco_driver.c`,
//! `space_test.c`) and C++.

mod abi_support;

use std::ffi::{c_char, CStr};
use std::ptr::{null, null_mut};

use abi_support::*;
use dashrank::model::MatrixEmbedding;
use dashrank::schedule::space::{AnyConfig, AnySpace, MatrixShape, SpaceOptions, TacoSpace};
use dashrank::workflow;
use dashrank::{CostModel, Kernel, SpaceCandidates};
use dashrank_capi::*;

#[test]
fn spaces_are_made_by_target_and_kernel_or_name() {
    let targets = [
        (DASHRANK_TARGET_CPU_TACO, "taco"),
        (DASHRANK_TARGET_GPU_SPARSETIR, "sparsetir"),
        (DASHRANK_TARGET_SPADE, "spade"),
    ];
    let kernels = [
        (DASHRANK_KERNEL_SPMM, "spmm"),
        (DASHRANK_KERNEL_SDDMM, "sddmm"),
        (DASHRANK_KERNEL_SPMV, "spmv"),
    ];
    for (t, tn) in targets {
        for (k, kn) in kernels {
            let mut s = null_mut();
            let st = unsafe { dashrank_space_new(t, k, 64, &mut s) };
            if tn != "taco" && kn == "spmv" {
                expect(
                    st,
                    dashrank_status::UnsupportedKernel,
                    "has no schedule space",
                );
                assert!(s.is_null());
                continue;
            }
            ok(st);
            let name = read(|b, l, n| unsafe { dashrank_space_name(s, b, l, n) });
            assert_eq!(name, format!("{tn}-{kn}"));
            ok(unsafe { dashrank_space_free(&mut s) });
            assert!(s.is_null());
            ok(unsafe { dashrank_space_free(&mut s) }); // NULL slot: nothing happens
        }
    }
    let mut s = null_mut();
    expect(
        unsafe { dashrank_space_new(7, DASHRANK_KERNEL_SPMM, 0, &mut s) },
        dashrank_status::InvalidArgument,
        "DASHRANK_TARGET_",
    );
    expect(
        unsafe { dashrank_space_new(DASHRANK_TARGET_SPADE, 9, 0, &mut s) },
        dashrank_status::InvalidArgument,
        "DASHRANK_KERNEL_",
    );
    expect(
        unsafe { dashrank_space_from_name(c("spade-spmv").as_ptr(), 0, &mut s) },
        dashrank_status::UnsupportedKernel,
        "it supports: spmm, sddmm",
    );
    expect(
        unsafe { dashrank_space_from_name(c("taco-spgemm").as_ptr(), 0, &mut s) },
        dashrank_status::InvalidArgument,
        "sparsetir-sddmm",
    );
    expect(
        unsafe { dashrank_space_from_name(null(), 0, &mut s) },
        dashrank_status::NullArgument,
        "name",
    );
    expect(
        unsafe { dashrank_space_new(0, 0, 0, null_mut()) },
        dashrank_status::NullArgument,
        "out",
    );
    expect(
        unsafe { dashrank_space_free(null_mut()) },
        dashrank_status::NullArgument,
        "space",
    );
    assert!(s.is_null());
}

#[test]
fn prepared_spaces_equal_the_rust_workflow() {
    let f = Fixture::new("tiny-cognate");
    let shape = MatrixShape::from(&f.pattern);
    let (mut r, mut cc, mut z) = (0, 0, 0);
    ok(unsafe { dashrank_matrix_shape(f.matrix, &mut r, &mut cc, &mut z) });
    assert_eq!(MatrixShape::new(r, cc, z), shape);
    let rust_matrix = f.rust.embed_matrix(&f.pattern).unwrap();
    let mut cs = null_mut();
    ok(unsafe { dashrank_space_new_taco(DASHRANK_KERNEL_SPMM, 4, 4, &mut cs) });
    let named = |name: &str| {
        (
            space(name),
            AnySpace::from_name(name, &SpaceOptions::default()).unwrap(),
        )
    };
    let spaces = [
        (
            cs,
            AnySpace::from(TacoSpace::waco_up_to(Kernel::SpMM, 4, 4)),
        ),
        named("spade-spmm"),
        named("spade-sddmm"),
        named("sparsetir-spmm"),
    ];
    for (mut s, rust_space) in spaces {
        let mut cands = f.prepare(s);
        let want = workflow::prepare(&f.rust, None, &rust_space, &shape).unwrap();
        let (mut len, mut ranked, mut default) = (0, 0, usize::MAX);
        ok(unsafe { dashrank_space_candidates_len(cands, &mut len, &mut ranked) });
        ok(unsafe { dashrank_space_candidates_default(cands, &mut default) });
        assert_eq!(
            (len, ranked, default),
            (want.len(), want.ranked_count(), want.default_index())
        );
        let duplicates = (0..len)
            .step_by((len / 300).max(1))
            .chain([default])
            .filter(|&i| candidate_equals_the_rust_one(cands, &want, i, default))
            .count();
        if rust_space.entry().name.starts_with("spade") {
            assert!(
                duplicates > 0,
                "3000 columns: 16384/65536 panels duplicate all columns"
            );
        }
        top_k_equals_top_k_with_default(&f, &rust_matrix, cands, &want);
        ok(unsafe { dashrank_space_candidates_free(&mut cands) });
        ok(unsafe { dashrank_space_free(&mut s) });
        assert!(cands.is_null() && s.is_null());
    }
}

/// Candidate `i`'s state, default flag, message, line and rendered text equal `want`'s;
/// returns whether it is a duplicate (of the candidate `want` names).
fn candidate_equals_the_rust_one(
    cands: *const dashrank_space_candidates,
    want: &SpaceCandidates<AnyConfig>,
    i: usize,
    default: usize,
) -> bool {
    let mut info = dashrank_candidate_info {
        state: 99,
        duplicate_of: 0,
        is_default: false,
    };
    ok(unsafe { dashrank_space_candidates_info(cands, i, &mut info) });
    let status = want.status(i).unwrap();
    let mut duplicate = false;
    let state = match status {
        dashrank::rank::CandidateStatus::Valid => DASHRANK_CANDIDATE_VALID,
        dashrank::rank::CandidateStatus::Duplicate { of } => {
            assert_eq!(info.duplicate_of, of);
            duplicate = true;
            DASHRANK_CANDIDATE_DUPLICATE
        }
        dashrank::rank::CandidateStatus::InvalidForMatrix { .. } => {
            DASHRANK_CANDIDATE_INVALID_FOR_MATRIX
        }
        dashrank::rank::CandidateStatus::InvalidSchedule(_) => DASHRANK_CANDIDATE_INVALID_SCHEDULE,
    };
    assert_eq!(info.state, state);
    assert_eq!(info.is_default, i == default);
    let msg = read(|b, l, n| unsafe { dashrank_space_candidates_message(cands, i, b, l, n) });
    assert_eq!(msg, workflow::status_text(status));
    let line = read(|b, l, n| unsafe { dashrank_space_candidates_line(cands, i, b, l, n) });
    assert_eq!(line, want.line(i).unwrap());
    let name = c("band");
    let text = read(|b, l, n| unsafe {
        dashrank_space_candidates_render(cands, i, name.as_ptr(), b, l, n)
    });
    assert_eq!(text, want.render(i, "band").unwrap());
    duplicate
}

/// Ranking: equal to `top_k_with_default`, the default always reported; a short buffer
/// reports the size needed.
fn top_k_equals_top_k_with_default(
    f: &Fixture,
    rust_matrix: &MatrixEmbedding,
    cands: *const dashrank_space_candidates,
    want: &SpaceCandidates<AnyConfig>,
) {
    let top = f.rust.top_k_with_default(rust_matrix, want, 5).unwrap();
    let mut out = vec![
        dashrank_ranked {
            index: 0,
            score: 0.0,
            rank: 0,
            is_default: false
        };
        6
    ];
    let mut n = 0;
    ok(unsafe {
        dashrank_space_top_k(
            f.model,
            f.matrix,
            cands,
            5,
            out.as_mut_ptr(),
            out.len(),
            &mut n,
        )
    });
    assert_eq!(n, top.entries.len());
    for (got, e) in out.iter().zip(&top.entries) {
        assert_eq!((got.index, got.is_default), (e.index, e.is_default));
        assert_eq!(got.score.to_bits(), e.score.to_bits());
        assert_eq!(got.rank, e.rank.map_or(0, |r| r + 1));
    }
    assert_eq!(out[..n].iter().filter(|e| e.is_default).count(), 1);
    // A short buffer reports the size needed and writes nothing.
    let mut short = [out[0]; 1];
    let mut need = 0;
    expect(
        unsafe {
            dashrank_space_top_k(
                f.model,
                f.matrix,
                cands,
                5,
                short.as_mut_ptr(),
                1,
                &mut need,
            )
        },
        dashrank_status::InsufficientSize,
        "needed",
    );
    assert_eq!(need, n);
}

#[test]
fn space_misuse_returns_codes() {
    let f = Fixture::new("tiny-cognate");
    let mut s = space("spade-spmm");
    preparing_with_a_wrong_head_or_null_is_refused(&f, s);
    let mut cands = f.prepare(s);
    candidate_misuse_returns_codes(cands);
    let mut n = 0;
    expect(
        unsafe { dashrank_space_top_k(f.model, f.matrix, cands, 3, null_mut(), 4, &mut n) },
        dashrank_status::NullArgument,
        "out",
    );
    // Ranking with another model's matrix embedding is refused.
    let other = Fixture::new("tiny-dash");
    let mut one = [dashrank_ranked {
        index: 0,
        score: 0.0,
        rank: 0,
        is_default: false,
    }; 4];
    expect(
        unsafe {
            dashrank_space_top_k(f.model, other.matrix, cands, 3, one.as_mut_ptr(), 4, &mut n)
        },
        dashrank_status::InvalidArgument,
        "different model",
    );
    ok(unsafe { dashrank_space_candidates_free(&mut cands) });
    ok(unsafe { dashrank_space_free(&mut s) });
}

/// A head for another target, an unknown head, a missing head for the space; each NULL
/// argument. Nothing is written.
fn preparing_with_a_wrong_head_or_null_is_refused(f: &Fixture, s: *const dashrank_space) {
    use dashrank_status as S;
    let mut out = null_mut();
    let po: *mut *mut _ = &mut out;
    let mut sddmm_taco = space("taco-sddmm");
    let (model, matrix, taco) = (f.model, f.matrix, sddmm_taco);
    let (taco_head, none_head) = (c("cpu-taco/spmm"), c("spade/none"));
    let calls: [(S, &str, &dyn Fn() -> S); 7] = [
        (S::InvalidArgument, "not spade spmm", &|| unsafe {
            dashrank_space_prepare(model, taco_head.as_ptr(), s, matrix, po)
        }),
        (S::UnknownHead, "spade/none", &|| unsafe {
            dashrank_space_prepare(model, none_head.as_ptr(), s, matrix, po)
        }),
        (
            S::InvalidArgument,
            "no head for cpu-taco sddmm",
            &|| unsafe { dashrank_space_prepare(model, null(), taco, matrix, po) },
        ),
        (S::NullArgument, "model", &|| unsafe {
            dashrank_space_prepare(null(), null(), s, matrix, po)
        }),
        (S::NullArgument, "space", &|| unsafe {
            dashrank_space_prepare(model, null(), null(), matrix, po)
        }),
        (S::NullArgument, "matrix", &|| unsafe {
            dashrank_space_prepare(model, null(), s, null(), po)
        }),
        (S::NullArgument, "out", &|| unsafe {
            dashrank_space_prepare(model, null(), s, matrix, null_mut())
        }),
    ];
    for (want, needle, call) in calls {
        expect(call(), want, needle);
    }
    assert!(out.is_null());
    ok(unsafe { dashrank_space_free(&mut sddmm_taco) });
}

/// Indices past the end are out of range; a truncated render is still NUL-terminated; a
/// matrix name must be UTF-8.
fn candidate_misuse_returns_codes(cands: *const dashrank_space_candidates) {
    let mut info = dashrank_candidate_info {
        state: 0,
        duplicate_of: 0,
        is_default: false,
    };
    expect(
        unsafe { dashrank_space_candidates_info(cands, 256, &mut info) },
        dashrank_status::IndexOutOfRange,
        "256",
    );
    let mut buf = [0 as c_char; 8];
    expect(
        unsafe {
            dashrank_space_candidates_render(cands, 9999, null(), buf.as_mut_ptr(), 8, null_mut())
        },
        dashrank_status::IndexOutOfRange,
        "9999",
    );
    expect(
        unsafe {
            dashrank_space_candidates_render(cands, 0, null(), buf.as_mut_ptr(), 8, null_mut())
        },
        dashrank_status::InsufficientSize,
        "too small",
    );
    assert_eq!(
        unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap(),
        "matrix,"
    );
    let bad_utf8 = [0xffu8 as c_char, 0];
    expect(
        unsafe {
            dashrank_space_candidates_render(
                cands,
                0,
                bad_utf8.as_ptr(),
                buf.as_mut_ptr(),
                8,
                null_mut(),
            )
        },
        dashrank_status::InvalidUtf8,
        "matrix_name",
    );
}

#[test]
fn load_options_default_to_the_native_engine_of_every_build() {
    let mut opts = std::mem::MaybeUninit::<dashrank_load_options>::zeroed();
    ok(unsafe { dashrank_load_options_init(opts.as_mut_ptr()) });
    let mut opts = unsafe { opts.assume_init() };
    assert_eq!(opts.backend, DASHRANK_BACKEND_NATIVE);
    let path = c(fixture("tiny-cognate").to_str().unwrap());
    let mut model = null_mut();
    ok(unsafe { dashrank_model_load(path.as_ptr(), &opts, &mut model) });
    let mut desc = [0 as c_char; 256];
    ok(unsafe { dashrank_model_describe(model, desc.as_mut_ptr(), desc.len(), null_mut()) });
    let desc = unsafe { CStr::from_ptr(desc.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned();
    assert!(desc.contains("backend native"), "{desc}");
    ok(unsafe { dashrank_model_release(&mut model) });
    if !cfg!(feature = "tract") {
        opts.backend = DASHRANK_BACKEND_TRACT;
        expect(
            unsafe { dashrank_model_load(path.as_ptr(), &opts, &mut model) },
            dashrank_status::BackendUnavailable,
            "tract",
        );
        assert!(model.is_null());
    }
}

//! The C ABI, called directly through its `extern "C"` functions: every status code is
//! reached, misuse returns codes, results equal the Rust API's, the header matches the crate.
//!
//! The C programs in `ffi-examples/` (run by `scripts/ffi.sh`) cover the same ground from C,
//! under valgrind and AddressSanitizer.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

use dashrank::{CostModel, CsrPattern, LoadOptions, Model};
use dashrank_capi::*;

#[allow(dead_code)]
#[path = "../../fuzz/src/onnx_write.rs"]
mod onnx_write;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/data/fixtures").join(name)
}

fn bad(name: &str) -> PathBuf {
    repo().join("tests/data/bad").join(name)
}

fn c(s: impl AsRef<str>) -> CString {
    CString::new(s.as_ref()).unwrap()
}

fn cpath(p: &Path) -> CString {
    c(p.to_str().unwrap())
}

fn last_error() -> String {
    let mut buf = [0 as c_char; 1024];
    let st = unsafe { dashrank_last_error_message(buf.as_mut_ptr(), buf.len(), null_mut()) };
    assert_eq!(st, dashrank_status::Ok);
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap()
        .to_string()
}

/// Asserts `status`, that the thread's last error agrees, and that its message contains
/// `needle`.
fn expect(status: dashrank_status, want: dashrank_status, needle: &str) {
    assert_eq!(status, want, "last error: {}", last_error());
    assert_eq!(dashrank_last_error_status(), want);
    let msg = last_error();
    assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
}

fn load(dir: &Path) -> *mut dashrank_model {
    let mut m = null_mut();
    let st = unsafe { dashrank_model_load(cpath(dir).as_ptr(), null(), &mut m) };
    assert_eq!(st, dashrank_status::Ok, "{}", last_error());
    assert!(!m.is_null());
    m
}

fn load_status(dir: &Path) -> dashrank_status {
    let mut m = null_mut();
    let st = unsafe { dashrank_model_load(cpath(dir).as_ptr(), null(), &mut m) };
    if st == dashrank_status::Ok {
        unsafe { dashrank_model_release(&mut m) };
    } else {
        assert!(m.is_null(), "out must be NULL on failure");
    }
    st
}

fn golden_lines() -> Vec<String> {
    let text = std::fs::read_to_string(fixture("tiny-waco-spmm/golden.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let heads = v["heads"].as_object().unwrap();
    let (_, head) = heads.iter().next().unwrap();
    head["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["line"].as_str().unwrap().to_string())
        .collect()
}

fn prepare(model: *const dashrank_model, head: &str, lines: &[String]) -> *mut dashrank_candidates {
    let owned: Vec<CString> = lines.iter().map(c).collect();
    let ptrs: Vec<*const c_char> = owned.iter().map(|s| s.as_ptr()).collect();
    let mut out = null_mut();
    let st = unsafe {
        dashrank_candidates_prepare(model, c(head).as_ptr(), ptrs.as_ptr(), ptrs.len(), &mut out)
    };
    assert_eq!(st, dashrank_status::Ok, "{}", last_error());
    out
}

fn head_name(model: *const dashrank_model, i: usize) -> String {
    let mut buf = [0 as c_char; 128];
    let st = unsafe { dashrank_model_head_name(model, i, buf.as_mut_ptr(), buf.len(), null_mut()) };
    assert_eq!(st, dashrank_status::Ok);
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap()
        .to_string()
}

/// A small pattern: tridiagonal n×n.
fn tridiag(n: usize) -> (Vec<i64>, Vec<i64>) {
    let mut rp = vec![0i64];
    let mut ci = Vec::new();
    for r in 0..n {
        for cc in r.saturating_sub(1)..(r + 2).min(n) {
            ci.push(cc as i64);
        }
        rp.push(ci.len() as i64);
    }
    (rp, ci)
}

fn embed_i64(
    model: *const dashrank_model,
    n: usize,
    rp: &[i64],
    ci: &[i64],
) -> *mut dashrank_matrix {
    let mut m = null_mut();
    let st = unsafe {
        dashrank_matrix_embed_csr_i64(model, n, n, rp.as_ptr(), ci.as_ptr(), ci.len(), &mut m)
    };
    assert_eq!(st, dashrank_status::Ok, "{}", last_error());
    m
}

#[test]
fn status_codes_are_stable_and_rendered() {
    // Never renumber: this table is the ABI.
    let table: &[(dashrank_status, u32)] = &[
        (dashrank_status::Ok, 0),
        (dashrank_status::Pattern, 100),
        (dashrank_status::Io, 101),
        (dashrank_status::Bundle, 200),
        (dashrank_status::UnsupportedVersion, 201),
        (dashrank_status::UnknownHead, 202),
        (dashrank_status::LoadBudget, 203),
        (dashrank_status::Schedule, 300),
        (dashrank_status::UnsupportedKernel, 301),
        (dashrank_status::LayoutTooLarge, 302),
        (dashrank_status::Executor, 400),
        (dashrank_status::BackendUnavailable, 401),
        (dashrank_status::Featurizer, 402),
        (dashrank_status::NullArgument, 500),
        (dashrank_status::InsufficientSize, 501),
        (dashrank_status::InvalidArgument, 502),
        (dashrank_status::InvalidUtf8, 503),
        (dashrank_status::IndexOutOfRange, 504),
        (dashrank_status::AbiMismatch, 505),
        (dashrank_status::LoggerUnavailable, 506),
        (dashrank_status::Panic, 900),
        (dashrank_status::Internal, 901),
    ];
    assert_eq!(dashrank_status::all().len(), table.len());
    for &(s, code) in table {
        assert_eq!(s as u32, code);
        assert_eq!(dashrank_status::from_code(code), Some(s));
        let mut needed = 0usize;
        let mut buf = [0 as c_char; 128];
        let st = unsafe { dashrank_status_message(code, buf.as_mut_ptr(), buf.len(), &mut needed) };
        assert_eq!(st, dashrank_status::Ok);
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert_eq!(text, s.message());
        assert_eq!(needed, text.len() + 1);
        // Size query with a NULL buffer, then a short buffer (truncated, terminated).
        let st = unsafe { dashrank_status_message(code, null_mut(), 0, &mut needed) };
        assert_eq!(st, dashrank_status::InsufficientSize);
        assert_eq!(needed, text.len() + 1);
        let mut short = [1 as c_char; 2];
        let st = unsafe { dashrank_status_message(code, short.as_mut_ptr(), 2, null_mut()) };
        assert_eq!(st, dashrank_status::InsufficientSize);
        assert_eq!(short[1], 0);
    }
    let mut buf = [0 as c_char; 64];
    let st = unsafe { dashrank_status_message(7, buf.as_mut_ptr(), buf.len(), null_mut()) };
    assert_eq!(st, dashrank_status::InvalidArgument);
    assert_eq!(
        unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap(),
        "unknown status 7"
    );
    // NULL buffer with a non-zero length is misuse.
    let st = unsafe { dashrank_status_message(0, null_mut(), 8, null_mut()) };
    assert_eq!(st, dashrank_status::NullArgument);
}

#[test]
fn header_versions_match_the_crate() {
    let header = std::fs::read_to_string(repo().join("include/dashrank.h")).unwrap();
    let define = |name: &str| -> u32 {
        let prefix = format!("#define {name} ");
        header
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{name} missing from the header"))
            .trim()
            .parse()
            .unwrap()
    };
    let v = unsafe { CStr::from_ptr(dashrank_version()) }
        .to_str()
        .unwrap();
    assert_eq!(v, env!("CARGO_PKG_VERSION"));
    assert_eq!(
        format!(
            "{}.{}.{}",
            define("DASHRANK_VERSION_MAJOR"),
            define("DASHRANK_VERSION_MINOR"),
            define("DASHRANK_VERSION_PATCH")
        ),
        v
    );
    assert_eq!(define("DASHRANK_ABI_VERSION"), dashrank_abi_version());
    assert_eq!(DASHRANK_ABI_VERSION, dashrank_abi_version());
    // cargo-c writes the SONAME libdashrank.so.<major> of [package.metadata.capi.library]'s
    // version: the major must be the ABI version (scripts/ffi.sh reads the installed SONAME).
    let manifest = std::fs::read_to_string(repo().join("capi/Cargo.toml")).unwrap();
    let library = manifest
        .split("[package.metadata.capi.library]")
        .nth(1)
        .expect("capi/Cargo.toml has [package.metadata.capi.library]");
    let version = library
        .lines()
        .find_map(|l| l.trim().strip_prefix("version = \""))
        .expect("[package.metadata.capi.library] has a version");
    assert_eq!(
        version.split('.').next(),
        Some(DASHRANK_ABI_VERSION.to_string().as_str()),
        "the C library's version {version} in capi/Cargo.toml does not start with the ABI version"
    );
    // Every status is in the header.
    for s in dashrank_status::all() {
        assert!(
            header.contains(&format!(" = {},", *s as u32)),
            "{s:?} missing from the header"
        );
    }
}

#[test]
fn results_equal_the_rust_api() {
    let dir = fixture("tiny-waco-spmm");
    let model = load(&dir);
    let head = check_head_metadata(model);
    let lines = golden_lines();
    let cands = prepare(model, &head, &lines);
    let (mut len, mut valid) = (0usize, 0usize);
    assert_eq!(
        unsafe { dashrank_candidates_len(cands, &mut len, &mut valid) },
        dashrank_status::Ok
    );
    assert_eq!(len, lines.len());

    let (rp, ci) = tridiag(30);
    let matrix = embed_i64(model, 30, &rp, &ci);
    // The i32 route gives the same embedding (same scores).
    let matrix32 = embed_i32(model, 30, &rp, &ci);
    let scores = scores_via_c(model, matrix, cands, len, true);
    let scores32 = scores_via_c(model, matrix32, cands, len, false);

    // Same through the Rust API.
    let rust = Model::load(&dir, &LoadOptions::default()).unwrap();
    let set = rust.prepare_candidates(&head, &lines).unwrap();
    let pattern = CsrPattern::new(
        30,
        30,
        rp.iter().map(|&x| x as usize).collect(),
        ci.iter().map(|&x| x as u32).collect(),
    )
    .unwrap();
    let emb = rust.embed_matrix(&pattern).unwrap();
    let mut expected = vec![0f32; len];
    rust.score_into(&emb, &set, &mut expected).unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&scores), bits(&expected));
    assert_eq!(bits(&scores32), bits(&expected));
    top_k_equals_the_rust_top_k(model, matrix, cands, &rust.top_k(&emb, &set, 3).unwrap());

    // A matrix file, read by the library (.csr).
    let mut from_file = null_mut();
    let st = unsafe {
        dashrank_matrix_embed_file(
            model,
            cpath(&bad("good-small.csr")).as_ptr(),
            &mut from_file,
        )
    };
    assert_eq!(st, dashrank_status::Ok, "{}", last_error());
    destroy_nulls_handles_and_release_counts_references(
        model,
        [from_file, matrix, matrix32],
        cands,
    );
}

/// One head, lower is better, and a description longer than 5 bytes; returns the head's name.
fn check_head_metadata(model: *const dashrank_model) -> String {
    let mut count = 0usize;
    assert_eq!(
        unsafe { dashrank_model_head_count(model, &mut count) },
        dashrank_status::Ok
    );
    assert_eq!(count, 1);
    let head = head_name(model, 0);
    let mut polarity = 9u32;
    assert_eq!(
        unsafe { dashrank_model_head_polarity(model, 0, &mut polarity) },
        dashrank_status::Ok
    );
    assert_eq!(polarity, DASHRANK_POLARITY_LOWER_IS_BETTER);
    let mut needed = 0;
    assert_eq!(
        unsafe { dashrank_model_describe(model, null_mut(), 0, &mut needed) },
        dashrank_status::InsufficientSize
    );
    assert!(needed > 5);
    head
}

/// `embed_i64` through `dashrank_matrix_embed_csr_i32`.
fn embed_i32(
    model: *const dashrank_model,
    n: usize,
    rp: &[i64],
    ci: &[i64],
) -> *mut dashrank_matrix {
    let rp32: Vec<i32> = rp.iter().map(|&x| x as i32).collect();
    let ci32: Vec<i32> = ci.iter().map(|&x| x as i32).collect();
    let mut m = null_mut();
    assert_eq!(
        unsafe {
            dashrank_matrix_embed_csr_i32(
                model,
                n,
                n,
                rp32.as_ptr(),
                ci32.as_ptr(),
                ci32.len(),
                &mut m,
            )
        },
        dashrank_status::Ok
    );
    m
}

/// `dashrank_score` into a buffer of `len`; with `count_written`, asserts all `len` were
/// written, otherwise passes NULL for the count.
fn scores_via_c(
    model: *const dashrank_model,
    matrix: *const dashrank_matrix,
    cands: *const dashrank_candidates,
    len: usize,
    count_written: bool,
) -> Vec<f32> {
    let mut scores = vec![0f32; len];
    let mut n = 0;
    let written = if count_written { &mut n } else { null_mut() };
    assert_eq!(
        unsafe { dashrank_score(model, matrix, cands, scores.as_mut_ptr(), len, written) },
        dashrank_status::Ok
    );
    if count_written {
        assert_eq!(n, len);
    }
    scores
}

/// `dashrank_top_k` of 3 gives `best`'s indices and score bits; the scores are optional.
fn top_k_equals_the_rust_top_k(
    model: *const dashrank_model,
    matrix: *const dashrank_matrix,
    cands: *const dashrank_candidates,
    best: &[dashrank::Ranked],
) {
    let mut idx = [0u32; 3];
    let mut top = [0f32; 3];
    let mut written = 0;
    assert_eq!(
        unsafe {
            dashrank_top_k(
                model,
                matrix,
                cands,
                3,
                idx.as_mut_ptr(),
                top.as_mut_ptr(),
                3,
                &mut written,
            )
        },
        dashrank_status::Ok
    );
    assert_eq!(written, best.len());
    for (i, r) in best.iter().enumerate() {
        assert_eq!(idx[i] as usize, r.index);
        assert_eq!(top[i].to_bits(), r.score.to_bits());
    }
    // Scores are optional.
    assert_eq!(
        unsafe {
            dashrank_top_k(
                model,
                matrix,
                cands,
                3,
                idx.as_mut_ptr(),
                null_mut(),
                3,
                null_mut(),
            )
        },
        dashrank_status::Ok
    );
}

/// Destroy functions null the handle; a second destroy is a no-op. Reference counting: two
/// references, two releases.
fn destroy_nulls_handles_and_release_counts_references(
    mut model: *mut dashrank_model,
    matrices: [*mut dashrank_matrix; 3],
    mut cands: *mut dashrank_candidates,
) {
    unsafe {
        for mut matrix in matrices {
            assert_eq!(dashrank_matrix_free(&mut matrix), dashrank_status::Ok);
            assert!(matrix.is_null());
            assert_eq!(dashrank_matrix_free(&mut matrix), dashrank_status::Ok);
        }
        assert_eq!(dashrank_candidates_free(&mut cands), dashrank_status::Ok);
        assert!(cands.is_null());
        let mut second = dashrank_model_retain(model);
        assert_eq!(second, model);
        assert_eq!(dashrank_model_release(&mut model), dashrank_status::Ok);
        assert!(model.is_null());
        let mut count = 0usize;
        assert_eq!(
            dashrank_model_head_count(second, &mut count),
            dashrank_status::Ok
        );
        assert_eq!(dashrank_model_release(&mut second), dashrank_status::Ok);
        assert!(second.is_null());
        assert_eq!(dashrank_model_release(&mut second), dashrank_status::Ok);
        assert!(dashrank_model_retain(null()).is_null());
    }
}

/// What the misuse steps call with: the tiny model, candidates of its golden lines and a
/// tridiagonal 12×12 matrix.
struct Misuse {
    model: *mut dashrank_model,
    head: String,
    lines: Vec<String>,
    cands: *mut dashrank_candidates,
    rp: Vec<i64>,
    ci: Vec<i64>,
    matrix: *mut dashrank_matrix,
}

impl Misuse {
    fn new() -> Self {
        let model = load(&fixture("tiny-waco-spmm"));
        let head = head_name(model, 0);
        let lines = golden_lines();
        let cands = prepare(model, &head, &lines);
        let (rp, ci) = tridiag(12);
        let matrix = embed_i64(model, 12, &rp, &ci);
        Self {
            model,
            head,
            lines,
            cands,
            rp,
            ci,
            matrix,
        }
    }

    fn free(mut self) {
        unsafe {
            dashrank_candidates_free(&mut self.cands);
            dashrank_matrix_free(&mut self.matrix);
            dashrank_model_release(&mut self.model);
        }
    }
}

/// A call that must fail, and a text its last error must contain.
type Misused<'a> = (&'a str, &'a dyn Fn() -> dashrank_status);

/// Every call returns `want`, its last error naming what it says.
fn expect_each(want: dashrank_status, calls: &[Misused<'_>]) {
    for (needle, call) in calls {
        expect(call(), want, needle);
    }
}

#[test]
fn every_misuse_returns_its_code() {
    let m = Misuse::new();
    null_arguments_are_refused(&m);
    short_buffers_report_the_size_needed(&m);
    pattern_io_and_bundle_errors_have_their_codes(&m);
    schedule_errors_fail_the_call_or_the_candidate(&m);
    // --- invalid UTF-8
    let bad_utf8 = [0xffu8 as c_char, 0];
    let mut out_c = null_mut();
    expect(
        unsafe { dashrank_candidates_prepare(m.model, bad_utf8.as_ptr(), null(), 0, &mut out_c) },
        dashrank_status::InvalidUtf8,
        "'head'",
    );
    load_options_are_checked();
    a_matrix_from_another_model_is_refused(&m);
    // --- a dense graph with an unknown operator: the native engine does not run it; the
    // tract fallback (when compiled in) cannot build it either.
    let want = if cfg!(feature = "tract") {
        dashrank_status::Executor
    } else {
        dashrank_status::Bundle
    };
    assert_eq!(load_status(&broken_predictor_bundle()), want);
    // --- log level out of range
    expect(
        unsafe { dashrank_set_log_callback(None, null_mut(), 9) },
        dashrank_status::InvalidArgument,
        "max_level",
    );
    // A successful call clears the last error.
    let mut n = 0usize;
    assert_eq!(
        unsafe { dashrank_model_head_count(m.model, &mut n) },
        dashrank_status::Ok
    );
    assert_eq!(dashrank_last_error_status(), dashrank_status::Ok);
    assert_eq!(last_error(), "");
    m.free();
}

/// Each pointer argument, NULL, is named; no handle is written.
fn null_arguments_are_refused(m: &Misuse) {
    let (mut out_m, mut out_x, mut out_c) = (null_mut(), null_mut(), null_mut());
    let (pm, px, pc): (*mut *mut _, *mut *mut _, *mut *mut _) =
        (&mut out_m, &mut out_x, &mut out_c);
    let mut n = 0usize;
    let pn: *mut usize = &mut n;
    let (model, matrix, cands, rp, ci) = (m.model, m.matrix, m.cands, &m.rp, &m.ci);
    let path = cpath(&fixture("tiny-waco-spmm"));
    let head = c(&m.head);
    let one = c("1");
    let with_null = [one.as_ptr(), null()];
    expect_each(
        dashrank_status::NullArgument,
        &[
            ("'path'", &|| unsafe {
                dashrank_model_load(null(), null(), pm)
            }),
            ("'out'", &|| unsafe {
                dashrank_model_load(path.as_ptr(), null(), null_mut())
            }),
            ("'model'", &|| unsafe {
                dashrank_model_head_count(null(), pn)
            }),
            ("'out'", &|| unsafe {
                dashrank_model_head_count(model, null_mut())
            }),
            ("'row_ptr'", &|| unsafe {
                dashrank_matrix_embed_csr_i64(model, 12, 12, null(), ci.as_ptr(), ci.len(), px)
            }),
            ("'col_idx'", &|| unsafe {
                dashrank_matrix_embed_csr_i64(model, 12, 12, rp.as_ptr(), null(), ci.len(), px)
            }),
            ("'lines'", &|| unsafe {
                dashrank_candidates_prepare(model, head.as_ptr(), null(), 2, pc)
            }),
            ("'lines[1]'", &|| unsafe {
                dashrank_candidates_prepare(model, head.as_ptr(), with_null.as_ptr(), 2, pc)
            }),
            ("'matrix'", &|| unsafe {
                dashrank_score(model, null(), cands, null_mut(), 0, null_mut())
            }),
            ("'scores'", &|| unsafe {
                dashrank_score(model, matrix, cands, null_mut(), 5, null_mut())
            }),
            ("'model'", &|| unsafe { dashrank_model_release(null_mut()) }),
            ("'matrix'", &|| unsafe { dashrank_matrix_free(null_mut()) }),
            ("'candidates'", &|| unsafe {
                dashrank_candidates_free(null_mut())
            }),
            ("'options'", &|| unsafe {
                dashrank_load_options_init(null_mut())
            }),
        ],
    );
    assert!(out_m.is_null() && out_x.is_null() && out_c.is_null());
}

/// A short head name, score or index buffer: InsufficientSize and the size needed.
fn short_buffers_report_the_size_needed(m: &Misuse) {
    let mut small = [0 as c_char; 4];
    let mut needed = 0;
    expect(
        unsafe { dashrank_model_head_name(m.model, 0, small.as_mut_ptr(), 4, &mut needed) },
        dashrank_status::InsufficientSize,
        "too small",
    );
    assert_eq!(needed, m.head.len() + 1);
    let mut scores = [0f32; 2];
    let mut n = 0usize;
    expect(
        unsafe { dashrank_score(m.model, m.matrix, m.cands, scores.as_mut_ptr(), 2, &mut n) },
        dashrank_status::InsufficientSize,
        "'scores'",
    );
    assert_eq!(n, m.lines.len());
    let mut idx = [0u32; 1];
    expect(
        unsafe {
            dashrank_top_k(
                m.model,
                m.matrix,
                m.cands,
                4,
                idx.as_mut_ptr(),
                null_mut(),
                1,
                &mut n,
            )
        },
        dashrank_status::InsufficientSize,
        "'indices'",
    );
    assert_eq!(n, 4);
}

/// The pattern, i/o and bundle stages of embedding and loading, each with its code.
fn pattern_io_and_bundle_errors_have_their_codes(m: &Misuse) {
    use dashrank_status as S;
    let mut out_x = null_mut();
    let px: *mut *mut _ = &mut out_x;
    let model = m.model;
    let embed_file =
        |path: &Path| unsafe { dashrank_matrix_embed_file(model, cpath(path).as_ptr(), px) };
    let (dup_rp, dup_ci) = ([0i32, 2], [1i32, 1]);
    let duplicate = || unsafe {
        dashrank_matrix_embed_csr_i32(model, 1, 3, dup_rp.as_ptr(), dup_ci.as_ptr(), 2, px)
    };
    expect(duplicate(), S::Pattern, "duplicate column 1 in row 0");
    let files = [
        (bad("malformed.mtx"), S::Pattern, "line"),
        ("/nonexistent/m.mtx".into(), S::Io, "/nonexistent/m.mtx"),
        ("/nonexistent/m.txt".into(), S::InvalidArgument, "extension"),
    ];
    for (path, want, needle) in files {
        expect(embed_file(&path), want, needle);
    }
    assert!(out_x.is_null());
    let bundles = [
        (repo().join("no-such-bundle"), S::Io, ""),
        (bad("missing-role"), S::Bundle, "dashrank.role"),
        (bad("wrong-format-version"), S::UnsupportedVersion, "99"),
        (bad("unknown-featurizer-op"), S::Featurizer, "SparseGELU"),
    ];
    for (dir, want, needle) in bundles {
        assert_eq!(load_status(&dir), want, "{}", dir.display());
        assert!(last_error().contains(needle), "{}", last_error());
    }
}

/// An unknown head fails the call; an invalid line fails only its candidate; indices past
/// the end are out of range.
fn schedule_errors_fail_the_call_or_the_candidate(m: &Misuse) {
    use dashrank_status as S;
    let mut out_c = null_mut();
    unsafe {
        expect(
            dashrank_candidates_prepare(m.model, c("gpu/nothing").as_ptr(), null(), 0, &mut out_c),
            S::UnknownHead,
            "gpu/nothing",
        );
        let mut mixed = prepare(
            m.model,
            &m.head,
            &[m.lines[0].clone(), "3 8 8 nonsense".into()],
        );
        let mut st = S::Panic;
        assert_eq!(dashrank_candidates_status(mixed, 0, &mut st), S::Ok);
        assert_eq!(st, S::Ok);
        assert_eq!(dashrank_candidates_status(mixed, 1, &mut st), S::Ok);
        assert_eq!(st, S::Schedule);
        let mut why = [0 as c_char; 256];
        assert_eq!(
            dashrank_candidates_message(mixed, 1, why.as_mut_ptr(), why.len(), null_mut()),
            S::Ok
        );
        assert!(CStr::from_ptr(why.as_ptr())
            .to_str()
            .unwrap()
            .contains("invalid schedule #1"));
        expect(
            dashrank_candidates_status(mixed, 2, &mut st),
            S::IndexOutOfRange,
            "candidate index 2",
        );
        expect(
            dashrank_model_head_name(m.model, 5, why.as_mut_ptr(), why.len(), null_mut()),
            S::IndexOutOfRange,
            "head index 5",
        );
        dashrank_candidates_free(&mut mixed);
    }
}

/// Options not initialised, a bad backend, ONNX Runtime without its library or unavailable.
fn load_options_are_checked() {
    use dashrank_status as S;
    let mut out_m = null_mut();
    unsafe {
        let mut opts: dashrank_load_options = std::mem::zeroed();
        let path = cpath(&fixture("tiny-waco-spmm"));
        expect(
            dashrank_model_load(path.as_ptr(), &opts, &mut out_m),
            S::AbiMismatch,
            "abi_version",
        );
        assert_eq!(dashrank_load_options_init(&mut opts), S::Ok);
        opts.backend = 7;
        expect(
            dashrank_model_load(path.as_ptr(), &opts, &mut out_m),
            S::InvalidArgument,
            "backend 7",
        );
        opts.backend = DASHRANK_BACKEND_ONNXRUNTIME;
        expect(
            dashrank_model_load(path.as_ptr(), &opts, &mut out_m),
            S::NullArgument,
            "onnxruntime_library",
        );
        let lib = c("/nonexistent/libonnxruntime.so");
        opts.onnxruntime_library = lib.as_ptr();
        // This process already runs tract (the model loaded first), so ONNX Runtime is
        // unavailable.
        expect(
            dashrank_model_load(path.as_ptr(), &opts, &mut out_m),
            S::BackendUnavailable,
            "onnxruntime",
        );
    }
    assert!(out_m.is_null());
}

/// Scoring with a matrix embedded by another model is refused.
fn a_matrix_from_another_model_is_refused(m: &Misuse) {
    let mut other = load(&fixture("tiny-waco-fp16"));
    let mut foreign = embed_i64(other, 12, &m.rp, &m.ci);
    let mut s = vec![0f32; m.lines.len()];
    unsafe {
        expect(
            dashrank_score(
                m.model,
                foreign,
                m.cands,
                s.as_mut_ptr(),
                s.len(),
                null_mut(),
            ),
            dashrank_status::InvalidArgument,
            "different model",
        );
        dashrank_matrix_free(&mut foreign);
        dashrank_model_release(&mut other);
    }
}

/// A copy of the tiny fixture whose predictor uses an op no backend knows (`Rxlu`).
fn broken_predictor_bundle() -> PathBuf {
    let src = fixture("tiny-waco-spmm");
    let dst = std::env::temp_dir().join(format!("dashrank-abi-broken-{}", std::process::id()));
    std::fs::create_dir_all(&dst).unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) != Some("onnx") {
            continue;
        }
        let mut bytes = std::fs::read(&p).unwrap();
        if p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .contains("predictor")
        {
            let mut i = 0;
            while i + 4 <= bytes.len() {
                if &bytes[i..i + 4] == b"Relu" {
                    bytes[i + 1] = b'x';
                }
                i += 1;
            }
        }
        std::fs::write(dst.join(p.file_name().unwrap()), bytes).unwrap();
    }
    // The edit is deliberate: vouch for it in the manifest (docs/bundle-format.md §7.2, what
    // `python -m dashrank_onnx.manifest DIR --write` does), so that loading reaches the executor.
    restamp(&dst);
    dst
}

/// A copy of the tiny fixture whose predictor concatenates a 128-wide value 512 times before
/// a ReLU (a 65 536-wide identity when compiled), manifest re-stamped.
fn hostile_predictor_bundle() -> PathBuf {
    use onnx_write::{Attr, Graph, Node};
    let src = fixture("tiny-waco-spmm");
    let dst = std::env::temp_dir().join(format!("dashrank-abi-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dst).unwrap();
    let mut g = Graph {
        inputs: vec!["matrix_embedding".into(), "schedule_embedding".into()],
        output: "score".into(),
        ..Graph::default()
    };
    g.floats("w", &[128, 8], vec![0.5; 1024])
        .floats("w1", &[1, 65536], vec![0.5; 65536])
        .node(Node::new("Gemm", &["matrix_embedding", "w"], "x").attr(Attr::Int("transB", 1)))
        .node(Node::new("Concat", &["x"; 512], "c").attr(Attr::Int("axis", 1)))
        .node(Node::new("Relu", &["c"], "r"))
        .node(Node::new("Gemm", &["r", "w1"], "score").attr(Attr::Int("transB", 1)));
    for entry in std::fs::read_dir(&src).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) != Some("onnx") {
            continue;
        }
        let mut bytes = std::fs::read(&p).unwrap();
        if p.to_string_lossy().contains("predictor") {
            bytes = onnx_write::replace_graph(&bytes, &g);
        }
        std::fs::write(dst.join(p.file_name().unwrap()), bytes).unwrap();
    }
    restamp(&dst);
    dst
}

/// Rewrites `dir/manifest.json` for its `.onnx` files as they are.
fn restamp(dst: &Path) {
    let mut files = serde_json::Map::new();
    for entry in std::fs::read_dir(dst).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) == Some("onnx") {
            let bytes = std::fs::read(&p).unwrap();
            let sha: String = <sha2::Sha256 as sha2::Digest>::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            files.insert(
                name,
                serde_json::json!({"bytes": bytes.len(), "sha256": sha}),
            );
        }
    }
    let manifest = serde_json::json!({"format": "dashrank-manifest", "version": 1,
                                      "algorithm": "sha256", "files": files});
    std::fs::write(dst.join("manifest.json"), manifest.to_string()).unwrap();
}

#[test]
fn a_hostile_graph_is_refused_with_the_load_budget_status() {
    let dir = hostile_predictor_bundle();
    let mut m = null_mut();
    let st = unsafe { dashrank_model_load(cpath(&dir).as_ptr(), null(), &mut m) };
    expect(st, dashrank_status::LoadBudget, "native_budget_base");
    assert!(m.is_null());
    assert!(last_error().contains("cpu-taco__spmm.predictor.onnx"));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn panics_are_caught_at_the_boundary() {
    let st = dashrank_capi::boundary::guard(|| panic!("boom {}", 42));
    assert_eq!(st, dashrank_status::Panic);
    assert_eq!(dashrank_last_error_status(), dashrank_status::Panic);
    assert!(last_error().contains("boom 42"), "{}", last_error());
}

#[test]
fn last_error_is_per_thread() {
    let mut n = 0usize;
    let st = unsafe { dashrank_model_head_count(null(), &mut n) };
    assert_eq!(st, dashrank_status::NullArgument);
    std::thread::spawn(|| {
        assert_eq!(dashrank_last_error_status(), dashrank_status::Ok);
        assert_eq!(last_error(), "");
    })
    .join()
    .unwrap();
    assert!(last_error().contains("'model'"));
}

#[test]
fn one_model_many_threads() {
    let model = load(&fixture("tiny-waco-spmm"));
    let head = head_name(model, 0);
    let lines = golden_lines();
    let cands = prepare(model, &head, &lines);
    struct Shared(*mut dashrank_model, *mut dashrank_candidates);
    unsafe impl Sync for Shared {}
    impl Shared {
        fn model(&self) -> *mut dashrank_model {
            self.0
        }
        fn cands(&self) -> *mut dashrank_candidates {
            self.1
        }
    }
    let shared = Shared(model, cands);
    let run = |seed: usize| -> Vec<u32> {
        let (rp, ci) = tridiag(20 + seed);
        let m = embed_i64(shared.model(), 20 + seed, &rp, &ci);
        let mut s = vec![0f32; lines.len()];
        let st = unsafe {
            dashrank_score(
                shared.model(),
                m,
                shared.cands(),
                s.as_mut_ptr(),
                s.len(),
                null_mut(),
            )
        };
        assert_eq!(st, dashrank_status::Ok);
        let mut m = m;
        unsafe { dashrank_matrix_free(&mut m) };
        s.iter().map(|x| x.to_bits()).collect()
    };
    let expected: Vec<Vec<u32>> = (0..6).map(run).collect();
    std::thread::scope(|scope| {
        let hs: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| (0..6).map(run).collect::<Vec<_>>()))
            .collect();
        for h in hs {
            assert_eq!(h.join().unwrap(), expected);
        }
    });
    let (mut model, mut cands) = (shared.0, shared.1);
    unsafe {
        dashrank_candidates_free(&mut cands);
        dashrank_model_release(&mut model);
    }
}

static LOGGED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_logs(
    user_data: *mut c_void,
    level: dashrank_log_level,
    message: *const c_char,
    len: usize,
) {
    assert_eq!(user_data as usize, 0xfeed);
    let text = unsafe { CStr::from_ptr(message) }.to_str().unwrap();
    assert_eq!(text.len(), len);
    if level == dashrank_log_level::Info && text.contains("loaded") {
        LOGGED.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn log_callback_receives_messages() {
    let st = unsafe { dashrank_set_log_callback(Some(count_logs), 0xfeed as *mut c_void, 3) };
    assert_eq!(st, dashrank_status::Ok);
    let mut m = load(&fixture("tiny-waco-spmm"));
    assert!(LOGGED.load(Ordering::SeqCst) >= 1);
    unsafe {
        assert_eq!(
            dashrank_set_log_callback(None, null_mut(), 0),
            dashrank_status::Ok
        );
        dashrank_model_release(&mut m);
    }
}

/// Runs in a child process (see `logger_owned_by_host_is_reported`): a Rust host that
/// installed its own logger first gets `DASHRANK_STATUS_LOGGER_UNAVAILABLE`.
#[test]
#[ignore = "run by logger_owned_by_host_is_reported in a child process"]
fn logger_child() {
    struct Host;
    impl log::Log for Host {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            false
        }
        fn log(&self, _: &log::Record<'_>) {}
        fn flush(&self) {}
    }
    static HOST: Host = Host;
    log::set_logger(&HOST).unwrap();
    let st = unsafe { dashrank_set_log_callback(Some(count_logs), null_mut(), 3) };
    expect(
        st,
        dashrank_status::LoggerUnavailable,
        "another Rust logger",
    );
}

#[test]
fn logger_owned_by_host_is_reported() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "logger_child", "--ignored", "--test-threads=1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}

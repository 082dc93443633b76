//! A sequence of C ABI calls decided by the input: loads, embeds, candidate sets, scoring,
//! top-k, queries, frees, with NULL pointers, zero and short buffers, out-of-range indices,
//! invalid UTF-8 and malformed arrays mixed in.
//!
//! The harness itself keeps to the C contract where the library cannot check it (every
//! non-NULL pointer is valid for the length passed, handles are live), so any crash is the
//! library's. Checked on every call: no `DASHRANK_STATUS_PANIC`; a failing call records its
//! status and a non-empty message as the thread's last error; failed constructors leave
//! `*out` NULL; outputs respect the lengths given; scoring twice gives the same bits.

use std::ffi::{c_char, CString};
use std::ptr::{null, null_mut};

use dashrank_capi::*;

use super::capi_support::{
    check_text, checked, head_name, path_cstring, shared_models, status_queries, Input, FIXTURES,
};
use super::repo_root;

/// Handles owned by one sequence; everything left is freed at the end.
struct State {
    models: [*mut dashrank_model; 2],
    /// Whether the model in each slot scores deterministically (bit-exact repeat checks).
    deterministic: [bool; 2],
    matrices: [*mut dashrank_matrix; 3],
    candidates: [*mut dashrank_candidates; 3],
}

impl State {
    fn new() -> Self {
        let shared = shared_models();
        // SAFETY: a live shared handle.
        let m0 = unsafe { dashrank_model_retain(shared[0].0) };
        Self {
            models: [m0, null_mut()],
            deterministic: [true, false],
            matrices: [null_mut(); 3],
            candidates: [null_mut(); 3],
        }
    }

    fn step(&mut self, input: &mut Input<'_>) {
        match input.below(13) {
            // Loading runs the whole bundle reader and graph set-up: kept rare for speed.
            0 if input.below(8) == 0 => self.load(input),
            0 => self.retain_release(input),
            1 => self.retain_release(input),
            2 => self.embed_csr(input),
            3 => self.embed_file(input),
            4 => self.prepare(input),
            5 => self.score(input),
            6 => self.top_k(input),
            7 => self.candidate_queries(input),
            8 => self.free(input),
            9 => self.model_queries(input),
            10 => status_queries(input),
            11 => {
                let j = input.below(2);
                if self.models[j].is_null() {
                    // SAFETY: a live shared handle.
                    self.models[j] =
                        unsafe { dashrank_model_retain(shared_models()[input.below(2)].0) };
                    self.deterministic[j] = true;
                }
            }
            _ => {
                // SAFETY: NULL is the misuse under test.
                unsafe {
                    assert_eq!(
                        checked(dashrank_load_options_init(null_mut())),
                        dashrank_status::NullArgument
                    );
                    assert_eq!(
                        checked(dashrank_model_release(null_mut())),
                        dashrank_status::NullArgument
                    );
                    assert_eq!(
                        checked(dashrank_matrix_free(null_mut())),
                        dashrank_status::NullArgument
                    );
                    assert_eq!(
                        checked(dashrank_candidates_free(null_mut())),
                        dashrank_status::NullArgument
                    );
                    assert!(dashrank_model_retain(null()).is_null());
                }
            }
        }
    }

    fn load(&mut self, input: &mut Input<'_>) {
        let root = repo_root();
        let path = match input.below(6) {
            0..=2 => root
                .join("tests/data/fixtures")
                .join(FIXTURES[input.below(4)]),
            3 => {
                let bad = [
                    "truncated-onnx",
                    "missing-role",
                    "nan-weight",
                    "unknown-kernel",
                    "schedule-width-mismatch",
                ];
                root.join("tests/data/bad")
                    .join(bad[input.below(bad.len())])
            }
            4 => root.join("tests/data/bad/good-small.csr"),
            _ => root.join("does-not-exist"),
        };
        let path = path_cstring(&path);
        let mut o = std::mem::MaybeUninit::<dashrank_load_options>::zeroed();
        let mode = input.below(3);
        // SAFETY: valid pointer; a zeroed struct is a valid (if uninitialised-by-API) value.
        let mut o = unsafe {
            if mode > 0 {
                assert_eq!(
                    dashrank_load_options_init(o.as_mut_ptr()),
                    dashrank_status::Ok
                );
            }
            o.assume_init()
        };
        o.threads = input.below(3) as u32;
        o.deterministic = input.byte() & 1 == 1;
        o.matrix_cache_capacity = input.below(3) as u32;
        if input.byte().is_multiple_of(8) {
            o.backend = u32::from(input.byte());
        }
        let j = input.below(2);
        self.release_model(j);
        let mut out = std::ptr::dangling_mut::<dashrank_model>(); // must be overwritten
        let opts: *const dashrank_load_options = if mode == 2 { null() } else { &o };
        // SAFETY: valid pointers.
        let st = checked(unsafe { dashrank_model_load(path.as_ptr(), opts, &mut out) });
        if st == dashrank_status::Ok {
            assert!(!out.is_null());
            self.models[j] = out;
            self.deterministic[j] = mode == 2 || o.deterministic;
        } else {
            assert!(out.is_null(), "failed load leaves *out NULL");
        }
    }

    fn release_model(&mut self, j: usize) {
        // SAFETY: the slot holds NULL or a live reference owned by this state.
        assert_eq!(
            unsafe { dashrank_model_release(&mut self.models[j]) },
            dashrank_status::Ok
        );
        assert!(self.models[j].is_null());
    }

    fn retain_release(&mut self, input: &mut Input<'_>) {
        let j = input.below(2);
        let m = self.models[j];
        // SAFETY: NULL or a live handle.
        let mut r = unsafe { dashrank_model_retain(m) };
        assert_eq!(r, m);
        if input.byte() & 1 == 1 {
            self.release_model(j);
            self.models[j] = r; // the extra reference keeps the model alive
        } else {
            // SAFETY: releasing the reference just taken.
            assert_eq!(
                unsafe { dashrank_model_release(&mut r) },
                dashrank_status::Ok
            );
            assert!(r.is_null());
        }
    }

    fn embed_csr(&mut self, input: &mut Input<'_>) {
        let model = self.models[input.below(2)];
        let nrows = match input.below(8) {
            6 => usize::MAX,
            7 => usize::MAX - 1,
            n => n * 2,
        };
        let ncols = match input.below(6) {
            5 => 1 << 31,
            n => n * 3,
        };
        let real_rows = nrows.min(10) + 1;
        let nnz = input.below(16);
        let values: Vec<i64> = (0..real_rows + nnz)
            .map(|_| i64::from(input.byte() as i8))
            .collect();
        let k = input.below(3);
        self.free_matrix(k);
        let pointers = input.below(4);
        let wide = input.byte() & 1 == 1;
        let mut out = std::ptr::dangling_mut::<dashrank_matrix>();
        let out_ptr: *mut *mut dashrank_matrix = if pointers == 3 { null_mut() } else { &mut out };
        let st = if wide {
            let (rp, ci) = values.split_at(real_rows);
            let rp_ptr = if pointers == 1 { null() } else { rp.as_ptr() };
            let ci_ptr = if pointers == 2 { null() } else { ci.as_ptr() };
            // SAFETY: the arrays hold `nrows + 1` and `nnz` values, except for the two huge
            // `nrows`, which the library must refuse before reading anything.
            checked(unsafe {
                dashrank_matrix_embed_csr_i64(model, nrows, ncols, rp_ptr, ci_ptr, nnz, out_ptr)
            })
        } else {
            let narrow: Vec<i32> = values.iter().map(|&v| v as i32).collect();
            let (rp, ci) = narrow.split_at(real_rows);
            let rp_ptr = if pointers == 1 { null() } else { rp.as_ptr() };
            let ci_ptr = if pointers == 2 { null() } else { ci.as_ptr() };
            // SAFETY: as above.
            checked(unsafe {
                dashrank_matrix_embed_csr_i32(model, nrows, ncols, rp_ptr, ci_ptr, nnz, out_ptr)
            })
        };
        if model.is_null() || pointers == 3 || pointers == 1 || (pointers == 2 && nnz > 0) {
            assert_ne!(st, dashrank_status::Ok, "NULL argument accepted");
        }
        if pointers != 3 {
            if st == dashrank_status::Ok {
                assert!(!out.is_null());
                self.matrices[k] = out;
            } else {
                assert!(out.is_null(), "failed embed leaves *out NULL");
            }
        }
    }

    fn embed_file(&mut self, input: &mut Input<'_>) {
        let root = repo_root();
        let files = [
            "tests/data/bad/good-small.csr",
            "tests/data/bad/truncated.csr",
            "tests/data/bad/column-out-of-range.csr",
            "tests/data/bad/malformed.mtx",
            "ffi-examples/data/band96.mtx",
            "README.md",
            "tests/data",
            "missing.mtx",
        ];
        let path = match input.below(10) {
            8 => CString::new(
                input
                    .bytes(12)
                    .iter()
                    .map(|&b| b.max(1))
                    .collect::<Vec<u8>>(),
            )
            .expect("no NUL"),
            9 => CString::new(vec![0xff, b'.', b'm', b't', b'x']).expect("no NUL"),
            i => path_cstring(&root.join(files[i % files.len()])),
        };
        let k = input.below(3);
        self.free_matrix(k);
        let model = self.models[input.below(2)];
        let mut out = std::ptr::dangling_mut::<dashrank_matrix>();
        let path_ptr = if input.byte().is_multiple_of(16) {
            null()
        } else {
            path.as_ptr()
        };
        // SAFETY: valid pointers.
        let st = checked(unsafe { dashrank_matrix_embed_file(model, path_ptr, &mut out) });
        if st == dashrank_status::Ok {
            self.matrices[k] = out;
        } else {
            assert!(out.is_null());
        }
    }

    fn prepare(&mut self, input: &mut Input<'_>) {
        let j = input.below(2);
        let model = self.models[j];
        let head = match input.below(4) {
            0 | 1 if !model.is_null() => head_name(model, input.below(4)),
            2 => CString::new(
                input
                    .bytes(10)
                    .iter()
                    .map(|&b| b.max(1))
                    .collect::<Vec<u8>>(),
            )
            .expect("no NUL"),
            _ => CString::new("cpu-taco/spmm").expect("no NUL"),
        };
        let n = input.below(6);
        let lines: Vec<CString> = (0..n)
            .map(|_| {
                let len = input.below(48);
                let bytes: Vec<u8> = input.bytes(len).iter().map(|&b| b.max(1)).collect();
                CString::new(bytes).expect("no NUL")
            })
            .collect();
        let mut ptrs: Vec<*const c_char> = lines.iter().map(|l| l.as_ptr()).collect();
        if n > 0 && input.byte().is_multiple_of(8) {
            ptrs[input.below(n)] = null();
        }
        let k = input.below(3);
        self.free_candidates(k);
        let lines_ptr = if n == 0 && input.byte() & 1 == 1 {
            null()
        } else {
            ptrs.as_ptr()
        };
        let mut out = std::ptr::dangling_mut::<dashrank_candidates>();
        // SAFETY: `lines_ptr` holds `n` pointers, each NULL or a NUL-terminated string.
        let st = checked(unsafe {
            dashrank_candidates_prepare(model, head.as_ptr(), lines_ptr, n, &mut out)
        });
        if st == dashrank_status::Ok {
            self.candidates[k] = out;
        } else {
            assert!(out.is_null());
        }
    }

    fn score(&mut self, input: &mut Input<'_>) {
        let j = input.below(2);
        let (m, x, c) = (
            self.models[j],
            self.matrices[input.below(3)],
            self.candidates[input.below(3)],
        );
        let len = input.below(12);
        let mut scores = vec![f32::INFINITY; len];
        let ptr = if len == 0 && input.byte() & 1 == 1 {
            null_mut()
        } else {
            scores.as_mut_ptr()
        };
        let mut n = usize::MAX;
        // SAFETY: `scores` holds `len` floats.
        let st = checked(unsafe { dashrank_score(m, x, c, ptr, len, &mut n) });
        match st {
            dashrank_status::Ok => {
                assert!(n <= len);
                if self.deterministic[j] {
                    let mut again = vec![0.0f32; len];
                    // SAFETY: as above.
                    let st2 =
                        unsafe { dashrank_score(m, x, c, again.as_mut_ptr(), len, null_mut()) };
                    assert_eq!(st2, dashrank_status::Ok);
                    let bits = |v: &[f32]| v[..n].iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&scores), bits(&again), "repeated scores differ");
                }
            }
            dashrank_status::InsufficientSize => assert!(n > len),
            _ => {}
        }
    }

    fn top_k(&mut self, input: &mut Input<'_>) {
        let j = input.below(2);
        let (m, x, c) = (
            self.models[j],
            self.matrices[input.below(3)],
            self.candidates[input.below(3)],
        );
        let k = input.below(8);
        let len = input.below(8);
        let mut idx = vec![u32::MAX; len];
        let mut scores = vec![0.0f32; len];
        let scores_ptr = if input.byte() & 1 == 1 {
            null_mut()
        } else {
            scores.as_mut_ptr()
        };
        let mut w = usize::MAX;
        // SAFETY: both buffers hold `len` elements.
        let st = checked(unsafe {
            dashrank_top_k(m, x, c, k, idx.as_mut_ptr(), scores_ptr, len, &mut w)
        });
        if st == dashrank_status::Ok {
            assert!(w <= k && w <= len);
            let mut total = 0usize;
            // SAFETY: `c` is live (the call succeeded with it).
            unsafe { dashrank_candidates_len(c, &mut total, null_mut()) };
            assert!(idx[..w].iter().all(|&i| (i as usize) < total));
        }
    }

    fn candidate_queries(&mut self, input: &mut Input<'_>) {
        let c = self.candidates[input.below(3)];
        let index = if input.byte() & 1 == 1 {
            usize::MAX
        } else {
            input.below(8)
        };
        let mut len = usize::MAX;
        let mut valid = usize::MAX;
        // SAFETY: valid out pointers; `c` is NULL or live.
        unsafe {
            let st = checked(dashrank_candidates_len(c, &mut len, &mut valid));
            if st == dashrank_status::Ok {
                assert!(valid <= len);
            }
            let mut status = dashrank_status::Panic;
            checked(dashrank_candidates_status(c, index, &mut status));
            let cap = input.below(40);
            let mut buf = vec![0xAAu8; cap];
            let mut need = 0usize;
            let ptr = if cap == 0 {
                null_mut()
            } else {
                buf.as_mut_ptr().cast()
            };
            let st = checked(dashrank_candidates_message(c, index, ptr, cap, &mut need));
            check_text(st, &buf, cap, need);
        }
    }

    fn model_queries(&mut self, input: &mut Input<'_>) {
        let m = self.models[input.below(2)];
        let index = input.below(6);
        let cap = input.below(40);
        let mut buf = vec![0xAAu8; cap];
        let ptr = if cap == 0 {
            null_mut()
        } else {
            buf.as_mut_ptr().cast()
        };
        let mut need = 0usize;
        // SAFETY: valid out pointers and buffer; `m` is NULL or live.
        unsafe {
            let mut count = usize::MAX;
            checked(dashrank_model_head_count(m, &mut count));
            let st = checked(dashrank_model_head_name(m, index, ptr, cap, &mut need));
            check_text(st, &buf, cap, need);
            let mut pol = u32::MAX;
            if checked(dashrank_model_head_polarity(m, index, &mut pol)) == dashrank_status::Ok {
                assert!(pol <= 1);
            }
            let st = checked(dashrank_model_describe(m, ptr, cap, &mut need));
            check_text(st, &buf, cap, need);
            assert_eq!(
                checked(dashrank_model_head_count(m, null_mut())),
                dashrank_status::NullArgument
            );
        }
    }

    fn free(&mut self, input: &mut Input<'_>) {
        let k = input.below(3);
        if input.byte() & 1 == 1 {
            self.free_matrix(k);
        } else {
            self.free_candidates(k);
        }
    }

    fn free_matrix(&mut self, k: usize) {
        // SAFETY: NULL or a live matrix owned here; the slot is nulled.
        assert_eq!(
            unsafe { dashrank_matrix_free(&mut self.matrices[k]) },
            dashrank_status::Ok
        );
        assert!(self.matrices[k].is_null());
    }

    fn free_candidates(&mut self, k: usize) {
        // SAFETY: as above.
        assert_eq!(
            unsafe { dashrank_candidates_free(&mut self.candidates[k]) },
            dashrank_status::Ok
        );
        assert!(self.candidates[k].is_null());
    }
}

impl Drop for State {
    fn drop(&mut self) {
        for k in 0..3 {
            self.free_matrix(k);
            self.free_candidates(k);
        }
        for j in 0..2 {
            self.release_model(j);
        }
    }
}

/// Runs one sequence of at most 48 calls.
pub fn capi_sequence(data: &[u8]) {
    let mut input = Input { data, pos: 0 };
    let mut state = State::new();
    for _ in 0..48 {
        if input.done() {
            break;
        }
        state.step(&mut input);
    }
}

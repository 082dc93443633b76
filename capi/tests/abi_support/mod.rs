//! Helpers shared by the C ABI tests of schedule spaces (`abi_space.rs`, `abi_tune.rs`).
#![allow(dead_code)]

use std::ffi::{c_char, CStr, CString};
use std::path::PathBuf;
use std::ptr::{null, null_mut};

use dashrank::{CsrPattern, LoadOptions, Model};
use dashrank_capi::*;

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .join("tests/data/fixtures")
        .join(name)
}

pub fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

pub fn last_error() -> String {
    let mut buf = [0 as c_char; 1024];
    unsafe { dashrank_last_error_message(buf.as_mut_ptr(), buf.len(), null_mut()) };
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

pub fn ok(st: dashrank_status) {
    assert_eq!(st, dashrank_status::Ok, "{}", last_error());
}

pub fn expect(st: dashrank_status, want: dashrank_status, needle: &str) {
    assert_eq!(st, want, "{}", last_error());
    assert!(
        last_error().contains(needle),
        "{:?} lacks {needle:?}",
        last_error()
    );
}

/// Reads a string through the size-query protocol.
pub fn read(f: impl Fn(*mut c_char, usize, *mut usize) -> dashrank_status) -> String {
    let mut need = 0;
    assert_eq!(
        f(null_mut(), 0, &mut need),
        dashrank_status::InsufficientSize
    );
    let mut buf = vec![0 as c_char; need];
    ok(f(buf.as_mut_ptr(), buf.len(), null_mut()));
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned()
}

/// A 48 × 3000 banded pattern (wide enough that SPADE's 1024 panel is distinct).
pub fn banded() -> (usize, usize, Vec<i64>, Vec<i64>) {
    let (rows, cols) = (48, 3000);
    let (mut rp, mut ci) = (vec![0i64], Vec::new());
    for r in 0..rows {
        for c in [r, r * 60, r * 60 + 7] {
            if c < cols && !ci[rp[r] as usize..].contains(&(c as i64)) {
                ci.push(c as i64);
            }
        }
        ci[rp[r] as usize..].sort_unstable();
        rp.push(ci.len() as i64);
    }
    (rows, cols, rp, ci)
}

pub struct Fixture {
    pub model: *mut dashrank_model,
    pub matrix: *mut dashrank_matrix,
    pub rust: Model,
    pub pattern: CsrPattern,
}

impl Fixture {
    pub fn new(name: &str) -> Self {
        let path = c(fixture(name).to_str().unwrap());
        let mut model = null_mut();
        ok(unsafe { dashrank_model_load(path.as_ptr(), null(), &mut model) });
        let (rows, cols, rp, ci) = banded();
        let mut matrix = null_mut();
        ok(unsafe {
            dashrank_matrix_embed_csr_i64(
                model,
                rows,
                cols,
                rp.as_ptr(),
                ci.as_ptr(),
                ci.len(),
                &mut matrix,
            )
        });
        let rp: Vec<usize> = rp.iter().map(|&v| v as usize).collect();
        let ci: Vec<u32> = ci.iter().map(|&v| v as u32).collect();
        Self {
            model,
            matrix,
            rust: Model::load(fixture(name), &LoadOptions::default()).unwrap(),
            pattern: CsrPattern::new(rows, cols, rp, ci).unwrap(),
        }
    }

    pub fn prepare(&self, space: *const dashrank_space) -> *mut dashrank_space_candidates {
        let mut out = null_mut();
        ok(unsafe { dashrank_space_prepare(self.model, null(), space, self.matrix, &mut out) });
        out
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        unsafe {
            dashrank_matrix_free(&mut self.matrix);
            dashrank_model_release(&mut self.model);
        }
    }
}

pub fn space(name: &str) -> *mut dashrank_space {
    let mut s = null_mut();
    ok(unsafe { dashrank_space_from_name(c(name).as_ptr(), 0, &mut s) });
    s
}

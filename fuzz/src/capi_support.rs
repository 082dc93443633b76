//! Helpers of the `capi_sequence` target: the input reader, the shared models, and the
//! checks applied to every call's status and text output.

use std::ffi::{c_char, CString};
use std::ptr::null_mut;
use std::sync::OnceLock;

use dashrank_capi::*;

use super::repo_root;

/// Reads the input as a stream of small decisions; zeros once it runs out.
pub(crate) struct Input<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) pos: usize,
}

impl Input<'_> {
    pub(crate) fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n.max(1)
    }
    pub(crate) fn bytes(&mut self, n: usize) -> &[u8] {
        let start = self.pos.min(self.data.len());
        let end = (start + n).min(self.data.len());
        self.pos = start + n;
        &self.data[start..end]
    }
    pub(crate) fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
}

/// A model handle loaded once per process and shared (the model is thread-safe).
pub(crate) struct Shared(pub(crate) *mut dashrank_model);
// SAFETY: dashrank_model is immutable and documented as usable from any thread.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

pub(crate) const FIXTURES: [&str; 4] = [
    "tiny-waco-spmm",
    "tiny-cognate",
    "tiny-dash",
    "tiny-waco-fp16",
];

pub(crate) fn path_cstring(p: &std::path::Path) -> CString {
    CString::new(p.to_string_lossy().into_owned()).expect("no NUL in paths")
}

pub(crate) fn shared_models() -> &'static [Shared] {
    static MODELS: OnceLock<Vec<Shared>> = OnceLock::new();
    MODELS.get_or_init(|| {
        FIXTURES[..2]
            .iter()
            .map(|name| {
                let path = path_cstring(&repo_root().join("tests/data/fixtures").join(name));
                let mut o = std::mem::MaybeUninit::<dashrank_load_options>::uninit();
                // SAFETY: valid pointers; `init` fills the whole struct.
                let mut o = unsafe {
                    assert_eq!(
                        dashrank_load_options_init(o.as_mut_ptr()),
                        dashrank_status::Ok
                    );
                    o.assume_init()
                };
                o.threads = 1;
                o.deterministic = true;
                let mut m = null_mut();
                // SAFETY: valid pointers.
                let st = unsafe { dashrank_model_load(path.as_ptr(), &o, &mut m) };
                assert_eq!(st, dashrank_status::Ok, "loading {name}");
                Shared(m)
            })
            .collect()
    })
}

/// Asserts the call did not panic and that a failure is recorded as the last error.
pub(crate) fn checked(st: dashrank_status) -> dashrank_status {
    assert_ne!(
        st,
        dashrank_status::Panic,
        "panic caught at the ABI boundary"
    );
    if st != dashrank_status::Ok {
        assert_eq!(dashrank_last_error_status(), st, "last error status");
        let mut buf = [0 as c_char; 8];
        let mut need = 0usize;
        // SAFETY: valid buffer of 8 bytes.
        unsafe { dashrank_last_error_message(buf.as_mut_ptr(), buf.len(), &mut need) };
        assert!(need > 1, "a failure must leave a message");
    }
    st
}

/// Checks a string output: NUL-terminated within `len` when anything was written, and the
/// reported size consistent with the status.
pub(crate) fn check_text(st: dashrank_status, buf: &[u8], len: usize, need: usize) {
    if st == dashrank_status::Ok {
        assert!(need <= len && need >= 1, "needed {need} for len {len}");
        assert_eq!(buf[need - 1], 0, "NUL at needed - 1");
    } else if st == dashrank_status::InsufficientSize {
        assert!(need > len);
        if len > 0 {
            assert_eq!(buf[len - 1], 0, "truncated text is NUL-terminated");
        }
    }
}

pub(crate) fn head_name(model: *const dashrank_model, index: usize) -> CString {
    let mut buf = [0u8; 128];
    // SAFETY: a live model and a 128-byte buffer.
    let st = unsafe {
        dashrank_model_head_name(model, index, buf.as_mut_ptr().cast(), buf.len(), null_mut())
    };
    if st != dashrank_status::Ok {
        return CString::new("no-such-head").expect("no NUL");
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
    CString::new(&buf[..end]).expect("no NUL")
}

pub(crate) fn status_queries(input: &mut Input<'_>) {
    let code = match input.below(4) {
        0 => u32::from(input.byte()) * 100 + u32::from(input.byte() % 8),
        1 => u32::MAX,
        _ => u32::from(input.byte()),
    };
    let cap = input.below(24);
    let mut buf = vec![0xAAu8; cap];
    let ptr = if cap == 0 {
        null_mut()
    } else {
        buf.as_mut_ptr().cast()
    };
    let mut need = 0usize;
    // SAFETY: the buffer holds `cap` bytes.
    unsafe {
        let st = dashrank_status_message(code, ptr, cap, &mut need);
        assert_ne!(st, dashrank_status::Panic);
        check_text(st, &buf, cap, need);
        let st = dashrank_last_error_message(ptr, cap, &mut need);
        assert_ne!(st, dashrank_status::Panic);
        check_text(st, &buf, cap, need);
    }
}

//! The exports that read statuses and the last failure: `dashrank_status_message`,
//! `dashrank_last_error_message`, `dashrank_last_error_status`. They never go through
//! `guard`, which would overwrite the last error they read.

use std::ffi::c_char;

use super::boundary::write_str;
use super::status::{dashrank_status, last_error};

/// Writes the fixed description of `status` into `buf` (NUL-terminated).
///
/// `*needed` (if `needed` is not NULL) receives the buffer size needed, terminator included.
/// `buf` may be NULL when `len` is 0, to query the size. When `len` is too small, the
/// description is truncated to `len - 1` bytes (still NUL-terminated) and
/// `DASHRANK_STATUS_INSUFFICIENT_SIZE` is returned. An unknown `status` number always gives
/// `DASHRANK_STATUS_INVALID_ARGUMENT` (and the text "unknown status N", as far as it fits).
///
/// Does not change this thread's last error. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn dashrank_status_message(
    status: u32,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> dashrank_status {
    // Deliberately not through `guard`: it must not overwrite the last error.
    std::panic::catch_unwind(|| match dashrank_status::from_code(status) {
        Some(s) => match unsafe { write_str(s.message(), buf, len, needed) } {
            Ok(()) => dashrank_status::Ok,
            Err(f) => f.status,
        },
        None => {
            let text = format!("unknown status {status}");
            match unsafe { write_str(&text, buf, len, needed) } {
                Err(f) if f.status == dashrank_status::NullArgument => f.status,
                _ => dashrank_status::InvalidArgument,
            }
        }
    })
    .unwrap_or(dashrank_status::Panic)
}

/// Writes the detailed message of the last failed `dashrank_*` call **on the calling thread**
/// into `buf` (NUL-terminated), e.g. `invalid sparsity pattern: duplicate column 3 in row 0`.
///
/// The message is kept in thread-local storage, so threads never see each other's errors.
/// Every fallible call clears it on entry, so read it right after the failing call. With no
/// failure recorded, the message is empty. Size reporting and truncation are as in
/// [`dashrank_status_message`]. Reading the message does not clear it.
#[no_mangle]
pub unsafe extern "C" fn dashrank_last_error_message(
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> dashrank_status {
    std::panic::catch_unwind(|| {
        let text = last_error().map(|(_, m)| m).unwrap_or_default();
        match unsafe { write_str(&text, buf, len, needed) } {
            Ok(()) => dashrank_status::Ok,
            Err(f) => f.status,
        }
    })
    .unwrap_or(dashrank_status::Panic)
}

/// The status of the last failed `dashrank_*` call on the calling thread, or
/// `DASHRANK_STATUS_OK` when the last call succeeded. Thread-local, like
/// [`dashrank_last_error_message`].
#[no_mangle]
pub extern "C" fn dashrank_last_error_status() -> dashrank_status {
    last_error().map_or(dashrank_status::Ok, |(s, _)| s)
}

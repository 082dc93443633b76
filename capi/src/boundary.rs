//! The panic boundary and the argument checks every export goes through.
//!
//! An export's body is a closure returning `Result<(), Failure>` passed to [`guard`], which
//! clears the thread's last error, catches panics, and turns a [`Failure`] into its status
//! while recording the detailed message. The helpers below check pointers and lengths
//! **before** any dereference, so export bodies hold no `unsafe` beyond calling them.

use std::any::Any;
use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use dashrank::Error;

use super::status::{clear_last_error, dashrank_status, set_last_error};

/// A failed export: its status and a detailed message for `dashrank_last_error_message`.
#[derive(Debug)]
pub struct Failure {
    /// Status returned to C.
    pub status: dashrank_status,
    /// Detailed message.
    pub message: String,
}

impl Failure {
    /// A failure with this status and message.
    pub fn new(status: dashrank_status, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// `DASHRANK_STATUS_NULL_ARGUMENT` naming the parameter.
    pub fn null(param: &str) -> Self {
        Self::new(
            dashrank_status::NullArgument,
            format!("argument '{param}' is NULL"),
        )
    }
}

/// Result of an export body.
pub type FfiResult<T = ()> = Result<T, Failure>;

/// Runs an export body behind the panic boundary.
///
/// Clears the calling thread's last error, runs `body`, and returns `DASHRANK_STATUS_OK` (the
/// last error cleared again, in case a nested call from a callback failed) or
/// the failure's status (recording its message). A panic becomes `DASHRANK_STATUS_PANIC`
/// with the panic message recorded. Public (hidden) so that `tests/abi.rs` can prove the
/// boundary catches panics.
#[doc(hidden)]
pub fn guard(body: impl FnOnce() -> FfiResult) -> dashrank_status {
    clear_last_error();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            // A nested call (from a measure callback) may have recorded a failure.
            clear_last_error();
            dashrank_status::Ok
        }
        Ok(Err(f)) => {
            set_last_error(f.status, f.message);
            f.status
        }
        Err(payload) => {
            let msg = panic_message(payload.as_ref());
            set_last_error(dashrank_status::Panic, format!("internal panic: {msg}"));
            dashrank_status::Panic
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Borrows `*p`.
///
/// ## Unsafety
/// `p` must be NULL or point to a live `T` for `'a`.
pub unsafe fn try_ref<'a, T>(p: *const T, param: &str) -> FfiResult<&'a T> {
    // SAFETY: NULL is checked; validity of non-NULL pointers is the caller's contract.
    unsafe { p.as_ref() }.ok_or_else(|| Failure::null(param))
}

/// Borrows `*p` mutably (for out-parameters).
///
/// ## Unsafety
/// `p` must be NULL or point to writable memory for a `T`.
pub unsafe fn try_mut<'a, T>(p: *mut T, param: &str) -> FfiResult<&'a mut T> {
    // SAFETY: as for `try_ref`.
    unsafe { p.as_mut() }.ok_or_else(|| Failure::null(param))
}

/// Takes the handle out of the caller's slot `*slot`, leaving NULL there (for the
/// `*_free`/`*_release` functions): `None` when `*slot` is already NULL; an error when
/// `slot` itself is NULL.
///
/// ## Unsafety
/// A non-NULL `slot` must point to a valid, writable handle pointer.
pub unsafe fn take_handle<T>(slot: *mut *mut T, param: &str) -> FfiResult<Option<*mut T>> {
    let slot = unsafe { try_mut(slot, param) }?;
    let p = std::mem::replace(slot, std::ptr::null_mut());
    Ok((!p.is_null()).then_some(p))
}

/// Borrows `len` elements at `p`; `p` may be NULL only when `len` is 0.
///
/// ## Unsafety
/// A non-NULL `p` must point to `len` initialised `T`s that live for `'a`.
pub unsafe fn try_slice<'a, T>(p: *const T, len: usize, param: &str) -> FfiResult<&'a [T]> {
    if !check_slice::<T>(p.is_null(), len, param)? {
        return Ok(&[]);
    }
    // SAFETY: non-NULL, length bounded; validity is the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// Checks a `(pointer, len)` pair for [`try_slice`]/[`try_slice_mut`]: `Ok(false)` for an
/// empty slice, `Ok(true)` for a non-NULL pointer with a length that fits `isize`.
fn check_slice<T>(is_null: bool, len: usize, param: &str) -> FfiResult<bool> {
    if len == 0 {
        return Ok(false);
    }
    if is_null {
        return Err(Failure::null(param));
    }
    if len > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(Failure::new(
            dashrank_status::InvalidArgument,
            format!("length of '{param}' ({len}) is too large"),
        ));
    }
    Ok(true)
}

/// Mutable version of [`try_slice`] (for caller-allocated outputs).
///
/// ## Unsafety
/// A non-NULL `p` must point to `len` writable `T`s that live for `'a`.
pub unsafe fn try_slice_mut<'a, T>(p: *mut T, len: usize, param: &str) -> FfiResult<&'a mut [T]> {
    if !check_slice::<T>(p.is_null(), len, param)? {
        return Ok(&mut []);
    }
    // SAFETY: as for `try_slice`.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// Borrows a NUL-terminated UTF-8 string.
///
/// ## Unsafety
/// A non-NULL `p` must point to a NUL-terminated string that lives for `'a`.
pub unsafe fn try_str<'a>(p: *const c_char, param: &str) -> FfiResult<&'a str> {
    if p.is_null() {
        return Err(Failure::null(param));
    }
    // SAFETY: non-NULL; termination is the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|e| {
        Failure::new(
            dashrank_status::InvalidUtf8,
            format!("argument '{param}' is not valid UTF-8: {e}"),
        )
    })
}

/// Writes `*out = value` if `out` is not NULL.
///
/// ## Unsafety
/// A non-NULL `out` must point to writable memory for a `T`.
pub unsafe fn write_opt<T>(out: *mut T, value: T) {
    // SAFETY: caller's contract.
    if let Some(o) = unsafe { out.as_mut() } {
        *o = value;
    }
}

/// Copies `text` plus a NUL terminator into `buf[..len]`.
///
/// `*needed` (optional) gets `text.len() + 1`. `buf` may be NULL only when `len` is 0. When
/// the buffer is short, writes a truncated, NUL-terminated prefix (if `len > 0`) and fails
/// with `DASHRANK_STATUS_INSUFFICIENT_SIZE`.
///
/// ## Unsafety
/// A non-NULL `buf` must point to `len` writable bytes; a non-NULL `needed` to a `size_t`.
pub unsafe fn write_str(text: &str, buf: *mut c_char, len: usize, needed: *mut usize) -> FfiResult {
    let need = text.len() + 1;
    // SAFETY: caller's contract.
    unsafe { write_opt(needed, need) };
    // SAFETY: caller's contract.
    let out = unsafe { try_slice_mut(buf.cast::<u8>(), len, "buf") }?;
    if out.len() >= need {
        out[..text.len()].copy_from_slice(text.as_bytes());
        out[text.len()] = 0;
        return Ok(());
    }
    if let Some((last, head)) = out.split_last_mut() {
        head.copy_from_slice(&text.as_bytes()[..head.len()]);
        *last = 0;
    }
    Err(Failure::new(
        dashrank_status::InsufficientSize,
        format!("buffer of {len} bytes is too small: {need} needed"),
    ))
}

/// Fails with `DASHRANK_STATUS_INSUFFICIENT_SIZE` unless `have >= need`.
pub fn check_capacity(what: &str, have: usize, need: usize) -> FfiResult {
    if have < need {
        return Err(Failure::new(
            dashrank_status::InsufficientSize,
            format!("'{what}' holds {have} elements but {need} are needed"),
        ));
    }
    Ok(())
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::new(dashrank_status::from_error(&e), e.to_string())
    }
}

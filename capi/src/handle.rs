//! Handle ownership in the type (after rustls-ffi's `Castable`, `librustls/src/ffi.rs`).
//!
//! Every C handle is an opaque zero-sized struct (cbindgen writes `typedef struct X X;`) tied
//! to the Rust value it stands for by [`Castable`], whose `Ownership` says how the pointer
//! given to C was made: [`OwnershipBox`] (`Box::into_raw`; the caller frees it once with
//! `*_free`) or [`OwnershipArc`] (`Arc::into_raw`; `*_retain` adds a reference, `*_release`
//! drops one). The helpers below are the only code that turns handle pointers back into
//! Rust values, and they take the ownership kind as a trait bound, so freeing an `Arc` handle
//! as a `Box` (or the reverse) does not compile. They check for NULL before any dereference.

use std::sync::Arc;

use super::boundary::{take_handle, Failure, FfiResult};

/// The handle is a `Box<RustType>` given to C.
pub struct OwnershipBox;
/// The handle is an `Arc<RustType>` given to C.
pub struct OwnershipArc;

/// Marks [`OwnershipBox`] and [`OwnershipArc`].
pub trait OwnershipMarker {}
impl OwnershipMarker for OwnershipBox {}
impl OwnershipMarker for OwnershipArc {}

/// Ties a C handle type to the Rust value behind it and to how it is owned.
pub trait Castable {
    /// [`OwnershipBox`] or [`OwnershipArc`].
    type Ownership: OwnershipMarker;
    /// The Rust value a handle pointer points to.
    type RustType;
}

/// Borrows the value behind a handle of either ownership.
///
/// ## Unsafety
/// `p` must be NULL or a live handle of type `C` made by this library.
pub unsafe fn try_handle<'a, C: Castable>(p: *const C, param: &str) -> FfiResult<&'a C::RustType> {
    // SAFETY: a non-NULL handle points to a live `C::RustType` (the caller's contract).
    unsafe { p.cast::<C::RustType>().as_ref() }.ok_or_else(|| Failure::null(param))
}

/// Gives `value` to C as a new boxed handle.
pub fn box_into_handle<C: Castable<Ownership = OwnershipBox>>(value: C::RustType) -> *mut C {
    Box::into_raw(Box::new(value)).cast()
}

/// Frees the boxed handle in `*slot` and sets `*slot` to NULL; nothing happens when `*slot`
/// is already NULL.
///
/// ## Unsafety
/// A non-NULL `slot` must point to NULL or to a live handle made by [`box_into_handle`].
pub unsafe fn free_box_handle<C: Castable<Ownership = OwnershipBox>>(
    slot: *mut *mut C,
    param: &str,
) -> FfiResult {
    if let Some(p) = unsafe { take_handle(slot, param) }? {
        // SAFETY: `p` came from `box_into_handle::<C>` and is freed once (the slot is NULL now).
        drop(unsafe { Box::from_raw(p.cast::<C::RustType>()) });
    }
    Ok(())
}

/// Gives `value` to C as a new reference-counted handle with one reference.
pub fn arc_into_handle<C: Castable<Ownership = OwnershipArc>>(value: Arc<C::RustType>) -> *mut C {
    Arc::into_raw(value).cast_mut().cast()
}

/// Adds a reference to a reference-counted handle; NULL stays NULL.
///
/// ## Unsafety
/// `p` must be NULL or a live handle made by [`arc_into_handle`].
pub unsafe fn retain_arc_handle<C: Castable<Ownership = OwnershipArc>>(p: *const C) -> *mut C {
    if !p.is_null() {
        // SAFETY: `p` came from `Arc::into_raw` of an `Arc<C::RustType>` that is still live.
        unsafe { Arc::increment_strong_count(p.cast::<C::RustType>()) };
    }
    p.cast_mut()
}

/// Drops the reference held in `*slot` and sets `*slot` to NULL; nothing happens when
/// `*slot` is already NULL.
///
/// ## Unsafety
/// A non-NULL `slot` must point to NULL or to a handle made by [`arc_into_handle`] whose
/// reference the caller gives up.
pub unsafe fn release_arc_handle<C: Castable<Ownership = OwnershipArc>>(
    slot: *mut *mut C,
    param: &str,
) -> FfiResult {
    if let Some(p) = unsafe { take_handle(slot, param) }? {
        // SAFETY: `p` came from `Arc::into_raw`; this reference is given up here.
        drop(unsafe { Arc::from_raw(p.cast_const().cast::<C::RustType>()) });
    }
    Ok(())
}

//! Argument conversion for the TVM FFI exports: dashrank errors to TVM error kinds, DLPack
//! tensors to borrowed slices and back, integers to sizes.

use std::error::Error as _;
use std::ffi::c_void;

use tvm_ffi::collections::tensor::{DLTensorExt, NDAllocator};
use tvm_ffi::dtype::AsDLDataType;
use tvm_ffi::tvm_ffi_sys::dlpack::DLTensor;
use tvm_ffi::{DLDataTypeExt, DLDevice, DLDeviceType, Tensor, TensorView};

use dashrank::pattern::{CsrIndex, CsrPattern, CsrView};
use dashrank::ErrorKind;

/// A dashrank result as a TVM FFI result ([`tvm_error`]).
pub(super) trait OrTvm<T> {
    fn tvm(self) -> tvm_ffi::Result<T>;
}

impl<T> OrTvm<T> for dashrank::Result<T> {
    fn tvm(self) -> tvm_ffi::Result<T> {
        self.map_err(tvm_error)
    }
}

/// Bad input (pattern, schedule, argument) is a `ValueError`; everything else (I/O, bundle,
/// featurizer, executor) a `RuntimeError`. The message carries the source chain.
pub(super) fn tvm_error(e: dashrank::Error) -> tvm_ffi::Error {
    {
        let kind = match e.kind() {
            ErrorKind::Pattern { .. }
            | ErrorKind::Schedule { .. }
            | ErrorKind::InvalidArgument { .. }
            | ErrorKind::UnknownHead { .. }
            | ErrorKind::UnsupportedKernel { .. }
            | ErrorKind::LayoutTooLarge { .. } => tvm_ffi::VALUE_ERROR,
            _ => tvm_ffi::RUNTIME_ERROR,
        };
        let mut message = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            let text = s.to_string();
            if !message.contains(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            source = s.source();
        }
        tvm_ffi::Error::new(kind, &message, "")
    }
}

/// A `ValueError` with this message.
pub(super) fn value_error(message: &str) -> tvm_ffi::Error {
    tvm_ffi::Error::new(tvm_ffi::VALUE_ERROR, message, "")
}

/// A `TypeError` with this message.
fn type_error(message: &str) -> tvm_ffi::Error {
    tvm_ffi::Error::new(tvm_ffi::TYPE_ERROR, message, "")
}

/// A non-negative Python integer as a size (`ValueError` when negative).
pub(super) fn size(value: i64, name: &str) -> tvm_ffi::Result<usize> {
    usize::try_from(value).map_err(|_| value_error(&format!("{name} must be >= 0, got {value}")))
}

/// The elements of a one-dimensional, contiguous CPU tensor of `I`, borrowed for the call.
fn slice_of<'a, I: AsDLDataType>(t: &'a TensorView, name: &str) -> tvm_ffi::Result<&'a [I]> {
    if t.device().device_type != DLDeviceType::kDLCPU {
        return Err(value_error(&format!("{name} must be a CPU tensor")));
    }
    if t.ndim() != 1 {
        return Err(value_error(&format!(
            "{name} must be one-dimensional, got {} dimensions",
            t.ndim()
        )));
    }
    if !t.is_contiguous() {
        return Err(value_error(&format!("{name} must be contiguous")));
    }
    let len = t.numel();
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: the caller's DLTensor is valid for the duration of the exported call (which
    // outlives `'a`); it is on the CPU, contiguous and has `len` elements of `I` (dtype checked
    // by the caller) starting `byte_offset` bytes after `data`.
    unsafe {
        let raw: &DLTensor = &*t.as_raw();
        if raw.data.is_null() {
            return Err(value_error(&format!("{name} has no data")));
        }
        let start = raw
            .data
            .cast::<u8>()
            .add(raw.byte_offset as usize)
            .cast::<I>();
        if !start.is_aligned() {
            return Err(value_error(&format!("{name} is not aligned to its dtype")));
        }
        Ok(std::slice::from_raw_parts(start, len))
    }
}

fn csr_view_pattern<I: CsrIndex + AsDLDataType>(
    indptr: &TensorView,
    indices: &TensorView,
    nrows: usize,
    ncols: usize,
) -> tvm_ffi::Result<CsrPattern> {
    let row_ptr = slice_of::<I>(indptr, "indptr")?;
    let col_idx = slice_of::<I>(indices, "indices")?;
    Ok(CsrView::new(nrows, ncols, row_ptr, col_idx)
        .tvm()?
        .to_pattern())
}

/// Validates CSR arrays (both `int32` or both `int64`) through a borrowing [`CsrView`] and
/// copies them into the pattern the featurizer reads. Other dtypes are a `TypeError`.
pub(super) fn csr_pattern(
    indptr: &TensorView,
    indices: &TensorView,
    nrows: i64,
    ncols: i64,
) -> tvm_ffi::Result<CsrPattern> {
    let (nrows, ncols) = (size(nrows, "nrows")?, size(ncols, "ncols")?);
    let (a, b) = (indptr.dtype(), indices.dtype());
    if a == i32::DL_DATA_TYPE && b == a {
        csr_view_pattern::<i32>(indptr, indices, nrows, ncols)
    } else if a == i64::DL_DATA_TYPE && b == a {
        csr_view_pattern::<i64>(indptr, indices, nrows, ncols)
    } else {
        Err(type_error(&format!(
            "indptr and indices must both be int32 or both be int64, got {} and {}",
            a.to_string().as_str(),
            b.to_string().as_str()
        )))
    }
}

/// A CPU allocator for result tensors. Stateless on purpose: tvm-ffi 0.1.15 places the
/// allocator next to the tensor header in a struct without `#[repr(C)]`, so an allocator with
/// fields (e.g. one owning a `Vec`) may be laid out first and corrupt the `DLTensor`. Unlike
/// tvm-ffi's `CPUNDAlloc`, it never makes a zero-size allocation (empty results are legal).
struct ResultAlloc;

impl ResultAlloc {
    const ALIGN: usize = 64;

    fn layout(tensor: &DLTensor) -> std::alloc::Layout {
        let bytes = tensor.numel() * tensor.item_size();
        std::alloc::Layout::from_size_align(bytes.max(1), Self::ALIGN)
            .unwrap_or(std::alloc::Layout::new::<u8>())
    }
}

// SAFETY: `alloc_data` and `free_data` compute the same layout from the same (immutable)
// tensor metadata; the allocation holds all the tensor's elements. Allocation failure aborts
// through `handle_alloc_error`, so the data pointer is never null.
unsafe impl NDAllocator for ResultAlloc {
    const MIN_ALIGN: usize = Self::ALIGN;

    unsafe fn alloc_data(&mut self, prototype: &DLTensor) -> *mut c_void {
        let layout = Self::layout(prototype);
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        ptr.cast()
    }

    unsafe fn free_data(&mut self, tensor: &DLTensor) {
        // SAFETY: allocated by `alloc_data` with this layout.
        unsafe { std::alloc::dealloc(tensor.data.cast(), Self::layout(tensor)) }
    }
}

/// A one-dimensional CPU tensor holding a copy of `values`.
pub(super) fn tensor_from_slice<T: AsDLDataType>(values: &[T]) -> tvm_ffi::Result<Tensor> {
    let shape = [values.len() as i64];
    let cpu = DLDevice {
        device_type: DLDeviceType::kDLCPU,
        device_id: 0,
    };
    let tensor = Tensor::from_nd_alloc(ResultAlloc, &shape, T::DL_DATA_TYPE, cpu);
    tensor.data_as_slice_mut::<T>()?.copy_from_slice(values);
    Ok(tensor)
}

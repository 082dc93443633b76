//! Model handles: load options, load, retain/release, head queries.

use std::ffi::c_char;
use std::path::PathBuf;
use std::sync::Arc;

use dashrank::model::ScorePolarity;
use dashrank::{Backend, LoadOptions, Model};

use super::boundary::{guard, try_mut, try_str, write_str, Failure};
use super::handle::{
    arc_into_handle, release_arc_handle, retain_arc_handle, try_handle, Castable, OwnershipArc,
};
use super::status::dashrank_status;
use super::DASHRANK_ABI_VERSION;

/// `dashrank_load_options.backend`: tract, pure Rust (needs a library built with `tract`).
pub const DASHRANK_BACKEND_TRACT: u32 = 0;
/// `dashrank_load_options.backend`: ONNX Runtime loaded from `onnxruntime_library`.
pub const DASHRANK_BACKEND_ONNXRUNTIME: u32 = 1;
/// `dashrank_load_options.backend`: dashrank's own engine, pure Rust, in every build (the
/// default).
pub const DASHRANK_BACKEND_NATIVE: u32 = 2;

/// `dashrank_model_head_polarity`: lower scores are predicted faster.
pub const DASHRANK_POLARITY_LOWER_IS_BETTER: u32 = 0;
/// `dashrank_model_head_polarity`: higher scores are predicted faster.
pub const DASHRANK_POLARITY_HIGHER_IS_BETTER: u32 = 1;

/// Options for `dashrank_model_load`. Initialise with `dashrank_load_options_init`, then
/// change fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dashrank_load_options {
    /// Set by `dashrank_load_options_init` to `DASHRANK_ABI_VERSION`; checked at load.
    pub abi_version: u32,
    /// `DASHRANK_BACKEND_NATIVE` (default), `DASHRANK_BACKEND_TRACT` or
    /// `DASHRANK_BACKEND_ONNXRUNTIME`.
    pub backend: u32,
    /// Path of `libonnxruntime.so` for `DASHRANK_BACKEND_ONNXRUNTIME`, else NULL. Copied
    /// during the call.
    pub onnxruntime_library: *const c_char,
    /// Worker threads for the featurizer and the dense graphs; 0 (default) uses all cores.
    /// Models loaded with the same `n` share one pool of `n` threads per calling thread.
    pub threads: u32,
    /// Pin the dense graphs to one intra-op thread so that scores are bit-identical under
    /// any load (default false; the featurizer and top-k are deterministic either way).
    pub deterministic: bool,
    /// Matrix embeddings kept in the model's cache (keyed by the pattern's SHA-256 digest); 0
    /// disables it. Default 64.
    pub matrix_cache_capacity: u32,
}

/// A loaded cost model (opaque).
///
/// Reference-counted: `dashrank_model_retain` adds a reference and
/// `dashrank_model_release` drops one; the model is freed with its last reference. A model
/// is immutable: any number of threads may use one handle at the same time.
pub struct dashrank_model {
    _private: [u8; 0],
}

impl Castable for dashrank_model {
    type Ownership = OwnershipArc;
    type RustType = Model;
}

/// Fills `*options` with the defaults of this library version.
#[no_mangle]
pub unsafe extern "C" fn dashrank_load_options_init(
    options: *mut dashrank_load_options,
) -> dashrank_status {
    guard(|| {
        let d = LoadOptions::default();
        *unsafe { try_mut(options, "options") }? = dashrank_load_options {
            abi_version: DASHRANK_ABI_VERSION,
            backend: DASHRANK_BACKEND_NATIVE,
            onnxruntime_library: std::ptr::null(),
            threads: 0,
            deterministic: d.deterministic,
            matrix_cache_capacity: u32::try_from(d.matrix_cache_capacity).unwrap_or(u32::MAX),
        };
        Ok(())
    })
}

fn to_load_options(o: &dashrank_load_options) -> Result<LoadOptions, Failure> {
    if o.abi_version != DASHRANK_ABI_VERSION {
        return Err(Failure::new(
            dashrank_status::AbiMismatch,
            format!(
                "options.abi_version is {} but this library has ABI {DASHRANK_ABI_VERSION}; \
                 call dashrank_load_options_init first",
                o.abi_version
            ),
        ));
    }
    let backend = match o.backend {
        DASHRANK_BACKEND_NATIVE => Backend::Native,
        DASHRANK_BACKEND_TRACT => Backend::Tract,
        DASHRANK_BACKEND_ONNXRUNTIME => Backend::OnnxRuntime {
            library: PathBuf::from(unsafe {
                try_str(o.onnxruntime_library, "options.onnxruntime_library")
            }?),
        },
        other => {
            return Err(Failure::new(
                dashrank_status::InvalidArgument,
                format!("options.backend {other} is not a DASHRANK_BACKEND_* value"),
            ))
        }
    };
    Ok(LoadOptions {
        backend,
        threads: (o.threads > 0).then_some(o.threads as usize),
        matrix_cache_capacity: o.matrix_cache_capacity as usize,
        deterministic: o.deterministic,
        simd: None,
        // Mixing heads of different models is a CLI/Rust expert override, not offered here.
        allow_provenance_mismatch: false,
        ..LoadOptions::default()
    })
}

/// Loads the model bundle in directory `path`.
///
/// `options` may be NULL for the defaults. On success `*out` receives a new model with one
/// reference (release it with `dashrank_model_release`); on failure `*out` is set to NULL.
/// Does not take ownership of `path` or `options`.
#[no_mangle]
pub unsafe extern "C" fn dashrank_model_load(
    path: *const c_char,
    options: *const dashrank_load_options,
    out: *mut *mut dashrank_model,
) -> dashrank_status {
    guard(|| {
        let out = unsafe { try_mut(out, "out") }?;
        *out = std::ptr::null_mut();
        let path = unsafe { try_str(path, "path") }?;
        let options = match unsafe { options.as_ref() } {
            Some(o) => to_load_options(o)?,
            None => LoadOptions::default(),
        };
        let model = Model::load(path, &options)?;
        *out = arc_into_handle(Arc::new(model));
        Ok(())
    })
}

/// Adds a reference to `model` and returns it (NULL for NULL). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn dashrank_model_retain(
    model: *const dashrank_model,
) -> *mut dashrank_model {
    // SAFETY: a non-NULL model was returned by `dashrank_model_load` and is still live.
    unsafe { retain_arc_handle(model) }
}

/// Drops the reference held in `*model` and sets `*model` to NULL; the model is freed with
/// its last reference. `*model` may be NULL (nothing happens); `model` itself must not be.
/// Matrices and candidate sets made by the model stay valid.
#[no_mangle]
pub unsafe extern "C" fn dashrank_model_release(
    model: *mut *mut dashrank_model,
) -> dashrank_status {
    guard(|| unsafe { release_arc_handle(model, "model") })
}

pub(crate) fn head_at(model: &Model, index: usize) -> Result<&dashrank::model::HeadInfo, Failure> {
    let heads = &model.info().heads;
    heads.get(index).ok_or_else(|| {
        Failure::new(
            dashrank_status::IndexOutOfRange,
            format!(
                "head index {index} out of range (model has {})",
                heads.len()
            ),
        )
    })
}

/// Writes the number of heads of `model` into `*out`.
#[no_mangle]
pub unsafe extern "C" fn dashrank_model_head_count(
    model: *const dashrank_model,
    out: *mut usize,
) -> dashrank_status {
    guard(|| {
        let m = unsafe { try_handle(model, "model") }?;
        *unsafe { try_mut(out, "out") }? = m.info().heads.len();
        Ok(())
    })
}

/// Writes the name of head `index` (0-based, sorted by name; e.g. `cpu-taco/spmm`) into
/// `buf`. Size reporting and truncation as in `dashrank_status_message`.
#[no_mangle]
pub unsafe extern "C" fn dashrank_model_head_name(
    model: *const dashrank_model,
    index: usize,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> dashrank_status {
    guard(|| {
        let m = unsafe { try_handle(model, "model") }?;
        let head = head_at(m, index)?;
        unsafe { write_str(&head.name, buf, len, needed) }
    })
}

/// Writes the score polarity of head `index` (`DASHRANK_POLARITY_*`) into `*out`.
/// `dashrank_top_k` already orders best first; this is for callers of `dashrank_score`.
#[no_mangle]
pub unsafe extern "C" fn dashrank_model_head_polarity(
    model: *const dashrank_model,
    index: usize,
    out: *mut u32,
) -> dashrank_status {
    guard(|| {
        let m = unsafe { try_handle(model, "model") }?;
        let out = unsafe { try_mut(out, "out") }?;
        *out = match head_at(m, index)?.polarity {
            ScorePolarity::LowerIsBetter => DASHRANK_POLARITY_LOWER_IS_BETTER,
            ScorePolarity::HigherIsBetter => DASHRANK_POLARITY_HIGHER_IS_BETTER,
        };
        Ok(())
    })
}

/// Writes the model's family and name (e.g. `waco: waco-spmm`) into `buf`, for logs.
/// Size reporting as in `dashrank_status_message`.
#[no_mangle]
pub unsafe extern "C" fn dashrank_model_describe(
    model: *const dashrank_model,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> dashrank_status {
    guard(|| {
        let m = unsafe { try_handle(model, "model") }?;
        let info = m.info();
        let text = format!(
            "{}: {} (backend {}, {} heads)",
            info.family,
            info.model_name,
            info.backend,
            info.heads.len()
        );
        unsafe { write_str(&text, buf, len, needed) }
    })
}

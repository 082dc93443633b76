//! Dense-graph execution behind one small trait.
//!
//! The matrix embedder, schedule embedders and predictors are ordinary ONNX graphs run by
//! `ort`, either on its pure-Rust tract backend (feature `tract`, the default) or on ONNX
//! Runtime loaded at run time (feature `onnxruntime`). A backend that was compiled out still
//! exists and returns [`ErrorKind::BackendUnavailable`](crate::ErrorKind::BackendUnavailable).
//!
//! `ort`'s backend choice is process-wide (first initialisation wins); see [`Backend`].

use std::path::PathBuf;

use ndarray::{Array2, ArrayView2};

use crate::error::Result;

mod backend;
#[cfg(any(feature = "tract", feature = "onnxruntime"))]
mod ort_graph;

pub(crate) use backend::build_graph;

/// Which engine executes the dense ONNX graphs (matrix embedder, schedule embedders,
/// predictors). The featurizer always runs natively.
///
/// `ort` selects its engine once per process: the first model that uses `ort` fixes it, and
/// a later model asking for the other `ort` backend in the same process fails with a clear
/// error.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Backend {
    /// dashrank's own engine (the default): every graph the exporter writes is compiled at
    /// load into folded native layers (see `model::native`); a graph it does not recognise
    /// runs on [`LoadOptions::fallback`](crate::LoadOptions::fallback). Pure Rust, no
    /// external library, bit-identical scores on every machine.
    #[default]
    Native,
    /// tract (pure Rust) through `ort-tract`, for every dense graph (feature `tract`).
    Tract,
    /// ONNX Runtime, loaded from this shared library (e.g. the `libonnxruntime.so.*` shipped
    /// in the `onnxruntime` PyPI wheel under `onnxruntime/capi/`), for every dense graph
    /// (feature `onnxruntime`).
    OnnxRuntime {
        /// Path to `libonnxruntime.so` (or `.dylib` / `.dll`).
        library: PathBuf,
    },
}

impl Backend {
    /// Short name used in [`ModelInfo`](crate::model::ModelInfo): `native`, `tract`,
    /// `onnxruntime`.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Native => "native",
            Backend::Tract => "tract",
            Backend::OnnxRuntime { .. } => "onnxruntime",
        }
    }

    /// The fallback [`LoadOptions::fallback`](crate::LoadOptions::fallback) uses by default:
    /// tract when the `tract` feature is compiled in, otherwise none.
    pub fn default_fallback() -> Option<Backend> {
        cfg!(feature = "tract").then_some(Backend::Tract)
    }
}

/// A loaded dense graph: named 2-D f32 inputs → its single 2-D f32 output.
///
/// # Threads
/// Implementations are `Send + Sync` and run through `&self`; backends whose sessions need
/// `&mut` keep an internal pool.
pub(crate) trait DenseGraph: Send + Sync + std::fmt::Debug {
    /// Runs the graph. `inputs` are `(input name, [rows, cols] view)`.
    fn run(&self, inputs: &[(&str, ArrayView2<'_, f32>)]) -> Result<Array2<f32>>;
}

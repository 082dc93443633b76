//! The one place where the backend is chosen and initialised.

use std::sync::Mutex;

use super::{Backend, DenseGraph};
use crate::error::{Error, ErrorKind, Result};

/// The backend `ort` was initialised with in this process, if any.
static ACTIVE: Mutex<Option<Backend>> = Mutex::new(None);

/// The process-wide ort environment, created with the backend.
#[cfg(any(feature = "tract", feature = "onnxruntime"))]
static ENVIRONMENT: std::sync::OnceLock<ort::environment::Environment> = std::sync::OnceLock::new();

#[cfg(any(feature = "tract", feature = "onnxruntime"))]
fn store_environment(builder: ort::environment::EnvironmentBuilder, backend: &str) -> Result<()> {
    let env = builder
        .with_name("dashrank")
        .build()
        .map_err(|e| unavailable(backend, &format!("creating the ort environment: {e}")))?;
    let _ = ENVIRONMENT.set(env);
    Ok(())
}

/// Initialises `backend` for this process, or checks it matches the one already active.
fn ensure_backend(backend: &Backend) -> Result<()> {
    let mut active = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
    match active.as_ref() {
        Some(current) if current == backend => return Ok(()),
        Some(current) => {
            return Err(ErrorKind::BackendUnavailable {
                backend: backend.name().to_string(),
                reason: format!(
                    "this process already runs ort on the {} backend ({current:?}); ort's backend is process-wide, so every model in one process must use the same one",
                    current.name()
                ),
            }
            .into())
        }
        None => {}
    }
    init(backend)?;
    *active = Some(backend.clone());
    Ok(())
}

#[cfg(feature = "tract")]
fn init_tract() -> Result<()> {
    if ort::set_api(ort_tract::api()) {
        store_environment(ort::init(), "tract")
    } else {
        Err(unavailable(
            "tract",
            "ort's API was already set by another component of this process",
        ))
    }
}

#[cfg(not(feature = "tract"))]
fn init_tract() -> Result<()> {
    Err(unavailable(
        "tract",
        "dashrank was built without the `tract` feature",
    ))
}

#[cfg(feature = "onnxruntime")]
fn init_onnxruntime(library: &std::path::Path) -> Result<()> {
    if !library.is_file() {
        return Err(unavailable(
            "onnxruntime",
            &format!("library file {} does not exist", library.display()),
        ));
    }
    let builder = ort::init_from(library).map_err(|e| {
        unavailable(
            "onnxruntime",
            &format!("loading {}: {e}", library.display()),
        )
    })?;
    store_environment(builder, "onnxruntime")
}

#[cfg(not(feature = "onnxruntime"))]
fn init_onnxruntime(_library: &std::path::Path) -> Result<()> {
    Err(unavailable(
        "onnxruntime",
        "dashrank was built without the `onnxruntime` feature",
    ))
}

fn init(backend: &Backend) -> Result<()> {
    match backend {
        Backend::Native => Err(unavailable(
            "native",
            "the native engine is not an ort backend (internal error)",
        )),
        Backend::Tract => init_tract(),
        Backend::OnnxRuntime { library } => init_onnxruntime(library),
    }
}

fn unavailable(backend: &str, reason: &str) -> Error {
    ErrorKind::BackendUnavailable {
        backend: backend.to_string(),
        reason: reason.to_string(),
    }
    .into()
}

/// Builds an executor for one dense graph.
pub(crate) fn build_graph(
    backend: &Backend,
    name: &str,
    bytes: &[u8],
    output: &str,
    intra_threads: Option<usize>,
) -> Result<Box<dyn DenseGraph>> {
    ensure_backend(backend)?;
    #[cfg(any(feature = "tract", feature = "onnxruntime"))]
    {
        let env = ENVIRONMENT.get().ok_or_else(|| {
            unavailable(
                backend.name(),
                "ort environment missing after initialisation",
            )
        })?;
        let graph = super::ort_graph::OrtGraph::new(env, name, bytes, output, intra_threads)?;
        Ok(Box::new(graph))
    }
    #[cfg(not(any(feature = "tract", feature = "onnxruntime")))]
    {
        let _ = (name, bytes, output, intra_threads);
        Err(unavailable(
            backend.name(),
            "dashrank was built without any ONNX backend",
        ))
    }
}

//! The bundle format (`docs/bundle-format.md`): a directory of ONNX files with metadata, a
//! manifest and provenance hashes, read as untrusted input. Nothing here executes a graph;
//! [`crate::model`] runs what this module decodes.
//!
//! Modules, each importing only those listed before it: `names` (file names, format
//! versions, roles, provenance keys: a leaf), `limits` (what a bundle may make the library
//! read, and the protobuf pre-scan), `onnx_proto` (the ONNX schema subset), `manifest`
//! (`manifest.json` and the integrity report), `dir` (reading the directory), `decode`
//! (files → metadata, featurizer spec, dense-graph bytes), `integrity` (manifest and
//! provenance checks of a decoded bundle), `info` (the typed model facts).

mod decode;
mod dir;
pub mod info;
mod integrity;
mod limits;
mod manifest;
mod names;
pub(crate) mod onnx_proto;

pub(crate) use decode::{tensor_to_f32, Bundle, BundleFile};
pub(crate) use integrity::verify;
pub use limits::{
    BundleLimits, DEFAULT_MAX_BUNDLE_BYTES, DEFAULT_MAX_FILES, DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_PROTO_ELEMENTS, DEFAULT_MAX_TENSOR_ELEMENTS, DEFAULT_NATIVE_BUDGET_BASE,
    DEFAULT_NATIVE_BUDGET_PER_BYTE, MAX_PROTO_DEPTH,
};
pub use manifest::{BundleIntegrity, ManifestEntry};

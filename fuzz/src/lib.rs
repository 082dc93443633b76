//! Bodies of dashrank's fuzz targets, one function per untrusted input.
//!
//! Each `fuzz/fuzz_targets/<name>.rs` calls `dashrank_fuzz::<name>(data)`; the root crate's
//! `tests/fuzz_regressions.rs` includes this file with `#[path]` and replays every input kept
//! under `fuzz/regressions/<name>/` through [`run`], so a crash found once stays fixed under
//! a plain `cargo test`. Only dashrank's public API is used.
//!
//! A body must never panic on any input: errors are fine (and checked to be well-formed),
//! panics and aborts are bugs. Accepted inputs are checked for round trips and invariants,
//! so a silently wrong result fails too.

mod capi;
mod capi_support;
mod graphs;
mod inputs;
mod onnx_write;
mod schedules;

pub use capi::capi_sequence;
pub use graphs::{onnx_graph, onnx_graph_loads};
pub use inputs::{bundle, bundle_loads, mtx, waco_csr};
pub use schedules::{schedule_lines, spade_csv, sparsetir_json, taco_commands};

/// Every target name, in `fuzz/Cargo.toml` order.
pub const TARGETS: &[&str] = &[
    "mtx",
    "waco_csr",
    "schedule_lines",
    "taco_commands",
    "spade_csv",
    "sparsetir_json",
    "bundle",
    "capi_sequence",
    "onnx_graph",
];

/// Runs target `name` on `data`; `false` if there is no such target.
pub fn run(name: &str, data: &[u8]) -> bool {
    match name {
        "mtx" => mtx(data),
        "waco_csr" => waco_csr(data),
        "schedule_lines" => schedule_lines(data),
        "taco_commands" => taco_commands(data),
        "spade_csv" => spade_csv(data),
        "sparsetir_json" => sparsetir_json(data),
        "bundle" => bundle(data),
        "capi_sequence" => capi_sequence(data),
        "onnx_graph" => onnx_graph(data),
        _ => return false,
    }
    true
}

/// The repository root: the compiling crate's directory (root tests) or its parent (the
/// fuzz crate).
pub fn repo_root() -> std::path::PathBuf {
    let manifest = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if manifest.join("tests/data/fixtures").is_dir() {
        return manifest;
    }
    match manifest.parent() {
        Some(parent) if parent.join("tests/data/fixtures").is_dir() => parent.to_path_buf(),
        _ => panic!("no tests/data/fixtures in or above {}", manifest.display()),
    }
}

/// Asserts an error is well-formed: a non-empty message that is not a panic in disguise.
fn check_error(e: &dashrank::Error) {
    let text = e.to_string();
    assert!(!text.is_empty(), "empty error message: {e:?}");
    assert!(!text.contains("panicked"), "panic text in an error: {text}");
}

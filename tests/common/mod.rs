//! Shared helpers for the integration tests: backend choice, fixtures, tolerances.
//!
//! The same test bodies run on every backend: the default build uses tract; the
//! `--no-default-features --features onnxruntime` build uses ONNX Runtime from the library
//! named by `DASHRANK_ORT_LIB` (scripts/test.sh sets it with scripts/ort-lib.sh).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use dashrank::{Backend, LoadOptions, Model};
use serde_json::Value;

/// The backend the suite runs on: `DASHRANK_TEST_BACKEND` = `native` (the default),
/// `tract` (feature `tract`) or `onnxruntime` (feature `onnxruntime`, library from
/// `DASHRANK_ORT_LIB`, which scripts/test.sh sets with scripts/ort-lib.sh).
pub fn backend() -> Backend {
    match std::env::var("DASHRANK_TEST_BACKEND").as_deref() {
        Ok("tract") => Backend::Tract,
        Ok("onnxruntime") => ort_backend(),
        Ok("native") | Err(_) => Backend::Native,
        Ok(other) => panic!("DASHRANK_TEST_BACKEND={other}: expected native, tract or onnxruntime"),
    }
}

/// The `ort` backend compiled into this build (tract first), if any: the reference the
/// native engine is compared with.
pub fn reference_backend() -> Option<Backend> {
    if cfg!(feature = "tract") {
        Some(Backend::Tract)
    } else if cfg!(feature = "onnxruntime") && std::env::var_os("DASHRANK_ORT_LIB").is_some() {
        Some(ort_backend())
    } else {
        None
    }
}

fn ort_backend() -> Backend {
    let lib = std::env::var_os("DASHRANK_ORT_LIB")
        .expect("DASHRANK_ORT_LIB must name libonnxruntime (run `bash scripts/ort-lib.sh`)");
    Backend::OnnxRuntime {
        library: PathBuf::from(lib),
    }
}

pub fn options() -> LoadOptions {
    LoadOptions {
        backend: backend(),
        ..LoadOptions::default()
    }
}

/// The workspace root (these helpers serve the tests of the core and of the face crates).
pub fn repo() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if dir.join("tests/data").is_dir() {
        dir
    } else {
        dir.join("..")
    }
}

pub fn shared() -> PathBuf {
    repo().join("../shared")
}

pub fn fixture(name: &str) -> PathBuf {
    repo().join("tests/data/fixtures").join(name)
}

pub fn load(dir: &Path) -> Model {
    Model::load(dir, &options()).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
}

pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("array of numbers")
        .iter()
        .map(|x| x.as_f64().expect("number") as f32)
        .collect()
}

pub fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("array of integers")
        .iter()
        .map(|x| x.as_u64().expect("integer") as usize)
        .collect()
}

/// Asserts |a − b| ≤ atol + rtol·|b| elementwise; returns the largest absolute error seen.
/// The pattern of a golden file's `patterns` entry (`rows`, `cols`, `row_ptr`, `col_idx`).
pub fn golden_pattern(p: &Value) -> dashrank::CsrPattern {
    dashrank::CsrPattern::new(
        p["rows"].as_u64().unwrap() as usize,
        p["cols"].as_u64().unwrap() as usize,
        usizes(&p["row_ptr"]),
        usizes(&p["col_idx"])
            .into_iter()
            .map(|c| c as u32)
            .collect(),
    )
    .unwrap()
}

pub fn assert_close(what: &str, got: &[f32], want: &[f32], rtol: f32, atol: f32) -> f32 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0.0f32;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        assert!(
            err <= atol + rtol * w.abs(),
            "{what}[{i}]: got {g}, want {w} (|err| {err} > atol {atol} + rtol {rtol}·|want|)"
        );
        worst = worst.max(err);
    }
    worst
}

/// Returns None (and prints why) when ../shared data is absent.
pub fn shared_or_skip(rel: &str) -> Option<PathBuf> {
    let p = shared().join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: {} not found (../shared is not beside the repository)",
            p.display()
        );
        None
    }
}

/// Asserts |a − b| ≤ rtol·(|b| + max|want|) + atol elementwise: float32 results whose sums
/// were reordered (another engine, BLAS kernel or folding) move by a few ulps of the
/// *vector's* scale, not of each value (a value near 0 that is a sum of O(1) terms moves as
/// much as a large one). Returns the largest error relative to the vector's scale.
pub fn assert_close_scaled(what: &str, got: &[f32], want: &[f32], rtol: f32, atol: f32) -> f32 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want
        .iter()
        .filter(|w| w.is_finite())
        .fold(0.0f32, |m, w| m.max(w.abs()));
    let mut worst = 0.0f32;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() {
            assert!(g.is_nan(), "{what}[{i}]: got {g}, want NaN");
            continue;
        }
        let err = (g - w).abs();
        assert!(
            err <= atol + rtol * (w.abs() + scale),
            "{what}[{i}]: got {g}, want {w} (|err| {err} > atol {atol} + rtol {rtol}·(|want| + scale {scale}))"
        );
        worst = worst.max(err / scale.max(f32::MIN_POSITIVE));
    }
    worst
}

/// `manifest.json` (docs/bundle-format.md §7.2) vouching for `files` (name, bytes) as they
/// are: what `python -m dashrank_onnx.manifest DIR --write` writes after a deliberate edit.
pub fn manifest_for(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    use sha2::Digest;
    let mut listed = serde_json::Map::new();
    for (name, bytes) in files.iter().filter(|(n, _)| n.ends_with(".onnx")) {
        let sha: String = sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        listed.insert(
            name.clone(),
            serde_json::json!({"bytes": bytes.len(), "sha256": sha}),
        );
    }
    serde_json::json!({"format": "dashrank-manifest", "version": 1, "algorithm": "sha256",
                       "files": listed})
    .to_string()
    .into_bytes()
}

/// Rewrites `dir/manifest.json` for the `.onnx` files of `dir` as they are.
pub fn write_manifest(dir: &Path) {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "onnx") {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            files.push((name, std::fs::read(&p).unwrap()));
        }
    }
    std::fs::write(dir.join("manifest.json"), manifest_for(&files)).unwrap();
}

//! The CLI as the tests run it: from the repository root, on the backend under test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the CLI from the repository root, with the backend flags of `DASHRANK_TEST_BACKEND`
/// on every command that loads a model, so the same tests cover every backend.
pub fn dashrank(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dashrank"));
    cmd.args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    if args.contains(&"--model") {
        cmd.args(backend_args());
    }
    cmd.output().expect("running dashrank")
}

/// The CLI flags selecting the backend under test: none for the native engine (the
/// default), else as `DASHRANK_TEST_BACKEND` says (`tract`, or `onnxruntime` with
/// `DASHRANK_ORT_LIB`), as `tests/common` does for the library tests.
pub fn backend_args() -> Vec<String> {
    match std::env::var("DASHRANK_TEST_BACKEND").as_deref() {
        Ok("tract") => vec!["--backend".into(), "tract".into()],
        Ok("onnxruntime") => {
            let lib = std::env::var("DASHRANK_ORT_LIB").expect(
                "DASHRANK_ORT_LIB must name libonnxruntime (run `bash scripts/ort-lib.sh`)",
            );
            vec![
                "--backend".into(),
                "onnxruntime".into(),
                "--ort-lib".into(),
                lib,
            ]
        }
        _ => Vec::new(),
    }
}

/// A fresh scratch directory `PREFIX-NAME-PID` under Cargo's per-target tmp dir: the process
/// id keeps two test runs of one checkout (say, two CI jobs) from sharing files.
pub fn scratch(prefix: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{prefix}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

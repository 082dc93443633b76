//! The `dashrank` binary end to end: `eval` on the real WACO models and collected runtimes in
//! ../shared, thresholds and exit codes, bad inputs, `rank --json`, `inspect --check`.
//!
//! Exit codes under test: 0 success, 1 error, 2 failed `eval` threshold. Tests that need the
//! converted models (`bash scripts/setup.sh`) or ../shared print `SKIPPED: ...` and return
//! when those are absent.

mod cli_support;

use cli_support::dashrank;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn waco() -> PathBuf {
    repo().join("../shared/data/waco")
}

/// The model directory and ../shared data, or `None` after printing why the test is skipped.
fn real(kernel: &str) -> Option<PathBuf> {
    let model = repo().join("models").join(format!("waco-{kernel}"));
    if !model.is_dir() {
        eprintln!(
            "SKIPPED: {} missing (run `bash scripts/setup.sh`)",
            model.display()
        );
        return None;
    }
    if !waco().join("collected").is_dir() || !waco().join("matrices").is_dir() {
        eprintln!("SKIPPED: {} missing", waco().display());
        return None;
    }
    Some(model)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    cli_support::scratch("cli", name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn eval_collected(kernel: &str, collected: &str) {
    let Some(model) = real(kernel) else { return };
    let dir = scratch(&format!("eval-{kernel}"));
    let (json, svg) = (dir.join("report.json"), dir.join("svg"));
    let measured = waco().join("collected").join(collected);
    let matrices = waco().join("matrices");
    let out = dashrank(&[
        "eval",
        "--model",
        s(&model),
        "--measured",
        s(&measured),
        "--matrices",
        s(&matrices),
        "--json-out",
        s(&json),
        "--svg-dir",
        s(&svg),
        "--min-tau",
        "0.3",
    ]);
    let stdout = text(&out.stdout);
    println!("{stdout}");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    for want in [
        "matrix",
        "tau",
        "rho",
        "pairs",
        "top1_ape%",
        "top5_ape%",
        "mean",
        "median",
    ] {
        assert!(stdout.contains(want), "table lacks '{want}':\n{stdout}");
    }
    // The three collected matrices that have a .csr; the others are reported as skipped.
    let evaluated = ["Trec6_16x16_9", "crystk01_2x16_1", "nemspmm1_16x4_0"];
    for m in evaluated {
        assert!(stdout.lines().any(|l| l.starts_with(m)), "no row for {m}");
    }
    assert!(stdout.contains("skipped") && stdout.contains("EX1_8x8_4"));
    // No --default: speedups are n/a.
    assert!(stdout.contains("n/a"));

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = report["matrices"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["matrix"].as_str().unwrap()).collect();
    assert_eq!(names, evaluated, "sorted by matrix name");
    for r in rows {
        let tau = r["kendall_tau"].as_f64().expect("per-matrix tau");
        assert!((-1.0..=1.0).contains(&tau) && tau >= 0.3, "{r}");
        assert!(r["spearman_rho"].as_f64().is_some());
        assert!(r["top1_ape_percent"].as_f64().unwrap() >= 0.0);
        assert!(r["top1_speedup_over_default"].is_null());
        assert!(r["candidates"].as_u64().unwrap() > 50);
    }
    assert_eq!(report["aggregate"]["matrices"], 3);
    assert!(report["aggregate"]["kendall_tau"]["median"]
        .as_f64()
        .is_some());
    assert_eq!(report["passed"], true);
    assert!(!report["skipped"].as_array().unwrap().is_empty());
    for m in evaluated {
        let plot = std::fs::read_to_string(svg.join(format!("{m}.svg"))).unwrap();
        assert!(plot.starts_with("<svg") && plot.trim_end().ends_with("</svg>"));
        assert!(
            plot.matches("<circle").count() > 50,
            "one point per candidate"
        );
    }
}

#[test]
fn eval_spmm_collected() {
    eval_collected("spmm", "SpMM");
}

#[test]
fn eval_sddmm_collected() {
    eval_collected("sddmm", "SDDMM");
}

#[test]
fn eval_failing_threshold_exits_2_naming_matrix_and_metric() {
    let Some(model) = real("spmm") else { return };
    let dir = scratch("threshold");
    let json = dir.join("report.json");
    let measured = waco().join("collected/SpMM");
    let matrices = waco().join("matrices");
    let out = dashrank(&[
        "eval",
        "--model",
        s(&model),
        "--measured",
        s(&measured),
        "--matrices",
        s(&matrices),
        "--min-tau",
        "0.99",
        "--json-out",
        s(&json),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains("threshold failed: Trec6_16x16_9: Kendall tau")
            && stderr.contains("min_tau 0.99"),
        "{stderr}"
    );
    // The report is still written, and records the failure.
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["passed"], false);
    assert!(!report["failures"].as_array().unwrap().is_empty());
}

/// The CSV form (`schedule,ms`), `--default`, and byte-identical reports across runs.
#[test]
fn eval_csv_with_default_is_deterministic() {
    let Some(model) = real("spmm") else { return };
    let dir = scratch("csv");
    let measured = dir.join("measured");
    let matrices = dir.join("matrices");
    std::fs::create_dir_all(&measured).unwrap();
    std::fs::create_dir_all(&matrices).unwrap();
    let name = "Trec6_16x16_9";
    let collected =
        std::fs::read_to_string(waco().join(format!("collected/SpMM/{name}.txt"))).unwrap();
    let mut csv = String::from("schedule,ms\n");
    for line in collected.lines().filter(|l| !l.trim().is_empty()) {
        let (schedule, ms) = line.split_once('=').unwrap();
        csv += &format!("\"{}\",{}\n", schedule.trim(), ms.trim());
    }
    std::fs::write(measured.join(format!("{name}.csv")), csv).unwrap();
    std::fs::copy(
        waco().join(format!("matrices/{name}.csr")),
        matrices.join(format!("{name}.csr")),
    )
    .unwrap();
    let default = collected
        .lines()
        .next()
        .unwrap()
        .split('=')
        .next()
        .unwrap()
        .trim();
    let mut reports = Vec::new();
    for run in 0..2 {
        let json = dir.join(format!("report{run}.json"));
        let out = dashrank(&[
            "eval",
            "--model",
            s(&model),
            "--measured",
            s(&measured),
            "--matrices",
            s(&matrices),
            "--default",
            default,
            "--json-out",
            s(&json),
        ]);
        assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        let row = stdout.lines().find(|l| l.starts_with(name)).unwrap();
        assert!(row.contains('x') && !row.contains("n/a"), "speedups: {row}");
        reports.push(std::fs::read_to_string(&json).unwrap());
    }
    assert_eq!(reports[0], reports[1], "eval output is deterministic");
    let report: Value = serde_json::from_str(&reports[0]).unwrap();
    let row = &report["matrices"][0];
    assert!(row["default_ms"].as_f64().unwrap() > 0.0);
    let speedup = row["top1_speedup_over_default"].as_f64().unwrap();
    let expected = row["default_ms"].as_f64().unwrap() / row["top1_ms"].as_f64().unwrap();
    assert!((speedup - expected).abs() < 1e-5, "{speedup} vs {expected}");
}

#[test]
fn missing_model_dir_exits_1() {
    let out = dashrank(&["inspect", "--model", "models/does-not-exist"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: model directory models/does-not-exist does not exist"),
        "{stderr}"
    );
}

#[test]
fn missing_candidates_file_exits_1() {
    let out = dashrank(&[
        "rank",
        "--model",
        "models/waco-spmm",
        "--matrix",
        "tests/data/bad/good-small.csr",
        "--candidates",
        "no/such/candidates.txt",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("reading candidates no/such/candidates.txt"),
        "{stderr}"
    );
}

#[test]
fn corrupt_matrix_exits_1() {
    let Some(model) = real("spmm") else { return };
    let candidates = waco().join("collected/SpMM/Trec6_16x16_9.txt");
    let out = dashrank(&[
        "rank",
        "--model",
        s(&model),
        "--matrix",
        "tests/data/bad/truncated.csr",
        "--candidates",
        s(&candidates),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: reading matrix tests/data/bad/truncated.csr: "),
        "{stderr}"
    );

    // In eval, a corrupt matrix is an error too (not a silent skip).
    let dir = scratch("corrupt");
    let matrices = dir.join("matrices");
    std::fs::create_dir_all(&matrices).unwrap();
    std::fs::copy(
        repo().join("tests/data/bad/truncated.csr"),
        matrices.join("Trec6_16x16_9.csr"),
    )
    .unwrap();
    let measured = waco().join("collected/SpMM");
    let out = dashrank(&[
        "eval",
        "--model",
        s(&model),
        "--measured",
        s(&measured),
        "--matrices",
        s(&matrices),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("reading matrix") && stderr.contains("Trec6_16x16_9.csr"),
        "{stderr}"
    );
}

#[test]
fn eval_bad_directories_and_usage_exit_1() {
    let out = dashrank(&[
        "eval",
        "--model",
        "models/waco-spmm",
        "--measured",
        "no/such/dir",
        "--matrices",
        "tests/data",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("measured-data directory") && stderr.contains("no/such/dir"),
        "{stderr}"
    );
    // A usage error is 1 as well: 2 is reserved for failed thresholds.
    let out = dashrank(&["eval", "--model", "models/waco-spmm"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--measured"));
}

#[test]
fn help_has_examples() {
    let out = dashrank(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("Examples:") && stdout.contains("dashrank eval"),
        "{stdout}"
    );
    let out = dashrank(&["eval", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("--min-tau"));
}

#[test]
fn rank_json() {
    let Some(model) = real("spmm") else { return };
    let matrix = waco().join("matrices/Trec6_16x16_9.csr");
    let candidates = waco().join("collected/SpMM/Trec6_16x16_9.txt");
    let out = dashrank(&[
        "rank",
        "--model",
        s(&model),
        "--matrix",
        s(&matrix),
        "--candidates",
        s(&candidates),
        "--top",
        "5",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &report[0];
    assert!(first["nnz"].as_u64().unwrap() > 0 && first["rows"].as_u64().unwrap() > 0);
    let top = first["top"].as_array().unwrap();
    assert_eq!(top.len(), 5);
    assert!(top.iter().all(|t| t["measured_ms"].as_f64().is_some()));
    assert!(!top[0]["schedule"].as_str().unwrap().contains('='));
    assert!(first["kendall_tau"].as_f64().is_some());
}

#[test]
fn inspect_check() {
    let Some(model) = real("sddmm") else { return };
    let out = dashrank(&["inspect", "--model", s(&model), "--check"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("head cpu-taco/sddmm: kernel"), "{stdout}");
    assert!(stdout.contains("check: OK"), "{stdout}");
    // Which engine runs each graph, and (on the native engine) the head's arithmetic.
    let engine = match std::env::var("DASHRANK_TEST_BACKEND").as_deref() {
        Ok("tract") => "tract",
        Ok("onnxruntime") => "onnxruntime",
        _ => "native",
    };
    assert!(
        stdout.contains(&format!("cpu-taco__sddmm.predictor.onnx: {engine}")),
        "{stdout}"
    );
    assert_eq!(
        stdout.contains("native work: "),
        engine == "native",
        "{stdout}"
    );
}

/// Rewrites `dir/manifest.json` for its `.onnx` files as they are (what
/// `python -m dashrank_onnx.manifest DIR --write` does).
fn rewrite_manifest(dir: &Path) {
    use sha2::Digest;
    let mut files = serde_json::Map::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "onnx") {
            let bytes = std::fs::read(&p).unwrap();
            let sha: String = sha2::Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            files.insert(
                p.file_name().unwrap().to_string_lossy().into_owned(),
                serde_json::json!({"bytes": bytes.len(), "sha256": sha}),
            );
        }
    }
    let m = serde_json::json!({"format": "dashrank-manifest", "version": 1, "algorithm": "sha256",
                               "files": files});
    std::fs::write(dir.join("manifest.json"), m.to_string()).unwrap();
}

#[test]
fn inspect_prints_the_manifest_and_provenance_override_is_explicit() {
    let fixture = repo().join("tests/data/fixtures/tiny-cognate");
    let out = dashrank(&["inspect", "--model", s(&fixture)]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("featurizer sha256: ") && stdout.contains("mapper sha256: "),
        "{stdout}"
    );
    assert!(stdout.contains("manifest (10 files"), "{stdout}");
    assert!(
        stdout.contains("featurizer.onnx (featurizer)")
            && stdout.contains("spade__spmm.predictor.onnx (predictor, head spade/spmm)"),
        "{stdout}"
    );
    // The spade/spmm head of another COGNATE model copied in, as a user would.
    let dir = scratch("foreign-head");
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    for entry in std::fs::read_dir(repo().join("tests/data/bad/foreign-head")).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    let out = dashrank(&["inspect", "--model", s(&dir)]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("head 'spade/spmm'") && stderr.contains("--allow-provenance-mismatch"),
        "{stderr}"
    );
    // The override does not skip the manifest; after a deliberate rewrite it loads, with warnings.
    let out = dashrank(&["inspect", "--model", s(&dir), "--allow-provenance-mismatch"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("does not match manifest.json"));
    rewrite_manifest(&dir);
    let out = dashrank(&["inspect", "--model", s(&dir), "--allow-provenance-mismatch"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stderr.matches("warning: ").count(), 4, "{stderr}");
    assert_eq!(
        stdout.matches("provenance override: ").count(),
        4,
        "{stdout}"
    );
}

//! The `dashrank` binary on the whole workflow: `rank --space` (default injected, table, JSON,
//! toolchain text), `tune --measure-cmd`, `eval --shard` + `merge` (byte for byte equal to one
//! unsharded run), and the defects fixed in `rank` (empty or all-invalid files, line numbers),
//! `eval` (empty measured file) and `inspect --check` (COGNATE `integer` fields).
//!
//! Everything runs on the committed fixtures (`tests/data/fixtures`) and files written here;
//! `eval_shards_merge_real_waco` also uses the real WACO model and data when present.

#[path = "../../tests/common/mod.rs"]
mod common;

mod cli_support;

use cli_support::{backend_args, dashrank};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dashrank::schedule::space::{AnyConfig, AnySpace, MatrixShape, TacoSpace};
use dashrank::{CostModel, CsrPattern, Kernel, Model, SpaceCandidates, SpaceTopK};
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn fixture(name: &str) -> String {
    format!("tests/data/fixtures/{name}")
}

const MATRIX: &str = "ffi-examples/data/band96.mtx";

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Exit 1 with `needle` in stderr.
fn fails(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains(needle), "{stderr:?} lacks {needle:?}");
}

fn scratch(name: &str) -> PathBuf {
    cli_support::scratch("cli-space", name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn rank_space_taco_equals_the_library_with_the_default_injected() {
    let model_dir = fixture("tiny-waco-spmm");
    let args = [
        "rank",
        "--model",
        &model_dir,
        "--matrix",
        MATRIX,
        "--space",
        "taco",
        "--max-split",
        "4",
        "--top",
        "4",
    ];
    let json: Value =
        serde_json::from_str(&ok(&dashrank(&[&args[..], &["--format", "json"]].concat()))).unwrap();
    let (cands, top) = library_top_4_runnable(&model_dir);
    let report = &json[0];
    assert_eq!(report["matrix"], "band96");
    assert_eq!(report["space"], "taco-spmm");
    assert_eq!(report["candidates"].as_u64().unwrap() as usize, cands.len());
    let entries = report["entries"].as_array().unwrap();
    assert_eq!(entries.len(), top.entries.len());
    for (e, want) in entries.iter().zip(&top.entries) {
        assert_eq!(e["index"].as_u64().unwrap() as usize, want.index);
        assert_eq!(e["score"].as_f64().unwrap() as f32, want.score);
        assert_eq!(e["is_default"].as_bool().unwrap(), want.is_default);
    }
    assert_eq!(
        entries.iter().filter(|e| e["is_default"] == true).count(),
        1
    );
    let d = entries.iter().find(|e| e["is_default"] == true).unwrap();
    assert_eq!(d["line"], "1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 32");

    // --format taco: stock `taco` command lines of the top 4 and the default (TACO's CSR).
    let text = ok(&dashrank(&[&args[..], &["--format", "taco"]].concat()));
    taco_commands_are_the_entries_rendered(&text, entries, &cands);
    // The table names the default too.
    let table = ok(&dashrank(&args));
    assert!(table.contains("(toolchain default; valid)"), "{table}");
}

/// The library, directly: the taco space (splits up to 4) of the tiny model for `MATRIX`,
/// and its top 4 with the default, layouts over the size limit passed over as the CLI does.
fn library_top_4_runnable(model_dir: &str) -> (SpaceCandidates<AnyConfig>, SpaceTopK) {
    let model = Model::load(repo().join(model_dir), &common::options()).unwrap();
    let pattern = CsrPattern::read_file(repo().join(MATRIX)).unwrap();
    let space = AnySpace::from(TacoSpace::waco_up_to(Kernel::SpMM, 4, 4));
    let cands =
        dashrank::workflow::prepare(&model, None, &space, &MatrixShape::from(&pattern)).unwrap();
    let ops = dashrank::tune::ToolchainOps::new(&cands, "band96").with_pattern(&pattern);
    let embedding = model.embed_matrix(&pattern).unwrap();
    let (top, refused) =
        dashrank::workflow::top_k_runnable(&model, &embedding, &cands, 4, &ops).unwrap();
    assert!(
        refused
            .iter()
            .all(|r| r.reason.contains("layout too large")),
        "{refused:?}"
    );
    (cands, top)
}

/// `--format taco` prints one stock `taco` command per JSON entry, the candidate rendered;
/// the default's is TACO's own CSR, and one `# rank` comment names it.
fn taco_commands_are_the_entries_rendered(
    text: &str,
    entries: &[Value],
    cands: &SpaceCandidates<AnyConfig>,
) {
    let commands: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(commands.len(), entries.len());
    for (c, e) in commands.iter().zip(entries) {
        let index = e["index"].as_u64().unwrap() as usize;
        assert_eq!(*c, cands.render(index, "band96").unwrap());
        let program = dashrank::program::taco::TacoProgram::parse_command_line(c).unwrap();
        assert!(
            c.starts_with("taco \"C(") && c.contains(" -f=A:") && c.contains(" -s=\"parallelize("),
            "{c}"
        );
        if e["is_default"] == true {
            assert!(
                c.starts_with("taco \"C(i,j)=A(i,k)*B(k,j)\" -f=C:dd -f=A:ds -f=B:dd "),
                "{c}"
            );
            assert!(!c.contains("bound("), "TACO's own CSR has no bound: {c}");
        }
        assert!(program.threads() >= 1);
    }
    let ranked = text.lines().filter(|l| l.starts_with("# rank "));
    assert_eq!(
        ranked
            .filter(|l| l.ends_with(", toolchain default"))
            .count(),
        1
    );
}

#[test]
fn rank_space_spade_and_sparsetir_pick_heads_by_target_and_kernel() {
    let cognate = fixture("tiny-cognate");
    let base = [
        "rank",
        "--model",
        cognate.as_str(),
        "--matrix",
        MATRIX,
        "--top",
        "3",
    ];
    let out = ok(&dashrank(
        &[
            &base[..],
            &["--space", "spade", "--kernel", "sddmm", "--format", "taco"],
        ]
        .concat(),
    ));
    let rows: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 4);
    for r in rows {
        assert!(
            r.starts_with("band96, ") && r.split(", ").count() == 7,
            "{r}"
        );
    }
    let json: Value = serde_json::from_str(&ok(&dashrank(
        &[
            &base[..],
            &["--space", "sparsetir", "--feat-size", "64", "--json"],
        ]
        .concat(),
    )))
    .unwrap();
    assert_eq!(json[0]["head"], "gpu-sparsetir/spmm");
    for e in json[0]["entries"].as_array().unwrap() {
        let cfg: Value = serde_json::from_str(e["toolchain"].as_str().unwrap()).unwrap();
        assert_eq!(cfg["kernel"], "spmm");
    }
    // Two SPADE heads and no --kernel; a head for another target; --max-split on SPADE.
    fails(
        &dashrank(&[&base[..], &["--space", "spade"]].concat()),
        "choose one",
    );
    fails(
        &dashrank(&[&base[..], &["--space", "spade", "--head", "cpu-taco/spmm"]].concat()),
        "not target spade",
    );
    fails(
        &dashrank(
            &[
                &base[..],
                &["--space", "spade", "--kernel", "spmm", "--max-split", "4"],
            ]
            .concat(),
        ),
        "--max-split",
    );
    fails(
        &dashrank(&[&base[..], &["--space", "sparsetir", "--kernel", "spmv"]].concat()),
        "no head for gpu-sparsetir spmv",
    );
    fails(
        &dashrank(&[
            "rank",
            "--model",
            &cognate,
            "--matrix",
            MATRIX,
            "--candidates",
            "x",
            "--space",
            "spade",
        ]),
        "cannot be used with",
    );
}

#[test]
fn tune_runs_the_command_skips_failures_and_keeps_the_fastest() {
    let model = fixture("tiny-waco-spmm");
    let dir = scratch("tune");
    // The second-ranked candidate fails.
    let second = second_ranked_index(&model);
    let report = tune_failing_one_candidate(&model, &second);
    let ms = report["measurements"].as_array().unwrap();
    assert!(ms.len() == 3 || ms.len() == 4, "{report}");
    assert_eq!(ms.iter().filter(|m| m["is_default"] == true).count(), 1);
    let failed: Vec<&Value> = ms.iter().filter(|m| m["ms"].is_null()).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["index"].as_u64().unwrap().to_string(), second);
    assert_eq!(failed[0]["failure"], "exited with status 4");
    for m in ms.iter().filter(|m| !m["ms"].is_null()) {
        let len = m["toolchain"].as_str().unwrap().len() as f64;
        assert_eq!(m["ms"].as_f64().unwrap(), len, "{m}");
    }
    let best = ms
        .iter()
        .filter_map(|m| m["ms"].as_f64().map(|t| (t, m["index"].as_u64().unwrap())))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .unwrap();
    assert_eq!(report["best_ms"].as_f64().unwrap(), best.0);
    let d = ms.iter().find(|m| m["is_default"] == true).unwrap();
    assert_eq!(
        report["speedup_over_default"].as_f64().unwrap(),
        d["ms"].as_f64().unwrap() / best.0
    );
    every_run_timing_out_fails_the_command(&model);
    fails(
        &dashrank(&[
            "tune",
            "--model",
            &model,
            "--matrix",
            MATRIX,
            "--space",
            "taco",
            "--measure-cmd",
            "echo 1",
        ]),
        "has no {}",
    );
    let _ = dir;
}

/// The search's confirmation round: a candidate that ran fast once (each candidate's first
/// run here takes 1 ms, later runs 100 ms, the default always 50 ms) does not beat the default;
/// `--confirm 0` takes the single fast time.
#[test]
fn tune_search_picks_from_the_confirmation_round() {
    let model = fixture("tiny-waco-spmm");
    let dir = scratch("tune-confirm");
    let tune = |confirm: &str| -> Value {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let cmd = r#"f="$RUNS/$DASHRANK_INDEX"; [ "$DASHRANK_INDEX" = "$DEFAULT" ] && echo 50 && exit; [ -e "$f" ] && echo 100 && exit; touch "$f"; echo 1 {}"#;
        let args = format!(
            "tune --model {model} --matrix {MATRIX} --space taco --max-split 2 --top 3 \
             --budget 10 --confirm {confirm} --format json"
        );
        let out = Command::new(env!("CARGO_BIN_EXE_dashrank"))
            .current_dir(repo())
            .env("RUNS", &dir)
            .env("DEFAULT", default_index(&model))
            .args(args.split(' '))
            .args(["--measure-cmd", cmd])
            .args(backend_args())
            .output()
            .unwrap();
        serde_json::from_str(&ok(&out)).unwrap()
    };
    let report = tune("3");
    let ms = report["measurements"].as_array().unwrap();
    assert_eq!(ms.len(), 10, "{report}");
    let again: Vec<&Value> = ms.iter().filter(|m| m["confirmation"] == true).collect();
    assert_eq!(again.len(), 4);
    assert!(ms[6..].iter().all(|m| m["confirmation"] == true));
    assert_eq!(again[0]["is_default"], true);
    assert!(again[1..].iter().all(|m| m["ms"].as_f64() == Some(100.0)));
    assert_eq!(report["best_index"], report["default_index"]);
    assert_eq!(report["best_ms"].as_f64(), Some(50.0));
    assert_eq!(report["speedup_over_default"].as_f64(), Some(1.0));
    let report = tune("0");
    let ms = report["measurements"].as_array().unwrap();
    assert!(ms.iter().all(|m| m["confirmation"] == false), "{report}");
    assert_eq!(report["best_ms"].as_f64(), Some(1.0));
}

#[test]
fn tune_seeds_per_family_spreads_the_seeds_over_loop_orders() {
    let model = fixture("tiny-waco-spmm");
    let seed_orders = |per_family: &str| -> Vec<String> {
        let args = format!(
            "tune --model {model} --matrix {MATRIX} --space taco --max-split 2 --top 4 \
             --budget 5 --seeds-per-family {per_family} --format json"
        );
        let out = Command::new(env!("CARGO_BIN_EXE_dashrank"))
            .current_dir(repo())
            .args(args.split(' '))
            .args(["--measure-cmd", "true {}; echo 1"])
            .args(backend_args())
            .output()
            .unwrap();
        let report: Value = serde_json::from_str(&ok(&out)).unwrap();
        let ms = report["measurements"].as_array().unwrap();
        let seeds: Vec<&Value> = ms.iter().filter(|m| m["is_default"] == false).collect();
        assert_eq!(seeds.len(), 4, "{report}");
        // SpMM lines: 3 splits, then the 6 loops.
        let order = |m: &&Value| {
            let line = m["line"].as_str().unwrap();
            line.split(' ')
                .skip(3)
                .take(6)
                .collect::<Vec<_>>()
                .join(" ")
        };
        seeds.iter().map(order).collect()
    };
    let one = seed_orders("1");
    let distinct: std::collections::HashSet<&String> = one.iter().collect();
    assert_eq!(distinct.len(), 4, "one seed per loop order: {one:?}");
    let ranked = seed_orders("0");
    assert_eq!(ranked[0], one[0], "both start at the model's best");
    assert!(
        ranked
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len()
            < 4,
        "{ranked:?}"
    );
}

/// `tune --measurer taco` with a stand-in for dashrank-taco-measure that logs, per request,
/// the `--instances` its process was started with.
fn tune_with_logging_measurer(dir: &Path, extra: &[&str]) -> (Output, Vec<String>) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let (exe, log) = (dir.join("taco-measure"), dir.join("requests.log"));
    let script = format!(
        "#!/bin/sh\ninst=\nwhile [ $# -gt 0 ]; do [ \"$1\" = --instances ] && inst=$2; shift; done\n\
         echo ready\nwhile read -r line; do echo \"$inst\" >> '{}'; echo 'ok 2.0 2.0 1.0'; done\n",
        log.display()
    );
    std::fs::write(&exe, script).unwrap();
    let mut perms = std::fs::metadata(&exe).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&exe, perms).unwrap();
    let model = fixture("tiny-waco-spmm");
    let args = format!(
        "tune --model {model} --matrix {MATRIX} --space taco --max-split 2 --top 3 --budget 10 \
         --measurer taco --format json --taco-measure {}",
        exe.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_dashrank"))
        .current_dir(repo())
        .args(args.split(' '))
        .args(extra)
        .args(backend_args())
        .output()
        .unwrap();
    let requests = std::fs::read_to_string(&log).unwrap_or_default();
    (out, requests.lines().map(str::to_owned).collect())
}

#[test]
fn tune_confirms_on_more_operand_instances_in_a_second_measurer() {
    let dir = scratch("tune-confirm-instances");
    let (out, requests) = tune_with_logging_measurer(&dir, &["--confirm-instances", "3"]);
    let report: Value = serde_json::from_str(&ok(&out)).unwrap();
    let confirmed: Vec<bool> = report["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["confirmation"] == true)
        .collect();
    assert_eq!(confirmed.iter().filter(|&&c| c).count(), 4, "{report}");
    let want: Vec<&str> = confirmed
        .iter()
        .map(|&c| if c { "3" } else { "1" })
        .collect();
    assert_eq!(requests, want, "each request's process instances, in order");
    // As many instances as the search: one process serves both.
    let (out, requests) =
        tune_with_logging_measurer(&dir, &["--instances", "2", "--confirm-instances", "2"]);
    ok(&out);
    assert_eq!(requests, vec!["2"; 10]);
    let (out, _) = tune_with_logging_measurer(&dir, &["--confirm-instances", "17"]);
    fails(&out, "--confirm-instances 17 must be 1 to 16");
}

/// The toolchain default's index in `rank --space taco --max-split 2`.
fn default_index(model: &str) -> String {
    let top = taco_top_3(model);
    let default = top.iter().find(|e| e["is_default"] == true).unwrap();
    default["index"].as_u64().unwrap().to_string()
}

/// The index of the second of `rank --space taco --max-split 2 --top 3`.
fn second_ranked_index(model: &str) -> String {
    taco_top_3(model)[1]["index"].as_u64().unwrap().to_string()
}

/// The entries of `rank --space taco --max-split 2 --top 3` (the default among them or last).
fn taco_top_3(model: &str) -> Vec<Value> {
    let out = dashrank(&[
        "rank",
        "--model",
        model,
        "--matrix",
        MATRIX,
        "--space",
        "taco",
        "--max-split",
        "2",
        "--top",
        "3",
        "--json",
    ]);
    let ranking: Value = serde_json::from_str(&ok(&out)).unwrap();
    ranking[0]["entries"].as_array().unwrap().clone()
}

/// The JSON report of `tune` of the same top 3 (and the default), the "runtime" the length
/// of the candidate text, candidate `skip` exiting with status 4.
fn tune_failing_one_candidate(model: &str, skip: &str) -> Value {
    let cmd =
        r#"test "$DASHRANK_INDEX" = "$SKIP" && exit 4; printf '%s' {} | wc -c | sed 's/$/ ms/'"#;
    let out = Command::new(env!("CARGO_BIN_EXE_dashrank"))
        .current_dir(repo())
        .env("SKIP", skip)
        .args([
            "tune",
            "--model",
            model,
            "--matrix",
            MATRIX,
            "--space",
            "taco",
            "--max-split",
            "2",
            "--top",
            "3",
            "--strategy",
            "top-k",
            "--all-programs",
            "--measure-cmd",
            cmd,
            "--format",
            "json",
        ])
        .args(backend_args())
        .output()
        .unwrap();
    serde_json::from_str(&ok(&out)).unwrap()
}

/// Every run timing out: each is killed, and the command fails saying why.
fn every_run_timing_out_fails_the_command(model: &str) {
    let started = std::time::Instant::now();
    let out = dashrank(&[
        "tune",
        "--model",
        model,
        "--matrix",
        MATRIX,
        "--space",
        "taco",
        "--max-split",
        "2",
        "--top",
        "1",
        "--strategy",
        "top-k",
        "--timeout",
        "0.2",
        "--measure-cmd",
        "sleep 20; echo 1 {}",
    ]);
    fails(
        &out,
        "every measurement failed (first: timed out after 0.200 s)",
    );
    assert!(started.elapsed().as_secs() < 15);
}

#[test]
fn tune_bounds_timeouts_and_output() {
    let model = fixture("tiny-waco-spmm");
    let tune = |timeout: &str, cmd: &str| {
        // In an address space of 4 GiB: output kept without bound would pass it within the
        // timeout (`yes` writes gigabytes per second).
        Command::new("sh")
            .args(["-c", "ulimit -v 4194304; exec \"$0\" \"$@\""])
            .arg(env!("CARGO_BIN_EXE_dashrank"))
            .current_dir(repo())
            .args([
                "tune",
                "--model",
                &model,
                "--matrix",
                MATRIX,
                "--space",
                "taco",
                "--max-split",
                "2",
                "--top",
                "1",
                "--strategy",
                "top-k",
                "--timeout",
                timeout,
                "--measure-cmd",
                cmd,
            ])
            .args(backend_args())
            .output()
            .unwrap()
    };
    fails(
        &tune("1e20", "echo 1 {}"),
        "--timeout 100000000000000000000 must be a positive number of seconds, at most 604800",
    );
    fails(&tune("0", "echo 1 {}"), "must be a positive number");
    fails(&tune("NaN", "echo 1 {}"), "must be a positive number");
    let started = std::time::Instant::now();
    fails(
        &tune("2", "yes; echo {}"),
        "every measurement failed (first: timed out after 2.000 s)",
    );
    assert!(started.elapsed().as_secs() < 20);
}

/// Runs `dashrank ARGS` with its files limited to 512 bytes: a longer write kills it
/// (SIGXFSZ) in the middle of the file, as a crash or a `kill -9` would.
fn dashrank_killed_writing(args: &[&str]) -> Output {
    Command::new("sh")
        .args(["-c", "ulimit -f 1; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_dashrank"))
        .current_dir(repo())
        .args(args)
        .args(backend_args())
        .output()
        .unwrap()
}

#[test]
fn reports_are_replaced_whole_or_not_at_all() {
    let dir = scratch("torn-reports");
    let (measured, matrices) = synthetic_eval_data(&dir, 3);
    let (report, svgs, part) = (
        dir.join("report.json"),
        dir.join("svg"),
        dir.join("part.json"),
    );
    let model = fixture("tiny-waco-spmm");
    let eval = |extra: &[&str]| -> Vec<String> {
        let base = [
            "eval",
            "--model",
            &model,
            "--measured",
            s(&measured),
            "--matrices",
        ];
        let mut v: Vec<String> = base.iter().map(|a| a.to_string()).collect();
        v.extend(
            [s(&matrices), "--min-tau", "-1"]
                .iter()
                .map(|a| a.to_string()),
        );
        v.extend(extra.iter().map(|a| a.to_string()));
        v
    };
    let argv = |v: &[String]| v.iter().map(String::to_owned).collect::<Vec<_>>();
    let run = |v: Vec<String>, killed: bool| {
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        if killed {
            dashrank_killed_writing(&refs)
        } else {
            dashrank(&refs)
        }
    };
    let good = eval(&["--json-out", s(&report), "--svg-dir", s(&svgs)]);
    ok(&run(argv(&good), false));
    ok(&run(
        eval(&["--shard", "1/1", "--json-out", s(&part)]),
        false,
    ));
    let snapshot = || {
        // A killed writer leaves its temporary `.NAME.tmp-PID` behind: not a report.
        let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&svgs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
            .chain([report.clone(), part.clone()])
            .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
            .collect();
        files.sort();
        files
    };
    let before = snapshot();
    assert!(
        before.iter().all(|(_, b)| b.len() > 512),
        "files too small to tear"
    );
    // Each writer killed in the middle of a file: every previous file is left as it was.
    for args in [
        eval(&["--json-out", s(&report)]),
        eval(&["--svg-dir", s(&svgs)]),
        eval(&["--shard", "1/1", "--json-out", s(&part)]),
        vec![
            "merge".into(),
            s(&part).into(),
            "--json-out".into(),
            s(&report).into(),
        ],
    ] {
        let out = run(args.clone(), true);
        assert_ne!(out.status.code(), Some(0), "{args:?} was not stopped");
        assert!(before == snapshot(), "{args:?} left a torn file");
    }
}

/// Measured data for `n` banded matrices: 30 TACO lines each with made-up runtimes, one
/// empty file, one file without a matrix.
fn synthetic_eval_data(dir: &Path, n: usize) -> (PathBuf, PathBuf) {
    let (measured, matrices) = (dir.join("measured"), dir.join("matrices"));
    std::fs::create_dir_all(&measured).unwrap();
    std::fs::create_dir_all(&matrices).unwrap();
    let space = AnySpace::from(TacoSpace::waco_up_to(Kernel::SpMM, 4, 4));
    let lines: Vec<String> = {
        use dashrank::schedule::space::ScheduleSpace;
        let all = space.enumerate(&MatrixShape::new(64, 64, 64));
        all.iter()
            .step_by(97)
            .take(30)
            .map(|c| space.to_line(c))
            .collect()
    };
    for m in 0..n {
        let size = 40 + 7 * m;
        let mut mtx = format!(
            "%%MatrixMarket matrix coordinate pattern general\n{size} {size} {}\n",
            2 * size - 1
        );
        for i in 1..=size {
            mtx += &format!("{i} {i}\n");
            if i > 1 {
                mtx += &format!("{i} {}\n", i - 1);
            }
        }
        std::fs::write(matrices.join(format!("m{m:02}.mtx")), mtx).unwrap();
        let body: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| format!("{l} = {}\n", 1.0 + ((i * 31 + m * 17) % 23) as f64 / 7.0))
            .collect();
        std::fs::write(measured.join(format!("m{m:02}.txt")), body).unwrap();
    }
    std::fs::write(measured.join("empty.txt"), "# nothing measured\n\n").unwrap();
    std::fs::copy(matrices.join("m00.mtx"), matrices.join("empty.mtx")).unwrap();
    std::fs::write(measured.join("orphan.txt"), &lines[0]).unwrap();
    (measured, matrices)
}

fn eval_shards_merge(model: &str, measured: &Path, matrices: &Path, dir: &Path, shards: usize) {
    let base = [
        "eval",
        "--model",
        model,
        "--measured",
        s(measured),
        "--matrices",
        s(matrices),
        "--min-tau",
        "-1",
    ];
    let full = dir.join("full.json");
    ok(&dashrank(&[&base[..], &["--json-out", s(&full)]].concat()));
    let mut parts = Vec::new();
    for i in (1..=shards).rev() {
        let part = dir.join(format!("part-{i}.json"));
        let shard = format!("{i}/{shards}");
        ok(&dashrank(
            &[&base[..], &["--shard", &shard, "--json-out", s(&part)]].concat(),
        ));
        parts.push(part);
    }
    let merged = dir.join("merged.json");
    let mut args = vec!["merge".to_owned()];
    args.extend(parts.iter().map(|p| p.display().to_string()));
    args.extend(["--json-out".into(), merged.display().to_string()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&dashrank(&argv));
    let (a, b) = (
        std::fs::read(&full).unwrap(),
        std::fs::read(&merged).unwrap(),
    );
    assert!(a == b, "merged report differs from the unsharded one");

    // A missing shard, a repeated shard, a final report instead of a partial one.
    let p = |v: &[&Path]| -> Vec<String> { v.iter().map(|x| x.display().to_string()).collect() };
    let run = |files: Vec<String>| {
        let mut argv = vec!["merge".to_owned()];
        argv.extend(files);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        dashrank(&argv)
    };
    fails(&run(p(&[&parts[0]])), "missing");
    fails(&run(p(&[&parts[0], &parts[0], &parts[1]])), "given twice");
    fails(&run(p(&[&full])), "final report");
}

/// `dashrank merge FILE` in an address space of 1 GiB (so that a merge sized by a count
/// read from the file fails fast instead of exhausting the machine).
fn merge_capped(file: &Path) -> Output {
    Command::new("sh")
        .args(["-c", "ulimit -v 1048576; exec \"$0\" merge \"$1\""])
        .arg(env!("CARGO_BIN_EXE_dashrank"))
        .arg(file)
        .output()
        .unwrap()
}

#[test]
fn merge_bounds_the_shard_count_by_the_reports_given() {
    let dir = scratch("shards-hostile");
    let (measured, matrices) = synthetic_eval_data(&dir, 3);
    let part = dir.join("part.json");
    ok(&dashrank(&[
        "eval",
        "--model",
        &fixture("tiny-waco-spmm"),
        "--measured",
        s(&measured),
        "--matrices",
        s(&matrices),
        "--shard",
        "1/2",
        "--json-out",
        s(&part),
    ]));
    let text = std::fs::read_to_string(&part).unwrap();
    for n in [u64::MAX, i64::MAX as u64, 100_000_000] {
        let hostile = dir.join(format!("part-of-{n}.json"));
        std::fs::write(&hostile, text.replace("\"1/2\"", &format!("\"1/{n}\""))).unwrap();
        let out = merge_capped(&hostile);
        fails(&out, &format!("missing {} of the {n} shards: 2–{n}", n - 1));
    }
    // Missing shards in the middle are ranges too.
    let text = text.replace("\"1/2\"", "\"3/9\"");
    std::fs::write(dir.join("part-3-of-9.json"), text).unwrap();
    fails(
        &merge_capped(&dir.join("part-3-of-9.json")),
        "missing 8 of the 9 shards: 1–2, 4–9",
    );
}

#[test]
fn eval_shards_merge_to_the_unsharded_report_byte_for_byte() {
    let dir = scratch("shards");
    let (measured, matrices) = synthetic_eval_data(&dir, 7);
    eval_shards_merge(&fixture("tiny-waco-spmm"), &measured, &matrices, &dir, 3);
    let full: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("full.json")).unwrap()).unwrap();
    assert_eq!(full["matrices"].as_array().unwrap().len(), 7);
    let skipped = full["skipped"].as_array().unwrap();
    let reason = |name: &str| {
        skipped
            .iter()
            .find(|s| s["measured_file"].as_str().unwrap().ends_with(name))
            .map(|s| s["reason"].as_str().unwrap().to_owned())
    };
    assert_eq!(
        reason("empty.txt").unwrap(),
        "the measured file has no schedule lines"
    );
    assert!(reason("orphan.txt")
        .unwrap()
        .contains("no orphan.csr or orphan.mtx"));
    // More shards than files: the empty shards still merge exactly.
    let dir2 = scratch("shards-many");
    eval_shards_merge(&fixture("tiny-waco-spmm"), &measured, &matrices, &dir2, 11);
}

#[test]
fn eval_shards_merge_real_waco() {
    let model = repo().join("models/waco-spmm");
    let data = repo().join("../shared/data/waco");
    if !model.is_dir() || !data.is_dir() {
        eprintln!("SKIPPED: models/waco-spmm or ../shared/data/waco missing");
        return;
    }
    let dir = scratch("shards-real");
    eval_shards_merge(
        s(&model),
        &data.join("collected/SpMM"),
        &data.join("matrices"),
        &dir,
        2,
    );
}

/// `dashrank eval ARGS` with the Slurm array variables `slurm` set (and no others).
fn dashrank_in_array(args: &[&str], slurm: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dashrank"));
    cmd.args(args).args(backend_args()).current_dir(repo());
    for v in ["ID", "MIN", "MAX", "COUNT", "STEP"] {
        cmd.env_remove(format!("SLURM_ARRAY_TASK_{v}"));
    }
    cmd.envs(slurm.iter().copied());
    cmd.output().expect("running dashrank")
}

#[test]
fn eval_shard_auto_is_the_slurm_array_task() {
    let dir = scratch("shard-auto");
    let (measured, matrices) = synthetic_eval_data(&dir, 7);
    let model = fixture("tiny-waco-spmm");
    let part = |name: &str| dir.join(name).display().to_string();
    let base = |shard: &str, out: &str| -> Vec<String> {
        let v = [
            "eval",
            "--model",
            &model,
            "--measured",
            s(&measured),
            "--matrices",
        ];
        let mut v: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        v.extend([s(&matrices).into(), "--shard".into(), shard.into()]);
        v.extend(["--json-out".into(), part(out)]);
        v
    };
    let run = |shard: &str, out: &str, slurm: &[(&str, &str)]| {
        let args = base(shard, out);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        dashrank_in_array(&argv, slurm)
    };
    let explicit = ok(&run("2/4", "explicit.json", &[]));
    assert!(explicit.starts_with("shard 2/4: "), "{explicit}");
    // --array=10-13 (task 11 is the second), and --array=10-16:2 (task 12 is the second).
    let range = [
        ("SLURM_ARRAY_TASK_ID", "11"),
        ("SLURM_ARRAY_TASK_MIN", "10"),
    ];
    let stepped = [
        ("SLURM_ARRAY_TASK_ID", "12"),
        ("SLURM_ARRAY_TASK_MIN", "10"),
        ("SLURM_ARRAY_TASK_STEP", "2"),
    ];
    for (slurm, out) in [(&range[..], "range.json"), (&stepped[..], "stepped.json")] {
        let slurm = [slurm, &[("SLURM_ARRAY_TASK_COUNT", "4")]].concat();
        let stdout = ok(&run("auto", out, &slurm));
        assert_eq!(stdout.replace(out, "explicit.json"), explicit);
        let (a, b) = (
            std::fs::read(part("explicit.json")),
            std::fs::read(part(out)),
        );
        assert!(
            a.unwrap() == b.unwrap(),
            "--shard auto wrote another partial report"
        );
    }
    fails(&run("auto", "x.json", &[]), "SLURM_ARRAY_TASK_ID");
    let past = [
        ("SLURM_ARRAY_TASK_ID", "14"),
        ("SLURM_ARRAY_TASK_MIN", "10"),
        ("SLURM_ARRAY_TASK_COUNT", "4"),
    ];
    fails(&run("auto", "x.json", &past), "--array=1-4");
}

#[test]
fn eval_shards_of_the_real_data_are_balanced_by_work() {
    let model = repo().join("models/waco-spmm");
    let data = repo().join("../shared/data/waco");
    if !model.is_dir() || !data.is_dir() {
        eprintln!("SKIPPED: models/waco-spmm or ../shared/data/waco missing");
        return;
    }
    let (measured, matrices) = (data.join("collected/SpMM"), data.join("matrices"));
    let files = dashrank::eval::find_measured_files(&measured, &matrices).unwrap();
    let work: Vec<u64> = files
        .iter()
        .map(|f| dashrank::eval::FileWork::of(f).unwrap().units())
        .collect();
    let dir = scratch("shards-balanced");
    let mut loads = Vec::new();
    for i in 1..=3 {
        let out = dir.join(format!("part-{i}.json"));
        let shard = format!("{i}/3");
        let args = [
            "eval",
            "--model",
            s(&model),
            "--measured",
            s(&measured),
            "--matrices",
        ];
        let args = [
            &args[..],
            &[s(&matrices), "--shard", &shard, "--json-out", s(&out)],
        ]
        .concat();
        let stdout = ok(&dashrank(&args));
        let part: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        // The three matrices with a .csr (the only work) go to three different shards.
        assert_eq!(part["matrices"].as_array().unwrap().len(), 1, "{stdout}");
        let load: u64 = part["matrices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let name = m["matrix"].as_str().unwrap();
                work[files.iter().position(|f| f.name == name).unwrap()]
            })
            .sum();
        assert!(
            stdout.contains(&format!("work {load} of {}", work.iter().sum::<u64>())),
            "{stdout}"
        );
        loads.push(load);
    }
    let spread = loads.iter().max().unwrap() - loads.iter().min().unwrap();
    assert!(
        spread <= *work.iter().max().unwrap(),
        "{loads:?} vs {work:?}"
    );
}

#[test]
fn eval_of_only_empty_measured_files_says_so() {
    let dir = scratch("empty-measured");
    let (measured, matrices) = (dir.join("measured"), dir.join("matrices"));
    std::fs::create_dir_all(&measured).unwrap();
    std::fs::create_dir_all(&matrices).unwrap();
    std::fs::write(measured.join("a.txt"), "").unwrap();
    std::fs::copy(repo().join(MATRIX), matrices.join("a.mtx")).unwrap();
    let out = dashrank(&[
        "eval",
        "--model",
        &fixture("tiny-waco-spmm"),
        "--measured",
        s(&measured),
        "--matrices",
        s(&matrices),
    ]);
    fails(&out, "a.txt: the measured file has no schedule lines");
}

#[test]
fn rank_candidate_files_empty_invalid_and_numbered_by_file_line() {
    let dir = scratch("lines");
    let model = fixture("tiny-waco-spmm");
    let rank = |file: &Path, extra: &[&str]| {
        dashrank(
            &[
                &[
                    "rank",
                    "--model",
                    &model,
                    "--matrix",
                    MATRIX,
                    "--candidates",
                    s(file),
                ][..],
                extra,
            ]
            .concat(),
        )
    };
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "# only a comment\n\n   \n").unwrap();
    fails(&rank(&empty, &[]), "no schedule lines");
    let invalid = dir.join("invalid.txt");
    std::fs::write(
        &invalid,
        "# header\n3 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1\nnot a schedule\n",
    )
    .unwrap();
    fails(
        &rank(&invalid, &[]),
        "none of its 2 schedule lines is valid",
    );
    fails(&rank(&invalid, &[]), "(line 2: field 'isplit'");

    // Lines 1-2 comments, 3 valid, 4 blank, 5 invalid, 6 valid.
    let mixed = dir.join("mixed.txt");
    std::fs::write(
        &mixed,
        "# candidates\n# for band96\n1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1\n\n\
         3 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1\n4 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 16\n",
    )
    .unwrap();
    let table = ok(&rank(&mixed, &[]));
    assert!(
        table.contains("skipped line 5: field 'isplit' value '3'"),
        "{table}"
    );
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() > 3 && (w[0] == "1" || w[0] == "2"))
        .collect();
    let mut shown: Vec<&str> = rows.iter().map(|w| w[1]).collect();
    shown.sort_unstable();
    assert_eq!(shown, ["3", "6"], "{table}");
    let json: Value = serde_json::from_str(&ok(&rank(&mixed, &["--format", "json"]))).unwrap();
    let mut lines: Vec<u64> = json[0]["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["line"].as_u64().unwrap())
        .collect();
    lines.sort_unstable();
    assert_eq!(lines, [3, 6]);
    assert_eq!(json[0]["invalid"][0]["line"], 5);
    fails(&rank(&mixed, &["--format", "taco"]), "use it with --space");
}

#[test]
fn inspect_check_generates_integer_fields_of_cognate_bundles() {
    for bundle in ["tiny-cognate", "tiny-dash", "tiny-waco-spmm"] {
        let out = ok(&dashrank(&[
            "inspect",
            "--model",
            &fixture(bundle),
            "--check",
        ]));
        assert!(out.contains("check: OK"), "{bundle}: {out}");
    }
    let out = ok(&dashrank(&[
        "inspect",
        "--model",
        &fixture("tiny-cognate"),
        "--check",
    ]));
    assert_eq!(out.matches(": 4 schedules scored").count(), 4, "{out}");
}

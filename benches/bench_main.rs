//! dashrank benchmarks on the real WACO SpMM model. Speeds are reported as ratios against a
//! reference measured in the same run, because the benchmark machine is shared and noisy.
//!
//! ```text
//! cargo bench --bench bench_main -- [score]                                 # tract
//! DASHRANK_ORT_LIB=$(bash scripts/ort-lib.sh) cargo bench --bench bench_main \
//!     --no-default-features --features onnxruntime -- score                  # ONNX Runtime
//! ```
//!
//! (`bash scripts/bench.sh` runs both.) Sections:
//!
//! - `featurize`: moved to its own bench, `cargo bench --bench featurize` (see
//!   `benches/featurize.rs`); this name now only prints where it went.
//! - `score`: throughput of `Model::prepare_candidates` (parse + encode + schedule embedder)
//!   and `CostModel::score_into` (predictor) at several batch sizes, made of the real SpMM
//!   SuperSchedule lines cycled to the batch size, with `Schema::encode_batch` (parse + encode
//!   only) as the reference. Results go to `target/bench/score-<backend>.tsv`; when the other
//!   backend's file exists, the tract / ONNX Runtime ratio table is printed.
//!
//! With no section named, both run. Skips with a message when `models/waco-spmm` or
//! `../shared/data/waco` is absent (`bash scripts/setup.sh` creates the former).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use dashrank::{Backend, CostModel, CsrPattern, LoadOptions, Model};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Batch sizes of the scoring section (1 shows the fixed per-call cost); overridden by
/// `DASHRANK_BENCH_BATCHES=1,100,...`.
const BATCHES: [usize; 4] = [1, 100, 1_000, 20_000];
/// Scoring measurements: at least this many runs, at most `SCORE_MAX_RUNS`, within budget.
const SCORE_MIN_RUNS: usize = 3;
const SCORE_MAX_RUNS: usize = 200;
const SCORE_BUDGET: Duration = Duration::from_millis(1500);

/// Best and median of repeated timings.
#[derive(Debug, Clone, Copy)]
struct Stats {
    min: f64,
    median: f64,
    runs: usize,
}

impl Stats {
    fn from_times(mut times: Vec<f64>) -> Self {
        times.sort_by(f64::total_cmp);
        Self {
            min: times[0],
            median: times[times.len() / 2],
            runs: times.len(),
        }
    }
}

/// Times `f` after one warm-up call: at least `min_runs`, at most `max_runs`, and no new run
/// once `budget` has passed.
fn measure(
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
    mut f: impl FnMut() -> BoxResult<()>,
) -> BoxResult<Stats> {
    f()?;
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < max_runs && (times.len() < min_runs || start.elapsed() < budget) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    Ok(Stats::from_times(times))
}

struct Paths {
    repo: PathBuf,
    model: PathBuf,
    matrices: PathBuf,
    schedules: PathBuf,
    out_dir: PathBuf,
}

impl Paths {
    fn new() -> Self {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let shared = std::env::var_os("DASHRANK_SHARED")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join("../shared"));
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join("target"));
        Self {
            model: repo.join("models/waco-spmm"),
            matrices: shared.join("data/waco/matrices"),
            schedules: shared.join("data/waco/collected/SpMM"),
            out_dir: target.join("bench"),
            repo,
        }
    }

    /// Why the benchmark cannot run, if it cannot.
    fn missing(&self) -> Option<String> {
        if !self.model.join("featurizer.onnx").is_file() {
            return Some(format!(
                "{} not found: run `bash scripts/setup.sh` (needs ../shared)",
                self.model.display()
            ));
        }
        for dir in [&self.matrices, &self.schedules] {
            if !dir.is_dir() {
                return Some(format!("{} not found (../shared is absent)", dir.display()));
            }
        }
        None
    }
}

fn backend() -> Option<Backend> {
    if cfg!(feature = "tract") {
        return Some(Backend::Tract);
    }
    std::env::var_os("DASHRANK_ORT_LIB").map(|lib| Backend::OnnxRuntime {
        library: PathBuf::from(lib),
    })
}

fn files_with_ext(dir: &Path, ext: &str) -> BoxResult<Vec<PathBuf>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    paths.sort();
    Ok(paths)
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("?")
        .to_string()
}

fn machine_line() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} cores available, load average {}", load())
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

// ---------------------------------------------------------------------------------------
// Scoring throughput
// ---------------------------------------------------------------------------------------

/// One scoring measurement, as stored in `target/bench/score-<backend>.tsv`.
struct Row {
    batch: usize,
    stage: &'static str,
    stats: Stats,
}

fn bench_score(paths: &Paths, backend: &Backend) -> BoxResult<()> {
    let name = backend.name();
    println!("\n## Scoring throughput, backend {name}\n");
    let model = Model::load(
        &paths.model,
        &LoadOptions {
            backend: backend.clone(),
            ..LoadOptions::default()
        },
    )?;
    let head = model.info().heads[0].name.clone();
    let schema = model.schema(&head)?;

    let files = files_with_ext(&paths.schedules, "txt")?;
    let mut lines = Vec::new();
    for f in &files {
        lines.extend(
            std::fs::read_to_string(f)?
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
    }
    if lines.is_empty() {
        println!(
            "skipped: no schedule lines in {}",
            paths.schedules.display()
        );
        return Ok(());
    }
    let valid = model.prepare_candidates(&head, &lines)?.valid_count();
    let matrix_path = paths.matrices.join("Trec6_16x16_9.csr");
    let matrix_path = if matrix_path.is_file() {
        matrix_path
    } else {
        files_with_ext(&paths.matrices, "csr")?
            .into_iter()
            .next()
            .ok_or("no .csr matrix")?
    };
    let matrix = model.embed_matrix(&CsrPattern::read_waco_csr(&matrix_path)?)?;
    println!(
        "model {} head {head}; candidates: the {} SuperSchedule lines of {} files in {} ({valid} valid, \
         {} invalid), cycled to each batch size; matrix {} (score cost does not depend on it); \
         threads: all cores. Times are the best of ≥{SCORE_MIN_RUNS} runs (up to {SCORE_MAX_RUNS} \
         within {:.1} s); throughput = batch / best time.\n",
        paths.model.display(),
        lines.len(),
        files.len(),
        paths.schedules.display(),
        lines.len() - valid,
        stem(&matrix_path),
        SCORE_BUDGET.as_secs_f64()
    );

    let mut rows = Vec::new();
    for batch in batches()? {
        let batch_lines: Vec<&str> = lines
            .iter()
            .cycle()
            .take(batch)
            .map(String::as_str)
            .collect();
        let encode = measure(SCORE_MIN_RUNS, SCORE_MAX_RUNS, SCORE_BUDGET, || {
            std::hint::black_box(schema.encode_batch(&batch_lines));
            Ok(())
        })?;
        let prepare = measure(SCORE_MIN_RUNS, SCORE_MAX_RUNS, SCORE_BUDGET, || {
            std::hint::black_box(model.prepare_candidates(&head, &batch_lines)?);
            Ok(())
        })?;
        let candidates = model.prepare_candidates(&head, &batch_lines)?;
        let mut out = vec![0.0f32; batch];
        let score = measure(SCORE_MIN_RUNS, SCORE_MAX_RUNS, SCORE_BUDGET, || {
            model.score_into(&matrix, &candidates, &mut out)?;
            Ok(())
        })?;
        rows.push(Row {
            batch,
            stage: "encode",
            stats: encode,
        });
        rows.push(Row {
            batch,
            stage: "prepare",
            stats: prepare,
        });
        rows.push(Row {
            batch,
            stage: "score",
            stats: score,
        });
    }

    print_score_table(name, &rows);
    std::fs::create_dir_all(&paths.out_dir)?;
    let mut tsv = String::from("batch\tstage\tmin_s\tmedian_s\truns\n");
    for r in &rows {
        let _ = writeln!(
            tsv,
            "{}\t{}\t{:e}\t{:e}\t{}",
            r.batch, r.stage, r.stats.min, r.stats.median, r.stats.runs
        );
    }
    let out = paths.out_dir.join(format!("score-{name}.tsv"));
    std::fs::write(&out, tsv)?;
    println!("\n(wrote {})", out.display());
    print_backend_ratio(paths, name, &rows)?;
    Ok(())
}

fn batches() -> BoxResult<Vec<usize>> {
    match std::env::var("DASHRANK_BENCH_BATCHES") {
        Ok(list) => Ok(list
            .split(',')
            .map(|b| b.trim().parse())
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|e| format!("DASHRANK_BENCH_BATCHES: {e}"))?),
        Err(_) => Ok(BATCHES.to_vec()),
    }
}

fn per_s(batch: usize, seconds: f64) -> String {
    let v = batch as f64 / seconds;
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn find(rows: &[Row], batch: usize, stage: &str) -> Option<Stats> {
    rows.iter()
        .find(|r| r.batch == batch && r.stage == stage)
        .map(|r| r.stats)
}

fn print_score_table(name: &str, rows: &[Row]) {
    println!(
        "| batch | encode only (ms) | encode cand/s | prepare (ms) | prepare cand/s | score_into (ms) | score cand/s | score median (ms) | prepare / encode | prepare+score cand/s |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for batch in rows.iter().filter(|r| r.stage == "score").map(|r| r.batch) {
        let (Some(e), Some(p), Some(s)) = (
            find(rows, batch, "encode"),
            find(rows, batch, "prepare"),
            find(rows, batch, "score"),
        ) else {
            continue;
        };
        println!(
            "| {batch} | {:.3} | {} | {:.3} | {} | {:.3} | {} | {:.3} | {:.1}× | {} |",
            e.min * 1e3,
            per_s(batch, e.min),
            p.min * 1e3,
            per_s(batch, p.min),
            s.min * 1e3,
            per_s(batch, s.min),
            s.median * 1e3,
            p.min / e.min,
            per_s(batch, p.min + s.min),
        );
    }
    println!("\n(backend {name}; cand/s = candidates per second)");
}

/// Reads the other backend's TSV (written by an earlier run) and prints tract ÷ ONNX Runtime
/// throughput ratios.
fn print_backend_ratio(paths: &Paths, name: &str, rows: &[Row]) -> BoxResult<()> {
    let other = if name == "tract" {
        "onnxruntime"
    } else {
        "tract"
    };
    let file = paths.out_dir.join(format!("score-{other}.tsv"));
    let Ok(text) = std::fs::read_to_string(&file) else {
        println!(
            "(no {} yet: run the other backend for the tract/onnxruntime ratio)",
            file.display()
        );
        return Ok(());
    };
    let age = std::fs::metadata(&file)?
        .modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .map_or(f64::NAN, |d| d.as_secs_f64());
    let mut theirs = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 5 {
            continue;
        }
        let stage = match f[1] {
            "encode" => "encode",
            "prepare" => "prepare",
            "score" => "score",
            _ => continue,
        };
        theirs.push(Row {
            batch: f[0].parse()?,
            stage,
            stats: Stats {
                min: f[2].parse()?,
                median: f[3].parse()?,
                runs: f[4].parse()?,
            },
        });
    }
    let (tract, ort) = if name == "tract" {
        (rows, theirs.as_slice())
    } else {
        (theirs.as_slice(), rows)
    };
    println!(
        "\n## Backend ratio: tract throughput ÷ ONNX Runtime throughput (> 1: tract faster)\n\n\
         ({other} numbers from {}, written {age:.0} s before this run ended)\n",
        file.display()
    );
    println!("| batch | prepare tract/ort | score_into tract/ort | prepare+score tract/ort |");
    println!("|---:|---:|---:|---:|");
    for batch in rows.iter().filter(|r| r.stage == "score").map(|r| r.batch) {
        let get = |rows: &[Row], stage| find(rows, batch, stage).map(|s| s.min);
        let (Some(tp), Some(ts), Some(op), Some(os)) = (
            get(tract, "prepare"),
            get(tract, "score"),
            get(ort, "prepare"),
            get(ort, "score"),
        ) else {
            continue;
        };
        println!(
            "| {batch} | {:.2} | {:.2} | {:.2} |",
            op / tp,
            os / ts,
            (op + os) / (tp + ts)
        );
    }
    Ok(())
}

fn main() -> BoxResult<()> {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs bench targets without
    // it, and the full benchmark does not belong in the test suite.
    if !std::env::args().any(|a| a == "--bench") {
        println!("bench_main: built; run it with `cargo bench --bench bench_main`");
        return Ok(());
    }
    // The other arguments name sections.
    let sections: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |s: &str| sections.is_empty() || sections.iter().any(|a| a == s);
    let paths = Paths::new();
    if let Some(why) = paths.missing() {
        println!("bench_main skipped: {why}");
        return Ok(());
    }
    let Some(backend) = backend() else {
        println!(
            "bench_main skipped: built without `tract`; set DASHRANK_ORT_LIB to libonnxruntime \
             (`bash scripts/ort-lib.sh` prints it)"
        );
        return Ok(());
    };
    let started = Instant::now();
    println!("# dashrank bench_main (backend {})\n", backend.name());
    println!("machine: {}", machine_line());
    if sections.iter().any(|a| a == "featurize") {
        println!("\nthe featurizer benchmark is its own bench: `cargo bench --bench featurize`");
    }
    if wants("score") {
        bench_score(&paths, &backend)?;
    }
    println!(
        "\nbench_main done in {:.0} s; load average now {}",
        started.elapsed().as_secs_f64(),
        load()
    );
    Ok(())
}

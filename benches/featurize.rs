//! Featurizer benchmark: the native featurizer on real and generated matrices, with every
//! speed a ratio against references measured in the same run.
//!
//! ```text
//! bash scripts/setup.sh                                              # models/waco-spmm
//! .venv/bin/python -m dashrank_onnx.cognate --full-size --out models/cognate-full
//! .venv/bin/python -m dashrank_onnx.corpus                           # target/corpus
//! cargo bench --bench featurize -- [real] [corpus] [phases] [dash]
//! ```
//!
//! Sections (all by default):
//!
//! - `real`: the WACO SpMM bundle on the 11 real matrices of `../shared/data/waco/matrices`.
//! - `corpus`: the WACO SpMM bundle on the generated corpus (`target/corpus`).
//! - `phases`: the WACO SpMM bundle on kim1, pf2177, R-MAT 10 M and uniform 10 M, one table
//!   per matrix of each layer's time by phase (`FeaturizeStats::steps`; summed over the
//!   slabs when the run is cut into slabs, as the 10 M inputs are on 2 threads) and its
//!   multiply-adds done with their time at one core's FMA peak; the kinds of work
//!   across phases (maps, products, pooling, buffers) come from `scripts/featurize-profile.sh`.
//! - `dash`: the full-size COGNATE bundle (`models/cognate-full`) on pf2177, kim1 and the
//!   R-MAT corpus matrices.
//!
//! The featurizer graph of each bundle is exported by the numpy side (`read_bundle`) and
//! built with [`FeaturizerGraph::from_spec`], so the Rust side times exactly what
//! `Model::conv_features` runs, without the dense heads. Per matrix the table shows the best
//! time of several runs (five, up to fifty within a second for fast matrices) with 2 threads
//! (and 1 thread for `real`), the dense-counted
//! multiply-adds (every neighbour pair of every conv times `Cin·Cout`), their rate as a
//! fraction of numpy's `float32` matmul rate with 2 threads (the best of the rates sampled in
//! the same section: before its first matrix and after each matrix's Rust runs, so a slow
//! moment of the VM during one sample cannot flatter the ratio), the
//! multiply-adds actually done (`FeaturizeStats::computed_macs`: shared rows and products
//! computed once) and their time at two cores' FMA peak (a floor under the run's time), the
//! peak RSS of a child process that loads the graph and the matrix and featurizes once
//! (`/usr/bin/time -v`), and the numpy reference featurizer's time and the relative
//! difference of the outputs where the reference runs (matrices up to
//! `DASHRANK_BENCH_NUMPY_MAX_NNZ` entries, default 2 000 000, since it holds every layer in
//! memory). A table's Rust rows are all timed before its numpy references run (a heavy
//! reference run leaves the VM with steal time for a while), and a line after the table
//! gives the hypervisor's steal time during each row's 2-thread runs. Missing inputs skip
//! their section with a message.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use dashrank::featurize::spec::{AttrValue, GraphSpec, NodeSpec, TensorSpec};
use dashrank::featurize::{FeaturizeOptions, FeaturizeStats, FeaturizerGraph};
use dashrank::CsrPattern;

#[path = "common/fma_peak.rs"]
mod fma_peak;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Wait before timing Rust after the numpy child worked (see its use).
const OPENBLAS_SPIN: Duration = Duration::from_millis(500);

/// Runs per Rust measurement (best kept), and the time after which no new run starts.
const RUST_RUNS: usize = 5;
const RUST_BUDGET: Duration = Duration::from_secs(20);
/// Fast matrices get more runs, up to [`RUST_MAX_RUNS`] within this time: a best of five
/// runs of a few milliseconds moves by up to 30 % on a shared VM.
const RUST_QUICK: Duration = Duration::from_secs(1);
const RUST_MAX_RUNS: usize = 50;
/// Runs of the numpy reference (best kept), and its time budget in seconds.
const REF_RUNS: usize = 5;
const REF_BUDGET_S: f64 = 10.0;

/// The numpy worker: one JSON line per command line.
const WORKER: &str = r#"
import base64, json, os, sys, time
import numpy as np
from dashrank_onnx.bundle import read_bundle
from dashrank_onnx.reference import load_csr, run_featurizer
bundles = {}
def bundle(path):
    if path not in bundles:
        bundles[path] = read_bundle(path)
    return bundles[path]
print(json.dumps({"numpy": np.__version__, "python": sys.version.split()[0]}), flush=True)
for line in sys.stdin:
    cmd, *args = line.rstrip("\n").split("\t")
    if cmd == "spec":
        g = bundle(args[0]).featurizer
        os.makedirs(args[1], exist_ok=True)
        inits = {}
        for name, arr in g.initializers.items():
            f = os.path.join(args[1], f"init{len(inits)}.bin")
            np.asarray(arr, dtype="<f4").tofile(f)
            inits[name] = {"dims": list(np.shape(arr)), "file": f}
        nodes = [{"name": n.name, "op_type": n.op_type, "domain": n.domain, "inputs": n.inputs,
                  "outputs": n.outputs, "attrs": {k: int(v) for k, v in n.attrs.items()}}
                 for n in g.nodes]
        print(json.dumps({"input": g.input, "output": g.output, "nodes": nodes,
                          "initializers": inits}), flush=True)
    elif cmd == "sgemm":
        n = int(args[0])
        a = np.random.default_rng(0).random((n, n), dtype=np.float32)
        b = np.random.default_rng(1).random((n, n), dtype=np.float32)
        a @ b
        best = min((lambda t: (a @ b, time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(5))
        print(json.dumps({"gmacs": n ** 3 / best / 1e9}), flush=True)
    else:
        b, path, runs, budget = bundle(args[0]), args[1], int(args[2]), float(args[3])
        pat = load_csr(path)
        times, conv, start = [], None, time.perf_counter()
        while len(times) < runs:
            t = time.perf_counter()
            r, c = pat.coords()
            conv = run_featurizer(b.featurizer, r, c)
            times.append(time.perf_counter() - t)
            if time.perf_counter() - start > budget:
                break
        print(json.dumps({"times": times, "conv": conv[0].astype(float).tolist()}), flush=True)
"#;

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn start(repo: &Path) -> BoxResult<(Self, String)> {
        let python = repo.join(".venv/bin/python");
        let mut child = Command::new(&python)
            .arg("-c")
            .arg(WORKER)
            .current_dir(repo)
            .env("OPENBLAS_NUM_THREADS", "2")
            .env("OMP_NUM_THREADS", "2")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut w = Self {
            child,
            stdin,
            stdout,
        };
        let hello = w.ask(None)?;
        let versions = format!(
            "Python {}, numpy {}",
            hello["python"].as_str().unwrap_or("?"),
            hello["numpy"].as_str().unwrap_or("?")
        );
        Ok((w, versions))
    }

    fn ask(&mut self, line: Option<String>) -> BoxResult<serde_json::Value> {
        if let Some(l) = line {
            writeln!(self.stdin, "{l}")?;
            self.stdin.flush()?;
        }
        let mut out = String::new();
        if self.stdout.read_line(&mut out)? == 0 {
            return Err("numpy worker exited early".into());
        }
        Ok(serde_json::from_str(&out)?)
    }

    /// The featurizer of a bundle, exported by the numpy side.
    fn graph(&mut self, bundle: &Path, dir: &Path) -> BoxResult<(GraphSpec, PathBuf)> {
        let v = self.ask(Some(format!(
            "spec\t{}\t{}",
            bundle.display(),
            dir.display()
        )))?;
        let json = dir.join("spec.json");
        std::fs::write(&json, v.to_string())?;
        Ok((spec_from_json(&v)?, json))
    }

    /// numpy `float32` matmul rate (GMAC/s) with the worker's 2 threads.
    fn sgemm(&mut self) -> BoxResult<f64> {
        let v = self.ask(Some("sgemm\t2048".into()))?;
        v["gmacs"].as_f64().ok_or_else(|| "bad sgemm answer".into())
    }

    /// Best time (s) and output of the numpy reference featurizer.
    fn featurize(&mut self, bundle: &Path, path: &Path) -> BoxResult<(f64, Vec<f64>)> {
        let line = format!(
            "run\t{}\t{}\t{REF_RUNS}\t{REF_BUDGET_S}",
            bundle.display(),
            path.display()
        );
        let v = self.ask(Some(line))?;
        let times: Vec<f64> = serde_json::from_value(v["times"].clone())?;
        let conv: Vec<f64> = serde_json::from_value(v["conv"].clone())?;
        let best = times.iter().copied().fold(f64::INFINITY, f64::min);
        Ok((best, conv))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A [`GraphSpec`] from the worker's export (weights in little-endian `f32` files).
fn spec_from_json(v: &serde_json::Value) -> BoxResult<GraphSpec> {
    let mut initializers = BTreeMap::new();
    for (name, t) in v["initializers"].as_object().ok_or("no initializers")? {
        let dims: Vec<usize> = serde_json::from_value(t["dims"].clone())?;
        let bytes = std::fs::read(t["file"].as_str().ok_or("no file")?)?;
        let data = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        initializers.insert(
            name.clone(),
            TensorSpec {
                name: name.clone(),
                dims,
                data,
            },
        );
    }
    let mut nodes = Vec::new();
    for n in v["nodes"].as_array().ok_or("no nodes")? {
        let attrs: BTreeMap<String, i64> = serde_json::from_value(n["attrs"].clone())?;
        nodes.push(NodeSpec {
            name: n["name"].as_str().unwrap_or("").into(),
            op_type: n["op_type"].as_str().unwrap_or("").into(),
            domain: n["domain"].as_str().unwrap_or("").into(),
            inputs: serde_json::from_value(n["inputs"].clone())?,
            outputs: serde_json::from_value(n["outputs"].clone())?,
            attributes: attrs
                .into_iter()
                .map(|(k, v)| (k, AttrValue::Int(v)))
                .collect(),
        });
    }
    Ok(GraphSpec {
        inputs: vec![v["input"].as_str().ok_or("no input")?.into()],
        outputs: vec![v["output"].as_str().ok_or("no output")?.into()],
        nodes,
        initializers,
    })
}

/// Best wall time (s) over runs with `threads`, and that run's output and figures.
fn time_rust(
    g: &FeaturizerGraph,
    p: &CsrPattern,
    threads: usize,
) -> BoxResult<(f64, Vec<f32>, FeaturizeStats)> {
    let opts = FeaturizeOptions {
        threads: Some(threads),
        ..Default::default()
    };
    let start = Instant::now();
    let (mut best, mut out, mut stats) = (f64::INFINITY, Vec::new(), FeaturizeStats::default());
    for i in 0..RUST_MAX_RUNS {
        let spent = start.elapsed();
        if (i >= 2 && spent > RUST_BUDGET) || (i >= RUST_RUNS && spent > RUST_QUICK) {
            break;
        }
        let t = Instant::now();
        let (run_out, run_stats) = g.run_with_stats(p, &opts)?;
        let elapsed = t.elapsed().as_secs_f64();
        if elapsed < best {
            (best, out, stats) = (elapsed, run_out, run_stats);
        }
    }
    Ok((best, out, stats))
}

/// Peak RSS (MiB) of a child process that builds the graph, reads the matrix and
/// featurizes once with 2 threads, from `/usr/bin/time -v`; `None` without GNU time.
fn peak_rss(spec_json: &Path, matrix: &Path) -> Option<f64> {
    let exe = std::env::current_exe().ok()?;
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(exe)
        .args([
            "--rss-child".as_ref(),
            spec_json.as_os_str(),
            matrix.as_os_str(),
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let kb: f64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))?
        .trim()
        .parse()
        .ok()?;
    out.status.success().then_some(kb / 1024.0)
}

/// The `--rss-child` process.
fn rss_child(spec_json: &str, matrix: &str) -> BoxResult<()> {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(spec_json)?)?;
    let g = FeaturizerGraph::from_spec(&spec_from_json(&v)?)?;
    let p = CsrPattern::read_waco_csr(matrix)?;
    let opts = FeaturizeOptions {
        threads: Some(2),
        ..Default::default()
    };
    let out = g.run(&p, &opts)?;
    println!("{}", out.len());
    Ok(())
}

fn max_rel_diff(a: &[f32], b: &[f64]) -> f64 {
    let scale = b.iter().fold(1e-12f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .map(|(x, y)| (f64::from(*x) - y).abs())
        .fold(0.0, f64::max)
        / scale
}

/// One matrix's Rust timings, kept until its numpy reference has run.
struct RustRow {
    path: PathBuf,
    p: CsrPattern,
    t2: f64,
    t1: Option<f64>,
    out: Vec<f32>,
    stats: FeaturizeStats,
    rss: String,
    /// Share of the CPUs' time the hypervisor took while the 2-thread runs ran.
    steal: Option<f64>,
}

/// All CPUs' time so far in clock ticks (`/proc/stat`): total and stolen by the hypervisor.
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let total = ticks.iter().take(8).sum();
    Some((total, *ticks.get(7)?))
}

/// The share of the CPUs' time stolen between two [`cpu_ticks`] readings.
fn steal_share(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<f64> {
    let ((t0, s0), (t1, s1)) = (before?, after?);
    (t1 > t0).then(|| (s1 - s0) as f64 / (t1 - t0) as f64)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

struct Bench {
    repo: PathBuf,
    worker: Worker,
    /// numpy sgemm GMAC/s, 2 threads: the rates sampled in the current section (at its
    /// start and after each matrix's Rust runs); ratios are taken against the best.
    sgemm: Vec<f64>,
    /// The widest vectors' fused multiply-add peak of one core (GMAC/s; 0 when unknown).
    fma_core: f64,
    numpy_max_nnz: usize,
}

impl Bench {
    /// One table: `bundle` on `matrices`, with a 1-thread column when `one_thread`.
    fn table(
        &mut self,
        title: &str,
        bundle: &Path,
        matrices: &[PathBuf],
        one_thread: bool,
    ) -> BoxResult<()> {
        println!("\n## {title}\n");
        let Some((g, json)) = self.graph_of(bundle)? else {
            return Ok(());
        };
        println!("| matrix | rows | nnz | Rust 2 thr (ms) |{} GMAC | GMAC/s | of sgemm | GMAC done | products at peak (ms) | peak RSS (MiB) | charged (MiB) | numpy (ms) | speedup | max rel diff |",
            if one_thread { " Rust 1 thr (ms) |" } else { "" });
        println!(
            "|---|---:|---:|---:|{}---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            if one_thread { "---:|" } else { "" }
        );
        // Every Rust row first, the numpy references after them: the heavy reference runs
        // leave the 2-core VM with steal time for about a minute (BENCHMARKS.md, "Rust
        // timings before the numpy references"), which slowed the Rust runs that followed.
        let mut rows = Vec::new();
        for path in matrices {
            rows.extend(self.time_row(&g, &json, path, one_thread)?);
        }
        let mut speedups = Vec::new();
        for r in &rows {
            speedups.extend(self.print_row(bundle, r)?);
        }
        let steal: Vec<String> = rows
            .iter()
            .map(|r| r.steal.map_or("?".into(), |s| format!("{:.1}", 100.0 * s)))
            .collect();
        println!(
            "\nVM steal time while the Rust 2-thread runs ran (% of the CPUs' time, per row): {}",
            steal.join(" / ")
        );
        if !speedups.is_empty() {
            let geo = (speedups.iter().map(|x| x.ln()).sum::<f64>() / speedups.len() as f64).exp();
            let min = speedups.iter().copied().fold(f64::INFINITY, f64::min);
            println!(
                "\nspeedup over numpy with 2 threads: geometric mean {geo:.1}×, minimum {min:.1}×"
            );
        }
        self.print_sgemm_samples();
        println!("load average at end: {}", load());
        Ok(())
    }

    /// Samples numpy's sgemm rate once more for the current section.
    fn sample_sgemm(&mut self) -> BoxResult<()> {
        let rate = self.worker.sgemm()?;
        self.sgemm.push(rate);
        Ok(())
    }

    /// The best sgemm rate sampled in the current section (GMAC/s): the denominator of every
    /// "of sgemm" ratio, like the best of the Rust runs in the numerator.
    fn peak(&self) -> f64 {
        self.sgemm.iter().copied().fold(0.0, f64::max)
    }

    /// The best sgemm rate so far, with its share of two cores' FMA peak when known.
    fn sgemm_line(&self) -> String {
        let of_fma = if self.fma_core > 0.0 {
            format!(
                " ({:.0} % of two cores' fused multiply-add peak)",
                100.0 * self.peak() / (2.0 * self.fma_core)
            )
        } else {
            String::new()
        };
        format!("{:.1} GMAC/s{of_fma}", self.peak())
    }

    /// Every sgemm rate the section sampled, and the best, which its ratios use.
    fn print_sgemm_samples(&self) {
        let all: Vec<String> = self.sgemm.iter().map(|r| format!("{r:.1}")).collect();
        println!(
            "numpy float32 matmul sampled before the first matrix and after each: {} GMAC/s; \
             \"of sgemm\" is against the best, {}",
            all.join(" / "),
            self.sgemm_line()
        );
    }

    /// The Rust side of one matrix's row of [`Bench::table`]; `None` (after a note) when the
    /// file is missing.
    fn time_row(
        &mut self,
        g: &FeaturizerGraph,
        json: &Path,
        path: &Path,
        one_thread: bool,
    ) -> BoxResult<Option<RustRow>> {
        if !path.is_file() {
            println!(
                "| {} | skipped: file not found | | | | | | | | | | | |",
                path.display()
            );
            return Ok(None);
        }
        let p = CsrPattern::read_waco_csr(path)?;
        // OpenBLAS's worker threads in the numpy child spin for about 0.1 s after its
        // last call (`THREAD_TIMEOUT`, 2^28 cycles) and would take a core from the Rust
        // runs of a small matrix: let them go to sleep first.
        std::thread::sleep(OPENBLAS_SPIN);
        let before = cpu_ticks();
        let (t2, out, stats) = time_rust(g, &p, 2)?;
        let steal = steal_share(before, cpu_ticks());
        let t1 = if one_thread {
            Some(time_rust(g, &p, 1)?.0)
        } else {
            None
        };
        let rss = peak_rss(json, path).map_or("?".into(), |m| format!("{m:.0}"));
        self.sample_sgemm()?;
        Ok(Some(RustRow {
            path: path.to_path_buf(),
            p,
            t2,
            t1,
            out,
            stats,
            rss,
            steal,
        }))
    }

    /// Prints a row of [`Bench::table`], with the numpy reference run now (after every Rust
    /// row of the table); returns the speedup over numpy where it ran.
    fn print_row(&mut self, bundle: &Path, r: &RustRow) -> BoxResult<Option<f64>> {
        let (p, t2, stats) = (&r.p, r.t2, &r.stats);
        let gmac = stats.dense_macs as f64 / 1e9;
        let done = stats.computed_macs as f64 / 1e9;
        // The multiply-adds done, at two cores' FMA peak: a floor under the run's time.
        let floor = if self.fma_core > 0.0 {
            format!("{:.0}", 1e3 * done / (2.0 * self.fma_core))
        } else {
            "?".into()
        };
        let (mut numpy, mut speedup, mut diff) = ("–".to_string(), None, "–".to_string());
        if p.nnz() <= self.numpy_max_nnz {
            let (tr, conv) = self.worker.featurize(bundle, &r.path)?;
            numpy = format!("{:.0}", tr * 1e3);
            speedup = Some(tr / t2);
            diff = format!("{:.1e}", max_rel_diff(&r.out, &conv));
        }
        println!(
            "| {} | {} | {} | {:.1} |{} {:.1} | {:.1} | {:.0} % | {:.1} | {} | {} | {:.0} | {} | {} | {} |",
            r.path.file_stem().and_then(|s| s.to_str()).unwrap_or("?"),
            p.nrows(),
            p.nnz(),
            t2 * 1e3,
            r.t1.map_or(String::new(), |t| format!(" {:.1} |", t * 1e3)),
            gmac,
            gmac / t2,
            100.0 * gmac / t2 / self.peak(),
            done,
            floor,
            r.rss,
            stats.peak_bytes as f64 / (1 << 20) as f64,
            numpy,
            speedup.map_or("–".to_string(), |x| format!("{x:.1}×")),
            diff
        );
        Ok(speedup)
    }

    /// Where each layer's time goes (`FeaturizeStats::steps`), for `bundle` on `matrices`
    /// with 2 threads, in the fastest of the timed runs, whose time and rate (against the
    /// same-run sgemm) head the table.
    fn phases(&mut self, title: &str, bundle: &Path, matrices: &[PathBuf]) -> BoxResult<()> {
        println!("\n## Phases: {title}\n");
        let Some((g, _)) = self.graph_of(bundle)? else {
            return Ok(());
        };
        for path in matrices {
            if !path.is_file() {
                println!("{}: skipped: file not found\n", path.display());
                continue;
            }
            let p = CsrPattern::read_waco_csr(path)?;
            std::thread::sleep(OPENBLAS_SPIN);
            let (t2, _, stats) = time_rust(&g, &p, 2)?;
            self.sample_sgemm()?;
            let gmac = stats.dense_macs as f64 / 1e9;
            println!(
                "### {} ({} nnz): {:.1} ms, {:.0} % of sgemm, {} slab(s)\n",
                path.file_stem().and_then(|s| s.to_str()).unwrap_or("?"),
                p.nnz(),
                t2 * 1e3,
                100.0 * gmac / t2 / self.peak(),
                stats.slabs
            );
            print_phases(&stats, self.fma_core);
        }
        self.print_sgemm_samples();
        println!("load average at end: {}", load());
        Ok(())
    }

    /// The bundle's featurizer graph and its spec file, after measuring the same-run sgemm
    /// rate; `None` (with a message) when the bundle is missing.
    fn graph_of(&mut self, bundle: &Path) -> BoxResult<Option<(FeaturizerGraph, PathBuf)>> {
        if !bundle.join("featurizer.onnx").is_file() {
            println!(
                "skipped: {} not found (see the commands at the top of benches/featurize.rs)",
                bundle.display()
            );
            return Ok(None);
        }
        let dir = self
            .repo
            .join("target/bench")
            .join(bundle.file_name().unwrap_or_default());
        let (spec, json) = self.worker.graph(bundle, &dir)?;
        self.sgemm.clear();
        self.sample_sgemm()?;
        println!(
            "load average {} at start; numpy float32 matmul (2048², 2 threads): {}\n",
            load(),
            self.sgemm_line()
        );
        Ok(Some((FeaturizerGraph::from_spec(&spec)?, json)))
    }
}

/// Names of `StepStats::phases`, in order.
const PHASES: [&str; 6] = [
    "coordinates",
    "neighbour jobs",
    "output tables",
    "rows and sums",
    "windows",
    "halos",
];

/// A layer-by-phase table (ms) with each column's share of the stencil steps' time (summed
/// over the slabs when the run was cut into slabs, so the times are thread time), and per
/// layer the multiply-adds it did and their time on one core at its FMA peak (`fma_core`,
/// GMAC/s; "?" when unknown).
fn print_phases(stats: &FeaturizeStats, fma_core: f64) {
    println!(
        "| layer | op | points | ms | {} | GMAC done | at peak (ms) |",
        PHASES.join(" | ")
    );
    println!("|---|---|---:|---:|{}", "---:|".repeat(PHASES.len() + 2));
    let at_peak = |macs: u64| {
        if fma_core > 0.0 {
            format!("{:.1}", macs as f64 / fma_core / 1e6)
        } else {
            "?".into()
        }
    };
    let mut totals = [0.0f64; 6];
    for st in &stats.steps {
        let cells: Vec<String> = st
            .phases
            .iter()
            .map(|t| format!("{:.1}", t * 1e3))
            .collect();
        println!(
            "| {} | {} | {} | {:.1} | {} | {:.2} | {} |",
            st.name,
            st.op_type,
            st.points,
            st.seconds * 1e3,
            cells.join(" | "),
            st.computed_macs as f64 / 1e9,
            at_peak(st.computed_macs)
        );
        for (t, p) in totals.iter_mut().zip(st.phases) {
            *t += p;
        }
    }
    let all: f64 = stats.steps.iter().map(|s| s.seconds).sum();
    let shares: Vec<String> = totals
        .iter()
        .map(|t| format!("{:.1} ({:.0} %)", t * 1e3, 100.0 * t / all.max(1e-12)))
        .collect();
    println!(
        "| all | | {} | {:.1} | {} | {:.2} | {} |\n",
        stats.points,
        all * 1e3,
        shares.join(" | "),
        stats.computed_macs as f64 / 1e9,
        at_peak(stats.computed_macs)
    );
}

fn main() -> BoxResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--rss-child") {
        return rss_child(&args[1], &args[2]);
    }
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs bench targets without
    // it, and the benchmark does not belong in the test suite.
    if !args.iter().any(|a| a == "--bench") {
        println!("featurize bench: built; run it with `cargo bench --bench featurize`");
        return Ok(());
    }
    let sections: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let (worker, versions) = match Worker::start(&repo) {
        Ok(w) => w,
        Err(e) => {
            println!("skipped: numpy worker unavailable ({e}); run `bash scripts/setup.sh`");
            return Ok(());
        }
    };
    println!(
        "# Featurizer benchmark\n\n{}, {} cores; {versions}; Rust: best of {RUST_RUNS} runs (up to {RUST_MAX_RUNS} within {} s for fast matrices, fewer past {} s); numpy: best of up to {REF_RUNS} within {REF_BUDGET_S} s.",
        cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        RUST_QUICK.as_secs(),
        RUST_BUDGET.as_secs()
    );
    let peaks = fma_peak::fma_peaks();
    let listed: Vec<String> = peaks
        .iter()
        .map(|(level, g)| format!("{level} {g:.1} GMAC/s"))
        .collect();
    println!(
        "Fused multiply-add peak of one core (independent chains, no memory): {}.",
        if listed.is_empty() {
            "not measured on this CPU".to_string()
        } else {
            listed.join(", ")
        }
    );
    let numpy_max_nnz = std::env::var("DASHRANK_BENCH_NUMPY_MAX_NNZ")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let mut b = Bench {
        repo,
        worker,
        sgemm: Vec::new(),
        fma_core: peaks.first().map_or(0.0, |p| p.1),
        numpy_max_nnz,
    };
    b.sections(&sections)
}

/// The CPU's model name from `/proc/cpuinfo`.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

impl Bench {
    /// Runs the sections named (all when none is).
    fn sections(&mut self, sections: &[&str]) -> BoxResult<()> {
        let want = |s: &str| sections.is_empty() || sections.contains(&s);
        let shared = std::env::var_os("DASHRANK_SHARED")
            .map_or_else(|| self.repo.join("../shared"), PathBuf::from);
        let real = shared.join("data/waco/matrices");
        let corpus = self.repo.join("target/corpus");
        let waco = self.repo.join("models/waco-spmm");
        let dash = self.repo.join("models/cognate-full");
        let corpus_files = |names: &[&str]| {
            names
                .iter()
                .map(|n| corpus.join(format!("{n}.csr")))
                .collect::<Vec<_>>()
        };
        if want("real") {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&real)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|e| e == "csr"))
                        .collect()
                })
                .unwrap_or_default();
            files.sort();
            self.table("WACO SpMM bundle, real matrices", &waco, &files, true)?;
        }
        if want("corpus") {
            let names = [
                "rmat-1m",
                "uniform-1m",
                "rmat-10m",
                "uniform-10m",
                "laplace-10m",
            ];
            let files = corpus_files(&names);
            self.table("WACO SpMM bundle, generated corpus", &waco, &files, false)?;
        }
        if want("phases") {
            let mut files = vec![real.join("kim1.csr"), real.join("pf2177.csr")];
            files.extend(corpus_files(&["rmat-10m", "uniform-10m"]));
            self.phases("WACO SpMM bundle", &waco, &files)?;
        }
        if want("dash") {
            let mut files = vec![real.join("pf2177.csr"), real.join("kim1.csr")];
            files.extend(corpus_files(&["rmat-1m", "rmat-10m"]));
            self.table("full-size COGNATE bundle", &dash, &files, false)?;
        }
        Ok(())
    }
}

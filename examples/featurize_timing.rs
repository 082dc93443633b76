//! Times the native featurizer on WACO `.csr` matrices with a random-weight graph of the
//! WACO or the full-size DASH/COGNATE shape, or with a bundle's own featurizer.
//!
//! ```text
//! cargo run --release --no-default-features --example featurize_timing -- \
//!     [--graph waco|dash | --model DIR] [--threads 2,1] [--repeats 3] [PATH ...]
//! ```
//!
//! - `--model DIR`: the featurizer of the bundle in `DIR` (e.g. `models/waco-spmm`), with its
//!   real weights. Use it for changes whose cost depends on the values: the random weights
//!   below leave about half of the activations zero, the real WACO bundle far fewer
//!   (BENCHMARKS.md, twenty-first pass).
//! - `waco`: 1→32 k5 s1, then 13 × 32→32 k3 s2, ReLU after each conv, a global-average-pool
//!   tap after each ReLU, concat → 448 features (the real WACO bundles' shape).
//! - `dash`: 12 stride-1 convs (k5, then k3) with widths 32, 32, 64, 64, 64, 128, 128, 128,
//!   256, 256, 256, 256, ReLU after each, a 2×2 stride-2 max pool after layers 3, 6 and 9, a
//!   global average pool of the last layer → 256 features (`python -m dashrank_onnx.cognate
//!   --full-size`).
//!
//! `PATH`s are `.csr` files or directories of them (default `../shared/data/waco/matrices`).
//! Prints, per matrix and thread count, the median wall time of `run_with_stats` (the least
//! with `DASHRANK_BEST=1`), the least
//! CPU time (user + system, from `/proc/self/stat`: less sensitive to other load), the
//! dense-counted multiply-adds and those actually done ("done": shared rows and products
//! computed once), the featurizer's peak charged memory and a digest of the
//! features' bits (FNV-1a; compare it across builds to check that a change kept every bit),
//! and checks that all thread counts give bit-identical features. Running time depends on the
//! sparsity structure and the graph shape, and on the weights only where they make
//! activations zero (the featurizer does not look at them now). With `DASHRANK_TRACE=1` it also
//! prints the time of every featurizer step (the library's `log::trace!` records) to stderr;
//! `DASHRANK_BAND_ENTRIES=N` sets `FeaturizeOptions::band_entries`, and
//! `DASHRANK_WACO_LAYERS=N` keeps only the first N convs of the WACO graph.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use dashrank::featurize::spec::{AttrValue, GraphSpec, NodeSpec, TensorSpec};
use dashrank::featurize::{FeaturizeOptions, FeaturizeStats, FeaturizerGraph, SPARSE_DOMAIN};
use dashrank::pattern::CsrPattern;
use dashrank::{LoadOptions, Model};

/// Builds graphs with seeded uniform weights.
struct Builder {
    seed: u64,
    nodes: Vec<NodeSpec>,
    initializers: BTreeMap<String, TensorSpec>,
}

impl Builder {
    fn uniform(&mut self) -> f32 {
        self.seed = self
            .seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn node(&mut self, name: &str, op: &str, inputs: Vec<String>, attrs: &[(&str, i64)]) {
        self.nodes.push(NodeSpec {
            name: name.into(),
            op_type: op.into(),
            domain: if op == "Concat" {
                String::new()
            } else {
                SPARSE_DOMAIN.into()
            },
            inputs,
            outputs: vec![name.into()],
            attributes: attrs
                .iter()
                .map(|&(k, v)| (k.to_string(), AttrValue::Int(v)))
                .collect(),
        });
    }

    fn tensor(&mut self, name: &str, dims: Vec<usize>, scale: f32) {
        let data = (0..dims.iter().product())
            .map(|_| self.uniform() * scale)
            .collect();
        let t = TensorSpec {
            name: name.into(),
            dims,
            data,
        };
        self.initializers.insert(name.into(), t);
    }

    /// conv (+ bias) → ReLU; returns the ReLU's name.
    fn conv_relu(
        &mut self,
        l: usize,
        prev: &str,
        k: usize,
        s: i64,
        cin: usize,
        c: usize,
    ) -> String {
        let (w, b, conv, relu) = (
            format!("w{l}"),
            format!("b{l}"),
            format!("conv{l}"),
            format!("relu{l}"),
        );
        self.tensor(&w, vec![k * k, cin, c], 1.4 / ((k * k * cin) as f32).sqrt());
        self.tensor(&b, vec![c], 0.1);
        let attrs = [("kernel_size", k as i64), ("stride", s)];
        self.node(&conv, "SparseConv", vec![prev.into(), w, b], &attrs);
        self.node(&relu, "SparseReLU", vec![conv], &[]);
        relu
    }

    fn spec(self, output: &str) -> GraphSpec {
        GraphSpec {
            inputs: vec!["pattern".into()],
            outputs: vec![output.into()],
            nodes: self.nodes,
            initializers: self.initializers,
        }
    }
}

fn waco_graph(seed: u64) -> GraphSpec {
    let mut g = Builder {
        seed,
        nodes: Vec::new(),
        initializers: BTreeMap::new(),
    };
    let mut prev = "pattern".to_string();
    let mut taps = Vec::new();
    // `DASHRANK_WACO_LAYERS=N` keeps the first N convs (for profiling a layer's share).
    let layers = std::env::var("DASHRANK_WACO_LAYERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(14usize)
        .clamp(1, 14);
    for l in 0..layers {
        let (k, s, cin) = if l == 0 { (5, 1, 1) } else { (3, 2, 32) };
        prev = g.conv_relu(l, &prev, k, s, cin, 32);
        let pool = format!("pool{l}");
        g.node(&pool, "SparseGlobalAvgPool", vec![prev.clone()], &[]);
        taps.push(pool);
    }
    g.node("features", "Concat", taps, &[("axis", 1)]);
    g.spec("features")
}

fn dash_graph(seed: u64) -> GraphSpec {
    let mut g = Builder {
        seed,
        nodes: Vec::new(),
        initializers: BTreeMap::new(),
    };
    let widths = [32, 32, 64, 64, 64, 128, 128, 128, 256, 256, 256, 256];
    let mut prev = "pattern".to_string();
    let mut cin = 1;
    for (i, &w) in widths.iter().enumerate() {
        prev = g.conv_relu(i + 1, &prev, if i == 0 { 5 } else { 3 }, 1, cin, w);
        if [3, 6, 9].contains(&(i + 1)) {
            let pool = format!("maxpool{}", i + 1);
            g.node(
                &pool,
                "SparseMaxPool",
                vec![prev],
                &[("kernel_size", 2), ("stride", 2)],
            );
            prev = pool;
        }
        cin = w;
    }
    g.node("features", "SparseGlobalAvgPool", vec![prev], &[]);
    g.spec("features")
}

/// Prints `log` records to stderr (enabled by `DASHRANK_TRACE`).
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        eprintln!("{}", record.args());
    }
    fn flush(&self) {}
}

/// CPU time of this process so far in ms (user + system, from `/proc/self/stat`; 0 where
/// that is unavailable).
fn cpu_ms() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // Clock ticks of 10 ms (USER_HZ = 100 on Linux).
    (field(11) + field(12)) * 10.0
}

/// Median wall time and least CPU time (ms), the output and the figures of some runs.
type Timed = (f64, f64, Vec<f32>, FeaturizeStats);

/// [`Timed`] over `repeats` runs.
fn time_runs(
    graph: &FeaturizerGraph,
    p: &CsrPattern,
    threads: usize,
    repeats: usize,
) -> Result<Timed, Box<dyn std::error::Error>> {
    let opts = FeaturizeOptions {
        threads: Some(threads),
        band_entries: std::env::var("DASHRANK_BAND_ENTRIES")
            .ok()
            .and_then(|v| v.parse().ok()),
        ..Default::default()
    };
    let (mut times, mut cpu) = (Vec::new(), f64::INFINITY);
    let (mut out, mut stats) = (Vec::new(), FeaturizeStats::default());
    for _ in 0..repeats.max(1) {
        let (t, c) = (Instant::now(), cpu_ms());
        (out, stats) = graph.run_with_stats(p, &opts)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        cpu = cpu.min(cpu_ms() - c);
    }
    times.sort_by(f64::total_cmp);
    // `DASHRANK_BEST=1`: the least wall time instead of the median (for A/B comparisons on a
    // noisy machine).
    let at = if std::env::var_os("DASHRANK_BEST").is_some() {
        0
    } else {
        times.len() / 2
    };
    Ok((times[at], cpu, out, stats))
}

/// The command line (see the module docs).
struct Args {
    shape: String,
    /// A bundle whose featurizer to time instead of `shape`'s graph.
    model: Option<PathBuf>,
    threads: Vec<usize>,
    repeats: usize,
    paths: Vec<PathBuf>,
}

fn parse_args() -> Result<Args, Box<dyn std::error::Error>> {
    let (mut shape, mut model, mut threads, mut repeats, mut paths) =
        ("waco".to_string(), None, vec![2, 1], 3, Vec::new());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--graph" => shape = args.next().ok_or("--graph needs a value")?,
            "--model" => model = Some(PathBuf::from(args.next().ok_or("--model needs a value")?)),
            "--threads" => {
                let v = args.next().ok_or("--threads needs a value")?;
                threads = v.split(',').map(str::parse).collect::<Result<_, _>>()?;
            }
            "--repeats" => repeats = args.next().ok_or("--repeats needs a value")?.parse()?,
            _ => paths.push(PathBuf::from(a)),
        }
    }
    if paths.is_empty() {
        paths.push("../shared/data/waco/matrices".into());
    }
    Ok(Args {
        shape,
        model,
        threads,
        repeats,
        paths,
    })
}

/// The `.csr` files of `paths`: a directory gives its `.csr` files in name order, a file
/// itself.
fn csr_files(paths: Vec<PathBuf>) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(&p)?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "csr"))
                .collect();
            v.sort();
            files.extend(v);
        } else {
            files.push(p);
        }
    }
    Ok(files)
}

/// FNV-1a of the features' bits.
fn digest(bits: &[u32]) -> u64 {
    bits.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Times the matrix at `path` at each thread count, printing a row each; panics when the
/// thread counts give different features.
fn time_matrix(
    graph: &FeaturizerGraph,
    path: &Path,
    threads: &[usize],
    repeats: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let p = CsrPattern::read_waco_csr(path)?;
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
    let mut first: Option<Vec<u32>> = None;
    for &t in threads {
        let (ms, cpu, out, stats) = time_runs(graph, &p, t, repeats)?;
        let bits: Vec<u32> = out.iter().map(|x| x.to_bits()).collect();
        let digest = digest(&bits);
        match &first {
            None => first = Some(bits),
            Some(b) => assert_eq!(b, &bits, "thread counts disagree on {}", path.display()),
        }
        println!(
            "{:<22} {:>9} {:>9} {:>9} {:>4} {:>10.1} {:>9.0} {:>8.1} {:>8.1} {:>9.1} {:016x}",
            name,
            p.nrows(),
            p.ncols(),
            p.nnz(),
            t,
            ms,
            cpu,
            stats.dense_macs as f64 / 1e9,
            stats.computed_macs as f64 / 1e9,
            stats.peak_bytes as f64 / (1 << 20) as f64,
            digest
        );
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    if std::env::var_os("DASHRANK_TRACE").is_some() {
        log::set_logger(&StderrLogger).map_err(|e| e.to_string())?;
        log::set_max_level(log::LevelFilter::Trace);
    }
    let model = match &args.model {
        Some(dir) => Some(Model::load(dir, &LoadOptions::default())?),
        None => None,
    };
    let synthetic;
    let graph = match &model {
        Some(m) => m.featurizer(),
        None => {
            let spec = match args.shape.as_str() {
                "waco" => waco_graph(42),
                "dash" => dash_graph(42),
                other => return Err(format!("unknown graph '{other}' (waco or dash)").into()),
            };
            synthetic = FeaturizerGraph::from_spec(&spec)?;
            &synthetic
        }
    };
    let files = csr_files(args.paths)?;
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>4} {:>10} {:>9} {:>8} {:>8} {:>9} {:>16}",
        "matrix",
        "rows",
        "cols",
        "nnz",
        "thr",
        "time (ms)",
        "cpu (ms)",
        "GMAC",
        "done",
        "peak MiB",
        "digest"
    );
    for path in files {
        time_matrix(graph, &path, &args.threads, args.repeats)?;
    }
    Ok(())
}

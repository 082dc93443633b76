//! Times the native featurizer on WACO `.csr` matrices with a random-weight, WACO-shaped
//! graph (1→32 k5 s1, then 13 × 32→32 k3 s2, ReLU after each conv, a global-average-pool
//! tap after each ReLU, concat → 448 features).
//!
//! ```text
//! cargo run --release --no-default-features --example featurize_timing -- [DIR] [REPEATS]
//! ```
//!
//! `DIR` defaults to `../shared/data/waco/matrices`. Prints the median wall time of `run`
//! per matrix for 2 threads and 1 thread, and checks the two results are bit-identical.
//! With `DASHRANK_TRACE=1` it also prints the time of every featurizer step (the library's
//! `log::trace!` records) to stderr.

use std::collections::BTreeMap;
use std::time::Instant;

use dashrank::featurize::spec::{AttrValue, GraphSpec, NodeSpec, TensorSpec};
use dashrank::featurize::{FeaturizeOptions, FeaturizerGraph, SPARSE_DOMAIN};
use dashrank::pattern::CsrPattern;

fn waco_graph(channels: usize, strided_layers: usize, mut seed: u64) -> GraphSpec {
    let mut uniform = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    let node = |name: String, op: &str, inputs: Vec<String>, attrs: Vec<(&str, i64)>| NodeSpec {
        name: name.clone(),
        op_type: op.into(),
        domain: if op == "Concat" {
            String::new()
        } else {
            SPARSE_DOMAIN.into()
        },
        inputs,
        outputs: vec![name],
        attributes: attrs
            .into_iter()
            .map(|(k, v)| (k.to_string(), AttrValue::Int(v)))
            .collect(),
    };
    let mut nodes = Vec::new();
    let mut initializers = BTreeMap::new();
    let mut prev = "pattern".to_string();
    let mut taps = Vec::new();
    for l in 0..=strided_layers {
        let (k, s, cin) = if l == 0 {
            (5usize, 1i64, 1usize)
        } else {
            (3, 2, channels)
        };
        let scale = 1.0 / ((k * k * cin) as f32).sqrt();
        let (w, b) = (format!("w{l}"), format!("b{l}"));
        let wdata = (0..k * k * cin * channels)
            .map(|_| uniform() * scale)
            .collect();
        let bdata = (0..channels).map(|_| uniform() * 0.1).collect();
        initializers.insert(
            w.clone(),
            TensorSpec {
                name: w.clone(),
                dims: vec![k * k, cin, channels],
                data: wdata,
            },
        );
        initializers.insert(
            b.clone(),
            TensorSpec {
                name: b.clone(),
                dims: vec![channels],
                data: bdata,
            },
        );
        let (conv, relu, pool) = (format!("conv{l}"), format!("relu{l}"), format!("pool{l}"));
        nodes.push(node(
            conv.clone(),
            "SparseConv",
            vec![prev, w, b],
            vec![("kernel_size", k as i64), ("stride", s)],
        ));
        nodes.push(node(relu.clone(), "SparseReLU", vec![conv], vec![]));
        nodes.push(node(
            pool.clone(),
            "SparseGlobalAvgPool",
            vec![relu.clone()],
            vec![],
        ));
        taps.push(pool);
        prev = relu;
    }
    nodes.push(node(
        "conv_features".into(),
        "Concat",
        taps,
        vec![("axis", 1)],
    ));
    GraphSpec {
        inputs: vec!["pattern".into()],
        outputs: vec!["conv_features".into()],
        nodes,
        initializers,
    }
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

fn median_ms(
    graph: &FeaturizerGraph,
    p: &CsrPattern,
    threads: usize,
    repeats: usize,
) -> (f64, Vec<f32>) {
    let opts = FeaturizeOptions {
        threads: Some(threads),
        ..Default::default()
    };
    let mut out = graph.run(p, &opts).expect("featurize"); // warm-up
    let mut times = Vec::new();
    for _ in 0..repeats {
        let t = Instant::now();
        out = graph.run(p, &opts).expect("featurize");
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], out)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .unwrap_or_else(|| "../shared/data/waco/matrices".into());
    let repeats: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);
    if std::env::var_os("DASHRANK_TRACE").is_some() {
        log::set_logger(&StderrLogger).map_err(|e| e.to_string())?;
        log::set_max_level(log::LevelFilter::Trace);
    }
    let graph = FeaturizerGraph::from_spec(&waco_graph(32, 13, 42))?;
    assert_eq!(graph.output_dim(), 448);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "csr"))
        .collect();
    paths.sort();
    println!(
        "{:<22} {:>8} {:>8} {:>9} {:>11} {:>11}",
        "matrix", "rows", "cols", "nnz", "2 thr (ms)", "1 thr (ms)"
    );
    for path in paths {
        let p = CsrPattern::read_waco_csr(&path)?;
        let (t2, o2) = median_ms(&graph, &p, 2, repeats);
        let (t1, o1) = median_ms(&graph, &p, 1, repeats);
        let same = o1.iter().zip(&o2).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "thread counts disagree on {}", path.display());
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        println!(
            "{:<22} {:>8} {:>8} {:>9} {:>11.1} {:>11.1}",
            name,
            p.nrows(),
            p.ncols(),
            p.nnz(),
            t2,
            t1
        );
    }
    Ok(())
}

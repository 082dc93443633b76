//! The native featurizer on the real matrices of `../shared/data/waco/matrices`: features
//! bit-identical across SIMD levels, thread counts and band sizes (streamed or not).
//!
//! Graphs: WACO's shape (1→32 k5, then 13 × 32→32 k3 stride 2, ReLU, pooled taps) and a
//! reduced DASH shape (stride-1 convs with 2×2 max pools), with seeded weights — bit-identity
//! does not depend on the weight values. The reference is AVX2 or the best level, 2 threads,
//! automatic bands; every other supported level is compared on every matrix, the scalar level
//! (software fused multiply-add, slow on x86) on the two smallest. Skips with a message when
//! `../shared` is absent.

use std::collections::BTreeMap;
use std::path::PathBuf;

use dashrank::featurize::spec::{AttrValue, GraphSpec, NodeSpec, TensorSpec};
use dashrank::featurize::{FeaturizeOptions, FeaturizerGraph, SPARSE_DOMAIN};
use dashrank::{CsrPattern, SimdLevel};

struct Builder {
    seed: u64,
    nodes: Vec<NodeSpec>,
    inits: BTreeMap<String, TensorSpec>,
}

impl Builder {
    fn new(seed: u64) -> Self {
        Self {
            seed,
            nodes: Vec::new(),
            inits: BTreeMap::new(),
        }
    }

    fn uniform(&mut self) -> f32 {
        self.seed = self
            .seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn node(&mut self, name: &str, op: &str, inputs: &[&str], attrs: &[(&str, i64)]) {
        self.nodes.push(NodeSpec {
            name: name.into(),
            op_type: op.into(),
            domain: if op == "Concat" {
                String::new()
            } else {
                SPARSE_DOMAIN.into()
            },
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec![name.into()],
            attributes: attrs
                .iter()
                .map(|&(k, v)| (k.to_string(), AttrValue::Int(v)))
                .collect(),
        });
    }

    /// conv + ReLU reading `prev`; returns the ReLU's name.
    fn conv(&mut self, l: usize, prev: &str, k: usize, s: i64, cin: usize, cout: usize) -> String {
        let (w, b) = (format!("w{l}"), format!("b{l}"));
        let scale = 1.4 / ((k * k * cin) as f32).sqrt();
        let wd = (0..k * k * cin * cout)
            .map(|_| self.uniform() * scale)
            .collect();
        let bd = (0..cout).map(|_| self.uniform() * 0.1).collect();
        self.inits.insert(
            w.clone(),
            TensorSpec {
                name: w.clone(),
                dims: vec![k * k, cin, cout],
                data: wd,
            },
        );
        self.inits.insert(
            b.clone(),
            TensorSpec {
                name: b.clone(),
                dims: vec![cout],
                data: bd,
            },
        );
        let (conv, relu) = (format!("conv{l}"), format!("relu{l}"));
        self.node(
            &conv,
            "SparseConv",
            &[prev, &w, &b],
            &[("kernel_size", k as i64), ("stride", s)],
        );
        self.node(&relu, "SparseReLU", &[&conv], &[]);
        relu
    }

    fn spec(self, output: &str) -> GraphSpec {
        GraphSpec {
            inputs: vec!["pattern".into()],
            outputs: vec![output.into()],
            nodes: self.nodes,
            initializers: self.inits,
        }
    }
}

fn waco() -> GraphSpec {
    let mut g = Builder::new(11);
    let mut prev = "pattern".to_string();
    let mut taps = Vec::new();
    for l in 0..14 {
        let (k, s, cin) = if l == 0 { (5, 1, 1) } else { (3, 2, 32) };
        prev = g.conv(l, &prev, k, s, cin, 32);
        let tap = format!("tap{l}");
        g.node(&tap, "SparseGlobalAvgPool", &[&prev], &[]);
        taps.push(tap);
    }
    let taps: Vec<&str> = taps.iter().map(String::as_str).collect();
    g.node("features", "Concat", &taps, &[("axis", 1)]);
    g.spec("features")
}

fn dash_small() -> GraphSpec {
    let mut g = Builder::new(12);
    let widths = [8, 8, 16, 16, 16, 24, 24, 24, 32];
    let (mut prev, mut cin) = ("pattern".to_string(), 1);
    for (i, &w) in widths.iter().enumerate() {
        prev = g.conv(i, &prev, if i == 0 { 5 } else { 3 }, 1, cin, w);
        if i % 3 == 2 && i + 1 < widths.len() {
            let pool = format!("pool{i}");
            g.node(
                &pool,
                "SparseMaxPool",
                &[&prev],
                &[("kernel_size", 2), ("stride", 2)],
            );
            prev = pool;
        }
        cin = w;
    }
    g.node("features", "SparseGlobalAvgPool", &[&prev], &[]);
    g.spec("features")
}

fn matrices() -> Option<Vec<PathBuf>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/waco/matrices");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("SKIPPED: {} not found", dir.display());
        return None;
    };
    let mut v: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "csr"))
        .collect();
    v.sort_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0));
    Some(v)
}

fn run(
    g: &FeaturizerGraph,
    p: &CsrPattern,
    simd: SimdLevel,
    threads: usize,
    band: Option<usize>,
) -> Vec<u32> {
    let o = FeaturizeOptions {
        threads: Some(threads),
        simd,
        band_entries: band,
        ..Default::default()
    };
    g.run(p, &o)
        .expect("runs")
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn check(spec: &GraphSpec, name: &str) {
    let Some(paths) = matrices() else { return };
    assert_eq!(paths.len(), 11, "all 11 real matrices");
    let g = FeaturizerGraph::from_spec(spec).expect("valid graph");
    let reference = SimdLevel::Avx2.min(SimdLevel::detect());
    for (i, path) in paths.iter().enumerate() {
        let p = CsrPattern::read_waco_csr(path).expect("readable matrix");
        let m = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        let want = run(&g, &p, reference, 2, None);
        assert!(want.iter().any(|&b| b != 0), "{name} on {m}: all zero");
        for level in SimdLevel::supported() {
            if level == SimdLevel::Scalar && i >= 2 {
                continue;
            }
            // Streamed in small bands on one thread, and as one band on three.
            let small = run(&g, &p, level, 1, Some(p.nnz() / 7 + 1));
            assert_eq!(
                small, want,
                "{name} on {m}: {level}, 1 thread, 7 bands vs {reference}"
            );
            let whole = run(&g, &p, level, 3, Some(usize::MAX));
            assert_eq!(
                whole, want,
                "{name} on {m}: {level}, 3 threads, one band vs {reference}"
            );
        }
    }
}

#[test]
fn waco_shape_is_bit_identical_on_real_matrices() {
    check(&waco(), "waco");
}

#[test]
fn dash_shape_is_bit_identical_on_real_matrices() {
    check(&dash_small(), "dash");
}

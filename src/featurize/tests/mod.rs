//! Featurizer tests: shared helpers and generators (here), hand-computed cases (`cases`),
//! validation errors (`errors`), agreement with a naive `f64` interpreter (`naive`), and
//! bit-identity across thread counts, SIMD levels and band sizes plus the memory bound
//! (`identity`).

mod cases;
mod errors;
mod identity;
mod naive;

use std::collections::BTreeMap;

use super::ops::SPARSE_DOMAIN;
use super::spec::{AttrValue, GraphSpec, NodeSpec, TensorSpec};
use super::{FeaturizeOptions, FeaturizerGraph};
use crate::pattern::CsrPattern;
use crate::simd::SimdLevel;

pub(crate) fn node(name: &str, op: &str, inputs: &[&str], attrs: &[(&str, i64)]) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        op_type: op.into(),
        domain: if op == "Concat" {
            String::new()
        } else {
            SPARSE_DOMAIN.into()
        },
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        outputs: vec![name.to_string()],
        attributes: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), AttrValue::Int(*v)))
            .collect(),
    }
}

pub(crate) fn tensor(name: &str, dims: &[usize], data: Vec<f32>) -> (String, TensorSpec) {
    (
        name.to_string(),
        TensorSpec {
            name: name.into(),
            dims: dims.to_vec(),
            data,
        },
    )
}

pub(crate) fn graph(
    nodes: Vec<NodeSpec>,
    output: &str,
    inits: Vec<(String, TensorSpec)>,
) -> GraphSpec {
    GraphSpec {
        inputs: vec!["pattern".into()],
        outputs: vec![output.into()],
        nodes,
        initializers: inits.into_iter().collect::<BTreeMap<_, _>>(),
    }
}

/// Points given as (row, col) → pattern.
pub(crate) fn pattern(nrows: usize, ncols: usize, pts: &[(usize, u32)]) -> CsrPattern {
    let mut rp = vec![0usize; nrows + 1];
    for &(r, _) in pts {
        rp[r + 1] += 1;
    }
    for r in 0..nrows {
        rp[r + 1] += rp[r];
    }
    let mut sorted = pts.to_vec();
    sorted.sort_unstable();
    CsrPattern::new(nrows, ncols, rp, sorted.iter().map(|p| p.1).collect()).expect("valid")
}

pub(crate) fn opts(threads: usize) -> FeaturizeOptions {
    FeaturizeOptions {
        threads: Some(threads),
        ..Default::default()
    }
}

pub(crate) fn run1(spec: &GraphSpec, p: &CsrPattern) -> Vec<f32> {
    FeaturizerGraph::from_spec(spec)
        .expect("valid graph")
        .run(p, &opts(1))
        .expect("runs")
}

pub(crate) fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Deterministic pseudo-random numbers (SplitMix64).
pub(crate) struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn uniform(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

/// Adds a conv (`k`, `s`, `cin → cout`, random weights and bias) reading `prev`.
fn conv_layer(
    rng: &mut Rng,
    nodes: &mut Vec<NodeSpec>,
    inits: &mut Vec<(String, TensorSpec)>,
    name: &str,
    prev: &str,
    (k, s, cin, cout): (usize, i64, usize, usize),
) {
    let scale = 1.4 / ((k * k * cin) as f32).sqrt();
    let w: Vec<f32> = (0..k * k * cin * cout)
        .map(|_| rng.uniform() * scale)
        .collect();
    let b: Vec<f32> = (0..cout).map(|_| rng.uniform() * 0.1).collect();
    let (wn, bn) = (format!("{name}.w"), format!("{name}.b"));
    inits.push(tensor(&wn, &[k * k, cin, cout], w));
    inits.push(tensor(&bn, &[cout], b));
    nodes.push(node(
        name,
        "SparseConv",
        &[prev, &wn, &bn],
        &[("kernel_size", k as i64), ("stride", s)],
    ));
}

/// WACO's ResNet14 shape: 1→c k5 s1, then `layers` × c→c k3 s2, ReLU each, pooled taps.
pub(crate) fn waco_like(c: usize, layers: usize, seed: u64) -> GraphSpec {
    let mut rng = Rng(seed);
    let mut nodes = Vec::new();
    let mut inits = Vec::new();
    let mut prev = "pattern".to_string();
    let mut taps = Vec::new();
    for l in 0..=layers {
        let shape = if l == 0 { (5, 1, 1, c) } else { (3, 2, c, c) };
        let conv = format!("conv{l}");
        conv_layer(&mut rng, &mut nodes, &mut inits, &conv, &prev, shape);
        let relu = format!("relu{l}");
        let pool = format!("pool{l}");
        nodes.push(node(&relu, "SparseReLU", &[&conv], &[]));
        nodes.push(node(&pool, "SparseGlobalAvgPool", &[&relu], &[]));
        taps.push(pool);
        prev = relu;
    }
    let tap_refs: Vec<&str> = taps.iter().map(String::as_str).collect();
    nodes.push(node("features", "Concat", &tap_refs, &[("axis", 1)]));
    graph(nodes, "features", inits)
}

/// DASH's IFE shape with the given widths: k5 then k3 stride-1 convs, ReLU, a 2×2 stride-2
/// max pool after every third layer but the last block, one pooled tap of the last layer.
pub(crate) fn dash_like(widths: &[usize], seed: u64) -> GraphSpec {
    let mut rng = Rng(seed);
    let mut nodes = Vec::new();
    let mut inits = Vec::new();
    let mut prev = "pattern".to_string();
    let mut cin = 1;
    for (i, &w) in widths.iter().enumerate() {
        let conv = format!("conv{i}");
        let k = if i == 0 { 5 } else { 3 };
        conv_layer(
            &mut rng,
            &mut nodes,
            &mut inits,
            &conv,
            &prev,
            (k, 1, cin, w),
        );
        let relu = format!("relu{i}");
        nodes.push(node(&relu, "SparseReLU", &[&conv], &[]));
        prev = relu;
        if i % 3 == 2 && i + 1 < widths.len() {
            let pool = format!("maxpool{i}");
            nodes.push(node(
                &pool,
                "SparseMaxPool",
                &[&prev],
                &[("kernel_size", 2), ("stride", 2)],
            ));
            prev = pool;
        }
        cin = w;
    }
    nodes.push(node("gap", "SparseGlobalAvgPool", &[&prev], &[]));
    graph(nodes, "gap", inits)
}

/// A pattern of `n` rows with about `per_row` entries each: near-diagonal and scattered.
pub(crate) fn random_pattern(n: usize, per_row: usize, seed: u64) -> CsrPattern {
    square_pattern(n, per_row, seed, |r, rng| {
        if rng.next().is_multiple_of(2) {
            ((r as u64 + rng.next() % 7) % n as u64) as u32
        } else {
            (rng.next() % n as u64) as u32
        }
    })
}

/// A pattern of `n` rows with about `per_row` entries each at uniformly random columns: almost
/// every point is alone in a small window.
pub(crate) fn scattered(n: usize, per_row: usize, seed: u64) -> CsrPattern {
    square_pattern(n, per_row, seed, |_, rng| (rng.next() % n as u64) as u32)
}

/// An `n × n` pattern whose row `r` holds the distinct columns of `per_row` draws of
/// `column(r, rng)`.
fn square_pattern(
    n: usize,
    per_row: usize,
    seed: u64,
    mut column: impl FnMut(usize, &mut Rng) -> u32,
) -> CsrPattern {
    let mut rng = Rng(seed);
    let mut rp = vec![0usize];
    let mut ci = Vec::new();
    for r in 0..n {
        let mut row: Vec<u32> = (0..per_row).map(|_| column(r, &mut rng)).collect();
        row.sort_unstable();
        row.dedup();
        ci.extend(row);
        rp.push(ci.len());
    }
    CsrPattern::new(n, n, rp, ci).expect("valid")
}

/// R-MAT pattern (a, b, c = .57, .19, .19) of `2^scale` rows with `edges` draws: graph-like,
/// most neighbourhoods hold a single entry.
pub(crate) fn rmat(scale: u32, edges: usize, seed: u64) -> CsrPattern {
    let mut rng = Rng(seed);
    let n = 1usize << scale;
    let mut pts: Vec<(u32, u32)> = (0..edges)
        .map(|_| {
            let (mut r, mut c) = (0u32, 0u32);
            for _ in 0..scale {
                let u = (rng.next() >> 40) as f32 / (1u64 << 24) as f32;
                let (down, right) = if u < 0.57 {
                    (0, 0)
                } else if u < 0.76 {
                    (0, 1)
                } else if u < 0.95 {
                    (1, 0)
                } else {
                    (1, 1)
                };
                r = r * 2 + down;
                c = c * 2 + right;
            }
            (r, c)
        })
        .collect();
    pts.sort_unstable();
    pts.dedup();
    let mut rp = vec![0usize; n + 1];
    for &(r, _) in &pts {
        rp[r as usize + 1] += 1;
    }
    for r in 0..n {
        rp[r + 1] += rp[r];
    }
    CsrPattern::new(n, n, rp, pts.iter().map(|p| p.1).collect()).expect("valid")
}

//! Hand-computed featurizer cases, validation errors, and determinism.
//!
//! Expected values are worked out in the comments from `docs/bundle-format.md` §3.1.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::coords::Coords;
use super::ops::{
    BufferPool, Features, MaxPool, Op, SparseConv, SparseValue, Value, SPARSE_DOMAIN,
};
use super::rulebook::Geometry;
use super::spec::{AttrValue, GraphSpec, NodeSpec, TensorSpec};
use super::{FeaturizeOptions, FeaturizerGraph};
use crate::pattern::CsrPattern;
use crate::ErrorKind;

fn node(name: &str, op: &str, inputs: &[&str], attrs: &[(&str, i64)]) -> NodeSpec {
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

fn tensor(name: &str, dims: &[usize], data: Vec<f32>) -> (String, TensorSpec) {
    (
        name.to_string(),
        TensorSpec {
            name: name.into(),
            dims: dims.to_vec(),
            data,
        },
    )
}

fn graph(nodes: Vec<NodeSpec>, output: &str, inits: Vec<(String, TensorSpec)>) -> GraphSpec {
    GraphSpec {
        inputs: vec!["pattern".into()],
        outputs: vec![output.into()],
        nodes,
        initializers: inits.into_iter().collect::<BTreeMap<_, _>>(),
    }
}

/// Points given as (row, col) → pattern.
fn pattern(nrows: usize, ncols: usize, pts: &[(usize, u32)]) -> CsrPattern {
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

fn sparse_value(nrows: usize, ncols: usize, pts: &[(usize, u32)], feats: Vec<f32>) -> SparseValue {
    let c = Coords::from_pattern(&pattern(nrows, ncols, pts));
    SparseValue {
        channels: feats.len() / c.len(),
        coords: Arc::new(c),
        feats: Features::Dense(feats),
        sums: None,
    }
}

fn run1(spec: &GraphSpec, p: &CsrPattern) -> Vec<f32> {
    FeaturizerGraph::from_spec(spec)
        .expect("valid graph")
        .run(
            p,
            &FeaturizeOptions {
                threads: Some(1),
                ..Default::default()
            },
        )
        .expect("runs")
}

#[test]
fn kernel_offset_order_is_row_fastest() {
    // W[κ] = 2^κ (Cin = Cout = 1). Points (1,1) and (2,1): for (1,1) the other point is at
    // offset (+1, 0) → i_r = 2, i_c = 1 → κ = 2 + 3·1 = 5, itself κ = 4: 16 + 32 = 48.
    // For (2,1): offset (−1, 0) → κ = 0 + 3 = 3: 16 + 8 = 24. (Column-fastest would give
    // 16 + 128 and 16 + 2.)
    let w: Vec<f32> = (0..9).map(|k| (1u32 << k) as f32).collect();
    let conv = SparseConv {
        geom: Geometry::new(3, 1, 1),
        stride: 1,
        t_out: 1,
        cin: 1,
        cout: 1,
        weights: w.clone(),
        bias: None,
        relu: false,
        sums: false,
    };
    let x = sparse_value(3, 3, &[(1, 1), (2, 1)], vec![1.0, 1.0]);
    let y = conv.run("c", &x).expect("runs");
    assert_eq!(y.dense().to_vec(), vec![48.0, 24.0]);

    // Through a whole graph with bias 0.5: mean(48.5, 24.5) = 36.5.
    let spec = graph(
        vec![
            node(
                "c",
                "SparseConv",
                &["pattern", "W", "b"],
                &[("kernel_size", 3)],
            ),
            node("p", "SparseGlobalAvgPool", &["c"], &[]),
        ],
        "p",
        vec![tensor("W", &[9, 1, 1], w), tensor("b", &[1], vec![0.5])],
    );
    assert_eq!(run1(&spec, &pattern(3, 3, &[(1, 1), (2, 1)])), vec![36.5]);
}

#[test]
fn multi_channel_conv() {
    // Cin = 2, Cout = 3, k = 1: out = x · W[0] with W[0] = [[1,2,3],[4,5,6]].
    let conv = SparseConv {
        geom: Geometry::new(1, 1, 1),
        stride: 1,
        t_out: 1,
        cin: 2,
        cout: 3,
        weights: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        bias: Some(vec![0.0, 0.0, 100.0]),
        relu: false,
        sums: false,
    };
    let x = sparse_value(1, 2, &[(0, 0), (0, 1)], vec![1.0, 0.0, 0.5, 2.0]);
    let y = conv.run("c", &x).expect("runs");
    assert_eq!(y.dense().to_vec(), vec![1.0, 2.0, 103.0, 8.5, 11.0, 113.5]);
}

#[test]
fn strided_conv_merges_output_coordinates() {
    // Points (0,0), (0,1), (1,1), (3,3); k = 3, s = 2, W = 1. Outputs at (0,0) and (2,2).
    // (0,0) sees rows/cols −1..1: (0,0), (0,1), (1,1) → 3. (2,2) sees 1..3: (1,1), (3,3) → 2.
    let conv = SparseConv {
        geom: Geometry::new(3, 1, 1),
        stride: 2,
        t_out: 2,
        cin: 1,
        cout: 1,
        weights: vec![1.0; 9],
        bias: None,
        relu: false,
        sums: false,
    };
    let x = sparse_value(4, 4, &[(0, 0), (0, 1), (1, 1), (3, 3)], vec![1.0; 4]);
    let y = conv.run("c", &x).expect("runs");
    assert_eq!(y.coords.rows, vec![0, 2]);
    assert_eq!(y.coords.cols, vec![0, 2]);
    assert_eq!(y.dense().to_vec(), vec![3.0, 2.0]);
}

#[test]
fn second_stride2_layer_uses_doubled_offsets() {
    // Input at tensor stride 2 with points (0,0)=1, (0,2)=3, (0,4)=5, (2,0)=2, (2,2)=4;
    // k = 3, s = 2 → offsets {−2, 0, 2}, output stride 4, outputs (0,0) and (0,4).
    // (0,0): (0,0) κ4, (2,0) κ5, (0,2) κ7, (2,2) κ8 → with W[κ] = κ: 4·1 + 5·2 + 7·3 + 8·4 = 67.
    // (0,4): (0,2) at (0,−2) κ1, (2,2) at (+2,−2) κ2, (0,4) κ4 → 1·3 + 2·4 + 4·5 = 31.
    // Built through the graph to check the tensor stride is tracked: layer 1 (k 1, s 2)
    // maps each even point to itself.
    let conv = SparseConv {
        geom: Geometry::new(3, 1, 2),
        stride: 2,
        t_out: 4,
        cin: 1,
        cout: 1,
        weights: (0..9).map(|k| k as f32).collect(),
        bias: None,
        relu: false,
        sums: false,
    };
    let pts = [(0, 0), (0, 2), (0, 4), (2, 0), (2, 2)];
    let x = sparse_value(3, 5, &pts, vec![1.0, 3.0, 5.0, 2.0, 4.0]);
    let y = conv.run("c", &x).expect("runs");
    assert_eq!(y.coords.rows, vec![0]);
    assert_eq!(y.coords.cols, vec![0, 4]);
    assert_eq!(y.dense().to_vec(), vec![67.0, 31.0]);

    // Graph: conv1 k1 s2 (W = 1) → conv2 k3 s2 (W[κ] = κ) → avg. All inputs are 1, so
    // (0,0) = 4+5+7+8 = 24, (0,4) = 1+2+4 = 7 → mean 15.5. Offsets ±1 would give (4 + 4)/2.
    let spec = graph(
        vec![
            node(
                "c1",
                "SparseConv",
                &["pattern", "W1"],
                &[("kernel_size", 1), ("stride", 2)],
            ),
            node(
                "c2",
                "SparseConv",
                &["c1", "W2"],
                &[("kernel_size", 3), ("stride", 2)],
            ),
            node("p", "SparseGlobalAvgPool", &["c2"], &[]),
        ],
        "p",
        vec![
            tensor("W1", &[1, 1, 1], vec![1.0]),
            tensor("W2", &[9, 1, 1], (0..9).map(|k| k as f32).collect()),
        ],
    );
    assert_eq!(run1(&spec, &pattern(3, 5, &pts)), vec![15.5]);
}

#[test]
fn even_kernel_max_pool() {
    // k = 2 → offsets {0, 1}; s = 2. Points (0,0)=1, (0,1)=5, (1,1)=3, (2,3)=7 → outputs
    // (0,0) = max(1, 5, 3) = 5 and (2,2) = 7 (window rows 2..3, cols 2..3). An odd-style
    // window {−1, 0} would give 3 at (2,2).
    let pool = Op::MaxPool(MaxPool {
        geom: Geometry::new(2, 1, 1),
        stride: 2,
        t_out: 2,
    });
    let x = Value::Sparse(sparse_value(
        3,
        4,
        &[(0, 0), (0, 1), (1, 1), (2, 3)],
        vec![1.0, 5.0, 3.0, 7.0],
    ));
    let Value::Sparse(y) = pool
        .run("m", &[&x], None, &BufferPool::default())
        .expect("runs")
    else {
        panic!("sparse expected")
    };
    assert_eq!(y.coords.cols, vec![0, 2]);
    assert_eq!(y.dense().to_vec(), vec![5.0, 7.0]);
}

#[test]
fn relu_taps_and_concat() {
    // conv (k1, W = −1, bias 0.25) → relu; taps of both, concat: [mean(−0.75), mean(0)].
    let spec = graph(
        vec![
            node(
                "c",
                "SparseConv",
                &["pattern", "W", "b"],
                &[("kernel_size", 1)],
            ),
            node("r", "SparseReLU", &["c"], &[]),
            node("pc", "SparseGlobalAvgPool", &["c"], &[]),
            node("pr", "SparseGlobalAvgPool", &["r"], &[]),
            node("cat", "Concat", &["pc", "pr", "pc"], &[("axis", 1)]),
        ],
        "cat",
        vec![
            tensor("W", &[1, 1, 1], vec![-1.0]),
            tensor("b", &[1], vec![0.25]),
        ],
    );
    let g = FeaturizerGraph::from_spec(&spec).expect("valid");
    assert_eq!(g.output_dim(), 3);
    let out = g
        .run(
            &pattern(2, 2, &[(0, 0), (1, 1)]),
            &FeaturizeOptions::default(),
        )
        .expect("runs");
    assert_eq!(out, vec![-0.75, 0.0, -0.75]);
}

#[test]
fn empty_pattern_pools_to_zero() {
    let spec = graph(
        vec![
            node("c", "SparseConv", &["pattern", "W"], &[("kernel_size", 3)]),
            node("p", "SparseGlobalAvgPool", &["c"], &[]),
        ],
        "p",
        vec![tensor("W", &[9, 1, 2], vec![1.0; 18])],
    );
    let p = CsrPattern::new(3, 3, vec![0; 4], vec![]).expect("valid");
    assert_eq!(run1(&spec, &p), vec![0.0, 0.0]);
}

// === WACO-shaped graph, determinism ===

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

/// WACO's ResNet14 shape: 1→c k5 s1, then `layers` × c→c k3 s2, ReLU each, pooled taps.
pub(crate) fn waco_like(c: usize, layers: usize, seed: u64) -> GraphSpec {
    let mut rng = Rng(seed);
    let mut nodes = Vec::new();
    let mut inits = Vec::new();
    let mut prev = "pattern".to_string();
    let mut taps = Vec::new();
    for l in 0..=layers {
        let (k, s, cin) = if l == 0 { (5, 1, 1) } else { (3, 2, c) };
        let scale = 1.0 / ((k * k * cin) as f32).sqrt();
        let w: Vec<f32> = (0..k * k * cin * c)
            .map(|_| rng.uniform() * scale)
            .collect();
        let b: Vec<f32> = (0..c).map(|_| rng.uniform() * 0.1).collect();
        let (wn, bn) = (format!("w{l}"), format!("b{l}"));
        inits.push(tensor(&wn, &[k * k, cin, c], w));
        inits.push(tensor(&bn, &[c], b));
        let conv = format!("conv{l}");
        let relu = format!("relu{l}");
        let pool = format!("pool{l}");
        nodes.push(node(
            &conv,
            "SparseConv",
            &[&prev, &wn, &bn],
            &[("kernel_size", k as i64), ("stride", s)],
        ));
        nodes.push(node(&relu, "SparseReLU", &[&conv], &[]));
        nodes.push(node(&pool, "SparseGlobalAvgPool", &[&relu], &[]));
        taps.push(pool);
        prev = relu;
    }
    let tap_refs: Vec<&str> = taps.iter().map(String::as_str).collect();
    nodes.push(node("features", "Concat", &tap_refs, &[("axis", 1)]));
    graph(nodes, "features", inits)
}

fn random_pattern(n: usize, per_row: usize, seed: u64) -> CsrPattern {
    let mut rng = Rng(seed);
    let mut rp = vec![0usize];
    let mut ci = Vec::new();
    for r in 0..n {
        let mut row: Vec<u32> = (0..per_row)
            .map(|_| {
                // Mix of near-diagonal and scattered entries.
                if rng.next().is_multiple_of(2) {
                    ((r as u64 + rng.next() % 7) % n as u64) as u32
                } else {
                    (rng.next() % n as u64) as u32
                }
            })
            .collect();
        row.sort_unstable();
        row.dedup();
        ci.extend(row);
        rp.push(ci.len());
    }
    CsrPattern::new(n, n, rp, ci).expect("valid")
}

#[test]
fn deterministic_across_thread_counts() {
    let spec = waco_like(16, 5, 7);
    let g = FeaturizerGraph::from_spec(&spec).expect("valid");
    assert_eq!(g.output_dim(), 16 * 6);
    let p = random_pattern(700, 12, 3);
    let one = g
        .run(
            &p,
            &FeaturizeOptions {
                threads: Some(1),
                ..Default::default()
            },
        )
        .expect("runs");
    let two = g
        .run(
            &p,
            &FeaturizeOptions {
                threads: Some(2),
                ..Default::default()
            },
        )
        .expect("runs");
    let three = g
        .run(
            &p,
            &FeaturizeOptions {
                threads: Some(3),
                ..Default::default()
            },
        )
        .expect("runs");
    let any = g
        .run(
            &p,
            &FeaturizeOptions {
                threads: None,
                ..Default::default()
            },
        )
        .expect("runs");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&one), bits(&two));
    assert_eq!(bits(&one), bits(&three));
    assert_eq!(bits(&one), bits(&any));
    assert!(one.iter().all(|v| v.is_finite()));
    assert!(one.iter().any(|&v| v != 0.0));
}

#[test]
fn graph_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<FeaturizerGraph>();
}

// === validation errors ===

fn load_err(spec: &GraphSpec) -> (String, String) {
    let e = FeaturizerGraph::from_spec(spec).expect_err("must fail");
    match e.kind() {
        ErrorKind::Featurize { node, reason } => (node.clone(), reason.clone()),
        other => panic!("unexpected {other:?}"),
    }
}

/// A valid one-conv graph to mutate.
fn base() -> GraphSpec {
    graph(
        vec![
            node(
                "c",
                "SparseConv",
                &["pattern", "W", "b"],
                &[("kernel_size", 3)],
            ),
            node("p", "SparseGlobalAvgPool", &["c"], &[]),
        ],
        "p",
        vec![
            tensor("W", &[9, 1, 4], vec![0.5; 36]),
            tensor("b", &[4], vec![0.0; 4]),
        ],
    )
}

#[test]
fn base_graph_is_valid() {
    assert_eq!(
        FeaturizerGraph::from_spec(&base())
            .expect("valid")
            .output_dim(),
        4
    );
}

#[test]
fn op_and_domain_errors() {
    let mut s = base();
    s.nodes[0].op_type = "SparseDeconv".into();
    assert_eq!(
        load_err(&s),
        (
            "c".into(),
            "unknown op type 'SparseDeconv' in domain 'ai.dashrank.sparse'".into()
        )
    );
    let mut s = base();
    s.nodes[0].domain = "com.example".into();
    assert_eq!(
        load_err(&s).1,
        "unknown domain 'com.example' (op type 'SparseConv')"
    );
    let mut s = base();
    s.nodes[1].domain = String::new();
    assert_eq!(
        load_err(&s),
        (
            "p".into(),
            "unknown op type 'SparseGlobalAvgPool' in domain ''".into()
        )
    );
    let mut s = base();
    s.nodes[0].name = String::new();
    s.nodes[0].op_type = "Nope".into();
    assert_eq!(load_err(&s).0, "#0 Nope");
}

#[test]
fn attribute_errors() {
    let mut s = base();
    s.nodes[0].attributes.clear();
    assert_eq!(load_err(&s).1, "missing attribute 'kernel_size'");
    let mut s = base();
    s.nodes[0]
        .attributes
        .insert("kernel_size".into(), AttrValue::Int(0));
    assert_eq!(
        load_err(&s).1,
        "attribute 'kernel_size' = 0 is outside 1..=31"
    );
    let mut s = base();
    s.nodes[0]
        .attributes
        .insert("stride".into(), AttrValue::Ints(vec![2, 1]));
    assert!(load_err(&s)
        .1
        .starts_with("attribute 'stride' must be an integer"));
    let mut s = base();
    s.nodes[0]
        .attributes
        .insert("padding".into(), AttrValue::Int(1));
    assert_eq!(load_err(&s).1, "unknown attribute 'padding'");
    let mut s = base();
    s.nodes[0]
        .attributes
        .insert("kernel_size".into(), AttrValue::Ints(vec![3, 3]));
    assert!(FeaturizerGraph::from_spec(&s).is_ok());
}

#[test]
fn weight_errors() {
    let mut s = base();
    s.initializers.remove("W");
    assert_eq!(
        load_err(&s),
        (
            "c".into(),
            "weight 'W' is not an initializer of the graph".into()
        )
    );
    let mut s = base();
    s.initializers
        .insert("W".into(), tensor("W", &[9, 2, 4], vec![0.0; 72]).1);
    assert_eq!(
        load_err(&s).1,
        "weight 'W' has shape [9, 2, 4], expected [kernel_size² = 9, Cin = 1, Cout > 0]"
    );
    let mut s = base();
    s.initializers
        .insert("W".into(), tensor("W", &[25, 1, 4], vec![0.0; 100]).1);
    assert!(load_err(&s)
        .1
        .starts_with("weight 'W' has shape [25, 1, 4]"));
    let mut s = base();
    s.initializers
        .insert("b".into(), tensor("b", &[3], vec![0.0; 3]).1);
    assert_eq!(
        load_err(&s).1,
        "bias 'b' has shape [3], expected [Cout = 4]"
    );
    let mut s = base();
    let mut w = vec![0.0; 36];
    w[7] = f32::NAN;
    s.initializers
        .insert("W".into(), tensor("W", &[9, 1, 4], w).1);
    assert_eq!(
        load_err(&s).1,
        "weight 'W' has a non-finite value NaN at flat index 7"
    );
    let mut s = base();
    s.initializers.insert(
        "b".into(),
        tensor("b", &[4], vec![0.0, f32::INFINITY, 0.0, 0.0]).1,
    );
    assert_eq!(
        load_err(&s).1,
        "bias 'b' has a non-finite value inf at flat index 1"
    );
    let mut s = base();
    s.initializers
        .insert("W".into(), tensor("W", &[9, 1, 4], vec![0.0; 35]).1);
    assert_eq!(
        load_err(&s).1,
        "weight 'W' has 35 values but dims [9, 1, 4] need 36"
    );
    // Weight that is a computed value.
    let mut s = base();
    s.nodes.insert(
        1,
        node("c2", "SparseConv", &["c", "c", "b"], &[("kernel_size", 3)]),
    );
    assert_eq!(
        load_err(&s),
        (
            "c2".into(),
            "weight 'c' is a computed value, expected an initializer".into()
        )
    );
}

#[test]
fn value_errors() {
    let mut s = base();
    s.nodes[1].inputs[0] = "nope".into();
    assert_eq!(
        load_err(&s).1,
        "input 0 'nope' is not defined by the graph input or an earlier node"
    );
    let mut s = base();
    s.nodes[1].inputs[0] = "W".into();
    assert_eq!(
        load_err(&s).1,
        "input 0 'W' is an initializer, expected a value computed by the graph"
    );
    // Unused node output.
    let mut s = base();
    s.nodes.insert(1, node("dead", "SparseReLU", &["c"], &[]));
    assert_eq!(
        load_err(&s),
        (
            "dead".into(),
            "output is not used by any node nor the graph output".into()
        )
    );
    // Unused initializer.
    let mut s = base();
    s.initializers
        .insert("extra".into(), tensor("extra", &[1], vec![0.0]).1);
    assert_eq!(
        load_err(&s),
        ("extra".into(), "initializer is not used by any node".into())
    );
    // Duplicate output name.
    let mut s = base();
    s.nodes[1].outputs[0] = "c".into();
    assert_eq!(
        load_err(&s),
        ("p".into(), "output 'c' is already defined".into())
    );
    // Wrong input count.
    let mut s = base();
    s.nodes[1].inputs.push("c".into());
    assert_eq!(load_err(&s).1, "expected 1 input(s), found 2");
    let mut s = base();
    s.nodes[0].inputs.truncate(1);
    assert_eq!(load_err(&s).1, "expected 2 to 3 input(s), found 1");
}

#[test]
fn dense_sparse_mismatch_errors() {
    // ReLU on a dense value.
    let mut s = base();
    s.nodes.push(node("r", "SparseReLU", &["p"], &[]));
    s.outputs[0] = "r".into();
    assert_eq!(
        load_err(&s),
        (
            "r".into(),
            "input 0 'p' is dense [1, C], expected a sparse value".into()
        )
    );
    // Concat of a sparse value.
    let mut s = base();
    s.nodes
        .push(node("cat", "Concat", &["p", "c"], &[("axis", 1)]));
    s.outputs[0] = "cat".into();
    assert_eq!(
        load_err(&s).1,
        "input 1 'c' is sparse, expected a dense [1, C] value (pool it first)"
    );
    // Sparse graph output.
    let mut s = base();
    s.nodes.pop();
    s.outputs[0] = "c".into();
    assert_eq!(
        load_err(&s),
        (
            "graph".into(),
            "graph output 'c' is sparse, expected a dense [1, F] value".into()
        )
    );
    // Concat axis.
    let mut s = base();
    s.nodes.push(node("cat", "Concat", &["p"], &[]));
    s.outputs[0] = "cat".into();
    assert_eq!(load_err(&s).1, "missing attribute 'axis'");
    s.nodes[2]
        .attributes
        .insert("axis".into(), AttrValue::Int(0));
    assert_eq!(
        load_err(&s).1,
        "attribute 'axis' must be 1 (features of dense [1, C] values), found Int(0)"
    );
}

#[test]
fn graph_level_errors() {
    let mut s = base();
    s.inputs.push("x".into());
    assert_eq!(
        load_err(&s),
        (
            "graph".into(),
            "expected exactly 1 graph input (the pattern), found 2".into()
        )
    );
    let mut s = base();
    s.outputs = vec![];
    assert_eq!(load_err(&s).1, "expected exactly 1 graph output, found 0");
    let mut s = base();
    s.outputs[0] = "missing".into();
    assert_eq!(
        load_err(&s).1,
        "graph output 'missing' is not produced by any node"
    );
    let mut s = base();
    s.nodes[0].outputs.push("extra".into());
    assert_eq!(
        load_err(&s).1,
        "expected exactly 1 named output, found [\"c\", \"extra\"]"
    );
}

#[test]
fn run_argument_errors() {
    let g = FeaturizerGraph::from_spec(&base()).expect("valid");
    let p = pattern(1, 1, &[(0, 0)]);
    let e = g
        .run(
            &p,
            &FeaturizeOptions {
                threads: Some(0),
                ..Default::default()
            },
        )
        .expect_err("zero threads");
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }));
}

#[test]
fn fused_relu_matches_unfused() {
    // A: conv → relu → pool (the ReLU is fused into the conv). B: the same plus a tap on
    // the conv output, which prevents fusion; B's first half must equal A bit for bit.
    let w: Vec<f32> = (0..25 * 4)
        .map(|i| ((i * 37 % 11) as f32 - 5.0) / 7.0)
        .collect();
    let inits = || {
        vec![
            tensor("W", &[25, 1, 4], w.clone()),
            tensor("b", &[4], vec![0.1, -0.2, 0.3, -0.4]),
        ]
    };
    let conv = || {
        node(
            "c",
            "SparseConv",
            &["pattern", "W", "b"],
            &[("kernel_size", 5)],
        )
    };
    let a = graph(
        vec![
            conv(),
            node("r", "SparseReLU", &["c"], &[]),
            node("p", "SparseGlobalAvgPool", &["r"], &[]),
        ],
        "p",
        inits(),
    );
    let b = graph(
        vec![
            conv(),
            node("r", "SparseReLU", &["c"], &[]),
            node("p", "SparseGlobalAvgPool", &["r"], &[]),
            node("pc", "SparseGlobalAvgPool", &["c"], &[]),
            node("cat", "Concat", &["p", "pc"], &[("axis", 1)]),
        ],
        "cat",
        inits(),
    );
    let p = random_pattern(60, 5, 11);
    let (ra, rb) = (run1(&a, &p), run1(&b, &p));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&ra), bits(&rb[..4]));
    assert!(
        rb[4..].iter().any(|&v| v < 0.0),
        "unfused tap keeps negatives: {rb:?}"
    );
}

// === tiled conv path and buffer reuse ===

/// Naive conv in `f64`: for every output point and κ, looks the input point up in a map.
fn naive_conv(conv: &SparseConv, x: &SparseValue, out: &Coords) -> Vec<f64> {
    let mut at = std::collections::HashMap::new();
    for i in 0..x.coords.rows.len() {
        for p in x.coords.row_range(i) {
            at.insert(
                (i64::from(x.coords.rows[i]), i64::from(x.coords.cols[p])),
                p,
            );
        }
    }
    let (cin, cout, k) = (conv.cin, conv.cout, conv.geom.k);
    let xf = x.dense();
    let mut y = Vec::new();
    for i in 0..out.rows.len() {
        for p in out.row_range(i) {
            let (r, c) = (i64::from(out.rows[i]), i64::from(out.cols[p]));
            let mut acc = vec![0.0f64; cout];
            for ic in 0..k {
                for ir in 0..k {
                    let key = (r + conv.geom.offsets[ir], c + conv.geom.offsets[ic]);
                    let Some(&q) = at.get(&key) else { continue };
                    let kappa = ir + k * ic;
                    for ci in 0..cin {
                        let xv = f64::from(xf[q * cin + ci]);
                        for (co, a) in acc.iter_mut().enumerate() {
                            *a += xv * f64::from(conv.weights[(kappa * cin + ci) * cout + co]);
                        }
                    }
                }
            }
            for (co, a) in acc.iter_mut().enumerate() {
                *a += conv.bias.as_ref().map_or(0.0, |b| f64::from(b[co]));
                if conv.relu && *a < 0.0 {
                    *a = 0.0;
                }
            }
            y.extend(acc);
        }
    }
    y
}

#[test]
fn conv_paths_match_naive() {
    let p = random_pattern(300, 9, 11);
    let coords = Arc::new(Coords::from_pattern(&p));
    let mut rng = Rng(5);
    // (cin, cout, k, stride, relu): pointwise (cin < 4) and tiled paths, channel counts that
    // exercise the 16-, 8- and 1-wide column blocks.
    for &(cin, cout, k, stride, relu) in &[
        (1, 32, 5, 1, true),
        (3, 7, 3, 2, false),
        (4, 16, 3, 1, false),
        (5, 29, 3, 2, true),
        (32, 32, 3, 2, true),
        (8, 1, 2, 2, false),
    ] {
        let x = SparseValue {
            coords: Arc::clone(&coords),
            feats: Features::Dense((0..coords.len() * cin).map(|_| rng.uniform()).collect()),
            channels: cin,
            sums: None,
        };
        let conv = SparseConv {
            geom: Geometry::new(k, 1, 1),
            stride,
            t_out: stride,
            cin,
            cout,
            weights: (0..k * k * cin * cout).map(|_| rng.uniform()).collect(),
            bias: Some((0..cout).map(|_| rng.uniform()).collect()),
            relu,
            sums: false,
        };
        let y = conv.run("c", &x).expect("runs");
        let want = naive_conv(&conv, &x, &y.coords);
        let got = y.dense();
        assert_eq!(got.len(), want.len());
        for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (f64::from(a) - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "cin {cin} cout {cout} k {k} s {stride}: [{i}] {a} vs {b}"
            );
        }
    }
}

/// Memoized convs (see `ops::memo`) against the naive `f64` conv of the expanded input:
/// the pattern-like constant input (neighbour-mask path, including dilation and a tensor
/// stride of 2), inputs with a few distinct rows (key path), and one with a row per point
/// (expanded and run directly). The output sums must match the output features.
#[test]
fn memo_conv_matches_naive() {
    let p = random_pattern(300, 9, 12);
    let base = Coords::from_pattern(&p);
    let mut rng = Rng(7);
    // (cin, cout, k, dilation, t_in, stride, rows of the input table: 0 = one per point)
    for &(cin, cout, k, dilation, t_in, stride, rows) in &[
        (1, 32, 5, 1, 1, 1, 1),
        (1, 8, 3, 2, 1, 2, 1),
        (1, 8, 3, 1, 2, 2, 1),
        (2, 16, 3, 1, 1, 2, 1),
        (32, 32, 3, 1, 1, 2, 5),
        (4, 7, 3, 1, 2, 1, 3),
        (8, 8, 3, 1, 1, 2, 0),
    ] {
        let coords = Arc::new(if t_in == 1 {
            base.clone()
        } else {
            base.strided(t_in)
        });
        let n = coords.len();
        let u = if rows == 0 { n } else { rows };
        let memo = crate::featurize::ops::Memo {
            ids: (0..n).map(|i| ((i * 7 + i / 3) % u) as u32).collect(),
            table: (0..u * cin).map(|_| rng.uniform()).collect(),
        };
        let x = SparseValue {
            coords: Arc::clone(&coords),
            feats: Features::Memo(memo),
            channels: cin,
            sums: None,
        };
        let conv = SparseConv {
            geom: Geometry::new(k, dilation, t_in),
            stride,
            t_out: t_in * stride,
            cin,
            cout,
            weights: (0..k * k * cin * cout).map(|_| rng.uniform()).collect(),
            bias: Some((0..cout).map(|_| rng.uniform()).collect()),
            relu: true,
            sums: true,
        };
        let case = format!("cin {cin} cout {cout} k {k} d {dilation} t {t_in} s {stride} u {u}");
        let y = conv.run("c", &x).expect("runs");
        let want = naive_conv(&conv, &x, &y.coords);
        let got = y.dense();
        assert_eq!(got.len(), want.len(), "{case}");
        for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (f64::from(a) - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "{case}: [{i}] {a} vs {b}"
            );
        }
        let sums = y.sums.as_ref().expect("sums requested");
        for (c, s) in sums.iter().enumerate() {
            let direct: f64 = got.chunks_exact(cout).map(|r| f64::from(r[c])).sum();
            assert!(
                (s - direct).abs() <= 1e-9 * (1.0 + direct.abs()),
                "{case}: sum {c}"
            );
        }
    }

    // A tridiagonal pattern has 15 distinct 5×5 neighbour masks: 3 in the interior (one per
    // diagonal), 2 + 3 in the first two rows, 1 more in the third row (its sub-diagonal
    // point misses column −1 of row 0), and the same at the bottom. So the pattern layer's
    // output stays memoized with 15 rows for 598 points.
    let n: usize = 200;
    let pts: Vec<(usize, u32)> = (0..n)
        .flat_map(|i| (i.saturating_sub(1)..(i + 2).min(n)).map(move |j| (i, j as u32)))
        .collect();
    let coords = Arc::new(Coords::from_pattern(&pattern(n, n, &pts)));
    let x = SparseValue {
        feats: Features::Memo(crate::featurize::ops::Memo::constant(
            coords.len(),
            vec![1.0],
        )),
        coords,
        channels: 1,
        sums: None,
    };
    let conv = SparseConv {
        geom: Geometry::new(5, 1, 1),
        stride: 1,
        t_out: 1,
        cin: 1,
        cout: 4,
        weights: (0..25 * 4).map(|_| rng.uniform()).collect(),
        bias: None,
        relu: false,
        sums: false,
    };
    let y = conv.run("c", &x).expect("runs");
    match &y.feats {
        Features::Memo(m) => assert_eq!(m.rows(4), 15),
        Features::Dense(_) => panic!("tridiagonal conv output should stay memoized"),
    }
    let want = naive_conv(&conv, &x, &y.coords);
    for (&a, &b) in y.dense().iter().zip(&want) {
        assert!((f64::from(a) - b).abs() <= 1e-5 * (1.0 + b.abs()));
    }
}

#[test]
fn reused_buffers_give_identical_results() {
    let spec = waco_like(32, 4, 9);
    let opts = FeaturizeOptions {
        threads: Some(2),
        ..Default::default()
    };
    let (big, small) = (random_pattern(900, 15, 1), random_pattern(200, 5, 2));
    let fresh = |p: &CsrPattern| {
        FeaturizerGraph::from_spec(&spec)
            .expect("valid")
            .run(p, &opts)
            .expect("runs")
    };
    let (want_big, want_small) = (fresh(&big), fresh(&small));
    let g = FeaturizerGraph::from_spec(&spec).expect("valid");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for _ in 0..2 {
        assert_eq!(bits(&g.run(&big, &opts).expect("runs")), bits(&want_big));
        assert_eq!(
            bits(&g.run(&small, &opts).expect("runs")),
            bits(&want_small)
        );
    }
}

//! Agreement with a naive interpreter written straight from `docs/bundle-format.md` §3.1:
//! `f64` arithmetic, points in a map, every kernel offset looked up.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::*;
use crate::featurize::step::SLOT_MIN_MACS;

/// A naive value: sparse points at a tensor stride, or a dense row.
enum Val {
    Sparse {
        t: i64,
        c: usize,
        pts: BTreeMap<(i64, i64), Vec<f64>>,
    },
    Dense(Vec<f64>),
}

fn int(n: &NodeSpec, key: &str, default: i64) -> i64 {
    match n.attributes.get(key) {
        Some(AttrValue::Int(v)) => *v,
        _ => default,
    }
}

/// Per-axis window offsets at tensor stride `t` (MinkowskiEngine `HYPER_CUBE`), or the
/// pooling cell when `cell`.
fn offsets(k: i64, d: i64, t: i64, cell: bool) -> Vec<i64> {
    if cell {
        (0..k).map(|i| i * t).collect()
    } else if k % 2 == 1 {
        (-(k / 2)..=k / 2).map(|i| i * d * t).collect()
    } else {
        (0..k).map(|i| i * d * t).collect()
    }
}

fn out_points(pts: &BTreeMap<(i64, i64), Vec<f64>>, t_out: i64) -> BTreeSet<(i64, i64)> {
    pts.keys()
        .map(|&(r, c)| (r / t_out * t_out, c / t_out * t_out))
        .collect()
}

/// Runs `spec` on `p` naively.
pub(super) fn naive(spec: &GraphSpec, p: &CsrPattern) -> Vec<f64> {
    naive_with_macs(spec, p).0
}

/// [`naive`], and the dense-counted multiply-adds: every `(output point, neighbour)` pair of
/// every conv times `Cin · Cout`.
fn naive_with_macs(spec: &GraphSpec, p: &CsrPattern) -> (Vec<f64>, u64) {
    let mut macs = 0u64;
    let mut env: HashMap<String, Val> = HashMap::new();
    let mut pts = BTreeMap::new();
    for (r, cols) in p.rows() {
        for &c in cols {
            pts.insert((r as i64, i64::from(c)), vec![1.0]);
        }
    }
    env.insert("pattern".into(), Val::Sparse { t: 1, c: 1, pts });
    for n in &spec.nodes {
        let out = match n.op_type.as_str() {
            "SparseConv" | "SparseMaxPool" => naive_stencil(spec, n, &env, &mut macs),
            "SparseReLU" => {
                let Some(Val::Sparse { t, c, pts }) = env.get(&n.inputs[0]) else {
                    panic!("sparse input")
                };
                let pts = pts
                    .iter()
                    .map(|(&k, v)| (k, v.iter().map(|x| x.max(0.0)).collect()))
                    .collect();
                Val::Sparse { t: *t, c: *c, pts }
            }
            "SparseGlobalAvgPool" => {
                let Some(Val::Sparse { c, pts, .. }) = env.get(&n.inputs[0]) else {
                    panic!("sparse input")
                };
                let mut m = vec![0.0; *c];
                for v in pts.values() {
                    m.iter_mut().zip(v).for_each(|(a, b)| *a += b);
                }
                let count = pts.len().max(1) as f64;
                Val::Dense(m.iter().map(|v| v / count).collect())
            }
            "Concat" => Val::Dense(
                n.inputs
                    .iter()
                    .flat_map(|i| match &env[i] {
                        Val::Dense(d) => d.clone(),
                        Val::Sparse { .. } => panic!("dense input"),
                    })
                    .collect(),
            ),
            other => panic!("unknown op {other}"),
        };
        env.insert(n.outputs[0].clone(), out);
    }
    match env.remove(&spec.outputs[0]) {
        Some(Val::Dense(d)) => (d, macs),
        _ => panic!("dense output"),
    }
}

/// A `SparseConv` or `SparseMaxPool` node, point by point and neighbour by neighbour; adds
/// the conv's dense-counted multiply-adds to `macs`.
fn naive_stencil(
    spec: &GraphSpec,
    n: &NodeSpec,
    env: &HashMap<String, Val>,
    macs: &mut u64,
) -> Val {
    let Some(Val::Sparse { t, c, pts }) = env.get(&n.inputs[0]) else {
        panic!("sparse input")
    };
    let init = |name: &str| -> Vec<f64> {
        spec.initializers[name]
            .data
            .iter()
            .map(|&v| f64::from(v))
            .collect()
    };
    let (k, s, d) = (
        int(n, "kernel_size", 0),
        int(n, "stride", 1),
        int(n, "dilation", 1),
    );
    let t_out = t * s;
    let conv = n.op_type == "SparseConv";
    let a = offsets(k, d, *t, !conv && s > 1 && k == s);
    let (w, cout) = if conv {
        (init(&n.inputs[1]), spec.initializers[&n.inputs[1]].dims[2])
    } else {
        (Vec::new(), *c)
    };
    let bias = (conv && n.inputs.len() > 2).then(|| init(&n.inputs[2]));
    let mut out = BTreeMap::new();
    for (r, col) in out_points(pts, t_out) {
        let mut acc = vec![if conv { 0.0 } else { f64::NEG_INFINITY }; cout];
        for (ic, &ac) in a.iter().enumerate() {
            for (ir, &ar) in a.iter().enumerate() {
                let Some(x) = pts.get(&(r + ar, col + ac)) else {
                    continue;
                };
                let kappa = ir + a.len() * ic;
                if conv {
                    *macs += (c * cout) as u64;
                }
                for (j, v) in acc.iter_mut().enumerate() {
                    if conv {
                        for (ci, xv) in x.iter().enumerate() {
                            *v += xv * w[(kappa * c + ci) * cout + j];
                        }
                    } else {
                        *v = v.max(x[j]);
                    }
                }
            }
        }
        if let Some(b) = &bias {
            acc.iter_mut().zip(b).for_each(|(v, b)| *v += b);
        }
        out.insert((r, col), acc);
    }
    Val::Sparse {
        t: t_out,
        c: cout,
        pts: out,
    }
}

fn assert_close(case: &str, got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{case}");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-3);
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(a) - b).abs() <= 2e-5 * scale,
            "{case}: [{i}] {a} vs {b} (scale {scale})"
        );
    }
}

/// A graph of one layer of `op` type after a first conv that gives points varied features.
fn one_layer(op: &str, k: i64, s: i64, d: i64, cin: usize, cout: usize, seed: u64) -> GraphSpec {
    let mut rng = Rng(seed);
    let mut nodes = vec![node(
        "c0",
        "SparseConv",
        &["pattern", "w0", "b0"],
        &[("kernel_size", 3)],
    )];
    let mut inits = vec![
        tensor(
            "w0",
            &[9, 1, cin],
            (0..9 * cin).map(|_| rng.uniform()).collect(),
        ),
        tensor("b0", &[cin], (0..cin).map(|_| rng.uniform()).collect()),
    ];
    let attrs = [("kernel_size", k), ("stride", s), ("dilation", d)];
    if op == "SparseConv" {
        let kk = (k * k) as usize;
        inits.push(tensor(
            "w1",
            &[kk, cin, cout],
            (0..kk * cin * cout).map(|_| rng.uniform()).collect(),
        ));
        inits.push(tensor(
            "b1",
            &[cout],
            (0..cout).map(|_| rng.uniform()).collect(),
        ));
        nodes.push(node("l", "SparseConv", &["c0", "w1", "b1"], &attrs));
    } else {
        nodes.push(node("l", op, &["c0"], &attrs));
    }
    nodes.push(node("r", "SparseReLU", &["l"], &[]));
    nodes.push(node("p", "SparseGlobalAvgPool", &["r"], &[]));
    nodes.push(node("q", "SparseGlobalAvgPool", &["c0"], &[]));
    nodes.push(node("cat", "Concat", &["p", "q"], &[("axis", 1)]));
    graph(nodes, "cat", inits)
}

#[test]
fn single_layers_match_naive() {
    let patterns = [
        random_pattern(120, 6, 1),
        random_pattern(60, 30, 2), // long rows: neighbour-mask bitmaps
        rmat(8, 500, 3),           // graph-like: mostly single-entry neighbourhoods
    ];
    // (op, k, s, d, cin, cout): tiled conv shapes with every column tail, dilation, even
    // kernels, a non-power-of-two stride, max pools with windows and with cells.
    let cases: &[(&str, i64, i64, i64, usize, usize)] = &[
        ("SparseConv", 3, 1, 1, 4, 16),
        ("SparseConv", 3, 2, 1, 32, 32),
        ("SparseConv", 3, 2, 2, 5, 29),
        ("SparseConv", 2, 2, 1, 8, 1),
        ("SparseConv", 5, 3, 1, 3, 7),
        ("SparseConv", 3, 1, 1, 17, 45),
        ("SparseMaxPool", 3, 1, 1, 6, 6),
        ("SparseMaxPool", 2, 2, 1, 5, 5),
        ("SparseMaxPool", 3, 2, 1, 4, 4),
    ];
    for (pi, p) in patterns.iter().enumerate() {
        for (ci, &(op, k, s, d, cin, cout)) in cases.iter().enumerate() {
            let spec = one_layer(op, k, s, d, cin, cout, ci as u64);
            let case = format!("pattern {pi}, {op} k{k} s{s} d{d} {cin}->{cout}");
            assert_close(&case, &run1(&spec, p), &naive(&spec, p));
        }
    }
}

#[test]
fn whole_graphs_match_naive() {
    let p = random_pattern(200, 8, 4);
    let q = rmat(9, 1500, 5);
    // DASH's fourth layer (48 → 48) is wide enough that the steps look for repeated
    // products (`SLOT_MIN_MACS`), so that path is checked against the interpreter too.
    let dash_widths = [8, 16, 48, 48, 16, 24, 24];
    assert!(dash_widths
        .windows(2)
        .any(|w| (w[0] * w[1]) as u64 >= SLOT_MIN_MACS));
    for (name, spec) in [
        ("waco", waco_like(16, 6, 1)),
        ("dash", dash_like(&dash_widths, 2)),
    ] {
        for (pi, pat) in [&p, &q].into_iter().enumerate() {
            let g = FeaturizerGraph::from_spec(&spec).expect("valid graph");
            let (got, stats) = g.run_with_stats(pat, &opts(1)).expect("runs");
            let (want, macs) = naive_with_macs(&spec, pat);
            assert_close(&format!("{name} on {pi}"), &got, &want);
            // The benchmarks' dense-counted figure counts every neighbour pair, whether a
            // shared row or a neighbour mask stood for it.
            assert_eq!(stats.dense_macs, macs, "{name} on {pi}");
        }
    }
}

/// `FeaturizeStats::computed_macs` counts the products actually done: exactly the
/// micro-kernel's multiply-adds (counted per thread, on a one-thread pool), over graphs and
/// patterns that take every path (the pattern's products, shared and repeated products,
/// keyed and direct rows). On the pattern (one input row that every point shares) a conv
/// multiplies that row by each κ's weights once, however many points it has.
#[test]
fn computed_macs_count_the_products_done() {
    use crate::simd::conv::GEMM_MACS;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    let counted = |spec: &GraphSpec, p: &CsrPattern| {
        let g = FeaturizerGraph::from_spec(spec).expect("valid graph");
        pool.install(|| {
            GEMM_MACS.with(|m| m.set(0));
            let (_, stats) = g
                .run_with_stats(p, &FeaturizeOptions::default())
                .expect("runs");
            (stats, GEMM_MACS.with(|m| m.get()))
        })
    };
    let (p, q) = (rmat(11, 9000, 5), random_pattern(400, 12, 4));
    for cin in [4, 16] {
        let (stats, macs) = counted(&one_layer("SparseMaxPool", 2, 2, 1, cin, cin, 3), &p);
        assert_eq!(
            (stats.computed_macs, macs),
            (9 * cin as u64, 9 * cin as u64)
        );
        assert!(stats.dense_macs > 100 * stats.computed_macs);
    }
    for (name, spec) in [
        ("waco", waco_like(16, 6, 1)),
        ("dash", dash_like(&[8, 16, 48, 48, 16, 24, 24], 2)),
    ] {
        for (pi, pat) in [&p, &q].into_iter().enumerate() {
            let (stats, macs) = counted(&spec, pat);
            assert_eq!(stats.computed_macs, macs, "{name} on {pi}");
            let by_step: u64 = stats.steps.iter().map(|st| st.computed_macs).sum();
            assert_eq!(by_step, macs, "{name} on {pi}: the steps' counts add up");
            assert!(0 < macs && macs < stats.dense_macs, "{name} on {pi}");
        }
    }
}

#[test]
fn pooled_pattern_and_unfused_relu_match_naive() {
    // The input pooled directly, and a ReLU whose input is also pooled (not fused).
    let spec = graph(
        vec![
            node(
                "c",
                "SparseConv",
                &["pattern", "W"],
                &[("kernel_size", 3), ("stride", 2)],
            ),
            node("r", "SparseReLU", &["c"], &[]),
            node(
                "m",
                "SparseMaxPool",
                &["r"],
                &[("kernel_size", 3), ("stride", 2)],
            ),
            node("pc", "SparseGlobalAvgPool", &["c"], &[]),
            node("pm", "SparseGlobalAvgPool", &["m"], &[]),
            node("pp", "SparseGlobalAvgPool", &["pattern"], &[]),
            node("cat", "Concat", &["pc", "pm", "pp"], &[("axis", 1)]),
        ],
        "cat",
        vec![tensor(
            "W",
            &[9, 1, 3],
            (0..27).map(|i| (i as f32 - 13.0) / 9.0).collect(),
        )],
    );
    let p = random_pattern(150, 9, 6);
    assert_close("taps", &run1(&spec, &p), &naive(&spec, &p));
}

#[test]
fn single_points_match_naive() {
    // Layers whose values hold one point (a one-row table that is not shared), and points
    // far apart, through convs, a max pool and a tap.
    let spec = dash_like(&[4, 4, 6, 6], 3);
    for pts in [vec![(0, 0)], vec![(5, 7)], vec![(0, 0), (40, 90)]] {
        let p = pattern(64, 128, &pts);
        assert_close(&format!("{pts:?}"), &run1(&spec, &p), &naive(&spec, &p));
    }
    let p = pattern(1, 1, &[(0, 0)]);
    let w = waco_like(8, 3, 4);
    assert_close("waco one point", &run1(&w, &p), &naive(&w, &p));
}

//! Hand-computed cases, single stencils on hand-made inputs, and graph-level edge cases.
//!
//! Expected values are worked out in the comments from `docs/bundle-format.md` §3.1.

use std::collections::BTreeMap;

use super::*;
use crate::featurize::coords::Coords;
use crate::featurize::jobs::{task_jobs, KEYED};
use crate::featurize::memory::RowBuf;
use crate::featurize::ops::{registry, BuildCtx, Op, Part, Stencil, ValueType};
use crate::featurize::rulebook::{tasks, Search, TASK_POINTS};
use crate::featurize::window::Window;
use crate::simd::kernels::Kernels;

/// Builds one sparse node of `op` type reading a value with `channels` channels at tensor
/// stride `t`, with the given initializers.
pub(super) fn stencil(
    op: &str,
    channels: usize,
    t: u64,
    attrs: &[(&str, i64)],
    inits: Vec<(String, TensorSpec)>,
) -> Box<dyn Stencil> {
    let names: Vec<String> = inits.iter().map(|(n, _)| n.clone()).collect();
    let mut inputs = vec!["x"];
    inputs.extend(names.iter().map(String::as_str));
    let spec = node("n", op, &inputs, attrs);
    let inits: BTreeMap<String, TensorSpec> = inits.into_iter().collect();
    let types = [(
        "x".to_string(),
        ValueType::Sparse {
            channels,
            stride: t,
        },
    )]
    .into_iter()
    .collect();
    let ctx = BuildCtx {
        node: &spec,
        name: "n",
        initializers: &inits,
        types: &types,
    };
    let builder = registry()[&(SPARSE_DOMAIN, op)];
    match builder(&ctx).expect("valid node").op {
        Op::Stencil(s) => s,
        other => panic!("not a stencil: {other:?}"),
    }
}

/// Runs one stencil on points `pts` (sorted) whose point `i` has feature row `ids[i]` of
/// `table`, as one band; returns the output points and their features, expanded.
#[allow(clippy::type_complexity)]
pub(super) fn apply(
    op: &dyn Stencil,
    pts: &[(u32, u32)],
    ids: Vec<u32>,
    table: Vec<f32>,
    level: SimdLevel,
) -> (Vec<(u32, u32)>, Vec<f32>) {
    let mut coords = Coords::empty();
    for &(r, c) in pts {
        if coords.rows.last() != Some(&r) {
            coords.rows.push(r);
            coords.row_start.push(coords.cols.len());
        }
        coords.cols.push(c);
        *coords.row_start.last_mut().expect("a row") = coords.cols.len();
    }
    let cin = op.cin();
    let rows = table.len() / cin;
    let mut uses = vec![0u32; rows];
    for &id in &ids {
        uses[id as usize] += 1;
    }
    let mut aligned = RowBuf::zeroed(table.len());
    aligned.copy_from_slice(&table);
    let x = Window {
        coords,
        ids,
        table: aligned,
        shared: uses.iter().map(|&u| u >= 2).collect(),
        channels: cin,
        charge: None,
    };
    let reach = op.reach();
    let out = if reach.stride == 1 {
        x.coords.clone()
    } else {
        x.coords.strided(0..x.coords.rows.len(), reach.t_out)
    };
    let k = Kernels::for_level(level);
    let cout = op.cout();
    let mut feats = Vec::new();
    for rows in tasks(&out, TASK_POINTS) {
        let mut ph = task_jobs(&x, &out, rows, Search::new(&reach.geom, level), None, true);
        let mut lists = [ph.keyed, ph.unique];
        let mut rows_out = Vec::new();
        for l in &mut lists {
            if op.wants_products() {
                l.assign_slots(&x);
            }
            // In parts of a few jobs, as the executor splits the lists of wide layers.
            let hot = op.hot_products(l, &x, k);
            let mut r = vec![f32::NAN; l.len() * cout];
            for (i, dst) in r.chunks_mut(5 * cout).enumerate() {
                let part = Part {
                    jobs: l,
                    range: 5 * i..(5 * i + 5).min(l.len()),
                    hot: &hot,
                };
                op.compute(&part, &x, None, dst, k);
            }
            rows_out.push(r);
        }
        for &j in &ph.point_job {
            let (list, j) = if j & KEYED != 0 {
                (0, j & !KEYED)
            } else {
                (1, j)
            };
            feats.extend_from_slice(&rows_out[list][j as usize * cout..][..cout]);
        }
        ph.point_job.clear();
    }
    let mut points = Vec::new();
    for i in 0..out.rows.len() {
        for p in out.row_range(i) {
            points.push((out.rows[i], out.cols[p]));
        }
    }
    (points, feats)
}

/// [`apply`] on a dense input (one feature row per point).
fn apply_dense(
    op: &dyn Stencil,
    pts: &[(u32, u32)],
    feats: Vec<f32>,
) -> (Vec<(u32, u32)>, Vec<f32>) {
    let ids = (0..pts.len() as u32).collect();
    apply(op, pts, ids, feats, SimdLevel::Scalar)
}

#[test]
fn kernel_offset_order_is_row_fastest() {
    // W[κ] = 2^κ (Cin = Cout = 1). Points (1,1) and (2,1): for (1,1) the other point is at
    // offset (+1, 0) → i_r = 2, i_c = 1 → κ = 2 + 3·1 = 5, itself κ = 4: 16 + 32 = 48.
    // For (2,1): offset (−1, 0) → κ = 0 + 3 = 3: 16 + 8 = 24. (Column-fastest would give
    // 16 + 128 and 16 + 2.)
    let w: Vec<f32> = (0..9).map(|k| (1u32 << k) as f32).collect();
    let conv = stencil(
        "SparseConv",
        1,
        1,
        &[("kernel_size", 3)],
        vec![tensor("W", &[9, 1, 1], w.clone())],
    );
    let (_, y) = apply_dense(conv.as_ref(), &[(1, 1), (2, 1)], vec![1.0, 1.0]);
    assert_eq!(y, vec![48.0, 24.0]);

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
    // Cin = 2, Cout = 3, k = 1: out = x · W[0] + b with W[0] = [[1,2,3],[4,5,6]].
    let conv = stencil(
        "SparseConv",
        2,
        1,
        &[("kernel_size", 1)],
        vec![
            tensor("W", &[1, 2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            tensor("b", &[3], vec![0.0, 0.0, 100.0]),
        ],
    );
    let (_, y) = apply_dense(conv.as_ref(), &[(0, 0), (0, 1)], vec![1.0, 0.0, 0.5, 2.0]);
    assert_eq!(y, vec![1.0, 2.0, 103.0, 8.5, 11.0, 113.5]);
}

#[test]
fn strided_conv_merges_output_coordinates() {
    // Points (0,0), (0,1), (1,1), (3,3); k = 3, s = 2, W = 1. Outputs at (0,0) and (2,2).
    // (0,0) sees rows/cols −1..1: (0,0), (0,1), (1,1) → 3. (2,2) sees 1..3: (1,1), (3,3) → 2.
    let conv = stencil(
        "SparseConv",
        1,
        1,
        &[("kernel_size", 3), ("stride", 2)],
        vec![tensor("W", &[9, 1, 1], vec![1.0; 9])],
    );
    let (pts, y) = apply_dense(
        conv.as_ref(),
        &[(0, 0), (0, 1), (1, 1), (3, 3)],
        vec![1.0; 4],
    );
    assert_eq!(pts, vec![(0, 0), (2, 2)]);
    assert_eq!(y, vec![3.0, 2.0]);
}

#[test]
fn second_stride2_layer_uses_doubled_offsets() {
    // Input at tensor stride 2 with points (0,0)=1, (0,2)=3, (0,4)=5, (2,0)=2, (2,2)=4;
    // k = 3, s = 2 → offsets {−2, 0, 2}, output stride 4, outputs (0,0) and (0,4).
    // (0,0): (0,0) κ4, (2,0) κ5, (0,2) κ7, (2,2) κ8 → with W[κ] = κ: 4·1 + 5·2 + 7·3 + 8·4 = 67.
    // (0,4): (0,2) at (0,−2) κ1, (2,2) at (+2,−2) κ2, (0,4) κ4 → 1·3 + 2·4 + 4·5 = 31.
    let conv = stencil(
        "SparseConv",
        1,
        2,
        &[("kernel_size", 3), ("stride", 2)],
        vec![tensor("W", &[9, 1, 1], (0..9).map(|k| k as f32).collect())],
    );
    let pts = [(0, 0), (0, 2), (0, 4), (2, 0), (2, 2)];
    let (out, y) = apply_dense(conv.as_ref(), &pts, vec![1.0, 3.0, 5.0, 2.0, 4.0]);
    assert_eq!(out, vec![(0, 0), (0, 4)]);
    assert_eq!(y, vec![67.0, 31.0]);

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
    let pts: Vec<(usize, u32)> = pts.iter().map(|&(r, c)| (r as usize, c)).collect();
    assert_eq!(run1(&spec, &pattern(3, 5, &pts)), vec![15.5]);
}

#[test]
fn even_kernel_max_pool() {
    // k = 2 → offsets {0, 1}; s = 2. Points (0,0)=1, (0,1)=5, (1,1)=3, (2,3)=7 → outputs
    // (0,0) = max(1, 5, 3) = 5 and (2,2) = 7 (window rows 2..3, cols 2..3). An odd-style
    // window {−1, 0} would give 3 at (2,2).
    let pool = stencil(
        "SparseMaxPool",
        1,
        1,
        &[("kernel_size", 2), ("stride", 2)],
        vec![],
    );
    let (out, y) = apply_dense(
        pool.as_ref(),
        &[(0, 0), (0, 1), (1, 1), (2, 3)],
        vec![1.0, 5.0, 3.0, 7.0],
    );
    assert_eq!(out, vec![(0, 0), (2, 2)]);
    assert_eq!(y, vec![5.0, 7.0]);
}

#[test]
fn shared_rows_give_the_same_bits_as_unshared() {
    // The same input once with rows shared between points (memoized) and once with a row
    // per point: conv and max pool outputs agree bit for bit on every level.
    let mut rng = Rng(9);
    let pts: Vec<(u32, u32)> = (0..40u32)
        .flat_map(|r| {
            (0..40u32)
                .filter(move |c| (r * 7 + c * 3) % 5 < 2)
                .map(move |c| (r, c))
        })
        .collect();
    let (u, cin) = (6usize, 8usize);
    let table: Vec<f32> = (0..u * cin).map(|_| rng.uniform()).collect();
    let ids: Vec<u32> = (0..pts.len())
        .map(|i| ((i * 5 + i / 7) % u) as u32)
        .collect();
    let expanded: Vec<f32> = ids
        .iter()
        .flat_map(|&id| table[id as usize * cin..][..cin].to_vec())
        .collect();
    let conv = stencil(
        "SparseConv",
        cin,
        1,
        &[("kernel_size", 3), ("stride", 2)],
        vec![
            tensor(
                "W",
                &[9, cin, 21],
                (0..9 * cin * 21).map(|_| rng.uniform()).collect(),
            ),
            tensor("b", &[21], (0..21).map(|_| rng.uniform()).collect()),
        ],
    );
    let pool = stencil("SparseMaxPool", cin, 1, &[("kernel_size", 3)], vec![]);
    for op in [conv.as_ref(), pool.as_ref()] {
        let dense_ids = (0..pts.len() as u32).collect();
        let want = apply(op, &pts, dense_ids, expanded.clone(), SimdLevel::Scalar);
        for level in SimdLevel::supported() {
            let got = apply(op, &pts, ids.clone(), table.clone(), level);
            assert_eq!(got.0, want.0);
            assert_eq!(bits(&got.1), bits(&want.1), "{} on {level}", op.op_type());
        }
    }
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
    assert_eq!(bits(&ra), bits(&rb[..4]));
    assert!(
        rb[4..].iter().any(|&v| v < 0.0),
        "unfused tap keeps negatives: {rb:?}"
    );
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
    let none = CsrPattern::new(0, 0, vec![0], vec![]).expect("valid");
    assert_eq!(run1(&spec, &none), vec![0.0, 0.0]);
}

#[test]
fn graph_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<FeaturizerGraph>();
}

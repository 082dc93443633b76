//! Dense graphs generated from the fuzz input (not byte flips of a real bundle): a short
//! program over the operators the native importer accepts (`Gemm`, `MatMul`, `Add`, `Relu`,
//! `Concat`, `Slice`, `Identity`, `Flatten`, embedding lookups through `Gather` and `Cast`),
//! with one foreign operator now and then, written as ONNX in place of one graph of the
//! WACO-shaped fixture, the manifest re-stamped. The bundle is loaded on the native engine
//! alone, under a small load budget. A graph that loads is run, and every value it produces
//! (a matrix embedding, schedule embeddings, scores) is compared with a plain `f64`
//! evaluation of the same program, within a bound derived from the magnitudes involved; a
//! graph that does not load must fail with a well-formed error.

use std::sync::OnceLock;

use dashrank::model::BundleLimits;
use dashrank::{Backend, CostModel, CsrPattern, ErrorKind, LoadOptions, Model};

use super::onnx_write::{Attr, Graph, Node};
use super::{check_error, repo_root};

/// The graph of the fixture a fuzz input replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    MatrixEmbedder,
    ScheduleEmbedder,
    Predictor,
}

impl Slot {
    fn file(self) -> &'static str {
        match self {
            Slot::MatrixEmbedder => "matrix_embedder.onnx",
            Slot::ScheduleEmbedder => "cpu-taco__spmm.schedule_embedder.onnx",
            Slot::Predictor => "cpu-taco__spmm.predictor.onnx",
        }
    }

    fn output(self) -> &'static str {
        match self {
            Slot::MatrixEmbedder => "matrix_embedding",
            Slot::ScheduleEmbedder => "schedule_embedding",
            Slot::Predictor => "score",
        }
    }
}

/// The fixture: its files, a few schedule lines, its widths, and a pattern to embed.
struct Fixture {
    files: Vec<(String, Vec<u8>)>,
    head: String,
    lines: Vec<String>,
    /// Graph inputs and widths of each slot.
    inputs: [Vec<(&'static str, usize)>; 3],
    /// The width each slot's output must have.
    out_width: [usize; 3],
    pattern: CsrPattern,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = repo_root().join("tests/data/fixtures/tiny-waco-spmm");
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .expect("fixture directory")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
            .map(|p| {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                (name.into_owned(), std::fs::read(&p).expect("fixture file"))
            })
            .collect();
        files.sort();
        let model = Model::load(&dir, &LoadOptions::default()).expect("the fixture loads");
        let info = model.info();
        let h = &info.heads[0];
        let golden: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("golden.json")).expect("golden"))
                .expect("golden json");
        let lines = golden["heads"][&h.name]["schedules"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["line"].as_str().map(str::to_owned))
            .take(3)
            .collect();
        let (m, s) = (info.matrix_embedding_dim, h.schedule_embedding_dim);
        Fixture {
            files,
            head: h.name.clone(),
            lines,
            inputs: [
                vec![
                    ("conv_features", info.featurizer_dim),
                    ("shape_features", info.shape_normalization.features.len()),
                ],
                vec![("schedule", h.schedule_width)],
                vec![("matrix_embedding", m), ("schedule_embedding", s)],
            ],
            out_width: [m, s, 1],
            pattern: CsrPattern::new(6, 5, vec![0, 2, 2, 3, 5, 5, 6], vec![0, 4, 1, 2, 3, 0])
                .expect("valid pattern"),
        }
    })
}

/// Reads the fuzz input a byte at a time (zeros once it is used up).
struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// A width: mostly 1–12, one time in 32 a power of two from 32 to 4096 (for the load
    /// budget).
    fn width(&mut self) -> usize {
        let b = self.byte();
        if b >= 0xf8 {
            1 << (5 + (b & 7))
        } else {
            1 + usize::from(b % 12)
        }
    }

    /// `n` weights in [-1, 1], multiples of 1/16, from a seed byte.
    fn weights(&mut self, n: usize) -> Vec<f32> {
        let mut s = u32::from(self.byte()) * 2_654_435_761 + 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                ((s % 33) as f32 - 16.0) / 16.0
            })
            .collect()
    }
}

/// How a linear layer is written.
#[derive(Debug, Clone, Copy)]
enum Linear {
    /// `Gemm` with `transB = 1` (B is `[out, in]`), `alpha`, and `beta` on the bias.
    GemmT(f32, f32),
    /// `Gemm` with B as `[in, out]`.
    Gemm(f32, f32),
    /// `MatMul`, then `Add` of the bias.
    MatMul,
}

/// One generated operation; values are numbered in creation order, inputs first.
#[derive(Debug, Clone)]
enum Op {
    /// `y = W·x + b`, `w` of `outs × ins` row-major (`ins` may differ from `x`'s width).
    Linear {
        x: usize,
        w: Vec<f32>,
        ins: usize,
        outs: usize,
        b: Option<Vec<f32>>,
        form: Linear,
    },
    Add(usize, usize),
    /// `x + c`, `c` of `x`'s width or one value broadcast.
    Bias(usize, Vec<f32>),
    Relu(usize),
    Concat(Vec<usize>),
    /// Columns `start..end` (ONNX rules: negative from the end, clamped).
    Slice(usize, i64, i64),
    Pass(usize, &'static str),
    /// `table[trunc(x[col])]` on the encoded schedule, `table` of `rows × width`.
    Lookup {
        col: i64,
        rows: usize,
        width: usize,
        table: Vec<f32>,
    },
    /// An operator the native engine does not run.
    Foreign(usize),
}

/// A generated program: the slot it replaces, its operations, and each value's width
/// (the slot's inputs first).
struct Program {
    slot: Slot,
    /// Weights as `Constant` nodes rather than initializers (always for the matrix embedder:
    /// its initializers are part of the bundle's provenance hash, so they are kept as they
    /// are and the generated weights go elsewhere).
    constants: bool,
    inputs: usize,
    ops: Vec<Op>,
    widths: Vec<usize>,
}

const MAX_OPS: usize = 16;
/// Most numbers in one generated weight: wide values come from narrow layers or `Concat`,
/// and every execution stays quick.
const MAX_WEIGHTS: usize = 1 << 14;

fn generate(data: &[u8]) -> Program {
    let mut b = Bytes { data, pos: 0 };
    let slot = match b.byte() % 3 {
        0 => Slot::MatrixEmbedder,
        1 => Slot::ScheduleEmbedder,
        _ => Slot::Predictor,
    };
    let flags = b.byte();
    let finish = !flags.is_multiple_of(16);
    let fx = fixture();
    let mut p = Program {
        slot,
        constants: slot == Slot::MatrixEmbedder || flags & 0x80 != 0,
        inputs: fx.inputs[slot as usize].len(),
        ops: Vec::new(),
        widths: fx.inputs[slot as usize].iter().map(|(_, w)| *w).collect(),
    };
    while !b.done() && p.ops.len() < MAX_OPS {
        let op = next_op(&mut b, slot, &p.widths);
        p.push(op);
    }
    if finish {
        // A last layer to the width the slot's output must have (or its first columns).
        let x = p.widths.len() - 1;
        let (ins, outs) = (p.widths[x], fx.out_width[slot as usize]);
        let op = if ins * outs <= MAX_WEIGHTS {
            let mut w = Bytes { data: &[7], pos: 0 };
            Op::Linear {
                x,
                w: w.weights(ins * outs),
                ins,
                outs,
                b: Some(vec![0.25; outs]),
                form: Linear::GemmT(1.0, 1.0),
            }
        } else {
            Op::Slice(x, 0, outs as i64)
        };
        p.push(op);
    }
    p
}

impl Program {
    fn push(&mut self, op: Op) {
        let w = &self.widths;
        let width = match &op {
            Op::Linear { outs, .. } => *outs,
            Op::Add(x, _) | Op::Bias(x, _) | Op::Relu(x) | Op::Pass(x, _) | Op::Foreign(x) => w[*x],
            Op::Concat(xs) => xs.iter().fold(0usize, |s, &x| s.saturating_add(w[x])),
            Op::Slice(x, start, end) => {
                let (s, e) = slice_range(w[*x], *start, *end);
                e - s
            }
            Op::Lookup { width, .. } => *width,
        };
        self.widths.push(width);
        self.ops.push(op);
    }
}

/// The columns ONNX `Slice` keeps of a `width`-column value.
fn slice_range(width: usize, start: i64, end: i64) -> (usize, usize) {
    let w = width as i64;
    let clamp = |v: i64| if v < 0 { (v + w).max(0) } else { v.min(w) };
    let (s, e) = (clamp(start), clamp(end));
    (s as usize, e.max(s) as usize)
}

fn next_op(b: &mut Bytes<'_>, slot: Slot, widths: &[usize]) -> Op {
    let pick = |b: &mut Bytes<'_>| usize::from(b.byte()) % widths.len();
    match b.byte() % 10 {
        0..=2 => {
            let x = pick(b);
            linear_op(b, x, widths[x])
        }
        3 => {
            let a = pick(b);
            // Mostly a partner of the same width (else the graph is not run natively).
            let same: Vec<usize> = (0..widths.len())
                .filter(|&i| widths[i] == widths[a])
                .collect();
            let k = usize::from(b.byte());
            let other = if k < 0xf0 {
                same[k % same.len()]
            } else {
                k % widths.len()
            };
            Op::Add(a, other)
        }
        4 => {
            let x = pick(b);
            let n = if b.byte().is_multiple_of(2) || widths[x] > MAX_WEIGHTS {
                1
            } else {
                widths[x]
            };
            Op::Bias(x, b.weights(n))
        }
        5 | 6 => Op::Relu(pick(b)),
        7 => {
            let n = match b.byte() {
                0xf8.. => 64 << (b.byte() % 4),
                k => 1 + usize::from(k % 4),
            };
            Op::Concat((0..n).map(|_| pick(b)).collect())
        }
        8 => {
            let x = pick(b);
            slice_op(b, x, widths[x])
        }
        _ => match (slot, b.byte() % 16) {
            (Slot::ScheduleEmbedder, 0..=7) => lookup_op(b, widths[0]),
            (_, 8) => Op::Foreign(pick(b)),
            (_, k) => Op::Pass(pick(b), if k % 2 == 0 { "Identity" } else { "Flatten" }),
        },
    }
}

/// A linear layer on value `x` of `width` columns.
fn linear_op(b: &mut Bytes<'_>, x: usize, width: usize) -> Op {
    // Now and then a weight that does not fit its input (a load error); always on an input
    // too wide for a weight.
    let ins = if b.byte() == 0xff || width > MAX_WEIGHTS {
        b.width()
    } else {
        width
    };
    let outs = b.width().min(MAX_WEIGHTS / ins.max(1)).max(1);
    let w = b.weights(ins * outs);
    let bias = match b.byte() % 3 {
        0 => None,
        1 => Some(b.weights(outs)),
        _ => Some(b.weights(1)),
    };
    let scale = |b: &mut Bytes<'_>| [1.0, 0.5, -2.0, 1.0][usize::from(b.byte() % 4)];
    let form = match b.byte() % 3 {
        0 => Linear::GemmT(scale(b), scale(b)),
        1 => Linear::Gemm(scale(b), scale(b)),
        _ => Linear::MatMul,
    };
    Op::Linear {
        x,
        w,
        ins,
        outs,
        b: bias,
        form,
    }
}

/// Columns of value `x` of `width` columns: mostly a non-empty range, now and then any.
fn slice_op(b: &mut Bytes<'_>, x: usize, width: usize) -> Op {
    let start = match b.byte() {
        k @ 0xf0.. => -1 - i64::from(k % 4),
        k => i64::from(k) % width.max(1) as i64,
    };
    let end = match b.byte() {
        k @ 0xf0.. => i64::from(k as i8),
        k => start + 1 + i64::from(k % 8),
    };
    Op::Slice(x, start, end)
}

/// An embedding lookup on a column of the encoded schedule (`width` columns, and two out of
/// range).
fn lookup_op(b: &mut Bytes<'_>, width: usize) -> Op {
    let col = i64::from(b.byte()) % (width as i64 + 2) - 1;
    let rows = b.width();
    let width = b.width().min(MAX_WEIGHTS / rows);
    Op::Lookup {
        col,
        rows,
        width,
        table: b.weights(rows * width),
    }
}

/// The program as an ONNX graph for its slot (value `i` is named after the slot's input or
/// `v{i}`; the last value is the graph output).
fn emit(p: &Program) -> Graph {
    let fx = fixture();
    let names: Vec<String> = fx.inputs[p.slot as usize]
        .iter()
        .map(|(n, _)| (*n).to_string())
        .chain((p.inputs..p.widths.len()).map(|i| format!("v{i}")))
        .collect();
    let mut g = Graph {
        inputs: names[..p.inputs].to_vec(),
        output: p.slot.output().into(),
        keep_initializers: p.slot == Slot::MatrixEmbedder,
        ..Graph::default()
    };
    g.ints("axis1", &[1], vec![1]);
    for (i, op) in p.ops.iter().enumerate() {
        emit_op(&mut g, op, &names, &names[p.inputs + i], p.constants);
    }
    let last = &names[names.len() - 1];
    g.node(Node::new("Identity", &[last], p.slot.output()));
    g
}

/// The node(s) computing `op` into `out` (values named by `names`).
fn emit_op(g: &mut Graph, op: &Op, names: &[String], out: &str, constants: bool) {
    let n = |x: &usize| names[*x].as_str();
    match op {
        Op::Linear {
            x,
            w,
            ins,
            outs,
            b,
            form,
        } => emit_linear(g, (n(x), out), w, (*ins, *outs), b, *form, constants),
        Op::Add(a, b) => {
            g.node(Node::new("Add", &[n(a), n(b)], out));
        }
        Op::Bias(x, c) => {
            let cn = format!("{out}.c");
            floats(g, &cn, &[c.len() as i64], c.clone(), constants);
            g.node(Node::new("Add", &[n(x), &cn], out));
        }
        Op::Relu(x) => {
            g.node(Node::new("Relu", &[n(x)], out));
        }
        Op::Concat(xs) => {
            let xs: Vec<&str> = xs.iter().map(n).collect();
            g.node(Node::new("Concat", &xs, out).attr(Attr::Int("axis", 1)));
        }
        Op::Slice(x, s, e) => {
            let (sn, en) = (format!("{out}.s"), format!("{out}.e"));
            g.ints(&sn, &[1], vec![*s]).ints(&en, &[1], vec![*e]);
            g.node(Node::new("Slice", &[n(x), &sn, &en, "axis1"], out));
        }
        Op::Pass(x, op) => {
            g.node(Node::new(op, &[n(x)], out));
        }
        Op::Lookup {
            col,
            rows,
            width,
            table,
        } => {
            let (cn, tn) = (format!("{out}.col"), format!("{out}.table"));
            g.ints(&cn, &[], vec![*col]);
            let dims = [*rows as i64, *width as i64];
            floats(g, &tn, &dims, table.clone(), constants);
            let (picked, index) = (format!("{out}.x"), format!("{out}.i"));
            g.node(Node::new("Gather", &[&names[0], &cn], &picked).attr(Attr::Int("axis", 1)))
                .node(Node::new("Cast", &[&picked], &index).attr(Attr::Int("to", 7)))
                .node(Node::new("Gather", &[&tn, &index], out));
        }
        Op::Foreign(x) => {
            g.node(Node::new("Tanh", &[n(x)], out));
        }
    }
}

/// A float weight as an initializer or a `Constant` node.
fn floats(g: &mut Graph, name: &str, dims: &[i64], data: Vec<f32>, constant: bool) {
    if constant {
        g.constant(name, dims, data);
    } else {
        g.floats(name, dims, data);
    }
}

fn emit_linear(
    g: &mut Graph,
    (x, out): (&str, &str),
    w: &[f32],
    (ins, outs): (usize, usize),
    b: &Option<Vec<f32>>,
    form: Linear,
    constant: bool,
) {
    let (wn, bn) = (format!("{out}.w"), format!("{out}.b"));
    let transposed: Vec<f32> = (0..ins * outs)
        .map(|i| w[(i % outs) * ins + i / outs])
        .collect();
    if let Some(b) = b {
        floats(g, &bn, &[b.len() as i64], b.clone(), constant);
    }
    let with_bias = |inputs: [&str; 2]| -> Vec<String> {
        let mut v: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
        if b.is_some() {
            v.push(bn.clone());
        }
        v
    };
    let gemm = |g: &mut Graph, alpha: f32, beta: f32, trans: bool| {
        let inputs = with_bias([x, &wn]);
        let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let mut node = Node::new("Gemm", &inputs, out)
            .attr(Attr::Float("alpha", alpha))
            .attr(Attr::Float("beta", beta));
        if trans {
            node = node.attr(Attr::Int("transB", 1));
        }
        g.node(node);
    };
    match form {
        Linear::GemmT(alpha, beta) => {
            floats(g, &wn, &[outs as i64, ins as i64], w.to_vec(), constant);
            gemm(g, alpha, beta, true);
        }
        Linear::Gemm(alpha, beta) => {
            floats(g, &wn, &[ins as i64, outs as i64], transposed, constant);
            gemm(g, alpha, beta, false);
        }
        Linear::MatMul => {
            floats(g, &wn, &[ins as i64, outs as i64], transposed, constant);
            let mm = if b.is_some() {
                format!("{out}.mm")
            } else {
                out.to_string()
            };
            g.node(Node::new("MatMul", &[x, &wn], &mm));
            if b.is_some() {
                g.node(Node::new("Add", &[&mm, &bn], out));
            }
        }
    }
}

/// A row of values with a bound on the magnitudes that went into each (for the tolerance).
#[derive(Clone)]
struct Row {
    v: Vec<f64>,
    mag: Vec<f64>,
}

/// The program's output for one row of inputs, evaluated plainly in `f64`; `None` when the
/// program is not well-formed there (the load must then have failed).
fn eval(p: &Program, inputs: &[&[f32]]) -> Option<Row> {
    let mut vals: Vec<Row> = inputs
        .iter()
        .map(|x| Row {
            v: x.iter().map(|&a| f64::from(a)).collect(),
            mag: x.iter().map(|&a| f64::from(a).abs()).collect(),
        })
        .collect();
    for op in &p.ops {
        let row = eval_op(op, &vals)?;
        vals.push(row);
    }
    vals.pop()
}

fn eval_op(op: &Op, vals: &[Row]) -> Option<Row> {
    Some(match op {
        Op::Linear {
            x,
            w,
            ins,
            outs,
            b,
            form,
        } => eval_linear(&vals[*x], w, (*ins, *outs), b.as_deref(), *form)?,
        Op::Add(a, b) => {
            let (a, b) = (&vals[*a], &vals[*b]);
            if a.v.len() != b.v.len() {
                return None;
            }
            Row {
                v: a.v.iter().zip(&b.v).map(|(x, y)| x + y).collect(),
                mag: a.mag.iter().zip(&b.mag).map(|(x, y)| x + y).collect(),
            }
        }
        Op::Bias(x, c) => {
            let x = &vals[*x];
            let c = |i: usize| f64::from(if c.len() == 1 { c[0] } else { c[i] });
            Row {
                v: x.v.iter().enumerate().map(|(i, v)| v + c(i)).collect(),
                mag: x
                    .mag
                    .iter()
                    .enumerate()
                    .map(|(i, m)| m + c(i).abs())
                    .collect(),
            }
        }
        Op::Relu(x) => Row {
            v: vals[*x].v.iter().map(|v| v.max(0.0)).collect(),
            mag: vals[*x].mag.clone(),
        },
        Op::Concat(xs) => Row {
            v: xs.iter().flat_map(|&x| vals[x].v.iter().copied()).collect(),
            mag: xs
                .iter()
                .flat_map(|&x| vals[x].mag.iter().copied())
                .collect(),
        },
        Op::Slice(x, s, e) => {
            let (s, e) = slice_range(vals[*x].v.len(), *s, *e);
            Row {
                v: vals[*x].v[s..e].to_vec(),
                mag: vals[*x].mag[s..e].to_vec(),
            }
        }
        Op::Pass(x, _) => vals[*x].clone(),
        Op::Lookup {
            col,
            rows,
            width,
            table,
        } => eval_lookup(&vals[0].v, *col, (*rows, *width), table)?,
        Op::Foreign(_) => return None,
    })
}

/// `alpha · W·x + beta · b`, `w` of `outs × ins`.
fn eval_linear(
    x: &Row,
    w: &[f32],
    (ins, outs): (usize, usize),
    b: Option<&[f32]>,
    form: Linear,
) -> Option<Row> {
    if x.v.len() != ins {
        return None;
    }
    let (alpha, beta) = match form {
        Linear::GemmT(a, b) | Linear::Gemm(a, b) => (f64::from(a), f64::from(b)),
        Linear::MatMul => (1.0, 1.0),
    };
    let bias = |o: usize| {
        b.map_or(0.0, |b| {
            f64::from(if b.len() == 1 { b[0] } else { b[o] }) * beta
        })
    };
    let mut r = Row {
        v: vec![0.0; outs],
        mag: vec![0.0; outs],
    };
    for o in 0..outs {
        let row = &w[o * ins..(o + 1) * ins];
        let dot: f64 = row.iter().zip(&x.v).map(|(&a, v)| f64::from(a) * v).sum();
        let mag: f64 = row
            .iter()
            .zip(&x.mag)
            .map(|(&a, m)| f64::from(a).abs() * m)
            .sum();
        r.v[o] = alpha * dot + bias(o);
        r.mag[o] = alpha.abs() * mag + bias(o).abs();
    }
    Some(r)
}

/// Row `trunc(x[col])` of `table` (`rows × width`).
fn eval_lookup(x: &[f64], col: i64, (rows, width): (usize, usize), table: &[f32]) -> Option<Row> {
    let col = if col < 0 { col + x.len() as i64 } else { col };
    let index = *x.get(usize::try_from(col).ok()?)? as usize;
    if index >= rows {
        return None;
    }
    let t: Vec<f64> = table[index * width..(index + 1) * width]
        .iter()
        .map(|&a| f64::from(a))
        .collect();
    Some(Row {
        mag: t.iter().map(|a| a.abs()).collect(),
        v: t,
    })
}

/// `native` agrees with `reference` within the rounding its magnitudes allow.
fn check_close(native: &[f32], reference: &Row, what: &str) {
    assert_eq!(native.len(), reference.v.len(), "{what}: width");
    for (i, (&n, (&r, &m))) in native
        .iter()
        .zip(reference.v.iter().zip(&reference.mag))
        .enumerate()
    {
        if m.is_nan() || m >= 1e30 {
            continue; // f32 overflows on the way: nothing to compare.
        }
        let n = f64::from(n);
        assert!(
            (n - r).abs() <= 1e-2 * m + 1e-6,
            "{what}[{i}]: native {n}, reference {r} (magnitude {m})"
        );
    }
}

/// The small load budget of the target: every input compiles quickly.
fn options() -> LoadOptions {
    LoadOptions {
        backend: Backend::Native,
        fallback: None,
        threads: Some(1),
        matrix_cache_capacity: 0,
        limits: BundleLimits {
            native_budget_base: 1 << 18,
            ..BundleLimits::default()
        },
        ..LoadOptions::default()
    }
}

/// The `onnx_graph` target: see the module docs.
pub fn onnx_graph(data: &[u8]) {
    onnx_graph_loads(data);
}

/// [`onnx_graph`], returning whether the generated bundle loaded.
pub fn onnx_graph_loads(data: &[u8]) -> bool {
    let p = generate(data);
    let mut files = fixture().files.clone();
    if let Some(slot) = files.iter_mut().find(|(n, _)| n == p.slot.file()) {
        slot.1 = super::onnx_write::replace_graph(&slot.1, &emit(&p));
    }
    let manifest = super::inputs::stamp_manifest(&files);
    files.push(("manifest.json".into(), manifest));
    match Model::from_files(files, &options()) {
        Ok(model) => {
            check_loaded(&p, &model);
            true
        }
        Err(e) => {
            check_error(&e);
            if let ErrorKind::LoadBudget { needed, budget, .. } = e.kind() {
                assert!(needed > budget, "{e}");
            }
            false
        }
    }
}

/// A model with the generated graph agrees with the `f64` evaluation of the program, and
/// scores a candidate the same alone and in a batch.
fn check_loaded(p: &Program, model: &Model) {
    let fx = fixture();
    let matrix = match model.embed_matrix(&fx.pattern) {
        Ok(m) => m,
        Err(e) => return check_error(&e),
    };
    let schema = model.schema(&fx.head).expect("the head exists");
    let batch = schema.encode_batch(&fx.lines);
    let lines: Vec<&str> = batch.index.iter().map(|&i| fx.lines[i].as_str()).collect();
    let encoded = |row: usize| &batch.rows[row * batch.width..(row + 1) * batch.width];
    let embeddings = model.embed_schedules(&fx.head, &lines).expect("embeddings");
    let set = model
        .prepare_candidates(&fx.head, &lines)
        .expect("valid lines");
    let mut scores = vec![0.0f32; set.len()];
    model
        .score_into(&matrix, &set, &mut scores)
        .expect("scores");
    if p.slot == Slot::MatrixEmbedder {
        let conv = matrix.conv_features();
        let (r, c, n) = (fx.pattern.nrows(), fx.pattern.ncols(), fx.pattern.nnz());
        let shape = model.info().shape_normalization.apply(r, c, n);
        if let Some(reference) = eval(p, &[conv, &shape]) {
            check_close(matrix.values(), &reference, "matrix embedding");
        }
    }
    for (row, emb) in embeddings.iter().enumerate() {
        let emb = emb.as_deref().expect("a valid line has an embedding");
        let reference = match p.slot {
            Slot::MatrixEmbedder => None,
            Slot::ScheduleEmbedder => eval(p, &[encoded(row)]).map(|r| (emb, r, "embedding")),
            Slot::Predictor => {
                let r = eval(p, &[matrix.values(), emb]);
                r.map(|r| (&scores[row..row + 1], r, "score"))
            }
        };
        if let Some((native, reference, what)) = reference {
            check_close(native, &reference, what);
        }
    }
    // The last candidate alone scores what it scored in the batch.
    let Some(last) = lines.len().checked_sub(1) else {
        return;
    };
    let alone = model
        .prepare_candidates(&fx.head, &lines[last..])
        .expect("one line");
    let mut one = [0.0f32];
    model
        .score_into(&matrix, &alone, &mut one)
        .expect("one score");
    assert_eq!(
        one[0].to_bits(),
        scores[last].to_bits(),
        "alone and in a batch"
    );
}

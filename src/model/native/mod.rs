//! The native dense-head engine: the bundle's ONNX graphs compiled at load into folded,
//! staged programs of native layers.
//!
//! # Pipeline
//!
//! ```text
//! ONNX GraphProto ──import──► IR (Linear, Bias, Add, Relu, Concat, Slice, Lookup)
//!                 ──fold────► Program: layers tagged Candidate | Matrix | Score
//!                 ──run─────► simd::gemm kernels (one accumulation order on every level)
//! ```
//!
//! A head's schedule embedder and predictor are compiled as *one* graph (the predictor's
//! `schedule_embedding` input wired to the embedder's output), with the encoded schedule as
//! a Candidate-stage input and the matrix embedding as a Matrix-stage input. A graph the
//! importer does not recognise runs on an `ort` backend instead ([`crate::Backend`]).
//!
//! # The algebra of folding
//!
//! Every value is kept as an affine form `b + Σ_ℓ M_ℓ·ℓ + Σ lookups` over *leaves* ℓ (the
//! inputs and the ReLU outputs); linear layers, biases, sums, slices and concatenations only
//! compose the `M`s (exactly, in `f64`; rounded to `f32` once). A form becomes a layer only
//! where a ReLU or the output consumes it. Two consequences are the point of the engine:
//!
//! 1. **Predictor layer 0 is split.** With `m` the matrix embedding and `s` the schedule
//!    embedding, `W₀·[m; s] + b₀ = (W₀ᵐ·m + b₀) + W₀ˢ·s`. The first half `u` depends on the
//!    matrix only and is computed once per matrix; the second `v` on the candidate only and is
//!    computed once per candidate, at preparation, and stored in the
//!    [`CandidateSet`](crate::CandidateSet). Scoring a pair starts from `ReLU(u + v)`.
//!    Because the embedder's last layer `s = W_e·h + b_e` is affine too,
//!    `W₀ˢ·s = (W₀ˢ·W_e)·h + W₀ˢ·b_e`: the stored `v` is one layer away from `h`, and the
//!    constant joins `u`.
//! 2. **The embedder's first layer becomes lookup tables.** Before its first ReLU, the
//!    embedder is affine in the encoded schedule `x` plus embedding lookups
//!    `E_f[x_f]`: `W₁·[E₁[x₁]; …; P] + b₁ = b₁ + Σ_f (W₁|_f·E_f)[x_f] + (W₁|_P·W_P)·onehot`.
//!    Each choice field gets a table of `vocabulary × width` (embedding times weight slice),
//!    a loop-order permutation a table of `n² × width` (the one-hot through its linear layer;
//!    a candidate adds `n` rows), an integer field a column scaled by its encoded value
//!    (`tables`). Preparing a candidate is a sum of table rows, a ReLU, and the layers after.
//!
//! For WACO's SpMM head (288 → 128 → 128 embedder; 256 → 128 → 64 → 1 predictor) this
//! leaves per candidate: 8 + 6 table rows, ReLU, one 128 × 128 layer at preparation; and per
//! pair: `ReLU(u + v)`, 128 → 64, ReLU, 64 → 1 — about 8.3 k multiply-adds instead of 41 k.
//! The results equal the unfolded graph up to float rounding (the parity tests compare the
//! two engines on every bundle).
//!
//! # Determinism
//!
//! A candidate's score depends only on the matrix and the candidate: bit-identical alone or
//! in any batch, with any thread count, on every SIMD level (see [`crate::simd::gemm`] for the
//! accumulation order; table sums and `u + v` are elementwise).

mod budget;
mod fold;
mod form;
mod import;
mod ir;
mod program;
mod tables;

use budget::Budget;
use fold::{compile, Compiled, Inputs};
use import::{import, Import};
pub(crate) use program::CandidateRows;
use program::{Program, Stage};

use crate::bundle::{BundleFile, BundleLimits};
use crate::error::{Error, Result};
use crate::schedule::Schema;
use crate::simd::gemm::padded;
use crate::simd::SimdLevel;

/// Why a graph is not run natively: `(location, reason)`, the location naming the file and
/// the node.
pub(crate) type Unsupported = (String, String);

/// How to run rows: in the caller's rayon context, or on this thread alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exec {
    pub level: SimdLevel,
    pub parallel: bool,
}

fn pad_rows(rows: &[f32], n: usize, width: usize) -> Vec<f32> {
    let stride = padded(width);
    if stride == width {
        return rows[..n * width].to_vec();
    }
    let mut out = vec![0.0f32; n * stride];
    for r in 0..n {
        out[r * stride..r * stride + width].copy_from_slice(&rows[r * width..(r + 1) * width]);
    }
    out
}

fn unpad(rows: Vec<f32>, n: usize, width: usize) -> Vec<f32> {
    let stride = padded(width);
    if stride == width {
        return rows;
    }
    (0..n)
        .flat_map(|r| rows[r * stride..r * stride + width].iter().copied())
        .collect()
}

fn imported(
    file: &BundleFile,
    inputs: &[(&str, usize)],
    budget: &Budget,
) -> Result<Result<ir::Graph, Unsupported>> {
    Ok(match import(file, inputs, budget)? {
        Import::Graph(g) => Ok(g),
        Import::Unsupported(node, reason) => {
            Err((format!("{}: node '{node}'", file.origin), reason))
        }
    })
}

fn compiled(c: Compiled, origin: &str) -> Result<Program, Unsupported> {
    match c {
        Compiled::Program(p) => Ok(p),
        Compiled::Unsupported(node, reason) => Err((format!("{origin}: node '{node}'"), reason)),
    }
}

/// The matrix embedder, compiled.
#[derive(Debug)]
pub(crate) struct NativeMatrixEmbedder {
    prog: Program,
    width: usize,
}

impl NativeMatrixEmbedder {
    /// Compiles the matrix embedder file (inputs `conv_features` of width `conv`,
    /// `shape_features` of width `shape`) within its load budget (see `budget`).
    pub(crate) fn compile(
        file: &BundleFile,
        conv: usize,
        shape: usize,
        limits: &BundleLimits,
    ) -> Result<Result<Self, Unsupported>> {
        let budget = Budget::new(limits, &[file]);
        let inputs = [("conv_features", conv), ("shape_features", shape)];
        let graph = match imported(file, &inputs, &budget)? {
            Ok(g) => g,
            Err(u) => return Ok(Err(u)),
        };
        let stages = [
            ("conv_features", Stage::Matrix),
            ("shape_features", Stage::Matrix),
        ];
        let inputs = Inputs {
            stages: &stages,
            schedule: None,
            const_stage: Stage::Matrix,
            output_stage: None,
            origin: &file.origin,
            budget: &budget,
        };
        let width = graph.width(graph.output);
        Ok(compiled(compile(&graph, &inputs)?, &file.origin).map(|prog| Self { prog, width }))
    }

    /// Width of the matrix embedding.
    pub(crate) fn width(&self) -> usize {
        self.width
    }

    /// The matrix embedding of one matrix.
    pub(crate) fn embed(&self, level: SimdLevel, conv: &[f32], shape: &[f32]) -> Vec<f32> {
        let c = pad_rows(conv, 1, conv.len());
        let s = pad_rows(shape, 1, shape.len());
        let out = self.prog.run(
            level,
            Stage::Matrix,
            1,
            &[("conv_features", &c), ("shape_features", &s)],
        );
        out[..self.width].to_vec()
    }
}

/// A head (schedule embedder + predictor), compiled into one folded program, plus the
/// embedder alone (for [`crate::Model::embed_schedules`]).
#[derive(Debug)]
pub(crate) struct NativeHead {
    head: Program,
    embedder: Program,
    schedule_width: usize,
    embedding_width: usize,
}

impl NativeHead {
    /// Compiles a head (`matrix_width` is the matrix embedding's width) within the load
    /// budget of its two files (see `budget`).
    pub(crate) fn compile(
        schedule_embedder: &BundleFile,
        predictor: &BundleFile,
        schema: &Schema,
        matrix_width: usize,
        limits: &BundleLimits,
    ) -> Result<Result<Self, Unsupported>> {
        let budget = Budget::new(limits, &[schedule_embedder, predictor]);
        let d = schema.encoded_width();
        let se = match imported(schedule_embedder, &[("schedule", d)], &budget)? {
            Ok(g) => g,
            Err(u) => return Ok(Err(u)),
        };
        let es = se.width(se.output);
        let pr = match imported(
            predictor,
            &[
                ("matrix_embedding", matrix_width),
                ("schedule_embedding", es),
            ],
            &budget,
        )? {
            Ok(g) => g,
            Err(u) => return Ok(Err(u)),
        };
        let score_width = pr.width(pr.output);
        if score_width != 1 {
            return Err(Error::bundle(
                format!("{}: score", predictor.origin),
                format!("predictor must output [N, 1], got width {score_width}"),
            ));
        }
        let mut whole = se.clone();
        let out = whole.splice(&pr, "schedule_embedding", se.output);
        whole.output = out;
        let origin = format!("{} + {}", schedule_embedder.origin, predictor.origin);
        let stages = [
            ("schedule", Stage::Candidate),
            ("matrix_embedding", Stage::Matrix),
        ];
        let head = compile(
            &whole,
            &Inputs {
                stages: &stages,
                schedule: Some(("schedule", schema)),
                const_stage: Stage::Candidate,
                output_stage: Some(Stage::Score),
                origin: &origin,
                budget: &budget,
            },
        )?;
        let head = match compiled(head, &origin) {
            Ok(p) => p,
            Err(u) => return Ok(Err(u)),
        };
        let embedder = compile(
            &se,
            &Inputs {
                stages: &stages[..1],
                schedule: Some(("schedule", schema)),
                const_stage: Stage::Candidate,
                output_stage: None,
                origin: &schedule_embedder.origin,
                budget: &budget,
            },
        )?;
        let embedder = match compiled(embedder, &schedule_embedder.origin) {
            Ok(p) => p,
            Err(u) => return Ok(Err(u)),
        };
        Ok(Ok(Self {
            head,
            embedder,
            schedule_width: d,
            embedding_width: es,
        }))
    }

    /// The program's arithmetic.
    pub(crate) fn cost(&self) -> crate::model::HeadCost {
        let mut cost = crate::model::HeadCost {
            stored_floats: self.head.export_stride(),
            ..Default::default()
        };
        for ins in &self.head.instrs {
            let width = self.head.bufs[ins.out].width;
            let mut macs: usize = ins.terms.iter().map(|(_, w)| w.k * width).sum();
            macs += match &ins.init {
                program::Init::Fields { tables, .. } => tables.adds() * width,
                program::Init::Sum { v: Some(_), .. } => width,
                _ => 0,
            };
            match ins.stage {
                Stage::Candidate => cost.prepare_macs += macs,
                Stage::Matrix => cost.matrix_macs += macs,
                Stage::Score => cost.score_macs += macs,
            }
        }
        cost
    }

    /// Width of the schedule embedding.
    pub(crate) fn embedding_width(&self) -> usize {
        self.embedding_width
    }

    /// Runs the Candidate stage on `n` encoded rows (`n × schedule width`).
    pub(crate) fn prepare(&self, exec: Exec, encoded: &[f32], n: usize) -> CandidateRows {
        let rows = pad_rows(encoded, n, self.schedule_width);
        self.head
            .prepare(exec.level, exec.parallel, "schedule", &rows, n)
    }

    /// Scores prepared candidates against a matrix embedding into `out` (`rows.n` values).
    pub(crate) fn score(&self, exec: Exec, matrix: &[f32], rows: &CandidateRows, out: &mut [f32]) {
        let state = self
            .head
            .matrix_state(exec.level, "matrix_embedding", matrix);
        self.head
            .score(exec.level, exec.parallel, &state, rows, out);
    }

    /// Schedule embeddings of `n` encoded rows (`n × embedding width`), computed by the
    /// embedder alone.
    pub(crate) fn embed_schedules(&self, level: SimdLevel, encoded: &[f32], n: usize) -> Vec<f32> {
        let rows = pad_rows(encoded, n, self.schedule_width);
        let out = self
            .embedder
            .run(level, Stage::Candidate, n, &[("schedule", &rows)]);
        unpad(out, n, self.embedding_width)
    }
}

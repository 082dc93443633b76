//! Compiled programs and their execution.
//!
//! A [`Program`] is a list of layer instructions over row buffers, each tagged with the
//! [`Stage`] it runs in. An instruction computes
//!
//! ```text
//! out[r] = act( init[r] + Σ_terms W_t · in_t[r] )
//! ```
//!
//! where `init` is a bias row, a sum of per-field table rows of the encoded schedule
//! ([`FieldTables`]), or `u + v[r]` (a per-matrix vector plus a stored per-candidate vector).
//! The terms run through [`crate::simd::gemm::accumulate`], whose accumulation order does not
//! depend on the SIMD level, the batch size or the thread count; the init is elementwise. So
//! every row's result depends only on that row.

use super::tables::FieldTables;
use crate::model::tasks::{for_each_chunk_mut, with_scratch};
use crate::simd::gemm::{self, padded, GemmShape};
use crate::simd::SimdLevel;

/// When an instruction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// Once per candidate, at preparation (depends on the schedule only).
    Candidate,
    /// Once per matrix embedding (depends on the matrix only; one row).
    Matrix,
    /// Once per (matrix, candidate) pair.
    Score,
}

impl Stage {
    /// The stage of a value computed from values of stages `self` and `other`.
    pub(crate) fn join(self, other: Stage) -> Stage {
        if self == other {
            self
        } else {
            Stage::Score
        }
    }
}

/// Index of a buffer in a [`Program`].
pub(crate) type BufId = usize;

/// One row buffer: `width` real columns in rows of `stride` (a multiple of the SIMD lanes,
/// padding zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Buf {
    pub stage: Stage,
    pub width: usize,
    pub stride: usize,
}

/// Weights packed k-major for [`gemm::accumulate`]: `k` rows of `out_stride`.
#[derive(Debug, Clone)]
pub(crate) struct Packed {
    pub k: usize,
    pub out_stride: usize,
    pub data: Vec<f32>,
}

/// How an instruction's output starts.
#[derive(Debug, Clone)]
pub(crate) enum Init {
    /// A bias row (padded).
    Bias(Vec<f32>),
    /// Bias plus the table rows of the encoded schedule in buffer `input`.
    Fields {
        bias: Vec<f32>,
        input: BufId,
        tables: FieldTables,
    },
    /// `u` (a Matrix-stage buffer, broadcast) plus `v[r]` (an exported Candidate buffer).
    Sum { u: BufId, v: Option<BufId> },
}

/// One layer.
#[derive(Debug, Clone)]
pub(crate) struct Instr {
    pub stage: Stage,
    pub out: BufId,
    pub init: Init,
    pub terms: Vec<(BufId, Packed)>,
    pub relu: bool,
}

/// A compiled graph.
#[derive(Debug, Clone, Default)]
pub(crate) struct Program {
    pub bufs: Vec<Buf>,
    pub instrs: Vec<Instr>,
    /// Graph inputs and their buffers.
    pub inputs: Vec<(String, BufId)>,
    pub output: BufId,
}

/// Rows per work unit: a unit's buffers stay in L2, and it is the granularity of threads
/// (see [`crate::model::tasks`]).
const CHUNK: usize = 128;

/// A read-only view of rows: `rows[r * stride + c]`, or one row repeated.
#[derive(Clone, Copy)]
struct View<'a> {
    data: &'a [f32],
    stride: usize,
}

/// Per-candidate values the Score stage reads, stored at preparation.
#[derive(Debug, Clone, Default)]
pub(crate) struct CandidateRows {
    /// `n × stride`.
    pub data: Vec<f32>,
    pub stride: usize,
    pub n: usize,
}

/// Buffer `b`: given by the caller, or computed earlier in this stage.
fn view_of<'a>(
    given: &[Option<View<'a>>],
    own: &'a [Vec<f32>],
    bufs: &[Buf],
    b: BufId,
) -> Option<View<'a>> {
    given[b].or_else(|| {
        let d = own[b].as_slice();
        (!d.is_empty()).then_some(View {
            data: d,
            stride: bufs[b].stride,
        })
    })
}

impl Program {
    pub(crate) fn add_buf(&mut self, stage: Stage, width: usize) -> BufId {
        self.bufs.push(Buf {
            stage,
            width,
            stride: padded(width),
        });
        self.bufs.len() - 1
    }

    pub(crate) fn input(&self, name: &str) -> Option<BufId> {
        self.inputs.iter().find(|(n, _)| n == name).map(|(_, b)| *b)
    }

    /// Candidate buffers the Score stage reads, in order, with their offset in a stored row.
    pub(crate) fn exports(&self) -> Vec<(BufId, usize)> {
        let mut out: Vec<(BufId, usize)> = Vec::new();
        let mut at = 0;
        for i in &self.instrs {
            if let Init::Sum { v: Some(v), .. } = i.init {
                if !out.iter().any(|(b, _)| *b == v) {
                    out.push((v, at));
                    at += self.bufs[v].stride;
                }
            }
        }
        out
    }

    /// Width of a stored candidate row (sum of the exported buffers' strides).
    pub(crate) fn export_stride(&self) -> usize {
        self.exports()
            .last()
            .map_or(0, |(b, at)| at + self.bufs[*b].stride)
    }

    /// Runs one stage on `rows` rows. `given` supplies buffers computed elsewhere (inputs,
    /// earlier stages); this stage's buffers are written to `own` (`rows × stride` each, at
    /// the front of vectors reused from call to call, so a stream of chunks allocates once).
    fn run_stage(
        &self,
        level: SimdLevel,
        stage: Stage,
        rows: usize,
        given: &[Option<View<'_>>],
        own: &mut Vec<Vec<f32>>,
    ) {
        own.resize_with(self.bufs.len(), Vec::new);
        for ins in self.instrs.iter().filter(|i| i.stage == stage) {
            let ob = self.bufs[ins.out];
            let n = rows * ob.stride;
            let mut buf = std::mem::take(&mut own[ins.out]);
            if buf.len() < n {
                buf.resize(n, 0.0);
            }
            let out = &mut buf[..n];
            let mut missing = self.init_rows(level, ins, out, given, own);
            let n_terms = ins.terms.len();
            for (t, (b, w)) in ins.terms.iter().enumerate() {
                let Some(x) = view_of(given, own, &self.bufs, *b) else {
                    missing = true;
                    continue;
                };
                debug_assert_eq!(w.out_stride, ob.stride);
                let shape = GemmShape {
                    rows,
                    k: w.k,
                    x_stride: x.stride,
                    out_stride: ob.stride,
                };
                let last = t + 1 == n_terms;
                gemm::accumulate(level, shape, x.data, &w.data, out, ins.relu && last);
            }
            if ins.relu && n_terms == 0 && !matches!(ins.init, Init::Sum { .. }) {
                gemm::relu(level, out);
            }
            if missing {
                // A buffer the compiler promised is absent: never return a plausible number.
                debug_assert!(false, "input buffer missing for a native instruction");
                out.fill(f32::NAN);
            }
            own[ins.out] = buf;
        }
    }

    /// Writes every element of the instruction's `out` (`rows × stride`, the padding too)
    /// with its initial value: its bias, its bias plus table fields, or a sum of rows.
    /// Returns whether a buffer it reads is missing.
    fn init_rows(
        &self,
        level: SimdLevel,
        ins: &Instr,
        out: &mut [f32],
        given: &[Option<View<'_>>],
        own: &[Vec<f32>],
    ) -> bool {
        let ob = self.bufs[ins.out];
        match &ins.init {
            Init::Bias(b) => {
                for row in out.chunks_exact_mut(ob.stride) {
                    row.copy_from_slice(b);
                }
                false
            }
            Init::Fields {
                bias,
                input,
                tables,
            } => match view_of(given, own, &self.bufs, *input) {
                Some(x) => {
                    let mut ops = Vec::with_capacity(tables.adds());
                    for (r, row) in out.chunks_exact_mut(ob.stride).enumerate() {
                        row.copy_from_slice(bias);
                        tables.add_row(level, &x.data[r * x.stride..], row, &mut ops);
                    }
                    false
                }
                None => true,
            },
            Init::Sum { u, v } => match view_of(given, own, &self.bufs, *u) {
                Some(uv) => {
                    let vv = v.and_then(|v| view_of(given, own, &self.bufs, v));
                    let fuse_relu = ins.relu && ins.terms.is_empty();
                    let u_row = &uv.data[..ob.stride];
                    let v_rows = vv.map(|vv| (vv.data, vv.stride));
                    gemm::sum_rows_block(level, out, ob.stride, u_row, v_rows, fuse_relu);
                    v.is_some() && vv.is_none()
                }
                None => true,
            },
        }
    }

    fn given_inputs<'a>(&self, inputs: &[(&str, &'a [f32])]) -> Vec<Option<View<'a>>> {
        let mut given: Vec<Option<View<'a>>> = vec![None; self.bufs.len()];
        for (name, data) in inputs {
            if let Some(b) = self.input(name) {
                given[b] = Some(View {
                    data,
                    stride: self.bufs[b].stride,
                });
            }
        }
        given
    }

    /// Runs a single-stage program on `rows` rows of padded inputs; returns the output rows
    /// (`rows × output stride`).
    pub(crate) fn run(
        &self,
        level: SimdLevel,
        stage: Stage,
        rows: usize,
        inputs: &[(&str, &[f32])],
    ) -> Vec<f32> {
        let given = self.given_inputs(inputs);
        if let Some(v) = given[self.output] {
            return v.data[..rows * v.stride].to_vec();
        }
        let mut own = Vec::new();
        self.run_stage(level, stage, rows, &given, &mut own);
        let mut out = std::mem::take(&mut own[self.output]);
        out.truncate(rows * self.bufs[self.output].stride);
        out
    }

    /// Runs the Candidate stage on `n` encoded schedule rows (padded, in buffer `input`'s
    /// stride) and keeps the exported buffers, chunk by chunk, in parallel above one chunk.
    pub(crate) fn prepare(
        &self,
        level: SimdLevel,
        parallel: bool,
        input: &str,
        rows: &[f32],
        n: usize,
    ) -> CandidateRows {
        let exports = self.exports();
        let stride = self.export_stride();
        let Some(ib) = self.input(input) else {
            return CandidateRows::default();
        };
        let in_stride = self.bufs[ib].stride;
        let mut data = vec![0.0f32; n * stride];
        let work = |own: &mut Vec<Vec<f32>>, chunk: usize, dst: &mut [f32]| {
            let start = chunk * CHUNK;
            let m = dst.len() / stride.max(1);
            let mut given: Vec<Option<View<'_>>> = vec![None; self.bufs.len()];
            given[ib] = Some(View {
                data: &rows[start * in_stride..(start + m) * in_stride],
                stride: in_stride,
            });
            self.run_stage(level, Stage::Candidate, m, &given, own);
            for (b, at) in &exports {
                let bs = self.bufs[*b].stride;
                for r in 0..m {
                    dst[r * stride + at..r * stride + at + bs]
                        .copy_from_slice(&own[*b][r * bs..(r + 1) * bs]);
                }
            }
        };
        if stride > 0 {
            for_each_chunk_mut(&mut data, CHUNK * stride, parallel, |chunk, dst| {
                with_scratch(|own| work(own, chunk, dst));
            });
        }
        CandidateRows { data, stride, n }
    }

    /// Runs the Matrix stage on one matrix embedding; returns its buffers.
    pub(crate) fn matrix_state(
        &self,
        level: SimdLevel,
        input: &str,
        embedding: &[f32],
    ) -> Vec<Vec<f32>> {
        let mut padded_row = vec![0.0f32; padded(embedding.len())];
        padded_row[..embedding.len()].copy_from_slice(embedding);
        let given = self.given_inputs(&[(input, &padded_row)]);
        let mut own = Vec::new();
        self.run_stage(level, Stage::Matrix, 1, &given, &mut own);
        if let Some(b) = self.input(input) {
            own[b] = padded_row;
        }
        own
    }

    /// Scores rows `rows` of `cands` against a matrix state into `out` (one value per row:
    /// column 0 of the output buffer).
    pub(crate) fn score(
        &self,
        level: SimdLevel,
        parallel: bool,
        state: &[Vec<f32>],
        cands: &CandidateRows,
        out: &mut [f32],
    ) {
        let exports = self.exports();
        let n = cands.n;
        debug_assert_eq!(out.len(), n);
        let work = |own: &mut Vec<Vec<f32>>, chunk: usize, dst: &mut [f32]| {
            let start = chunk * CHUNK;
            let m = dst.len();
            let mut given: Vec<Option<View<'_>>> = vec![None; self.bufs.len()];
            for (b, buf) in self.bufs.iter().enumerate() {
                if buf.stage == Stage::Matrix && !state[b].is_empty() {
                    given[b] = Some(View {
                        data: &state[b],
                        stride: 0,
                    });
                }
            }
            for (b, at) in &exports {
                given[*b] = Some(View {
                    data: &cands.data[start * cands.stride + at..],
                    stride: cands.stride,
                });
            }
            self.run_stage(level, Stage::Score, m, &given, own);
            let res = &own[self.output];
            let os = self.bufs[self.output].stride;
            for (r, d) in dst.iter_mut().enumerate() {
                *d = res[r * os];
            }
        };
        for_each_chunk_mut(out, CHUNK, parallel, |chunk, dst| {
            with_scratch(|own| work(own, chunk, dst));
        });
    }
}

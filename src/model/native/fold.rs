//! Compilation of an IR [`Graph`] into a staged [`Program`] by algebraic folding.
//!
//! Every value is tracked as an affine [`Form`] over *leaves* (graph inputs and ReLU
//! outputs). A form becomes a real layer (is *materialized*) only where a ReLU or the graph
//! output needs it. Its stage is the join of its leaves' stages; a form that mixes
//! Matrix-stage and Candidate-stage leaves is split (see the module docs of
//! [`super`]): the bias and the Matrix-stage terms are computed once per matrix (`u`), the
//! Candidate-stage terms once per candidate and stored (`v`), and the Score stage starts from
//! `u + v`.

use super::form::{Form, LeafId, Mat64};
use super::ir::{Graph, Node};
use super::program::{BufId, Init, Instr, Packed, Program, Stage};
use super::tables::{FieldTables, TablesError};
use crate::error::{Error, Result};
use crate::schedule::Schema;

/// The outcome of a compilation.
pub(crate) enum Compiled {
    Program(Program),
    /// A pattern the engine does not fold: `(node, reason)`.
    Unsupported(String, String),
}

/// What the compiler needs to know about the graph's inputs.
pub(crate) struct Inputs<'a> {
    /// Stage of each input, by name.
    pub stages: &'a [(&'a str, Stage)],
    /// The input holding encoded schedules, and their schema (its first affine layer
    /// becomes [`FieldTables`]).
    pub schedule: Option<(&'a str, &'a Schema)>,
    /// Stage of constant-only values.
    pub const_stage: Stage,
    /// Stage the output is forced into (`Score` for a head, so that it is computed per
    /// pair).
    pub output_stage: Option<Stage>,
    /// File name for errors.
    pub origin: &'a str,
}

struct Compiler<'a> {
    inputs: &'a Inputs<'a>,
    prog: Program,
    /// Buffer of the schedule input, if any.
    schedule_buf: Option<BufId>,
}

/// Compiles `graph` (see the module docs).
pub(crate) fn compile(graph: &Graph, inputs: &Inputs<'_>) -> Result<Compiled> {
    let mut c = Compiler {
        inputs,
        prog: Program::default(),
        schedule_buf: None,
    };
    let mut forms: Vec<Option<Form>> = Vec::with_capacity(graph.len());
    for id in 0..graph.len() {
        let width = graph.width(id);
        let form = match graph.node(id) {
            Node::Input(name) => {
                let Some(&(_, stage)) = inputs.stages.iter().find(|(n, _)| n == name) else {
                    return Err(Error::bundle(
                        format!("{}: input '{name}'", inputs.origin),
                        "unexpected graph input",
                    ));
                };
                let buf = c.prog.add_buf(stage, width);
                c.prog.inputs.push((name.clone(), buf));
                if inputs.schedule.is_some_and(|(n, _)| n == name) {
                    c.schedule_buf = Some(buf);
                }
                Form::leaf(buf, width)
            }
            Node::Linear { x, w, b } => {
                let w = Mat64::from_f32(w.rows, w.cols, &w.data);
                form(&forms, *x).linear(&w, b.as_deref())
            }
            Node::Bias { x, b } => form(&forms, *x).clone().plus_bias(b),
            Node::Add(a, b) => form(&forms, *a).clone().plus(form(&forms, *b)),
            Node::Concat(xs) => {
                let parts: Vec<Form> = xs.iter().map(|x| form(&forms, *x).clone()).collect();
                Form::concat(&parts)
            }
            Node::Slice { x, start, end } => form(&forms, *x).slice(*start, *end),
            Node::Lookup { x, col, table } => {
                let leaf = form(&forms, *x).as_leaf();
                if leaf.is_none() || leaf != c.schedule_buf {
                    return Ok(Compiled::Unsupported(
                        graph.name(id).to_string(),
                        "embedding lookup on an input other than the encoded schedule".into(),
                    ));
                }
                let t = Mat64::from_f32(table.rows, table.cols, &table.data);
                Form::lookup(leaf.unwrap_or_default(), *col, t, graph.name(id))
            }
            Node::Relu(x) => match c.materialize(form(&forms, *x), true, None)? {
                Ok(buf) => Form::leaf(buf, width),
                Err(reason) => return Ok(Compiled::Unsupported(graph.name(id).into(), reason)),
            },
        };
        forms.push(Some(form));
    }
    let out = form(&forms, graph.output);
    match c.materialize(out, false, inputs.output_stage)? {
        Ok(buf) => {
            c.prog.output = buf;
            Ok(Compiled::Program(c.prog))
        }
        Err(reason) => Ok(Compiled::Unsupported(
            graph.name(graph.output).into(),
            reason,
        )),
    }
}

fn form(forms: &[Option<Form>], id: usize) -> &Form {
    forms[id]
        .as_ref()
        .unwrap_or_else(|| unreachable!("topological order"))
}

/// The part of a form over some leaves: `(bias, terms, lookups)`.
struct Part {
    bias: Option<Vec<f64>>,
    terms: Vec<(LeafId, Mat64)>,
    lookups: Vec<super::form::Lookup>,
}

impl Part {
    fn is_empty(&self) -> bool {
        self.bias.is_none() && self.terms.is_empty() && self.lookups.is_empty()
    }
}

impl Compiler<'_> {
    fn leaf_stage(&self, leaf: LeafId) -> Stage {
        self.prog.bufs[leaf].stage
    }

    /// Creates the layer(s) computing `f` (with ReLU if asked); returns its buffer, or why
    /// it cannot be folded.
    fn materialize(
        &mut self,
        f: &Form,
        relu: bool,
        force: Option<Stage>,
    ) -> Result<std::result::Result<BufId, String>> {
        let mut stage: Option<Stage> = None;
        for leaf in f
            .terms
            .iter()
            .map(|(l, _)| *l)
            .chain(f.lookups.iter().map(|l| l.leaf))
        {
            let s = self.leaf_stage(leaf);
            stage = Some(stage.map_or(s, |t| t.join(s)));
        }
        let mut stage = stage.unwrap_or(self.inputs.const_stage);
        if let Some(forced) = force {
            stage = stage.join(forced);
        }
        if !relu {
            if let Some(leaf) = f.as_leaf() {
                if self.leaf_stage(leaf) == stage {
                    return Ok(Ok(leaf));
                }
            }
        }
        if stage != Stage::Score {
            let part = Part {
                bias: Some(f.bias.clone()),
                terms: f.terms.clone(),
                lookups: f.lookups.clone(),
            };
            return self.emit(stage, f.width, part, relu);
        }
        // Split: u = bias + Matrix terms; v = Candidate terms; Score terms stay.
        let mut mat = Part {
            bias: Some(f.bias.clone()),
            terms: Vec::new(),
            lookups: Vec::new(),
        };
        let mut cand = Part {
            bias: None,
            terms: Vec::new(),
            lookups: f.lookups.clone(),
        };
        let mut score_terms = Vec::new();
        for (leaf, m) in &f.terms {
            match self.leaf_stage(*leaf) {
                Stage::Matrix => mat.terms.push((*leaf, m.clone())),
                Stage::Candidate => cand.terms.push((*leaf, m.clone())),
                Stage::Score => score_terms.push((*leaf, m.clone())),
            }
        }
        for lk in &cand.lookups {
            if self.leaf_stage(lk.leaf) != Stage::Candidate {
                return Ok(Err("embedding lookup outside the candidate stage".into()));
            }
        }
        let u = match self.emit(Stage::Matrix, f.width, mat, false)? {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        let v = if cand.is_empty() {
            None
        } else {
            match self.emit(Stage::Candidate, f.width, cand, false)? {
                Ok(b) => Some(b),
                Err(e) => return Ok(Err(e)),
            }
        };
        let out = self.prog.add_buf(Stage::Score, f.width);
        let terms = score_terms
            .iter()
            .map(|(leaf, m)| (*leaf, self.pack(m, *leaf)))
            .collect();
        self.prog.instrs.push(Instr {
            stage: Stage::Score,
            out,
            init: Init::Sum { u, v },
            terms,
            relu,
        });
        Ok(Ok(out))
    }

    /// One instruction computing `part` in `stage`.
    fn emit(
        &mut self,
        stage: Stage,
        width: usize,
        mut part: Part,
        relu: bool,
    ) -> Result<std::result::Result<BufId, String>> {
        let out = self.prog.add_buf(stage, width);
        let stride = self.prog.bufs[out].stride;
        let mut bias = vec![0.0f32; stride];
        if let Some(b) = &part.bias {
            for (dst, &v) in bias.iter_mut().zip(b) {
                *dst = v as f32;
            }
        }
        // The encoded-schedule term and lookups become field tables.
        let sched = self.schedule_buf;
        let sched_term = match sched {
            Some(s) => part
                .terms
                .iter()
                .position(|(l, _)| *l == s)
                .map(|i| part.terms.remove(i).1),
            None => None,
        };
        let init = if sched_term.is_some() || !part.lookups.is_empty() {
            let (Some(input), Some((_, schema))) = (sched, self.inputs.schedule) else {
                return Ok(Err("embedding lookup without a schedule schema".into()));
            };
            match FieldTables::build(
                schema,
                sched_term.as_ref(),
                &part.lookups,
                width,
                stride,
                self.inputs.origin,
            ) {
                Ok(tables) => Init::Fields {
                    bias,
                    input,
                    tables,
                },
                Err(TablesError::Invalid(e)) => return Err(e),
                Err(TablesError::Unsupported(reason)) => return Ok(Err(reason)),
            }
        } else {
            Init::Bias(bias)
        };
        let terms = part
            .terms
            .iter()
            .map(|(leaf, m)| (*leaf, self.pack(m, *leaf)))
            .collect();
        self.prog.instrs.push(Instr {
            stage,
            out,
            init,
            terms,
            relu,
        });
        Ok(Ok(out))
    }

    /// Packs `m` (`out × k`) k-major for the GEMM kernel.
    fn pack(&self, m: &Mat64, leaf: LeafId) -> Packed {
        let k = self.prog.bufs[leaf].width;
        let out_stride = crate::simd::gemm::padded(m.rows);
        let mut data = vec![0.0f32; k * out_stride];
        for o in 0..m.rows {
            for kk in 0..k {
                data[kk * out_stride + o] = m.at(o, kk) as f32;
            }
        }
        Packed {
            k,
            out_stride,
            data,
        }
    }
}

//! Compilation of an IR [`Graph`] into a staged [`Program`] by algebraic folding.
//!
//! Every value is tracked as an affine [`Form`] over *leaves* (graph inputs and ReLU
//! outputs). A form becomes a real layer (is *materialized*) only where a ReLU or the graph
//! output needs it. Its stage is the join of its leaves' stages; a form that mixes
//! Matrix-stage and Candidate-stage leaves is split (see the module docs of
//! [`super`]): the bias and the Matrix-stage terms are computed once per matrix (`u`), the
//! Candidate-stage terms once per candidate and stored (`v`), and the Score stage starts from
//! `u + v`.

use super::budget::{prod, Budget, CHUNK_ROWS};
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
    /// What importing and compiling may cost (shared by the compilations of one graph).
    pub budget: &'a Budget,
}

struct Compiler<'a> {
    inputs: &'a Inputs<'a>,
    prog: Program,
    /// Buffer of the schedule input, if any.
    schedule_buf: Option<BufId>,
}

/// Compiles `graph` (see the module docs), charging `inputs.budget` before each step.
pub(crate) fn compile(graph: &Graph, inputs: &Inputs<'_>) -> Result<Compiled> {
    let mut c = Compiler {
        inputs,
        prog: Program::default(),
        schedule_buf: None,
    };
    let mut forms: Vec<Option<Form>> = Vec::with_capacity(graph.len());
    for id in 0..graph.len() {
        let form = match c.step(graph, id, &forms)? {
            Ok(f) => f,
            Err(reason) => return Ok(Compiled::Unsupported(graph.name(id).into(), reason)),
        };
        forms.push(Some(form));
    }
    let out = form(&forms, graph.output);
    match c.materialize(out, false, inputs.output_stage, graph.name(graph.output))? {
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

    fn charge(&self, ops: u64, node: &str) -> Result<()> {
        self.inputs.budget.charge(ops, node)
    }

    /// A new row buffer, charged for its columns in a working chunk.
    fn add_buf(&mut self, stage: Stage, width: usize, node: &str) -> Result<BufId> {
        let stride = crate::simd::gemm::padded(width);
        self.charge(CHUNK_ROWS.saturating_mul(stride as u64), node)?;
        Ok(self.prog.add_buf(stage, width))
    }

    /// The form of node `id`, or why it cannot be folded.
    fn step(
        &mut self,
        graph: &Graph,
        id: usize,
        forms: &[Option<Form>],
    ) -> Result<std::result::Result<Form, String>> {
        let (width, node) = (graph.width(id), graph.name(id));
        let f = |x: &usize| form(forms, *x);
        Ok(Ok(match graph.node(id) {
            Node::Input(name) => {
                let inputs = self.inputs;
                let Some(&(_, stage)) = inputs.stages.iter().find(|(n, _)| n == name) else {
                    return Err(Error::bundle(
                        format!("{}: input '{name}'", inputs.origin),
                        "unexpected graph input",
                    ));
                };
                self.charge(Form::leaf_cost(width), node)?;
                let buf = self.add_buf(stage, width, node)?;
                self.prog.inputs.push((name.clone(), buf));
                if inputs.schedule.is_some_and(|(n, _)| n == name) {
                    self.schedule_buf = Some(buf);
                }
                Form::leaf(buf, width)
            }
            Node::Linear { x, w, b } => {
                self.charge(prod(w.rows, w.cols), node)?;
                let w = Mat64::from_f32(w.rows, w.cols, &w.data);
                self.charge(f(x).linear_cost(&w), node)?;
                f(x).linear(&w, b.as_deref())
            }
            Node::Bias { x, b } => {
                self.charge(f(x).size(), node)?;
                f(x).clone().plus_bias(b)
            }
            Node::Add(a, b) => {
                self.charge(f(a).size().saturating_add(f(b).size()), node)?;
                f(a).clone().plus(f(b))
            }
            Node::Concat(xs) => {
                let parts: Vec<&Form> = xs.iter().map(f).collect();
                self.charge(Form::concat_cost(&parts), node)?;
                Form::concat(&parts)
            }
            Node::Slice { x, start, end } => {
                self.charge(f(x).slice_cost(*start, *end), node)?;
                f(x).slice(*start, *end)
            }
            Node::Lookup { x, col, table } => {
                let leaf = f(x).as_leaf();
                if leaf.is_none() || leaf != self.schedule_buf {
                    return Ok(Err(
                        "embedding lookup on an input other than the encoded schedule".into(),
                    ));
                }
                self.charge(prod(table.rows, table.cols), node)?;
                let t = Mat64::from_f32(table.rows, table.cols, &table.data);
                Form::lookup(leaf.unwrap_or_default(), *col, t, node)
            }
            Node::Relu(x) => match self.materialize(f(x), true, None, node)? {
                Ok(buf) => {
                    self.charge(Form::leaf_cost(width), node)?;
                    Form::leaf(buf, width)
                }
                Err(reason) => return Ok(Err(reason)),
            },
        }))
    }

    /// Creates the layer(s) computing `f` (with ReLU if asked); returns its buffer, or why
    /// it cannot be folded.
    fn materialize(
        &mut self,
        f: &Form,
        relu: bool,
        force: Option<Stage>,
        node: &str,
    ) -> Result<std::result::Result<BufId, String>> {
        let stage = self.stage_of(f, force);
        if !relu {
            if let Some(leaf) = f.as_leaf() {
                if self.leaf_stage(leaf) == stage {
                    return Ok(Ok(leaf));
                }
            }
        }
        // The form's parts are copied into the layer(s) below.
        self.charge(f.size(), node)?;
        if stage != Stage::Score {
            let part = Part {
                bias: Some(f.bias.clone()),
                terms: f.terms.clone(),
                lookups: f.lookups.clone(),
            };
            return self.emit(stage, f.width, part, relu, node);
        }
        self.emit_split(f, relu, node)
    }

    /// The stage of `f`: the join of its leaves' stages (the constant stage without
    /// leaves), joined with `force` if given.
    fn stage_of(&self, f: &Form, force: Option<Stage>) -> Stage {
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
        let stage = stage.unwrap_or(self.inputs.const_stage);
        match force {
            Some(forced) => stage.join(forced),
            None => stage,
        }
    }

    /// Splits a Score-stage form by its leaves' stages: `u` = bias + Matrix terms, `v` =
    /// Candidate terms and the lookups, and the Score terms.
    fn split_by_stage(&self, f: &Form) -> (Part, Part, Vec<(LeafId, Mat64)>) {
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
        (mat, cand, score_terms)
    }

    /// Emits a Score-stage form split (see [`split_by_stage`](Self::split_by_stage)): `u`
    /// once per matrix, `v` once per candidate, then the Score layer from `u + v`.
    fn emit_split(
        &mut self,
        f: &Form,
        relu: bool,
        node: &str,
    ) -> Result<std::result::Result<BufId, String>> {
        let (mat, cand, score_terms) = self.split_by_stage(f);
        for lk in &cand.lookups {
            if self.leaf_stage(lk.leaf) != Stage::Candidate {
                return Ok(Err("embedding lookup outside the candidate stage".into()));
            }
        }
        let u = match self.emit(Stage::Matrix, f.width, mat, false, node)? {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        let v = if cand.is_empty() {
            None
        } else {
            match self.emit(Stage::Candidate, f.width, cand, false, node)? {
                Ok(b) => Some(b),
                Err(e) => return Ok(Err(e)),
            }
        };
        let out = self.add_buf(Stage::Score, f.width, node)?;
        self.charge(self.pack_cost(&score_terms), node)?;
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
        node: &str,
    ) -> Result<std::result::Result<BufId, String>> {
        let out = self.add_buf(stage, width, node)?;
        let stride = self.prog.bufs[out].stride;
        self.charge(
            (stride as u64).saturating_add(self.pack_cost(&part.terms)),
            node,
        )?;
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
            self.charge(FieldTables::cost(schema, stride), node)?;
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

    /// Cost of packing `terms` (see [`pack`](Self::pack)).
    fn pack_cost(&self, terms: &[(LeafId, Mat64)]) -> u64 {
        terms.iter().fold(0u64, |cost, (leaf, m)| {
            let k = self.prog.bufs[*leaf].width;
            cost.saturating_add(prod(k, crate::simd::gemm::padded(m.rows)))
        })
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

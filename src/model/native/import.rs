//! ONNX graph → the engine's dense IR ([`Graph`]).
//!
//! Recognises the operators the exporter writes (`Gemm`, `Relu`, `Concat`, `Gather`, `Cast`,
//! `Slice`) and the usual spellings of the same layers in other exporters (`MatMul` + `Add`,
//! `Flatten`, `Identity`, `Constant`). Every runtime value is a batch of rows `[N, width]`;
//! weights are constants. Anything else is [`Import::Unsupported`], which sends the graph to
//! an `ort` backend; a recognised graph with inconsistent weights is an error naming the node.

use std::collections::HashMap;
use std::rc::Rc;

use super::budget::{prod, Budget};
use super::ir::{Graph, Mat, Node, ValueId};
use crate::bundle::onnx_proto::{data_type, AttributeProto, NodeProto, TensorProto};
use crate::bundle::{tensor_to_f32, BundleFile};
use crate::error::{Error, Result};

/// The outcome of importing one graph.
#[derive(Debug)]
pub(crate) enum Import {
    /// The graph as IR.
    Graph(Graph),
    /// The graph uses something the engine does not run: `(node, reason)`.
    Unsupported(String, String),
}

/// A constant tensor, shared by every use of its name.
#[derive(Debug)]
struct Tensor<T> {
    dims: Vec<usize>,
    data: Vec<T>,
}

/// A named graph value during import (cheap to clone: constants are shared).
#[derive(Debug, Clone)]
enum Sym {
    /// A runtime batch `[N, width]`.
    Value(ValueId),
    /// A float constant (FLOAT, FLOAT16 or DOUBLE initializer, converted to f32).
    Float(Rc<Tensor<f32>>),
    /// An INT64 constant.
    Int(Rc<Tensor<i64>>),
    /// Column `col` of runtime value `x`, shape `[N]`, as float or cast to INT64.
    Column { x: ValueId, col: usize, int: bool },
}

struct Importer<'a> {
    origin: &'a str,
    graph: Graph,
    syms: HashMap<String, Sym>,
    budget: &'a Budget,
}

/// Imports `file`'s graph, charging `budget` for every number it allocates (constants,
/// weights, and each value's row). `inputs` gives the width of every graph input, in any
/// order (widths come from the model, not only from the file's declared shapes, which may be
/// symbolic).
pub(crate) fn import(
    file: &BundleFile,
    inputs: &[(&str, usize)],
    budget: &Budget,
) -> Result<Import> {
    let mut imp = Importer {
        origin: &file.origin,
        graph: Graph::default(),
        syms: HashMap::new(),
        budget,
    };
    imp.initializers(file)?;
    imp.inputs(file, inputs)?;
    let g = file.graph();
    for (i, node) in g.node.iter().enumerate() {
        let label = if node.name.is_empty() {
            format!("#{i} ({})", node.op_type)
        } else {
            node.name.clone()
        };
        if !node.domain.is_empty() && node.domain != "ai.onnx" {
            return Ok(Import::Unsupported(
                label,
                format!("operator domain '{}'", node.domain),
            ));
        }
        match imp.node(node, &label)? {
            Step::Done => {}
            Step::Unsupported(reason) => return Ok(Import::Unsupported(label, reason)),
        }
    }
    imp.output(file)
}

enum Step {
    Done,
    Unsupported(String),
}

fn unsupported(reason: impl Into<String>) -> Result<Step> {
    Ok(Step::Unsupported(reason.into()))
}

fn attr<'n>(node: &'n NodeProto, name: &str) -> Option<&'n AttributeProto> {
    node.attribute.iter().find(|a| a.name == name)
}

fn attr_int(node: &NodeProto, name: &str, default: i64) -> i64 {
    attr(node, name).map_or(default, |a| a.i)
}

fn attr_float(node: &NodeProto, name: &str, default: f32) -> f32 {
    attr(node, name).map_or(default, |a| a.f)
}

impl Importer<'_> {
    /// Binds every initializer: float tensors as weights, the rest as constants.
    fn initializers(&mut self, file: &BundleFile) -> Result<()> {
        for (i, t) in file.graph().initializer.iter().enumerate() {
            let sym = match file.float_initializer(i) {
                Some(spec) => {
                    self.budget.charge(spec.data.len() as u64, &t.name)?;
                    Sym::Float(Rc::new(Tensor {
                        dims: spec.dims.clone(),
                        data: spec.data.clone(),
                    }))
                }
                None => self.constant(t)?,
            };
            self.syms.insert(t.name.clone(), sym);
        }
        Ok(())
    }

    /// Binds every graph input to a row of its width, refusing a declared width that differs.
    fn inputs(&mut self, file: &BundleFile, inputs: &[(&str, usize)]) -> Result<()> {
        for (name, width) in inputs {
            if let Some(declared) = file.last_dim(name) {
                if declared != *width {
                    return Err(Error::bundle(
                        format!("{}: input '{name}'", file.origin),
                        format!("declares width {declared}, expected {width}"),
                    ));
                }
            }
            self.budget.charge(*width as u64, name)?;
            let id = self
                .graph
                .push(Node::Input((*name).to_string()), *width, name);
            self.syms.insert((*name).to_string(), Sym::Value(id));
        }
        Ok(())
    }

    /// The imported graph with its one output, once every node is imported.
    fn output(mut self, file: &BundleFile) -> Result<Import> {
        let g = file.graph();
        let [out] = g.output.as_slice() else {
            return Ok(Import::Unsupported(
                "graph".into(),
                format!("{} outputs (expected one)", g.output.len()),
            ));
        };
        match self.syms.get(&out.name) {
            Some(Sym::Value(id)) => {
                self.graph.output = *id;
                Ok(Import::Graph(self.graph))
            }
            Some(_) => Ok(Import::Unsupported(
                out.name.clone(),
                "the output is not a batch of rows".into(),
            )),
            None => Err(Error::bundle(
                format!("{}: output '{}'", file.origin, out.name),
                "no node produces the graph output",
            )),
        }
    }

    fn err(&self, node: &str, reason: impl Into<String>) -> Error {
        Error::bundle(format!("{}: node '{node}'", self.origin), reason)
    }

    fn constant(&self, t: &TensorProto) -> Result<Sym> {
        match t.data_type {
            data_type::FLOAT | data_type::FLOAT16 | data_type::DOUBLE => {
                let spec = tensor_to_f32(t, self.origin)?;
                self.budget.charge(spec.data.len() as u64, &t.name)?;
                Ok(Sym::Float(Rc::new(Tensor {
                    dims: spec.dims,
                    data: spec.data,
                })))
            }
            data_type::INT64 => {
                let key = || format!("{}: tensor '{}'", self.origin, t.name);
                let dims = t
                    .dims
                    .iter()
                    .map(|&d| usize::try_from(d).map_err(|_| Error::bundle(key(), "negative dim")))
                    .collect::<Result<Vec<_>>>()?;
                let expected = dims
                    .iter()
                    .try_fold(1usize, |n, &d| n.checked_mul(d))
                    .ok_or_else(|| Error::bundle(key(), format!("dims {dims:?} overflow")))?;
                let found = if t.raw_data.is_empty() {
                    t.int64_data.len()
                } else {
                    t.raw_data.len() / 8
                };
                self.budget.charge(found as u64, &t.name)?;
                let data: Vec<i64> = if t.raw_data.is_empty() {
                    t.int64_data.clone()
                } else {
                    if !t.raw_data.len().is_multiple_of(8) {
                        return Err(Error::bundle(
                            key(),
                            "raw INT64 data is not a multiple of 8",
                        ));
                    }
                    t.raw_data
                        .chunks_exact(8)
                        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                        .collect()
                };
                if data.len() != expected {
                    return Err(Error::bundle(
                        key(),
                        format!("dims {dims:?} need {expected} values, found {}", data.len()),
                    ));
                }
                Ok(Sym::Int(Rc::new(Tensor { dims, data })))
            }
            other => Err(Error::bundle(
                format!("{}: tensor '{}'", self.origin, t.name),
                format!("unsupported data type {other}"),
            )),
        }
    }

    fn sym(&self, node: &NodeProto, i: usize, label: &str) -> Result<Sym> {
        let name = node
            .input
            .get(i)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| self.err(label, format!("missing input #{i}")))?;
        self.syms
            .get(name)
            .cloned()
            .ok_or_else(|| self.err(label, format!("input '{name}' is not defined before use")))
    }

    fn set(&mut self, node: &NodeProto, sym: Sym) {
        if let Some(out) = node.output.first() {
            self.syms.insert(out.clone(), sym);
        }
    }

    /// Adds a node whose output rows are `width` wide, charging the budget for its row and
    /// `weights` numbers it holds. A value with no columns is not run natively.
    fn push(
        &mut self,
        node: &NodeProto,
        n: Node,
        width: usize,
        weights: u64,
        label: &str,
    ) -> Result<Step> {
        self.budget
            .charge((width as u64).saturating_add(weights), label)?;
        if width == 0 {
            return unsupported("a value with no columns");
        }
        let id = self.graph.push(n, width, label);
        self.set(node, Sym::Value(id));
        Ok(Step::Done)
    }

    fn node(&mut self, node: &NodeProto, label: &str) -> Result<Step> {
        if node.output.len() != 1 {
            return unsupported(format!("{} outputs", node.output.len()));
        }
        match node.op_type.as_str() {
            "Gemm" => self.gemm(node, label),
            "MatMul" => self.matmul(node, label),
            "Add" => self.add(node, label),
            "Relu" => {
                let Sym::Value(x) = self.sym(node, 0, label)? else {
                    return unsupported("Relu of a constant");
                };
                let w = self.graph.width(x);
                self.push(node, Node::Relu(x), w, 0, label)
            }
            "Concat" => self.concat(node, label),
            "Gather" => self.gather(node, label),
            "Cast" => self.cast(node, label),
            "Slice" => self.slice(node, label),
            "Flatten" | "Identity" => {
                let sym = self.sym(node, 0, label)?;
                if node.op_type == "Flatten" && attr_int(node, "axis", 1) != 1 {
                    return unsupported("Flatten with axis other than 1");
                }
                if !matches!(sym, Sym::Value(_)) && node.op_type == "Flatten" {
                    return unsupported("Flatten of a constant");
                }
                self.set(node, sym);
                Ok(Step::Done)
            }
            "Constant" => {
                let Some(t) = attr(node, "value").and_then(|a| a.t.as_ref()) else {
                    return unsupported("Constant without a tensor 'value'");
                };
                let sym = self.constant(t)?;
                self.set(node, sym);
                Ok(Step::Done)
            }
            other => unsupported(format!("operator '{other}'")),
        }
    }

    /// A 2-D float constant.
    fn matrix(&self, sym: &Sym) -> Option<Rc<Tensor<f32>>> {
        match sym {
            Sym::Float(t) if t.dims.len() == 2 => Some(Rc::clone(t)),
            _ => None,
        }
    }

    /// A bias constant broadcast to `width` (shape `[width]`, `[1, width]`, `[1]` or scalar).
    fn bias(&self, sym: &Sym, width: usize, label: &str) -> Result<Option<Vec<f32>>> {
        let Sym::Float(t) = sym else {
            return Ok(None);
        };
        let (dims, data) = (&t.dims, &t.data);
        let n = data.len();
        if dims.len() > 2 || (dims.len() == 2 && dims[0] != 1) {
            return Ok(None);
        }
        self.budget.charge(width as u64, label)?;
        if n == width {
            Ok(Some(data.clone()))
        } else if n == 1 {
            Ok(Some(vec![data[0]; width]))
        } else {
            Err(self.err(
                label,
                format!("bias has {n} values but the layer has {width} outputs"),
            ))
        }
    }

    fn gemm(&mut self, node: &NodeProto, label: &str) -> Result<Step> {
        let Sym::Value(x) = self.sym(node, 0, label)? else {
            return unsupported("Gemm whose A is not a batch of rows");
        };
        if attr_int(node, "transA", 0) != 0 {
            return unsupported("Gemm with transA");
        }
        let Some(t) = self.matrix(&self.sym(node, 1, label)?) else {
            return unsupported("Gemm whose B is not a 2-D constant");
        };
        let (r, c) = (t.dims[0], t.dims[1]);
        let trans_b = attr_int(node, "transB", 0) != 0;
        let (outs, ins) = if trans_b { (r, c) } else { (c, r) };
        let width = self.graph.width(x);
        if ins != width {
            return Err(self.err(
                label,
                format!("weight takes {ins} inputs but its input has width {width}"),
            ));
        }
        let alpha = attr_float(node, "alpha", 1.0);
        // The weight's copy, and its transpose when stored `[in, out]`.
        self.budget.charge(prod(r, c).saturating_mul(2), label)?;
        let mut w = if trans_b {
            Mat::new(outs, ins, t.data.clone())
        } else {
            Mat::new(ins, outs, t.data.clone()).transposed()
        };
        if alpha != 1.0 {
            w.data.iter_mut().for_each(|v| *v *= alpha);
        }
        let b = match node.input.get(2).filter(|n| !n.is_empty()) {
            None => None,
            Some(_) => {
                let sym = self.sym(node, 2, label)?;
                let Some(mut b) = self.bias(&sym, outs, label)? else {
                    return unsupported("Gemm whose C is not a constant row");
                };
                let beta = attr_float(node, "beta", 1.0);
                if beta != 1.0 {
                    b.iter_mut().for_each(|v| *v *= beta);
                }
                Some(b)
            }
        };
        self.push(node, Node::Linear { x, w, b }, outs, 0, label)
    }

    fn matmul(&mut self, node: &NodeProto, label: &str) -> Result<Step> {
        let Sym::Value(x) = self.sym(node, 0, label)? else {
            return unsupported("MatMul whose A is not a batch of rows");
        };
        let Some(t) = self.matrix(&self.sym(node, 1, label)?) else {
            return unsupported("MatMul whose B is not a 2-D constant");
        };
        let (ins, outs) = (t.dims[0], t.dims[1]);
        let width = self.graph.width(x);
        if ins != width {
            return Err(self.err(
                label,
                format!("weight takes {ins} inputs but its input has width {width}"),
            ));
        }
        self.budget
            .charge(prod(ins, outs).saturating_mul(2), label)?;
        let w = Mat::new(ins, outs, t.data.clone()).transposed();
        self.push(node, Node::Linear { x, w, b: None }, outs, 0, label)
    }

    fn add(&mut self, node: &NodeProto, label: &str) -> Result<Step> {
        let a = self.sym(node, 0, label)?;
        let b = self.sym(node, 1, label)?;
        match (a, b) {
            (Sym::Value(a), Sym::Value(b)) => {
                let (wa, wb) = (self.graph.width(a), self.graph.width(b));
                if wa != wb {
                    return unsupported(format!("Add of widths {wa} and {wb}"));
                }
                self.push(node, Node::Add(a, b), wa, 0, label)
            }
            (Sym::Value(x), c) | (c, Sym::Value(x)) => {
                let w = self.graph.width(x);
                let Some(bias) = self.bias(&c, w, label)? else {
                    return unsupported("Add of a constant that is not a row");
                };
                self.push(node, Node::Bias { x, b: bias }, w, 0, label)
            }
            _ => unsupported("Add of two constants"),
        }
    }

    fn concat(&mut self, node: &NodeProto, label: &str) -> Result<Step> {
        let axis = attr_int(node, "axis", 0);
        if axis != 1 && axis != -1 {
            return unsupported(format!("Concat on axis {axis}"));
        }
        let mut xs = Vec::with_capacity(node.input.len());
        for i in 0..node.input.len() {
            let Sym::Value(x) = self.sym(node, i, label)? else {
                return unsupported("Concat of a constant");
            };
            xs.push(x);
        }
        // Saturating: a sum past the budget fails in `push` before it is used.
        let width = xs
            .iter()
            .fold(0usize, |w, &x| w.saturating_add(self.graph.width(x)));
        let n = xs.len() as u64;
        self.push(node, Node::Concat(xs), width, n, label)
    }

    fn gather(&mut self, node: &NodeProto, label: &str) -> Result<Step> {
        let axis = attr_int(node, "axis", 0);
        let data = self.sym(node, 0, label)?;
        let indices = self.sym(node, 1, label)?;
        match (data, indices) {
            // schedule[:, col]
            (Sym::Value(x), Sym::Int(t)) if t.dims.is_empty() && (axis == 1 || axis == -1) => {
                let data = &t.data;
                let width = self.graph.width(x) as i64;
                let col = if data[0] < 0 {
                    data[0] + width
                } else {
                    data[0]
                };
                if !(0..width).contains(&col) {
                    return Err(self.err(
                        label,
                        format!("column {} is outside an input of width {width}", data[0]),
                    ));
                }
                self.set(
                    node,
                    Sym::Column {
                        x,
                        col: col as usize,
                        int: false,
                    },
                );
                Ok(Step::Done)
            }
            // table[index]
            (Sym::Float(t), Sym::Column { x, col, int: true })
                if axis == 0 && t.dims.len() == 2 =>
            {
                if !matches!(self.graph.node(x), Node::Input(_)) {
                    return unsupported("embedding lookup of a computed column");
                }
                let (rows, width) = (t.dims[0], t.dims[1]);
                let weights = prod(rows, width);
                self.budget.charge(weights, label)?;
                let table = Mat::new(rows, width, t.data.clone());
                self.push(node, Node::Lookup { x, col, table }, width, 0, label)
            }
            _ => {
                unsupported("Gather other than a scalar column of the input or an embedding lookup")
            }
        }
    }

    fn cast(&mut self, node: &NodeProto, label: &str) -> Result<Step> {
        const TO_FLOAT: i64 = data_type::FLOAT as i64;
        const TO_INT64: i64 = data_type::INT64 as i64;
        let to = attr_int(node, "to", 0);
        let sym = self.sym(node, 0, label)?;
        let out = match (sym, to) {
            (s @ (Sym::Float(_) | Sym::Value(_)), TO_FLOAT) => s,
            (Sym::Column { x, col, .. }, TO_INT64) => Sym::Column { x, col, int: true },
            (s @ Sym::Int(_), TO_INT64) => s,
            (_, to) => return unsupported(format!("Cast to data type {to}")),
        };
        self.set(node, out);
        Ok(Step::Done)
    }

    fn slice(&mut self, node: &NodeProto, label: &str) -> Result<Step> {
        let Sym::Value(x) = self.sym(node, 0, label)? else {
            return unsupported("Slice of a constant");
        };
        let scalar = |i: usize| -> Result<Option<i64>> {
            if node.input.get(i).is_none_or(|n| n.is_empty()) {
                return Ok(None);
            }
            match self.sym(node, i, label)? {
                Sym::Int(t) if t.data.len() == 1 => Ok(Some(t.data[0])),
                _ => Ok(Some(i64::MIN)),
            }
        };
        let (Some(start), Some(end)) = (scalar(1)?, scalar(2)?) else {
            return unsupported("Slice without starts and ends");
        };
        let axis = scalar(3)?;
        let step = scalar(4)?;
        if start == i64::MIN || end == i64::MIN || axis == Some(i64::MIN) {
            return unsupported("Slice with more than one axis");
        }
        if !matches!(axis, Some(1) | Some(-1)) {
            return unsupported("Slice on an axis other than the columns");
        }
        if !matches!(step, None | Some(1)) {
            return unsupported("Slice with a step other than 1");
        }
        let width = self.graph.width(x) as i64;
        let clamp = |v: i64| {
            if v < 0 {
                (v + width).max(0)
            } else {
                v.min(width)
            }
        };
        let (s, e) = (clamp(start), clamp(end));
        let (s, e) = (s as usize, (e.max(s)) as usize);
        self.push(
            node,
            Node::Slice {
                x,
                start: s,
                end: e,
            },
            e - s,
            0,
            label,
        )
    }
}

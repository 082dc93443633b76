//! First stage of building a graph: a [`GraphSpec`] checked and typed into an [`Ir`], a
//! node list over numbered value slots.

use std::collections::{BTreeSet, HashMap};

use super::ops::{registry, BuildCtx, Op, ValueType, SPARSE_DOMAIN};
use super::spec::{GraphSpec, NodeSpec};
use crate::error::{Error, Result};

/// One node: its op, the slots it reads (in order) and the slot it writes.
#[derive(Debug)]
pub(crate) struct IrNode {
    /// Node name for errors and traces.
    pub name: String,
    /// The typed op.
    pub op: Op,
    /// Slots read.
    pub inputs: Vec<usize>,
    /// Slot written.
    pub output: usize,
}

/// A validated graph: nodes in topological order over value slots.
#[derive(Debug)]
pub(crate) struct Ir {
    /// Nodes in topological order.
    pub nodes: Vec<IrNode>,
    /// Type of every slot.
    pub types: Vec<ValueType>,
    /// Slot of the graph input (the pattern).
    pub input_slot: usize,
    /// Slot of the graph output (dense).
    pub output_slot: usize,
}

/// Validates a graph description (see `FeaturizerGraph::from_spec` for the checks).
pub(crate) fn validate(spec: &GraphSpec) -> Result<Ir> {
    check_ends(spec)?;
    let mut ir = Typing::new(&spec.inputs[0]);
    for (i, node) in spec.nodes.iter().enumerate() {
        ir.add_node(spec, i, node)?;
    }
    let output_slot = ir.output_slot(&spec.outputs[0])?;
    ir.check_all_used(spec, output_slot)?;
    Ok(Ir {
        nodes: ir.nodes,
        types: ir.slot_types,
        input_slot: 0,
        output_slot,
    })
}

/// An error about the graph as a whole.
fn graph_err(reason: String) -> Error {
    Error::featurize("graph", reason)
}

/// Checks the graph's ends: one input (the pattern, not an initializer) and one output.
fn check_ends(spec: &GraphSpec) -> Result<()> {
    if spec.inputs.len() != 1 {
        return Err(graph_err(format!(
            "expected exactly 1 graph input (the pattern), found {}",
            spec.inputs.len()
        )));
    }
    if spec.outputs.len() != 1 {
        return Err(graph_err(format!(
            "expected exactly 1 graph output, found {}",
            spec.outputs.len()
        )));
    }
    let input_name = &spec.inputs[0];
    if spec.initializers.contains_key(input_name) {
        return Err(graph_err(format!(
            "graph input '{input_name}' is also an initializer"
        )));
    }
    Ok(())
}

/// The graph typed so far: its values by name, its slots and the nodes built.
struct Typing {
    types: HashMap<String, ValueType>,
    slots: HashMap<String, usize>,
    slot_types: Vec<ValueType>,
    /// Per slot, for "unused" errors.
    producer: Vec<String>,
    used_inits: BTreeSet<String>,
    nodes: Vec<IrNode>,
}

impl Typing {
    /// Slot 0, the graph input `input_name` (the pattern), and nothing else.
    fn new(input_name: &str) -> Self {
        let input_type = ValueType::Sparse {
            channels: 1,
            stride: 1,
        };
        Self {
            types: HashMap::from([(input_name.to_string(), input_type)]),
            slots: HashMap::from([(input_name.to_string(), 0)]),
            slot_types: vec![input_type],
            producer: vec![format!("graph input '{input_name}'")],
            used_inits: BTreeSet::new(),
            nodes: Vec::new(),
        }
    }

    /// Builds node `i` of the graph, `node`, over the values typed so far, and gives its
    /// output the next slot.
    fn add_node(&mut self, spec: &GraphSpec, i: usize, node: &NodeSpec) -> Result<()> {
        let name = if node.name.is_empty() {
            format!("#{i} {}", node.op_type)
        } else {
            node.name.clone()
        };
        let Some(builder) = registry().get(&(node.domain.as_str(), node.op_type.as_str())) else {
            return Err(Error::featurize(name, unknown_op(node)));
        };
        let ctx = BuildCtx {
            node,
            name: &name,
            initializers: &spec.initializers,
            types: &self.types,
        };
        let built = builder(&ctx)?;
        if node.outputs.len() != 1 || node.outputs[0].is_empty() {
            return Err(Error::featurize(
                name,
                format!("expected exactly 1 named output, found {:?}", node.outputs),
            ));
        }
        let out = &node.outputs[0];
        if self.types.contains_key(out) || spec.initializers.contains_key(out) {
            return Err(Error::featurize(
                name,
                format!("output '{out}' is already defined"),
            ));
        }
        self.used_inits.extend(built.initializers);
        let inputs: Vec<usize> = built.value_inputs.iter().map(|n| self.slots[n]).collect();
        let slot = self.producer.len();
        self.producer.push(name.clone());
        self.slot_types.push(built.output);
        self.types.insert(out.clone(), built.output);
        self.slots.insert(out.clone(), slot);
        self.nodes.push(IrNode {
            name,
            op: built.op,
            inputs,
            output: slot,
        });
        Ok(())
    }

    /// The slot of the graph output `out_name`, which must be a dense value of a node.
    fn output_slot(&self, out_name: &str) -> Result<usize> {
        match (self.slots.get(out_name), self.types.get(out_name)) {
            (Some(&s), Some(ValueType::Dense { .. })) => Ok(s),
            (Some(_), Some(ValueType::Sparse { .. })) => Err(graph_err(format!(
                "graph output '{out_name}' is sparse, expected a dense [1, F] value"
            ))),
            _ => Err(graph_err(format!(
                "graph output '{out_name}' is not produced by any node"
            ))),
        }
    }

    /// Checks that every initializer is used by a node, and every value but the graph
    /// output (`output_slot`) is read by one.
    fn check_all_used(&self, spec: &GraphSpec, output_slot: usize) -> Result<()> {
        if let Some(unused) = spec
            .initializers
            .keys()
            .find(|k| !self.used_inits.contains(*k))
        {
            return Err(Error::featurize(
                unused.clone(),
                "initializer is not used by any node",
            ));
        }
        let mut read = vec![false; self.producer.len()];
        for n in &self.nodes {
            for &s in &n.inputs {
                read[s] = true;
            }
        }
        for (slot, r) in read.iter().enumerate() {
            if !r && slot != output_slot {
                return Err(Error::featurize(
                    self.producer[slot].clone(),
                    "output is not used by any node nor the graph output",
                ));
            }
        }
        Ok(())
    }
}

/// Why `node`'s op is not in the registry: an unknown op type of a known domain, or an
/// unknown domain.
fn unknown_op(node: &NodeSpec) -> String {
    let known_domain = node.domain.is_empty() || node.domain == SPARSE_DOMAIN;
    if known_domain {
        format!(
            "unknown op type '{}' in domain '{}'",
            node.op_type, node.domain
        )
    } else {
        format!(
            "unknown domain '{}' (op type '{}')",
            node.domain, node.op_type
        )
    }
}

//! First stage of building a graph: a [`GraphSpec`] checked and typed into an [`Ir`], a
//! node list over numbered value slots.

use std::collections::{BTreeSet, HashMap};

use super::ops::{registry, BuildCtx, Op, ValueType, SPARSE_DOMAIN};
use super::spec::GraphSpec;
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
    let graph_err = |reason: String| Error::featurize("graph", reason);
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

    let mut types: HashMap<String, ValueType> = HashMap::new();
    let mut slots: HashMap<String, usize> = HashMap::new();
    let mut slot_types: Vec<ValueType> = Vec::new();
    let mut producer: Vec<String> = Vec::new(); // per slot, for "unused" errors
    let input_type = ValueType::Sparse {
        channels: 1,
        stride: 1,
    };
    types.insert(input_name.clone(), input_type);
    slots.insert(input_name.clone(), 0);
    slot_types.push(input_type);
    producer.push(format!("graph input '{input_name}'"));

    let mut used_inits: BTreeSet<String> = BTreeSet::new();
    let mut nodes: Vec<IrNode> = Vec::new();
    for (i, node) in spec.nodes.iter().enumerate() {
        let name = if node.name.is_empty() {
            format!("#{i} {}", node.op_type)
        } else {
            node.name.clone()
        };
        let Some(builder) = registry().get(&(node.domain.as_str(), node.op_type.as_str())) else {
            let known_domain = node.domain.is_empty() || node.domain == SPARSE_DOMAIN;
            let reason = if known_domain {
                format!(
                    "unknown op type '{}' in domain '{}'",
                    node.op_type, node.domain
                )
            } else {
                format!(
                    "unknown domain '{}' (op type '{}')",
                    node.domain, node.op_type
                )
            };
            return Err(Error::featurize(name, reason));
        };
        let ctx = BuildCtx {
            node,
            name: &name,
            initializers: &spec.initializers,
            types: &types,
        };
        let built = builder(&ctx)?;
        if node.outputs.len() != 1 || node.outputs[0].is_empty() {
            return Err(Error::featurize(
                name,
                format!("expected exactly 1 named output, found {:?}", node.outputs),
            ));
        }
        let out = &node.outputs[0];
        if types.contains_key(out) || spec.initializers.contains_key(out) {
            return Err(Error::featurize(
                name,
                format!("output '{out}' is already defined"),
            ));
        }
        used_inits.extend(built.initializers);
        let inputs: Vec<usize> = built.value_inputs.iter().map(|n| slots[n]).collect();
        let slot = producer.len();
        producer.push(name.clone());
        slot_types.push(built.output);
        types.insert(out.clone(), built.output);
        slots.insert(out.clone(), slot);
        nodes.push(IrNode {
            name,
            op: built.op,
            inputs,
            output: slot,
        });
    }

    let out_name = &spec.outputs[0];
    let output_slot = match (slots.get(out_name), types.get(out_name)) {
        (Some(&s), Some(ValueType::Dense { .. })) => s,
        (Some(_), Some(ValueType::Sparse { .. })) => {
            return Err(graph_err(format!(
                "graph output '{out_name}' is sparse, expected a dense [1, F] value"
            )))
        }
        _ => {
            return Err(graph_err(format!(
                "graph output '{out_name}' is not produced by any node"
            )))
        }
    };
    if let Some(unused) = spec.initializers.keys().find(|k| !used_inits.contains(*k)) {
        return Err(Error::featurize(
            unused.clone(),
            "initializer is not used by any node",
        ));
    }
    let mut read = vec![false; producer.len()];
    for n in &nodes {
        for &s in &n.inputs {
            read[s] = true;
        }
    }
    for (slot, r) in read.iter().enumerate() {
        if !r && slot != output_slot {
            return Err(Error::featurize(
                producer[slot].clone(),
                "output is not used by any node nor the graph output",
            ));
        }
    }
    Ok(Ir {
        nodes,
        types: slot_types,
        input_slot: 0,
        output_slot,
    })
}

//! Plain-data description of a featurizer graph, as decoded from a bundle's featurizer file.
//!
//! `bundle::decode` fills these from ONNX protobuf; the featurizer never sees ONNX types.

use std::collections::BTreeMap;

/// An attribute value of a featurizer node.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// A 64-bit integer.
    Int(i64),
    /// A list of integers.
    Ints(Vec<i64>),
    /// A float.
    Float(f32),
    /// A string.
    String(String),
}

/// One node of the featurizer graph.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    /// Node name (used in error messages).
    pub name: String,
    /// Operator type, e.g. `SparseConv`.
    pub op_type: String,
    /// Operator domain, e.g. `ai.dashrank.sparse` (empty for the default ONNX domain).
    pub domain: String,
    /// Input value names (initializer names for weights).
    pub inputs: Vec<String>,
    /// Output value names.
    pub outputs: Vec<String>,
    /// Attributes by name.
    pub attributes: BTreeMap<String, AttrValue>,
}

/// A dense f32 tensor (weights are converted to f32 on load).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    /// Tensor name.
    pub name: String,
    /// Dimensions, outermost first.
    pub dims: Vec<usize>,
    /// Row-major data, `dims.iter().product()` values.
    pub data: Vec<f32>,
}

/// The whole featurizer graph.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GraphSpec {
    /// Graph input names (v1: exactly one, `pattern`).
    pub inputs: Vec<String>,
    /// Graph output names (v1: exactly one, `conv_features`).
    pub outputs: Vec<String>,
    /// Nodes in topological order.
    pub nodes: Vec<NodeSpec>,
    /// Initializers by name.
    pub initializers: BTreeMap<String, TensorSpec>,
}

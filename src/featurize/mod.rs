//! Native sparse-convolution featurizer.
//!
//! Owns the path from a validated [`CsrPattern`](crate::pattern::CsrPattern) to the pooled
//! feature vector of a cost model (`conv_features`, `[1, F]` in `docs/bundle-format.md`). A
//! [`FeaturizerGraph`] is built once from a plain-data [`spec::GraphSpec`] (the bundle loader
//! decodes it from ONNX; the featurizer never sees ONNX types) and then run on any number of
//! patterns. Node types live in `ops/` behind a registry keyed by `(domain, op_type)`;
//! `coords` holds row-bucketed sorted coordinate sets and their strided images; `rulebook`
//! finds each output point's neighbours in fixed kernel order. Sparse values whose points
//! share few distinct feature rows (the pattern itself, and the first layers on real
//! matrices) are kept *memoized* — one row per distinct receptive field — and convolved
//! once per row (`ops/memo.rs`); the others run a tiled gather–GEMM (`ops/kernel.rs`).
//!
//! # Example
//!
//! ```
//! use std::collections::BTreeMap;
//! use dashrank::featurize::spec::{AttrValue, GraphSpec, NodeSpec, TensorSpec};
//! use dashrank::featurize::{FeaturizeOptions, FeaturizerGraph};
//! use dashrank::pattern::CsrPattern;
//!
//! let node = |name: &str, op: &str, domain: &str, inputs: &[&str], attrs: &[(&str, AttrValue)]| NodeSpec {
//!     name: name.into(),
//!     op_type: op.into(),
//!     domain: domain.into(),
//!     inputs: inputs.iter().map(|s| s.to_string()).collect(),
//!     outputs: vec![format!("{name}_out")],
//!     attributes: attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
//! };
//! let spec = GraphSpec {
//!     inputs: vec!["pattern".into()],
//!     outputs: vec!["pool_out".into()],
//!     nodes: vec![
//!         node("conv", "SparseConv", "ai.dashrank.sparse", &["pattern", "W"],
//!              &[("kernel_size", AttrValue::Int(3))]),
//!         node("pool", "SparseGlobalAvgPool", "ai.dashrank.sparse", &["conv_out"], &[]),
//!     ],
//!     initializers: BTreeMap::from([(
//!         "W".to_string(),
//!         TensorSpec { name: "W".into(), dims: vec![9, 1, 2], data: vec![1.0; 18] },
//!     )]),
//! };
//! let graph = FeaturizerGraph::from_spec(&spec)?;
//! assert_eq!(graph.output_dim(), 2);
//! // Two horizontally adjacent entries: each sees itself and the other.
//! let pattern = CsrPattern::new(1, 2, vec![0, 2], vec![0, 1])?;
//! let features = graph.run(&pattern, &FeaturizeOptions::default())?;
//! assert_eq!(features, vec![2.0, 2.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod band;
mod coords;
mod exec;
mod graph;
mod jobs;
mod masks;
mod memory;
mod ops;
mod passes;
mod plan;
mod rulebook;
pub mod spec;
mod step;
#[cfg(test)]
mod tests;
mod tree_sum;
mod validate;
mod window;

pub use exec::FeaturizeStats;
pub use graph::{FeaturizeOptions, FeaturizerGraph};
pub use ops::SPARSE_DOMAIN;

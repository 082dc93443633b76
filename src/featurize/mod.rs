//! Native sparse-convolution featurizer.
//!
//! Owns the path from a validated [`CsrPattern`](crate::pattern::CsrPattern) to the pooled
//! feature vector of a cost model (`conv_features`, `[1, F]` in `docs/bundle-format.md`). A
//! [`FeaturizerGraph`] is built once from a plain-data [`spec::GraphSpec`] (the bundle loader
//! decodes it from ONNX; the featurizer never sees ONNX types) and then run on any number of
//! patterns.
//!
//! # Structure
//!
//! Building a graph has three stages: `validate` checks the spec and types every node through
//! the registry of node types in `ops/` (one file and one registration line per type, each
//! an op behind the `Stencil` or `DenseOp` trait); `passes` rewrites the typed graph (ReLU
//! fusion); `plan` fixes the order of the steps, which step is the last reader of each value,
//! and the band size. Running it is the `exec` module: the pattern streams through the whole
//! layer stack in bands of rows, and each stencil step (`step`) computes the output rows that
//! have become final, keeping of every value only the rows later bands still read (`window`);
//! a large pattern is first cut into slabs of rows run side by side (`slabs`).
//! Points whose receptive fields repeat share one output row (`jobs`, merged band-wide in
//! `band`); keys of the pattern itself are neighbour masks read from bitmaps (`masks`) or
//! found by the search, which a stride-1 layer skips for points certified alone (`lone`). Pooled
//! sums use a fixed tree over the rows (`tree_sum`), and all memory is charged against a
//! budget, with released feature tables kept in a capped pool (`memory`). `coords` holds the
//! row-bucketed coordinates and their strided images, `rulebook` finds neighbours. The
//! numeric kernels (conv micro-kernel, lane-wise row operations) are in [`crate::simd`],
//! one version per [`SimdLevel`](crate::SimdLevel), chosen once per run.
//!
//! Results are bit-identical for any thread count, band size and SIMD level (see
//! [`FeaturizerGraph`]'s `# Determinism`).
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
mod lone;
mod masks;
mod memory;
mod ops;
mod passes;
mod plan;
mod rulebook;
mod search_memo;
mod slabs;
pub mod spec;
mod step;
#[cfg(test)]
mod tests;
mod tree_sum;
mod validate;
mod window;

pub use exec::{FeaturizeStats, StepStats};
pub use graph::{FeaturizeOptions, FeaturizerGraph};
pub use ops::SPARSE_DOMAIN;

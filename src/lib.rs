//! dashrank: rank sparse-kernel schedules with learned cost models (WACO, DASH/COGNATE)
//! exported to ONNX, without PyTorch.
//!
//! Data path: matrix input ([`pattern`]) → native sparse-conv featurizer ([`featurize`]) →
//! schedule encoding ([`schedule`]) → dense-head execution ([`model`], over the bundle format
//! of `bundle`: files, manifest, integrity, [`model::info`]) → ranking ([`rank`]) →
//! toolchain program ([`program`]) → tuning ([`tune`]), with [`workflow`] tying a toolchain's
//! space to a model. The faces are crates of their own over this one: the C ABI
//! (`dashrank-capi`), the command-line tool (`dashrank-cli`), the TVM module (`dashrank-tvm`);
//! `docs/architecture.md` draws them.
#![warn(missing_docs)]
#![warn(clippy::unwrap_used)]

mod bundle;
pub mod error;
pub mod eval;
pub mod featurize;
pub mod model;
pub mod pattern;
mod pools;
pub mod program;
pub mod rank;
pub mod schedule;
pub mod simd;
mod status;
pub mod tune;
pub mod vocab;
pub mod workflow;

pub use model::{Backend, BundleIntegrity, LoadOptions, ManifestEntry, Model, ModelInfo};
pub use pattern::CsrPattern;
pub use rank::{
    CandidateSet, CandidateStatus, CostModel, PreparedSpace, Ranked, SpaceCandidates, SpaceTopK,
    TuneResult,
};
pub use simd::SimdLevel;
pub use vocab::{Kernel, Target};

pub use error::{Error, ErrorKind, Result};

//! Schedule spaces as data: what each *toolchain* accepts, independent of any model.
//!
//! A schedule space enumerates the configurations a target toolchain can run for one matrix,
//! names the toolchain's default configuration, validates a configuration against a matrix
//! shape, and prints each configuration as the text line a model's schema parses
//! ([`Schema::parse_line`](crate::schedule::Schema::parse_line)). Model facts (vocabularies,
//! embedding layouts) stay in the model bundle; a space only says what the toolchain accepts.
//!
//! | target | module | configuration | space size |
//! |---|---|---|---|
//! | CPU / TACO (WACO SuperSchedules) | [`taco`] | [`SuperSchedule`] (its program: [`crate::program::taco`]) | parameterised, see [`TacoSpace`] |
//! | SPADE accelerator | [`spade`] | [`SpadeConfig`] | 256 (COGNATE §4) |
//! | GPU / SparseTIR | [`sparsetir`] | [`GpuConfig`] | 288 per kernel (COGNATE: "~300") |
//! | unified (COGNATE φ/π) | [`cognate`] | [`Unified`] | — (a mapping, not a space) |
//!
//! The ranking flow this is designed for: `space.candidates(&shape)` enumerates the whole
//! space for a matrix, injects the default configuration (so speedups over the toolchain
//! default can always be reported), marks each candidate's status (valid / duplicate /
//! invalid) **per candidate**, and yields the lines to feed to `Model::prepare_candidates`.
//! [`Mapped`] wraps a space so its lines are COGNATE's unified form instead.
//!
//! The registry ([`SPACES`], [`AnySpace`]) names every space by target and kernel
//! (`taco-spmm`, `spade-sddmm`, `sparsetir-spmm`, …) and gives one type for any of them, with
//! the line form (native or unified) chosen per head ([`LineForm::for_schema`]). The kernel
//! and target types are the crate's one vocabulary ([`crate::vocab`]).
//!
//! Evidence: `/work/shared/design/seed-digest.md` §1–§2, the COGNATE paper (seed 001, §3.2,
//! §4 "Program Configuration Search Space", appendix E), DASH (seed 000 §3.3), WACO's public
//! artifact (`nullplay/Workload-Aware-Co-Optimization`) and SparseTIR's examples
//! (`uwsampl/SparseTIR` `examples/spmm/bench_spmm_naive.py`, `examples/sddmm/bench_sddmm.py`).

pub mod cognate;
mod registry;
pub mod spade;
pub mod sparsetir;
pub mod taco;
mod taco_index;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

pub use cognate::{Mapped, ToUnified, Unified};
pub use registry::{AnyConfig, AnySpace, LineForm, SpaceEntry, SpaceOptions, SPACES};
pub use spade::{ColumnPanels, SpadeConfig, SpadeRow, SpadeSpace};
pub use sparsetir::{GpuConfig, GpuLoopOrder, SparseTirSpace};
pub use taco::{LevelFormat, SuperSchedule, TacoSpace};

pub use crate::status::CandidateStatus;
pub use crate::vocab::{Kernel, Target};

use std::borrow::Cow;
use std::ops::Range;

use crate::error::{Error, ErrorKind, Result};

/// The shape of the input matrix a space is instantiated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatrixShape {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Number of stored nonzeros.
    pub nnz: usize,
}

impl MatrixShape {
    /// A shape from its three numbers.
    pub fn new(rows: usize, cols: usize, nnz: usize) -> Self {
        Self { rows, cols, nnz }
    }
}

impl From<&crate::pattern::CsrPattern> for MatrixShape {
    fn from(p: &crate::pattern::CsrPattern) -> Self {
        Self::new(p.nrows(), p.ncols(), p.nnz())
    }
}

/// The statuses of a whole space for one matrix shape, stored compactly: duplicates as one
/// index per configuration (only when there are any), invalid configurations as a sorted
/// list. Everything else is valid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShapeStatuses {
    len: usize,
    /// Per configuration, the configuration it duplicates, or `u32::MAX`; empty when none is a
    /// duplicate.
    dup_of: Vec<u32>,
    /// `(index, reason)`, ascending.
    invalid: Vec<(usize, String)>,
}

impl ShapeStatuses {
    /// `len` valid configurations.
    pub fn all_valid(len: usize) -> Self {
        Self {
            len,
            ..Self::default()
        }
    }

    /// Number of configurations.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no configurations.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets the status of configuration `index` (in ascending `index` order for invalid
    /// ones). Indices beyond [`Self::len`] are ignored.
    pub fn set(&mut self, index: usize, status: CandidateStatus<'static>) {
        if index >= self.len {
            return;
        }
        match status {
            CandidateStatus::Valid | CandidateStatus::InvalidSchedule(_) => {}
            CandidateStatus::Duplicate { of } => {
                if self.dup_of.is_empty() {
                    self.dup_of = vec![u32::MAX; self.len];
                }
                self.dup_of[index] = u32::try_from(of).unwrap_or(u32::MAX);
            }
            CandidateStatus::InvalidForMatrix { reason } => {
                let reason = reason.into_owned();
                match self.invalid.binary_search_by_key(&index, |(i, _)| *i) {
                    Ok(pos) => self.invalid[pos].1 = reason,
                    Err(pos) => self.invalid.insert(pos, (index, reason)),
                }
            }
        }
    }

    /// Status of configuration `index` (`None` beyond the end).
    pub fn get(&self, index: usize) -> Option<CandidateStatus<'_>> {
        if index >= self.len {
            return None;
        }
        if let Ok(pos) = self.invalid.binary_search_by_key(&index, |(i, _)| *i) {
            return Some(CandidateStatus::InvalidForMatrix {
                reason: Cow::Borrowed(&self.invalid[pos].1),
            });
        }
        match self.dup_of.get(index) {
            Some(&of) if of != u32::MAX => Some(CandidateStatus::Duplicate { of: of as usize }),
            _ => Some(CandidateStatus::Valid),
        }
    }

    /// Whether configuration `index` is valid (and exists).
    pub fn is_valid(&self, index: usize) -> bool {
        matches!(self.get(index), Some(CandidateStatus::Valid))
    }

    /// Number of valid configurations.
    pub fn valid_count(&self) -> usize {
        let dups = self.dup_of.iter().filter(|&&d| d != u32::MAX).count();
        let invalid_not_dup = self
            .invalid
            .iter()
            .filter(|(i, _)| self.dup_of.get(*i).is_none_or(|&d| d == u32::MAX))
            .count();
        self.len - dups - invalid_not_dup
    }
}

/// One enumerated configuration with its text line and its status for the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate<C> {
    /// The configuration.
    pub config: C,
    /// The line a model's schema parses ([`ScheduleSpace::to_line`]).
    pub line: String,
    /// Valid, duplicate or invalid for this matrix.
    pub status: CandidateStatus<'static>,
}

/// A whole space instantiated for one matrix, default included.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateList<C> {
    /// Every candidate, in enumeration order; the default is appended if it was not enumerated.
    pub items: Vec<Candidate<C>>,
    /// Index of the toolchain's default configuration in `items`.
    pub default_index: usize,
}

impl<C> CandidateList<C> {
    /// The lines of all candidates, in order (for `Model::prepare_candidates`).
    pub fn lines(&self) -> Vec<&str> {
        self.items.iter().map(|c| c.line.as_str()).collect()
    }

    /// Indices of the candidates whose status is [`CandidateStatus::Valid`].
    pub fn valid_indices(&self) -> Vec<usize> {
        let valid = self
            .items
            .iter()
            .enumerate()
            .filter(|(_, c)| c.status.is_valid());
        valid.map(|(i, _)| i).collect()
    }
}

/// The configuration space of one toolchain for one kernel.
///
/// Implementations are plain data (`Send + Sync`) and deterministic: the same space and shape
/// always enumerate the same configurations in the same order.
pub trait ScheduleSpace {
    /// One configuration of this space.
    type Config: Clone + PartialEq + std::fmt::Debug;

    /// A short name of the target and kernel, e.g. `spade-spmm`.
    fn name(&self) -> String;

    /// Every configuration of the space for a matrix of this shape, in a fixed order.
    /// Shape-dependent values (SPADE's `NUM_MATRIX_COLS`) are substituted; configurations
    /// that are invalid or duplicates for this shape are still listed (see [`Self::status`]).
    fn enumerate(&self, shape: &MatrixShape) -> Vec<Self::Config>;

    /// The toolchain's default configuration (the baseline speedups are reported against).
    fn default_config(&self, shape: &MatrixShape) -> Self::Config;

    /// Checks that the toolchain accepts `config` for a matrix of this shape.
    ///
    /// # Errors
    ///
    /// [`crate::ErrorKind::Schedule`] naming the field and value.
    fn validate(&self, config: &Self::Config, shape: &MatrixShape) -> Result<()>;

    /// The text line a model's schema parses (whitespace-separated tokens).
    fn to_line(&self, config: &Self::Config) -> String;

    /// Canonical form used to detect duplicates: two configurations with equal keys behave
    /// identically on this matrix. The default is the configuration's line.
    fn duplicate_key(&self, config: &Self::Config, shape: &MatrixShape) -> String {
        let _ = shape;
        self.to_line(config)
    }

    /// The status of `config` among `earlier` candidates (for duplicates).
    fn status(
        &self,
        config: &Self::Config,
        shape: &MatrixShape,
        earlier_keys: &[String],
    ) -> CandidateStatus<'static> {
        if let Err(e) = self.validate(config, shape) {
            return CandidateStatus::InvalidForMatrix {
                reason: Cow::Owned(e.to_string()),
            };
        }
        let key = self.duplicate_key(config, shape);
        match earlier_keys.iter().position(|k| *k == key) {
            Some(of) => CandidateStatus::Duplicate { of },
            None => CandidateStatus::Valid,
        }
    }

    /// Number of configurations [`Self::enumerate`] yields; the same for every shape.
    ///
    /// The methods from here to [`Self::shape_statuses`] let a ranker work on a whole space
    /// by index, without materialising its configurations: a space of 611 712 SuperSchedules
    /// is prepared once and re-checked per matrix in milliseconds. Their defaults are correct
    /// for any space (they enumerate); large spaces override them.
    fn len(&self) -> usize {
        self.enumerate(&MatrixShape::new(1, 1, 1)).len()
    }

    /// Whether the space has no configurations.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends configurations `range` of [`Self::enumerate`]`(shape)` to `out`, in order.
    fn configs_into(&self, range: Range<usize>, shape: &MatrixShape, out: &mut Vec<Self::Config>) {
        let all = self.enumerate(shape);
        out.extend(all.into_iter().skip(range.start).take(range.len()));
    }

    /// Appends the lines ([`Self::to_line`]) of configurations `range` to `out`, in order.
    fn lines_into(&self, range: Range<usize>, shape: &MatrixShape, out: &mut Vec<String>) {
        let mut configs = Vec::with_capacity(range.len());
        self.configs_into(range, shape, &mut configs);
        out.extend(configs.iter().map(|c| self.to_line(c)));
    }

    /// Whether the line of configuration `index` depends on the matrix shape (SPADE's
    /// `NUM_MATRIX_COLS`): such lines are prepared per matrix, the others once.
    fn line_depends_on_shape(&self, index: usize) -> bool {
        let _ = index;
        false
    }

    /// Position of [`Self::default_config`]`(shape)` in [`Self::enumerate`]`(shape)`, if it
    /// is there (otherwise a ranker appends it after the last configuration).
    fn default_index(&self, shape: &MatrixShape) -> Option<usize> {
        self.index_of(&self.default_config(shape), shape)
    }

    /// Position of `config` in [`Self::enumerate`]`(shape)`, if it is there.
    fn index_of(&self, config: &Self::Config, shape: &MatrixShape) -> Option<usize> {
        self.enumerate(shape).iter().position(|c| c == config)
    }

    /// The statuses of every configuration for `shape`, by the rule of
    /// [`Self::candidates`], in compact form (only the configurations that are not valid).
    fn shape_statuses(&self, shape: &MatrixShape) -> ShapeStatuses {
        let n = self.len();
        let list = self.candidates(shape);
        let mut out = ShapeStatuses::all_valid(n);
        for (i, c) in list.items.into_iter().take(n).enumerate() {
            out.set(i, c.status);
        }
        out
    }

    /// The whole space for one matrix, with per-candidate status and the default injected
    /// (appended when the enumeration does not contain it). Statuses follow the rule of
    /// [`Self::status`] (validate, then the first earlier candidate with the same key), looked
    /// up in a hash map so large spaces stay linear.
    fn candidates(&self, shape: &MatrixShape) -> CandidateList<Self::Config> {
        let mut configs = self.enumerate(shape);
        let default = self.default_config(shape);
        let default_index = match configs.iter().position(|c| *c == default) {
            Some(i) => i,
            None => {
                configs.push(default);
                configs.len() - 1
            }
        };
        // The rule of `status`, with a hash map instead of a scan over the earlier keys: the
        // scan is quadratic, hours on the 611k-line WACO SpMM space.
        let mut first_with_key: std::collections::HashMap<String, usize> =
            std::collections::HashMap::with_capacity(configs.len());
        let mut items = Vec::with_capacity(configs.len());
        for (i, config) in configs.into_iter().enumerate() {
            let key = self.duplicate_key(&config, shape);
            let status = match self.validate(&config, shape) {
                Err(e) => CandidateStatus::InvalidForMatrix {
                    reason: Cow::Owned(e.to_string()),
                },
                Ok(()) => match first_with_key.get(&key) {
                    Some(&of) => CandidateStatus::Duplicate { of },
                    None => CandidateStatus::Valid,
                },
            };
            first_with_key.entry(key).or_insert(i);
            let line = self.to_line(&config);
            items.push(Candidate {
                config,
                line,
                status,
            });
        }
        CandidateList {
            items,
            default_index,
        }
    }
}

/// A schedule error for a space: `field` = `value` is not accepted because of `reason`.
pub(crate) fn space_error(field: &str, value: impl ToString, reason: impl Into<String>) -> Error {
    Error::schedule(
        None,
        Some(field.to_owned()),
        Some(value.to_string()),
        reason,
    )
}

/// The error of a space constructor asked for a kernel its target has no space for.
pub(crate) fn unsupported(target: Target, kernel: Kernel, supported: &[Kernel]) -> Error {
    Error::new(ErrorKind::UnsupportedKernel {
        target: target.as_str().to_owned(),
        kernel: kernel.as_str().to_owned(),
        supported: supported.iter().map(|k| k.as_str().to_owned()).collect(),
    })
}

/// Parses an unsigned integer token for `field`.
pub(crate) fn parse_u32(field: &str, token: &str) -> Result<u32> {
    token
        .trim()
        .parse::<u32>()
        .map_err(|e| space_error(field, token, "expected an unsigned integer").with_source(e))
}

/// Parses a 0/1 flag token for `field`.
pub(crate) fn parse_flag(field: &str, token: &str) -> Result<bool> {
    match token.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        other => Err(space_error(field, other, "expected 0 or 1")),
    }
}

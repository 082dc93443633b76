//! Ranking whole schedule spaces: prepare a space once, rank it for any matrix with the
//! toolchain's default configuration always reported, so a caller can always fall back to
//! "never worse than the default".
//!
//! # Flow
//!
//! ```text
//! Model::prepare_schedule_space(head, space) ─► PreparedSpace     once per (model, head, space)
//!   every configuration's line, parsed, encoded and prepared once (the schedule side)
//! Model::space_candidates(&prepared, &shape) ─► SpaceCandidates   once per matrix, cheap
//!   statuses for this shape (duplicates, invalid), default located or appended,
//!   shape-dependent lines (SPADE's NUM_MATRIX_COLS) re-prepared
//! Model::top_k_with_default(&matrix, &candidates, k) ─► SpaceTopK
//! Model::tune(&matrix, &candidates, k, measure)      ─► TuneResult
//! ```
//!
//! [`Model::prepare_space`] does the first two steps at once (enough for the small spaces).
//! The lines are whatever the space prints, so the caller picks the form the head's schema
//! parses by the space value it passes: raw SuperSchedule lines from a
//! [`TacoSpace`](crate::schedule::space::TacoSpace) for WACO heads, COGNATE's unified lines
//! from [`Mapped`](crate::schedule::space::Mapped)`(space)` for COGNATE/DASH heads.
//!
//! # Large spaces
//!
//! Ranking is exact and exhaustive: every ranked candidate is scored, ties broken by index.
//! Nothing per candidate is materialised beyond the prepared rows: configurations and lines
//! are regenerated from their index on demand ([`ScheduleSpace::configs_into`]), statuses are
//! computed per shape in compact form ([`ShapeStatuses`]), and the top `k` is kept in a
//! bounded buffer while the scores stream past. For the 611 712-schedule WACO SpMM space the
//! numbers are in `BENCHMARKS.md` (`cargo bench --bench heads -- space`).
//!
//! # Statuses
//!
//! Every candidate has a [`CandidateStatus`]: valid, a duplicate (of an earlier candidate,
//! for this matrix), rejected by the toolchain for this matrix, or rejected by the model's
//! schema (e.g. a split outside an `integer` field's range). Only valid candidates are
//! ranked; nothing fails the batch.

use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::model::{MatrixEmbedding, Model};
use crate::schedule::space::{MatrixShape, ScheduleSpace, ShapeStatuses};

use super::topk::{rank_of, top_k_indices};
use super::{CandidateSet, CandidateStatus, CostModel};

/// Lines parsed and prepared per step when preparing a space (bounds the transient memory).
const PREPARE_CHUNK: usize = 16 * 1024;

type DynSpace<C> = dyn ScheduleSpace<Config = C> + Send + Sync;

/// What a configuration type must be (the bounds of [`ScheduleSpace::Config`]).
pub trait SpaceConfig: Clone + PartialEq + std::fmt::Debug {}

impl<T: Clone + PartialEq + std::fmt::Debug> SpaceConfig for T {}

/// A schedule space prepared once for one head of one model: the schedule side of every
/// configuration, reused for any number of matrices ([`Model::space_candidates`]).
///
/// # Threads
/// Immutable; `Send + Sync`. Share it behind the [`Arc`] [`Model::prepare_schedule_space`]
/// returns.
pub struct PreparedSpace<C: SpaceConfig> {
    space: Box<DynSpace<C>>,
    space_name: String,
    len: usize,
    set: CandidateSet,
    /// Configurations whose line depends on the shape (re-prepared per matrix), ascending.
    shape_dependent: Vec<usize>,
}

impl<C: SpaceConfig> std::fmt::Debug for PreparedSpace<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedSpace")
            .field("space", &self.space_name)
            .field("len", &self.len)
            .field("head", &self.set.head())
            .field("shape_dependent", &self.shape_dependent.len())
            .finish_non_exhaustive()
    }
}

impl<C: SpaceConfig> PreparedSpace<C> {
    /// Number of configurations of the space (the default excluded when it is appended).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the space has no configurations.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The space's name.
    pub fn space_name(&self) -> &str {
        &self.space_name
    }

    /// The head it was prepared for.
    pub fn head(&self) -> &str {
        self.set.head()
    }

    /// The prepared candidates (one per configuration, lines as the space prints them for a
    /// 1 × 1 matrix; shape-dependent lines are re-prepared per matrix).
    pub fn candidate_set(&self) -> &CandidateSet {
        &self.set
    }
}

/// Lines re-prepared for one matrix: the shape-dependent configurations and an appended
/// default.
#[derive(Debug)]
struct Overlay {
    /// Candidate indices, ascending.
    indices: Vec<usize>,
    lines: Vec<String>,
    set: CandidateSet,
}

impl Overlay {
    fn position(&self, index: usize) -> Option<usize> {
        self.indices.binary_search(&index).ok()
    }
}

/// A prepared space instantiated for one matrix shape: its candidates (every configuration,
/// plus the default appended when the enumeration lacks it) with their statuses.
///
/// # Threads
/// Immutable; `Send + Sync` when the configuration type is.
#[derive(Debug)]
pub struct SpaceCandidates<C: SpaceConfig> {
    prepared: Arc<PreparedSpace<C>>,
    shape: MatrixShape,
    statuses: ShapeStatuses,
    default_index: usize,
    /// The default, when it is appended (index `prepared.len`), with its status.
    appended_default: Option<(C, CandidateStatus<'static>)>,
    overlay: Overlay,
    ranked: usize,
}

impl<C: SpaceConfig> SpaceCandidates<C> {
    /// Number of candidates (valid or not), default included.
    pub fn len(&self) -> usize {
        self.prepared.len + usize::from(self.appended_default.is_some())
    }

    /// True when there are no candidates (never: the default is always there).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The space's name ([`ScheduleSpace::name`]).
    pub fn space_name(&self) -> &str {
        &self.prepared.space_name
    }

    /// The matrix shape the statuses are for.
    pub fn shape(&self) -> MatrixShape {
        self.shape
    }

    /// The head the candidates were prepared for.
    pub fn head(&self) -> &str {
        self.prepared.head()
    }

    /// Index of the toolchain's default configuration.
    pub fn default_index(&self) -> usize {
        self.default_index
    }

    /// The prepared space these candidates come from.
    pub fn prepared(&self) -> &Arc<PreparedSpace<C>> {
        &self.prepared
    }

    /// Configurations `range` (clamped to [`Self::len`]), in order, rebuilt from their index.
    pub fn configs(&self, range: Range<usize>) -> Vec<C> {
        let end = range.end.min(self.len());
        let mut out = Vec::with_capacity(end.saturating_sub(range.start));
        if range.start >= end {
            return out;
        }
        let inner_end = end.min(self.prepared.len);
        if range.start < inner_end {
            self.prepared
                .space
                .configs_into(range.start..inner_end, &self.shape, &mut out);
        }
        if end > self.prepared.len {
            if let Some((c, _)) = &self.appended_default {
                out.push(c.clone());
            }
        }
        out
    }

    /// Configuration `index`.
    pub fn config(&self, index: usize) -> Option<C> {
        self.configs(index..index + 1).into_iter().next()
    }

    /// The index of `config` among the candidates, if the space holds it (the appended
    /// default included).
    pub fn index_of(&self, config: &C) -> Option<usize> {
        if let Some((c, _)) = &self.appended_default {
            if c == config {
                return Some(self.prepared.len);
            }
        }
        self.prepared.space.index_of(config, &self.shape)
    }

    /// The line of candidate `index`, as fed to the schema.
    pub fn line(&self, index: usize) -> Option<String> {
        if let Some(pos) = self.overlay.position(index) {
            return self.overlay.lines.get(pos).cloned();
        }
        if index >= self.prepared.len {
            return None;
        }
        let mut out = Vec::with_capacity(1);
        self.prepared
            .space
            .lines_into(index..index + 1, &self.shape, &mut out);
        out.pop()
    }

    /// The space's own status of candidate `index` (valid / duplicate / invalid for this
    /// matrix), before the schema is consulted.
    pub fn space_status(&self, index: usize) -> Option<CandidateStatus<'static>> {
        if index < self.prepared.len {
            return self.statuses.get(index).map(CandidateStatus::into_owned);
        }
        self.appended_default
            .as_ref()
            .filter(|_| index == self.prepared.len)
            .map(|(_, s)| s.clone())
    }

    /// The prepared (schema-level) candidate set of the space (shared by every matrix).
    pub fn candidate_set(&self) -> &CandidateSet {
        &self.prepared.set
    }

    /// The schema's verdict on candidate `index`'s line.
    fn schema_status(&self, index: usize) -> Option<CandidateStatus<'_>> {
        match self.overlay.position(index) {
            Some(pos) => self.overlay.set.status(pos),
            None => self.prepared.set.status(index),
        }
    }

    /// The combined status of candidate `index`: the space's verdict first (an invalid
    /// configuration may have no line at all), then the schema's.
    pub fn status(&self, index: usize) -> Option<CandidateStatus<'_>> {
        let space = if index < self.prepared.len {
            self.statuses.get(index)?
        } else {
            match &self.appended_default {
                Some((_, CandidateStatus::InvalidForMatrix { reason }))
                    if index == self.prepared.len =>
                {
                    CandidateStatus::InvalidForMatrix {
                        reason: std::borrow::Cow::Borrowed(reason),
                    }
                }
                Some((_, CandidateStatus::Duplicate { of })) if index == self.prepared.len => {
                    CandidateStatus::Duplicate { of: *of }
                }
                Some(_) if index == self.prepared.len => CandidateStatus::Valid,
                _ => return None,
            }
        };
        Some(match space {
            CandidateStatus::InvalidForMatrix { reason } => {
                CandidateStatus::InvalidForMatrix { reason }
            }
            CandidateStatus::InvalidSchedule(e) => CandidateStatus::InvalidSchedule(e),
            CandidateStatus::Duplicate { of } => match self.schema_status(index)? {
                s @ CandidateStatus::InvalidSchedule(_) => s,
                _ => CandidateStatus::Duplicate { of },
            },
            CandidateStatus::Valid => self.schema_status(index)?,
        })
    }

    /// Whether candidate `index` is ranked (its combined status is valid).
    pub fn is_ranked(&self, index: usize) -> bool {
        self.status(index).is_some_and(|s| s.is_valid())
    }

    /// Number of ranked (valid) candidates.
    pub fn ranked_count(&self) -> usize {
        self.ranked
    }

    /// Candidates that are not ranked, with their status, in index order.
    pub fn rejected(&self) -> impl Iterator<Item = (usize, CandidateStatus<'_>)> {
        (0..self.len()).filter_map(|i| self.status(i).filter(|s| !s.is_valid()).map(|s| (i, s)))
    }
}

/// One entry of a [`SpaceTopK`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpaceRanked {
    /// Candidate index.
    pub index: usize,
    /// The model's score; NaN when the schema rejected the candidate's line (only possible
    /// for the default entry).
    pub score: f32,
    /// Whether this is the toolchain's default configuration.
    pub is_default: bool,
    /// Number of ranked candidates that rank strictly before this one (score, then index):
    /// 0 for the best. `None` when the score is NaN.
    pub rank: Option<usize>,
}

/// The top `k` of a space plus its default.
#[derive(Debug, Clone, PartialEq)]
pub struct SpaceTopK {
    /// The `k` best ranked candidates, best first (ties broken by candidate index), then the
    /// default if it is not among them. The default is always present, flagged by
    /// [`SpaceRanked::is_default`], even when it is a duplicate or invalid (then its status
    /// says why; it is reported, not ranked).
    pub entries: Vec<SpaceRanked>,
    /// Position of the default in `entries`.
    pub default_position: usize,
    /// Number of top-k entries: `entries.len()`, or one less when the default was appended.
    pub top_len: usize,
    /// Number of candidates that were ranked.
    pub ranked: usize,
}

impl SpaceTopK {
    /// The default's entry.
    pub fn default_entry(&self) -> &SpaceRanked {
        &self.entries[self.default_position]
    }

    /// The top-k entries alone (the default included only if it made the top k).
    pub fn top(&self) -> &[SpaceRanked] {
        &self.entries[..self.top_len]
    }
}

impl Model {
    /// Prepares every configuration of `space` for `head` once: lines printed, parsed,
    /// encoded and run through the schedule side of the head, chunk by chunk. Use the result
    /// for any number of matrices with [`Model::space_candidates`].
    ///
    /// # Errors
    ///
    /// Unknown head, or an executor failure. A configuration the schema rejects does not fail
    /// the call (its status says why).
    pub fn prepare_schedule_space<S>(
        &self,
        head: &str,
        space: S,
    ) -> Result<Arc<PreparedSpace<S::Config>>>
    where
        S: ScheduleSpace + Send + Sync + 'static,
    {
        let mut set = self.empty_candidate_set(head)?;
        let len = space.len();
        let reference = MatrixShape::new(1, 1, 1);
        let mut lines = Vec::with_capacity(PREPARE_CHUNK.min(len));
        for start in (0..len).step_by(PREPARE_CHUNK) {
            lines.clear();
            space.lines_into(
                start..(start + PREPARE_CHUNK).min(len),
                &reference,
                &mut lines,
            );
            if lines.len() != (start + PREPARE_CHUNK).min(len) - start {
                return Err(Error::invalid_argument(format!(
                    "space '{}' printed {} lines for configurations {start}.. (expected {})",
                    space.name(),
                    lines.len(),
                    (start + PREPARE_CHUNK).min(len) - start
                )));
            }
            self.append_candidates(&mut set, &lines)?;
        }
        let shape_dependent = (0..len)
            .filter(|&i| space.line_depends_on_shape(i))
            .collect();
        Ok(Arc::new(PreparedSpace {
            space_name: space.name(),
            space: Box::new(space),
            len,
            set,
            shape_dependent,
        }))
    }

    /// A prepared space for one matrix shape: statuses, the default located (or appended),
    /// and the shape-dependent lines prepared. Cheap: no enumeration of the whole space.
    ///
    /// # Errors
    ///
    /// A `prepared` space of another model instance, or an executor failure.
    pub fn space_candidates<C: SpaceConfig>(
        &self,
        prepared: &Arc<PreparedSpace<C>>,
        shape: &MatrixShape,
    ) -> Result<SpaceCandidates<C>> {
        let space = &prepared.space;
        let statuses = space.shape_statuses(shape);
        let default = space.default_config(shape);
        let (default_index, appended_default) = match space.default_index(shape) {
            Some(i) if i < prepared.len => (i, None),
            _ => {
                // Rare (every registered space enumerates its default): the rule of
                // `ScheduleSpace::candidates`, by one scan of the enumeration.
                let status = match space.validate(&default, shape) {
                    Err(e) => CandidateStatus::InvalidForMatrix {
                        reason: std::borrow::Cow::Owned(e.to_string()),
                    },
                    Ok(()) => {
                        let key = space.duplicate_key(&default, shape);
                        let all = space.enumerate(shape);
                        match all
                            .iter()
                            .position(|c| space.duplicate_key(c, shape) == key)
                        {
                            Some(of) => CandidateStatus::Duplicate { of },
                            None => CandidateStatus::Valid,
                        }
                    }
                };
                (prepared.len, Some((default, status)))
            }
        };
        let mut indices = prepared.shape_dependent.clone();
        let mut lines = Vec::with_capacity(indices.len() + 1);
        for &i in &indices {
            space.lines_into(i..i + 1, shape, &mut lines);
        }
        if let Some((c, _)) = &appended_default {
            indices.push(prepared.len);
            lines.push(space.to_line(c));
        }
        let set = self.prepare_candidates(prepared.set.head(), &lines)?;
        let mut out = SpaceCandidates {
            prepared: Arc::clone(prepared),
            shape: *shape,
            statuses,
            default_index,
            appended_default,
            overlay: Overlay {
                indices,
                lines,
                set,
            },
            ranked: 0,
        };
        out.ranked = out.count_ranked();
        Ok(out)
    }

    /// Prepares `space` for `head` and instantiates it for a matrix of this shape in one call
    /// ([`Model::prepare_schedule_space`] then [`Model::space_candidates`]): convenient for
    /// small spaces and one matrix; keep the [`PreparedSpace`] to rank large spaces for many
    /// matrices.
    ///
    /// Never fails because of a candidate: a configuration the toolchain rejects, a
    /// duplicate, or a line the schema rejects gets its status
    /// ([`SpaceCandidates::status`]).
    ///
    /// # Errors
    ///
    /// Unknown head ([`ErrorKind::UnknownHead`](crate::ErrorKind::UnknownHead)) or an
    /// executor failure.
    pub fn prepare_space<S>(
        &self,
        head: &str,
        space: &S,
        shape: &MatrixShape,
    ) -> Result<SpaceCandidates<S::Config>>
    where
        S: ScheduleSpace + Clone + Send + Sync + 'static,
    {
        let prepared = self.prepare_schedule_space(head, space.clone())?;
        self.space_candidates(&prepared, shape)
    }

    /// Scores every candidate for one matrix: the model's score for ranked candidates and
    /// for the default (if its line is valid), NaN for everything else. `out` has
    /// `candidates.len()` values.
    ///
    /// # Errors
    ///
    /// Wrong buffer length, an embedding or candidates from another model, or an executor
    /// failure.
    pub fn score_space_into<C: SpaceConfig>(
        &self,
        matrix: &MatrixEmbedding,
        candidates: &SpaceCandidates<C>,
        out: &mut [f32],
    ) -> Result<()> {
        if out.len() != candidates.len() {
            return Err(Error::invalid_argument(format!(
                "output buffer holds {} scores but the space has {} candidates",
                out.len(),
                candidates.len()
            )));
        }
        let n = candidates.prepared.len;
        self.score_into(matrix, &candidates.prepared.set, &mut out[..n])?;
        let overlay = &candidates.overlay;
        if !overlay.indices.is_empty() {
            let mut extra = vec![0.0f32; overlay.set.len()];
            self.score_into(matrix, &overlay.set, &mut extra)?;
            for (&i, &s) in overlay.indices.iter().zip(&extra) {
                out[i] = s;
            }
        }
        let default = candidates.default_index;
        for (i, s) in out.iter_mut().enumerate().take(n) {
            if i != default && !candidates.statuses.is_valid(i) {
                *s = f32::NAN;
            }
        }
        Ok(())
    }

    /// The `k` best candidates of a prepared space for one matrix, plus the default
    /// (flagged; appended when it is not among the `k`). Exact: every ranked candidate is
    /// scored; ties are broken by candidate index.
    ///
    /// # Errors
    ///
    /// As [`Model::score_space_into`].
    pub fn top_k_with_default<C: SpaceConfig>(
        &self,
        matrix: &MatrixEmbedding,
        candidates: &SpaceCandidates<C>,
        k: usize,
    ) -> Result<SpaceTopK> {
        let mut scores = vec![0.0f32; candidates.len()];
        self.score_space_into(matrix, candidates, &mut scores)?;
        let polarity = self.head(candidates.head())?.info.polarity;
        let default = candidates.default_index;
        let default_score = scores.get(default).copied().unwrap_or(f32::NAN);
        // The default is scored even when it is not ranked; keep it out of the ranking then.
        if !candidates.is_ranked(default) {
            if let Some(s) = scores.get_mut(default) {
                *s = f32::NAN;
            }
        }
        let top = top_k_indices(&scores, k, polarity);
        let mut entries: Vec<SpaceRanked> = top
            .iter()
            .enumerate()
            .map(|(r, &index)| SpaceRanked {
                index,
                score: scores[index],
                is_default: index == default,
                rank: Some(r),
            })
            .collect();
        let top_len = entries.len();
        let default_position = match entries.iter().position(|e| e.is_default) {
            Some(p) => p,
            None => {
                entries.push(SpaceRanked {
                    index: default,
                    score: default_score,
                    is_default: true,
                    rank: rank_of(&scores, default, default_score, polarity),
                });
                entries.len() - 1
            }
        };
        Ok(SpaceTopK {
            entries,
            default_position,
            top_len,
            ranked: candidates.ranked,
        })
    }
}

impl<C: SpaceConfig> SpaceCandidates<C> {
    fn count_ranked(&self) -> usize {
        let n = self.prepared.len;
        let set = &self.prepared.set;
        // Valid for the shape and for the schema; the overlay's verdicts replace the base's.
        let mut ranked = 0;
        for i in 0..n {
            if self.statuses.is_valid(i) {
                let ok = match self.overlay.position(i) {
                    Some(pos) => self.overlay.set.status(pos).is_some_and(|s| s.is_valid()),
                    None => set.status(i).is_some_and(|s| s.is_valid()),
                };
                ranked += usize::from(ok);
            }
        }
        if self.appended_default.is_some() && self.is_ranked(n) {
            ranked += 1;
        }
        ranked
    }
}

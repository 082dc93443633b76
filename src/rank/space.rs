//! Ranking whole schedule spaces: prepare a space once, rank it for any matrix with the
//! toolchain's default configuration always reported, so a caller can always fall back to
//! "never worse than the default".
//!
//! # Flow
//!
//! ```text
//! space.candidates(shape) ─► lines ─► Model::prepare_candidates ─► SpaceCandidates
//!   (space status per candidate,         (schema status per candidate,      │
//!    default injected)                    schedule embeddings)              ▼
//!                         Model::top_k_with_default(matrix, &candidates, k) ─► SpaceTopK
//!                         Model::tune(matrix, &candidates, k, measure)      ─► TuneResult
//! ```
//!
//! The lines are whatever the space prints, so the caller picks the form the head's schema
//! parses by the space value it passes: raw SuperSchedule lines from a
//! [`TacoSpace`](crate::schedule::space::TacoSpace) for WACO heads, COGNATE's unified lines
//! from [`Mapped`](crate::schedule::space::Mapped)`(space)` for COGNATE/DASH heads.
//!
//! # Reuse across matrices
//!
//! The schedule embeddings depend only on the lines. Most spaces print the same lines for
//! every matrix (TACO, SparseTIR); SPADE substitutes `NUM_MATRIX_COLS` with the matrix's
//! column count, so its lines differ per distinct `ncols`. Rather than special-casing spaces,
//! [`Model::prepare_space_cached`] keys a [`SpaceCache`] by the exact line list: the
//! embeddings are computed once per distinct line list (once in all for TACO/SparseTIR, once
//! per distinct `ncols` for SPADE) and shared through an `Arc`. What is recomputed per matrix
//! is only the space's enumeration and its per-candidate status (duplicates depend on the
//! shape, e.g. a TACO split larger than the matrix).
//!
//! # Large spaces: exhaustive scoring
//!
//! Ranking is exact and exhaustive: every ranked candidate is scored. WACO searched its CPU
//! space with HNSW over schedule embeddings; we measured instead (real `waco-spmm` model,
//! tract backend, 2 cores, the 611 712-line
//! [`TacoSpace::waco`](crate::schedule::space::TacoSpace::waco) SpMM space; numbers in
//! `BENCHMARKS.md`, reproduced by the ignored test `exhaustive_waco_spmm_space_timing` in
//! `tests/spaces.rs`): scoring the whole prepared space for one matrix and taking the exact
//! top k takes about 3 s, the one-off preparation about 13 s (half enumeration and statuses,
//! half parsing, encoding and embedding). The COGNATE spaces (256 SPADE, 288 SparseTIR
//! configurations) take milliseconds. An approximate index would save at most those 3 s per
//! matrix of the largest space and give up exactness and the index-order tie rule, so
//! exhaustive scoring is the only strategy.
//!
//! # Statuses
//!
//! Every candidate has a [`SpaceCandidateStatus`]: valid, a duplicate (of an earlier
//! candidate, for this matrix), rejected by the toolchain for this matrix, or rejected by the
//! model's schema (e.g. a split outside an `integer` field's range). Only valid candidates
//! are ranked; nothing fails the batch.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::model::{MatrixEmbedding, Model};
use crate::schedule::space::{MatrixShape, ScheduleSpace, SpaceStatus};

use super::{top_k_indices, CandidateSet, CandidateStatus, CostModel};

/// The combined status of one candidate of a [`SpaceCandidates`].
#[derive(Debug, Clone, Copy)]
pub enum SpaceCandidateStatus<'a> {
    /// Accepted by the toolchain for this matrix, distinct, and encoded by the schema: ranked.
    Valid,
    /// Behaves like the candidate at index `of` for this matrix; not ranked (`of` is).
    Duplicate {
        /// The candidate it duplicates.
        of: usize,
    },
    /// The toolchain rejects it for this matrix (out of range for this shape, …).
    InvalidForMatrix {
        /// Why (the space's error message).
        reason: &'a str,
    },
    /// The model's schema rejects its line (out of vocabulary or range, bad permutation, no
    /// unified form, …); the error names the field and value.
    InvalidSchedule(&'a Error),
}

impl SpaceCandidateStatus<'_> {
    /// True for [`SpaceCandidateStatus::Valid`].
    pub fn is_valid(&self) -> bool {
        matches!(self, SpaceCandidateStatus::Valid)
    }
}

/// A schedule space instantiated for one matrix shape and prepared for one head: every
/// configuration with its line, its space and schema status, and (shared, see the module
/// docs) its schedule embedding. The default configuration is always present.
///
/// # Threads
/// Immutable; `Send + Sync` when the configuration type is.
#[derive(Debug)]
pub struct SpaceCandidates<C> {
    space_name: String,
    shape: MatrixShape,
    configs: Vec<C>,
    space_statuses: Vec<SpaceStatus>,
    lines: Arc<Vec<String>>,
    set: Arc<CandidateSet>,
    default_index: usize,
    ranked: usize,
}

impl<C> SpaceCandidates<C> {
    /// Number of candidates (valid or not), default included.
    pub fn len(&self) -> usize {
        self.configs.len()
    }

    /// True when there are no candidates (never: the default is always there).
    pub fn is_empty(&self) -> bool {
        self.configs.is_empty()
    }

    /// The space's name ([`ScheduleSpace::name`]).
    pub fn space_name(&self) -> &str {
        &self.space_name
    }

    /// The matrix shape the statuses are for.
    pub fn shape(&self) -> MatrixShape {
        self.shape
    }

    /// The head the candidates were prepared for.
    pub fn head(&self) -> &str {
        self.set.head()
    }

    /// Index of the toolchain's default configuration.
    pub fn default_index(&self) -> usize {
        self.default_index
    }

    /// Configuration `index`.
    pub fn config(&self, index: usize) -> Option<&C> {
        self.configs.get(index)
    }

    /// All configurations, in candidate order.
    pub fn configs(&self) -> &[C] {
        &self.configs
    }

    /// The line of candidate `index`, as fed to the schema.
    pub fn line(&self, index: usize) -> Option<&str> {
        self.lines.get(index).map(String::as_str)
    }

    /// All lines, in candidate order.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The space's own status of candidate `index` (valid / duplicate / invalid for this
    /// matrix), before the schema is consulted.
    pub fn space_status(&self, index: usize) -> Option<&SpaceStatus> {
        self.space_statuses.get(index)
    }

    /// The prepared (schema-level) candidate set: statuses and embeddings. Shared between
    /// all [`SpaceCandidates`] with the same lines.
    pub fn candidate_set(&self) -> &CandidateSet {
        &self.set
    }

    /// The combined status of candidate `index`: the space's verdict first (an invalid
    /// configuration may have no line at all), then the schema's.
    pub fn status(&self, index: usize) -> Option<SpaceCandidateStatus<'_>> {
        let space = self.space_statuses.get(index)?;
        Some(match space {
            SpaceStatus::Invalid { reason } => SpaceCandidateStatus::InvalidForMatrix { reason },
            SpaceStatus::Duplicate { of } => match self.set.statuses().get(index)? {
                CandidateStatus::Invalid(e) => SpaceCandidateStatus::InvalidSchedule(e),
                CandidateStatus::Valid => SpaceCandidateStatus::Duplicate { of: *of },
            },
            SpaceStatus::Valid => match self.set.statuses().get(index)? {
                CandidateStatus::Invalid(e) => SpaceCandidateStatus::InvalidSchedule(e),
                CandidateStatus::Valid => SpaceCandidateStatus::Valid,
            },
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
    pub fn rejected(&self) -> impl Iterator<Item = (usize, SpaceCandidateStatus<'_>)> {
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

/// Prepared candidate sets keyed by their exact line list (and model and head), so a space
/// whose lines do not depend on the matrix is embedded once, and SPADE once per distinct
/// column count. Bounded: the least recently used entry is dropped beyond the capacity.
///
/// # Threads
/// `Send + Sync`; lookups lock briefly, preparation runs outside the lock.
#[derive(Debug)]
pub struct SpaceCache {
    capacity: usize,
    entries: Mutex<Vec<CacheEntry>>,
}

#[derive(Debug)]
struct CacheEntry {
    model: u64,
    head: String,
    hash: u64,
    lines: Arc<Vec<String>>,
    set: Arc<CandidateSet>,
}

impl Default for SpaceCache {
    fn default() -> Self {
        Self::new(16)
    }
}

impl SpaceCache {
    /// A cache holding at most `capacity` prepared line lists (at least 1).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            entries: Mutex::new(Vec::new()),
        }
    }

    /// Number of prepared line lists held.
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, model: u64, head: &str, hash: u64, lines: &[String]) -> Option<CacheHit> {
        let mut entries = self.entries.lock().ok()?;
        let pos = entries.iter().position(|e| {
            e.model == model && e.hash == hash && e.head == head && e.lines.as_slice() == lines
        })?;
        let entry = entries.remove(pos);
        let hit = (Arc::clone(&entry.lines), Arc::clone(&entry.set));
        entries.push(entry); // most recently used last
        Some(hit)
    }

    fn insert(&self, entry: CacheEntry) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.push(entry);
            while entries.len() > self.capacity {
                entries.remove(0);
            }
        }
    }
}

type CacheHit = (Arc<Vec<String>>, Arc<CandidateSet>);

fn hash_lines(lines: &[String]) -> u64 {
    let mut h = DefaultHasher::new();
    lines.hash(&mut h);
    h.finish()
}

impl Model {
    /// Enumerates `space` for a matrix of this shape (default injected, per-candidate space
    /// status) and prepares its lines for `head`.
    ///
    /// Never fails because of a candidate: a configuration the toolchain rejects, a
    /// duplicate, or a line the schema rejects gets its status
    /// ([`SpaceCandidates::status`]).
    ///
    /// # Errors
    ///
    /// Unknown head ([`ErrorKind::UnknownHead`](crate::ErrorKind::UnknownHead)) or an
    /// executor failure.
    pub fn prepare_space<S: ScheduleSpace>(
        &self,
        head: &str,
        space: &S,
        shape: &MatrixShape,
    ) -> Result<SpaceCandidates<S::Config>> {
        self.prepare_space_inner(head, space, shape, None)
    }

    /// As [`Model::prepare_space`], reusing the schedule embeddings of an earlier call with
    /// the same model, head and lines from `cache` (see the module docs).
    ///
    /// # Errors
    ///
    /// As [`Model::prepare_space`].
    pub fn prepare_space_cached<S: ScheduleSpace>(
        &self,
        head: &str,
        space: &S,
        shape: &MatrixShape,
        cache: &SpaceCache,
    ) -> Result<SpaceCandidates<S::Config>> {
        self.prepare_space_inner(head, space, shape, Some(cache))
    }

    fn prepare_space_inner<S: ScheduleSpace>(
        &self,
        head: &str,
        space: &S,
        shape: &MatrixShape,
        cache: Option<&SpaceCache>,
    ) -> Result<SpaceCandidates<S::Config>> {
        // Fail on an unknown head before enumerating.
        self.schema(head)?;
        let list = space.candidates(shape);
        let default_index = list.default_index;
        let n = list.items.len();
        let mut configs = Vec::with_capacity(n);
        let mut space_statuses = Vec::with_capacity(n);
        let mut lines = Vec::with_capacity(n);
        for c in list.items {
            configs.push(c.config);
            space_statuses.push(c.status);
            lines.push(c.line);
        }
        let model_hash = self.info().content_hash;
        let hash = hash_lines(&lines);
        let (lines, set) = match cache.and_then(|c| c.get(model_hash, head, hash, &lines)) {
            Some(hit) => hit,
            None => {
                let set = Arc::new(self.prepare_candidates(head, &lines)?);
                let lines = Arc::new(lines);
                if let Some(cache) = cache {
                    cache.insert(CacheEntry {
                        model: model_hash,
                        head: head.to_owned(),
                        hash,
                        lines: Arc::clone(&lines),
                        set: Arc::clone(&set),
                    });
                }
                (lines, set)
            }
        };
        let mut out = SpaceCandidates {
            space_name: space.name(),
            shape: *shape,
            configs,
            space_statuses,
            lines,
            set,
            default_index,
            ranked: 0,
        };
        out.ranked = (0..n).filter(|&i| out.is_ranked(i)).count();
        Ok(out)
    }

    /// Scores every candidate for one matrix: the model's score for ranked candidates and
    /// for the default (if its line is valid), NaN for everything else. `out` has
    /// `candidates.len()` values.
    ///
    /// # Errors
    ///
    /// Wrong buffer length, an embedding or candidates from another model, or an executor
    /// failure.
    pub fn score_space_into<C>(
        &self,
        matrix: &MatrixEmbedding,
        candidates: &SpaceCandidates<C>,
        out: &mut [f32],
    ) -> Result<()> {
        // `score_into` checks the buffer length: the set has one entry per space candidate.
        self.score_into(matrix, &candidates.set, out)?;
        for (i, s) in out.iter_mut().enumerate() {
            if i != candidates.default_index && !candidates.is_ranked(i) {
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
    pub fn top_k_with_default<C>(
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
        let default_ranked = candidates.is_ranked(default);
        // The default is scored even when it is not ranked; keep it out of the ranking then.
        if !default_ranked {
            if let Some(s) = scores.get_mut(default) {
                *s = f32::NAN;
            }
        }
        let top = top_k_indices(&scores, k, polarity);
        // Rank of a score: ranked candidates strictly better (score, then index).
        let rank_of = |index: usize, score: f32| -> Option<usize> {
            if score.is_nan() {
                return None;
            }
            let before = scores.iter().enumerate().filter(|&(j, &t)| {
                !t.is_nan()
                    && j != index
                    && polarity.compare(t, score).then(j.cmp(&index)) == std::cmp::Ordering::Less
            });
            Some(before.count())
        };
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
                    rank: rank_of(default, default_score),
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

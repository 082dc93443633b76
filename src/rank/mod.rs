//! The public face: embed a matrix once, prepare candidates once, score and rank them.
//!
//! The shape follows TVM MetaSchedule's cost-model interface (batch predict into a caller
//! buffer) and WACO's three entry points (embed matrix, embed schedules, predict). Schedule-side
//! work ([`CandidateSet`]) is done once per head and reused across matrices; matrix embeddings
//! are cached per model.
//!
//! Whole schedule spaces ([`crate::schedule::space`]) are ranked with the default
//! configuration always reported ([`Model::prepare_space`], [`Model::top_k_with_default`])
//! and tuned with a measure callback ([`Model::tune`]); see [`SpaceCandidates`].

use crate::error::{Error, Result};
use crate::model::{MatrixEmbedding, Model, ModelInfo, Prepared};
use crate::pattern::CsrPattern;

mod measure;
mod space;
mod topk;

pub use measure::{Measurement, TuneResult};
pub use space::{SpaceCache, SpaceCandidateStatus, SpaceCandidates, SpaceRanked, SpaceTopK};
pub use topk::top_k_indices;

/// Whether a candidate could be encoded and scored.
#[derive(Debug)]
pub enum CandidateStatus {
    /// The candidate is valid; its score is meaningful.
    Valid,
    /// The candidate was rejected (parse error, out-of-vocabulary value, …); its score is NaN.
    Invalid(Error),
}

impl CandidateStatus {
    /// True for [`CandidateStatus::Valid`].
    pub fn is_valid(&self) -> bool {
        matches!(self, CandidateStatus::Valid)
    }
}

/// Candidates prepared for one head: parsed, validated, encoded and embedded once, reusable
/// for any number of matrices.
///
/// # Threads
/// Immutable; `Send + Sync`.
#[derive(Debug)]
pub struct CandidateSet {
    head: usize,
    head_name: String,
    /// The model instance that prepared the set.
    model_instance: u64,
    statuses: Vec<CandidateStatus>,
    /// Positions (in the caller's list) of the valid candidates, ascending.
    valid: Vec<usize>,
    /// The schedule side of the valid candidates, one row each (see [`Prepared`]).
    prepared: Prepared,
    /// Measured runtimes given on the lines (`= ms`), if any.
    measured_ms: Vec<Option<f64>>,
}

impl CandidateSet {
    /// Number of candidates (valid or not), in the caller's order.
    pub fn len(&self) -> usize {
        self.statuses.len()
    }

    /// True when there are no candidates.
    pub fn is_empty(&self) -> bool {
        self.statuses.is_empty()
    }

    /// Head these candidates were prepared for.
    pub fn head(&self) -> &str {
        &self.head_name
    }

    /// Per-candidate status, in the caller's order.
    pub fn statuses(&self) -> &[CandidateStatus] {
        &self.statuses
    }

    /// Number of valid candidates.
    pub fn valid_count(&self) -> usize {
        self.valid.len()
    }

    /// Measured runtimes (milliseconds) parsed from `= ms` suffixes, in the caller's order.
    pub fn measured_ms(&self) -> &[Option<f64>] {
        &self.measured_ms
    }

    /// Bytes held by the prepared schedule side (the dominant cost of a large set).
    pub fn prepared_bytes(&self) -> usize {
        self.prepared.bytes()
    }
}

/// One ranked candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranked {
    /// Position of the candidate in the caller's list.
    pub index: usize,
    /// Its score (see [`crate::model::ScorePolarity`] for which direction is better).
    pub score: f32,
}

/// A learned cost model that ranks schedules for sparse matrices.
///
/// All methods take `&self`; implementations are `Send + Sync`.
pub trait CostModel: Send + Sync {
    /// Facts about the model (heads, kernels, targets, polarity, dimensions).
    fn info(&self) -> &ModelInfo;

    /// Embeds a matrix (featurizer + matrix embedder). Cached by pattern hash.
    fn embed_matrix(&self, pattern: &CsrPattern) -> Result<MatrixEmbedding>;

    /// Parses, validates, encodes and embeds schedule lines for `head`. Invalid lines get a
    /// per-candidate [`CandidateStatus::Invalid`]; the call fails only on misuse (unknown head)
    /// or an executor failure.
    fn prepare_candidates<S: AsRef<str>>(&self, head: &str, lines: &[S]) -> Result<CandidateSet>
    where
        Self: Sized;

    /// Scores every candidate for one matrix into `out` (length = `candidates.len()`); invalid
    /// candidates get NaN.
    fn score_into(
        &self,
        matrix: &MatrixEmbedding,
        candidates: &CandidateSet,
        out: &mut [f32],
    ) -> Result<()>;

    /// The `k` best valid candidates, best first; ties broken by candidate index.
    fn top_k(
        &self,
        matrix: &MatrixEmbedding,
        candidates: &CandidateSet,
        k: usize,
    ) -> Result<Vec<Ranked>>;
}

impl CostModel for Model {
    fn info(&self) -> &ModelInfo {
        Model::info(self)
    }

    fn embed_matrix(&self, pattern: &CsrPattern) -> Result<MatrixEmbedding> {
        self.embed_matrix_cached(pattern)
    }

    fn prepare_candidates<S: AsRef<str>>(&self, head: &str, lines: &[S]) -> Result<CandidateSet> {
        let head_index = self.head_index(head)?;
        let h = self.head_at(head_index);
        let batch = h.schema.encode_batch(lines);
        let width = h.schema.encoded_width();
        debug_assert_eq!(batch.rows.len(), batch.index.len() * width);
        let prepared = self.prepare_rows(h, &batch.rows, batch.index.len())?;
        let statuses = batch
            .statuses
            .into_iter()
            .map(|s| match s {
                Ok(()) => CandidateStatus::Valid,
                Err(e) => CandidateStatus::Invalid(e),
            })
            .collect();
        Ok(CandidateSet {
            head: head_index,
            head_name: head.to_string(),
            model_instance: self.instance(),
            statuses,
            valid: batch.index,
            prepared,
            measured_ms: batch.measured_ms,
        })
    }

    fn score_into(
        &self,
        matrix: &MatrixEmbedding,
        candidates: &CandidateSet,
        out: &mut [f32],
    ) -> Result<()> {
        if out.len() != candidates.len() {
            return Err(Error::invalid_argument(format!(
                "output buffer holds {} scores but there are {} candidates",
                out.len(),
                candidates.len()
            )));
        }
        if matrix.model_instance() != self.instance() {
            return Err(Error::invalid_argument(
                "matrix embedding was computed by a different model instance (embed the matrix with this model)",
            ));
        }
        if candidates.model_instance != self.instance() {
            return Err(Error::invalid_argument(format!(
                "candidate set for head '{}' was prepared by a different model instance",
                candidates.head_name
            )));
        }
        let head = self.head_at(candidates.head);
        let mut valid_scores = vec![0.0f32; candidates.valid.len()];
        self.score_prepared(head, matrix, &candidates.prepared, &mut valid_scores)?;
        out.fill(f32::NAN);
        for (&i, &s) in candidates.valid.iter().zip(&valid_scores) {
            out[i] = s;
        }
        Ok(())
    }

    fn top_k(
        &self,
        matrix: &MatrixEmbedding,
        candidates: &CandidateSet,
        k: usize,
    ) -> Result<Vec<Ranked>> {
        let mut scores = vec![0.0f32; candidates.len()];
        self.score_into(matrix, candidates, &mut scores)?;
        let polarity = self.head_at(candidates.head).info.polarity;
        Ok(top_k_indices(&scores, k, polarity)
            .into_iter()
            .map(|index| Ranked {
                index,
                score: scores[index],
            })
            .collect())
    }
}

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
use crate::model::tasks::map_tasks;
use crate::model::{MatrixEmbedding, Model, ModelInfo, Prepared};
use crate::pattern::CsrPattern;
use crate::schedule::EncodedBatch;

/// Lines per parallel task when preparing candidates: enough to amortise a task, small
/// enough to use two threads on a compiler's few hundred candidates.
const PREPARE_TASK: usize = 128;

mod measure;
mod space;
mod topk;

pub use measure::{Measurement, TuneResult};
pub use space::{PreparedSpace, SpaceCandidates, SpaceConfig, SpaceRanked, SpaceTopK};
pub use topk::top_k_indices;

pub use crate::status::CandidateStatus;

/// Candidates prepared for one head: parsed, validated, encoded and embedded once, reusable
/// for any number of matrices.
///
/// Stored compactly, so that a set of 611 712 candidates costs its prepared rows (on the
/// native engine, [`HeadCost::stored_floats`](crate::model::HeadCost::stored_floats) per valid
/// candidate) and little else: positions of the valid candidates, and errors and measured
/// times only for the lines that have them.
///
/// # Threads
/// Immutable; `Send + Sync`.
#[derive(Debug)]
pub struct CandidateSet {
    head: usize,
    head_name: String,
    /// The model instance that prepared the set.
    model_instance: u64,
    len: usize,
    /// Positions (in the caller's list) of the valid candidates, ascending.
    valid: Vec<u32>,
    /// `(position, error)` of the rejected candidates, ascending.
    errors: Vec<(usize, Error)>,
    /// `(position, milliseconds)` of the lines with a measured time (`= ms`), ascending.
    measured: Vec<(usize, f64)>,
    /// The schedule side of the valid candidates, one row each (see [`Prepared`]).
    prepared: Prepared,
}

impl CandidateSet {
    /// Number of candidates (valid or not), in the caller's order.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no candidates.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Head these candidates were prepared for.
    pub fn head(&self) -> &str {
        &self.head_name
    }

    /// Status of candidate `index` (`None` past the end): valid, or rejected by the schema.
    pub fn status(&self, index: usize) -> Option<CandidateStatus<'_>> {
        if index >= self.len {
            return None;
        }
        Some(
            match self.errors.binary_search_by_key(&index, |(i, _)| *i) {
                Ok(pos) => CandidateStatus::InvalidSchedule(&self.errors[pos].1),
                Err(_) => CandidateStatus::Valid,
            },
        )
    }

    /// Per-candidate status, in the caller's order.
    pub fn statuses(&self) -> Vec<CandidateStatus<'_>> {
        (0..self.len).filter_map(|i| self.status(i)).collect()
    }

    /// The rejected candidates with their errors, in order.
    pub fn errors(&self) -> impl Iterator<Item = (usize, &Error)> {
        self.errors.iter().map(|(i, e)| (*i, e))
    }

    /// Number of valid candidates.
    pub fn valid_count(&self) -> usize {
        self.valid.len()
    }

    /// Measured runtimes (milliseconds) parsed from `= ms` suffixes, in the caller's order.
    pub fn measured_ms(&self) -> Vec<Option<f64>> {
        let mut out = vec![None; self.len];
        for &(i, ms) in &self.measured {
            out[i] = Some(ms);
        }
        out
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

    /// Embeds a matrix (featurizer + matrix embedder). Cached by the pattern's SHA-256
    /// digest ([`CsrPattern::content_digest`]).
    fn embed_matrix(&self, pattern: &CsrPattern) -> Result<MatrixEmbedding>;

    /// Parses, validates, encodes and embeds schedule lines for `head`. Invalid lines get a
    /// per-candidate [`CandidateStatus::InvalidSchedule`]; the call fails only on misuse (unknown head)
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
        let mut set = self.empty_candidate_set(head)?;
        self.append_candidates(&mut set, lines)?;
        Ok(set)
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
            out[i as usize] = s;
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

impl Model {
    /// An empty candidate set for `head`, to fill with [`Model::append_candidates`].
    pub(crate) fn empty_candidate_set(&self, head: &str) -> Result<CandidateSet> {
        let head_index = self.head_index(head)?;
        let h = self.head_at(head_index);
        Ok(CandidateSet {
            head: head_index,
            head_name: head.to_string(),
            model_instance: self.instance(),
            len: 0,
            valid: Vec::new(),
            errors: Vec::new(),
            measured: Vec::new(),
            prepared: self.prepare_rows(h, &[], 0)?,
        })
    }

    /// Parses, encodes and prepares `lines` and appends them to `set` (positions continue
    /// after its last candidate): how large spaces are prepared chunk by chunk.
    pub(crate) fn append_candidates<S: AsRef<str>>(
        &self,
        set: &mut CandidateSet,
        lines: &[S],
    ) -> Result<()> {
        let h = self.head_at(set.head);
        let base = set.len;
        if u32::try_from(base + lines.len()).is_err() {
            return Err(Error::invalid_argument(format!(
                "a candidate set holds at most {} candidates",
                u32::MAX
            )));
        }
        let lines: Vec<&str> = lines.iter().map(AsRef::as_ref).collect();
        let parts = if h.is_native() {
            // One pass per chunk (parse, encode, table rows, layers) in the model's pool: each
            // worker keeps its chunk in cache, and there is one fork-join per call.
            let tasks = lines.len().div_ceil(PREPARE_TASK);
            self.in_pool(|| {
                map_tasks(tasks, self.parallel(), |t| {
                    let from = t * PREPARE_TASK;
                    let chunk = &lines[from..(from + PREPARE_TASK).min(lines.len())];
                    let batch = h.schema.encode_range(chunk, from);
                    let prepared = self.prepare_rows(h, &batch.rows, batch.index.len())?;
                    Ok((from, batch, prepared))
                })
            })?
            .into_iter()
            .collect::<Result<Vec<_>>>()?
        } else {
            let batch = h.schema.encode_batch(&lines);
            let prepared = self.prepare_rows(h, &batch.rows, batch.index.len())?;
            vec![(0, batch, prepared)]
        };
        set.prepared
            .reserve(parts.iter().map(|(_, _, p)| p.len()).sum::<usize>());
        for (offset, batch, prepared) in parts {
            append_part(set, base, offset, batch, prepared);
        }
        set.len = base + lines.len();
        Ok(())
    }
}

/// Appends one encoded and prepared part of an `append_candidates` call: the call's first line
/// is candidate `base`, the part's first line is line `offset` of the call.
fn append_part(
    set: &mut CandidateSet,
    base: usize,
    offset: usize,
    batch: EncodedBatch,
    prepared: Prepared,
) {
    set.prepared.append(prepared);
    // `batch.index` counts from the call's first line already.
    set.valid
        .extend(batch.index.iter().map(|&i| (base + i) as u32));
    for (i, status) in batch.statuses.into_iter().enumerate() {
        if let Err(e) = status {
            set.errors.push((base + offset + i, e));
        }
    }
    for (i, ms) in batch.measured_ms.into_iter().enumerate() {
        if let Some(ms) = ms {
            set.measured.push((base + offset + i, ms));
        }
    }
}

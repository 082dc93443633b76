//! The ranking of a space for one matrix as data: every reported entry with its line and its
//! toolchain text (serde, for JSON output).

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::rank::{CandidateStatus, SpaceCandidates, SpaceTopK};
use crate::schedule::space::AnyConfig;
use crate::tune::{CandidateOps, Measurement, Tuned};

/// One reported candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpaceRankedEntry {
    /// 1-based predicted rank: one plus the number of ranked candidates predicted better.
    /// An unranked default (a duplicate, or rejected by the toolchain) gets the rank its
    /// score would have; `None` when it has no score (the schema rejected its line).
    pub rank: Option<usize>,
    /// Candidate index in the space's enumeration (the default may be appended last).
    pub index: usize,
    /// The model's score; `None` when the schema rejected the line.
    pub score: Option<f32>,
    /// Whether this is the toolchain's default configuration.
    pub is_default: bool,
    /// The candidate's status ([`status_text`]).
    pub status: String,
    /// The line the head's schema parsed.
    pub line: String,
    /// The configuration in the toolchain's own form ([`AnyConfig::render`]).
    pub toolchain: String,
}

/// The top `k` of a space for one matrix, plus the default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpaceRankReport {
    /// The matrix name (the SPADE CSV rows carry it).
    pub matrix: String,
    /// Rows of the matrix.
    pub rows: usize,
    /// Columns of the matrix.
    pub cols: usize,
    /// Stored entries of the matrix.
    pub nnz: usize,
    /// The head that ranked the space.
    pub head: String,
    /// The space's name (e.g. `taco-spmm`, `spade-spmm-unified`).
    pub space: String,
    /// Number of candidates, default included.
    pub candidates: usize,
    /// Number of ranked (valid, distinct) candidates.
    pub ranked: usize,
    /// The top `k`, best first, then the default if it is not among them.
    pub entries: Vec<SpaceRankedEntry>,
    /// Position of the default in `entries`.
    pub default_position: usize,
}

impl SpaceRankReport {
    /// The report of `top` over `candidates`, for the matrix named `matrix`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) when a configuration cannot be
    /// rendered (never for an enumerated one).
    pub fn new(
        matrix: &str,
        candidates: &SpaceCandidates<AnyConfig>,
        top: &SpaceTopK,
    ) -> Result<Self> {
        let shape = candidates.shape();
        let entries = top
            .entries
            .iter()
            .map(|e| {
                Ok(SpaceRankedEntry {
                    rank: e.rank.map(|r| r + 1),
                    index: e.index,
                    score: (!e.score.is_nan()).then_some(e.score),
                    is_default: e.is_default,
                    status: candidates
                        .status(e.index)
                        .map_or_else(String::new, status_text),
                    line: candidates.line(e.index).unwrap_or_default().to_owned(),
                    toolchain: candidates.render(e.index, matrix)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            matrix: matrix.to_owned(),
            rows: shape.rows,
            cols: shape.cols,
            nnz: shape.nnz,
            head: candidates.head().to_owned(),
            space: candidates.space_name().to_owned(),
            candidates: candidates.len(),
            ranked: top.ranked,
            entries,
            default_position: top.default_position,
        })
    }

    /// The default's entry.
    pub fn default_entry(&self) -> Option<&SpaceRankedEntry> {
        self.entries.get(self.default_position)
    }
}

/// A candidate status in words: `valid`, `duplicate of #N`, `invalid for this matrix: …`,
/// `rejected by the schema: …`.
pub fn status_text(status: CandidateStatus<'_>) -> String {
    match status {
        CandidateStatus::Valid => "valid".to_owned(),
        CandidateStatus::Duplicate { of } => format!("duplicate of #{of}"),
        CandidateStatus::InvalidForMatrix { reason } => {
            format!("invalid for this matrix: {reason}")
        }
        CandidateStatus::InvalidSchedule(e) => format!("rejected by the schema: {e}"),
    }
}

/// One measurement of a tuning run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneEntry {
    /// The candidate's ranking entry (rank, index, score, default, line, toolchain text).
    #[serde(flatten)]
    pub ranked: SpaceRankedEntry,
    /// 0 for the default and the seeds (or the top k), then the search round; the
    /// confirmation round comes last.
    pub round: usize,
    /// Whether this measures again a candidate measured earlier, in the confirmation round
    /// that makes the pick ([`TuneOptions::confirm`](crate::tune::TuneOptions::confirm)).
    #[serde(default)]
    pub confirmation: bool,
    /// The measured time in milliseconds; `None` when the measurement failed.
    pub ms: Option<f64>,
    /// The interleaved baseline's time, when the measurer has one.
    pub baseline_ms: Option<f64>,
    /// The candidate's time over the baseline's, round by round (median), when the measurer
    /// has a baseline ([`Measured::ratio`](crate::tune::Measured::ratio)).
    pub ratio: Option<f64>,
    /// Why the measurement failed.
    pub failure: Option<String>,
    /// Seconds since tuning started, when the measurement ended.
    pub elapsed_s: f64,
}

/// A candidate a tuning run passed over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedEntry {
    /// Candidate index.
    pub index: usize,
    /// Why.
    pub reason: String,
}

/// A tuning run as data: every measurement in the order taken, the fastest, the default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    /// The matrix name.
    pub matrix: String,
    /// The head that ranked the space.
    pub head: String,
    /// The space's name.
    pub space: String,
    /// Number of candidates, default included.
    pub candidates: usize,
    /// Number of ranked candidates.
    pub ranked: usize,
    /// The measurements, in the order taken.
    pub measurements: Vec<TuneEntry>,
    /// Candidates passed over without a measurement.
    pub skipped: Vec<SkippedEntry>,
    /// The pick ([`Tuned::best`](crate::tune::Tuned::best)): the fastest measured candidate
    /// (the default included), or after a confirmation round the fastest that held up in it;
    /// `None` when all failed.
    pub best_index: Option<usize>,
    /// Its time in milliseconds.
    pub best_ms: Option<f64>,
    /// The default's index.
    pub default_index: usize,
    /// The default's time in milliseconds, when measured.
    pub default_ms: Option<f64>,
    /// How much faster the best ran than the default ([`Tuned::speedup_over_default`]).
    pub speedup_over_default: Option<f64>,
}

impl TuneReport {
    /// The report of `tuned` over `candidates` for the matrix named `matrix`, each candidate
    /// in its toolchain's form by `ops`.
    ///
    /// # Errors
    ///
    /// When a measured candidate cannot be rendered.
    pub fn new(
        matrix: &str,
        candidates: &SpaceCandidates<AnyConfig>,
        tuned: &Tuned,
        ops: &dyn CandidateOps,
    ) -> Result<Self> {
        let measurements = tuned
            .measurements
            .iter()
            .map(|m| {
                Ok(TuneEntry {
                    ranked: SpaceRankedEntry {
                        rank: m.rank.map(|r| r + 1),
                        index: m.index,
                        score: (!m.score.is_nan()).then_some(m.score),
                        is_default: m.is_default,
                        status: candidates
                            .status(m.index)
                            .map_or_else(String::new, status_text),
                        line: candidates.line(m.index).unwrap_or_default(),
                        toolchain: ops.render(m.index)?,
                    },
                    round: m.round,
                    confirmation: m.confirmation,
                    ms: m.ms(),
                    baseline_ms: m.result.as_ref().ok().and_then(|r| r.baseline_ms),
                    ratio: m.result.as_ref().ok().and_then(|r| r.ratio),
                    failure: m.result.as_ref().err().cloned(),
                    elapsed_s: m.elapsed.as_secs_f64(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let best = tuned.best_measurement();
        Ok(Self {
            matrix: matrix.to_owned(),
            head: candidates.head().to_owned(),
            space: candidates.space_name().to_owned(),
            candidates: candidates.len(),
            ranked: tuned.ranked,
            measurements,
            skipped: tuned
                .skipped
                .iter()
                .map(|s| SkippedEntry {
                    index: s.index,
                    reason: s.reason.clone(),
                })
                .collect(),
            best_index: best.map(|b| b.index),
            best_ms: best.and_then(Measurement::ms),
            default_index: candidates.default_index(),
            default_ms: tuned.default_measurement().and_then(Measurement::ms),
            speedup_over_default: tuned.speedup_over_default(),
        })
    }
}

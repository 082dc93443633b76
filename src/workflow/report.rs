//! The ranking of a space for one matrix as data: every reported entry with its line and its
//! toolchain text (serde, for JSON output).

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::rank::{CandidateStatus, SpaceCandidates, SpaceTopK, TuneResult};
use crate::schedule::space::AnyConfig;

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
    /// The measured time in milliseconds; `None` when the measurement failed.
    pub ms: Option<f64>,
    /// Why the measurement failed, when the measure function said.
    pub failure: Option<String>,
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
    /// The measurements: the top `k` best first, then the default if it was not among them.
    pub measurements: Vec<TuneEntry>,
    /// The fastest measured candidate (the default included); `None` when all failed.
    pub best_index: Option<usize>,
    /// Its time in milliseconds.
    pub best_ms: Option<f64>,
    /// The default's index.
    pub default_index: usize,
    /// The default's time in milliseconds, when measured.
    pub default_ms: Option<f64>,
    /// `default_ms / best_ms`, when both were measured and `best_ms > 0`.
    pub speedup_over_default: Option<f64>,
}

impl TuneReport {
    /// The report of `tuned` over `candidates` for the matrix named `matrix`; `failures`
    /// gives the reason of each failed measurement, by candidate index.
    ///
    /// # Errors
    ///
    /// As [`SpaceRankReport::new`].
    pub fn new(
        matrix: &str,
        candidates: &SpaceCandidates<AnyConfig>,
        tuned: &TuneResult,
        failures: &[(usize, String)],
    ) -> Result<Self> {
        let ranking = SpaceRankReport::new(matrix, candidates, &tuned.ranking)?;
        let measurements = ranking
            .entries
            .into_iter()
            .zip(&tuned.measurements)
            .map(|(ranked, m)| TuneEntry {
                ms: m.ms,
                failure: m
                    .ms
                    .is_none()
                    .then(|| failures.iter().find(|(i, _)| *i == m.index))
                    .flatten()
                    .map(|(_, why)| why.clone()),
                ranked,
            })
            .collect();
        Ok(Self {
            matrix: matrix.to_owned(),
            head: ranking.head,
            space: ranking.space,
            candidates: ranking.candidates,
            ranked: ranking.ranked,
            measurements,
            best_index: tuned.best.map(|b| b.index),
            best_ms: tuned.best.and_then(|b| b.ms),
            default_index: candidates.default_index(),
            default_ms: tuned.default_measurement().and_then(|m| m.ms),
            speedup_over_default: tuned.speedup_over_default(),
        })
    }
}

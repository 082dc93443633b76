//! The measure-callback loop the WACO and COGNATE papers use: rank the space with the
//! model, let the caller run (measure) the top `k` plus the toolchain default, keep the
//! fastest. Because the default is always measured, the result is never slower than the
//! default (as measured).

use crate::error::Result;
use crate::model::{MatrixEmbedding, Model};
use crate::tune::{tune, LineOps, MeasureRequest, Measured, TuneOptions};

use super::space::{SpaceCandidates, SpaceTopK};

/// One measured candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Candidate index.
    pub index: usize,
    /// The model's score (NaN for a default whose line the schema rejected).
    pub score: f32,
    /// Whether this is the toolchain's default configuration.
    pub is_default: bool,
    /// The measured time in milliseconds; `None` when the callback returned `None` (the
    /// candidate failed to build or run) or a value that is not a finite, non-negative number.
    pub ms: Option<f64>,
}

/// The outcome of [`Model::tune`].
#[derive(Debug, Clone, PartialEq)]
pub struct TuneResult {
    /// The ranking the measurements followed.
    pub ranking: SpaceTopK,
    /// Every measurement, in the order they were taken: the top `k` best first, then the
    /// default if it was not among them. Each candidate is measured once.
    pub measurements: Vec<Measurement>,
    /// The fastest successful measurement, the default included (ties: the one measured
    /// first, i.e. the better-ranked one). `None` only when every measurement failed.
    pub best: Option<Measurement>,
}

impl TuneResult {
    /// The default's measurement.
    pub fn default_measurement(&self) -> Option<&Measurement> {
        self.measurements.iter().find(|m| m.is_default)
    }

    /// Measured speedup of the best candidate over the default (`default_ms / best_ms`),
    /// when both were measured and the best took a positive time.
    pub fn speedup_over_default(&self) -> Option<f64> {
        let default = self.default_measurement()?.ms?;
        let best = self.best?.ms?;
        (best > 0.0).then(|| default / best)
    }
}

impl Model {
    /// Ranks `candidates` for `matrix`, calls `measure(index)` on the top `k` (best first)
    /// and then on the default (if it is not in the top `k`), and returns the fastest
    /// measured candidate with all measurements: [`crate::tune::tune`] with
    /// [`TuneOptions::top_k`], each candidate as ranked.
    ///
    /// `measure` returns the candidate's runtime in milliseconds, or `None` if it could not
    /// be measured; a non-finite or negative time counts as `None`. The default is measured
    /// even when the schema rejected its line (the toolchain can still run it), and on its own
    /// when it duplicates a top-`k` candidate for this matrix.
    ///
    /// # Errors
    ///
    /// As [`Model::top_k_with_default`]; `measure` is not called then.
    pub fn tune<C: super::space::SpaceConfig>(
        &self,
        matrix: &MatrixEmbedding,
        candidates: &SpaceCandidates<C>,
        k: usize,
        mut measure: impl FnMut(usize) -> Option<f64>,
    ) -> Result<TuneResult> {
        let ranking = self.top_k_with_default(matrix, candidates, k)?;
        let mut measurer = |r: &MeasureRequest<'_>| -> std::result::Result<Measured, String> {
            measure(r.index)
                .map(Measured::ms)
                .ok_or_else(|| "no time".to_owned())
        };
        let ops = LineOps::new(candidates);
        let tuned = tune(
            self,
            matrix,
            candidates,
            &ops,
            &TuneOptions::top_k(k),
            &mut measurer,
        )?;
        let measurements: Vec<Measurement> = tuned
            .measurements
            .iter()
            .map(|m| Measurement {
                index: m.index,
                score: m.score,
                is_default: m.is_default,
                ms: m.objective(),
            })
            .collect();
        let best = tuned.best.map(|p| measurements[p]);
        Ok(TuneResult {
            ranking,
            measurements,
            best,
        })
    }
}

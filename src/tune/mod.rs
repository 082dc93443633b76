//! Tuning: the model as a prior, the toolchain's runtime as the truth.
//!
//! A cost model ranks for the machine it learned from (WACO's: 48 threads); on another
//! machine its top picks may run slower than the toolchain's default while faster schedules
//! exist nearby. Tuning measures what the model ranks best and goes on from what is measured,
//! as MetaSchedule-style autotuners use a frozen cost model:
//!
//! - [`Strategy::TopK`]: measure the `k` best candidates, then the default (the papers' loop);
//! - [`Strategy::Search`]: measure the default, then `k` *seeds* (the best-ranked candidates,
//!   optionally at most [`TuneOptions::seeds_per_family`] of one loop order), then rounds: the
//!   neighbours of the fastest measured candidates in the space (a split doubled or halved, two
//!   adjacent loops swapped, a format flag flipped, the chunk doubled or halved;
//!   [`CandidateOps::neighbours`]), ranked by the model, the best of them measured; when no
//!   neighbour is left, the next candidates of the ranking.
//!
//! Both stop at the [`Budget`] (a count of measurements, the default's included, and
//! optionally a time). With [`TuneOptions::distinct`], a candidate whose program another
//! measured candidate already has (same rendered TACO program, [`CandidateOps::key`]) is
//! skipped without a measurement. The default is always measured, so the result is never
//! slower than the default as measured. The model is never changed.
//!
//! The fastest of many noisy measurements is partly the luckiest (the winner's curse): with
//! [`TuneOptions::confirm`] (the search's default), the last measurements of the budget are a
//! *confirmation round* that measures the default and the few fastest candidates again. The
//! pick is the fastest of that round that beat the default's confirmation by
//! [`TuneOptions::margin`] in both of its measurements, else the default: a candidate must
//! be clearly faster twice to replace what the toolchain would run anyway.
//!
//! A [`Measurer`] runs one candidate and returns its time ([`Measured`]), optionally with the
//! time of a baseline measured in the same run (then candidates compare by the ratio, which
//! a noisy machine shifts far less than the times themselves). A closure, the C ABI's
//! callback, a shell command and the TACO measurer are measurers.
//!
//! # Example
//! ```
//! use dashrank::schedule::space::{AnySpace, MatrixShape, SpaceOptions};
//! use dashrank::tune::{tune, Measured, MeasureRequest, Strategy, ToolchainOps, TuneOptions};
//! use dashrank::{CostModel, CsrPattern, LoadOptions, Model};
//! let model = Model::load("tests/data/fixtures/tiny-cognate", &LoadOptions::default())?;
//! let pattern = CsrPattern::new(4, 4, vec![0, 1, 2, 3, 4], vec![0, 1, 2, 3])?;
//! let space = AnySpace::from_name("taco-spmm", &SpaceOptions::default())?;
//! let cands = dashrank::workflow::prepare(&model, None, &space, &MatrixShape::from(&pattern))?;
//! let matrix = model.embed_matrix(&pattern)?;
//! let ops = ToolchainOps::new(&cands, "diag4").with_pattern(&pattern);
//! let options = TuneOptions { strategy: Strategy::Search, k: 3, ..TuneOptions::default() };
//! let mut runs = 0;
//! let mut time_it = |r: &MeasureRequest<'_>| -> Result<Measured, String> {
//!     runs += 1;
//!     assert!(r.program.starts_with("taco ")); // a stock-TACO command line
//!     Ok(Measured::ms(1.0 + r.index as f64 % 5.0))
//! };
//! let tuned = tune(&model, &matrix, &cands, &ops, &options, &mut time_it)?;
//! assert!(tuned.measurements.len() <= options.budget.measurements);
//! assert!(tuned.default_measurement().is_some());
//! # Ok::<(), dashrank::Error>(())
//! ```

mod ops;
mod search;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

pub use ops::{CandidateOps, LineOps, ToolchainOps};
pub use search::tune;

use std::time::Duration;

use crate::program::taco::TacoOptions;

/// What a measurer is asked to run.
#[derive(Debug, Clone, Copy)]
pub struct MeasureRequest<'a> {
    /// Candidate index.
    pub index: usize,
    /// The candidate's line, as the head parsed it.
    pub line: &'a str,
    /// The candidate in its toolchain's form ([`CandidateOps::render`]; TACO: the command
    /// line of its program).
    pub program: &'a str,
    /// Whether it is the toolchain's default.
    pub is_default: bool,
    /// Whether this is the confirmation round's second measurement of the candidate
    /// ([`TuneOptions::confirm`]): a measurer may take more care over these few (the TACO
    /// measurer times them on more operand instances).
    pub confirmation: bool,
}

/// One measured time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Milliseconds (median of the measurer's runs).
    pub ms: f64,
    /// Milliseconds of a baseline run interleaved with the candidate, when the measurer has one.
    pub baseline_ms: Option<f64>,
    /// The candidate's time over the baseline's, run by run (median), when the measurer has a
    /// baseline: the pairs ran back to back, so load that comes and goes cancels out more
    /// than in the ratio of the medians.
    pub ratio: Option<f64>,
}

impl Measured {
    /// A time without baseline.
    pub fn ms(ms: f64) -> Self {
        Self {
            ms,
            baseline_ms: None,
            ratio: None,
        }
    }

    /// What candidates are compared by: the ratio to the baseline when there is one, else the
    /// time. `None` unless finite and non-negative.
    pub fn objective(&self) -> Option<f64> {
        let v = match (self.ratio, self.baseline_ms) {
            (Some(r), _) => r,
            (None, Some(b)) if b > 0.0 => self.ms / b,
            (None, Some(_)) => return None,
            (None, None) => self.ms,
        };
        (v.is_finite() && v >= 0.0 && self.ms.is_finite()).then_some(v)
    }
}

/// Runs candidates and times them.
pub trait Measurer {
    /// Runs one candidate: its time, or why it could not be measured (it failed to build,
    /// to run, or gave a wrong result).
    fn measure(&mut self, request: &MeasureRequest<'_>) -> Result<Measured, String>;
}

impl<F> Measurer for F
where
    F: FnMut(&MeasureRequest<'_>) -> Result<Measured, String>,
{
    fn measure(&mut self, request: &MeasureRequest<'_>) -> Result<Measured, String> {
        self(request)
    }
}

/// How much measuring a tuning run may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Measurements, the default's included (failed ones count).
    pub measurements: usize,
    /// Wall time; no measurement starts after it.
    pub time: Option<Duration>,
}

/// How candidates are chosen for measurement (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// The `k` best, then the default.
    TopK,
    /// The default, `k` seeds ([`TuneOptions::seeds_per_family`]), then neighbours of the
    /// fastest.
    Search,
}

/// Options of [`tune`].
#[derive(Debug, Clone, PartialEq)]
pub struct TuneOptions {
    /// The strategy.
    pub strategy: Strategy,
    /// [`Strategy::TopK`]: candidates measured; [`Strategy::Search`]: seeds.
    pub k: usize,
    /// [`Strategy::Search`]: the most seeds of one family ([`CandidateOps::family`]; for
    /// TACO, a loop order); 0 for no limit, the `k` best-ranked candidates. The seeds are the
    /// best-ranked candidates within the limit. A model's top candidates often share one or
    /// two loop orders, and neighbour steps rarely carry a search far from its seeds' loop
    /// orders: the limit trades depth in the best-ranked loop orders for more of them
    /// (BENCHMARKS.md §4 measures it). [`Strategy::TopK`] measures the ranking as it is.
    pub seeds_per_family: usize,
    /// The budget ([`Strategy::TopK`] stops after `k` + the default at the latest).
    pub budget: Budget,
    /// Skip candidates whose program a measured candidate already has.
    pub distinct: bool,
    /// [`Strategy::Search`]: how many of the fastest measured candidates a round expands.
    pub parents: usize,
    /// [`Strategy::Search`]: measurements per round before the parents are chosen again.
    pub per_round: usize,
    /// How many of the fastest measured candidates the confirmation round measures again,
    /// with the default (module docs); 0 for no confirmation round. The round takes
    /// `confirm + 1` measurements of the budget, and only when the budget holds them beyond
    /// the default and `k` candidates.
    pub confirm: usize,
    /// After a confirmation round, the fraction by which a candidate must beat the default's
    /// confirmation in both of its measurements to be picked over the default. It trades
    /// gains smaller than the measurements' resolution for never picking a candidate that
    /// resolution cannot tell from the default (BENCHMARKS.md §4 measures the choice). In
    /// `[0, 1)`.
    pub margin: f64,
    /// How TACO candidates become programs (threads, dense extent, layout limit).
    pub taco: TacoOptions,
}

impl Default for TuneOptions {
    /// A model-seeded search of 50 measurements: the 10 best-ranked distinct programs as seeds,
    /// rounds of 3 from the 2 fastest, distinct programs, the last 4 a confirmation round of the 3 fastest and
    /// the default.
    fn default() -> Self {
        Self {
            strategy: Strategy::Search,
            k: 10,
            seeds_per_family: 0,
            budget: Budget {
                measurements: 50,
                time: None,
            },
            distinct: true,
            parents: 2,
            per_round: 3,
            confirm: 3,
            margin: 0.02,
            taco: TacoOptions::default(),
        }
    }
}

impl TuneOptions {
    /// The papers' loop: the `k` best and the default, every candidate as ranked, each
    /// measured once.
    pub fn top_k(k: usize) -> Self {
        Self {
            strategy: Strategy::TopK,
            k,
            budget: Budget {
                measurements: k.saturating_add(1),
                time: None,
            },
            distinct: false,
            confirm: 0,
            ..Self::default()
        }
    }
}

/// One measurement of a tuning run.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// Candidate index.
    pub index: usize,
    /// The model's score (NaN when its schema rejected the default's line).
    pub score: f32,
    /// Position in the model's ranking (0 = best); `None` for an unranked default.
    pub rank: Option<usize>,
    /// Whether it is the toolchain's default.
    pub is_default: bool,
    /// 0 for the default and the seeds (or the top k), then the search round; the
    /// confirmation round comes last.
    pub round: usize,
    /// Whether this measures again a candidate measured earlier, in the confirmation round.
    pub confirmation: bool,
    /// The time, or why it failed.
    pub result: Result<Measured, String>,
    /// Time since tuning started, when the measurement ended.
    pub elapsed: Duration,
}

impl Measurement {
    /// The comparison value ([`Measured::objective`]) of a successful measurement.
    pub fn objective(&self) -> Option<f64> {
        self.result.as_ref().ok().and_then(Measured::objective)
    }

    /// Milliseconds of a successful measurement.
    pub fn ms(&self) -> Option<f64> {
        self.result.as_ref().ok().map(|m| m.ms)
    }
}

/// A candidate the run passed over without measuring it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Candidate index.
    pub index: usize,
    /// Why: its layout is too large, its program is a measured candidate's, it cannot be
    /// rendered.
    pub reason: String,
}

/// The outcome of [`tune`].
#[derive(Debug, Clone, PartialEq)]
pub struct Tuned {
    /// Every measurement, in the order taken.
    pub measurements: Vec<Measurement>,
    /// Candidates passed over, in the order met.
    pub skipped: Vec<Skipped>,
    /// Position in `measurements` of the pick. After a confirmation round with a successful
    /// measurement: its fastest candidate that beat the default by [`TuneOptions::margin`] in
    /// both of its measurements, else the default's confirmation. Otherwise the best of all
    /// (lowest objective; ties: measured first).
    pub best: Option<usize>,
    /// Number of candidates the model ranked.
    pub ranked: usize,
}

impl Tuned {
    /// The best measurement.
    pub fn best_measurement(&self) -> Option<&Measurement> {
        self.best.map(|b| &self.measurements[b])
    }

    /// The default's measurement the pick was compared with: its last successful one (its
    /// confirmation when it had one), else its last.
    pub fn default_measurement(&self) -> Option<&Measurement> {
        let mut defaults = self.measurements.iter().rev().filter(|m| m.is_default);
        let last = defaults.clone().next();
        defaults.find(|m| m.result.is_ok()).or(last)
    }

    /// How much faster the best ran than the default (`default / best` of their objectives).
    pub fn speedup_over_default(&self) -> Option<f64> {
        let d = self.default_measurement()?.objective()?;
        let b = self.best_measurement()?.objective()?;
        (b > 0.0).then(|| d / b)
    }
}

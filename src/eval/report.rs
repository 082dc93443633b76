//! Evaluation reports as data: per-matrix rows, aggregates, thresholds, and the partial
//! reports of sharded runs with their exact merge.
//!
//! # Exactness of the merge
//!
//! A [`PartialReport`] keeps every [`MatrixEval`] at full precision, and JSON numbers read
//! back to the same `f64` bits (serde_json's `float_roundtrip`). The final [`EvalReport`] is a
//! pure function of the sorted evaluations, the skipped files and the [`EvalSetup`], so
//! merging the partial reports of any sharding gives the same report, byte for byte, as one
//! unsharded run (given bit-identical scores: evaluate with
//! [`LoadOptions::deterministic`](crate::LoadOptions::deterministic)).

use serde::{Deserialize, Serialize};

use super::jobs::Shard;
use super::metrics::{mean, median, RankingMetrics};
use super::run::{MatrixEval, SkippedFile};
use crate::error::{Error, Result};
use crate::model::Model;

/// One metric of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Kendall's τ-b.
    KendallTau,
    /// Spearman's ρ.
    SpearmanRho,
    /// Ordered-pair accuracy.
    PairAccuracy,
    /// Percentage lost by the top-1 pick against the best measured.
    Top1Ape,
    /// Percentage lost by the best of the top 5 against the best measured.
    Top5Ape,
    /// Default runtime over the top-1 pick's.
    Top1Speedup,
    /// Default runtime over the best of the top 5's.
    Top5Speedup,
}

impl Metric {
    /// Every metric, in report order.
    pub const ALL: [Metric; 7] = [
        Metric::KendallTau,
        Metric::SpearmanRho,
        Metric::PairAccuracy,
        Metric::Top1Ape,
        Metric::Top5Ape,
        Metric::Top1Speedup,
        Metric::Top5Speedup,
    ];

    /// The JSON key.
    pub fn key(self) -> &'static str {
        match self {
            Metric::KendallTau => "kendall_tau",
            Metric::SpearmanRho => "spearman_rho",
            Metric::PairAccuracy => "pair_accuracy",
            Metric::Top1Ape => "top1_ape_percent",
            Metric::Top5Ape => "top5_ape_percent",
            Metric::Top1Speedup => "top1_speedup_over_default",
            Metric::Top5Speedup => "top5_speedup_over_default",
        }
    }

    /// A short column header.
    pub fn header(self) -> &'static str {
        match self {
            Metric::KendallTau => "tau",
            Metric::SpearmanRho => "rho",
            Metric::PairAccuracy => "pairs",
            Metric::Top1Ape => "top1_ape%",
            Metric::Top5Ape => "top5_ape%",
            Metric::Top1Speedup => "top1_vs_def",
            Metric::Top5Speedup => "top5_vs_def",
        }
    }

    /// The metric's value in `m`.
    pub fn of(self, m: &RankingMetrics) -> Option<f64> {
        match self {
            Metric::KendallTau => m.kendall_tau,
            Metric::SpearmanRho => m.spearman_rho,
            Metric::PairAccuracy => m.pair_accuracy,
            Metric::Top1Ape => m.top1.map(|o| o.ape_percent),
            Metric::Top5Ape => m.top5.map(|o| o.ape_percent),
            Metric::Top1Speedup => m.top1_speedup_over_default,
            Metric::Top5Speedup => m.top5_speedup_over_default,
        }
    }

    /// The value as a table cell: `n/a`, 3 decimals (correlations), 2 (percentages), or 3
    /// with an `x` (speedups).
    pub fn cell(self, value: Option<f64>) -> String {
        match (value, self) {
            (None, _) => "n/a".into(),
            (Some(v), Metric::Top1Ape | Metric::Top5Ape) => format!("{v:.2}"),
            (Some(v), Metric::Top1Speedup | Metric::Top5Speedup) => format!("{v:.3}x"),
            (Some(v), _) => format!("{v:.3}"),
        }
    }
}

/// One value per [`Metric`], serialized under the metrics' keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct PerMetric<T> {
    pub kendall_tau: T,
    pub spearman_rho: T,
    pub pair_accuracy: T,
    pub top1_ape_percent: T,
    pub top5_ape_percent: T,
    pub top1_speedup_over_default: T,
    pub top5_speedup_over_default: T,
}

impl<T> PerMetric<T> {
    fn from_fn(mut f: impl FnMut(Metric) -> T) -> Self {
        Self {
            kendall_tau: f(Metric::KendallTau),
            spearman_rho: f(Metric::SpearmanRho),
            pair_accuracy: f(Metric::PairAccuracy),
            top1_ape_percent: f(Metric::Top1Ape),
            top5_ape_percent: f(Metric::Top5Ape),
            top1_speedup_over_default: f(Metric::Top1Speedup),
            top5_speedup_over_default: f(Metric::Top5Speedup),
        }
    }

    /// The value of metric `m`.
    pub fn get(&self, m: Metric) -> &T {
        match m {
            Metric::KendallTau => &self.kendall_tau,
            Metric::SpearmanRho => &self.spearman_rho,
            Metric::PairAccuracy => &self.pair_accuracy,
            Metric::Top1Ape => &self.top1_ape_percent,
            Metric::Top5Ape => &self.top5_ape_percent,
            Metric::Top1Speedup => &self.top1_speedup_over_default,
            Metric::Top5Speedup => &self.top5_speedup_over_default,
        }
    }
}

/// Rounded to 6 decimals, so reports are stable and diffable.
fn round(v: Option<f64>) -> Option<f64> {
    v.map(|v| (v * 1e6).round() / 1e6)
}

/// Pass/fail limits checked on every matrix.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Fail if a matrix has Kendall τ below this.
    pub min_tau: Option<f64>,
    /// Fail if a matrix has Spearman ρ below this.
    pub min_rho: Option<f64>,
    /// Fail if a matrix's top-1 pick is more than this many percent slower than the best.
    pub max_top1_ape_percent: Option<f64>,
}

impl Thresholds {
    /// Checks that every limit is a finite number.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) naming the limit.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("min_tau", self.min_tau),
            ("min_rho", self.min_rho),
            ("max_top1_ape_percent", self.max_top1_ape_percent),
        ] {
            if v.is_some_and(|v| !v.is_finite()) {
                return Err(Error::invalid_argument(format!(
                    "threshold {name} must be a finite number"
                )));
            }
        }
        Ok(())
    }

    /// One message per failed check, naming the matrix and the metric (matrices in order).
    /// An undefined metric fails its check.
    pub fn check(&self, evals: &[MatrixEval]) -> Vec<String> {
        let mut failures = Vec::new();
        for r in evals {
            let m = &r.metrics;
            let checks = [
                ("Kendall tau", "min_tau", m.kendall_tau, self.min_tau, true),
                (
                    "Spearman rho",
                    "min_rho",
                    m.spearman_rho,
                    self.min_rho,
                    true,
                ),
                (
                    "top-1 APE %",
                    "max_top1_ape",
                    m.top1.map(|o| o.ape_percent),
                    self.max_top1_ape_percent,
                    false,
                ),
            ];
            for (metric, flag, value, limit, at_least) in checks {
                let Some(limit) = limit else { continue };
                match value {
                    None => failures.push(format!(
                        "{}: {metric} is undefined ({} measured candidates), {flag} {limit}",
                        r.matrix, m.candidates
                    )),
                    Some(v) if at_least && v < limit => {
                        failures.push(format!("{}: {metric} {v:.4} < {flag} {limit}", r.matrix))
                    }
                    Some(v) if !at_least && v > limit => {
                        failures.push(format!("{}: {metric} {v:.2} > {flag} {limit}", r.matrix))
                    }
                    Some(_) => {}
                }
            }
        }
        failures
    }
}

/// The model a report is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSummary {
    /// The bundle directory, as given.
    pub dir: String,
    /// Model family.
    pub family: String,
    /// Model name.
    pub name: String,
    /// Content hash (16 hex digits).
    pub content_hash: String,
    /// Backend of the dense graphs.
    pub backend: String,
    /// The head evaluated.
    pub head: String,
}

impl ModelSummary {
    /// The summary of `model` loaded from `dir`, evaluated with `head`.
    pub fn new(model: &Model, dir: &str, head: &str) -> Self {
        let info = model.info();
        Self {
            dir: dir.to_owned(),
            family: info.family.clone(),
            name: info.model_name.clone(),
            content_hash: format!("{:016x}", info.content_hash),
            backend: info.backend.clone(),
            head: head.to_owned(),
        }
    }
}

/// What an evaluation ran: the same for every shard of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSetup {
    /// The library version that wrote the report.
    pub dashrank_version: String,
    /// The model.
    pub model: ModelSummary,
    /// The measured-data directory, as given.
    pub measured_dir: String,
    /// The matrices directory, as given.
    pub matrices_dir: String,
    /// The default configuration, as given.
    pub default_schedule: Option<String>,
    /// The thresholds.
    pub thresholds: Thresholds,
}

/// One matrix in an [`EvalReport`], numbers rounded to 6 decimals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // the fields of `MatrixEval` and `RankingMetrics`, rounded
pub struct MatrixRow {
    pub matrix: String,
    pub matrix_file: String,
    pub measured_file: String,
    pub rows: usize,
    pub cols: usize,
    pub nnz: usize,
    pub lines: usize,
    pub invalid_lines: usize,
    pub line_errors: Vec<String>,
    pub unmeasured_lines: usize,
    pub candidates: usize,
    pub best_measured_ms: Option<f64>,
    pub top1_ms: Option<f64>,
    pub top5_best_ms: Option<f64>,
    pub default_ms: Option<f64>,
    pub top1_schedule: Option<String>,
    #[serde(flatten)]
    pub metrics: PerMetric<Option<f64>>,
}

impl From<&MatrixEval> for MatrixRow {
    fn from(r: &MatrixEval) -> Self {
        let m = &r.metrics;
        Self {
            matrix: r.matrix.clone(),
            matrix_file: r.matrix_file.clone(),
            measured_file: r.measured_file.clone(),
            rows: r.rows,
            cols: r.cols,
            nnz: r.nnz,
            lines: r.lines,
            invalid_lines: r.invalid_lines,
            line_errors: r.line_errors.clone(),
            unmeasured_lines: r.unmeasured_lines,
            candidates: m.candidates,
            best_measured_ms: round(m.top1.map(|o| o.best_ms)),
            top1_ms: round(m.top1.map(|o| o.chosen_ms)),
            top5_best_ms: round(m.top5.map(|o| o.chosen_ms)),
            default_ms: round(m.default_ms),
            top1_schedule: r.top1_schedule.clone(),
            metrics: PerMetric::from_fn(|k| round(k.of(m))),
        }
    }
}

/// Mean and median of one metric over the matrices where it is defined.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Mean (rounded).
    pub mean: Option<f64>,
    /// Median (rounded).
    pub median: Option<f64>,
    /// Number of matrices with a value.
    pub matrices: usize,
}

/// Aggregates over all evaluated matrices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    /// Number of evaluated matrices.
    pub matrices: usize,
    /// One summary per metric.
    #[serde(flatten)]
    pub metrics: PerMetric<Summary>,
}

/// The report of a whole evaluation (`dashrank eval --json-out`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// The library version that wrote the report.
    pub dashrank_version: String,
    /// The model.
    pub model: ModelSummary,
    /// The measured-data directory, as given.
    pub measured_dir: String,
    /// The matrices directory, as given.
    pub matrices_dir: String,
    /// The default configuration, as given.
    pub default_schedule: Option<String>,
    /// Evaluated matrices, sorted by name.
    pub matrices: Vec<MatrixRow>,
    /// Skipped measured files, sorted by file.
    pub skipped: Vec<SkippedFile>,
    /// Aggregates (computed at full precision, then rounded).
    pub aggregate: Aggregate,
    /// The thresholds.
    pub thresholds: Thresholds,
    /// Failed threshold checks, matrices in name order.
    pub failures: Vec<String>,
    /// Whether every check passed.
    pub passed: bool,
}

impl EvalReport {
    /// The report of `evals` and `skipped` (in any order; the report sorts them).
    pub fn new(setup: &EvalSetup, evals: &[MatrixEval], skipped: &[SkippedFile]) -> Self {
        let mut evals: Vec<&MatrixEval> = evals.iter().collect();
        evals.sort_by(|a, b| a.matrix.cmp(&b.matrix));
        let mut skipped = skipped.to_vec();
        skipped.sort_by(|a, b| a.measured_file.cmp(&b.measured_file));
        let sorted: Vec<MatrixEval> = evals.iter().map(|e| (*e).clone()).collect();
        let failures = setup.thresholds.check(&sorted);
        let metrics = PerMetric::from_fn(|k| {
            let values: Vec<f64> = sorted.iter().filter_map(|e| k.of(&e.metrics)).collect();
            Summary {
                mean: round(mean(&values)),
                median: round(median(&values)),
                matrices: values.len(),
            }
        });
        Self {
            dashrank_version: setup.dashrank_version.clone(),
            model: setup.model.clone(),
            measured_dir: setup.measured_dir.clone(),
            matrices_dir: setup.matrices_dir.clone(),
            default_schedule: setup.default_schedule.clone(),
            matrices: sorted.iter().map(MatrixRow::from).collect(),
            skipped,
            aggregate: Aggregate {
                matrices: sorted.len(),
                metrics,
            },
            thresholds: setup.thresholds,
            passed: failures.is_empty(),
            failures,
        }
    }

    /// Combines the partial reports of all `N` shards of one run into the report one
    /// unsharded run writes (see the module docs), returning it with every evaluation.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when the partials
    /// are not exactly shards `1/N … N/N` of one run: different setups (model, head, data,
    /// default, thresholds), shard counts or file counts, a missing or repeated shard, or a
    /// matrix in two shards.
    pub fn merge(partials: &[PartialReport]) -> Result<(Self, Vec<MatrixEval>)> {
        let first = partials
            .first()
            .ok_or_else(|| Error::invalid_argument("no partial reports to merge"))?;
        let n = first.shard.count();
        // Only the shards given are held: a count claimed by a file never sizes anything.
        let mut given = std::collections::BTreeSet::new();
        let mut evals = Vec::new();
        let mut skipped = Vec::new();
        for p in partials {
            if p.setup != first.setup {
                return Err(Error::invalid_argument(format!(
                    "shard {} was run with a different setup than shard {} (model, head, \
                     directories, default or thresholds differ)",
                    p.shard, first.shard
                )));
            }
            if p.shard.count() != n || p.files != first.files {
                return Err(Error::invalid_argument(format!(
                    "shard {} ({} measured files) does not belong to the run of shard {} ({} \
                     measured files)",
                    p.shard, p.files, first.shard, first.files
                )));
            }
            if !given.insert(p.shard.index()) {
                return Err(Error::invalid_argument(format!(
                    "shard {} is given twice",
                    p.shard
                )));
            }
            evals.extend(p.matrices.iter().cloned());
            skipped.extend(p.skipped.iter().cloned());
        }
        if given.len() < n {
            return Err(Error::invalid_argument(format!(
                "missing {} of the {n} shards: {}",
                n - given.len(),
                missing_ranges(&given, n)
            )));
        }
        let mut names: Vec<&str> = evals.iter().map(|e| e.matrix.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::invalid_argument(format!(
                "matrix {} appears in two shards",
                w[0]
            )));
        }
        if evals.len() + skipped.len() != first.files {
            return Err(Error::invalid_argument(format!(
                "the shards cover {} measured files but the run had {}",
                evals.len() + skipped.len(),
                first.files
            )));
        }
        let report = Self::new(&first.setup, &evals, &skipped);
        evals.sort_by(|a, b| a.matrix.cmp(&b.matrix));
        Ok((report, evals))
    }

    /// The report as pretty JSON with a final newline.
    pub fn to_json(&self) -> String {
        json_text(self)
    }
}

/// The shards `1..=n` not in `given` (each in `1..=n`), as ranges (`1, 3–7, 9`): at most one
/// more range than there are given shards, and only the first few listed.
fn missing_ranges(given: &std::collections::BTreeSet<usize>, n: usize) -> String {
    const LISTED: usize = 8;
    let mut ranges = Vec::new();
    let mut range = |a: usize, b: usize| {
        ranges.push(if a == b {
            a.to_string()
        } else {
            format!("{a}–{b}")
        });
    };
    // The first shard not accounted for yet (`None` past `usize::MAX`).
    let mut next = Some(1);
    for &g in given {
        if let Some(a) = next.filter(|&a| a < g) {
            range(a, g - 1);
        }
        next = g.checked_add(1);
    }
    if let Some(a) = next.filter(|&a| a <= n) {
        range(a, n);
    }
    let more = ranges.len().saturating_sub(LISTED);
    ranges.truncate(LISTED);
    let mut text = ranges.join(", ");
    if more > 0 {
        text += &format!(" and {more} more ranges");
    }
    text
}

/// What one shard of a sharded evaluation writes (`dashrank eval --shard I/N --json-out`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartialReport {
    /// Always [`PartialReport::FORMAT`].
    pub format: String,
    /// Which shard.
    pub shard: Shard,
    /// Measured files of the whole run (all shards).
    pub files: usize,
    /// The run's setup.
    pub setup: EvalSetup,
    /// This shard's evaluations, at full precision, sorted by matrix name.
    pub matrices: Vec<MatrixEval>,
    /// This shard's skipped files, sorted by file.
    pub skipped: Vec<SkippedFile>,
}

impl PartialReport {
    /// The format tag of partial reports.
    pub const FORMAT: &'static str = "dashrank-eval-partial/1";

    /// The partial report of shard `shard` of a run over `files` measured files.
    pub fn new(
        shard: Shard,
        files: usize,
        setup: EvalSetup,
        mut matrices: Vec<MatrixEval>,
        mut skipped: Vec<SkippedFile>,
    ) -> Self {
        matrices.sort_by(|a, b| a.matrix.cmp(&b.matrix));
        skipped.sort_by(|a, b| a.measured_file.cmp(&b.measured_file));
        Self {
            format: Self::FORMAT.to_owned(),
            shard,
            files,
            setup,
            matrices,
            skipped,
        }
    }

    /// Reads a partial report.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for malformed JSON
    /// or another format (e.g. a final report given instead of a partial one).
    pub fn from_json(text: &str) -> Result<Self> {
        let p: Self = serde_json::from_str(text).map_err(|e| {
            let hint = if text.contains("\"aggregate\"") {
                " (this looks like a final report; merge the reports written with --shard)"
            } else {
                ""
            };
            Error::invalid_argument(format!("not a partial evaluation report: {e}{hint}"))
        })?;
        if p.format != Self::FORMAT {
            return Err(Error::invalid_argument(format!(
                "partial report format '{}' is not '{}'",
                p.format,
                Self::FORMAT
            )));
        }
        Ok(p)
    }

    /// The report as pretty JSON with a final newline.
    pub fn to_json(&self) -> String {
        json_text(self)
    }
}

fn json_text<T: Serialize>(value: &T) -> String {
    // Serializing plain data with string keys cannot fail.
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::missing_ranges;

    #[test]
    fn missing_shards_are_listed_as_ranges() {
        let set = |v: &[usize]| v.iter().copied().collect::<BTreeSet<_>>();
        assert_eq!(missing_ranges(&set(&[2]), 3), "1, 3");
        assert_eq!(missing_ranges(&set(&[1, 2]), 7), "3–7");
        assert_eq!(
            missing_ranges(&set(&[1]), usize::MAX),
            format!("2–{}", usize::MAX)
        );
        assert_eq!(
            missing_ranges(&set(&[2, usize::MAX]), usize::MAX),
            format!("1, 3–{}", usize::MAX - 1)
        );
        let every_other: Vec<usize> = (1..=40).step_by(2).collect();
        assert_eq!(
            missing_ranges(&set(&every_other), 40),
            "2, 4, 6, 8, 10, 12, 14, 16 and 12 more ranges"
        );
    }
}

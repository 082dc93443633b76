//! Offline evaluation of a cost model against measured runtimes: the metrics the papers use,
//! the evaluation of a directory of measured files, and its report.
//!
//! - [`metrics`]: Kendall τ, Spearman ρ, ordered-pair accuracy, top-k APE, speedups over
//!   the default ([`ranking_metrics`]);
//! - [`find_measured_files`] pairs each measured file (`<matrix>.txt` in WACO's
//!   `<tokens> = <ms>` form, or `<matrix>.csv`) with its matrix; a [`Shard`] `I/N` takes a
//!   deterministic part of that list, balanced by each file's [`FileWork`] (nonzeros ×
//!   measured lines);
//! - [`Evaluator`] evaluates one head on each file, in parallel, into [`MatrixEval`]s;
//! - [`EvalReport`] is the final report (what `dashrank eval --json-out` writes);
//!   [`PartialReport`] is one shard's, and [`EvalReport::merge`] combines the shards exactly.
//!
//! # Example
//! ```
//! use dashrank::eval::{EvalReport, EvalSetup, Evaluator, FileWork, ModelSummary, PartialReport, Shard};
//! use dashrank::{LoadOptions, Model};
//! # let dir = std::env::temp_dir().join(format!("dashrank-eval-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(dir.join("measured"))?;
//! # std::fs::create_dir_all(dir.join("matrices"))?;
//! # std::fs::write(dir.join("matrices/a.mtx"), "%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 1\n2 2\n3 3\n")?;
//! # std::fs::write(dir.join("measured/a.txt"), "1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1 = 2.5\n2 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1 = 1.5\n")?;
//! # std::fs::write(dir.join("measured/b.txt"), "# nothing measured yet\n")?;
//! # std::fs::copy(dir.join("matrices/a.mtx"), dir.join("matrices/b.mtx"))?;
//! let options = LoadOptions { deterministic: true, ..LoadOptions::default() };
//! let model = Model::load("tests/data/fixtures/tiny-waco-spmm", &options)?;
//! let files = dashrank::eval::find_measured_files(&dir.join("measured"), &dir.join("matrices"))?;
//! let evaluator = Evaluator::new(&model, "cpu-taco/spmm", None)?;
//! let setup = EvalSetup {
//!     dashrank_version: "doc".into(),
//!     model: ModelSummary::new(&model, "tiny-waco-spmm", "cpu-taco/spmm"),
//!     measured_dir: "measured".into(),
//!     matrices_dir: "matrices".into(),
//!     default_schedule: None,
//!     thresholds: Default::default(),
//! };
//! // Each of two shards evaluates its part of the files, balanced by work ...
//! let work = files.iter().map(|f| Ok(FileWork::of(f)?.units())).collect::<dashrank::Result<Vec<u64>>>()?;
//! let mut partials = Vec::new();
//! for shard in [Shard::new(1, 2)?, Shard::new(2, 2)?] {
//!     let (mut evals, mut skipped) = (Vec::new(), Vec::new());
//!     for f in shard.select(files.clone(), &work) {
//!         match evaluator.evaluate(&f)? {
//!             dashrank::eval::FileOutcome::Evaluated(e) => evals.push(*e),
//!             dashrank::eval::FileOutcome::Skipped(s) => skipped.push(s),
//!         }
//!     }
//!     partials.push(PartialReport::new(shard, files.len(), setup.clone(), evals, skipped));
//! }
//! // ... and the merge is the report of the whole run.
//! let (report, _) = EvalReport::merge(&partials)?;
//! assert_eq!(report.matrices.len(), 1);
//! assert_eq!(report.skipped[0].reason, "the measured file has no schedule lines");
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod jobs;
mod measured;
pub mod metrics;
mod report;
mod run;
mod work;

pub use jobs::{find_measured_files, MeasuredFile, MeasuredFormat, Shard};
pub use measured::read_measured_csv;
pub use metrics::{
    kendall_tau_b, mean, median, ordered_pair_accuracy, oriented, predicted_ranks, ranking_metrics,
    spearman_rho, top_k_outcome, RankingMetrics, TopKOutcome,
};
pub use report::{
    Aggregate, EvalReport, EvalSetup, MatrixRow, Metric, ModelSummary, PartialReport, PerMetric,
    Summary, Thresholds,
};
pub use run::{Evaluator, FileError, FileOutcome, MatrixEval, SkippedFile, MAX_LINE_ERRORS};
pub use work::FileWork;

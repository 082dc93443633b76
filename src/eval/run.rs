//! Evaluating a model on measured files: one matrix at a time ([`Evaluator::evaluate`]) or
//! many in parallel ([`Evaluator::evaluate_all`]).

use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::jobs::{MeasuredFile, MeasuredFormat};
use super::metrics::{oriented, predicted_ranks, ranking_metrics, RankingMetrics};
use crate::error::{Error, Result};
use crate::model::{Model, ScorePolarity};
use crate::schedule::{read_measured_file, ParsedLine, Schedule, Schema};
use crate::{CostModel, CsrPattern};

/// How many invalid-line messages are kept per matrix.
pub const MAX_LINE_ERRORS: usize = 5;

/// The evaluation of one matrix, at full precision (what a partial report stores).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixEval {
    /// The matrix name.
    pub matrix: String,
    /// The matrix file, as given.
    pub matrix_file: String,
    /// The measured file, as given.
    pub measured_file: String,
    /// Rows of the matrix.
    pub rows: usize,
    /// Columns of the matrix.
    pub cols: usize,
    /// Stored entries of the matrix.
    pub nnz: usize,
    /// Schedule lines in the measured file (valid or not; blank and `#` lines not counted).
    pub lines: usize,
    /// Lines that are not valid schedules for the head (skipped).
    pub invalid_lines: usize,
    /// The first [`MAX_LINE_ERRORS`] invalid-line messages.
    pub line_errors: Vec<String>,
    /// Valid lines without a measured runtime (skipped).
    pub unmeasured_lines: usize,
    /// The metrics over the measured candidates.
    pub metrics: RankingMetrics,
    /// `(predicted rank, measured ms)` per measured candidate, in file order.
    pub points: Vec<(usize, f64)>,
    /// The model's top-1 schedule, in the schema's text format.
    pub top1_schedule: Option<String>,
}

/// A measured file that could not be evaluated, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedFile {
    /// The measured file, as given.
    pub measured_file: String,
    /// Why it was skipped.
    pub reason: String,
}

/// The failure of one measured file: what was being done, to which file, and the error.
#[derive(Debug)]
pub struct FileError {
    /// What failed, e.g. `reading matrix`.
    pub stage: &'static str,
    /// The file it failed on.
    pub path: PathBuf,
    /// The error.
    pub error: Error,
}

impl FileError {
    fn new<'p>(stage: &'static str, path: &'p Path) -> impl FnOnce(Error) -> Box<Self> + 'p {
        move |error| {
            Box::new(Self {
                stage,
                path: path.to_owned(),
                error,
            })
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.stage, self.path.display())
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// What became of one measured file.
#[derive(Debug, Clone, PartialEq)]
pub enum FileOutcome {
    /// It was evaluated.
    Evaluated(Box<MatrixEval>),
    /// It was skipped (no matrix, empty, nothing measured).
    Skipped(SkippedFile),
}

/// The schedule lines of a measured file, sorted: the measured schedules with their
/// runtimes, and counts of the lines skipped.
struct Tally<'l> {
    schedules: Vec<&'l Schedule>,
    measured: Vec<f64>,
    invalid_lines: usize,
    unmeasured_lines: usize,
    /// The first [`MAX_LINE_ERRORS`] invalid-line messages.
    line_errors: Vec<String>,
}

impl<'l> Tally<'l> {
    fn of(lines: &'l [(usize, Result<ParsedLine>)]) -> Self {
        let mut tally = Tally {
            schedules: Vec::new(),
            measured: Vec::new(),
            invalid_lines: 0,
            unmeasured_lines: 0,
            line_errors: Vec::new(),
        };
        for (_, line) in lines {
            match line {
                Ok(ParsedLine {
                    schedule,
                    measured_ms: Some(ms),
                }) => {
                    tally.schedules.push(schedule);
                    tally.measured.push(*ms);
                }
                Ok(_) => tally.unmeasured_lines += 1,
                Err(e) => {
                    tally.invalid_lines += 1;
                    if tally.line_errors.len() < MAX_LINE_ERRORS {
                        tally.line_errors.push(e.to_string());
                    }
                }
            }
        }
        tally
    }
}

/// Evaluates one head of a model against measured files.
///
/// # Threads
/// Holds `&Model` and immutable data: `Send + Sync`; [`Evaluator::evaluate_all`] evaluates
/// files in parallel.
#[derive(Debug)]
pub struct Evaluator<'a> {
    model: &'a Model,
    head: String,
    schema: &'a Schema,
    polarity: ScorePolarity,
    default: Option<Schedule>,
}

impl<'a> Evaluator<'a> {
    /// An evaluator of `head`; `default` is the toolchain's default configuration as a line of
    /// the head's schema (top-1/top-5 speedups over it are reported where it was measured).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnknownHead`](crate::ErrorKind::UnknownHead), or the schema's
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) error for a bad `default`.
    pub fn new(model: &'a Model, head: &str, default: Option<&str>) -> Result<Self> {
        let polarity = model.info().head(head)?.polarity;
        let schema = model.schema(head)?;
        let default = default
            .map(|line| schema.parse_line(line).map(|p| p.schedule))
            .transpose()?;
        Ok(Self {
            model,
            head: head.to_owned(),
            schema,
            polarity,
            default,
        })
    }

    /// The head evaluated.
    pub fn head(&self) -> &str {
        &self.head
    }

    /// Evaluates one measured file against its matrix.
    ///
    /// A file is skipped (not an error) when it has no matrix, no schedule line, or no line
    /// with a measured runtime.
    ///
    /// # Errors
    ///
    /// A [`FileError`] naming the file and the stage: an unreadable measured file or matrix,
    /// a measured file none of whose lines is a valid schedule for the head, or a model
    /// failure.
    pub fn evaluate(&self, file: &MeasuredFile) -> Result<FileOutcome, Box<FileError>> {
        let reading = || FileError::new("reading measured data", &file.measured);
        let skip = |reason: String| {
            Ok(FileOutcome::Skipped(SkippedFile {
                measured_file: file.measured.display().to_string(),
                reason,
            }))
        };
        let Some(matrix_path) = &file.matrix else {
            return skip(format!("no {0}.csr or {0}.mtx for it", file.name));
        };
        let lines = self.read_lines(file).map_err(reading())?;
        if lines.is_empty() {
            return skip("the measured file has no schedule lines".into());
        }
        let tally = Tally::of(&lines);
        if tally.schedules.is_empty() {
            if tally.invalid_lines == lines.len() {
                return Err(reading()(Error::invalid_argument(format!(
                    "none of its {} lines is a valid schedule for head {} (first error: {})",
                    lines.len(),
                    self.head,
                    tally.line_errors.first().map_or("", String::as_str)
                ))));
            }
            return skip("no schedule line has a measured runtime".into());
        }
        let texts: Vec<String> = tally
            .schedules
            .iter()
            .map(|s| self.schema.format(s))
            .collect();
        let (pattern, predicted) = self.predict(file, matrix_path, &texts)?;
        let default_index = self
            .default
            .as_ref()
            .and_then(|d| tally.schedules.iter().position(|s| *s == d));
        let metrics = ranking_metrics(&predicted, &tally.measured, default_index);
        let ranks = predicted_ranks(&predicted);
        let top1_schedule = ranks.iter().position(|&r| r == 1).map(|i| texts[i].clone());
        Ok(FileOutcome::Evaluated(Box::new(MatrixEval {
            matrix: file.name.clone(),
            matrix_file: matrix_path.display().to_string(),
            measured_file: file.measured.display().to_string(),
            rows: pattern.nrows(),
            cols: pattern.ncols(),
            nnz: pattern.nnz(),
            lines: lines.len(),
            invalid_lines: tally.invalid_lines,
            line_errors: tally.line_errors,
            unmeasured_lines: tally.unmeasured_lines,
            metrics,
            points: ranks.into_iter().zip(tally.measured).collect(),
            top1_schedule,
        })))
    }

    /// Scores the schedules `texts` of `file` on its matrix: the matrix read, and the scores
    /// oriented so that lower predicts faster.
    fn predict(
        &self,
        file: &MeasuredFile,
        matrix_path: &Path,
        texts: &[String],
    ) -> Result<(CsrPattern, Vec<f64>), Box<FileError>> {
        let candidates = self
            .model
            .prepare_candidates(&self.head, texts)
            .map_err(FileError::new("embedding the schedules of", &file.measured))?;
        let pattern = CsrPattern::read_file(matrix_path)
            .map_err(FileError::new("reading matrix", matrix_path))?;
        let embedding = self
            .model
            .embed_matrix(&pattern)
            .map_err(FileError::new("embedding matrix", matrix_path))?;
        let mut scores = vec![0.0f32; candidates.len()];
        self.model
            .score_into(&embedding, &candidates, &mut scores)
            .map_err(FileError::new("scoring the schedules of", &file.measured))?;
        let predicted = oriented(&scores, self.polarity);
        if predicted.iter().any(|s| s.is_nan()) {
            return Err(FileError::new("scoring the schedules of", &file.measured)(
                Error::invalid_argument(
                    "the model gave a NaN score (a schedule the schema accepted was rejected)",
                ),
            ));
        }
        Ok((pattern, predicted))
    }

    /// Evaluates `files` in parallel on `threads` workers (`None`: all cores), calling
    /// `on_done` after each file; the results are in `files` order.
    ///
    /// # Errors
    ///
    /// Only when the worker pool cannot start; each file's own error is in its entry.
    pub fn evaluate_all(
        &self,
        files: &[MeasuredFile],
        threads: Option<usize>,
        on_done: &(dyn Fn(&MeasuredFile) + Sync),
    ) -> Result<Vec<Result<FileOutcome, Box<FileError>>>> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.unwrap_or(0))
            .build()
            .map_err(|e| Error::invalid_argument(format!("cannot start worker threads: {e}")))?;
        Ok(pool.install(|| {
            files
                .par_iter()
                .map(|f| {
                    let r = self.evaluate(f);
                    on_done(f);
                    r
                })
                .collect()
        }))
    }

    fn read_lines(&self, file: &MeasuredFile) -> Result<Vec<(usize, Result<ParsedLine>)>> {
        match file.format {
            MeasuredFormat::Csv => {
                let f = File::open(&file.measured)
                    .map_err(|e| Error::io(Some(file.measured.clone()), e))?;
                super::read_measured_csv(BufReader::new(f), self.schema)
            }
            MeasuredFormat::Waco => read_measured_file(&file.measured, self.schema),
        }
    }
}

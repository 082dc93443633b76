//! Measuring a candidate with an external command: the measure step of
//! [`Model::tune`](crate::Model::tune) for toolchains driven from a shell (`dashrank tune
//! --measure-cmd`).
//!
//! The command is a `sh -c` template in which `{}` stands for the candidate in its toolchain's
//! form ([`AnyConfig::render`](crate::schedule::space::AnyConfig::render)), passed as **one**
//! shell-quoted word. The environment also carries `DASHRANK_CANDIDATE` (the same text),
//! `DASHRANK_LINE` (the line the head parsed) and `DASHRANK_INDEX` (the candidate index). The
//! command prints its runtime in milliseconds on stdout ([`parse_ms`]) and exits 0; anything
//! else — a non-zero exit, no number, a run longer than the timeout — is a failed
//! measurement, which tuning skips.
//!
//! The command runs in a process group of its own. At the timeout the whole group is killed
//! and its pipes are closed at once, even if a background child still holds them; when the
//! command exits, whatever it left running in its group is killed too, so no run leaves
//! processes behind (a process that leaves the group, e.g. with `setsid`, is its own). Only the
//! last 64 KiB of stdout and of stderr are kept, so a command that prints without end costs
//! bounded memory.

use std::fmt;
use std::process::Command;
use std::time::Duration;

use super::process::{self, Outcome};
use crate::error::{Error, Result};

/// A measuring command (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasureCommand {
    template: String,
    timeout: Duration,
}

/// Why a measurement failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MeasureFailure {
    /// The command could not be started.
    Spawn(String),
    /// The command ran longer than the timeout and was killed.
    Timeout(Duration),
    /// The command exited unsuccessfully (`code` is `None` when a signal ended it).
    Exit {
        /// Exit code.
        code: Option<i32>,
        /// The last line of its stderr.
        stderr: String,
    },
    /// The command succeeded but printed no time.
    NoTime {
        /// The last line of its stdout.
        stdout: String,
    },
}

impl fmt::Display for MeasureFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MeasureFailure::Spawn(e) => write!(f, "could not start the command: {e}"),
            MeasureFailure::Timeout(t) => write!(f, "timed out after {:.3} s", t.as_secs_f64()),
            MeasureFailure::Exit { code, stderr } => {
                match code {
                    Some(c) => write!(f, "exited with status {c}")?,
                    None => write!(f, "killed by a signal")?,
                }
                if !stderr.is_empty() {
                    write!(f, ": {stderr}")?;
                }
                Ok(())
            }
            MeasureFailure::NoTime { stdout } => {
                write!(f, "printed no time in milliseconds (last line: '{stdout}')")
            }
        }
    }
}

impl std::error::Error for MeasureFailure {}

impl MeasureCommand {
    /// The longest timeout accepted: one week.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

    /// A command from its template; `timeout` bounds each run.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when the template
    /// has no `{}`, or the timeout is zero or longer than [`MAX_TIMEOUT`](Self::MAX_TIMEOUT).
    pub fn new(template: &str, timeout: Duration) -> Result<Self> {
        if !template.contains("{}") {
            return Err(Error::invalid_argument(format!(
                "measure command '{template}' has no {{}} where the candidate goes"
            )));
        }
        if timeout.is_zero() {
            return Err(Error::invalid_argument(
                "the measure timeout must be positive",
            ));
        }
        if timeout > Self::MAX_TIMEOUT {
            return Err(Error::invalid_argument(format!(
                "the measure timeout of {} s is longer than the {} s accepted",
                timeout.as_secs_f64(),
                Self::MAX_TIMEOUT.as_secs()
            )));
        }
        Ok(Self {
            template: template.to_owned(),
            timeout,
        })
    }

    /// The shell command line for a candidate: `{}` replaced by `candidate`, single-quoted.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let cmd = dashrank::workflow::MeasureCommand::new("run {} --ms", Duration::from_secs(1))?;
    /// assert_eq!(cmd.command_line("-s=split(i,i1,i0,4) it's"), r"run '-s=split(i,i1,i0,4) it'\''s' --ms");
    /// # Ok::<(), dashrank::Error>(())
    /// ```
    pub fn command_line(&self, candidate: &str) -> String {
        self.template.replace("{}", &shell_quote(candidate))
    }

    /// Runs the command for one candidate and returns its time in milliseconds.
    ///
    /// # Errors
    ///
    /// A [`MeasureFailure`] saying why there is no time.
    pub fn measure(
        &self,
        index: usize,
        line: &str,
        candidate: &str,
    ) -> Result<f64, MeasureFailure> {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(self.command_line(candidate))
            .env("DASHRANK_CANDIDATE", candidate)
            .env("DASHRANK_LINE", line)
            .env("DASHRANK_INDEX", index.to_string());
        let (status, stdout, stderr) = match process::run(cmd, self.timeout) {
            Outcome::Exited {
                status,
                stdout,
                stderr,
            } => (status, stdout, stderr),
            Outcome::TimedOut => return Err(MeasureFailure::Timeout(self.timeout)),
            Outcome::Failed(e) => return Err(MeasureFailure::Spawn(e)),
        };
        if !status.success() {
            return Err(MeasureFailure::Exit {
                code: status.code(),
                stderr: last_line(&stderr),
            });
        }
        parse_ms(&stdout).ok_or_else(|| MeasureFailure::NoTime {
            stdout: last_line(&stdout),
        })
    }
}

/// The time a measuring command printed: the **last** whitespace-separated token of `stdout`
/// that is a finite, non-negative number once a trailing `ms` and trailing `,;:` are removed
/// (so `1.25`, `1.25ms`, `time: 1.25 ms` all read 1.25).
///
/// ```
/// use dashrank::workflow::parse_ms;
/// assert_eq!(parse_ms("compile ok\ntime: 1.25 ms\n"), Some(1.25));
/// assert_eq!(parse_ms("3 runs, median 0.5ms;"), Some(0.5));
/// assert_eq!(parse_ms("failed"), None);
/// assert_eq!(parse_ms("-1"), None);
/// ```
pub fn parse_ms(stdout: &str) -> Option<f64> {
    stdout.split_whitespace().rev().find_map(|token| {
        let t = token.trim_end_matches([',', ';', ':']);
        let t = t.strip_suffix("ms").unwrap_or(t);
        t.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0)
    })
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn last_line(text: &str) -> String {
    let line = text.lines().rev().find(|l| !l.trim().is_empty());
    line.unwrap_or("").trim().chars().take(200).collect()
}

//! Measuring a candidate with an external command: the measurer of `dashrank tune
//! --measure-cmd` (see `tune.rs`).
//!
//! The command is a `sh -c` template in which `{}` stands for the candidate in its toolchain's
//! form (`SpaceCandidates::render`), passed as **one**
//! shell-quoted word. The environment also carries `DASHRANK_CANDIDATE` (the same text),
//! `DASHRANK_LINE` (the line the head parsed) and `DASHRANK_INDEX` (the candidate index). The
//! command prints its runtime in milliseconds on stdout ([`parse_ms`]) and exits 0; anything
//! else — a non-zero exit, no number, a run longer than the timeout (then its whole process
//! group is killed) — is a failed measurement, which tuning skips.

use std::fmt;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

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
    /// A command from its template; `timeout` bounds each run.
    ///
    /// # Errors
    ///
    /// When the template
    /// has no `{}` or the timeout is zero.
    pub fn new(template: &str, timeout: Duration) -> Result<Self> {
        if !template.contains("{}") {
            bail!("measure command '{template}' has no {{}} where the candidate goes");
        }
        if timeout.is_zero() {
            bail!("the measure timeout must be positive");
        }
        Ok(Self {
            template: template.to_owned(),
            timeout,
        })
    }

    /// The shell command line for a candidate: `{}` replaced by `candidate`, single-quoted.
    ///
    /// `run {} --ms` with `-s=split(i,i1,i0,4) it's` gives `run '-s=split(i,i1,i0,4) it'\''s' --ms`.
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
            .env("DASHRANK_INDEX", index.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd
            .spawn()
            .map_err(|e| MeasureFailure::Spawn(e.to_string()))?;
        let out = child.stdout.take().map(drain);
        let err = child.stderr.take().map(drain);
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() >= self.timeout => {
                    kill_group(&mut child);
                    return Err(MeasureFailure::Timeout(self.timeout));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => {
                    kill_group(&mut child);
                    return Err(MeasureFailure::Spawn(e.to_string()));
                }
            }
        };
        let text = |h: Option<std::thread::JoinHandle<String>>| {
            h.and_then(|h| h.join().ok()).unwrap_or_default()
        };
        let (stdout, stderr) = (text(out), text(err));
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
/// `compile ok\ntime: 1.25 ms` and `3 runs, median 0.5ms;` read 1.25 and 0.5; `failed` and `-1`
/// read nothing.
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

/// Reads a pipe to the end on its own thread (so a chatty command never blocks on a full
/// pipe); the text is lossily decoded.
fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Kills the command's process group (the shell and everything it started) and reaps it.
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: `kill` has no memory-safety preconditions; `-pid` names the process group
        // the child leads (it was spawned with `process_group(0)`).
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn times_are_the_last_number_printed() {
        assert_eq!(parse_ms("compile ok\ntime: 1.25 ms\n"), Some(1.25));
        assert_eq!(parse_ms("3 runs, median 0.5ms;"), Some(0.5));
        assert_eq!(parse_ms("failed"), None);
        assert_eq!(parse_ms("-1"), None);
        let cmd = MeasureCommand::new("run {} --ms", Duration::from_secs(1)).unwrap();
        assert_eq!(
            cmd.command_line("-s=split(i,i1,i0,4) it's"),
            r"run '-s=split(i,i1,i0,4) it'\''s' --ms"
        );
    }

    #[test]
    fn measure_command_reads_times_and_reports_failures() {
        let t = Duration::from_secs(10);
        let cmd =
            MeasureCommand::new("printf 'got %s\\n' {}; echo \"$DASHRANK_INDEX\" ms", t).unwrap();
        assert_eq!(cmd.measure(7, "1 2", "a b").unwrap(), 7.0);
        let cmd = MeasureCommand::new("test {} = 'x y' && echo 2.5ms", t).unwrap();
        assert_eq!(cmd.measure(0, "", "x y").unwrap(), 2.5);
        let cmd = MeasureCommand::new("echo oops >&2; exit 3 # {}", t).unwrap();
        assert_eq!(
            cmd.measure(0, "", "c").unwrap_err(),
            MeasureFailure::Exit {
                code: Some(3),
                stderr: "oops".into()
            }
        );
        let cmd = MeasureCommand::new("echo no time here {}", t).unwrap();
        assert!(matches!(
            cmd.measure(0, "", "c"),
            Err(MeasureFailure::NoTime { .. })
        ));
        // A command (and the child it starts) running past the timeout is killed.
        let started = std::time::Instant::now();
        let cmd =
            MeasureCommand::new("sleep 30 | cat; echo 1 {}", Duration::from_millis(300)).unwrap();
        let e = cmd.measure(0, "", "c").unwrap_err();
        assert_eq!(e, MeasureFailure::Timeout(Duration::from_millis(300)));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(e.to_string().contains("timed out"));
        assert!(MeasureCommand::new("no placeholder", t).is_err());
        assert!(MeasureCommand::new("x {}", Duration::ZERO).is_err());
    }
}

//! Measuring a candidate with an external command: the measure step of
//! `dashrank tune --measure-cmd` (see `tune.rs`).
//!
//! The command is a `sh -c` template in which `{}` stands for the candidate in its toolchain's
//! form (`SpaceCandidates::render`), passed as **one**
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
    /// The longest timeout accepted: one week.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

    /// A command from its template; `timeout` bounds each run.
    ///
    /// # Errors
    ///
    /// When the template
    /// has no `{}`, or the timeout is zero or longer than [`MAX_TIMEOUT`](Self::MAX_TIMEOUT).
    pub fn new(template: &str, timeout: Duration) -> Result<Self> {
        if !template.contains("{}") {
            bail!("measure command '{template}' has no {{}} where the candidate goes");
        }
        if timeout.is_zero() {
            bail!("the measure timeout must be positive");
        }
        if timeout > Self::MAX_TIMEOUT {
            bail!(
                "the measure timeout of {} s is longer than the {} s accepted",
                timeout.as_secs_f64(),
                Self::MAX_TIMEOUT.as_secs()
            );
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

    /// Processes of group `pgid` still running a second after the call (a killed process needs
    /// a moment to die; zombies, which only wait to be reaped by their new parent, do not count),
    /// from `/proc`.
    #[cfg(target_os = "linux")]
    fn live_in_group(pgid: u32) -> Vec<u32> {
        let started = std::time::Instant::now();
        loop {
            let live = live_in_group_now(pgid);
            if live.is_empty() || started.elapsed() > Duration::from_secs(1) {
                return live;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[cfg(target_os = "linux")]
    fn live_in_group_now(pgid: u32) -> Vec<u32> {
        let mut live = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // After the command name in parentheses: state, ppid, pgrp, ...
            let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
            if rest[0] != "Z" && rest[2] == pgid.to_string() {
                live.push(pid);
            }
        }
        live
    }

    /// Runs `template` (which may use `$GROUP_FILE`, where the command writes its process group)
    /// on a thread, and returns its result, how long it took and the group, or `None` when it has
    /// not returned after 20 s (the group is then killed).
    #[cfg(target_os = "linux")]
    fn measure_bounded(
        template: &str,
        timeout: Duration,
    ) -> Option<(std::result::Result<f64, MeasureFailure>, Duration, u32)> {
        let file = std::env::temp_dir().join(format!(
            "dashrank-measure-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let template = format!("echo $$ > '{}'; {template}", file.display());
        let cmd = MeasureCommand::new(&template, timeout).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let started = std::time::Instant::now();
        std::thread::spawn(move || {
            let _ = tx.send(cmd.measure(0, "", "c"));
        });
        let result = rx.recv_timeout(Duration::from_secs(20));
        let group: u32 = std::fs::read_to_string(&file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::fs::remove_file(&file).ok();
        match result {
            Ok(r) => Some((r, started.elapsed(), group)),
            Err(_) => {
                // SAFETY: `kill` has no memory-safety preconditions; cleaning up the test's group.
                unsafe { libc::kill(-(group as libc::pid_t), libc::SIGKILL) };
                None
            }
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_background_child_holding_stdout_is_not_waited_for_and_not_left_behind() {
        // The child keeps stdout open for 15 s; the measurement is over when the shell exits.
        let (r, took, group) =
            measure_bounded("(sleep 15 &); echo 1.5 {}", Duration::from_secs(2)).unwrap();
        assert_eq!(r, Ok(1.5));
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert_eq!(live_in_group(group), Vec::<u32>::new(), "orphans left");
        // A child that would never end does not hang the measurement.
        let (r, took, group) =
            measure_bounded("sleep 1e9 & echo 2 {}", Duration::from_secs(60)).expect("returns");
        assert_eq!(r, Ok(2.0));
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert_eq!(live_in_group(group), Vec::<u32>::new(), "orphans left");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_timeout_ends_the_whole_group_and_closes_the_pipes() {
        let t = Duration::from_millis(500);
        let (r, took, group) = measure_bounded("sleep 1e9 & sleep 1e9; echo 1 {}", t).unwrap();
        assert_eq!(r, Err(MeasureFailure::Timeout(t)));
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert_eq!(live_in_group(group), Vec::<u32>::new(), "orphans left");
        // Endless output: only its tail is kept, and the timeout still holds.
        let (r, took, _) = measure_bounded("yes; echo {}", t).unwrap();
        assert_eq!(r, Err(MeasureFailure::Timeout(t)));
        assert!(took < Duration::from_secs(3), "{took:?}");
    }

    #[test]
    fn measure_output_keeps_its_tail() {
        let t = Duration::from_secs(20);
        // 10 MB of output, then the time: read from the kept tail.
        let cmd = MeasureCommand::new("yes x | head -c 10000000; echo; echo 1.5 ms {}", t).unwrap();
        assert_eq!(cmd.measure(0, "", "c"), Ok(1.5));
        let cmd = MeasureCommand::new(
            "yes y | head -c 3000000 >&2; echo >&2; echo last >&2; exit 3 # {}",
            t,
        )
        .unwrap();
        assert_eq!(
            cmd.measure(0, "", "c"),
            Err(MeasureFailure::Exit {
                code: Some(3),
                stderr: "last".into()
            })
        );
    }

    #[test]
    fn measure_timeouts_are_bounded() {
        let e = MeasureCommand::new("x {}", Duration::MAX).unwrap_err();
        assert!(
            e.to_string().contains("longer than the 604800 s accepted"),
            "{e}"
        );
        assert!(MeasureCommand::new("x {}", MeasureCommand::MAX_TIMEOUT).is_ok());
    }
}

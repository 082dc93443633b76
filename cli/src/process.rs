//! Running one measuring command to its end or its deadline (see [`crate::command::MeasureCommand`]).
//!
//! The command runs in a process group of its own. Its stdout and stderr are read as they come,
//! keeping only the last [`TAIL_BYTES`] of each, so a chatty command (`yes`) costs bounded
//! memory. When the command exits, whatever it left running in its group (`sleep 1e9 &`) is
//! killed, and the pipes are drained for at most [`DRAIN_AFTER_EXIT`]: a process that left
//! the group and holds a pipe is not waited for. At the deadline the whole group is killed
//! and the pipes are closed at once.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Bytes of stdout and of stderr kept: the end of each (the time is the last number printed,
/// an error the last line).
pub(super) const TAIL_BYTES: usize = 64 << 10;

/// How long the pipes are read after the command exits, for output still in flight.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);

/// How a run ended.
pub(super) enum Outcome {
    /// The command exited; the tails of its output.
    Exited {
        status: ExitStatus,
        stdout: String,
        stderr: String,
    },
    /// The deadline passed; the group was killed.
    TimedOut,
    /// The command could not be started or waited for.
    Failed(String),
}

/// The last `cap` bytes of a stream.
struct Tail {
    buf: Vec<u8>,
    cap: usize,
}

impl Tail {
    fn new(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            cap,
        }
    }

    fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
        if self.buf.len() > 2 * self.cap {
            self.buf.drain(..self.buf.len() - self.cap);
        }
    }

    fn text(mut self) -> String {
        if self.buf.len() > self.cap {
            self.buf.drain(..self.buf.len() - self.cap);
        }
        String::from_utf8_lossy(&self.buf).into_owned()
    }
}

/// Runs `cmd` (its arguments and environment set) with stdin closed, until it exits or
/// `timeout` passes.
pub(super) fn run(mut cmd: Command, timeout: Duration) -> Outcome {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let started = Instant::now();
    let Some(deadline) = started.checked_add(timeout) else {
        return Outcome::Failed(format!("timeout {timeout:?} is too long"));
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let mut pipes = Pipes::new(out, err);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                kill_group(&mut child);
                return Outcome::TimedOut;
            }
            Ok(None) => pipes.read_for(deadline.min(Instant::now() + POLL)),
            Err(e) => {
                kill_group(&mut child);
                return Outcome::Failed(e.to_string());
            }
        }
    };
    // Anything the command left running in its group is not part of the measurement.
    kill_group(&mut child);
    pipes.drain_until(Instant::now() + DRAIN_AFTER_EXIT);
    let (stdout, stderr) = pipes.finish();
    Outcome::Exited {
        status,
        stdout,
        stderr,
    }
}

/// How often a running command is checked for its exit while its pipes are quiet.
const POLL: Duration = Duration::from_millis(5);

/// Kills the command's process group (the shell and everything it started that stayed in
/// the group) and reaps the shell. The group id stays reserved while any member lives, so
/// the signal can only reach the command's own processes.
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: `kill` has no memory-safety preconditions; `-pid` names the process group
        // the child leads (it was spawned with `process_group(0)`).
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(unix)]
use unix::Pipes;

#[cfg(not(unix))]
use portable::Pipes;

#[cfg(unix)]
mod unix {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::process::{ChildStderr, ChildStdout};
    use std::time::Instant;

    use super::{Tail, TAIL_BYTES};

    /// The command's two pipes, read without blocking as data arrives.
    pub(super) struct Pipes {
        out: Option<ChildStdout>,
        err: Option<ChildStderr>,
        tails: [Tail; 2],
    }

    fn nonblocking(fd: &impl AsRawFd) {
        let fd = fd.as_raw_fd();
        // SAFETY: `fcntl` on a descriptor this process owns; no memory is passed.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
        }
    }

    impl Pipes {
        pub(super) fn new(out: Option<ChildStdout>, err: Option<ChildStderr>) -> Self {
            out.iter().for_each(nonblocking);
            err.iter().for_each(nonblocking);
            Self {
                out,
                err,
                tails: [Tail::new(TAIL_BYTES), Tail::new(TAIL_BYTES)],
            }
        }

        /// Reads what arrives until `until` (returning early once data came or a pipe
        /// closed).
        pub(super) fn read_for(&mut self, until: Instant) {
            // A closed pipe is -1, which `poll` skips.
            let fd = |p: Option<i32>| libc::pollfd {
                fd: p.unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            };
            let mut fds = [
                fd(self.out.as_ref().map(AsRawFd::as_raw_fd)),
                fd(self.err.as_ref().map(AsRawFd::as_raw_fd)),
            ];
            let wait = until.saturating_duration_since(Instant::now());
            let ms = libc::c_int::try_from(wait.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
            // SAFETY: `fds` is a live array of `fds.len()` pollfd structs.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            if ready > 0 {
                self.read_available();
            }
        }

        /// Reads until both pipes are closed or `until` passes.
        pub(super) fn drain_until(&mut self, until: Instant) {
            while (self.out.is_some() || self.err.is_some()) && Instant::now() < until {
                self.read_for(until);
            }
        }

        /// Reads whatever each pipe holds now; a pipe at its end is closed.
        fn read_available(&mut self) {
            let mut buf = [0u8; 16 << 10];
            let [out_tail, err_tail] = &mut self.tails;
            if read_into(&mut self.out, &mut buf, out_tail) {
                self.out = None;
            }
            if read_into(&mut self.err, &mut buf, err_tail) {
                self.err = None;
            }
        }

        /// The tails of stdout and stderr; the pipes are closed.
        pub(super) fn finish(self) -> (String, String) {
            let [out, err] = self.tails;
            (out.text(), err.text())
        }
    }

    /// Reads `pipe` into `tail` until it would block (or for at most 64 reads, so that a
    /// command writing faster than this reads never holds the caller past its deadline);
    /// `true` at its end (or on an error).
    fn read_into(pipe: &mut Option<impl Read>, buf: &mut [u8], tail: &mut Tail) -> bool {
        let Some(p) = pipe else {
            return false;
        };
        for _ in 0..64 {
            match p.read(buf) {
                Ok(0) => return true,
                Ok(n) => tail.push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
        false
    }
}

#[cfg(not(unix))]
mod portable {
    use std::io::Read;
    use std::process::{ChildStderr, ChildStdout};
    use std::sync::mpsc::{channel, Receiver};
    use std::time::Instant;

    use super::{Tail, TAIL_BYTES};

    /// The command's two pipes, each read on a thread of its own into a bounded tail; a
    /// thread still blocked when the result is taken is left behind, not waited for.
    pub(super) struct Pipes {
        done: [Option<Receiver<String>>; 2],
        texts: [String; 2],
    }

    fn reader(mut pipe: impl Read + Send + 'static) -> Receiver<String> {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut tail = Tail::new(TAIL_BYTES);
            let mut buf = [0u8; 16 << 10];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                tail.push(&buf[..n]);
            }
            let _ = tx.send(tail.text());
        });
        rx
    }

    impl Pipes {
        pub(super) fn new(out: Option<ChildStdout>, err: Option<ChildStderr>) -> Self {
            Self {
                done: [out.map(reader), err.map(reader)],
                texts: [String::new(), String::new()],
            }
        }

        pub(super) fn read_for(&mut self, until: Instant) {
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
        }

        pub(super) fn drain_until(&mut self, until: Instant) {
            for (rx, text) in self.done.iter_mut().zip(&mut self.texts) {
                if let Some(r) = rx.take() {
                    let wait = until.saturating_duration_since(Instant::now());
                    *text = r.recv_timeout(wait).unwrap_or_default();
                }
            }
        }

        pub(super) fn finish(self) -> (String, String) {
            let [out, err] = self.texts;
            (out, err)
        }
    }
}

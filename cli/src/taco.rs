//! The TACO measurer: one `dashrank-taco-measure --serve --baseline` process per tuning run
//! (the matrix read and its reference computed once), asked one program per line; each reply
//! carries the candidate's time and TACO's CSR time measured interleaved with it. The
//! confirmation round's requests go to a second process when they are timed on another number
//! of operand instances ([`TacoMeasureConfig::confirm_instances`]). A request that outlives the timeout,
//! or a process that dies (a generated kernel that crashes), fails that measurement and the
//! next request starts a new process.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use dashrank::tune::{MeasureRequest, Measured, Measurer};
use dashrank::Kernel;

/// Where the measurer binary is: `--taco-measure`, `$DASHRANK_TACO_MEASURE`,
/// `target/taco/dashrank-taco-measure` beside this binary's `target/`, or `PATH`.
pub fn find_measurer(flag: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = flag {
        return Ok(p.to_owned());
    }
    if let Some(p) = std::env::var_os("DASHRANK_TACO_MEASURE") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok();
    let beside = exe.as_deref().and_then(|e| {
        e.parent()?
            .parent()
            .map(|t| t.join("taco/dashrank-taco-measure"))
    });
    if let Some(p) = beside.filter(|p| p.is_file()) {
        return Ok(p);
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("dashrank-taco-measure"))
            .find(|p| p.is_file())
    });
    on_path.context(
        "dashrank-taco-measure not found: build it with `bash scripts/taco-tools.sh`, then pass \
         --taco-measure PATH or set DASHRANK_TACO_MEASURE",
    )
}

/// What the measurer process is started with.
#[derive(Debug, Clone)]
pub struct TacoMeasureConfig {
    pub exe: PathBuf,
    pub matrix: PathBuf,
    pub kernel: Kernel,
    pub threads: Option<u32>,
    pub dense_extent: u32,
    pub timeout: Duration,
    /// Most timing rounds per measurement, and the seconds after which rounds stop.
    pub repeats: u32,
    pub seconds: f64,
    /// Operand instances per program (and of TACO's CSR).
    pub instances: u32,
    /// Operand instances per program in the confirmation round, whose few measurements decide
    /// the pick.
    pub confirm_instances: u32,
}

/// A running `dashrank-taco-measure --serve --baseline`, and the confirmation round's when its
/// number of instances differs.
pub struct TacoMeasurer {
    config: TacoMeasureConfig,
    /// The process of the search's requests and, when it has as many instances, of the
    /// confirmation round's.
    search: Option<Server>,
    /// The confirmation round's process, when its instances differ (started at its first
    /// request).
    confirm: Option<Server>,
}

struct Server {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<String>,
}

impl TacoMeasurer {
    /// Starts the measurer (it reads the matrix and compiles TACO's CSR before it is ready).
    pub fn start(config: TacoMeasureConfig) -> Result<Self> {
        let mut m = Self {
            config,
            search: None,
            confirm: None,
        };
        m.search = Some(m.spawn(m.config.instances)?);
        Ok(m)
    }

    fn spawn(&self, instances: u32) -> Result<Server> {
        let c = &self.config;
        let mut cmd = Command::new(&c.exe);
        cmd.arg("--matrix").arg(&c.matrix);
        cmd.args([
            "--kernel",
            c.kernel.as_str(),
            "--dense",
            &c.dense_extent.to_string(),
        ]);
        cmd.args([
            "--threads",
            &c.threads.unwrap_or(0).to_string(),
            "--serve",
            "--baseline",
        ]);
        cmd.args(["--repeats", &c.repeats.to_string()]);
        cmd.args(["--max-seconds", &c.seconds.to_string()]);
        cmd.args(["--instances", &instances.to_string()]);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", c.exe.display()))?;
        let stdin = child.stdin.take().context("measurer stdin")?;
        let stdout = child.stdout.take().context("measurer stdout")?;
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout)
                .lines()
                .map_while(std::result::Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            stdin,
            replies,
        };
        match server.replies.recv_timeout(c.timeout) {
            Ok(line) if line == "ready" => Ok(server),
            Ok(line) => bail!("{} did not start: {line}", c.exe.display()),
            Err(_) => {
                server.stop();
                bail!(
                    "{} did not start (no reply within {:?})",
                    c.exe.display(),
                    c.timeout
                )
            }
        }
    }

    /// The confirmation round's own process, or the search's.
    fn process(&mut self, own_confirm_process: bool) -> &mut Option<Server> {
        if own_confirm_process {
            &mut self.confirm
        } else {
            &mut self.search
        }
    }

    fn ask(&mut self, request: &str, confirmation: bool) -> std::result::Result<String, String> {
        let c = &self.config;
        let timeout = c.timeout;
        let own_process = confirmation && c.confirm_instances != c.instances;
        let instances = if own_process {
            c.confirm_instances
        } else {
            c.instances
        };
        if self.process(own_process).is_none() {
            let server = self.spawn(instances).map_err(|e| format!("{e:#}"))?;
            *self.process(own_process) = Some(server);
        }
        let slot = self.process(own_process);
        let server = slot.as_mut().ok_or("no measurer process")?;
        let sent = writeln!(server.stdin, "{request}").and_then(|()| server.stdin.flush());
        let reply = match sent {
            Ok(()) => server.replies.recv_timeout(timeout),
            Err(_) => Err(RecvTimeoutError::Disconnected),
        };
        match reply {
            Ok(line) => Ok(line),
            Err(e) => {
                if let Some(mut s) = slot.take() {
                    s.stop();
                }
                Err(match e {
                    RecvTimeoutError::Timeout => format!("timed out after {timeout:?}"),
                    RecvTimeoutError::Disconnected => {
                        "the measurer process died (the kernel crashed)".to_owned()
                    }
                })
            }
        }
    }
}

impl Server {
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TacoMeasurer {
    fn drop(&mut self) {
        for mut s in [self.search.take(), self.confirm.take()]
            .into_iter()
            .flatten()
        {
            drop(s.stdin);
            let _ = s.child.wait();
        }
    }
}

impl Measurer for TacoMeasurer {
    fn measure(&mut self, request: &MeasureRequest<'_>) -> std::result::Result<Measured, String> {
        let reply = self.ask(request.program, request.confirmation)?;
        parse_reply(&reply)
    }
}

/// `ok <ms> <csr_ms> <ratio>` or `error <why>`.
fn parse_reply(reply: &str) -> std::result::Result<Measured, String> {
    let mut words = reply.split_whitespace();
    match words.next() {
        Some("ok") => {
            let mut number = || words.next().and_then(|w| w.parse::<f64>().ok());
            let (ms, baseline_ms, ratio) = (number(), number(), number());
            ms.map(|ms| Measured {
                ms,
                baseline_ms,
                ratio,
            })
            .ok_or_else(|| format!("unreadable reply '{reply}'"))
        }
        Some("error") => Err(reply.trim_start_matches("error").trim().to_owned()),
        _ => Err(format!("unreadable reply '{reply}'")),
    }
}

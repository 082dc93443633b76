//! Helpers shared by the bench binaries: timing, machine description, the numpy sgemm peak.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Minimum and median of repeated timings, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub min: f64,
    pub median: f64,
    pub runs: usize,
}

impl Stats {
    pub fn from_times(mut times: Vec<f64>) -> Self {
        times.sort_by(f64::total_cmp);
        Self {
            min: times[0],
            median: times[times.len() / 2],
            runs: times.len(),
        }
    }
}

/// Times `f` after one warm-up call: at least `min_runs`, at most `max_runs`, and no new run
/// once `budget` has passed.
pub fn measure(
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
    mut f: impl FnMut() -> BoxResult<()>,
) -> BoxResult<Stats> {
    f()?;
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < max_runs && (times.len() < min_runs || start.elapsed() < budget) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    Ok(Stats::from_times(times))
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn shared() -> PathBuf {
    std::env::var_os("DASHRANK_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared"))
}

pub fn out_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
        .join("bench")
}

pub fn files_with_ext(dir: &Path, ext: &str) -> BoxResult<Vec<PathBuf>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    paths.sort();
    Ok(paths)
}

pub fn machine_line() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{cpu}, {cores} cores available, SIMD {}, load average {}",
        dashrank::SimdLevel::best(),
        load()
    )
}

pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// numpy's float32 GEMM rate (GMAC/s, best of several 1024³ products) with `threads` BLAS
/// threads, from the project's `.venv`: the machine's practical dense peak, measured in the
/// same run as the numbers it is compared with. `None` when `.venv` is missing.
pub fn numpy_sgemm_gmacs(threads: usize) -> Option<f64> {
    let python = repo().join(".venv/bin/python");
    if !python.is_file() {
        return None;
    }
    let script = "import time, numpy as np\n\
        n = 1024\n\
        a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)\n\
        b = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)\n\
        a @ b\n\
        best = 1e9\n\
        for _ in range(7):\n\
        \x20   t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)\n\
        print(n ** 3 / best / 1e9)\n";
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .env("OPENBLAS_NUM_THREADS", threads.to_string())
        .env("OMP_NUM_THREADS", threads.to_string())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Formats seconds as µs or ms.
pub fn time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

//! Soak test of a long-lived host: load one model, then make thousands of mixed calls over
//! matrices of very different sizes (a large generated one included) and report resident
//! memory over time and whether repeated inputs gave bit-identical results.
//!
//! ```text
//! cargo run --release --example soak -- [--model DIR] [--calls N] [--every K]
//!     [--large-rows R] [--cache C] [--max-growth-mb M]
//! ```
//!
//! Defaults: `models/waco-spmm` (else the tiny fixture), 10 000 calls, an RSS sample every 500
//! calls, a 262 144-row generated matrix, an embedding cache of 4 (smaller than the number of
//! matrices, so the featurizer keeps running), 64 MiB allowed growth after warm-up. Warm-up
//! ends once every matrix and call kind has run and a tenth of the calls are done. Exits with status 1 when results for a
//! repeated input differ or RSS grows by more than the allowed amount after warm-up.

use std::collections::HashMap;
use std::time::Instant;

use dashrank::{CandidateSet, CostModel, CsrPattern, LoadOptions, Model};

struct Args {
    model: String,
    calls: usize,
    every: usize,
    large_rows: usize,
    cache: usize,
    max_growth_mb: f64,
}

fn parse_args() -> Args {
    let mut a = Args {
        model: if std::path::Path::new("models/waco-spmm").is_dir() {
            "models/waco-spmm".into()
        } else {
            "tests/data/fixtures/tiny-waco-spmm".into()
        },
        calls: 10_000,
        every: 500,
        large_rows: 1 << 18,
        cache: 4,
        max_growth_mb: 64.0,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let value = argv.get(i + 1).cloned().unwrap_or_default();
        let num = || -> usize {
            value
                .parse()
                .unwrap_or_else(|_| panic!("{}: expected a number", argv[i]))
        };
        match argv[i].as_str() {
            "--model" => a.model = value.clone(),
            "--calls" => a.calls = num(),
            "--every" => a.every = num().max(1),
            "--large-rows" => a.large_rows = num().max(64),
            "--cache" => a.cache = num(),
            "--max-growth-mb" => a.max_growth_mb = num() as f64,
            other => panic!("unknown argument {other} (see the example's docs)"),
        }
        i += 2;
    }
    a
}

/// Resident set size in MiB, from /proc/self/statm.
fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1 << 20) as f64
}

/// A seeded random `n × n` pattern with about `per_row` entries per row plus the diagonal.
fn random_pattern(n: usize, per_row: usize, mut seed: u64) -> CsrPattern {
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut coords = Vec::with_capacity(n * (per_row + 1));
    for r in 0..n {
        coords.push((r as u32, r as u32));
        for _ in 0..per_row {
            coords.push((r as u32, (next() % n as u64) as u32));
        }
    }
    CsrPattern::from_coordinates(n, n, coords).expect("valid generated pattern")
}

/// Index of the large generated matrix in [`matrices`].
const LARGE: usize = 3;

fn matrices(large_rows: usize) -> Vec<(String, CsrPattern)> {
    let mut out = vec![
        ("tiny 16".to_string(), random_pattern(16, 2, 1)),
        ("small 1k".to_string(), random_pattern(1 << 10, 4, 2)),
        ("medium 20k".to_string(), random_pattern(20_000, 8, 3)),
        (
            format!("large {large_rows}"),
            random_pattern(large_rows, 8, 4),
        ),
    ];
    let dir = std::path::Path::new("../shared/data/waco/matrices");
    for name in ["Trec6_16x16_9", "kim1", "cca", "bcsstk38"] {
        let path = dir.join(format!("{name}.csr"));
        if let Ok(p) = CsrPattern::read_waco_csr(&path) {
            out.push((name.to_string(), p));
        }
    }
    out
}

fn candidate_lines() -> Vec<String> {
    let mut lines: Vec<String> = [
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16",
        "32 8 8 i1 k1 i0 k0 j1 j0 1 0 0 0 i1 48 16",
        "1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1",
        "4 16 1 k1 i1 k0 i0 j1 j0 1 1 0 0 i1 48 32",
    ]
    .map(String::from)
    .to_vec();
    if let Ok(entries) = std::fs::read_dir("../shared/data/waco/collected/SpMM") {
        let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            if let Ok(text) = std::fs::read_to_string(&f) {
                lines.extend(text.lines().map(str::to_owned));
            }
        }
    }
    lines
}

/// One call of the soak: which matrix, which kind (0 embedding, 1 scores of all candidates,
/// 2 top-10, 3 scores of a fresh set of the first `subset` lines).
struct Call {
    matrix: usize,
    kind: u8,
    subset: usize,
}

impl Call {
    /// The next call from the xorshift state `rng`: the large matrix once in 64 calls, the
    /// `others` uniformly.
    fn next(rng: &mut u64, others: &[usize], n_lines: usize) -> Call {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let rng = *rng;
        let matrix = if rng.is_multiple_of(64) {
            LARGE
        } else {
            others[(rng >> 8) as usize % others.len()]
        };
        Call {
            matrix,
            kind: ((rng >> 20) % 4) as u8,
            subset: 1 + (rng >> 32) as usize % n_lines.min(64),
        }
    }

    /// The key its result is compared under (the subset counts for kind 3 only).
    fn key(&self) -> (usize, u8, usize) {
        let subset = if self.kind == 3 { self.subset } else { 0 };
        (self.matrix, self.kind, subset)
    }
}

/// Runs `call` and returns its result as bits.
fn run_call(
    model: &Model,
    head: &str,
    mats: &[(String, CsrPattern)],
    full: &CandidateSet,
    lines: &[String],
    call: &Call,
) -> Vec<u32> {
    let matrix = model.embed_matrix(&mats[call.matrix].1).expect("embeds");
    match call.kind {
        0 => matrix.values().iter().map(|v| v.to_bits()).collect(),
        1 => {
            let mut s = vec![0.0f32; full.len()];
            model.score_into(&matrix, full, &mut s).expect("scores");
            s.iter().map(|v| v.to_bits()).collect()
        }
        2 => model
            .top_k(&matrix, full, 10)
            .expect("top-k")
            .iter()
            .flat_map(|r| [r.index as u32, r.score.to_bits()])
            .collect(),
        _ => {
            // A fresh candidate set each time (prepared, used, dropped).
            let set = model
                .prepare_candidates(head, &lines[..call.subset])
                .expect("prepare");
            let mut s = vec![0.0f32; set.len()];
            model.score_into(&matrix, &set, &mut s).expect("scores");
            s.iter().map(|v| v.to_bits()).collect()
        }
    }
}

/// What the soak has seen: first results per call key, repeat mismatches, warm-up and RSS.
struct Tracker {
    seen: HashMap<(usize, u8, usize), Vec<u32>>,
    mismatches: usize,
    warm_rss: Option<f64>,
    warm_at: usize,
    max_after: f64,
    kinds_done: [bool; 4],
    mats_done: Vec<bool>,
}

impl Tracker {
    fn new(n_mats: usize) -> Self {
        Tracker {
            seen: HashMap::new(),
            mismatches: 0,
            warm_rss: None,
            warm_at: 0,
            max_after: 0.0,
            kinds_done: [false; 4],
            mats_done: vec![false; n_mats],
        }
    }

    /// Compares `bits` with the first result of the same key (or keeps it as the first).
    fn record(&mut self, call: &Call, bits: Vec<u32>) {
        match self.seen.get(&call.key()) {
            Some(first) if *first != bits => self.mismatches += 1,
            Some(_) => {}
            None => {
                self.seen.insert(call.key(), bits);
            }
        }
        self.kinds_done[call.kind as usize] = true;
        self.mats_done[call.matrix] = true;
    }

    /// Notes the RSS after call number `call` of `calls`: warm-up ends at the first call past
    /// a tenth of them once every kind and matrix has run; later samples raise the maximum.
    fn sample(&mut self, call: usize, calls: usize, rss: f64) {
        if self.warm_rss.is_none()
            && call >= calls / 10
            && self.kinds_done.iter().all(|&d| d)
            && self.mats_done.iter().all(|&d| d)
        {
            self.warm_rss = Some(rss);
            self.warm_at = call;
        } else if self.warm_rss.is_some() {
            self.max_after = self.max_after.max(rss);
        }
    }
}

/// Prints what the soak runs on and the RSS after loading, then the table header.
fn print_setup(
    args: &Args,
    head: &str,
    mats: &[(String, CsrPattern)],
    candidates: usize,
    rss_start: f64,
) {
    println!(
        "soak: model {} (head {head}), {} matrices ({}), {} candidates, {} calls, cache {}",
        args.model,
        mats.len(),
        mats.iter()
            .map(|(n, p)| format!("{n}: {} nnz", p.nnz()))
            .collect::<Vec<_>>()
            .join(", "),
        candidates,
        args.calls,
        args.cache
    );
    println!(
        "rss after load: {:.1} MiB (start {rss_start:.1} MiB)",
        rss_mib()
    );
    println!(
        "{:>8} {:>10} {:>10} {:>9}",
        "calls", "rss MiB", "max MiB", "seconds"
    );
}

/// Prints the summary; returns whether the soak passed.
fn report(args: &Args, t: &Tracker, start: Instant) -> bool {
    let final_rss = rss_mib();
    let warm = t.warm_rss.unwrap_or(final_rss);
    let growth = t.max_after.max(final_rss) - warm;
    println!(
        "warm-up done after {} calls at {warm:.1} MiB; max after warm-up {:.1} MiB, \
         final {final_rss:.1} MiB, growth {growth:+.1} MiB (allowed {:.0}); \
         {} distinct (matrix, call) results, {} repeat mismatches; {:.1} s",
        t.warm_at,
        t.max_after.max(warm),
        args.max_growth_mb,
        t.seen.len(),
        t.mismatches,
        start.elapsed().as_secs_f64()
    );
    !(t.mismatches > 0 || growth > args.max_growth_mb || t.warm_rss.is_none())
}

fn main() {
    let args = parse_args();
    let options = LoadOptions {
        deterministic: true,
        matrix_cache_capacity: args.cache,
        ..LoadOptions::default()
    };
    let rss_start = rss_mib();
    let model = Model::load(&args.model, &options).expect("model loads");
    let head = model.info().heads[0].name.clone();
    let mats = matrices(args.large_rows);
    let lines = candidate_lines();
    let full = model.prepare_candidates(&head, &lines).expect("candidates");
    print_setup(&args, &head, &mats, full.len(), rss_start);

    // First results per (matrix, call kind), compared bit for bit on every repeat.
    let mut tracker = Tracker::new(mats.len());
    let others: Vec<usize> = (0..mats.len()).filter(|&i| i != LARGE).collect();
    let start = Instant::now();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for call_no in 1..=args.calls {
        let call = Call::next(&mut rng, &others, lines.len());
        let bits = run_call(&model, &head, &mats, &full, &lines, &call);
        tracker.record(&call, bits);
        let rss = rss_mib();
        tracker.sample(call_no, args.calls, rss);
        if call_no.is_multiple_of(args.every) || call_no == args.calls {
            println!(
                "{call_no:>8} {rss:>10.1} {:>10.1} {:>9.1}",
                tracker.max_after.max(tracker.warm_rss.unwrap_or(rss)),
                start.elapsed().as_secs_f64()
            );
        }
    }
    if !report(&args, &tracker, start) {
        eprintln!("soak: FAILED");
        std::process::exit(1);
    }
    println!("soak: ok");
}

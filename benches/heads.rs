//! The native dense-head engine against `ort` (tract or ONNX Runtime) on the real WACO SpMM
//! model, timed in one process run; ratios are what count (the machine is shared).
//!
//! ```text
//! cargo bench --bench heads --features tract                        # native vs tract
//! DASHRANK_ORT_LIB=$(bash scripts/ort-lib.sh) \
//!   cargo bench --bench heads --features onnxruntime                # native vs ONNX Runtime
//! ```
//!
//! Sections (see BENCHMARKS.md §2):
//! - **compiler call**: `top_k(matrix, 256 prepared candidates, 5)` with the matrix embedding
//!   cached, and `prepare_candidates` of 256 lines;
//! - **throughput**: `score_into` at batch 256 and 20 000, with the native engine's
//!   multiply-adds per second against numpy's sgemm rate measured in the same run;
//! - **cache hit**: `embed_matrix` of a pattern already embedded (same object, and a fresh
//!   copy whose hash is recomputed) against the featurizer on it;
//! - **model load**: `Model::load` of every bundle in `models/` against the floor of what
//!   loading must do with the bytes (read every file and SHA-256 it, which the manifest check
//!   requires), and against the reference backend's load of the same bundle;
//! - **whole space** (`space` argument, not run by default): the 611 712-schedule WACO SpMM
//!   space prepared once, then per matrix the statuses and the exact top-10 with the default;
//!   peak RSS from `/proc/self/status` (run it alone: `cargo bench --bench heads -- space`).
//!
//! Without a reference backend compiled in, only the native numbers are printed. Skips with a
//! message when `models/waco-spmm` or `../shared/data/waco` is absent.

mod common;

use std::time::Duration;

use common::*;
use std::time::Instant;

use dashrank::schedule::space::{Kernel, MatrixShape, TacoSpace};
use dashrank::{Backend, CostModel, CsrPattern, LoadOptions, Model};

const BUDGET: Duration = Duration::from_millis(1500);

fn reference() -> Option<Backend> {
    if cfg!(feature = "tract") {
        Some(Backend::Tract)
    } else {
        std::env::var_os("DASHRANK_ORT_LIB").map(|lib| Backend::OnnxRuntime {
            library: lib.into(),
        })
    }
}

struct Setup {
    lines: Vec<String>,
    pattern: CsrPattern,
    models: Vec<(String, Model)>,
}

fn setup() -> BoxResult<Option<Setup>> {
    let model_dir = repo().join("models/waco-spmm");
    let collected = shared().join("data/waco/collected/SpMM");
    let matrix = shared().join("data/waco/matrices/Trec6_16x16_9.csr");
    if !model_dir.is_dir() || !collected.is_dir() || !matrix.is_file() {
        println!(
            "SKIPPED: models/waco-spmm or ../shared/data/waco missing (bash scripts/setup.sh)"
        );
        return Ok(None);
    }
    let mut lines = Vec::new();
    for f in files_with_ext(&collected, "txt")? {
        let text = std::fs::read_to_string(f)?;
        lines.extend(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string),
        );
    }
    let pattern = CsrPattern::read_waco_csr(&matrix)?;
    let mut models = vec![(
        "native".to_string(),
        Model::load(&model_dir, &LoadOptions::default())?,
    )];
    if let Some(b) = reference() {
        let name = b.name().to_string();
        let options = LoadOptions {
            backend: b,
            ..LoadOptions::default()
        };
        models.push((name, Model::load(&model_dir, &options)?));
    }
    Ok(Some(Setup {
        lines,
        pattern,
        models,
    }))
}

fn batch(lines: &[String], n: usize) -> Vec<&str> {
    lines.iter().cycle().take(n).map(String::as_str).collect()
}

fn compiler_call(s: &Setup) -> BoxResult<()> {
    println!("\n### Compiler call: 256 candidates, cached matrix\n");
    println!("| engine | top_k(256 → 5), min | median | prepare 256, min | median |");
    println!("|---|---:|---:|---:|---:|");
    let lines = batch(&s.lines, 256);
    let mut rows = Vec::new();
    for (name, m) in &s.models {
        let head = m.info().heads[0].name.clone();
        let emb = m.embed_matrix(&s.pattern)?;
        let set = m.prepare_candidates(&head, &lines)?;
        let top = measure(50, 20_000, BUDGET, || {
            std::hint::black_box(m.top_k(&emb, &set, 5)?);
            Ok(())
        })?;
        let prep = measure(20, 10_000, BUDGET, || {
            std::hint::black_box(m.prepare_candidates(&head, &lines)?);
            Ok(())
        })?;
        println!(
            "| {name} | {} | {} | {} | {} |",
            time(top.min),
            time(top.median),
            time(prep.min),
            time(prep.median)
        );
        rows.push((top, prep));
    }
    let m = &s.models[0].1;
    let head = m.info().heads[0].name.clone();
    let schema = m.schema(&head)?;
    let enc = measure(20, 10_000, BUDGET, || {
        std::hint::black_box(schema.encode_batch(&lines));
        Ok(())
    })?;
    println!(
        "| (parse + encode only, `Schema::encode_batch`) | | | {} | {} |",
        time(enc.min),
        time(enc.median)
    );
    if let [(nt, np), (rt, rp)] = rows.as_slice() {
        println!(
            "| **{} ÷ native** | **{:.1}×** | {:.1}× | **{:.1}×** | {:.1}× |",
            s.models[1].0,
            rt.min / nt.min,
            rt.median / nt.median,
            rp.min / np.min,
            rp.median / np.median
        );
    }
    Ok(())
}

/// `Model::load` per bundle, against reading and hashing its files (the floor) and the
/// reference backend's load.
fn model_load() -> BoxResult<()> {
    use sha2::{Digest, Sha256};
    println!("\n### Model load (`Model::load`, bundle files in the page cache)\n");
    let mut header =
        "| bundle | MiB | read + SHA-256 (floor), min | native, min | median | native ÷ floor |"
            .to_string();
    let reference = reference();
    if let Some(b) = &reference {
        header.push_str(&format!(" {}, min | {} ÷ native |", b.name(), b.name()));
    }
    println!("{header}");
    println!(
        "|---|---:|---:|---:|---:|---:|{}",
        if reference.is_some() {
            "---:|---:|"
        } else {
            ""
        }
    );
    let mut dirs: Vec<_> = std::fs::read_dir(repo().join("models"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("manifest.json").is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        let files = files_with_ext(&dir, "onnx")?;
        let bytes: u64 = files
            .iter()
            .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
            .sum();
        let floor = measure(5, 200, BUDGET, || {
            for f in &files {
                std::hint::black_box(Sha256::digest(std::fs::read(f)?));
            }
            Ok(())
        })?;
        let native = measure(5, 200, BUDGET, || {
            std::hint::black_box(Model::load(&dir, &LoadOptions::default())?);
            Ok(())
        })?;
        let name = dir
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let mut row = format!(
            "| {name} | {:.1} | {} | {} | {} | {:.1}× |",
            bytes as f64 / (1 << 20) as f64,
            time(floor.min),
            time(native.min),
            time(native.median),
            native.min / floor.min
        );
        if let Some(b) = &reference {
            let options = LoadOptions {
                backend: b.clone(),
                ..LoadOptions::default()
            };
            let r = measure(3, 50, BUDGET, || {
                std::hint::black_box(Model::load(&dir, &options)?);
                Ok(())
            })?;
            row.push_str(&format!(" {} | {:.1}× |", time(r.min), r.min / native.min));
        }
        println!("{row}");
    }
    Ok(())
}

fn throughput(s: &Setup) -> BoxResult<()> {
    let peak1 = numpy_sgemm_gmacs(1);
    let peak2 = numpy_sgemm_gmacs(2);
    println!("\n### Scoring throughput (score_into), cached matrix\n");
    println!(
        "numpy sgemm, same run: {} GMAC/s on 1 thread, {} GMAC/s on 2 threads",
        peak1.map_or("?".into(), |p| format!("{p:.1}")),
        peak2.map_or("?".into(), |p| format!("{p:.1}"))
    );
    println!("\n| batch | engine | min | candidates/s | GMAC/s (native) | of sgemm 2-thr peak |");
    println!("|---:|---|---:|---:|---:|---:|");
    for n in [256usize, 20_000] {
        let lines = batch(&s.lines, n);
        let mut mins = Vec::new();
        for (name, m) in &s.models {
            let head = m.info().heads[0].name.clone();
            let emb = m.embed_matrix(&s.pattern)?;
            let set = m.prepare_candidates(&head, &lines)?;
            let mut out = vec![0.0f32; n];
            let st = measure(10, 5_000, BUDGET, || {
                m.score_into(&emb, &set, &mut out)?;
                Ok(())
            })?;
            let (gmacs, frac) = match m.info().heads[0].cost {
                Some(c) => {
                    let g = (c.score_macs * n) as f64 / st.min / 1e9;
                    (
                        format!("{g:.1}"),
                        peak2.map_or("?".into(), |p| format!("{:.0} %", 100.0 * g / p)),
                    )
                }
                None => ("–".into(), "–".into()),
            };
            println!(
                "| {n} | {name} | {} | {:.2} M | {gmacs} | {frac} |",
                time(st.min),
                n as f64 / st.min / 1e6
            );
            mins.push(st.min);
        }
        if let [nat, r] = mins.as_slice() {
            println!(
                "| {n} | **{} ÷ native** | **{:.1}×** | | | |",
                s.models[1].0,
                r / nat
            );
        }
    }
    if let Some(c) = s.models[0].1.info().heads[0].cost {
        println!(
            "\nNative work per candidate: {} MAC to prepare, {} MAC per matrix, {} MAC to score; {} floats stored.",
            c.prepare_macs, c.matrix_macs, c.score_macs, c.stored_floats
        );
    }
    Ok(())
}

/// A new pattern with the same content (its hash not yet computed).
fn fresh_copy(p: &CsrPattern) -> BoxResult<CsrPattern> {
    Ok(CsrPattern::new(
        p.nrows(),
        p.ncols(),
        p.to_row_ptr(),
        p.col_idx().to_vec(),
    )?)
}

fn cache_hit(s: &Setup) -> BoxResult<()> {
    let m = &s.models[0].1;
    println!(
        "\n### embed_matrix cache hit ({} rows, {} nnz)\n",
        s.pattern.nrows(),
        s.pattern.nnz()
    );
    m.embed_matrix(&s.pattern)?;
    let same = measure(50, 100_000, BUDGET, || {
        std::hint::black_box(m.embed_matrix(&s.pattern)?);
        Ok(())
    })?;
    let fresh = measure(20, 10_000, BUDGET, || {
        let copy = fresh_copy(&s.pattern)?;
        std::hint::black_box(m.embed_matrix(&copy)?);
        Ok(())
    })?;
    let copy_only = measure(20, 10_000, BUDGET, || {
        std::hint::black_box(fresh_copy(&s.pattern)?);
        Ok(())
    })?;
    let feat = measure(3, 20, BUDGET, || {
        std::hint::black_box(m.conv_features(&s.pattern)?);
        Ok(())
    })?;
    println!("| call | min | ÷ featurizer |");
    println!("|---|---:|---:|");
    println!(
        "| hit, same pattern object (hash remembered) | {} | {:.5} |",
        time(same.min),
        same.min / feat.min
    );
    let hashing = (fresh.min - copy_only.min).max(0.0);
    println!(
        "| hit, new pattern of the same content (hash recomputed; construction {} subtracted) | {} | {:.4} |",
        time(copy_only.min),
        time(hashing),
        hashing / feat.min
    );
    println!("| featurizer (`conv_features`) | {} | 1 |", time(feat.min));
    Ok(())
}

/// Peak resident memory of this process so far (VmHWM), in MB.
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// The whole WACO SpMM CPU space: prepared once, then exact top-10 with the default for new
/// matrices. Native engine only (run this section alone for a meaningful peak RSS).
fn whole_space(s: &Setup) -> BoxResult<()> {
    let m = &s.models[0].1;
    let head = m.info().heads[0].name.clone();
    let names = ["Trec6_16x16_9", "cca", "kim1", "mhd4800a"];
    let mut patterns = Vec::new();
    for n in names {
        patterns.push((
            n,
            CsrPattern::read_waco_csr(shared().join(format!("data/waco/matrices/{n}.csr")))?,
        ));
    }
    let rss0 = peak_rss_mb();
    let t = Instant::now();
    let prepared = m.prepare_schedule_space(&head, TacoSpace::waco(Kernel::SpMM))?;
    let prep_s = t.elapsed().as_secs_f64();
    println!(
        "\n### Whole WACO SpMM space ({} schedules), native engine\n",
        prepared.len()
    );
    println!(
        "prepare once: {} ({} MB of prepared rows); peak RSS before {} MB, after {} MB",
        time(prep_s),
        prepared.candidate_set().prepared_bytes() / (1 << 20),
        rss0.map_or("?".into(), |v| format!("{v:.0}")),
        peak_rss_mb().map_or("?".into(), |v| format!("{v:.0}"))
    );
    let peak2 = numpy_sgemm_gmacs(2);
    let cost = m.info().heads[0].cost.unwrap_or_default();
    println!("\n| matrix | nnz | featurizer + embedder | statuses (space_candidates) | top-10 with default | total per matrix (cached embedding) | GMAC/s | of sgemm 2-thr | default rank |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, p) in &patterns {
        let t = Instant::now();
        let emb = m.embed_matrix(p)?;
        let feat_s = t.elapsed().as_secs_f64();
        let shape = MatrixShape::from(p);
        let mut best = (f64::MAX, f64::MAX);
        let mut rank = None;
        for _ in 0..3 {
            let t = Instant::now();
            let cands = m.space_candidates(&prepared, &shape)?;
            let st = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let top = m.top_k_with_default(&emb, &cands, 10)?;
            let tk = t.elapsed().as_secs_f64();
            if st + tk < best.0 + best.1 {
                best = (st, tk);
            }
            rank = top.default_entry().rank;
        }
        let g = (cost.score_macs * prepared.len()) as f64 / best.1 / 1e9;
        println!(
            "| {name} | {} | {} | {} | {} | **{}** | {g:.1} | {} | {} |",
            p.nnz(),
            time(feat_s),
            time(best.0),
            time(best.1),
            time(best.0 + best.1),
            peak2.map_or("?".into(), |p| format!("{:.0} %", 100.0 * g / p)),
            rank.map_or("–".into(), |r| format!("{} of {}", r + 1, prepared.len()))
        );
    }
    println!(
        "\npeak RSS of the process: {} MB",
        peak_rss_mb().map_or("?".into(), |v| format!("{v:.0}"))
    );
    Ok(())
}

fn main() -> BoxResult<()> {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs bench targets without
    // it, and the full benchmark does not belong in the test suite.
    if !std::env::args().any(|a| a == "--bench") {
        println!("heads: built; run it with `cargo bench --bench heads`");
        return Ok(());
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let want = |s: &str| args.is_empty() || args.iter().any(|a| a == s);
    let Some(setup) = setup()? else {
        return Ok(());
    };
    println!("## Native head engine — {}", machine_line());
    println!(
        "engines: {}",
        setup
            .models
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(" vs ")
    );
    if want("call") {
        compiler_call(&setup)?;
    }
    if want("throughput") {
        throughput(&setup)?;
    }
    if want("cache") {
        cache_hit(&setup)?;
    }
    if want("load") {
        model_load()?;
    }
    if args.iter().any(|a| a == "space") {
        whole_space(&setup)?;
    }
    println!("\nload average at the end: {}", load());
    Ok(())
}

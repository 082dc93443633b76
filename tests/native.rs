//! The native dense-head engine: determinism as a contract, and parity with `ort`.
//!
//! - **Determinism** (no reference needed): on the real WACO models, every collected
//!   schedule line scored alone equals, bit for bit, the same line scored in the full batch;
//!   1 and 2 threads give the same bits; every SIMD level the CPU has (forced with
//!   `LoadOptions::simd`) gives the same bits as the best one — for the featurizer, the matrix
//!   embedding and the scores.
//! - **Parity with ort** (needs feature `tract` or `onnxruntime`): on every bundle (the three
//!   WACO models, every fixture, and the full-size COGNATE bundle that scripts/test.sh writes
//!   to `models/cognate-full`), matrix embeddings, schedule embeddings and scores of the
//!   native engine match the same graphs run by `ort`. Tolerance: relative 2e-5 of the
//!   vector's scale (+ 2e-5 of the value): the native engine folds layers (the predictor's
//!   first layer split, the embedder's first layer turned into tables, consecutive affine
//!   layers composed in f64) and sums in another order than tract's kernels, so each value
//!   moves by a few float32 ulps of the scale of the sums it comes from (2e-5 ≈ 330 ulps;
//!   measured worst cases are printed).

mod common;

use std::path::{Path, PathBuf};

use common::*;
use dashrank::{Backend, CostModel, CsrPattern, LoadOptions, Model, SimdLevel};

const RTOL: f32 = 2e-5;

fn model_dir(name: &str) -> Option<PathBuf> {
    let dir = repo().join("models").join(name);
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: {} missing (run `bash scripts/setup.sh`)",
            dir.display()
        );
        None
    }
}

fn load_with(dir: &Path, options: LoadOptions) -> Model {
    Model::load(dir, &options).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
}

fn native(threads: Option<usize>, simd: Option<SimdLevel>) -> LoadOptions {
    LoadOptions {
        backend: Backend::Native,
        threads,
        simd,
        ..LoadOptions::default()
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// All measured schedule lines of a kernel (WACO's collected data).
fn collected_lines(upper: &str) -> Option<Vec<String>> {
    let dir = shared_or_skip(&format!("data/waco/collected/{upper}"))?;
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let mut lines = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).ok()?;
        lines.extend(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string),
        );
    }
    Some(lines)
}

fn matrix(name: &str) -> Option<CsrPattern> {
    let path = shared_or_skip(&format!("data/waco/matrices/{name}.csr"))?;
    Some(CsrPattern::read_waco_csr(path).unwrap())
}

fn determinism(kernel: &str, upper: &str) {
    let Some(dir) = model_dir(&format!("waco-{kernel}")) else {
        return;
    };
    let (Some(lines), Some(pattern)) = (collected_lines(upper), matrix("Trec6_16x16_9")) else {
        return;
    };
    let best = load_with(&dir, native(Some(2), None));
    let head = best.info().heads[0].name.clone();
    let set = best.prepare_candidates(&head, &lines).unwrap();
    assert_eq!(
        set.valid_count(),
        lines.len(),
        "all collected lines are valid"
    );
    let emb = best.embed_matrix(&pattern).unwrap();
    let mut batch = vec![0.0; set.len()];
    best.score_into(&emb, &set, &mut batch).unwrap();

    // Alone vs in the batch, and in a batch of a different size and order.
    for (i, line) in lines.iter().enumerate() {
        let one = best.prepare_candidates(&head, &[line]).unwrap();
        let mut s = [0.0f32];
        best.score_into(&emb, &one, &mut s).unwrap();
        assert_eq!(
            s[0].to_bits(),
            batch[i].to_bits(),
            "waco-{kernel} line #{i} alone {} vs in the batch {}",
            s[0],
            batch[i]
        );
    }
    let reversed: Vec<&String> = lines.iter().rev().take(300).collect();
    let rset = best.prepare_candidates(&head, &reversed).unwrap();
    let mut rscores = vec![0.0; rset.len()];
    best.score_into(&emb, &rset, &mut rscores).unwrap();
    for (j, s) in rscores.iter().enumerate() {
        assert_eq!(s.to_bits(), batch[lines.len() - 1 - j].to_bits());
    }

    // Threads and SIMD levels: the whole pipeline (featurizer, embedder, scores).
    let mut variants = vec![(Some(1), None)];
    variants.extend(SimdLevel::supported().map(|l| (Some(2), Some(l))));
    for (threads, simd) in variants {
        let m = load_with(&dir, native(threads, simd));
        let e = m.embed_matrix(&pattern).unwrap();
        assert_eq!(
            bits(e.conv_features()),
            bits(emb.conv_features()),
            "waco-{kernel} conv features, threads {threads:?}, simd {simd:?}"
        );
        assert_eq!(
            bits(e.values()),
            bits(emb.values()),
            "waco-{kernel} matrix embedding, threads {threads:?}, simd {simd:?}"
        );
        let s = m.prepare_candidates(&head, &lines).unwrap();
        let mut scores = vec![0.0; s.len()];
        m.score_into(&e, &s, &mut scores).unwrap();
        assert_eq!(
            bits(&scores),
            bits(&batch),
            "waco-{kernel} scores, threads {threads:?}, simd {simd:?}"
        );
    }
    println!(
        "waco-{kernel}: {} lines bit-identical alone/batch, 1/2 threads, levels {:?}",
        lines.len(),
        SimdLevel::supported().collect::<Vec<_>>()
    );
}

#[test]
fn waco_spmm_scores_are_bit_identical_alone_batched_threaded_and_per_level() {
    determinism("spmm", "SpMM");
}

#[test]
fn waco_sddmm_scores_are_bit_identical_alone_batched_threaded_and_per_level() {
    determinism("sddmm", "SDDMM");
}

/// Native vs the ort reference on one bundle: embeddings and scores of `lines` per head.
fn parity(dir: &Path, lines_of: &dyn Fn(&str) -> Vec<String>, patterns: &[CsrPattern]) {
    let Some(reference) = reference_backend() else {
        eprintln!("SKIPPED: no ort backend compiled in (build with --features tract)");
        return;
    };
    let (nat, ort) = load_native_and_reference(dir, reference);
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    let mut worst = [0.0f32; 3];
    worst[1] = schedule_embedding_parity(&name, &nat, &ort, lines_of);
    for p in patterns {
        let (matrix, scores) = matrix_and_score_parity(&name, &nat, &ort, lines_of, p);
        worst[0] = worst[0].max(matrix);
        worst[2] = worst[2].max(scores);
    }
    println!(
        "| {name} | {} | {:.1e} | {:.1e} | {:.1e} |",
        nat.info().heads.len(),
        worst[0],
        worst[1],
        worst[2]
    );
}

/// The bundle in `dir` loaded natively (every graph must run natively) and on `reference`.
fn load_native_and_reference(dir: &Path, reference: Backend) -> (Model, Model) {
    let nat = load_with(dir, native(None, None));
    let ort = load_with(
        dir,
        LoadOptions {
            backend: reference,
            ..LoadOptions::default()
        },
    );
    assert!(
        nat.info().engines.iter().all(|e| e.engine == "native"),
        "{}: every graph runs natively: {:?}",
        dir.display(),
        nat.info().engines
    );
    (nat, ort)
}

/// Compares the schedule embeddings of every head's lines; returns the worst deviation.
fn schedule_embedding_parity(
    name: &str,
    nat: &Model,
    ort: &Model,
    lines_of: &dyn Fn(&str) -> Vec<String>,
) -> f32 {
    let mut worst = 0.0f32;
    for h in &nat.info().heads {
        let lines = lines_of(&h.name);
        let a = nat.embed_schedules(&h.name, &lines).unwrap();
        let b = ort.embed_schedules(&h.name, &lines).unwrap();
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            match (x, y) {
                (Some(x), Some(y)) => {
                    let w = assert_close_scaled(
                        &format!("{name} {} schedule embedding #{i}", h.name),
                        x,
                        y,
                        RTOL,
                        0.0,
                    );
                    worst = worst.max(w);
                }
                (None, None) => {}
                _ => panic!("{name} {} line #{i}: validity differs", h.name),
            }
        }
    }
    worst
}

/// Compares the matrix embedding of `p` and every head's scores on it; returns the worst
/// deviations `(matrix embedding, scores)`.
fn matrix_and_score_parity(
    name: &str,
    nat: &Model,
    ort: &Model,
    lines_of: &dyn Fn(&str) -> Vec<String>,
    p: &CsrPattern,
) -> (f32, f32) {
    let me = nat.embed_matrix(p).unwrap();
    let mo = ort.embed_matrix(p).unwrap();
    let worst_matrix = assert_close_scaled(
        &format!("{name} matrix embedding"),
        me.values(),
        mo.values(),
        RTOL,
        0.0,
    );
    let mut worst_scores = 0.0f32;
    for h in &nat.info().heads {
        let lines = lines_of(&h.name);
        let (sn, so) = (
            nat.prepare_candidates(&h.name, &lines).unwrap(),
            ort.prepare_candidates(&h.name, &lines).unwrap(),
        );
        let mut a = vec![0.0; sn.len()];
        let mut b = vec![0.0; so.len()];
        nat.score_into(&me, &sn, &mut a).unwrap();
        // The same matrix embedding for both, so the scores compare the heads alone.
        let mo_same = ort.embed_matrix(p).unwrap();
        ort.score_into(&mo_same, &so, &mut b).unwrap();
        worst_scores = worst_scores.max(assert_close_scaled(
            &format!("{name} {} scores", h.name),
            &a,
            &b,
            RTOL,
            0.0,
        ));
    }
    (worst_matrix, worst_scores)
}

fn golden_lines(dir: &Path) -> impl Fn(&str) -> Vec<String> {
    let golden = read_json(&dir.join("golden.json"));
    move |head: &str| {
        golden["heads"][head]["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["line"].as_str().unwrap().to_string())
            .collect()
    }
}

fn golden_patterns(dir: &Path) -> Vec<CsrPattern> {
    let golden = read_json(&dir.join("golden.json"));
    golden["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .map(golden_pattern)
        .collect()
}

#[test]
fn native_matches_ort_on_every_fixture() {
    for name in [
        "tiny-waco-spmm",
        "tiny-waco-fp16",
        "tiny-dash",
        "tiny-cognate",
    ] {
        let dir = fixture(name);
        parity(&dir, &golden_lines(&dir), &golden_patterns(&dir));
    }
}

#[test]
fn native_matches_ort_on_the_real_waco_models() {
    let Some(pattern) = matrix("nemspmm1_16x4_0") else {
        return;
    };
    let small = matrix("mhd4800a").unwrap();
    for (kernel, upper) in [("spmm", "SpMM"), ("sddmm", "SDDMM"), ("spmv", "SpMV")] {
        let Some(dir) = model_dir(&format!("waco-{kernel}")) else {
            return;
        };
        let lines = match collected_lines(upper) {
            Some(l) => l,
            // SpMV has no measured lines: the numpy golden's seeded lines.
            None => {
                let golden = repo().join(format!("target/golden/waco-{kernel}.json"));
                if !golden.is_file() {
                    eprintln!("SKIPPED: {} missing", golden.display());
                    continue;
                }
                read_json(&golden)["matrices"][0]["schedules"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap().to_string())
                    .collect()
            }
        };
        parity(&dir, &|_| lines.clone(), &[pattern.clone(), small.clone()]);
    }
}

#[test]
fn native_matches_ort_on_the_full_size_cognate_bundle() {
    let Some(dir) = model_dir("cognate-full") else {
        return;
    };
    let Some(pattern) = matrix("cca") else {
        return;
    };
    // The fixture's golden lines use the same unified schemas as every COGNATE bundle.
    parity(&dir, &golden_lines(&fixture("tiny-cognate")), &[pattern]);
}

/// The fixture's files with every `Relu` of the predictor renamed to `Tanh` (a valid graph the
/// native engine does not run), manifest rewritten.
fn foreign_predictor_bundle() -> Vec<(String, Vec<u8>)> {
    let dir = fixture("tiny-waco-spmm");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_none_or(|e| e != "onnx") {
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let mut bytes = std::fs::read(&p).unwrap();
        if name.contains("predictor") {
            for i in 0..bytes.len().saturating_sub(4) {
                if &bytes[i..i + 4] == b"Relu" {
                    bytes[i..i + 4].copy_from_slice(b"Tanh");
                }
            }
        }
        files.push((name, bytes));
    }
    let manifest = manifest_for(&files);
    files.push(("manifest.json".into(), manifest));
    files
}

#[test]
fn a_graph_the_native_engine_does_not_run_falls_back_or_is_refused_by_name() {
    let strict = LoadOptions {
        backend: Backend::Native,
        fallback: None,
        ..LoadOptions::default()
    };
    let e = Model::from_files(foreign_predictor_bundle(), &strict).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("predictor") && text.contains("Tanh") && text.contains("fallback"),
        "{text}"
    );
    let Some(reference) = reference_backend() else {
        eprintln!("SKIPPED (fallback half): no ort backend compiled in");
        return;
    };
    let options = LoadOptions {
        backend: Backend::Native,
        fallback: Some(reference.clone()),
        ..LoadOptions::default()
    };
    let model = Model::from_files(foreign_predictor_bundle(), &options).unwrap();
    let engines = &model.info().engines;
    let pred = engines
        .iter()
        .find(|e| e.file.contains("predictor"))
        .unwrap();
    assert_eq!(pred.engine, reference.name());
    assert!(
        pred.note.as_deref().unwrap_or("").contains("Tanh"),
        "{pred:?}"
    );
    let me = engines
        .iter()
        .find(|e| e.file.contains("matrix_embedder"))
        .unwrap();
    assert_eq!(me.engine, "native", "the other graphs stay native");
    assert!(model.info().heads[0].cost.is_none());
    let head = model.info().heads[0].name.clone();
    let set = model
        .prepare_candidates(&head, &["1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1"])
        .unwrap();
    let pattern = CsrPattern::new(4, 4, vec![0, 1, 2, 3, 4], vec![0, 1, 2, 3]).unwrap();
    let emb = model.embed_matrix(&pattern).unwrap();
    let mut s = [0.0f32];
    model.score_into(&emb, &set, &mut s).unwrap();
    assert!(s[0].is_finite());
}

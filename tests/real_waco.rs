//! The three real WACO checkpoints (converted by scripts/setup.sh into models/) on the real
//! matrices in ../shared: parity with the numpy reference and agreement with measured runtimes.
//!
//! Expected values: target/golden/waco-<kernel>.json, written by scripts/test.sh with
//! `python -m dashrank_onnx.golden` (numpy reference). Tolerances are those in the file
//! (conv features rtol 1e-4, embeddings rtol 1e-4, scores rtol/atol 1e-4): the reference and
//! the runtime sum the sparse convolution in different orders over up to ~1M points.
//! Tests skip with a message when the models, goldens or ../shared are absent.

mod common;

use std::path::PathBuf;

use common::*;
use dashrank::{eval, CostModel, CsrPattern};

fn golden_path(kernel: &str) -> Option<(PathBuf, PathBuf)> {
    let model = repo().join("models").join(format!("waco-{kernel}"));
    let golden = repo()
        .join("target/golden")
        .join(format!("waco-{kernel}.json"));
    if model.is_dir() && golden.is_file() {
        Some((model, golden))
    } else {
        eprintln!(
            "SKIPPED: {} or {} missing (run `bash scripts/test.sh`, which converts the checkpoints and writes the goldens)",
            model.display(),
            golden.display()
        );
        None
    }
}

fn parity(kernel: &str) {
    let Some((model_dir, golden_file)) = golden_path(kernel) else {
        return;
    };
    let golden = read_json(&golden_file);
    let model = load(&model_dir);
    let head = golden["head"].as_str().unwrap();
    let tol = |k: &str| {
        (
            golden["tolerance"][k]["rtol"].as_f64().unwrap() as f32,
            golden["tolerance"][k]["atol"].as_f64().unwrap() as f32,
        )
    };
    let mut worst = [0.0f32; 3];
    let matrices = golden["matrices"].as_array().unwrap();
    assert_eq!(matrices.len(), 11, "all 11 real matrices are covered");
    for m in matrices {
        let name = m["name"].as_str().unwrap();
        let pattern = CsrPattern::read_waco_csr(m["file"].as_str().unwrap()).unwrap();
        assert_eq!(pattern.nnz() as u64, m["nnz"].as_u64().unwrap());
        let emb = model.embed_matrix(&pattern).unwrap();
        let (r, a) = tol("conv_features");
        worst[0] = worst[0].max(assert_close(
            &format!("{name} conv"),
            emb.conv_features(),
            &floats(&m["conv_features"]),
            r,
            a,
        ));
        let (r, a) = tol("matrix_embedding");
        worst[1] = worst[1].max(assert_close(
            &format!("{name} embedding"),
            emb.values(),
            &floats(&m["matrix_embedding"]),
            r,
            a,
        ));
        let lines: Vec<&str> = m["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        let set = model.prepare_candidates(head, &lines).unwrap();
        let mut scores = vec![0.0; set.len()];
        model.score_into(&emb, &set, &mut scores).unwrap();
        let (r, a) = tol("score");
        for (i, w) in m["scores"].as_array().unwrap().iter().enumerate() {
            match w.as_f64() {
                Some(w) => {
                    worst[2] = worst[2].max(assert_close(
                        &format!("{name} score #{i}"),
                        &scores[i..=i],
                        &[w as f32],
                        r,
                        a,
                    ))
                }
                None => assert!(scores[i].is_nan(), "{name} #{i} should be invalid"),
            }
        }
    }
    println!(
        "| waco-{kernel} | 11 | {:.1e} | {:.1e} | {:.1e} |",
        worst[0], worst[1], worst[2]
    );
}

#[test]
fn waco_spmm_matches_reference_on_all_matrices() {
    parity("spmm");
}

#[test]
fn waco_sddmm_matches_reference_on_all_matrices() {
    parity("sddmm");
}

#[test]
fn waco_spmv_matches_reference_on_all_matrices() {
    parity("spmv");
}

/// Kendall τ / Spearman ρ between the runtime's scores and measured TACO runtimes, and the
/// runtime of the model's top-1 / best-of-top-5 against the best measured.
fn agreement(kernel: &str, upper: &str) {
    let model_dir = repo().join("models").join(format!("waco-{kernel}"));
    if !model_dir.is_dir() {
        eprintln!(
            "SKIPPED: {} missing (run scripts/setup.sh)",
            model_dir.display()
        );
        return;
    }
    let Some(collected) = shared_or_skip(&format!("data/waco/collected/{upper}")) else {
        return;
    };
    let model = load(&model_dir);
    let head = model.info().heads[0].name.clone();
    for name in ["Trec6_16x16_9", "crystk01_2x16_1", "nemspmm1_16x4_0"] {
        let pattern =
            CsrPattern::read_waco_csr(shared().join(format!("data/waco/matrices/{name}.csr")))
                .unwrap();
        let text = std::fs::read_to_string(collected.join(format!("{name}.txt"))).unwrap();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let set = model.prepare_candidates(&head, &lines).unwrap();
        assert_eq!(
            set.valid_count(),
            lines.len(),
            "all measured lines are valid schedules"
        );
        let emb = model.embed_matrix(&pattern).unwrap();
        let mut scores = vec![0.0; set.len()];
        model.score_into(&emb, &set, &mut scores).unwrap();
        let polarity = model.info().heads[0].polarity;
        let pred = eval::oriented(&scores, polarity);
        let ms: Vec<f64> = set.measured_ms().iter().map(|m| m.unwrap()).collect();
        let tau = eval::kendall_tau_b(&pred, &ms).unwrap();
        let rho = eval::spearman_rho(&pred, &ms).unwrap();
        let t1 = eval::top_k_outcome(&pred, &ms, 1).unwrap();
        let t5 = eval::top_k_outcome(&pred, &ms, 5).unwrap();
        println!(
            "| {upper} | {name} | {} | {tau:.3} | {rho:.3} | {:.3} | {:.3} | {:.3} |",
            ms.len(),
            t1.chosen_ms,
            t5.chosen_ms,
            t1.best_ms
        );
        // The numpy reference measures τ 0.85–0.95 on these; a semantics bug drops it near 0.
        assert!(tau > 0.6, "{kernel} {name}: Kendall tau {tau:.3} too low");
        assert!(rho > 0.8, "{kernel} {name}: Spearman rho {rho:.3} too low");
        assert!(
            t5.chosen_ms <= 2.0 * t5.best_ms,
            "{kernel} {name}: best of top-5 {:.3} ms vs best {:.3} ms",
            t5.chosen_ms,
            t5.best_ms
        );
    }
}

#[test]
fn waco_spmm_scores_track_measured_runtimes() {
    agreement("spmm", "SpMM");
}

#[test]
fn waco_sddmm_scores_track_measured_runtimes() {
    agreement("sddmm", "SDDMM");
}

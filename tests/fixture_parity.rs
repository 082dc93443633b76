//! Parity of the Rust runtime with the numpy reference on the seeded fixture bundles.
//!
//! Expected values: `tests/data/fixtures/*/golden.json`, written by
//! `python -m dashrank_onnx.fixtures --out tests/data` (numpy reference, seed 20240601).
//! Tolerance: the golden file's `tolerance` (relative 1e-5, absolute 1e-6), on every backend,
//! relative to each vector's scale as well as to each value (`assert_close_scaled`: float32
//! sums reordered by another engine move by ulps of the vector's scale).

mod common;

use common::*;
use dashrank::{CandidateSet, CandidateStatus, CostModel, Model};
use serde_json::Value;

/// The golden file's tolerance: relative, absolute.
#[derive(Clone, Copy)]
struct Tolerance {
    rtol: f32,
    atol: f32,
}

impl Tolerance {
    fn check(self, what: &str, got: &[f32], want: &[f32]) {
        assert_close_scaled(what, got, want, self.rtol, self.atol);
    }
}

fn check_fixture(name: &str) {
    let dir = fixture(name);
    let golden = read_json(&dir.join("golden.json"));
    let model = load(&dir);
    let tol = Tolerance {
        rtol: golden["tolerance"]["rtol"].as_f64().unwrap() as f32,
        atol: golden["tolerance"]["atol"].as_f64().unwrap() as f32,
    };
    let heads = golden["heads"].as_object().unwrap();
    assert_eq!(model.info().heads.len(), heads.len(), "{name}: head count");

    // Schedule side: statuses, encodings (indirectly) and embeddings.
    let sets: Vec<(String, CandidateSet)> = heads
        .iter()
        .map(|(head, h)| {
            (
                head.clone(),
                check_head_schedules(name, &model, head, h, tol),
            )
        })
        .collect();

    // Matrix side and scores.
    for p in golden["patterns"].as_array().unwrap() {
        check_pattern(name, &model, p, &sets, tol);
    }
}

/// Checks the status and embedding of each golden schedule of `head`; returns its candidates.
fn check_head_schedules(
    name: &str,
    model: &Model,
    head: &str,
    h: &Value,
    tol: Tolerance,
) -> CandidateSet {
    let schedules = h["schedules"].as_array().unwrap();
    let lines: Vec<&str> = schedules
        .iter()
        .map(|s| s["line"].as_str().unwrap())
        .collect();
    let set = model.prepare_candidates(head, &lines).unwrap();
    let embeddings = model.embed_schedules(head, &lines).unwrap();
    for (i, s) in schedules.iter().enumerate() {
        let valid = s["valid"].as_bool().unwrap();
        match (set.status(i).unwrap(), valid) {
            (CandidateStatus::Valid, true) => {
                let emb = embeddings[i].clone().unwrap();
                tol.check(
                    &format!("{name} {head} schedule_embedding #{i}"),
                    &emb,
                    &floats(&s["schedule_embedding"]),
                );
            }
            (CandidateStatus::InvalidSchedule(e), false) => {
                let field = s["error"]["field"].as_str().unwrap_or("");
                let text = e.to_string();
                assert!(
                    text.contains(field),
                    "{name} {head} #{i}: error '{text}' should name field '{field}'"
                );
            }
            (status, _) => panic!(
                "{name} {head} #{i} ('{}'): status {status:?}, golden valid={valid}",
                lines[i]
            ),
        }
    }
    set
}

/// Checks one golden pattern's features, matrix embedding, and each head's scores.
fn check_pattern(
    name: &str,
    model: &Model,
    p: &Value,
    sets: &[(String, CandidateSet)],
    tol: Tolerance,
) {
    let pname = p["name"].as_str().unwrap();
    let pattern = golden_pattern(p);
    let conv = model.conv_features(&pattern).unwrap();
    tol.check(
        &format!("{name}/{pname} conv_features"),
        &conv,
        &floats(&p["conv_features"]),
    );
    let m = model.embed_matrix(&pattern).unwrap();
    tol.check(
        &format!("{name}/{pname} matrix_embedding"),
        m.values(),
        &floats(&p["matrix_embedding"]),
    );
    for (head, set) in sets {
        let want = p["scores"][head].as_array().unwrap();
        let mut got = vec![0.0f32; set.len()];
        model.score_into(&m, set, &mut got).unwrap();
        let want: Vec<f32> = want
            .iter()
            .map(|w| w.as_f64().map_or(f32::NAN, |w| w as f32))
            .collect();
        // NaN (invalid candidates) must stay NaN; the rest within tolerance.
        tol.check(&format!("{name}/{pname} {head} scores"), &got, &want);
    }
}

#[test]
fn tiny_waco_spmm_matches_reference() {
    check_fixture("tiny-waco-spmm");
}

#[test]
fn tiny_waco_fp16_matches_reference() {
    check_fixture("tiny-waco-fp16");
}

#[test]
fn tiny_dash_with_max_pooling_and_two_heads_matches_reference() {
    check_fixture("tiny-dash");
}

#[test]
fn tiny_cognate_with_cpu_spade_and_gpu_heads_matches_reference() {
    check_fixture("tiny-cognate");
}

//! COGNATE checkpoint round trip: state dicts written in PyTorch's zip layout (numpy only) from
//! seeded weights of the papers' architecture (full size), converted by
//! `python -m dashrank_onnx.convert_cognate`, loaded here with the default options and scored
//! over each head's schedule space on the real matrices (bundle `b` on the smaller six, see
//! [`B_MAX_NNZ`]), against the numpy reference computed from the original weights (never
//! from the converted files).
//!
//! Expected values: `target/golden/cognate/golden.json`, written by scripts/test.sh with
//! `python -m dashrank_onnx.cognate_roundtrip` (see onnx/COGNATE_CHECKPOINTS.md). Bundle `a`
//! follows the naming convention and has a fourth head added afterwards with `--head-only`;
//! bundle `b` uses other module names (mapping file), a 53-column mapper, a position-major
//! loop-order one-hot and another predictor input order, and its reference runs on the
//! checkpoint's own 53-column layout.
//!
//! Tolerance (stated in the golden): a value may differ by `rtol·|ref| + vec_rtol·max|ref|`
//! over its vector, rtol = vec_rtol = 1e-4. Both sides compute in float32 but sum in different
//! orders: the featurizer's global average pool over up to ~1M points and its convolutions over
//! 9·256 terms, then dot products of up to 288 terms; float32 reordering moves a sum by up to
//! n·2^-24 of the sum of magnitudes in the worst case (typically √n·2^-24, ~6e-5 at n = 1e6),
//! relative to the vector's scale, not to each value (an entry near 0 moves as much as a large
//! one). The measured worst deviations are printed. Tests skip with a message when the golden
//! or ../shared are absent.

mod common;

use std::path::PathBuf;

use common::*;
use dashrank::model::MatrixEmbedding;
use dashrank::{CostModel, CsrPattern, Model};
use serde_json::Value;

fn golden() -> Option<Value> {
    let path = repo().join("target/golden/cognate/golden.json");
    if !path.is_file() {
        eprintln!(
            "SKIPPED: {} missing (run `bash scripts/test.sh`, which writes it with \
             `python -m dashrank_onnx.cognate_roundtrip`)",
            path.display()
        );
        return None;
    }
    Some(read_json(&path))
}

/// Largest deviation relative to the vector's scale; panics beyond the tolerance.
fn compare(what: &str, got: &[f32], want: &[f32], rtol: f64, vec_rtol: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(0.0f64, |m, &v| m.max(f64::from(v).abs()));
    let mut worst = 0.0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (f64::from(g), f64::from(w));
        let diff = (g - w).abs();
        assert!(
            diff <= rtol * w.abs() + vec_rtol * scale,
            "{what}[{i}]: dashrank {g} vs reference {w} (vector scale {scale:.4})"
        );
        if scale > 0.0 {
            worst = worst.max(diff / scale);
        }
    }
    worst
}

/// Bundle `b` runs on the real matrices of at most this many nonzeros (six of the eleven; the
/// five larger ones take four fifths of the featurizer's time). Its featurizer has `a`'s
/// weights under other names, and what it adds to `a` (the name mapping, the 53-column mapper,
/// the predictor's input order) is exercised the same way by every matrix.
const B_MAX_NNZ: usize = 250_000;

/// A golden tolerance: `(rtol, vec_rtol)` (see the module docs).
type Tol = (f64, f64);

#[test]
fn converted_cognate_bundles_match_the_reference_on_real_matrices() {
    let Some(g) = golden() else { return };
    let tol = |k: &str| {
        (
            g["tolerance"][k]["rtol"].as_f64().unwrap(),
            g["tolerance"][k]["vec_rtol"].as_f64().unwrap(),
        )
    };
    let matrices = g["matrices"].as_array().unwrap();
    assert_eq!(matrices.len(), 11, "all 11 real matrices are covered");
    for variant in ["a", "b"] {
        check_bundle(&g, variant, tol("matrix_embedding"), tol("score"));
    }
}

/// Loads converted bundle `variant` and checks its heads and integrity; returns it with the
/// golden's heads.
fn load_converted<'g>(g: &'g Value, variant: &str) -> (Model, Vec<&'g str>) {
    let dir = PathBuf::from(g["bundles"][variant].as_str().unwrap());
    // Default options, with the dense-head backend of this build (tests/common).
    let model = Model::load(&dir, &options())
        .unwrap_or_else(|e| panic!("loading converted bundle {}: {e}", dir.display()));
    let heads: Vec<&str> = g["heads"][variant]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    let mut names: Vec<&str> = model.info().heads.iter().map(|h| h.name.as_str()).collect();
    names.sort_unstable();
    let mut expected = heads.clone();
    expected.sort_unstable();
    assert_eq!(names, expected, "bundle {variant}: heads");
    let integrity = &model.info().integrity;
    assert_eq!(integrity.files.len(), 2 + 2 * heads.len());
    assert!(integrity.provenance_overrides.is_empty());
    (model, heads)
}

/// Checks bundle `variant` on the golden matrices (for `b`, those of at most [`B_MAX_NNZ`]
/// nonzeros) and prints its worst deviations.
fn check_bundle(g: &Value, variant: &str, emb_tol: Tol, score_tol: Tol) {
    let (model, heads) = load_converted(g, variant);
    let (mut worst_e, mut worst_s, mut candidates, mut used) = (0.0f64, 0.0f64, 0usize, 0);
    for m in g["matrices"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let pattern = CsrPattern::read_waco_csr(m["file"].as_str().unwrap()).unwrap();
        if variant == "b" && pattern.nnz() > B_MAX_NNZ {
            continue;
        }
        used += 1;
        let emb = model.embed_matrix(&pattern).unwrap();
        worst_e = worst_e.max(compare(
            &format!("{variant} {name} matrix embedding"),
            emb.values(),
            &floats(&m["matrix_embedding"]),
            emb_tol.0,
            emb_tol.1,
        ));
        for head in &heads {
            let what = format!("{variant} {name} {head}");
            let (worst, n) = check_head_scores(
                &model,
                &emb,
                &m["heads"][*head],
                variant,
                head,
                &what,
                score_tol,
            );
            worst_s = worst_s.max(worst);
            candidates += n;
        }
    }
    if variant == "b" {
        assert!(
            used >= 5,
            "bundle b: {used} matrices of at most {B_MAX_NNZ} nonzeros"
        );
    }
    eprintln!(
        "bundle {variant}: {used} matrices, {candidates} candidates; worst deviation / vector \
         scale: matrix embedding {worst_e:.2e}, scores {worst_s:.2e}"
    );
}

/// Checks the scores of `head` on one matrix (golden entry `h`) against the reference, and
/// that dashrank's best candidate is a best one for the reference too; returns the worst
/// deviation and the number of candidates.
fn check_head_scores(
    model: &Model,
    emb: &MatrixEmbedding,
    h: &Value,
    variant: &str,
    head: &str,
    what: &str,
    (s_rtol, s_vec): Tol,
) -> (f64, usize) {
    let lines: Vec<&str> = h["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let want = floats(&h[variant]);
    let set = model.prepare_candidates(head, &lines).unwrap();
    assert!(
        set.statuses().iter().all(|s| s.is_valid()),
        "{head}: every space line parses"
    );
    let mut scores = vec![0.0f32; set.len()];
    model.score_into(emb, &set, &mut scores).unwrap();
    let worst = compare(what, &scores, &want, s_rtol, s_vec);
    // The best candidate dashrank picks is a best one for the reference too.
    let best = model.top_k(emb, &set, 1).unwrap()[0].index;
    let ref_min = want.iter().copied().fold(f32::INFINITY, f32::min);
    let scale = want.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
    assert!(
        f64::from(want[best] - ref_min) <= 2.0 * s_vec * f64::from(scale),
        "{what}: dashrank's best #{best} scores {} in the reference, whose best is {ref_min}",
        want[best]
    );
    (worst, lines.len())
}

//! Ranking whole schedule spaces (`Model::prepare_space`, `top_k_with_default`, `tune`):
//! the real WACO SpMM model on TACO spaces for real matrices, and (when the fixture exists)
//! the COGNATE fixture on all three targets' spaces through the unified mapping.
//!
//! Tests skip with a message when `models/` (run `bash scripts/setup.sh`), `../shared` or
//! the COGNATE fixture are absent. The whole 611k-line WACO SpMM space is timed by
//! `cargo bench --bench heads -- space` (BENCHMARKS.md).

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use dashrank::rank::SpaceConfig;
use dashrank::schedule::space::{
    Kernel, Mapped, MatrixShape, ScheduleSpace, SpadeSpace, SparseTirSpace, TacoSpace,
};
use dashrank::{CandidateStatus, CostModel, CsrPattern, ErrorKind, Model};

const WACO_HEAD: &str = "cpu-taco/spmm";

fn waco_spmm() -> Option<Model> {
    let dir = repo().join("models/waco-spmm");
    if !dir.is_dir() {
        eprintln!(
            "SKIPPED: {} missing (run `bash scripts/setup.sh`)",
            dir.display()
        );
        return None;
    }
    Some(load(&dir))
}

fn matrix(name: &str) -> Option<CsrPattern> {
    let path: PathBuf = shared()
        .join("data/waco/matrices")
        .join(format!("{name}.csr"));
    if !path.is_file() {
        eprintln!("SKIPPED: {} missing (../shared)", path.display());
        return None;
    }
    Some(CsrPattern::read_waco_csr(&path).unwrap())
}

/// A WACO-style CPU SpMM subset: 3·3·3 splits × allowed orders × 16 formats × 2 chunks. The
/// chunks leave out the default's 32, so the default is injected (appended).
fn taco_subset() -> TacoSpace {
    let mut space = TacoSpace::waco(Kernel::SpMM);
    space.splits = vec![vec![1, 4, 32], vec![1, 8, 32], vec![1, 16, 128]];
    space.chunks = vec![1, 64];
    space
}

/// A space over explicit lines (config = line index), with its own default; lines are never
/// duplicates of each other (the key is the index), so identical lines tie.
#[derive(Clone)]
struct ListSpace {
    lines: Vec<String>,
    default: usize,
    invalid: Vec<usize>,
}

impl ScheduleSpace for ListSpace {
    type Config = usize;
    fn name(&self) -> String {
        "list".into()
    }
    fn enumerate(&self, _: &MatrixShape) -> Vec<usize> {
        (0..self.lines.len()).collect()
    }
    fn default_config(&self, _: &MatrixShape) -> usize {
        self.default
    }
    fn validate(&self, c: &usize, _: &MatrixShape) -> dashrank::Result<()> {
        if self.invalid.contains(c) {
            return Err(dashrank::Error::new(ErrorKind::Schedule {
                index: None,
                field: Some("list".into()),
                value: Some(c.to_string()),
                reason: "rejected by the test space".into(),
            }));
        }
        Ok(())
    }
    fn to_line(&self, c: &usize) -> String {
        self.lines[*c].clone()
    }
    fn duplicate_key(&self, c: &usize, _: &MatrixShape) -> String {
        c.to_string()
    }
}

/// Checks the invariants of a ranking against a brute-force sort of the scores.
fn check_ranking<C: SpaceConfig>(
    model: &Model,
    emb: &dashrank::model::MatrixEmbedding,
    cands: &dashrank::SpaceCandidates<C>,
    k: usize,
) -> dashrank::SpaceTopK {
    let top = model.top_k_with_default(emb, cands, k).unwrap();
    let polarity = model
        .info()
        .heads
        .iter()
        .find(|h| h.name == cands.head())
        .unwrap()
        .polarity;
    let mut scores = vec![0.0; cands.len()];
    model.score_space_into(emb, cands, &mut scores).unwrap();
    let mut ranked: Vec<usize> = (0..cands.len()).filter(|&i| cands.is_ranked(i)).collect();
    assert_eq!(ranked.len(), cands.ranked_count());
    assert_eq!(top.ranked, cands.ranked_count());
    ranked.sort_by(|&a, &b| polarity.compare(scores[a], scores[b]).then(a.cmp(&b)));
    let want: Vec<usize> = ranked.iter().copied().take(k).collect();
    let got: Vec<usize> = top.top().iter().map(|e| e.index).collect();
    assert_eq!(got, want, "exact top-k, ties by index");
    for (r, e) in top.top().iter().enumerate() {
        assert_eq!(e.rank, Some(r));
        assert_eq!(e.score.to_bits(), scores[e.index].to_bits());
        assert_eq!(e.is_default, e.index == cands.default_index());
    }
    // The default is always there, flagged, exactly once.
    let d = top.default_entry();
    assert!(d.is_default);
    assert_eq!(d.index, cands.default_index());
    assert_eq!(top.entries.iter().filter(|e| e.is_default).count(), 1);
    if cands.is_ranked(d.index) {
        assert_eq!(d.rank, ranked.iter().position(|&i| i == d.index));
    }
    top
}

#[test]
fn waco_ranks_a_taco_subset_with_the_default_injected() {
    let (Some(model), Some(pattern)) = (waco_spmm(), matrix("Trec6_16x16_9")) else {
        return;
    };
    let space = taco_subset();
    let shape = MatrixShape::from(&pattern);
    let cands = model.prepare_space(WACO_HEAD, &space, &shape).unwrap();
    let enumerated = space.enumerate(&shape).len();
    assert!(enumerated > 1000, "{enumerated}");
    assert_eq!(cands.len(), enumerated + 1, "default appended");
    assert_eq!(cands.default_index(), enumerated);
    assert_eq!(
        cands.line(cands.default_index()).as_deref(),
        Some("1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 32")
    );
    assert!(cands.status(cands.default_index()).unwrap().is_valid());
    assert_eq!(
        cands.ranked_count(),
        cands.len(),
        "all valid on a large matrix"
    );
    let emb = model.embed_matrix(&pattern).unwrap();
    let top = check_ranking(&model, &emb, &cands, 10);
    assert_eq!(top.entries.len(), 11);
    assert_eq!(top.default_position, 10);
    let d = top.default_entry();
    eprintln!(
        "Trec6_16x16_9: default ranks {:?} of {}; best {:?}",
        d.rank,
        top.ranked,
        cands.line(top.entries[0].index)
    );
    // k larger than the space: everything, default inside, nothing appended.
    let all = model.top_k_with_default(&emb, &cands, usize::MAX).unwrap();
    assert_eq!(all.entries.len(), cands.len());
    assert_eq!(all.top_len, cands.len());
    assert_eq!(
        all.entries[all.default_position].index,
        cands.default_index()
    );
    // k = 0: just the default.
    let none = model.top_k_with_default(&emb, &cands, 0).unwrap();
    assert_eq!(none.entries.len(), 1);
    assert!(none.top().is_empty());
    assert_eq!(none.default_entry().rank, d.rank);
}

#[test]
fn schedule_work_is_shared_across_matrices() {
    let (Some(model), Some(a), Some(b)) = (waco_spmm(), matrix("Trec6_16x16_9"), matrix("cca"))
    else {
        return;
    };
    let space = taco_subset();
    let prepared = model
        .prepare_schedule_space(WACO_HEAD, space.clone())
        .unwrap();
    let ca = model
        .space_candidates(&prepared, &MatrixShape::from(&a))
        .unwrap();
    let cb = model
        .space_candidates(&prepared, &MatrixShape::from(&b))
        .unwrap();
    assert!(std::ptr::eq(ca.candidate_set(), cb.candidate_set()));
    assert!(Arc::ptr_eq(ca.prepared(), cb.prepared()));
    // The same ranking as preparing from scratch for that matrix.
    let plain = model
        .prepare_space(WACO_HEAD, &space, &MatrixShape::from(&b))
        .unwrap();
    let eb = model.embed_matrix(&b).unwrap();
    let x = model.top_k_with_default(&eb, &cb, 5).unwrap();
    let y = model.top_k_with_default(&eb, &plain, 5).unwrap();
    assert_eq!(x, y);
    // Lines and configurations are rebuilt from their index on demand.
    let list = space.candidates(&MatrixShape::from(&b));
    for i in [0, 1, 777, list.items.len() - 1] {
        assert_eq!(cb.line(i).as_deref(), Some(list.items[i].line.as_str()));
        assert_eq!(cb.config(i).as_ref(), Some(&list.items[i].config));
    }
    fn send_sync<T: Send + Sync>(_: &T) {}
    send_sync(&prepared);
    send_sync(&cb);
}

#[test]
fn small_matrix_duplicates_are_statuses_not_failures() {
    let Some(model) = waco_spmm() else {
        return;
    };
    // 4 × 4: splits above 4 behave like 4, so most of the subset duplicates earlier lines.
    let pattern = CsrPattern::new(4, 4, vec![0, 1, 2, 3, 4], vec![0, 1, 2, 3]).unwrap();
    let shape = MatrixShape::from(&pattern);
    let cands = model
        .prepare_space(WACO_HEAD, &taco_subset(), &shape)
        .unwrap();
    let dups: Vec<(usize, usize)> = cands
        .rejected()
        .filter_map(|(i, s)| match s {
            CandidateStatus::Duplicate { of } => Some((i, of)),
            _ => None,
        })
        .collect();
    assert!(!dups.is_empty());
    assert_eq!(dups.len() + cands.ranked_count(), cands.len());
    for &(i, of) in &dups {
        assert!(of < i);
        assert!(
            cands.is_ranked(of),
            "duplicates point at a ranked candidate"
        );
    }
    let emb = model.embed_matrix(&pattern).unwrap();
    let top = check_ranking(&model, &emb, &cands, 20);
    assert!(top.top().iter().all(|e| cands.is_ranked(e.index)));
}

#[test]
fn invalid_candidates_get_statuses() {
    let Some(model) = waco_spmm() else {
        return;
    };
    // Split 3 is rejected by the toolchain (not a power of two); chunk 512 is outside the
    // WACO schema's `parchunk` vocabulary.
    let mut space = TacoSpace::waco(Kernel::SpMM);
    space.splits = vec![vec![1, 3], vec![1], vec![1, 2]];
    space.chunks = vec![32, 512];
    let shape = MatrixShape::new(1000, 1000, 10_000);
    let cands = model.prepare_space(WACO_HEAD, &space, &shape).unwrap();
    let (mut for_matrix, mut for_schema) = (0, 0);
    for (i, s) in cands.rejected() {
        match s {
            CandidateStatus::InvalidForMatrix { reason } => {
                assert!(reason.contains("'isplit' value '3'"), "{reason}");
                assert!(cands.line(i).unwrap().starts_with("3 "));
                for_matrix += 1;
            }
            CandidateStatus::InvalidSchedule(e) => {
                let ErrorKind::Schedule {
                    index,
                    field,
                    value,
                    ..
                } = e.kind()
                else {
                    panic!("{e}");
                };
                assert_eq!(*index, Some(i));
                assert_eq!(field.as_deref(), Some("parchunk"));
                assert_eq!(value.as_deref(), Some("512"));
                for_schema += 1;
            }
            other => panic!("{i}: {other:?}"),
        }
    }
    assert!(for_matrix > 0 && for_schema > 0);
    assert_eq!(cands.ranked_count() * 4, cands.len(), "1 in 4 survives");
    let emb = model.embed_matrix(&pattern_for(&shape)).unwrap();
    let top = check_ranking(&model, &emb, &cands, 3);
    assert!(top.default_entry().rank.is_some());
}

fn pattern_for(shape: &MatrixShape) -> CsrPattern {
    // A banded pattern of the given size (nnz only approximates `shape.nnz`).
    let per_row = (shape.nnz / shape.rows).max(1);
    let mut indptr = vec![0];
    let mut indices = Vec::new();
    for r in 0..shape.rows {
        for c in r..(r + per_row).min(shape.cols) {
            indices.push(c as u32);
        }
        indptr.push(indices.len());
    }
    CsrPattern::new(shape.rows, shape.cols, indptr, indices).unwrap()
}

#[test]
fn ties_go_to_the_lower_index_and_bad_defaults_are_reported() {
    let Some(model) = waco_spmm() else {
        return;
    };
    let best_guess = "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16";
    let other = "1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 32";
    let lines = vec![
        other.to_string(),
        best_guess.to_string(),
        "garbage".to_string(),
        best_guess.to_string(),
        other.to_string(),
        best_guess.to_string(),
    ];
    let space = ListSpace {
        lines: lines.clone(),
        default: 2, // the schema cannot parse the default's line
        invalid: vec![5],
    };
    let shape = MatrixShape::new(1000, 1000, 10_000);
    let cands = model.prepare_space(WACO_HEAD, &space, &shape).unwrap();
    assert!(matches!(
        cands.status(2),
        Some(CandidateStatus::InvalidSchedule(_))
    ));
    assert!(matches!(
        cands.status(5),
        Some(CandidateStatus::InvalidForMatrix { .. })
    ));
    let emb = model.embed_matrix(&pattern_for(&shape)).unwrap();
    let top = check_ranking(&model, &emb, &cands, 4);
    let idx: Vec<usize> = top.top().iter().map(|e| e.index).collect();
    let (first, second) = if top.top()[0].index == 1 {
        ([1, 3], [0, 4])
    } else {
        ([0, 4], [1, 3])
    };
    assert_eq!(
        idx,
        [first, second].concat(),
        "equal lines tie, lower index first"
    );
    assert_eq!(top.top()[0].score, top.top()[1].score);
    let d = top.default_entry();
    assert_eq!(d.index, 2);
    assert!(d.score.is_nan());
    assert_eq!(d.rank, None);

    // The measure loop measures the default even though the model could not score it.
    let mut calls = Vec::new();
    let r = model
        .tune(&emb, &cands, 2, |i| {
            calls.push(i);
            Some(if i == 2 { 0.5 } else { 1.0 + i as f64 })
        })
        .unwrap();
    assert_eq!(calls, [idx[0], idx[1], 2]);
    assert_eq!(r.best.unwrap().index, 2);
    assert!(r.best.unwrap().is_default);
}

#[test]
fn tune_returns_the_fastest_measured_including_the_default() {
    let (Some(model), Some(pattern)) = (waco_spmm(), matrix("cca")) else {
        return;
    };
    let space = taco_subset();
    let cands = model
        .prepare_space(WACO_HEAD, &space, &MatrixShape::from(&pattern))
        .unwrap();
    let emb = model.embed_matrix(&pattern).unwrap();
    let default = cands.default_index();
    let k = 5;
    let top = model.top_k_with_default(&emb, &cands, k).unwrap();
    let topk: Vec<usize> = top.top().iter().map(|e| e.index).collect();

    // 1. The model's pick is fastest.
    let r = model
        .tune(&emb, &cands, k, |i| {
            Some(if i == topk[2] { 1.0 } else { 3.0 })
        })
        .unwrap();
    assert_eq!(r.measurements.len(), k + 1);
    let measured: Vec<usize> = r.measurements.iter().map(|m| m.index).collect();
    assert_eq!(measured, [topk.clone(), vec![default]].concat());
    assert_eq!(r.best.unwrap().index, topk[2]);
    assert_eq!(r.speedup_over_default(), Some(3.0));
    assert_eq!(r.ranking, top);

    // 2. Everything the model picked is slower than the default, or fails: the default wins.
    let r = model
        .tune(&emb, &cands, k, |i| match i {
            i if i == default => Some(2.0),
            i if i == topk[0] => None,
            i if i == topk[1] => Some(f64::NAN),
            i if i == topk[2] => Some(-1.0),
            _ => Some(2.5),
        })
        .unwrap();
    let best = r.best.unwrap();
    assert_eq!(
        (best.index, best.is_default, best.ms),
        (default, true, Some(2.0))
    );
    assert_eq!(r.measurements[0].ms, None);
    assert_eq!(r.measurements[1].ms, None);
    assert_eq!(r.measurements[2].ms, None);
    assert_eq!(r.speedup_over_default(), Some(1.0));

    // 3. Ties between measurements go to the better-ranked candidate.
    let r = model.tune(&emb, &cands, k, |_| Some(1.0)).unwrap();
    assert_eq!(r.best.unwrap().index, topk[0]);

    // 4. Nothing measurable.
    let r = model.tune(&emb, &cands, k, |_| None).unwrap();
    assert!(r.best.is_none());
    assert_eq!(r.speedup_over_default(), None);
}

fn cognate_fixture() -> Option<Model> {
    let dir = fixture("tiny-cognate");
    if !dir.is_dir() {
        eprintln!(
            "SKIPPED: {} missing (COGNATE fixture not generated yet)",
            dir.display()
        );
        return None;
    }
    Some(load(&dir))
}

/// Ranks one unified-form space with the COGNATE fixture and checks the invariants.
fn rank_unified<S>(model: &Model, head: &str, space: &S, expect: usize)
where
    S: ScheduleSpace + Clone + Send + Sync + 'static,
{
    let pattern = match matrix("cca") {
        Some(p) => p,
        None => pattern_for(&MatrixShape::new(500, 700, 5000)),
    };
    let shape = MatrixShape::from(&pattern);
    let cands = model.prepare_space(head, space, &shape).unwrap();
    assert_eq!(cands.len(), expect, "{}", space.name());
    let bad: Vec<String> = cands
        .rejected()
        .filter(|(_, s)| !matches!(s, CandidateStatus::Duplicate { .. }))
        .map(|(i, s)| format!("{i} {:?}: {s:?}", cands.line(i)))
        .collect();
    assert!(
        bad.is_empty(),
        "{}: every line parses: {bad:?}",
        space.name()
    );
    assert!(cands.status(cands.default_index()).is_some());
    let emb = model.embed_matrix(&pattern).unwrap();
    let top = check_ranking(model, &emb, &cands, 10);
    eprintln!(
        "{}: {} ranked, default ranks {:?}",
        space.name(),
        top.ranked,
        top.default_entry().rank
    );
}

#[test]
fn cognate_fixture_ranks_all_three_spaces() {
    let Some(model) = cognate_fixture() else {
        return;
    };
    rank_unified(
        &model,
        "spade/spmm",
        &Mapped(SpadeSpace::new(Kernel::SpMM).unwrap()),
        256,
    );
    rank_unified(
        &model,
        "gpu-sparsetir/spmm",
        &Mapped(SparseTirSpace::new(Kernel::SpMM, 128).unwrap()),
        288,
    );
    rank_unified(&model, "cpu-taco/spmm", &Mapped(taco_subset()), {
        taco_subset().enumerate(&MatrixShape::new(1, 1, 1)).len() + 1
    });
}

#[test]
fn cognate_spade_is_prepared_once_and_its_column_count_lines_per_matrix() {
    let Some(model) = cognate_fixture() else {
        return;
    };
    let space = Mapped(SpadeSpace::new(Kernel::SpMM).unwrap());
    let prepared = model
        .prepare_schedule_space("spade/spmm", space.clone())
        .unwrap();
    for cols in [5000, 7000, 65536] {
        let shape = MatrixShape::new(100, cols, 1000);
        let cands = model.space_candidates(&prepared, &shape).unwrap();
        let fresh = space.candidates(&shape);
        assert_eq!(cands.len(), fresh.items.len());
        let pattern = pattern_for(&shape);
        let emb = model.embed_matrix(&pattern).unwrap();
        let mut got = vec![0.0; cands.len()];
        model.score_space_into(&emb, &cands, &mut got).unwrap();
        // Scores equal those of the lines printed for this shape, prepared from scratch.
        let lines: Vec<&str> = fresh.items.iter().map(|c| c.line.as_str()).collect();
        let set = model.prepare_candidates("spade/spmm", &lines).unwrap();
        let mut want = vec![0.0; set.len()];
        model.score_into(&emb, &set, &mut want).unwrap();
        for (i, item) in fresh.items.iter().enumerate() {
            assert_eq!(
                cands.line(i).as_deref(),
                Some(item.line.as_str()),
                "cols {cols} #{i}"
            );
            assert_eq!(
                cands.space_status(i).as_ref(),
                Some(&item.status),
                "cols {cols} #{i}"
            );
            if item.status.is_valid() || i == cands.default_index() {
                assert_eq!(got[i].to_bits(), want[i].to_bits(), "cols {cols} #{i}");
            } else {
                assert!(got[i].is_nan());
            }
        }
    }
}

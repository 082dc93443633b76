//! Tests of the workflow on the fixtures: head selection, preparation in the head's line
//! form, the rank report.

use super::*;
use crate::schedule::space::{ScheduleSpace, SpaceOptions};
use crate::{CostModel, CsrPattern, ErrorKind, LoadOptions};

fn cognate() -> Model {
    Model::load("tests/data/fixtures/tiny-cognate", &LoadOptions::default()).unwrap()
}

fn banded(n: usize) -> CsrPattern {
    let (mut row_ptr, mut col_idx) = (vec![0usize], Vec::new());
    for r in 0..n {
        for c in r.saturating_sub(1)..(r + 2).min(n) {
            col_idx.push(c as u32);
        }
        row_ptr.push(col_idx.len());
    }
    CsrPattern::new(n, n, row_ptr, col_idx).unwrap()
}

/// The WACO SpMM space with two values per split and chunk (5 184 configurations).
fn small_taco() -> crate::schedule::space::TacoSpace {
    let mut taco = crate::schedule::space::TacoSpace::waco(Kernel::SpMM);
    taco.splits = vec![vec![1, 4], vec![1, 8], vec![1, 16]];
    taco.chunks = vec![1, 16];
    taco
}

#[test]
fn heads_are_selected_by_name_target_and_kernel() {
    let model = cognate();
    let info = model.info();
    let h = select_head(info, None, Some(Target::Spade), Some(Kernel::SDDMM)).unwrap();
    assert_eq!(h.name, "spade/sddmm");
    let h = select_head(info, Some("spade/spmm"), Some(Target::Spade), None).unwrap();
    assert_eq!(h.kernel, Kernel::SpMM);
    // A named head for another target, no head, several heads, an unknown name.
    let e = select_head(info, Some("spade/spmm"), Some(Target::CpuTaco), None).unwrap_err();
    assert!(e.to_string().contains("not target cpu-taco"), "{e}");
    let e = select_head(info, None, Some(Target::CpuTaco), Some(Kernel::SpMV)).unwrap_err();
    assert!(e.to_string().contains("cpu-taco spmv"), "{e}");
    let e = select_head(info, None, Some(Target::Spade), None).unwrap_err();
    assert!(e.to_string().contains("2 heads"), "{e}");
    let e = select_head(info, Some("cpu/none"), None, None).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::UnknownHead { .. }), "{e:?}");
}

#[test]
fn prepare_picks_the_head_and_its_line_form() {
    let model = cognate();
    let pattern = banded(40);
    let shape = MatrixShape::from(&pattern);
    let matrix = model.embed_matrix(&pattern).unwrap();
    for name in ["taco-spmm", "spade-spmm", "spade-sddmm", "sparsetir-spmm"] {
        let space = match name {
            "taco-spmm" => AnySpace::from(small_taco()),
            _ => AnySpace::from_name(name, &SpaceOptions::default()).unwrap(),
        };
        let cands = prepare(&model, None, &space, &shape).unwrap();
        assert_eq!(cands.space_name(), format!("{name}-unified"));
        assert!(cands.ranked_count() > 0, "{name}");
        let top = model.top_k_with_default(&matrix, &cands, 5).unwrap();
        let report = SpaceRankReport::new("band40", &cands, &top).unwrap();
        assert_eq!(report.entries.len(), top.entries.len());
        let d = report.default_entry().unwrap();
        assert!(d.is_default && d.index == cands.default_index());
        for (e, t) in report.entries.iter().zip(&top.entries) {
            assert_eq!(e.rank, t.rank.map(|r| r + 1));
            let c = cands.config(e.index).unwrap();
            assert_eq!(e.toolchain, cands.render(e.index, "band40").unwrap());
            assert_eq!(
                e.line,
                space.clone().with_form(LineForm::Unified).to_line(&c)
            );
        }
        let ranks: Vec<usize> = report.entries[..top.top_len]
            .iter()
            .map(|e| e.rank.unwrap())
            .collect();
        assert_eq!(ranks, (1..=top.top_len).collect::<Vec<_>>());
    }
    // SPADE has no SpMV space; the fixture has no TACO SDDMM head.
    let e = AnySpace::from_name("spade-spmv", &SpaceOptions::default()).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::UnsupportedKernel { .. }),
        "{e}"
    );
    let space = AnySpace::from_name("taco-sddmm", &SpaceOptions::default()).unwrap();
    assert!(prepare(&model, None, &space, &shape).is_err());
}

#[test]
fn waco_heads_take_native_lines() {
    let model = Model::load(
        "tests/data/fixtures/tiny-waco-spmm",
        &LoadOptions::default(),
    )
    .unwrap();
    let space = AnySpace::from(small_taco());
    let cands = prepare(&model, None, &space, &MatrixShape::new(64, 64, 200)).unwrap();
    assert_eq!(cands.space_name(), "taco-spmm");
    let d = cands.default_index();
    assert_eq!(
        cands.line(d).unwrap(),
        "1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 32"
    );
}

#[test]
fn distinct_top_k_passes_over_repeated_programs() {
    use crate::tune::{CandidateOps, ToolchainOps};
    let model = Model::load(
        "tests/data/fixtures/tiny-waco-spmm",
        &LoadOptions::default(),
    )
    .unwrap();
    let pattern = banded(64);
    let space = AnySpace::from(small_taco());
    let cands = prepare(&model, None, &space, &MatrixShape::from(&pattern)).unwrap();
    let matrix = model.embed_matrix(&pattern).unwrap();
    let ops = ToolchainOps::new(&cands, "band").with_pattern(&pattern);
    let k = 40;
    let (plain, _) = top_k_runnable_with(&model, &matrix, &cands, k, &ops, false).unwrap();
    assert_eq!(
        plain,
        top_k_runnable(&model, &matrix, &cands, k, &ops).unwrap().0
    );
    let (distinct, passed) = top_k_runnable_with(&model, &matrix, &cands, k, &ops, true).unwrap();
    let programs = |t: &crate::rank::SpaceTopK| -> Vec<String> {
        t.top()
            .iter()
            .map(|e| ops.render(e.index).unwrap())
            .collect()
    };
    let unique = |p: &[String]| p.iter().collect::<std::collections::HashSet<_>>().len();
    let (p, d) = (programs(&plain), programs(&distinct));
    assert!(unique(&p) < k, "the plain top {k} repeats programs");
    assert_eq!((d.len(), unique(&d)), (k, k));
    // The model's order is kept, and the default is still reported.
    assert!(distinct.top().windows(2).all(|w| w[0].rank < w[1].rank));
    assert!(distinct.default_entry().is_default);
    // Each repeat passed over names a kept candidate with the same program.
    let repeats: Vec<_> = passed
        .iter()
        .filter_map(|s| {
            let of = s.reason.strip_prefix("the same program as candidate ")?;
            Some((s.index, of.parse::<usize>().unwrap()))
        })
        .collect();
    assert!(!repeats.is_empty());
    for (index, of) in repeats {
        assert!(distinct.top().iter().any(|e| e.index == of));
        assert_eq!(ops.render(index).unwrap(), ops.render(of).unwrap());
    }
}

//! Tests of the tuning loop with synthetic measurers on a small TACO space.

use std::collections::HashMap;
use std::time::Duration;

use super::*;
use crate::model::MatrixEmbedding;
use crate::rank::{CostModel, SpaceCandidates};
use crate::schedule::space::{
    AnyConfig, AnySpace, LevelFormat, MatrixShape, SuperSchedule, TacoSpace,
};
use crate::{CsrPattern, Kernel, LoadOptions, Model};

fn model() -> Model {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/fixtures/tiny-waco-spmm"
    );
    Model::load(dir, &LoadOptions::default()).unwrap()
}

/// A 40 x 40 band: small enough that every layout fits.
fn band() -> CsrPattern {
    let n: usize = 40;
    let mut row_ptr = vec![0];
    let mut col_idx = Vec::new();
    for r in 0..n {
        for c in r.saturating_sub(1)..(r + 2).min(n) {
            col_idx.push(c as u32);
        }
        row_ptr.push(col_idx.len());
    }
    CsrPattern::new(n, n, row_ptr, col_idx).unwrap()
}

/// The band, the fixture model, a small WACO SpMM space prepared for it, and its embedding.
fn fixture() -> (
    CsrPattern,
    Model,
    SpaceCandidates<AnyConfig>,
    MatrixEmbedding,
) {
    prepared(band())
}

/// `pattern`, the fixture model, a small WACO SpMM space prepared for it, and its embedding.
fn prepared(
    pattern: CsrPattern,
) -> (
    CsrPattern,
    Model,
    SpaceCandidates<AnyConfig>,
    MatrixEmbedding,
) {
    let model = model();
    let space = AnySpace::from(TacoSpace::waco_up_to(Kernel::SpMM, 8, 8));
    let cands =
        crate::workflow::prepare(&model, None, &space, &MatrixShape::from(&pattern)).unwrap();
    let matrix = model.embed_matrix(&pattern).unwrap();
    (pattern, model, cands, matrix)
}

/// A runtime landscape over SuperSchedules: faster with larger i and k splits and dense inner
/// levels, slowest for the default; the optimum is far from what the fixture model ranks.
fn landscape(
    c: &SpaceCandidates<AnyConfig>,
) -> impl FnMut(&MeasureRequest<'_>) -> Result<Measured, String> + '_ {
    move |r: &MeasureRequest<'_>| {
        let Some(AnyConfig::Taco(s)) = c.config(r.index) else {
            return Err("not TACO".to_owned());
        };
        if r.is_default {
            return Ok(Measured::ms(10.0));
        }
        Ok(Measured::ms(cost(&s)))
    }
}

fn cost(s: &SuperSchedule) -> f64 {
    let dense = s
        .formats
        .iter()
        .filter(|f| **f == LevelFormat::Uncompressed)
        .count() as f64;
    let split = f64::from(s.split_of('i').trailing_zeros() + s.split_of('k').trailing_zeros());
    8.0 - 0.5 * split - 0.3 * dense + 0.01 * f64::from(s.chunk.trailing_zeros())
}

#[test]
fn top_k_measures_the_ranking_then_the_default() {
    let (_, model, cands, matrix) = fixture();
    let ops = LineOps::new(&cands);
    let top = model.top_k_with_default(&matrix, &cands, 4).unwrap();
    let mut measure = landscape(&cands);
    let t = tune(
        &model,
        &matrix,
        &cands,
        &ops,
        &TuneOptions::top_k(4),
        &mut measure,
    )
    .unwrap();
    let measured: Vec<usize> = t.measurements.iter().map(|m| m.index).collect();
    let mut want: Vec<usize> = top.top().iter().map(|e| e.index).collect();
    want.push(cands.default_index());
    assert_eq!(measured, want);
    assert!(t.measurements.iter().all(|m| m.round == 0));
    assert_eq!(t.measurements[0].rank, Some(0));
    assert!(t.speedup_over_default().unwrap() > 1.0);
}

#[test]
fn search_goes_on_from_the_fastest_and_beats_the_same_budget_of_top_k() {
    let (pattern, model, cands, matrix) = fixture();
    let ops = ToolchainOps::new(&cands, "band").with_pattern(&pattern);
    let budget = 30;
    let options = TuneOptions {
        k: 5,
        budget: Budget {
            measurements: budget,
            time: None,
        },
        ..TuneOptions::default()
    };
    let mut measure = landscape(&cands);
    let search = tune(&model, &matrix, &cands, &ops, &options, &mut measure).unwrap();
    assert_eq!(search.measurements.len(), budget);
    assert!(search.measurements[0].is_default, "the default first");
    let first: Vec<&Measurement> = search
        .measurements
        .iter()
        .filter(|m| !m.confirmation)
        .collect();
    assert_eq!(first.len(), budget - options.confirm - 1);
    assert_eq!(first.iter().filter(|m| m.is_default).count(), 1);
    // Rounds after the seeds measure neighbours of candidates measured before them.
    let later: Vec<&&Measurement> = first.iter().filter(|m| m.round > 0).collect();
    assert!(!later.is_empty());
    for m in &later {
        let before = &search.measurements[..search
            .measurements
            .iter()
            .position(|x| x.index == m.index)
            .unwrap()];
        assert!(
            before
                .iter()
                .any(|b| ops.neighbours(b.index).contains(&m.index)),
            "round {} measured {} without a measured neighbour",
            m.round,
            m.index
        );
    }
    // Distinct programs only.
    let keys: std::collections::HashSet<String> =
        first.iter().map(|m| ops.key(m.index).unwrap()).collect();
    assert_eq!(keys.len(), first.len());
    let mut measure = landscape(&cands);
    let top = TuneOptions {
        budget: Budget {
            measurements: budget,
            time: None,
        },
        ..TuneOptions::top_k(budget - 1)
    };
    let plain = tune(&model, &matrix, &cands, &ops, &top, &mut measure).unwrap();
    let best = |t: &Tuned| t.best_measurement().unwrap().objective().unwrap();
    assert!(
        best(&search) < best(&plain),
        "search {} vs top-k {}",
        best(&search),
        best(&plain)
    );
}

/// A landscape where the first measurement of every candidate but the default is lucky (a
/// third of its time) and later ones are not.
fn lucky_once(
    c: &SpaceCandidates<AnyConfig>,
) -> impl FnMut(&MeasureRequest<'_>) -> Result<Measured, String> + '_ {
    let mut seen = std::collections::HashSet::new();
    let mut truth = landscape(c);
    move |r: &MeasureRequest<'_>| {
        let m = truth(r)?;
        let lucky = !r.is_default && seen.insert(r.index);
        Ok(Measured::ms(if lucky { m.ms / 3.0 } else { m.ms }))
    }
}

#[test]
fn the_confirmation_round_measures_the_fastest_again_and_picks_from_it() {
    let (pattern, model, cands, matrix) = fixture();
    let ops = ToolchainOps::new(&cands, "band").with_pattern(&pattern);
    let options = TuneOptions {
        k: 5,
        budget: Budget {
            measurements: 20,
            time: None,
        },
        ..TuneOptions::default()
    };
    let mut lucky = lucky_once(&cands);
    let mut asked_to_confirm = Vec::new();
    let mut measure = |r: &MeasureRequest<'_>| {
        asked_to_confirm.push(r.confirmation);
        lucky(r)
    };
    let t = tune(&model, &matrix, &cands, &ops, &options, &mut measure).unwrap();
    assert_eq!(t.measurements.len(), 20);
    // The measurer is told which requests confirm (the TACO measurer takes more care there).
    let confirmations: Vec<bool> = t.measurements.iter().map(|m| m.confirmation).collect();
    assert_eq!(asked_to_confirm, confirmations);
    let (first, again) = t.measurements.split_at(20 - options.confirm - 1);
    assert!(first.iter().all(|m| !m.confirmation));
    assert!(again.iter().all(|m| m.confirmation));
    assert!(again[0].is_default, "the default first");
    assert!(again.windows(2).all(|w| w[0].round == w[1].round));
    assert!(again[0].round > first.iter().map(|m| m.round).max().unwrap());
    // The fastest three of the first measurements, fastest first.
    let mut by_time: Vec<&Measurement> = first.iter().filter(|m| !m.is_default).collect();
    by_time.sort_by(|a, b| a.ms().unwrap().total_cmp(&b.ms().unwrap()));
    let want: Vec<usize> = by_time.iter().take(3).map(|m| m.index).collect();
    let got: Vec<usize> = again[1..].iter().map(|m| m.index).collect();
    assert_eq!(got, want);
    // The pick and the speedup come from the confirmation round: the lucky first times are
    // not believed.
    let best = t.best_measurement().unwrap();
    assert!(best.confirmation);
    assert_eq!(
        best.ms(),
        again[1..].iter().filter_map(|m| m.ms()).reduce(f64::min)
    );
    assert!(t.default_measurement().unwrap().confirmation);
    let speedup = t.speedup_over_default().unwrap();
    assert_eq!(speedup, 10.0 / best.ms().unwrap());
    assert!(speedup < 10.0 / by_time[0].ms().unwrap());
}

#[test]
fn the_default_wins_unless_a_candidate_is_fast_twice() {
    let (_, model, cands, matrix) = fixture();
    let ops = LineOps::new(&cands);
    // Every candidate runs at 12 ms, a third of that the first time; the default at 10 ms.
    let measurer = || {
        let mut seen = std::collections::HashSet::new();
        move |r: &MeasureRequest<'_>| -> Result<Measured, String> {
            let lucky = !r.is_default && seen.insert(r.index);
            Ok(Measured::ms(match (r.is_default, lucky) {
                (true, _) => 10.0,
                (false, true) => 4.0,
                (false, false) => 12.0,
            }))
        }
    };
    let mut measure = measurer();
    let t = tune(
        &model,
        &matrix,
        &cands,
        &ops,
        &TuneOptions::default(),
        &mut measure,
    )
    .unwrap();
    assert_eq!(t.measurements.len(), 50);
    assert!(t.best_measurement().unwrap().is_default);
    assert_eq!(t.speedup_over_default(), Some(1.0));
    // Without confirmation the lucky first time wins.
    let options = TuneOptions {
        confirm: 0,
        ..TuneOptions::default()
    };
    let mut measure = measurer();
    let t = tune(&model, &matrix, &cands, &ops, &options, &mut measure).unwrap();
    assert!(t.measurements.iter().all(|m| !m.confirmation));
    assert_eq!(t.best_measurement().unwrap().ms(), Some(4.0));
}

#[test]
fn the_margin_keeps_the_default_unless_a_candidate_is_clearly_faster_twice() {
    let (_, model, cands, matrix) = fixture();
    let ops = LineOps::new(&cands);
    // The default takes 10 ms; candidate `near` 9.9 ms every time (within 2 % of it),
    // candidate `once` 5 ms the first time and 10.5 after, everything else 20 ms.
    let top = model.top_k_with_default(&matrix, &cands, 2).unwrap();
    let (near, once) = (top.top()[0].index, top.top()[1].index);
    let with_margin = |margin| {
        let mut seen = std::collections::HashSet::new();
        let mut measure = |r: &MeasureRequest<'_>| -> Result<Measured, String> {
            let again = !seen.insert(r.index);
            Ok(Measured::ms(match r.index {
                _ if r.is_default => 10.0,
                i if i == near => 9.9,
                i if i == once && !again => 5.0,
                i if i == once => 10.5,
                _ => 20.0,
            }))
        };
        let options = TuneOptions {
            margin,
            ..TuneOptions::default()
        };
        let t = tune(&model, &matrix, &cands, &ops, &options, &mut measure).unwrap();
        let confirmed: Vec<usize> = t
            .measurements
            .iter()
            .filter(|m| m.confirmation)
            .map(|m| m.index)
            .collect();
        assert_eq!(confirmed[..3], [cands.default_index(), once, near]);
        let best = t.best_measurement().unwrap();
        assert!(best.confirmation);
        (best.index, t.speedup_over_default().unwrap())
    };
    // 2 %: `near` is within it and `once` was slower the second time; the default stays.
    assert_eq!(with_margin(0.02), (cands.default_index(), 1.0));
    // No margin: `near`, faster both times; `once` is still out (slower than the default once).
    assert_eq!(with_margin(0.0), (near, 10.0 / 9.9));
}

#[test]
fn no_confirmation_round_without_room_or_results() {
    let (_, model, cands, matrix) = fixture();
    let ops = LineOps::new(&cands);
    let options = |measurements| TuneOptions {
        k: 5,
        budget: Budget {
            measurements,
            time: None,
        },
        ..TuneOptions::default()
    };
    let mut measure = landscape(&cands);
    // The default, 5 seeds and 4 for the round: room for it at 10, not at 9.
    let t = tune(&model, &matrix, &cands, &ops, &options(10), &mut measure).unwrap();
    assert_eq!(t.measurements.iter().filter(|m| m.confirmation).count(), 4);
    let t = tune(&model, &matrix, &cands, &ops, &options(9), &mut measure).unwrap();
    assert_eq!(t.measurements.len(), 9);
    assert!(t.measurements.iter().all(|m| !m.confirmation));
    // The papers' loop measures each candidate once.
    let t = tune(
        &model,
        &matrix,
        &cands,
        &ops,
        &TuneOptions::top_k(4),
        &mut measure,
    )
    .unwrap();
    assert!(t.measurements.iter().all(|m| !m.confirmation));
    // Only the default ran: nothing to confirm, the budget's reserve unused.
    let mut only_default = |r: &MeasureRequest<'_>| -> Result<Measured, String> {
        if r.is_default {
            Ok(Measured::ms(1.0))
        } else {
            Err("crashed".to_owned())
        }
    };
    let t = tune(
        &model,
        &matrix,
        &cands,
        &ops,
        &options(10),
        &mut only_default,
    )
    .unwrap();
    assert_eq!(t.measurements.len(), 6);
    assert!(t.best_measurement().unwrap().is_default);
}

#[test]
fn duplicates_failures_and_refusals_are_recorded() {
    let (pattern, model, cands, matrix) = fixture();
    let ops = ToolchainOps::new(&cands, "band").with_pattern(&pattern);
    // Every other candidate fails; the default fails too.
    let mut calls = 0;
    let mut measure = |r: &MeasureRequest<'_>| -> Result<Measured, String> {
        calls += 1;
        if r.is_default || calls % 2 == 0 {
            Err(format!("candidate {} crashed", r.index))
        } else {
            Ok(Measured {
                ms: 2.0,
                baseline_ms: Some(4.0),
                ratio: Some(0.5),
            })
        }
    };
    let options = TuneOptions {
        k: 6,
        budget: Budget {
            measurements: 12,
            time: None,
        },
        ..TuneOptions::default()
    };
    let t = tune(&model, &matrix, &cands, &ops, &options, &mut measure).unwrap();
    assert!(t.default_measurement().unwrap().result.is_err());
    assert_eq!(t.speedup_over_default(), None);
    let failed = t.measurements.iter().filter(|m| m.result.is_err()).count();
    assert!((6..12).contains(&failed), "{failed}");
    assert_eq!(t.best_measurement().unwrap().objective(), Some(0.5));
    assert!(
        t.skipped
            .iter()
            .any(|s| s.reason.starts_with("the same program as candidate")),
        "{:?}",
        t.skipped
    );
    // Nothing measurable at all: no best.
    let mut none = |_: &MeasureRequest<'_>| -> Result<Measured, String> { Err("no".to_owned()) };
    let t = tune(&model, &matrix, &cands, &ops, &options, &mut none).unwrap();
    assert!(t.best.is_none());
    // Not a time: NaN and negative times fail the measurement.
    let mut nan =
        |_: &MeasureRequest<'_>| -> Result<Measured, String> { Ok(Measured::ms(f64::NAN)) };
    let t = tune(
        &model,
        &matrix,
        &cands,
        &ops,
        &TuneOptions::top_k(2),
        &mut nan,
    )
    .unwrap();
    assert!(t.measurements.iter().all(|m| m.result.is_err()));
}

#[test]
fn layouts_over_the_limit_are_refused_before_they_run() {
    // One nonzero per row of a 64 x 64 matrix: a dense column level under compressed rows
    // stores 64 positions per nonzero, over WACO's 20.
    let n = 64;
    let pattern = CsrPattern::new(n, n, (0..=n).collect(), (0..n as u32).collect()).unwrap();
    let (pattern, model, cands, matrix) = prepared(pattern);
    let ops = ToolchainOps::new(&cands, "diag").with_pattern(&pattern);
    let mut seen = HashMap::new();
    let mut measure = |r: &MeasureRequest<'_>| -> Result<Measured, String> {
        seen.insert(r.index, r.program.to_owned());
        Ok(Measured::ms(1.0))
    };
    let options = TuneOptions {
        k: 40,
        budget: Budget {
            measurements: 41,
            time: None,
        },
        ..TuneOptions::top_k(40)
    };
    let t = tune(&model, &matrix, &cands, &ops, &options, &mut measure).unwrap();
    let refused: Vec<&Skipped> = t
        .skipped
        .iter()
        .filter(|s| s.reason.contains("layout too large"))
        .collect();
    assert!(!refused.is_empty(), "{:?}", t.skipped);
    for s in refused {
        assert!(
            !seen.contains_key(&s.index),
            "refused candidate {} ran",
            s.index
        );
        assert!(ops.refuse(s.index).is_some());
    }
}

#[test]
fn a_time_budget_stops_the_run() {
    let (_, model, cands, matrix) = fixture();
    let ops = LineOps::new(&cands);
    let mut slow = |_: &MeasureRequest<'_>| -> Result<Measured, String> {
        std::thread::sleep(Duration::from_millis(30));
        Ok(Measured::ms(1.0))
    };
    let options = TuneOptions {
        budget: Budget {
            measurements: 1000,
            time: Some(Duration::from_millis(100)),
        },
        ..TuneOptions::default()
    };
    let t = tune(&model, &matrix, &cands, &ops, &options, &mut slow).unwrap();
    assert!(t.measurements.len() <= 5, "{}", t.measurements.len());
    assert!(t.default_measurement().is_some());
}

#[test]
fn neighbours_stay_in_the_space_and_one_step_away() {
    let space = TacoSpace::waco(Kernel::SpMM);
    let s =
        SuperSchedule::parse(Kernel::SpMM, "4 8 16 i1 k1 i0 k0 j1 j0 1 0 0 1 i1 48 16").unwrap();
    let n = s.neighbours(&space);
    assert!(n.iter().all(|x| x != &s && x.validate().is_ok()));
    let differ = |a: &SuperSchedule| {
        usize::from(a.splits != s.splits)
            + usize::from(a.order != s.order)
            + usize::from(a.formats != s.formats)
            + usize::from(a.chunk != s.chunk)
    };
    assert!(n.iter().all(|x| differ(x) == 1));
    assert!(n.iter().any(|x| x.splits == [8, 8, 16]) && n.iter().any(|x| x.splits == [2, 8, 16]));
    assert!(n.iter().any(|x| x.chunk == 32) && n.iter().any(|x| x.chunk == 8));
    assert_eq!(n.iter().filter(|x| x.formats != s.formats).count(), 4);
}

/// The seeds a search measured, with their families.
fn measured_seeds(options: &TuneOptions) -> Vec<(usize, String)> {
    let (pattern, model, cands, matrix) = fixture();
    let ops = ToolchainOps::new(&cands, "band").with_pattern(&pattern);
    let mut measure = landscape(&cands);
    let t = tune(&model, &matrix, &cands, &ops, options, &mut measure).unwrap();
    t.measurements
        .iter()
        .filter(|m| m.round == 0 && !m.is_default && !m.confirmation)
        .map(|m| (m.index, ops.family(m.index).unwrap()))
        .collect()
}

/// The seeds the rule names: the best-ranked candidates stock TACO runs whose program the
/// default or an earlier seed does not have, at most `per_family` of one loop order (0: no
/// limit), until `k`.
fn expected_seeds(k: usize, per_family: usize) -> Vec<(usize, String)> {
    let (pattern, model, cands, matrix) = fixture();
    let ops = ToolchainOps::new(&cands, "band").with_pattern(&pattern);
    let ranking = model
        .top_k_with_default(&matrix, &cands, cands.len())
        .unwrap();
    let mut seeds: Vec<(usize, String)> = Vec::new();
    let mut programs = vec![ops.key(cands.default_index()).unwrap()];
    for e in ranking.top() {
        let (family, program) = (ops.family(e.index).unwrap(), ops.key(e.index).unwrap());
        let of_family = seeds.iter().filter(|(_, f)| *f == family).count();
        let full = per_family > 0 && of_family >= per_family;
        if seeds.len() < k && !full && !programs.contains(&program) && ops.refuse(e.index).is_none()
        {
            seeds.push((e.index, family));
            programs.push(program);
        }
    }
    seeds
}

#[test]
fn seeds_are_the_best_ranked_within_the_limit_per_loop_order() {
    assert_eq!(
        TuneOptions::default().seeds_per_family,
        0,
        "the ranking as it is"
    );
    for per_family in [1, 2, 0] {
        let options = TuneOptions {
            k: 6,
            seeds_per_family: per_family,
            ..TuneOptions::default()
        };
        let seeds = measured_seeds(&options);
        assert_eq!(seeds, expected_seeds(6, per_family), "at most {per_family}");
        let families: std::collections::HashSet<&String> = seeds.iter().map(|(_, f)| f).collect();
        match per_family {
            1 => assert_eq!(families.len(), 6, "one seed per loop order"),
            2 => assert!(families.len() >= 3),
            _ => {}
        }
    }
}

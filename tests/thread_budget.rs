//! The thread budget of a host keeping many models: models loaded with `threads: Some(n)`
//! called from one thread share one pool per distinct `n`, so a hundred live models with
//! threads 1–4 run 1 + 2 + 3 + 4 pool threads, and the count returns to its baseline once they
//! are released.
//! (Its own test binary, with one test: nothing else starts threads while it counts.)

mod common;

use std::time::{Duration, Instant};

use common::*;
use dashrank::{CostModel, CsrPattern, LoadOptions, Model};

/// Threads of this process, from `/proc/self/task`.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn many_models_share_pools_and_release_them() {
    let baseline = threads();
    let pattern = CsrPattern::new(40, 40, (0..=40).collect(), (0..40).collect()).unwrap();
    let models: Vec<Model> = (0..100)
        .map(|i| {
            // The native engine on every backend build: ort sessions keep threads of their own.
            let options = LoadOptions {
                threads: Some(1 + i % 4),
                matrix_cache_capacity: 0,
                ..LoadOptions::default()
            };
            Model::load(fixture("tiny-waco-spmm"), &options).unwrap()
        })
        .collect();
    // Every model featurizes, embeds and scores (its pools are in use).
    for m in &models {
        let head = m.info().heads[0].name.clone();
        let set = m
            .prepare_candidates(&head, &["1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1"])
            .unwrap();
        let e = m.embed_matrix(&pattern).unwrap();
        let mut s = [0.0f32];
        m.score_into(&e, &set, &mut s).unwrap();
    }
    let live = threads();
    assert!(
        live <= baseline + 1 + 2 + 3 + 4,
        "{live} threads with 100 models alive (baseline {baseline})"
    );
    drop(models);
    // Pool threads exit shortly after their pool is dropped.
    let started = Instant::now();
    while threads() > baseline && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        threads(),
        baseline,
        "threads left after every model was released"
    );
}

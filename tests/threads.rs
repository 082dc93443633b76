//! One model shared by many threads gives the same results as one thread.

mod common;

use common::*;
use dashrank::{CostModel, CsrPattern};

#[test]
fn shared_model_scores_identically_across_threads() {
    let model = load(&fixture("tiny-waco-spmm"));
    let head = model.info().heads[0].name.clone();
    let golden = read_json(&fixture("tiny-waco-spmm").join("golden.json"));
    let lines: Vec<String> = golden["heads"][&head]["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["line"].as_str().unwrap().to_string())
        .collect();
    let patterns: Vec<CsrPattern> = (0..6)
        .map(|seed| {
            let n = 40 + seed * 7;
            let mut row_ptr = vec![0usize];
            let mut cols = Vec::new();
            for r in 0..n {
                for c in 0..n {
                    if (r * 31 + c * 17 + seed * 13) % 11 == 0 {
                        cols.push(c as u32);
                    }
                }
                row_ptr.push(cols.len());
            }
            CsrPattern::new(n, n, row_ptr, cols).unwrap()
        })
        .collect();
    let run = || -> Vec<Vec<u32>> {
        let set = model.prepare_candidates(&head, &lines).unwrap();
        patterns
            .iter()
            .map(|p| {
                let m = model.embed_matrix(p).unwrap();
                let mut s = vec![0.0f32; set.len()];
                model.score_into(&m, &set, &mut s).unwrap();
                s.iter().map(|x| x.to_bits()).collect()
            })
            .collect()
    };
    let expected = run();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4).map(|_| scope.spawn(run)).collect();
        for h in handles {
            assert_eq!(
                h.join().unwrap(),
                expected,
                "bit-identical scores across threads"
            );
        }
    });
}

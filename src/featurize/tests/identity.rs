//! Bit-identity across thread counts, SIMD levels and band sizes (streaming vs one band),
//! the memory bound of streaming, the memory budget, and the buffer pool.

use super::*;
use crate::featurize::graph::RunKnobs;
use crate::featurize::memory::BufferPool;
use crate::ErrorKind;

fn run(
    g: &FeaturizerGraph,
    p: &CsrPattern,
    threads: usize,
    simd: SimdLevel,
    band: Option<usize>,
) -> Vec<u32> {
    let o = FeaturizeOptions {
        threads: Some(threads),
        simd,
        band_entries: band,
        ..Default::default()
    };
    bits(&g.run(p, &o).expect("runs"))
}

/// Every combination of threads, level and band size against one band, 1 thread, scalar.
fn check_identity(name: &str, spec: &GraphSpec, p: &CsrPattern, bands: &[Option<usize>]) {
    let g = FeaturizerGraph::from_spec(spec).expect("valid");
    let want = run(&g, p, 1, SimdLevel::Scalar, Some(usize::MAX));
    assert!(want.iter().any(|&b| b != 0), "{name}: all zero");
    for level in SimdLevel::supported() {
        for &band in bands {
            for threads in [1, 2, 3] {
                let got = run(&g, p, threads, level, band);
                assert_eq!(
                    got, want,
                    "{name}: {level}, band {band:?}, {threads} threads"
                );
            }
        }
    }
}

#[test]
fn waco_like_is_bit_identical_everywhere() {
    let p = random_pattern(700, 12, 3);
    check_identity(
        "waco",
        &waco_like(16, 5, 7),
        &p,
        &[None, Some(1), Some(97), Some(1000)],
    );
    let q = rmat(11, 9000, 8);
    check_identity(
        "waco rmat",
        &waco_like(32, 8, 9),
        &q,
        &[None, Some(50), Some(3000)],
    );
}

/// Steps on the direct path split into chunks of as little as one point per call (see
/// `exec::Run::run_steps`) give the one-band, unchunked result.
#[test]
fn chunked_steps_are_bit_identical() {
    let cases = [
        ("waco rmat", waco_like(32, 8, 9), rmat(11, 9000, 8), 32),
        (
            "waco uniform",
            waco_like(16, 6, 4),
            random_pattern(900, 4, 7),
            16,
        ),
        (
            "dash",
            dash_like(&[8, 16, 16, 32, 32, 48, 48], 5),
            random_pattern(300, 20, 4),
            48,
        ),
    ];
    for (name, spec, p, c) in cases {
        let g = FeaturizerGraph::from_spec(&spec).expect("valid");
        let want = run(&g, &p, 1, SimdLevel::Scalar, Some(usize::MAX));
        for chunk_points in [1, 37, 1000] {
            for band in [None, Some(50), Some(usize::MAX)] {
                for threads in [1, 2] {
                    let o = FeaturizeOptions {
                        threads: Some(threads),
                        band_entries: band,
                        ..Default::default()
                    };
                    let knobs = RunKnobs {
                        chunk_bytes: chunk_points * 4 * c,
                        ..RunKnobs::default()
                    };
                    let (got, _) = g.run_tuned(&p, &o, knobs).expect("runs");
                    assert_eq!(
                        bits(&got),
                        want,
                        "{name}: chunks of {chunk_points} points, band {band:?}, {threads} threads"
                    );
                }
            }
        }
    }
}

/// Patterns cut into slabs (side-by-side runs over row ranges, see `slabs`) give the
/// single run's bits and dense-counted figures, for 2 to 5 slabs, any band size, on the WACO
/// and DASH shapes; the slabs' margins are recomputed, not pooled twice.
#[test]
fn slabs_are_bit_identical() {
    let cases = [
        ("waco rmat", waco_like(16, 5, 9), rmat(12, 30_000, 8)),
        (
            "waco uniform",
            waco_like(8, 4, 4),
            random_pattern(3000, 6, 7),
        ),
        (
            "dash",
            dash_like(&[8, 16, 16, 24, 24, 32, 32], 5),
            random_pattern(1200, 12, 4),
        ),
        // Narrow margins over many rows: several slabs per thread.
        (
            "dash, tall",
            dash_like(&[8, 8, 8, 16, 16, 16, 16], 3),
            random_pattern(20_000, 4, 2),
        ),
    ];
    for (name, spec, p) in cases {
        let g = FeaturizerGraph::from_spec(&spec).expect("valid");
        let one = FeaturizeOptions {
            threads: Some(1),
            ..Default::default()
        };
        let (want, w) = g.run_with_stats(&p, &one).expect("runs");
        for threads in [2, 3, 5] {
            for band in [None, Some(300)] {
                let o = FeaturizeOptions {
                    threads: Some(threads),
                    band_entries: band,
                    ..Default::default()
                };
                let knobs = RunKnobs {
                    slab_min_entries: 1000,
                    ..RunKnobs::default()
                };
                let slabs = crate::featurize::slabs::split(g.plan(), &p, threads, 1000);
                assert!(slabs.len() >= 2, "{name}: {threads} threads must cut slabs");
                if name == "dash, tall" {
                    assert!(slabs.len() > threads, "{name}: {} slabs", slabs.len());
                }
                let (got, s) = g.run_tuned(&p, &o, knobs).expect("runs");
                let what = format!("{name}: {} slabs, band {band:?}", slabs.len());
                assert_eq!(bits(&got), bits(&want), "{what}");
                assert_eq!(s.dense_macs, w.dense_macs, "{what}");
                assert_eq!(s.points, w.points, "{what}");
            }
        }
    }
}

/// The stride-1 chains of a DASH-like graph replay their first layer's searches (which the
/// identity tests then hold to the scalar level, where nothing is replayed): after the
/// first conv of each group of three, the next two; never across a pooling or from the
/// pattern's conv.
#[test]
fn stride_one_chains_replay_their_first_search() {
    let g = FeaturizerGraph::from_spec(&dash_like(&[8, 16, 16, 32, 32, 48, 48], 5)).expect("valid");
    let plan = g.plan();
    let names: Vec<&str> = plan.stencils.iter().map(|s| s.name.as_str()).collect();
    let source: Vec<Option<&str>> = plan
        .search_source
        .iter()
        .map(|s| s.map(|r| names[r]))
        .collect();
    let want = [
        ("conv0", None),
        ("conv1", None),
        ("conv2", Some("conv1")),
        ("maxpool2", None),
        ("conv3", None),
        ("conv4", Some("conv3")),
        ("conv5", Some("conv3")),
        ("maxpool5", None),
        ("conv6", None),
    ];
    assert_eq!(names.iter().copied().zip(source).collect::<Vec<_>>(), want);
    assert_eq!(plan.search_readers[4], vec![5, 6]);
}

#[test]
fn dash_like_is_bit_identical_everywhere() {
    let p = random_pattern(300, 20, 4);
    check_identity(
        "dash",
        &dash_like(&[8, 16, 16, 32, 32, 48, 48], 5),
        &p,
        &[None, Some(1), Some(700)],
    );
}

#[test]
fn dense_rows_are_bit_identical_everywhere() {
    // Long rows take the neighbour-mask bitmaps; a non-power-of-two stride and a dilated
    // window take the general keys.
    let p = random_pattern(64, 48, 12);
    check_identity(
        "waco dense rows",
        &waco_like(8, 4, 2),
        &p,
        &[None, Some(200)],
    );
    let spec = graph(
        vec![
            node(
                "c0",
                "SparseConv",
                &["pattern", "w0"],
                &[("kernel_size", 3), ("dilation", 2)],
            ),
            node(
                "c1",
                "SparseConv",
                &["c0", "w1"],
                &[("kernel_size", 3), ("stride", 3)],
            ),
            node("p", "SparseGlobalAvgPool", &["c1"], &[]),
        ],
        "p",
        vec![
            tensor(
                "w0",
                &[9, 1, 4],
                (0..36).map(|i| (i as f32 - 17.0) / 11.0).collect(),
            ),
            tensor(
                "w1",
                &[9, 4, 5],
                (0..180)
                    .map(|i| ((i * 7 % 23) as f32 - 11.0) / 13.0)
                    .collect(),
            ),
        ],
    );
    check_identity("dilated, stride 3", &spec, &p, &[None, Some(100)]);
}

/// A DASH-like graph's recorded searches (its stride-1 chains) are dropped as the later
/// layers pass them: the charged peak of a streamed run does not grow with the matrix (twice
/// the rows, same band), and the result is the one-band result.
#[test]
fn recorded_searches_do_not_accumulate() {
    let spec = dash_like(&[8, 16, 16, 24, 24, 32, 32], 9);
    let g = FeaturizerGraph::from_spec(&spec).expect("valid");
    let o = |band| FeaturizeOptions {
        threads: Some(2),
        band_entries: band,
        ..Default::default()
    };
    let mut peaks = Vec::new();
    for n in [60_000, 120_000] {
        let p = random_pattern(n, 6, 5);
        let (streamed, s) = g.run_with_stats(&p, &o(Some(1 << 13))).expect("runs");
        let whole = g.run(&p, &o(Some(usize::MAX))).expect("runs");
        assert_eq!(bits(&streamed), bits(&whole), "{n} rows");
        assert!(s.bands > 20, "{s:?}");
        peaks.push(s.peak_bytes);
    }
    assert!(
        peaks[1] * 10 <= peaks[0] * 12,
        "charged peaks {peaks:?} grow with the matrix"
    );
}

/// The streaming memory bound on a large generated graph-like matrix: the featurizer's
/// charged peak stays within the documented formula's order (band plus halos, a few times
/// the band's feature bytes) and far below what holding the whole matrix would need, and the
/// result is the one-band result.
#[test]
fn streaming_memory_is_bounded_by_the_band() {
    let p = rmat(17, 600_000, 21); // 131072 × 131072, about 560 k entries
    let spec = waco_like(32, 13, 3);
    let g = FeaturizerGraph::from_spec(&spec).expect("valid");
    let band = 1 << 15;
    let o = |band| FeaturizeOptions {
        threads: Some(2),
        band_entries: band,
        ..Default::default()
    };
    let (streamed, s) = g.run_with_stats(&p, &o(Some(band))).expect("runs");
    let (whole, w) = g.run_with_stats(&p, &o(Some(usize::MAX))).expect("runs");
    assert_eq!(bits(&streamed), bits(&whole));
    assert!(s.bands > 10, "{s:?}");
    // One band-sized window of 32-channel features and its coordinates, twice (the value
    // computed and the one read), plus the neighbour pairs: about 3 × band × 145 bytes.
    let band_bytes = band * (4 * 32 + 17);
    assert!(
        s.peak_bytes <= 4 * band_bytes,
        "streamed peak {} vs band {band_bytes}",
        s.peak_bytes
    );
    assert!(
        w.peak_bytes > 5 * s.peak_bytes,
        "whole {} vs streamed {}",
        w.peak_bytes,
        s.peak_bytes
    );
    assert!(s.dense_macs > 0 && s.dense_macs == w.dense_macs);
}

#[test]
fn memory_budget_fails_cleanly() {
    let p = rmat(14, 60_000, 2);
    let g = FeaturizerGraph::from_spec(&waco_like(32, 6, 1)).expect("valid");
    let o = FeaturizeOptions {
        memory_budget: 1 << 20,
        band_entries: Some(usize::MAX),
        ..Default::default()
    };
    let e = g
        .run(&p, &o)
        .expect_err("1 MiB is too little for one band of 50 k entries");
    match e.kind() {
        ErrorKind::Featurize { reason, .. } => {
            assert!(reason.contains("memory budget exceeded"), "{reason}")
        }
        other => panic!("unexpected {other:?}"),
    }
    // The graph is still usable, with streaming within the same budget.
    let o = FeaturizeOptions {
        memory_budget: 8 << 20,
        band_entries: Some(2000),
        ..Default::default()
    };
    assert_eq!(g.run(&p, &o).expect("fits").len(), 32 * 7);
    // Cut into slabs, the runs side by side share the one budget and fail as cleanly.
    let o = FeaturizeOptions {
        threads: Some(2),
        memory_budget: 1 << 20,
        band_entries: Some(usize::MAX),
        ..Default::default()
    };
    let knobs = RunKnobs {
        slab_min_entries: 1000,
        ..RunKnobs::default()
    };
    assert!(crate::featurize::slabs::split(g.plan(), &p, 2, 1000).len() >= 2);
    let e = g.run_tuned(&p, &o, knobs).expect_err("1 MiB is too little");
    assert!(
        matches!(e.kind(), ErrorKind::Featurize { reason, .. } if reason.contains("memory budget exceeded")),
        "{e}"
    );
}

#[test]
fn pool_returns_memory_after_a_large_matrix() {
    let g = FeaturizerGraph::from_spec(&waco_like(32, 3, 1)).expect("valid");
    let big = rmat(16, 300_000, 4);
    let o = FeaturizeOptions {
        band_entries: Some(usize::MAX),
        ..Default::default()
    };
    let first = g.run(&big, &o).expect("runs");
    assert!(
        g.pool_bytes() <= BufferPool::RETAINED_BYTES,
        "{}",
        g.pool_bytes()
    );
    // Reused (stale) buffers never change results.
    assert_eq!(bits(&g.run(&big, &o).expect("runs")), bits(&first));
    let small = random_pattern(50, 3, 1);
    let fresh = FeaturizerGraph::from_spec(&waco_like(32, 3, 1)).expect("valid");
    assert_eq!(
        bits(&g.run(&small, &o).expect("runs")),
        bits(&fresh.run(&small, &o).expect("runs"))
    );
}

#[test]
fn automatic_bands_share_their_bytes_between_side_by_side_slabs() {
    use crate::featurize::plan::MIN_BAND;
    let p = rmat(14, 60_000, 2);
    let g = FeaturizerGraph::from_spec(&waco_like(32, 3, 1)).expect("valid");
    let plan = g.plan();
    // 32 channels: about 32 MiB of features per band for one slab, half of that for each
    // of two.
    assert!(plan.auto_band(1) > MIN_BAND);
    assert_eq!(plan.auto_band(1), 2 * plan.auto_band(2));
    let knobs = RunKnobs {
        slab_min_entries: 1000,
        ..RunKnobs::default()
    };
    assert!(crate::featurize::slabs::split(plan, &p, 2, 1000).len() >= 2);
    let two = FeaturizeOptions {
        threads: Some(2),
        ..Default::default()
    };
    let (split, s2) = g.run_tuned(&p, &two, knobs).expect("runs");
    assert_eq!(s2.band_entries, plan.auto_band(2));
    let one = FeaturizeOptions {
        threads: Some(1),
        ..Default::default()
    };
    let (whole, s1) = g.run_tuned(&p, &one, knobs).expect("runs");
    assert_eq!(s1.band_entries, plan.auto_band(1));
    assert_eq!(bits(&split), bits(&whole));
    // An explicit band is kept as given.
    let given = FeaturizeOptions {
        band_entries: Some(5000),
        ..two
    };
    assert_eq!(
        g.run_tuned(&p, &given, knobs).expect("runs").1.band_entries,
        5000
    );
    // Wide layers stay at the fewest automatic entries either way.
    let wide = FeaturizerGraph::from_spec(&waco_like(256, 2, 1)).expect("valid");
    assert_eq!(wide.plan().auto_band(1), MIN_BAND);
    assert_eq!(wide.plan().auto_band(2), MIN_BAND);
}

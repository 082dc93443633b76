//! Replays the fuzz regressions: every input kept under `fuzz/regressions/<target>/` (each a
//! minimized input that once crashed or misbehaved, see `docs/reliability.md`) runs through
//! the same target body as the fuzzer (`fuzz/src/`), in a normal `cargo test`. A few seed-like
//! inputs per target also run, so the bodies stay exercised when no regression is kept.

#[allow(dead_code)]
#[path = "../../fuzz/src/lib.rs"]
mod bodies;

use std::path::PathBuf;

fn regressions() -> Vec<(String, PathBuf)> {
    let dir = bodies::repo_root().join("fuzz/regressions");
    let mut out = Vec::new();
    for target in std::fs::read_dir(&dir).expect("fuzz/regressions exists") {
        let target = target.expect("entry").path();
        if !target.is_dir() {
            continue;
        }
        let name = target.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            bodies::TARGETS.contains(&name.as_str()),
            "fuzz/regressions/{name}: no such fuzz target"
        );
        for file in std::fs::read_dir(&target).expect("target dir") {
            out.push((name.clone(), file.expect("entry").path()));
        }
    }
    out.sort();
    out
}

#[test]
fn every_regression_replays_cleanly() {
    let cases = regressions();
    for (target, path) in &cases {
        let data = std::fs::read(path).expect("readable");
        eprintln!("replaying {target}: {}", path.display());
        assert!(bodies::run(target, &data));
    }
    eprintln!("{} regression inputs replayed", cases.len());
}

/// Every input of the corpora kept from finished campaigns (`fuzz/kept/<target>/`, minimized
/// with `cargo fuzz cmin`) still passes its target's checks.
#[test]
fn every_kept_corpus_input_replays_cleanly() {
    let dir = bodies::repo_root().join("fuzz/kept");
    let mut replayed = 0;
    for target in std::fs::read_dir(&dir).expect("fuzz/kept exists") {
        let target = target.expect("entry").path();
        let name = target.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            bodies::TARGETS.contains(&name.as_str()),
            "fuzz/kept/{name}: no such fuzz target"
        );
        for file in std::fs::read_dir(&target).expect("target dir") {
            let data = std::fs::read(file.expect("entry").path()).expect("readable");
            assert!(
                bodies::run(&name, &data),
                "fuzz/kept/{name}: an input failed"
            );
            replayed += 1;
        }
    }
    assert!(replayed > 0, "fuzz/kept holds no inputs");
    eprintln!("{replayed} kept corpus inputs replayed");
}

#[test]
fn every_target_runs_on_simple_inputs() {
    let mtx = b"%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n3 1\n";
    bodies::mtx(mtx);
    let csr: Vec<u8> = [2i32, 2, 2, 0, 1, 2, 1, 0]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    bodies::waco_csr(&csr);
    for pick in 0..8u8 {
        let mut line = vec![pick];
        line.extend_from_slice(
            b"16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16\n4 1024 32 6 7 2 4 1 3 5 0 0 0",
        );
        bodies::schedule_lines(&line);
    }
    bodies::taco_commands(b"\x0016 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16");
    bodies::taco_commands(
        b"\x00taco \"C(i,j)=A(i,k)*B(k,j)\" -f=C:dd -f=A:ds -f=B:dd -t=C:float -t=A:float \
          -t=B:float -d=C:30,256 -d=A:30,40 -d=B:40,256 -s=\"parallelize(i,CPUThread,NoRaces)\" \
          -nthreads=2 -schedule=dynamic,32",
    );
    bodies::spade_csv(b"a, 4, 1024, 32, 0, 1, 1, 1.5");
    bodies::sparsetir_json(br#"{"kernel":"spmm","row_tile":8,"thread_x":32,"coarsen":2,"group":1,"order":"reduction_outer","bind_k1":true,"unroll":true}"#);
    let featurizer = std::fs::read(
        bodies::repo_root().join("tests/data/fixtures/tiny-waco-spmm/featurizer.onnx"),
    )
    .expect("fixture");
    // File 2 of tiny-waco-spmm (sorted names) is the featurizer: unchanged, then cut short.
    let mut bundle = vec![0u8, 2];
    bundle.extend_from_slice(&featurizer);
    assert!(bodies::bundle_loads(&bundle), "the unchanged fixture loads");
    bundle[0] = 0x80; // keep the original manifest: still the same bytes
    assert!(bodies::bundle_loads(&bundle));
    bundle.truncate(bundle.len() / 2);
    assert!(!bodies::bundle_loads(&bundle));
    bundle[0] = 0; // re-stamped manifest: the cut file itself is refused
    assert!(!bodies::bundle_loads(&bundle));
    bodies::capi_sequence(&[2, 0, 0, 3, 1, 2, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 9, 6]);
}

#[test]
fn onnx_graph_generates_graphs_that_load_and_graphs_that_do_not() {
    // Pseudo-random programs: most load (and are checked against the f64 evaluation).
    let mut s = 0x1234_5678_9abc_def0u64;
    let mut loaded = 0;
    for len in (4..200).step_by(4) {
        let data: Vec<u8> = (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect();
        loaded += usize::from(bodies::onnx_graph_loads(&data));
    }
    assert!(loaded >= 15, "only {loaded} of 49 generated graphs loaded");
    // The predictor with a 4096-wide layer and a ReLU: past the target's load budget.
    let wide = [2, 1, 0, 0, 0, 0xff, 5, 0, 0, 0, 0, 5, 2];
    assert!(!bodies::onnx_graph_loads(&wide));
    assert!(
        bodies::onnx_graph_loads(&wide[..6]),
        "without the ReLU it loads"
    );
}

//! Bundles that pass every integrity check (the manifest is re-stamped; the predictor's
//! weights are outside the provenance hashes) but hold a hostile predictor graph. The native
//! engine's load budget refuses each with `ErrorKind::LoadBudget` before allocating what the
//! graph asks for. The allocator of this test binary refuses to let one thread hold more than
//! 2 GiB, so a load that tries (the behaviour these tests replace: an allocation abort, or
//! gigabytes first) aborts the test binary instead of exhausting the machine.

mod common;
#[allow(dead_code)]
#[path = "../fuzz/src/onnx_write.rs"]
mod onnx_write;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::*;
use dashrank::model::BundleLimits;
use dashrank::{Backend, CostModel, CsrPattern, ErrorKind, LoadOptions, Model};
use onnx_write::{Attr, Graph, Node};

/// Counts live and peak bytes per thread, and refuses an allocation that would take the
/// thread past [`CAP`] (the caller then sees an allocation failure).
struct Capped;

const CAP: isize = 2 << 30;
const MIB: usize = 1 << 20;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// Adds `delta` to this thread's live bytes unless that passes the cap.
fn track(delta: isize) -> bool {
    LIVE.try_with(|live| {
        let now = live.get() + delta;
        if delta > 0 && now > CAP {
            return false;
        }
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
        true
    })
    .unwrap_or(true)
}

// SAFETY: forwards to the system allocator; only bookkeeping (and a refusal) is added.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !track(layout.size() as isize) {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !track(new_size as isize - layout.size() as isize) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            track(layout.size() as isize - new_size as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Capped = Capped;

/// Runs `f` and returns its result with the peak heap growth (bytes) on this thread.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get) - base;
    (out, peak.max(0) as usize)
}

const PREDICTOR: &str = "cpu-taco__spmm.predictor.onnx";

/// The fixture's files with the predictor's graph replaced by `graph`, manifest re-stamped.
fn bundle_with_predictor(graph: &Graph) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixture("tiny-waco-spmm"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    let pred = files.iter_mut().find(|(n, _)| n == PREDICTOR).unwrap();
    pred.1 = onnx_write::replace_graph(&pred.1, graph);
    let manifest = manifest_for(&files);
    files.push(("manifest.json".into(), manifest));
    files
}

/// A WACO-shaped predictor (`[m; s]` → 8 → ReLU → 1) whose score also adds column 0 of the
/// value `hostile` writes into `g` (named by its return value), so the hostile part is live.
fn predictor(hostile: impl FnOnce(&mut Graph) -> String) -> Graph {
    let mut g = Graph {
        inputs: vec!["matrix_embedding".into(), "schedule_embedding".into()],
        output: "score".into(),
        ..Graph::default()
    };
    let h = hostile(&mut g);
    let weights = |n: usize| (0..n).map(|i| ((i * 7 % 11) as f32 - 5.0) / 8.0).collect();
    g.floats("w0", &[8, 16], weights(128))
        .floats("w1", &[1, 8], weights(8))
        .ints("zero", &[1], vec![0])
        .ints("one", &[1], vec![1])
        .node(
            Node::new("Concat", &["matrix_embedding", "schedule_embedding"], "cat")
                .attr(Attr::Int("axis", 1)),
        )
        .node(Node::new("Gemm", &["cat", "w0"], "l0").attr(Attr::Int("transB", 1)))
        .node(Node::new("Relu", &["l0"], "r0"))
        .node(Node::new("Gemm", &["r0", "w1"], "base").attr(Attr::Int("transB", 1)))
        .node(Node::new("Slice", &[&h, "zero", "one", "one"], "h0"))
        .node(Node::new("Add", &["base", "h0"], "score"));
    g
}

/// `Gemm` of `x` (width `ins`) to `outs` columns.
fn widen(g: &mut Graph, x: &str, ins: usize, outs: usize, out: &str) {
    let w = format!("{out}.w");
    g.floats(&w, &[outs as i64, ins as i64], vec![0.5; ins * outs])
        .node(Node::new("Gemm", &[x, &w], out).attr(Attr::Int("transB", 1)));
}

fn native() -> LoadOptions {
    LoadOptions {
        backend: Backend::Native,
        fallback: None,
        ..LoadOptions::default()
    }
}

/// Loading `files` natively fails with a load-budget error naming the predictor, within
/// `max_peak` bytes of heap.
fn assert_refused(files: Vec<(String, Vec<u8>)>, max_peak: usize) {
    let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
    let (result, peak) = peak_of(|| Model::from_files(files, &native()));
    let e = result.expect_err("a hostile graph must not load");
    let ErrorKind::LoadBudget { graph, budget, .. } = e.kind() else {
        panic!("expected a load-budget error, got {e:?}");
    };
    assert!(graph.contains(PREDICTOR), "{e}");
    assert!(*budget < 64 * bytes as u64 + (1 << 25), "{e}");
    let text = e.to_string();
    assert!(text.contains("BundleLimits::native_budget_base"), "{text}");
    assert!(peak < max_peak, "peak {} MiB: {text}", peak / MIB);
}

#[test]
fn a_layer_two_to_the_twenty_wide_is_refused() {
    // Slice → Relu → Gemm[2^20 × 1] → Relu → Slice: a 4 MB file whose compilation built a
    // 2^20 × 2^20 identity (8 TiB).
    let files = bundle_with_predictor(&predictor(|g| {
        g.node(Node::new(
            "Slice",
            &["matrix_embedding", "zero", "one", "one"],
            "s",
        ))
        .node(Node::new("Relu", &["s"], "sr"));
        widen(g, "sr", 1, 1 << 20, "wide");
        g.node(Node::new("Relu", &["wide"], "wr"));
        "wr".into()
    }));
    assert!(files.iter().any(|(_, b)| b.len() > 4 * MIB));
    assert_refused(files, 128 * MIB);
}

#[test]
fn sixty_thousand_chained_relus_are_refused() {
    // 60 000 ReLUs after a 128-wide layer: 1.5 MB of nodes, about 8 GB of identity blocks and
    // packed layers.
    let files = bundle_with_predictor(&predictor(|g| {
        widen(g, "matrix_embedding", 8, 128, "r0w");
        let mut x = "r0w".to_string();
        for i in 0..60_000 {
            let y = format!("c{i}");
            g.node(Node::new("Relu", &[&x], &y));
            x = y;
        }
        x
    }));
    assert_refused(files, 1024 * MIB);
}

#[test]
fn an_input_concatenated_512_times_is_refused() {
    // Concat of a 128-wide value 512 times, then a ReLU: a 65 536-wide identity (32 GiB),
    // after 512 blocks of 64 MiB were placed one by one.
    let files = bundle_with_predictor(&predictor(|g| {
        widen(g, "matrix_embedding", 8, 128, "x");
        let xs = vec!["x"; 512];
        g.node(Node::new("Concat", &xs, "cat512").attr(Attr::Int("axis", 1)))
            .node(Node::new("Relu", &["cat512"], "c"));
        "c".into()
    }));
    assert_refused(files, 128 * MIB);
}

#[test]
fn the_budget_is_base_plus_bytes_times_rate() {
    let files = bundle_with_predictor(&predictor(|g| {
        widen(g, "matrix_embedding", 8, 8, "x");
        "x".into()
    }));
    let me = files
        .iter()
        .find(|(n, _)| n == "matrix_embedder.onnx")
        .unwrap()
        .1
        .len() as u64;
    let at = |base: u64, per_byte: u64| LoadOptions {
        limits: BundleLimits {
            native_budget_base: base,
            native_budget_per_byte: per_byte,
            ..BundleLimits::default()
        },
        ..native()
    };
    let e = Model::from_files(files.clone(), &at(1000, 2)).unwrap_err();
    match e.kind() {
        ErrorKind::LoadBudget {
            graph,
            needed,
            budget,
            bytes,
            ..
        } => {
            assert_eq!(graph, "matrix_embedder.onnx");
            assert_eq!((*bytes, *budget), (me, 1000 + 2 * me));
            assert!(needed > budget);
        }
        other => panic!("{other:?}"),
    }
    // The defaults and the same rate without a base both load it, and it scores.
    for options in [native(), at(0, 64)] {
        let model = Model::from_files(files.clone(), &options).unwrap();
        let head = model.info().heads[0].name.clone();
        let set = model
            .prepare_candidates(&head, &["1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1"])
            .unwrap();
        let pattern = CsrPattern::new(4, 4, vec![0, 1, 2, 3, 4], vec![0, 1, 2, 3]).unwrap();
        let m = model.embed_matrix(&pattern).unwrap();
        let mut s = [0.0f32];
        model.score_into(&m, &set, &mut s).unwrap();
        assert!(s[0].is_finite());
    }
}

#[test]
fn a_value_with_no_columns_is_not_run_natively() {
    // score = [base, ReLU(m[:, 1:1])]: the empty ReLU once made a zero-width row buffer that
    // panicked when scored.
    let mut g = predictor(|_| "matrix_embedding".into());
    g.nodes.pop();
    g.node(Node::new(
        "Slice",
        &["matrix_embedding", "one", "one", "one"],
        "empty",
    ))
    .node(Node::new("Relu", &["empty"], "r"))
    .node(Node::new("Concat", &["base", "r"], "score").attr(Attr::Int("axis", 1)));
    let e = Model::from_files(bundle_with_predictor(&g), &native()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Bundle { .. }), "{e:?}");
    assert!(e.to_string().contains("a value with no columns"), "{e}");
}

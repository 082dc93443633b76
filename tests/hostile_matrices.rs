//! Hostile matrix files: a small file must never make the library allocate in proportion to
//! what its header claims. A counting allocator measures the peak heap of each read on the
//! reading thread, so the bounds asserted here are real allocations, not estimates.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::*;
use dashrank::pattern::{CsrPattern, PatternLimits, MAX_DIM};
use dashrank::{CostModel, ErrorKind};

/// Counts live and peak bytes per thread (the readers run on the calling thread).
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    // `try_with`: the thread-locals may be gone while a thread shuts down.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: forwards to the system allocator; only bookkeeping is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        track(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` and returns its result with the peak heap growth (bytes) on this thread.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get) - base;
    (out, peak.max(0) as usize)
}

const KIB: usize = 1024;

fn mtx(text: &str) -> dashrank::Result<CsrPattern> {
    CsrPattern::from_matrix_market_reader(text.as_bytes())
}

fn pattern_reason(e: &dashrank::Error) -> (Option<usize>, String) {
    match e.kind() {
        ErrorKind::Pattern { line, reason } => (*line, reason.clone()),
        other => panic!("expected a pattern error, got {other:?}"),
    }
}

#[test]
fn mtx_with_maximal_dimensions_and_one_entry_costs_bytes() {
    // The 77-byte file that aborted the process (16 GiB of row pointers in sprs' to_csr).
    let text = "%%MatrixMarket matrix coordinate pattern general\n2147483647 2147483647 1\n1 1\n";
    assert_eq!(text.len(), 77);
    let (p, peak) = peak_of(|| mtx(text).expect("valid"));
    assert_eq!((p.nrows(), p.ncols(), p.nnz()), (MAX_DIM, MAX_DIM, 1));
    assert!(peak < 64 * KIB, "peak {peak} bytes for a 77-byte file");
    assert_eq!(p.row(0), &[0]);
    assert_eq!(p.row(MAX_DIM - 1), &[] as &[u32]);
    // Hashing (the embedding cache key) is proportional to the entries as well.
    let (_, peak) = peak_of(|| p.content_hash());
    assert_eq!(peak, 0);
}

#[test]
fn mtx_declaring_a_billion_entries_with_three_lines() {
    let text = "%%MatrixMarket matrix coordinate pattern general\n10 10 1000000000\n1 1\n";
    let (r, peak) = peak_of(|| mtx(text));
    let (line, reason) = pattern_reason(&r.expect_err("over the limit"));
    assert_eq!(line, Some(2));
    assert!(reason.contains("PatternLimits::max_nnz"), "{reason}");
    assert!(peak < 64 * KIB, "peak {peak}");
    // With the limit raised the read still only allocates for what is there.
    let raised = PatternLimits {
        max_nnz: usize::MAX,
        ..PatternLimits::default()
    };
    let (r, peak) =
        peak_of(|| CsrPattern::from_matrix_market_reader_with(text.as_bytes(), &raised));
    let (line, reason) = pattern_reason(&r.expect_err("short"));
    assert_eq!(line, Some(4));
    assert_eq!(
        reason,
        "end of input after 1 entries, the size line declares 1000000000"
    );
    assert!(peak < 128 * KIB, "peak {peak}");
}

#[test]
fn csr_header_claiming_2_pow_30_rows_in_12_bytes() {
    let words = |ws: &[i32]| -> Vec<u8> { ws.iter().flat_map(|w| w.to_le_bytes()).collect() };
    let bytes = words(&[1 << 30, 4, 0]);
    let (r, peak) = peak_of(|| CsrPattern::from_waco_csr_bytes(&bytes));
    let (_, reason) = pattern_reason(&r.expect_err("truncated"));
    assert!(
        reason.starts_with("WACO .csr: truncated: header (num_row = 1073741824"),
        "{reason}"
    );
    assert!(peak < 4 * KIB, "peak {peak}");
    // The same through a file: only the 12 bytes are ever buffered.
    let dir = tempdir("csr");
    let path = dir.join("huge.csr");
    std::fs::write(&path, &bytes).unwrap();
    let (r, peak) = peak_of(|| CsrPattern::read_file(&path));
    assert!(matches!(
        r.expect_err("truncated").kind(),
        ErrorKind::Pattern { .. }
    ));
    assert!(peak < 16 * KIB, "peak {peak}");
    // A header over the nnz limit is refused before anything else is read.
    let bytes = words(&[1, 1, i32::MAX]);
    let (_, reason) = pattern_reason(&CsrPattern::from_waco_csr_bytes(&bytes).unwrap_err());
    assert!(reason.contains("PatternLimits::max_nnz"), "{reason}");
    let tight = PatternLimits {
        max_dim: 3,
        ..PatternLimits::default()
    };
    let bytes = words(&[4, 1, 0, 0, 0, 0, 0, 0]);
    let e = CsrPattern::from_waco_csr_bytes_with(&bytes, &tight).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid sparsity pattern: WACO .csr: 4 rows exceed PatternLimits::max_dim = 3"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn endless_inputs_stop_at_the_limits() {
    let dir = tempdir("zero");
    // /dev/zero behind a matrix name: a line with no end, and a .csr with no end.
    let mtx_path = dir.join("zero.mtx");
    let csr_path = dir.join("zero.csr");
    std::os::unix::fs::symlink("/dev/zero", &mtx_path).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &csr_path).unwrap();
    let (r, peak) = peak_of(|| CsrPattern::read_file(&mtx_path));
    let (line, reason) = pattern_reason(&r.expect_err("endless line"));
    assert_eq!(line, Some(1));
    assert!(reason.contains("PatternLimits::max_line_bytes"), "{reason}");
    assert!(peak < 4 << 20, "peak {peak}");
    // All-zero header: 0 x 0, no entries; then more bytes than the header implies.
    let (_, reason) = pattern_reason(&CsrPattern::read_file(&csr_path).unwrap_err());
    assert_eq!(
        reason,
        "WACO .csr: truncated or corrupt file: length 17 bytes is not a multiple of 4"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn bom_and_latin1() {
    let bom = "\u{FEFF}%%MatrixMarket matrix coordinate pattern general\n2 2 1\n2 1\n";
    assert_eq!(mtx(bom).expect("BOM stripped").row(1), &[0]);
    let mut latin1 = b"%%MatrixMarket matrix coordinate real general\n% r\xE9sum\xE9 of a caf\xE9\n2 2 1\n1 2 0.5\n".to_vec();
    let p = CsrPattern::from_matrix_market_reader(latin1.as_slice()).expect("comment tolerated");
    assert_eq!(p.row(0), &[1]);
    latin1.extend_from_slice(b"% fin\n");
    assert!(CsrPattern::from_matrix_market_reader(latin1.as_slice()).is_ok());
    let bad = b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 0.5\xB5\n";
    let e = CsrPattern::from_matrix_market_reader(bad.as_slice()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid sparsity pattern at line 3: byte 0xB5 at column 8 is not valid UTF-8 \
         (only comment lines may use another encoding)"
    );
    let bad_header = b"%%MatrixMarket matrix coordinate r\xE9al general\n2 2 0\n";
    let (line, _) =
        pattern_reason(&CsrPattern::from_matrix_market_reader(bad_header.as_slice()).unwrap_err());
    assert_eq!(line, Some(1));
}

#[test]
fn huge_sparse_matrix_embeds_in_proportion_to_its_entries() {
    // Declared 2^31 - 1 square with entries at both ends: the featurizer sees 3 points.
    let text = "%%MatrixMarket matrix coordinate pattern general\n2147483647 2147483647 3\n1 1\n2147483647 2147483647\n1000 5\n";
    let p = mtx(text).expect("valid");
    let no_cache = dashrank::LoadOptions {
        matrix_cache_capacity: 0,
        ..options()
    };
    let model = dashrank::Model::load(fixture("tiny-waco-spmm"), &no_cache).expect("loads");
    let start = std::time::Instant::now();
    let e = model.embed_matrix(&p).expect("embeds");
    let secs = start.elapsed().as_secs_f64();
    assert!(secs < 10.0, "{secs} s for 3 entries");
    let again = model.embed_matrix(&p).expect("again");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(e.values()), bits(again.values()));
    assert!(e.values().iter().all(|v| v.is_finite()));
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("dashrank-hostile-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

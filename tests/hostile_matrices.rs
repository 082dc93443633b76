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
    // Hashing (and the digest, the embedding cache key) is proportional to the entries as
    // well, and allocates nothing.
    let (_, peak) = peak_of(|| p.content_hash());
    assert_eq!(peak, 0);
    let (_, peak) = peak_of(|| p.content_digest());
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

/// Two different patterns with the same `content_hash`: 8 rows of 2 entries in
/// `MAX_DIM` columns. The hash absorbs its 64-bit words (`nrows, ncols, nnz`, per row its
/// index and end, then the columns two to a word) into four lanes by
/// `h = rotl((h ^ w) · K, 31)`, which is invertible in `w`: the second pattern takes random
/// columns for rows 0–3 and solves the last word of each lane (rows 4–7) for the first
/// pattern's lane states, until the solved columns are valid (`lo < hi < MAX_DIM`).
fn colliding_patterns() -> (CsrPattern, CsrPattern) {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    const SEED: u64 = 0x6461_7368_7261_6e6b;
    let k_inv = (0..6).fold(K, |x, _| {
        x.wrapping_mul(2u64.wrapping_sub(K.wrapping_mul(x)))
    });
    assert_eq!(K.wrapping_mul(k_inv), 1);
    let absorb = |h: u64, w: u64| (h ^ w).wrapping_mul(K).rotate_left(31);
    let row_ptr: Vec<usize> = (0..=8).map(|r| 2 * r).collect();
    let header: Vec<u64> = [8u64, MAX_DIM as u64, 16]
        .into_iter()
        .chain((0..8u64).flat_map(|r| [r, 2 * r + 2]))
        .collect();
    // Lane states after `words` (word `i` goes to lane `i mod 4`).
    let lanes = |words: &[u64]| {
        let mut l: [u64; 4] = std::array::from_fn(|i| SEED.wrapping_add(i as u64));
        for (i, &w) in words.iter().enumerate() {
            l[i % 4] = absorb(l[i % 4], w);
        }
        l
    };
    let word = |lo: u32, hi: u32| u64::from(lo) | u64::from(hi) << 32;
    let cols_a: Vec<u32> = (0..8).flat_map(|r| [r, r + 1]).collect();
    let mut words_a = header.clone();
    words_a.extend(cols_a.chunks(2).map(|c| word(c[0], c[1])));
    let target = lanes(&words_a);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    loop {
        let mut words = header.clone();
        for _ in 0..4 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let (a, b) = ((rng as u32) >> 1, (rng >> 33) as u32);
            words.push(word(a.min(b), a.max(b) + u32::from(a == b)));
        }
        // Words 23..26 are the last of lanes 3, 0, 1, 2.
        for i in 23..27 {
            let before = lanes(&words)[i % 4];
            words.push(before ^ target[i % 4].rotate_right(31).wrapping_mul(k_inv));
        }
        let cols: Vec<u32> = words[19..]
            .iter()
            .flat_map(|&w| [w as u32, (w >> 32) as u32])
            .collect();
        if cols
            .chunks(2)
            .all(|c| c[0] < c[1] && (c[1] as usize) < MAX_DIM)
        {
            let a = CsrPattern::new(8, MAX_DIM, row_ptr.clone(), cols_a).unwrap();
            let b = CsrPattern::new(8, MAX_DIM, row_ptr, cols).unwrap();
            return (a, b);
        }
    }
}

#[test]
fn a_constructed_hash_collision_gets_its_own_embedding() {
    let (a, b) = colliding_patterns();
    assert_ne!(a, b);
    assert_eq!(
        a.content_hash(),
        b.content_hash(),
        "a collision of the 64-bit hash"
    );
    assert_ne!(a.content_digest(), b.content_digest());
    let model = load(&fixture("tiny-waco-spmm"));
    let ea = model.embed_matrix(&a).unwrap();
    let eb = model.embed_matrix(&b).unwrap();
    // What `b` embeds to without any cache.
    let fresh = dashrank::Model::load(
        fixture("tiny-waco-spmm"),
        &dashrank::LoadOptions {
            matrix_cache_capacity: 0,
            ..options()
        },
    )
    .unwrap()
    .embed_matrix(&b)
    .unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_ne!(
        bits(ea.values()),
        bits(fresh.values()),
        "the two embed differently"
    );
    assert_eq!(
        bits(eb.values()),
        bits(fresh.values()),
        "b got its own embedding"
    );
    // And the other way round, on a model that saw `b` first.
    let model = load(&fixture("tiny-waco-spmm"));
    model.embed_matrix(&b).unwrap();
    assert_eq!(
        bits(model.embed_matrix(&a).unwrap().values()),
        bits(ea.values())
    );
}

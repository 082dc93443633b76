//! Matrix files and bundles: the inputs a host reads from disk.

use std::sync::OnceLock;

use dashrank::pattern::{CsrPattern, PatternLimits};
use dashrank::{CostModel, ErrorKind, LoadOptions, Model};

use super::{check_error, repo_root};

/// Limits small enough that no input of a few kilobytes can make a read slow.
fn limits() -> PatternLimits {
    PatternLimits {
        max_nnz: 1 << 16,
        max_line_bytes: 1 << 12,
        ..PatternLimits::default()
    }
}

/// Checks a pattern's invariants through the public API and that it survives a round trip
/// through coordinates (and classic row pointers when they are small).
fn check_pattern(p: &CsrPattern) {
    let rows = p.nonempty_rows();
    let starts = p.row_starts();
    assert_eq!(starts.len(), rows.len() + 1);
    assert_eq!(starts[0], 0);
    assert_eq!(*starts.last().unwrap_or(&0), p.nnz());
    assert!(rows.windows(2).all(|w| w[0] < w[1]), "rows not increasing");
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "empty stored row");
    assert!(rows.iter().all(|&r| (r as usize) < p.nrows()));
    let mut coords = Vec::with_capacity(p.nnz());
    for (r, cols) in p.rows() {
        assert!(cols.windows(2).all(|w| w[0] < w[1]), "row {r} unsorted");
        assert!(cols.iter().all(|&c| (c as usize) < p.ncols()));
        assert_eq!(p.row(r), cols);
        coords.extend(cols.iter().map(|&c| (r as u32, c)));
    }
    let again = CsrPattern::from_coordinates(p.nrows(), p.ncols(), coords).expect("coords");
    assert_eq!(&again, p);
    assert_eq!(again.content_hash(), p.content_hash());
    if p.nrows() <= 1 << 16 {
        let classic = CsrPattern::new(p.nrows(), p.ncols(), p.to_row_ptr(), p.col_idx().to_vec());
        assert_eq!(&classic.expect("classic CSR"), p);
    }
}

fn pattern_error(e: &dashrank::Error) {
    check_error(e);
    assert!(
        matches!(e.kind(), ErrorKind::Pattern { .. }),
        "a matrix read from memory fails with a pattern error: {e:?}"
    );
}

/// Matrix Market text. Accepted files are printed back as `pattern general` and re-read.
pub fn mtx(data: &[u8]) {
    match CsrPattern::from_matrix_market_reader_with(data, &limits()) {
        Ok(p) => {
            check_pattern(&p);
            let mut text = format!(
                "%%MatrixMarket matrix coordinate pattern general\n{} {} {}\n",
                p.nrows(),
                p.ncols(),
                p.nnz()
            );
            for (r, cols) in p.rows() {
                for &c in cols {
                    text.push_str(&format!("{} {}\n", r + 1, c + 1));
                }
            }
            let again = CsrPattern::from_matrix_market_reader_with(text.as_bytes(), &limits());
            assert_eq!(again.expect("printed pattern re-reads"), p);
        }
        Err(e) => pattern_error(&e),
    }
}

/// WACO binary `.csr` bytes. Accepted files are written back and re-read.
pub fn waco_csr(data: &[u8]) {
    match CsrPattern::from_waco_csr_bytes_with(data, &limits()) {
        Ok(p) => {
            check_pattern(&p);
            assert!(
                4 * (p.nrows() + p.nnz()) <= data.len(),
                "more than the file holds"
            );
            let bytes = p.to_waco_csr_bytes().expect("fits i32");
            assert_eq!(bytes.len(), data.len());
            let again = CsrPattern::from_waco_csr_bytes_with(&bytes, &limits());
            assert_eq!(again.expect("written pattern re-reads"), p);
        }
        Err(e) => pattern_error(&e),
    }
}

/// One fixture bundle: its files and a few schedule lines per head from its `golden.json`.
struct Fixture {
    files: Vec<(String, Vec<u8>)>,
    lines: Vec<(String, Vec<String>)>,
}

fn fixtures() -> &'static [Fixture] {
    static FIXTURES: OnceLock<Vec<Fixture>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let root = repo_root().join("tests/data/fixtures");
        [
            "tiny-waco-spmm",
            "tiny-waco-fp16",
            "tiny-dash",
            "tiny-cognate",
        ]
        .iter()
        .map(|name| {
            let dir = root.join(name);
            let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
                .expect("fixture directory")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
                .map(|p| {
                    let n = p
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned();
                    (n, std::fs::read(&p).expect("fixture file"))
                })
                .collect();
            files.sort();
            let golden: serde_json::Value = serde_json::from_slice(
                &std::fs::read(dir.join("golden.json")).expect("golden.json"),
            )
            .expect("golden json");
            let lines = golden["heads"]
                .as_object()
                .map(|heads| {
                    heads
                        .iter()
                        .map(|(head, h)| {
                            let lines = h["schedules"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter_map(|s| s["line"].as_str().map(str::to_owned))
                                .take(4)
                                .collect();
                            (head.clone(), lines)
                        })
                        .collect()
                })
                .unwrap_or_default();
            Fixture { files, lines }
        })
        .collect()
    })
}

/// `manifest.json` vouching for `files` as they are (what `python -m dashrank_onnx.manifest
/// --stamp` writes), so that a mutated file reaches the checks after the manifest's.
pub(crate) fn stamp_manifest(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let entries: serde_json::Map<String, serde_json::Value> = files
        .iter()
        .map(|(name, bytes)| {
            let sha: String = Sha256::digest(bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            (
                name.clone(),
                serde_json::json!({ "bytes": bytes.len(), "sha256": sha }),
            )
        })
        .collect();
    let manifest = serde_json::json!({
        "format": "dashrank-manifest",
        "version": 1,
        "algorithm": "sha256",
        "files": entries,
    });
    manifest.to_string().into_bytes()
}

/// Bundle loading with one file replaced: `data[0]` picks the fixture bundle (its top bit
/// keeps the original manifest, so the corruption check itself is exercised), `data[1]` the
/// file (the last index is `manifest.json` itself), the rest is the file's new content. The
/// manifest is otherwise re-stamped for the new bytes, so mutations reach the checks behind
/// it. A bundle that loads is then used end to end.
pub fn bundle(data: &[u8]) {
    bundle_loads(data);
}

/// [`bundle`], returning whether the bundle loaded.
pub fn bundle_loads(data: &[u8]) -> bool {
    let [pick, which, content @ ..] = data else {
        return false;
    };
    let fixture = &fixtures()[usize::from(*pick & 0x7f) % fixtures().len()];
    let mut files = fixture.files.clone();
    let slot = usize::from(*which) % (files.len() + 1);
    let manifest = if slot == files.len() {
        content.to_vec()
    } else if *pick & 0x80 != 0 {
        let original = stamp_manifest(&files);
        files[slot].1 = content.to_vec();
        original
    } else {
        files[slot].1 = content.to_vec();
        stamp_manifest(&files)
    };
    files.push(("manifest.json".to_string(), manifest));
    let options = LoadOptions {
        threads: Some(1),
        matrix_cache_capacity: 0,
        ..LoadOptions::default()
    };
    let model = match Model::from_files(files, &options) {
        Ok(m) => m,
        Err(e) => {
            check_error(&e);
            return false;
        }
    };
    let pattern = CsrPattern::new(6, 5, vec![0, 2, 2, 3, 5, 5, 6], vec![0, 4, 1, 2, 3, 0])
        .expect("valid pattern");
    let matrix = match model.embed_matrix(&pattern) {
        Ok(m) => m,
        Err(e) => {
            check_error(&e);
            return true;
        }
    };
    for (head, lines) in &fixture.lines {
        let candidates = match model.prepare_candidates(head, lines) {
            Ok(c) => c,
            Err(e) => {
                check_error(&e);
                continue;
            }
        };
        let mut scores = vec![0.0f32; candidates.len()];
        match model.score_into(&matrix, &candidates, &mut scores) {
            Ok(()) => match model.top_k(&matrix, &candidates, 2) {
                Ok(best) => {
                    assert!(best.len() <= 2);
                    for r in best {
                        assert_eq!(r.score.to_bits(), scores[r.index].to_bits(), "top-k score");
                    }
                }
                Err(e) => check_error(&e),
            },
            Err(e) => check_error(&e),
        }
    }
    true
}

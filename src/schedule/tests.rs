//! WACO fixtures: the SpMM, SDDMM and SpMV SuperSchedule schemas, checked against the
//! encoding of WACO's `superschedule_loader.py` (nullplay/Workload-Aware-Co-Optimization,
//! `WACO/{SpMM,SDDMM,SpMV}/Loader/superschedule_loader.py`) and against the real collected
//! lines in `../shared/data/waco/collected` when present.
//!
//! The schemas are test fixtures only: in the library they come from the bundle.
//! Derivation from the loaders:
//! - splits: `split_ = [1<<p for p in range(17)]`, index of the value. SpMM `jsplit` and SDDMM
//!   `ksplit` feed an `Embedding(8)`, so their vocabulary is the first 8 values (same indices);
//! - `order`: `perm[index_.index(order[pos]), pos] = 1`, flattened row-major, with `index_` =
//!   SpMM `[i1,i0,k1,k0,j1,j0]`, SDDMM `[i1,i0,j1,j0,k1,k0]`, SpMV `[i1,i0,k1,k0]`;
//! - formats: `format_ = [0, 1]`; `paridx`: `index_.index(token)`, so its vocabulary is `index_`;
//! - `parnum_ = [48]`; `parchunk_ = [1<<p for p in range(9)]` (SpMM, SpMV), `range(6)` (SDDMM).

use super::*;
use std::path::{Path, PathBuf};

fn powers(n: u32) -> String {
    let v: Vec<String> = (0..n).map(|p| (1u64 << p).to_string()).collect();
    format!("[{}]", v.join(", "))
}

fn strings(items: &[&str]) -> String {
    let v: Vec<String> = items.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[{}]", v.join(", "))
}

/// Builds a WACO schema JSON: `splits` are (name, #values), `formats` the 4 format-bit names.
fn waco_schema_json(
    name: &str,
    splits: &[(&str, u32)],
    symbols: &[&str],
    formats: &[&str],
    chunks: u32,
) -> String {
    let mut fields = Vec::new();
    for (f, n) in splits {
        fields.push(format!(
            r#"{{"name": "{f}", "kind": "choice", "values": {}}}"#,
            powers(*n)
        ));
    }
    fields.push(format!(
        r#"{{"name": "order", "kind": "permutation", "symbols": {}}}"#,
        strings(symbols)
    ));
    for f in formats {
        fields.push(format!(
            r#"{{"name": "{f}", "kind": "choice", "values": [0, 1]}}"#
        ));
    }
    fields.push(format!(
        r#"{{"name": "paridx", "kind": "choice", "values": {}}}"#,
        strings(symbols)
    ));
    fields.push(r#"{"name": "parnum", "kind": "choice", "values": [48]}"#.into());
    fields.push(format!(
        r#"{{"name": "parchunk", "kind": "choice", "values": {}}}"#,
        powers(chunks)
    ));
    format!(
        r#"{{"name": "{name}", "version": 1, "text_format": "waco", "fields": [{}]}}"#,
        fields.join(",\n")
    )
}

const SPMM_SYMBOLS: [&str; 6] = ["i1", "i0", "k1", "k0", "j1", "j0"];
const SDDMM_SYMBOLS: [&str; 6] = ["i1", "i0", "j1", "j0", "k1", "k0"];
const SPMV_SYMBOLS: [&str; 4] = ["i1", "i0", "k1", "k0"];

fn spmm() -> Schema {
    let json = waco_schema_json(
        "waco-superschedule-spmm",
        &[("isplit", 17), ("ksplit", 17), ("jsplit", 8)],
        &SPMM_SYMBOLS,
        &["i1f", "i0f", "k1f", "k0f"],
        9,
    );
    Schema::from_json(&json).unwrap()
}

fn sddmm() -> Schema {
    let json = waco_schema_json(
        "waco-superschedule-sddmm",
        &[("isplit", 17), ("jsplit", 17), ("ksplit", 8)],
        &SDDMM_SYMBOLS,
        &["i1f", "i0f", "j1f", "j0f"],
        6,
    );
    Schema::from_json(&json).unwrap()
}

fn spmv() -> Schema {
    let json = waco_schema_json(
        "waco-superschedule-spmv",
        &[("isplit", 17), ("ksplit", 17)],
        &SPMV_SYMBOLS,
        &["i1f", "i0f", "k1f", "k0f"],
        9,
    );
    Schema::from_json(&json).unwrap()
}

/// Transliteration of `SuperScheduleDataset.__init__` for one line (the loaders' constants).
fn waco_reference(symbols: &[&str], n_splits: usize, chunks: u32, line: &str) -> Vec<f32> {
    let tok: Vec<&str> = line.split_whitespace().collect();
    let split_: Vec<i64> = (0..17).map(|p| 1i64 << p).collect();
    let parchunk_: Vec<i64> = (0..chunks).map(|p| 1i64 << p).collect();
    let int = |t: &str| t.parse::<i64>().unwrap();
    let idx = |list: &[i64], t: &str| list.iter().position(|&x| x == int(t)).unwrap() as f32;
    let n = symbols.len();
    let mut row = Vec::new();
    for t in &tok[..n_splits] {
        row.push(idx(&split_, t));
    }
    let order = &tok[n_splits..n_splits + n];
    let mut perm = vec![0.0f32; n * n];
    for (pos, name) in order.iter().enumerate() {
        let sym = symbols.iter().position(|s| s == name).unwrap();
        perm[sym * n + pos] = 1.0;
    }
    row.extend(perm);
    let rest = &tok[n_splits + n..];
    for t in &rest[..4] {
        row.push(idx(&[0, 1], t));
    }
    row.push(symbols.iter().position(|s| *s == rest[4]).unwrap() as f32);
    row.push(idx(&[48], rest[5]));
    row.push(idx(&parchunk_, rest[6]));
    row
}

fn one_hot(n: usize, ones: &[usize]) -> Vec<f32> {
    let mut v = vec![0.0; n];
    for &i in ones {
        v[i] = 1.0;
    }
    v
}

#[test]
fn waco_schema_layouts() {
    let (a, b, c) = (spmm(), sddmm(), spmv());
    assert_eq!((a.token_count(), a.encoded_width()), (16, 46));
    assert_eq!((b.token_count(), b.encoded_width()), (16, 46));
    assert_eq!((c.token_count(), c.encoded_width()), (13, 25));
    let offsets: Vec<usize> = a.fields().iter().map(Field::offset).collect();
    assert_eq!(offsets, [0, 1, 2, 3, 39, 40, 41, 42, 43, 44, 45]);
    for s in [&a, &b, &c] {
        assert_eq!(&Schema::from_json(&s.to_json()).unwrap(), s);
    }
}

#[test]
fn spmm_real_line_matches_waco_by_hand() {
    // Trec6_16x16_9.txt line 5.
    let line = "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16 = 14.815";
    let s = spmm();
    let p = s.parse_line(line).unwrap();
    assert_eq!(p.measured_ms, Some(14.815));
    // isplit 16 → 4, ksplit 256 → 8, jsplit 1 → 0; order k1 k0 i1 i0 j1 j0 over
    // [i1,i0,k1,k0,j1,j0] puts ones at sym*6+pos = 2*6+0, 3*6+1, 0*6+2, 1*6+3, 4*6+4, 5*6+5;
    // formats 1 0 0 0; paridx i1 → 0; parnum 48 → 0; parchunk 16 → 4.
    let mut expected = vec![4.0, 8.0, 0.0];
    expected.extend(one_hot(36, &[12, 19, 2, 9, 28, 35]));
    expected.extend([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0]);
    assert_eq!(s.encode(&p.schedule).unwrap(), expected);
    assert_eq!(
        waco_reference(&SPMM_SYMBOLS, 3, 9, line.split('=').next().unwrap()),
        expected
    );
    assert_eq!(s.format_line(&p), line);
}

#[test]
fn sddmm_real_line_matches_waco_by_hand() {
    // Trec6_16x16_9.txt line 1.
    let line = "4 8 32 j1 k1 j0 i1 i0 k0 1 1 1 0 j1 48 1 = 233.619";
    let s = sddmm();
    let p = s.parse_line(line).unwrap();
    assert_eq!(p.measured_ms, Some(233.619));
    // isplit 4 → 2, jsplit 8 → 3, ksplit 32 → 5; order j1 k1 j0 i1 i0 k0 over
    // [i1,i0,j1,j0,k1,k0]: ones at 2*6+0, 4*6+1, 3*6+2, 0*6+3, 1*6+4, 5*6+5;
    // formats 1 1 1 0; paridx j1 → 2; parnum → 0; parchunk 1 → 0.
    let mut expected = vec![2.0, 3.0, 5.0];
    expected.extend(one_hot(36, &[12, 25, 20, 3, 10, 35]));
    expected.extend([1.0, 1.0, 1.0, 0.0, 2.0, 0.0, 0.0]);
    assert_eq!(s.encode(&p.schedule).unwrap(), expected);
    assert_eq!(s.format_line(&p), line);
}

#[test]
fn spmv_line_matches_waco_by_hand() {
    // No SpMV data is shipped; a line in the loader's format.
    let line = "32 8 i1 k1 i0 k0 1 0 0 1 i1 48 256";
    let s = spmv();
    let p = s.parse_line(line).unwrap();
    // isplit 32 → 5, ksplit 8 → 3; order i1 k1 i0 k0 over [i1,i0,k1,k0]: ones at
    // 0*4+0, 2*4+1, 1*4+2, 3*4+3; formats 1 0 0 1; paridx i1 → 0; parnum → 0; parchunk 256 → 8.
    let mut expected = vec![5.0, 3.0];
    expected.extend(one_hot(16, &[0, 9, 6, 15]));
    expected.extend([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 8.0]);
    assert_eq!(s.encode(&p.schedule).unwrap(), expected);
    assert_eq!(waco_reference(&SPMV_SYMBOLS, 2, 9, line), expected);
}

/// Found by the schedule_lines fuzz target: a vertical tab between tokens is whitespace for
/// `parse_line` (`char::is_whitespace`) and must be for the batch encoder's ASCII path too.
#[test]
fn batch_encoder_splits_on_the_same_whitespace_as_parse_line() {
    let s = spmm();
    let line = "16 256 1 k1 k0 i1 i0\x0bj1 j0 1 0 0 0\x0ci1 48 16\r";
    let parsed = s
        .parse_line(line)
        .expect("parse_line accepts vertical tab and form feed");
    let b = s.encode_batch(&[line]);
    assert_eq!(b.n_valid(), 1);
    assert_eq!(
        b.row(0).unwrap(),
        s.encode(&parsed.schedule).unwrap().as_slice()
    );
}

#[test]
fn waco_error_messages() {
    let s = spmm();
    let lines = [
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16 = 14.815",
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 = 14.815",
        "16 256 256 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16",
        "16 256 1 k1 k0 i1 i0 j1 x0 1 0 0 0 i1 48 16",
        "16 256 1 k1 k0 i1 i1 j1 j0 1 0 0 0 i1 48 16",
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16 = fast",
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 2 i1 48 16",
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 64 16",
    ];
    let b = s.encode_batch(&lines);
    assert_eq!(b.index, [0]);
    let errors: Vec<String> = b.errors().map(|(_, e)| e.to_string()).collect();
    assert_eq!(
        errors,
        [
            "invalid schedule #1: expected 16 tokens, found 15",
            "invalid schedule #2 field 'jsplit' value '256': not in vocabulary \
             [1, 2, 4, 8, 16, 32, 64, 128]",
            "invalid schedule #3 field 'order' value 'k1 k0 i1 i0 j1 x0': unknown symbol 'x0' \
             at position 6; expected a permutation of [i1, i0, k1, k0, j1, j0]",
            "invalid schedule #4 field 'order' value 'k1 k0 i1 i1 j1 j0': symbol 'i1' repeated \
             at positions 3 and 4; missing [i0]",
            "invalid schedule #5 value 'fast': measured time is not a number",
            "invalid schedule #6 field 'k0f' value '2': not in vocabulary [0, 1]",
            "invalid schedule #7 field 'parnum' value '64': not in vocabulary [48]",
        ]
    );
}

fn collected_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/waco/collected");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipping: WACO collected data not found at {}",
            dir.display()
        );
        None
    }
}

/// Every collected line parses, encodes exactly as WACO's loader would, and prints back
/// byte for byte.
fn check_collected(kernel: &str, schema: &Schema, symbols: &[&str], chunks: u32) {
    let Some(dir) = collected_dir() else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join(kernel))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no {kernel} files");
    let mut n_lines = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let parsed = read_measured_file(file, schema).unwrap();
        let raw: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(parsed.len(), raw.len(), "{}", file.display());
        let bodies: Vec<&str> = raw.iter().map(|l| split_measured(l).0).collect();
        let batch = schema.encode_batch(&raw);
        assert_eq!(batch.n_valid(), raw.len(), "{}", file.display());
        for (k, ((line_no, p), raw_line)) in parsed.iter().zip(&raw).enumerate() {
            let p = p
                .as_ref()
                .unwrap_or_else(|e| panic!("{}:{line_no}: {e}", file.display()));
            assert!(p.measured_ms.is_some());
            assert_eq!(
                &schema.format_line(p),
                raw_line,
                "{}:{line_no}",
                file.display()
            );
            let expected = waco_reference(symbols, 3, chunks, bodies[k]);
            assert_eq!(
                batch.row(k),
                Some(&expected[..]),
                "{}:{line_no}",
                file.display()
            );
        }
        n_lines += raw.len();
    }
    eprintln!("{kernel}: {n_lines} lines in {} files checked", files.len());
    assert!(n_lines > 0);
}

#[test]
fn all_collected_spmm_lines() {
    check_collected("SpMM", &spmm(), &SPMM_SYMBOLS, 9);
}

#[test]
fn all_collected_sddmm_lines() {
    check_collected("SDDMM", &sddmm(), &SDDMM_SYMBOLS, 6);
}

/// A COGNATE unified-form schema for SPADE lines (`I J K loop_1..loop_7 barrier bypass
/// reorder`), with the splits as `integer` fields (SPADE's `J` is `NUM_MATRIX_COLS` for one
/// of the four column-panel values, so no vocabulary can hold it).
fn unified_spade() -> Schema {
    let split = |name: &str| {
        format!(
            r#"{{"name": "{name}", "kind": "integer", "min": 1, "max": 1048576, "encode": "log2"}}"#
        )
    };
    let flag = |name: &str| format!(r#"{{"name": "{name}", "kind": "choice", "values": [0, 1]}}"#);
    let fields = [
        split("i_split"),
        split("j_split"),
        split("k_split"),
        format!(
            r#"{{"name": "order", "kind": "permutation", "symbols": {}}}"#,
            strings(&["1", "2", "3", "4", "5", "6", "7"])
        ),
        flag("barrier"),
        flag("bypass"),
        flag("reorder"),
    ];
    let json = format!(
        r#"{{"name": "cognate-unified-spade", "version": 1, "text_format": "waco", "fields": [{}]}}"#,
        fields.join(",")
    );
    Schema::from_json(&json).unwrap()
}

#[test]
fn unified_spade_lines_parse_encode_and_print() {
    use super::space::{Kernel, Mapped, MatrixShape, ScheduleSpace, SpadeSpace};
    let schema = unified_spade();
    assert_eq!(schema.encoded_width(), 3 + 49 + 3);
    // The papers' worked example (appendix E).
    let p = schema.parse_line("4 1024 32 6 7 2 4 1 3 5 0 0 0").unwrap();
    let row = schema.encode(&p.schedule).unwrap();
    assert_eq!(&row[..3], &[2.0, 10.0, 5.0]);
    assert_eq!(row[3 + 5 * 7], 1.0, "segment 6 at position 0");
    assert_eq!(schema.format(&p.schedule), "4 1024 32 6 7 2 4 1 3 5 0 0 0");

    // The whole mapped space for a matrix whose column count is not a power of two.
    let space = Mapped(SpadeSpace::new(Kernel::SpMM).unwrap());
    let list = space.candidates(&MatrixShape::new(1000, 4801, 20000));
    let batch = schema.encode_batch(&list.lines());
    assert_eq!(batch.len(), 256);
    assert_eq!(batch.n_valid(), 256, "{:?}", batch.errors().next());
    let all_cols = batch.row(list.default_index).unwrap();
    assert!((all_cols[1] - 4801f32.log2()).abs() < 1e-5);

    // Out of range and non-integer splits are per-candidate errors naming field and range.
    let lines = [
        "4 1024 32 6 7 2 4 1 3 5 0 0 0",
        "4 2097152 32 6 7 2 4 1 3 5 0 0 0",
        "0 1024 32 6 7 2 4 1 3 5 0 0 0",
        "4 NUM_MATRIX_COLS 32 6 7 2 4 1 3 5 0 0 0",
        "4 1024 32.5 6 7 2 4 1 3 5 0 0 0",
    ];
    let b = schema.encode_batch(&lines);
    assert_eq!(b.index, [0]);
    let errors: Vec<String> = b.errors().map(|(_, e)| e.to_string()).collect();
    assert_eq!(
        errors,
        [
            "invalid schedule #1 field 'j_split' value '2097152': out of range [1, 1048576]",
            "invalid schedule #2 field 'i_split' value '0': out of range [1, 1048576]",
            "invalid schedule #3 field 'j_split' value 'NUM_MATRIX_COLS': not a decimal \
             integer in [1, 1048576]",
            "invalid schedule #4 field 'k_split' value '32.5': not a decimal integer in \
             [1, 1048576]",
        ]
    );

    // Built values are checked against the range too.
    let mut values = p.schedule.clone().into_values();
    values[0] = FieldValue::Integer(0);
    let e = schema.schedule_from_values(values).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid schedule field 'i_split' value '0': out of range [1, 1048576]"
    );
}

//! Matrix Market (`coordinate`) input, reader-first, with line numbers in every error.
//!
//! # Why not `sprs::io::read_matrix_market_from_bufread`
//!
//! sprs 0.11.6 does read `pattern` files, but its header check uses substring tests
//! (`header.contains("real")`, …), so a header such as
//! `%%MatrixMarket matrix coordinate pattern general` with a comment-like extra token, or a
//! misspelt symmetry, is silently misread; its errors (`BadMatrixMarketFile`) carry no line
//! number or token; reading a typed field requires choosing the numeric type up front; and
//! index conversion panics on values that do not fit. We therefore parse the text
//! ourselves: exact header tokens (case-insensitive, so `skew-symmetric` never matches
//! `symmetric`), exact token counts per entry line, 1-based indices checked against the
//! declared size, each error naming its line and token. The (row, col) coordinates are then
//! sorted and merged by [`CsrPattern::from_coordinates`], which stores only the non-empty
//! rows: memory and work follow the entries, not the declared dimensions (sprs' `to_csr`
//! allocates `rows + 1` row pointers: 16 GiB for a 77-byte file declaring 2^31 − 1 rows).
//! Values are dropped.

use std::io::BufRead;
use std::path::Path;

use super::lines::{not_utf8, Line, Lines};
use super::{CsrPattern, PatternLimits};
use crate::error::{Error, Result};

/// Value field of a Matrix Market file: how many value tokens follow each index pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Real,
    Integer,
    Complex,
    Pattern,
}

/// Symmetry of a Matrix Market file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Symmetry {
    General,
    Symmetric,
    SkewSymmetric,
    Hermitian,
}

fn at(line: usize, reason: impl Into<String>) -> Error {
    Error::pattern(Some(line), reason)
}

fn parse_header(text: &str, line: usize) -> Result<(Field, Symmetry)> {
    let tokens: Vec<String> = text
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    let tok = |i: usize| tokens.get(i).map(String::as_str).unwrap_or("");
    if tok(0) != "%%matrixmarket" {
        return Err(at(
            line,
            format!(
                "expected header '%%MatrixMarket matrix coordinate <field> <symmetry>', found '{}'",
                text.trim_end()
            ),
        ));
    }
    if tok(1) != "matrix" {
        return Err(at(
            line,
            format!("unsupported object '{}', expected 'matrix'", tok(1)),
        ));
    }
    if tok(2) != "coordinate" {
        return Err(at(
            line,
            format!(
                "unsupported format '{}', only 'coordinate' is supported",
                tok(2)
            ),
        ));
    }
    let field = match tok(3) {
        "real" => Field::Real,
        "integer" => Field::Integer,
        "complex" => Field::Complex,
        "pattern" => Field::Pattern,
        other => {
            return Err(at(
                line,
                format!("unsupported field '{other}', expected real, integer, complex or pattern"),
            ))
        }
    };
    let symmetry = match tok(4) {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::SkewSymmetric,
        "hermitian" => Symmetry::Hermitian,
        other => {
            return Err(at(
                line,
                format!(
                    "unsupported symmetry '{other}', expected general, symmetric, skew-symmetric or hermitian"
                ),
            ))
        }
    };
    if tokens.len() > 5 {
        return Err(at(line, format!("unexpected header token '{}'", tok(5))));
    }
    if field == Field::Pattern && symmetry == Symmetry::Hermitian {
        return Err(at(line, "a pattern matrix cannot be hermitian"));
    }
    Ok((field, symmetry))
}

fn parse_usize(token: &str, what: &str, line: usize) -> Result<usize> {
    token.parse::<usize>().map_err(|_| {
        at(
            line,
            format!("{what} '{token}' is not a non-negative integer"),
        )
    })
}

fn check_value(token: &str, field: Field, line: usize) -> Result<()> {
    let ok = match field {
        Field::Integer => token.parse::<i64>().is_ok(),
        _ => token.parse::<f64>().is_ok(),
    };
    if ok {
        Ok(())
    } else {
        Err(at(
            line,
            format!("value '{token}' is not a valid {field:?} number").to_lowercase(),
        ))
    }
}

impl CsrPattern {
    /// Reads a Matrix Market file (see
    /// [`from_matrix_market_reader`](Self::from_matrix_market_reader)).
    pub fn read_matrix_market(path: impl AsRef<Path>) -> Result<Self> {
        Self::read_matrix_market_with(path, &PatternLimits::default())
    }

    /// [`read_matrix_market`](Self::read_matrix_market) with explicit limits.
    pub fn read_matrix_market_with(path: impl AsRef<Path>, limits: &PatternLimits) -> Result<Self> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|e| Error::io(Some(path.to_path_buf()), e))?;
        Self::from_matrix_market_reader_with(std::io::BufReader::new(file), limits).map_err(|e| {
            match e.kind() {
                crate::ErrorKind::Io { path: None, reason } => Error::new(crate::ErrorKind::Io {
                    path: Some(path.to_path_buf()),
                    reason: reason.clone(),
                }),
                _ => e,
            }
        })
    }

    /// Parses Matrix Market `coordinate` text: field `real`, `integer`, `complex` or
    /// `pattern`; symmetry `general`, `symmetric`, `skew-symmetric` or `hermitian`. Header
    /// tokens are matched exactly (case-insensitive). Values are checked for syntax and then
    /// ignored; symmetric kinds expand to both triangles; duplicate entries are merged.
    ///
    /// A UTF-8 byte-order mark before the header is skipped, comment lines may hold bytes in
    /// any encoding (Latin-1 included), and any other line must be UTF-8. Memory grows with
    /// the entries actually read, never with the declared size; the declared dimensions and
    /// entry count are checked against [`PatternLimits::default`] (see
    /// [`from_matrix_market_reader_with`](Self::from_matrix_market_reader_with)).
    ///
    /// Errors carry the 1-based line number.
    ///
    /// # Example
    ///
    /// ```
    /// use dashrank::pattern::CsrPattern;
    /// let text = "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 3\n";
    /// let p = CsrPattern::from_matrix_market_reader(text.as_bytes())?;
    /// assert_eq!(p.nnz(), 3); // (1,0), (0,1), (2,2)
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_matrix_market_reader(reader: impl BufRead) -> Result<Self> {
        Self::from_matrix_market_reader_with(reader, &PatternLimits::default())
    }

    /// [`from_matrix_market_reader`](Self::from_matrix_market_reader) with explicit limits.
    pub fn from_matrix_market_reader_with(
        reader: impl BufRead,
        limits: &PatternLimits,
    ) -> Result<Self> {
        let mut lines = Lines::new(reader, limits.max_line_bytes);
        let (field, symmetry) = read_header(&mut lines)?;
        let size = read_size_line(&mut lines)?;
        check_size(size, symmetry, lines.lineno(), limits)?;
        let coords = read_entries(&mut lines, size, field, symmetry, limits)?;
        Self::from_coordinates(size.nrows, size.ncols, coords)
    }
}

/// What the size line declares.
#[derive(Debug, Clone, Copy)]
struct Size {
    nrows: usize,
    ncols: usize,
    entries: usize,
}

/// Reads the first line as the `%%MatrixMarket` header.
fn read_header(lines: &mut Lines<impl BufRead>) -> Result<(Field, Symmetry)> {
    match lines.next_line()? {
        None => Err(at(1, "empty input, expected a '%%MatrixMarket' header")),
        Some((_, Line::Comment(bytes))) => match std::str::from_utf8(bytes) {
            Ok(text) => parse_header(text, 1),
            Err(e) => Err(not_utf8(1, bytes, &e)),
        },
        Some((_, Line::Text(text))) => parse_header(text, 1),
        Some((_, Line::Blank)) => parse_header("", 1),
    }
}

/// Skips comments and blank lines, then parses the size line 'rows cols entries'.
fn read_size_line(lines: &mut Lines<impl BufRead>) -> Result<Size> {
    let (lineno, text) = loop {
        let last = lines.lineno();
        match lines.next_line()? {
            None => {
                return Err(at(
                    last + 1,
                    "end of input before the size line 'rows cols entries'",
                ))
            }
            Some((_, Line::Blank | Line::Comment(_))) => continue,
            Some((n, Line::Text(text))) => break (n, text),
        }
    };
    let toks: Vec<&str> = text.split_whitespace().collect();
    if toks.len() != 3 {
        return Err(at(
            lineno,
            format!(
                "size line must be 'rows cols entries', found {} tokens",
                toks.len()
            ),
        ));
    }
    Ok(Size {
        nrows: parse_usize(toks[0], "rows", lineno)?,
        ncols: parse_usize(toks[1], "cols", lineno)?,
        entries: parse_usize(toks[2], "entries", lineno)?,
    })
}

/// Moves a pattern error (from a limit check) to `line`; other errors pass unchanged.
fn on_line(line: usize, e: Error) -> Error {
    match e.kind() {
        crate::ErrorKind::Pattern { reason, .. } => at(line, reason.clone()),
        _ => e,
    }
}

/// Checks the declared size against the limits, and that a symmetric kind is square.
fn check_size(
    size: Size,
    symmetry: Symmetry,
    size_line: usize,
    limits: &PatternLimits,
) -> Result<()> {
    let Size {
        nrows,
        ncols,
        entries,
    } = size;
    limits
        .check_dims(nrows, ncols)
        .map_err(|e| on_line(size_line, e))?;
    limits
        .check_nnz(entries, "the size line declares")
        .map_err(|e| on_line(size_line, e))?;
    if symmetry != Symmetry::General && nrows != ncols {
        return Err(at(
            size_line,
            format!("a {symmetry:?} matrix must be square, found {nrows} x {ncols}").to_lowercase(),
        ));
    }
    Ok(())
}

/// Reads the entry lines to the end of input: exactly the declared count, each checked,
/// symmetric kinds expanded to both triangles. Returns 0-based `(row, col)` coordinates.
fn read_entries(
    lines: &mut Lines<impl BufRead>,
    size: Size,
    field: Field,
    symmetry: Symmetry,
    limits: &PatternLimits,
) -> Result<Vec<(u32, u32)>> {
    let entries = size.entries;
    let n_values = match field {
        Field::Pattern => 0,
        Field::Real | Field::Integer => 1,
        Field::Complex => 2,
    };
    // Storage grows with the entries read, not with the declared count.
    let mut coords: Vec<(u32, u32)> = Vec::with_capacity(entries.min(1 << 12));
    let mut found = 0usize;
    while let Some((lineno, line)) = lines.next_line()? {
        let Line::Text(text) = line else { continue };
        if found == entries {
            return Err(at(
                lineno,
                format!("unexpected data after the {entries} declared entries"),
            ));
        }
        let (r, c) = parse_entry(text, lineno, (size.nrows, size.ncols), field, n_values)?;
        if symmetry == Symmetry::SkewSymmetric && r == c {
            return Err(at(
                lineno,
                format!(
                    "diagonal entry ({}, {}) in a skew-symmetric matrix",
                    r + 1,
                    c + 1
                ),
            ));
        }
        coords.push((r, c));
        if symmetry != Symmetry::General && r != c {
            coords.push((c, r));
        }
        limits
            .check_nnz(coords.len(), "the file holds at least")
            .map_err(|e| on_line(lineno, e))?;
        found += 1;
    }
    if found != entries {
        return Err(at(
            lines.lineno() + 1,
            format!("end of input after {found} entries, the size line declares {entries}"),
        ));
    }
    Ok(coords)
}

/// Parses one entry line: 1-based indices checked against the shape, then exactly
/// `n_values` value tokens of the field's syntax. Returns 0-based `(row, col)`.
fn parse_entry(
    text: &str,
    lineno: usize,
    (nrows, ncols): (usize, usize),
    field: Field,
    n_values: usize,
) -> Result<(u32, u32)> {
    let mut toks = text.split_whitespace();
    let mut index = |what: &str, limit: usize| -> Result<u32> {
        let tok = toks
            .next()
            .ok_or_else(|| at(lineno, format!("missing {what} index")))?;
        let v = parse_usize(tok, what, lineno)?;
        if v == 0 || v > limit {
            return Err(at(
                lineno,
                format!("{what} index {v} is outside 1..={limit}"),
            ));
        }
        // v - 1 < limit <= MAX_DIM fits u32.
        Ok((v - 1) as u32)
    };
    let r = index("row", nrows)?;
    let c = index("column", ncols)?;
    let mut n_found = 0;
    for tok in toks {
        n_found += 1;
        if n_found <= n_values {
            check_value(tok, field, lineno)?;
        }
    }
    if n_found != n_values {
        return Err(at(
            lineno,
            format!(
                "expected {n_values} value token(s) after the indices for a {} matrix, found {n_found}",
                format!("{field:?}").to_lowercase()
            ),
        ));
    }
    Ok((r, c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn read(text: &str) -> Result<CsrPattern> {
        CsrPattern::from_matrix_market_reader(text.as_bytes())
    }

    fn err(text: &str) -> (Option<usize>, String) {
        match read(text).expect_err("must fail").kind() {
            ErrorKind::Pattern { line, reason } => (*line, reason.clone()),
            other => panic!("unexpected {other:?}"),
        }
    }

    fn dense(p: &CsrPattern) -> Vec<Vec<u8>> {
        (0..p.nrows())
            .map(|r| {
                let mut row = vec![0; p.ncols()];
                for &c in p.row(r) {
                    row[c as usize] = 1;
                }
                row
            })
            .collect()
    }

    #[test]
    fn fields_and_symmetries() {
        let general = "%%MatrixMarket matrix coordinate real general\n% comment\n\n2 3 3\n1 3 1.5\n2 1 -2e3\n1 1 0\n";
        let p = read(general).expect("valid");
        assert_eq!(dense(&p), vec![vec![1, 0, 1], vec![1, 0, 0]]);

        let int = "%%matrixmarket MATRIX Coordinate INTEGER General\n2 2 1\n2 2 7\n";
        assert_eq!(read(int).expect("valid").row(1), &[1]);

        let complex = "%%MatrixMarket matrix coordinate complex hermitian\n2 2 2\n1 1 1.0 0.0\n2 1 1.0 -1.0\n";
        assert_eq!(
            dense(&read(complex).expect("valid")),
            vec![vec![1, 1], vec![1, 0]]
        );

        let sym = "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n2 1\n3 1\n2 2\n";
        assert_eq!(
            dense(&read(sym).expect("valid")),
            vec![vec![0, 1, 1], vec![1, 1, 0], vec![1, 0, 0]]
        );

        let skew = "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 3.0\n";
        assert_eq!(
            dense(&read(skew).expect("valid")),
            vec![vec![0, 1], vec![1, 0]]
        );
    }

    #[test]
    fn duplicates_are_merged() {
        let dup = "%%MatrixMarket matrix coordinate pattern general\n2 2 3\n1 2\n1 2\n2 1\n";
        let p = read(dup).expect("valid");
        assert_eq!(p.nnz(), 2);
        // A symmetric file listing both triangles also merges.
        let sym = "%%MatrixMarket matrix coordinate pattern symmetric\n2 2 2\n1 2\n2 1\n";
        assert_eq!(read(sym).expect("valid").nnz(), 2);
    }

    #[test]
    fn header_errors() {
        assert_eq!(
            err(""),
            (
                Some(1),
                "empty input, expected a '%%MatrixMarket' header".into()
            )
        );
        assert_eq!(
            err("%%MatrixMarket matrix array real general\n2 2\n").1,
            "unsupported format 'array', only 'coordinate' is supported"
        );
        assert_eq!(
            err("%%MatrixMarket vector coordinate real general\n").1,
            "unsupported object 'vector', expected 'matrix'"
        );
        assert_eq!(
            err("%%MatrixMarket matrix coordinate double general\n").1,
            "unsupported field 'double', expected real, integer, complex or pattern"
        );
        assert_eq!(
            err("%%MatrixMarket matrix coordinate real skew\n").1,
            "unsupported symmetry 'skew', expected general, symmetric, skew-symmetric or hermitian"
        );
        assert_eq!(
            err("%%MatrixMarket matrix coordinate real general extra\n").1,
            "unexpected header token 'extra'"
        );
        assert_eq!(
            err("%%MatrixMarket matrix coordinate pattern hermitian\n").1,
            "a pattern matrix cannot be hermitian"
        );
        assert_eq!(err("3 3 1\n").0, Some(1));
    }

    #[test]
    fn size_line_errors() {
        let h = "%%MatrixMarket matrix coordinate real general\n";
        assert_eq!(
            err(h),
            (
                Some(2),
                "end of input before the size line 'rows cols entries'".into()
            )
        );
        assert_eq!(
            err(&format!("{h}2 2\n")),
            (
                Some(2),
                "size line must be 'rows cols entries', found 2 tokens".into()
            )
        );
        assert_eq!(
            err(&format!("{h}2 -2 1\n")),
            (Some(2), "cols '-2' is not a non-negative integer".into())
        );
    }

    #[test]
    fn index_errors() {
        let h = "%%MatrixMarket matrix coordinate real general\n";
        assert_eq!(
            err(&format!("{h}2 2 1\n3 1 1.0\n")),
            (Some(3), "row index 3 is outside 1..=2".into())
        );
        assert_eq!(
            err(&format!("{h}2 2 1\n1 0 1.0\n")),
            (Some(3), "column index 0 is outside 1..=2".into())
        );
        assert_eq!(
            err(&format!("{h}2 2 1\n1\n")),
            (Some(3), "missing column index".into())
        );
        assert_eq!(
            err(&format!("{h}2 2 1\n1 x 1.0\n")),
            (Some(3), "column 'x' is not a non-negative integer".into())
        );
    }

    #[test]
    fn value_errors() {
        let h = "%%MatrixMarket matrix coordinate real general\n";
        assert_eq!(
            err(&format!("{h}2 2 1\n1 1\n")),
            (
                Some(3),
                "expected 1 value token(s) after the indices for a real matrix, found 0".into()
            )
        );
        assert_eq!(
            err(&format!("{h}2 2 1\n1 1 abc\n")),
            (Some(3), "value 'abc' is not a valid real number".into())
        );
    }

    #[test]
    fn entry_count_errors() {
        let h = "%%MatrixMarket matrix coordinate real general\n";
        assert_eq!(
            err(&format!("{h}2 2 1\n1 1 1.0\n2 2 1.0\n")),
            (
                Some(4),
                "unexpected data after the 1 declared entries".into()
            )
        );
        assert_eq!(
            err(&format!("{h}2 2 2\n1 1 1.0\n")),
            (
                Some(4),
                "end of input after 1 entries, the size line declares 2".into()
            )
        );
    }

    #[test]
    fn field_and_symmetry_errors() {
        let int = "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n";
        assert_eq!(
            err(int),
            (Some(3), "value '1.5' is not a valid integer number".into())
        );
        let pat = "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1\n";
        assert_eq!(
            err(pat).1,
            "expected 0 value token(s) after the indices for a pattern matrix, found 1"
        );
        let skew = "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 2 1.0\n";
        assert_eq!(
            err(skew),
            (
                Some(3),
                "diagonal entry (2, 2) in a skew-symmetric matrix".into()
            )
        );
        let rect = "%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n";
        assert_eq!(
            err(rect),
            (
                Some(2),
                "a symmetric matrix must be square, found 2 x 3".into()
            )
        );
    }

    #[test]
    fn file_route() {
        let dir = std::env::temp_dir().join(format!("dashrank-mtx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let path = dir.join("a.mtx");
        std::fs::write(
            &path,
            "%%MatrixMarket matrix coordinate pattern general\n1 1 1\n1 1\n",
        )
        .expect("write");
        assert_eq!(
            CsrPattern::read_matrix_market(&path).expect("valid").nnz(),
            1
        );
        std::fs::remove_dir_all(&dir).ok();
        let e = CsrPattern::read_matrix_market(dir.join("missing.mtx")).expect_err("missing");
        assert!(matches!(e.kind(), ErrorKind::Io { path: Some(_), .. }));
    }
}

//! Whole WACO collected-data files (`<tokens> = <ms>` per line, as in WACO's
//! `TrainingData/CollectedData/*.txt`); the `= <ms>` suffix itself is parsed in `parse`.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::parse::ParsedLine;
use super::schema::Schema;
use super::Problem;
use crate::error::{Error, Result};

/// Reads schedule lines (e.g. a WACO collected-data file) from `reader`.
///
/// Returns one entry per schedule line: its 1-based line number and the parsed line or its
/// error (whose reason ends with `(line N)`). Blank lines and lines whose first non-blank
/// character is `#` are skipped. One bad line never stops the others: a line that is not
/// UTF-8 gets its own error too.
///
/// # Errors
///
/// Only a failure of `reader` itself ([`ErrorKind::Io`](crate::ErrorKind::Io)).
pub fn read_measured_lines<R: BufRead>(
    mut reader: R,
    schema: &Schema,
) -> Result<Vec<(usize, Result<ParsedLine>)>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut line_no = 0;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(None, e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let text = match std::str::from_utf8(&buf) {
            Ok(text) => text,
            Err(e) => {
                let problem = Problem::new(None, None, format!("line is not UTF-8 ({e})"));
                out.push((line_no, Err(problem.into_error_at_line(line_no))));
                continue;
            }
        };
        let text = if line_no == 1 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let parsed = schema
            .parse_line_inner(trimmed)
            .map_err(|p| p.into_error_at_line(line_no));
        out.push((line_no, parsed));
    }
    Ok(out)
}

/// Opens `path` and reads it with [`read_measured_lines`].
///
/// # Errors
///
/// [`ErrorKind::Io`](crate::ErrorKind::Io) with the path when the file cannot be opened or read.
pub fn read_measured_file(
    path: impl AsRef<Path>,
    schema: &Schema,
) -> Result<Vec<(usize, Result<ParsedLine>)>> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| Error::io(Some(path.to_owned()), e))?;
    read_measured_lines(BufReader::new(file), schema).map_err(|e| match e.kind() {
        crate::ErrorKind::Io { reason, .. } => Error::new(crate::ErrorKind::Io {
            path: Some(path.to_owned()),
            reason: reason.clone(),
        }),
        _ => e,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::schedule::split_measured;
    use crate::ErrorKind;

    const TINY: &str = r#"{
      "name": "tiny", "version": 1, "text_format": "waco",
      "fields": [
        {"name": "isplit", "kind": "choice", "values": [1, 2, 4, 8]},
        {"name": "order", "kind": "permutation", "symbols": ["i", "k"]}
      ]
    }"#;

    #[test]
    fn split_at_first_equals() {
        assert_eq!(split_measured("a = 1 = 2"), ("a ", Some(" 1 = 2")));
        assert_eq!(split_measured("a=1"), ("a", Some("1")));
        assert_eq!(split_measured(""), ("", None));
    }

    #[test]
    fn reads_lines_with_numbers_and_per_line_errors() {
        let schema = Schema::from_json(TINY).unwrap();
        let mut text: Vec<u8> = b"\xef\xbb\xbf1 i k = 2.5\r\n\n# comment\n   \n".to_vec();
        text.extend_from_slice(b"3 i k = 1\n");
        text.extend_from_slice(b"\xff\xfe\n");
        text.extend_from_slice(b"8 k k = 1\n");
        text.extend_from_slice(b"8 k i"); // no final newline
        let got = read_measured_lines(&text[..], &schema).unwrap();
        let lines: Vec<usize> = got.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, [1, 5, 6, 7, 8]);

        let first = got[0].1.as_ref().unwrap();
        assert_eq!(first.measured_ms, Some(2.5));
        assert_eq!(schema.format(&first.schedule), "1 i k");

        let e = got[1].1.as_ref().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid schedule field 'isplit' value '3': not in vocabulary [1, 2, 4, 8] (line 5)"
        );
        let e = got[2].1.as_ref().unwrap_err();
        assert!(e.to_string().contains("line is not UTF-8"), "{e}");
        assert!(e.to_string().ends_with("(line 6)"), "{e}");
        let e = got[3].1.as_ref().unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Schedule { index: None, field: Some(f), .. } if f == "order")
        );
        assert!(e.to_string().ends_with("missing [i] (line 7)"), "{e}");
        let last = got[4].1.as_ref().unwrap();
        assert_eq!(last.measured_ms, None);
    }

    #[test]
    fn missing_file_names_the_path() {
        let schema = Schema::from_json(TINY).unwrap();
        let e = read_measured_file("/nonexistent/dashrank/x.txt", &schema).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Io { path: Some(p), .. } if p.ends_with("x.txt")),
            "{e:?}"
        );
    }
}

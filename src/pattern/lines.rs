//! Line reading for the text formats: bounded line length, a UTF-8 byte-order mark stripped
//! from the first line, comments accepted in any encoding, and every other line checked to
//! be UTF-8 with its line number in the error.

use std::io::BufRead;

use crate::error::{Error, Result};

/// One classified line.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line<'a> {
    /// Only whitespace.
    Blank,
    /// First non-blank byte is `%`: the raw bytes (any encoding), trimmed of the line end.
    Comment(&'a [u8]),
    /// Anything else, valid UTF-8, trimmed.
    Text(&'a str),
}

/// Reads lines of at most `max` bytes and counts them (1-based).
pub(super) struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    lineno: usize,
    max: usize,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl<R: BufRead> Lines<R> {
    pub(super) fn new(reader: R, max: usize) -> Self {
        Self {
            reader,
            buf: Vec::new(),
            lineno: 0,
            max,
        }
    }

    /// The number of the last line returned (0 before the first).
    pub(super) fn lineno(&self) -> usize {
        self.lineno
    }

    /// The next line and its number, or `None` at the end of the input.
    pub(super) fn next_line(&mut self) -> Result<Option<(usize, Line<'_>)>> {
        self.buf.clear();
        let limit = u64::try_from(self.max)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let n = std::io::Read::take(&mut self.reader, limit)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| Error::io(None, e))?;
        if n == 0 {
            return Ok(None);
        }
        self.lineno += 1;
        if self.buf.len() > self.max && self.buf.last() != Some(&b'\n') {
            return Err(Error::pattern(
                Some(self.lineno),
                format!(
                    "line is longer than {} bytes (PatternLimits::max_line_bytes)",
                    self.max
                ),
            ));
        }
        let mut bytes = self.buf.as_slice();
        if self.lineno == 1 {
            bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
        }
        let bytes = bytes.trim_ascii();
        let line = match bytes.first() {
            None => Line::Blank,
            Some(b'%') => Line::Comment(bytes),
            Some(_) => match std::str::from_utf8(bytes) {
                Ok(text) => Line::Text(text),
                Err(e) => return Err(not_utf8(self.lineno, bytes, &e)),
            },
        };
        Ok(Some((self.lineno, line)))
    }
}

/// The error for a line that is not UTF-8, naming the byte and its column.
pub(super) fn not_utf8(line: usize, bytes: &[u8], e: &std::str::Utf8Error) -> Error {
    let at = e.valid_up_to();
    Error::pattern(
        Some(line),
        format!(
            "byte 0x{:02X} at column {} is not valid UTF-8 (only comment lines may use another encoding)",
            bytes[at],
            at + 1
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &[u8], max: usize) -> Result<Vec<String>> {
        let mut lines = Lines::new(text, max);
        let mut out = Vec::new();
        while let Some((_, l)) = lines.next_line()? {
            out.push(match l {
                Line::Blank => "blank".to_string(),
                Line::Comment(b) => format!("comment {}", String::from_utf8_lossy(b)),
                Line::Text(t) => format!("text {t}"),
            });
        }
        Ok(out)
    }

    #[test]
    fn classifies_and_strips() {
        let got = all(b"\xEF\xBB\xBF%%Header x\r\n  \n% caf\xE9\n 1 2 \n", 100).expect("ok");
        assert_eq!(
            got,
            [
                "comment %%Header x",
                "blank",
                "comment % caf\u{FFFD}",
                "text 1 2"
            ]
        );
        // A BOM is only stripped from the first line.
        let got = all(b"1\n\xEF\xBB\xBF2\n", 100).expect("ok");
        assert_eq!(got, ["text 1", "text \u{FEFF}2"]);
        // Latin-1 outside a comment: the line and column of the byte.
        let e = all(b"% ok\n2 caf\xE9\n", 100).expect_err("latin-1");
        assert_eq!(
            e.to_string(),
            "invalid sparsity pattern at line 2: byte 0xE9 at column 6 is not valid UTF-8 \
             (only comment lines may use another encoding)"
        );
    }

    #[test]
    fn line_length_is_bounded() {
        assert_eq!(all(b"12345\n12345", 5).expect("fits").len(), 2);
        let e = all(b"1\n123456\n", 5).expect_err("long");
        assert_eq!(
            e.to_string(),
            "invalid sparsity pattern at line 2: line is longer than 5 bytes (PatternLimits::max_line_bytes)"
        );
        // An endless line (think /dev/zero) stops at the limit.
        let zeros = std::io::BufReader::new(std::io::repeat(0));
        let mut lines = Lines::new(zeros, 1 << 16);
        assert!(lines.next_line().is_err());
    }
}

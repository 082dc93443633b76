//! Encoding schedules as `f32` rows for the schedule embedder (`docs/bundle-format.md` §5.1):
//! fields in order, a `choice` as its value index, a `permutation` of `n` symbols as the
//! flattened one-hot `P[symbol, position]` (row-major), an `integer` as `log2(x)` or `x`.
//! Batches keep going past bad candidates.

use super::parse::Schedule;
use super::schema::Schema;
use crate::error::{Error, Result};

/// A batch of encoded candidates: rows for the valid ones, and a status for every input.
///
/// Invariants (the fields are public for easy destructuring; a batch is only built by
/// [`Schema::encode_batch`] / [`Schema::encode_schedules`]):
/// `rows.len() == index.len() * width`; `statuses.len() == measured_ms.len()` = number of
/// inputs; `index` is ascending and `statuses[index[k]]` is `Ok(())`.
#[derive(Debug)]
pub struct EncodedBatch {
    /// The valid candidates' rows, `n_valid × width`, row-major, in input order (invalid
    /// candidates left out).
    pub rows: Vec<f32>,
    /// Columns per row (the schema's [`encoded_width`](Schema::encoded_width)).
    pub width: usize,
    /// Input position of each row: `index[k]` is the candidate encoded in row `k`.
    pub index: Vec<usize>,
    /// One status per input, in input order: `Ok(())` or the candidate's
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) error, whose `index` is its position.
    pub statuses: Vec<Result<(), Error>>,
    /// One entry per input: the measured milliseconds of its `= <ms>` suffix, if it had one
    /// and parsed (always `None` for [`Schema::encode_schedules`]).
    pub measured_ms: Vec<Option<f64>>,
}

impl EncodedBatch {
    /// Row `k` of the valid candidates, if `k < n_valid()`.
    pub fn row(&self, k: usize) -> Option<&[f32]> {
        let start = k.checked_mul(self.width)?;
        self.rows.get(start..start.checked_add(self.width)?)
    }

    /// Number of valid candidates (rows).
    pub fn n_valid(&self) -> usize {
        self.index.len()
    }

    /// Number of input candidates, valid or not.
    pub fn len(&self) -> usize {
        self.statuses.len()
    }

    /// Whether the batch had no inputs.
    pub fn is_empty(&self) -> bool {
        self.statuses.is_empty()
    }

    /// The failed candidates: `(input position, error)`, in input order.
    pub fn errors(&self) -> impl Iterator<Item = (usize, &Error)> {
        self.statuses
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().err().map(|e| (i, e)))
    }
}

impl Schema {
    /// Encodes `schedule` into `out`, which must hold exactly
    /// [`encoded_width`](Schema::encoded_width) values.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) if `out` has the wrong
    /// length; [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) if `schedule` does not belong
    /// to this schema (built by a different one). `out` is untouched on error.
    pub fn encode_into(&self, schedule: &Schedule, out: &mut [f32]) -> Result<()> {
        if out.len() != self.encoded_width() {
            return Err(Error::invalid_argument(format!(
                "output row has {} values, schema '{}' encodes {}",
                out.len(),
                self.name(),
                self.encoded_width()
            )));
        }
        self.check(schedule).map_err(|p| p.into_error(None))?;
        self.encode_trusted(schedule, out);
        Ok(())
    }

    /// Encodes `schedule` into a new row.
    ///
    /// # Errors
    ///
    /// As [`Schema::encode_into`].
    pub fn encode(&self, schedule: &Schedule) -> Result<Vec<f32>> {
        let mut row = vec![0.0; self.encoded_width()];
        self.encode_into(schedule, &mut row)?;
        Ok(row)
    }

    /// Parses and encodes schedule lines (an optional `= <ms>` suffix is accepted and ignored).
    ///
    /// Never fails as a whole: each line gets its own status, and its error carries the line's
    /// position in `lines` as the candidate index.
    pub fn encode_batch(&self, lines: &[impl AsRef<str>]) -> EncodedBatch {
        /// Lines per parallel task: enough to amortise a task, small enough to use 2 threads
        /// on a compiler's few hundred candidates.
        const TASK: usize = 128;
        if lines.len() <= TASK {
            return self.encode_range(lines, 0);
        }
        use rayon::prelude::*;
        let strs: Vec<&str> = lines.iter().map(AsRef::as_ref).collect();
        let parts: Vec<EncodedBatch> = strs
            .par_chunks(TASK)
            .enumerate()
            .map(|(t, chunk)| self.encode_range(chunk, t * TASK))
            .collect();
        let mut batch = EncodedBatch {
            rows: Vec::with_capacity(parts.iter().map(|p| p.rows.len()).sum()),
            width: self.encoded_width(),
            index: Vec::with_capacity(lines.len()),
            statuses: Vec::with_capacity(lines.len()),
            measured_ms: Vec::with_capacity(lines.len()),
        };
        for p in parts {
            batch.rows.extend_from_slice(&p.rows);
            batch.index.extend_from_slice(&p.index);
            batch.statuses.extend(p.statuses);
            batch.measured_ms.extend(p.measured_ms);
        }
        batch
    }

    /// [`Schema::encode_batch`] of `lines`, whose first line is input position `base`.
    pub(crate) fn encode_range<S: AsRef<str>>(&self, lines: &[S], base: usize) -> EncodedBatch {
        let n = lines.len();
        let width = self.encoded_width();
        let mut batch = EncodedBatch {
            rows: Vec::with_capacity(n * width),
            width,
            index: Vec::with_capacity(n),
            statuses: Vec::with_capacity(n),
            measured_ms: Vec::with_capacity(n),
        };
        let mut tokens = Vec::with_capacity(self.token_count() + 1);
        for (i, line) in lines.iter().enumerate() {
            let start = batch.rows.len();
            batch.rows.resize(start + width, 0.0);
            match self.encode_line(line.as_ref(), &mut tokens, &mut batch.rows[start..]) {
                Ok(ms) => {
                    batch.index.push(base + i);
                    batch.statuses.push(Ok(()));
                    batch.measured_ms.push(ms);
                }
                Err(problem) => {
                    batch.rows.truncate(start);
                    batch.statuses.push(Err(problem.into_error(Some(base + i))));
                    batch.measured_ms.push(None);
                }
            }
        }
        batch
    }

    /// Parses `line` straight into its encoded `row` (the same checks and messages as
    /// [`Schema::parse_line`], without building a [`Schedule`]); returns the measured time.
    fn encode_line<'a>(
        &self,
        line: &'a str,
        tokens: &mut Vec<&'a str>,
        row: &mut [f32],
    ) -> Result<Option<f64>, super::Problem> {
        match self.text_format() {
            super::TextFormat::Waco => {
                let (body, ms) = super::parse::split_measured(line);
                tokens.clear();
                // ASCII lines (all machine-written ones) split faster without Unicode tables;
                // the separators are exactly `char::is_whitespace`'s ASCII ones (vertical tab
                // included, which `split_ascii_whitespace` leaves out), so both paths agree
                // with `Schema::parse_line`.
                if body.is_ascii() {
                    split_ascii_tokens(body, tokens);
                } else {
                    tokens.extend(body.split_whitespace());
                }
                if tokens.len() != self.token_count() {
                    return Err(super::Problem::new(
                        None,
                        None,
                        format!(
                            "expected {} tokens, found {}",
                            self.token_count(),
                            tokens.len()
                        ),
                    ));
                }
                for field in self.fields() {
                    let t = field.token_offset();
                    let c = field.offset();
                    field
                        .kind()
                        .codec()
                        .parse_encode(
                            &tokens[t..t + field.token_count()],
                            &mut row[c..c + field.width()],
                        )
                        .map_err(|r| {
                            super::Problem::new(Some(field.name()), Some(r.value), r.reason)
                        })?;
                }
                ms.map(super::parse::parse_measured_ms).transpose()
            }
        }
    }

    /// Encodes already-built schedules; a schedule of another schema gets its own error.
    pub fn encode_schedules(&self, schedules: &[Schedule]) -> EncodedBatch {
        self.encode_each(schedules.len(), |i| {
            let s = &schedules[i];
            self.check(s).map(|()| (s.clone(), None))
        })
    }

    fn encode_each(
        &self,
        n: usize,
        mut get: impl FnMut(usize) -> Result<(Schedule, Option<f64>), super::Problem>,
    ) -> EncodedBatch {
        let width = self.encoded_width();
        let mut batch = EncodedBatch {
            rows: Vec::with_capacity(n * width),
            width,
            index: Vec::with_capacity(n),
            statuses: Vec::with_capacity(n),
            measured_ms: Vec::with_capacity(n),
        };
        for i in 0..n {
            match get(i) {
                Ok((schedule, ms)) => {
                    let start = batch.rows.len();
                    batch.rows.resize(start + width, 0.0);
                    self.encode_trusted(&schedule, &mut batch.rows[start..]);
                    batch.index.push(i);
                    batch.statuses.push(Ok(()));
                    batch.measured_ms.push(ms);
                }
                Err(problem) => {
                    batch.statuses.push(Err(problem.into_error(Some(i))));
                    batch.measured_ms.push(None);
                }
            }
        }
        batch
    }

    /// Writes the row of a schedule already checked against this schema; `out` has
    /// `encoded_width()` values.
    fn encode_trusted(&self, schedule: &Schedule, out: &mut [f32]) {
        for (field, value) in self.fields().iter().zip(schedule.values()) {
            let start = field.offset();
            if let Some(cols) = out.get_mut(start..start + field.width()) {
                field.kind().codec().encode(value, cols);
            }
        }
    }
}

/// Appends the tokens of an ASCII `text` separated by runs of `char::is_whitespace`'s ASCII
/// characters (space, `\t`, `\n`, vertical tab, form feed, `\r`): one pass over the bytes.
fn split_ascii_tokens<'a>(text: &'a str, tokens: &mut Vec<&'a str>) {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && is_space(bytes[i]) {
            i += 1;
        }
        let start = i;
        while i < bytes.len() && !is_space(bytes[i]) {
            i += 1;
        }
        if start < i {
            // ASCII text: every byte index is a character boundary.
            tokens.push(&text[start..i]);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    const TINY: &str = r#"{
      "name": "tiny", "version": 1, "text_format": "waco",
      "fields": [
        {"name": "jsplit", "kind": "choice", "values": [1, 2, 4, 8, 16, 32, 64, 128]},
        {"name": "order", "kind": "permutation", "symbols": ["i", "k"]}
      ]
    }"#;

    const OTHER: &str = r#"{
      "name": "other", "version": 1, "text_format": "waco",
      "fields": [{"name": "x", "kind": "choice", "values": [1]}]
    }"#;

    #[test]
    fn ascii_split_agrees_with_split_whitespace() {
        for text in [
            "",
            "   ",
            "a",
            " a  b\tc\n",
            "\x0b1\x0c2\r3 \t\n",
            "k1 k0  i1\ti0 = 3.5",
        ] {
            let mut got = Vec::new();
            split_ascii_tokens(text, &mut got);
            let expect: Vec<&str> = text.split_whitespace().collect();
            assert_eq!(got, expect, "{text:?}");
        }
    }

    #[test]
    fn encode_into_checks_length_and_schema() {
        let s = Schema::from_json(TINY).unwrap();
        let sched = s.parse_line("16 k i").unwrap().schedule;
        let mut row = [7.0f32; 5];
        s.encode_into(&sched, &mut row).unwrap();
        assert_eq!(row, [4.0, 0.0, 1.0, 1.0, 0.0]);
        assert_eq!(s.encode(&sched).unwrap(), row);

        let mut short = [0.0f32; 4];
        let e = s.encode_into(&sched, &mut short).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }));
        assert_eq!(
            e.to_string(),
            "invalid argument: output row has 4 values, schema 'tiny' encodes 5"
        );

        let other = Schema::from_json(OTHER).unwrap();
        let foreign = other.parse_line("1").unwrap().schedule;
        let mut row = [7.0f32; 5];
        let e = s.encode_into(&foreign, &mut row).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Schedule { .. }));
        assert_eq!(row, [7.0; 5], "untouched on error");
    }

    #[test]
    fn batch_keeps_going_past_bad_candidates() {
        let s = Schema::from_json(TINY).unwrap();
        let lines = [
            "1 i k = 3.0",
            "2 i k k",
            "256 i k",
            "4 k k",
            "8 k i",
            "4 i x",
        ];
        let b = s.encode_batch(&lines);
        assert_eq!(b.len(), 6);
        assert!(!b.is_empty());
        assert_eq!(b.n_valid(), 2);
        assert_eq!(b.width, 5);
        assert_eq!(b.index, [0, 4]);
        assert_eq!(b.rows, [0., 1., 0., 0., 1., 3., 0., 1., 1., 0.]);
        assert_eq!(b.measured_ms, [Some(3.0), None, None, None, None, None]);
        assert_eq!(b.row(1), Some(&[3., 0., 1., 1., 0.][..]));
        assert_eq!(b.row(2), None);
        let errors: Vec<String> = b.errors().map(|(i, e)| format!("{i}: {e}")).collect();
        assert_eq!(
            errors,
            [
                "1: invalid schedule #1: expected 3 tokens, found 4",
                "2: invalid schedule #2 field 'jsplit' value '256': not in vocabulary \
                 [1, 2, 4, 8, 16, 32, 64, 128]",
                "3: invalid schedule #3 field 'order' value 'k k': symbol 'k' repeated at \
                 positions 1 and 2; missing [i]",
                "5: invalid schedule #5 field 'order' value 'i x': unknown symbol 'x' at \
                 position 2; expected a permutation of [i, k]",
            ]
        );
        assert!(b.statuses[0].is_ok());
    }

    #[test]
    fn batch_accepts_owned_strings_and_empty_input() {
        let s = Schema::from_json(TINY).unwrap();
        let lines: Vec<String> = vec!["1 i k".into()];
        assert_eq!(s.encode_batch(&lines).n_valid(), 1);
        let none: [&str; 0] = [];
        let b = s.encode_batch(&none);
        assert!(b.is_empty());
        assert!(b.rows.is_empty());
    }

    #[test]
    fn schedules_batch_flags_foreign_schedules() {
        let s = Schema::from_json(TINY).unwrap();
        let other = Schema::from_json(OTHER).unwrap();
        let good = s.parse_line("2 i k").unwrap().schedule;
        let foreign = other.parse_line("1").unwrap().schedule;
        let b = s.encode_schedules(&[foreign, good]);
        assert_eq!(b.index, [1]);
        assert_eq!(b.rows, [1., 1., 0., 0., 1.]);
        assert_eq!(b.measured_ms, [None, None]);
        let (i, e) = b.errors().next().unwrap();
        assert_eq!(i, 0);
        assert_eq!(
            e.to_string(),
            "invalid schedule #0: schedule has 1 fields, schema 'tiny' has 2"
        );
    }
}

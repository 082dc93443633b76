//! [`Schedule`] values: parsing text lines and tokens against a [`Schema`] (with a measured
//! `= <ms>` suffix), and printing them.

use super::kind::FieldValue;
use super::schema::{Schema, TextFormat};
use super::Problem;
use crate::error::Result;

/// A schedule validated against a [`Schema`]: one [`FieldValue`] per field, in field order.
///
/// Only a schema builds one ([`Schema::parse_line`], [`Schema::schedule_from_tokens`],
/// [`Schema::schedule_from_values`]). Schedules compare and hash by value, so they can be
/// deduplicated.
///
/// # Threads
///
/// Plain data: `Send + Sync`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Schedule {
    values: Vec<FieldValue>,
}

impl Schedule {
    /// The field values, in the schema's field order.
    pub fn values(&self) -> &[FieldValue] {
        &self.values
    }

    /// Consumes the schedule, returning its field values.
    pub fn into_values(self) -> Vec<FieldValue> {
        self.values
    }
}

/// A parsed schedule line: the schedule and the measured time of its `= <ms>` suffix.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedLine {
    /// The schedule.
    pub schedule: Schedule,
    /// Measured milliseconds from a trailing `= <ms>`, if present (finite, non-negative).
    pub measured_ms: Option<f64>,
}

impl Schema {
    /// Parses one schedule line in the schema's text format, with an optional trailing
    /// `= <ms>` measured time.
    ///
    /// Tokens are whitespace-separated; each field takes its tokens in turn. Integer choice
    /// values match any token that parses to the same integer (`016` is `16`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) (no index) naming the field and value:
    /// wrong token count (expected vs found), out-of-vocabulary value, unknown, repeated or
    /// missing permutation symbol, or a bad measured time (not a number, negative,
    /// non-finite, or extra text after `=`).
    ///
    /// # Example
    ///
    /// ```
    /// use dashrank::schedule::Schema;
    ///
    /// let schema = Schema::from_json(r#"{
    ///   "name": "tiny", "version": 1, "text_format": "waco",
    ///   "fields": [
    ///     {"name": "isplit", "kind": "choice", "values": [1, 2, 4, 8]},
    ///     {"name": "order", "kind": "permutation", "symbols": ["i1", "i0", "k1", "k0"]},
    ///     {"name": "paridx", "kind": "choice", "values": ["i1", "i0", "k1", "k0"]}
    ///   ]
    /// }"#)?;
    ///
    /// let parsed = schema.parse_line("4 k1 i1 i0 k0 i1 = 14.815")?;
    /// assert_eq!(parsed.measured_ms, Some(14.815));
    /// assert_eq!(schema.format(&parsed.schedule), "4 k1 i1 i0 k0 i1");
    ///
    /// let mut row = vec![0.0; schema.encoded_width()]; // 1 + 16 + 1
    /// schema.encode_into(&parsed.schedule, &mut row)?;
    /// assert_eq!(row[0], 2.0); // isplit 4 is value #2
    /// assert_eq!(row[1 + 2 * 4], 1.0); // P[k1 = symbol 2, position 0]
    /// assert_eq!(row[17], 0.0); // paridx i1 is value #0
    ///
    /// let err = schema.parse_line("16 k1 i1 i0 k0 i1").unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "invalid schedule field 'isplit' value '16': not in vocabulary [1, 2, 4, 8]"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn parse_line(&self, line: &str) -> Result<ParsedLine> {
        self.parse_line_inner(line).map_err(|p| p.into_error(None))
    }

    /// Builds a schedule from its text tokens (no `= <ms>` suffix).
    ///
    /// # Errors
    ///
    /// As [`Schema::parse_line`], minus the measured-time errors.
    pub fn schedule_from_tokens(&self, tokens: &[&str]) -> Result<Schedule> {
        self.parse_tokens(tokens).map_err(|p| p.into_error(None))
    }

    /// Builds a schedule from field values (e.g. one generated programmatically), checking
    /// each against its field.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) for a wrong number of values, a value
    /// of the wrong kind, an out-of-range choice index or a non-permutation.
    pub fn schedule_from_values(&self, values: Vec<FieldValue>) -> Result<Schedule> {
        let schedule = Schedule { values };
        self.check(&schedule).map_err(|p| p.into_error(None))?;
        Ok(schedule)
    }

    /// Prints a schedule as a text line (tokens separated by single spaces, integers in
    /// canonical form): `format(parse(x))` is `x` with whitespace and integers normalized and
    /// any `= <ms>` dropped.
    ///
    /// A schedule built by another schema prints as far as it fits this one; use
    /// [`Schema::schedule_from_values`] to check it first.
    pub fn format(&self, schedule: &Schedule) -> String {
        let mut out = String::with_capacity(4 * self.token_count());
        for (i, (field, value)) in self.fields().iter().zip(&schedule.values).enumerate() {
            if i > 0 {
                out.push(' ');
            }
            field.kind().codec().write(value, &mut out);
        }
        out
    }

    /// Prints a parsed line, with ` = <ms>` appended when it has a measured time.
    pub fn format_line(&self, line: &ParsedLine) -> String {
        let mut out = self.format(&line.schedule);
        if let Some(ms) = line.measured_ms {
            out.push_str(&format!(" = {ms}"));
        }
        out
    }

    pub(crate) fn parse_line_inner(&self, line: &str) -> Result<ParsedLine, Problem> {
        match self.text_format() {
            TextFormat::Waco => {
                let (body, ms) = split_measured(line);
                let tokens: Vec<&str> = body.split_whitespace().collect();
                let schedule = self.parse_tokens(&tokens)?;
                let measured_ms = ms.map(parse_measured_ms).transpose()?;
                Ok(ParsedLine {
                    schedule,
                    measured_ms,
                })
            }
        }
    }

    pub(crate) fn parse_tokens(&self, tokens: &[&str]) -> Result<Schedule, Problem> {
        if tokens.len() != self.token_count() {
            return Err(Problem::new(
                None,
                None,
                format!(
                    "expected {} tokens, found {}",
                    self.token_count(),
                    tokens.len()
                ),
            ));
        }
        let mut values = Vec::with_capacity(self.fields().len());
        for field in self.fields() {
            let start = field.token_offset();
            let field_tokens = &tokens[start..start + field.token_count()];
            let value = field
                .kind()
                .codec()
                .parse(field_tokens)
                .map_err(|r| Problem::new(Some(field.name()), Some(r.value), r.reason))?;
            values.push(value);
        }
        Ok(Schedule { values })
    }

    /// Checks that `schedule` is a valid schedule of this schema.
    pub(crate) fn check(&self, schedule: &Schedule) -> Result<(), Problem> {
        if schedule.values.len() != self.fields().len() {
            return Err(Problem::new(
                None,
                None,
                format!(
                    "schedule has {} fields, schema '{}' has {}",
                    schedule.values.len(),
                    self.name(),
                    self.fields().len()
                ),
            ));
        }
        for (field, value) in self.fields().iter().zip(&schedule.values) {
            field
                .kind()
                .codec()
                .check(value)
                .map_err(|r| Problem::new(Some(field.name()), Some(r.value), r.reason))?;
        }
        Ok(())
    }
}

/// Splits a schedule line at its first `=` into the schedule text and the measured-time
/// text (both untrimmed). Lines without `=` have no measured time.
///
/// ```
/// use dashrank::schedule::split_measured;
///
/// assert_eq!(split_measured("1 2 = 3.5"), ("1 2 ", Some(" 3.5")));
/// assert_eq!(split_measured("1 2"), ("1 2", None));
/// ```
pub fn split_measured(line: &str) -> (&str, Option<&str>) {
    match line.split_once('=') {
        Some((body, ms)) => (body, Some(ms)),
        None => (line, None),
    }
}

/// Parses the text after `=`: exactly one finite, non-negative number of milliseconds.
pub(crate) fn parse_measured_ms(text: &str) -> Result<f64, Problem> {
    let bad = |reason: String| Problem::new(None, Some(text.trim().to_owned()), reason);
    let mut tokens = text.split_whitespace();
    let token = match (tokens.next(), tokens.next()) {
        (None, _) => return Err(bad("missing measured time after '='".into())),
        (Some(one), None) => one,
        (Some(_), Some(_)) => {
            return Err(bad(format!(
                "expected one number after '=', found {} tokens",
                2 + tokens.count()
            )))
        }
    };
    let ms: f64 = token
        .parse()
        .map_err(|_| bad("measured time is not a number".into()))?;
    if !ms.is_finite() || ms < 0.0 {
        return Err(bad("measured time must be finite and non-negative".into()));
    }
    Ok(ms)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    const TINY: &str = r#"{
      "name": "tiny", "version": 1, "text_format": "waco",
      "fields": [
        {"name": "isplit", "kind": "choice", "values": [1, 2, 4, 8]},
        {"name": "order", "kind": "permutation", "symbols": ["i1", "i0", "k1", "k0"]},
        {"name": "paridx", "kind": "choice", "values": ["i1", "i0", "k1", "k0"]}
      ]
    }"#;

    fn tiny() -> Schema {
        Schema::from_json(TINY).unwrap()
    }

    fn parts(err: &crate::Error) -> (Option<usize>, Option<String>, Option<String>, String) {
        match err.kind() {
            ErrorKind::Schedule {
                index,
                field,
                value,
                reason,
            } => (*index, field.clone(), value.clone(), reason.clone()),
            other => panic!("unexpected kind {other:?}"),
        }
    }

    #[test]
    fn parses_with_and_without_ms() {
        let s = tiny();
        let p = s.parse_line("2 i1 i0 k1 k0 k1").unwrap();
        assert_eq!(p.measured_ms, None);
        assert_eq!(
            p.schedule.values(),
            [
                FieldValue::Choice(1),
                FieldValue::Permutation(vec![0, 1, 2, 3]),
                FieldValue::Choice(2)
            ]
        );
        let q = s.parse_line("  2\ti1 i0  k1 k0 k1=0.5 \r\n").unwrap();
        assert_eq!(q.schedule, p.schedule);
        assert_eq!(q.measured_ms, Some(0.5));
    }

    #[test]
    fn format_round_trips_normalized() {
        let s = tiny();
        let p = s.parse_line(" 008  k0 k1 i0 i1\ti0 =  1e3").unwrap();
        assert_eq!(s.format(&p.schedule), "8 k0 k1 i0 i1 i0");
        assert_eq!(s.format_line(&p), "8 k0 k1 i0 i1 i0 = 1000");
        let again = s.parse_line(&s.format_line(&p)).unwrap();
        assert_eq!(again, p);
    }

    #[test]
    fn wrong_token_count() {
        let s = tiny();
        let e = s.parse_line("2 i1 i0 k1 k0").unwrap_err();
        assert_eq!(
            parts(&e),
            (None, None, None, "expected 6 tokens, found 5".into())
        );
        assert_eq!(
            e.to_string(),
            "invalid schedule: expected 6 tokens, found 5"
        );
        let e = s.parse_line("").unwrap_err();
        assert_eq!(parts(&e).3, "expected 6 tokens, found 0");
        let e = s.schedule_from_tokens(&["2", "i1", "i0", "k1", "k0", "k1", "k1"]);
        assert_eq!(parts(&e.unwrap_err()).3, "expected 6 tokens, found 7");
    }

    #[test]
    fn out_of_vocabulary() {
        let s = tiny();
        let e = s.parse_line("2 i1 i0 k1 k0 j1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid schedule field 'paridx' value 'j1': not in vocabulary [i1, i0, k1, k0]"
        );
        let e = s.parse_line("two i1 i0 k1 k0 k1").unwrap_err();
        assert_eq!(
            parts(&e),
            (
                None,
                Some("isplit".into()),
                Some("two".into()),
                "not in vocabulary [1, 2, 4, 8]".into()
            )
        );
    }

    #[test]
    fn bad_permutations() {
        let s = tiny();
        let e = s.parse_line("2 i1 i0 j1 k0 k1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid schedule field 'order' value 'i1 i0 j1 k0': unknown symbol 'j1' at \
             position 3; expected a permutation of [i1, i0, k1, k0]"
        );
        let e = s.parse_line("2 i1 i0 i1 k0 k1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid schedule field 'order' value 'i1 i0 i1 k0': symbol 'i1' repeated at \
             positions 1 and 3; missing [k1]"
        );
    }

    #[test]
    fn bad_measured_times() {
        let s = tiny();
        let ok = "2 i1 i0 k1 k0 k1";
        for (suffix, value, reason) in [
            ("= abc", "abc", "measured time is not a number"),
            (
                "= -1.5",
                "-1.5",
                "measured time must be finite and non-negative",
            ),
            (
                "= inf",
                "inf",
                "measured time must be finite and non-negative",
            ),
            (
                "= NaN",
                "NaN",
                "measured time must be finite and non-negative",
            ),
            ("=", "", "missing measured time after '='"),
            (
                "= 1.0 ms",
                "1.0 ms",
                "expected one number after '=', found 2 tokens",
            ),
            (
                "= 1 = 2",
                "1 = 2",
                "expected one number after '=', found 3 tokens",
            ),
        ] {
            let e = s.parse_line(&format!("{ok} {suffix}")).unwrap_err();
            assert_eq!(
                parts(&e),
                (None, None, Some(value.into()), reason.into()),
                "{suffix}"
            );
        }
        let p = s.parse_line(&format!("{ok} = 0")).unwrap();
        assert_eq!(p.measured_ms, Some(0.0));
    }

    #[test]
    fn from_values_checks() {
        let s = tiny();
        let good = vec![
            FieldValue::Choice(3),
            FieldValue::Permutation(vec![3, 2, 1, 0]),
            FieldValue::Choice(0),
        ];
        let sched = s.schedule_from_values(good.clone()).unwrap();
        assert_eq!(s.format(&sched), "8 k0 k1 i0 i1 i1");
        assert_eq!(sched.into_values(), good);

        let e = s
            .schedule_from_values(vec![FieldValue::Choice(0)])
            .unwrap_err();
        assert_eq!(parts(&e).3, "schedule has 1 fields, schema 'tiny' has 3");
        let e = s
            .schedule_from_values(vec![
                FieldValue::Choice(4),
                FieldValue::Permutation(vec![3, 2, 1, 0]),
                FieldValue::Choice(0),
            ])
            .unwrap_err();
        assert_eq!(parts(&e).1.as_deref(), Some("isplit"));
        let e = s
            .schedule_from_values(vec![
                FieldValue::Choice(0),
                FieldValue::Permutation(vec![3, 3, 1, 0]),
                FieldValue::Choice(0),
            ])
            .unwrap_err();
        assert_eq!(
            parts(&e).3,
            "symbol 'k0' repeated at positions 1 and 2; missing [k1]"
        );
    }
}

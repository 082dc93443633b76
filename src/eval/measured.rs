//! Measured runtimes in CSV form (`schedule,ms`), for targets whose data is not in WACO's
//! `<tokens> = <ms>` form ([`read_measured_lines`](crate::schedule::read_measured_lines)).

/// Reads measured runtimes in CSV form, `schedule,ms` per line (the schedule in the schema's
/// text format, optionally in double quotes), for targets whose data is not in WACO's
/// `<tokens> = <ms>` form.
///
/// The line is split at its **last** comma, so the schedule may itself contain commas. A first
/// line whose last field is not a number is a header and is skipped, as are blank lines and
/// lines starting with `#`. The result has the shape of
/// [`read_measured_lines`](crate::schedule::read_measured_lines): one entry per data line with
/// its 1-based line number and the parsed line or its error (whose reason ends with
/// `(line N)`).
///
/// # Errors
///
/// Only a failure of `reader` itself ([`ErrorKind::Io`](crate::ErrorKind::Io)).
///
/// # Example
/// ```
/// use dashrank::eval::read_measured_csv;
/// use dashrank::schedule::Schema;
///
/// let schema = Schema::from_json(r#"{"name": "tiny", "version": 1, "text_format": "waco",
///   "fields": [{"name": "isplit", "kind": "choice", "values": [1, 2, 4, 8]}]}"#)?;
/// let csv = "schedule,ms\n4,1.5\n\"8\",2\n3,1\n";
/// let got = read_measured_csv(csv.as_bytes(), &schema)?;
/// assert_eq!(got.len(), 3);
/// assert_eq!(got[0].1.as_ref().unwrap().measured_ms, Some(1.5));
/// assert_eq!(got[1].0, 3);
/// assert!(got[2].1.as_ref().unwrap_err().to_string().ends_with("(line 4)"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_measured_csv<R: std::io::BufRead>(
    reader: R,
    schema: &crate::schedule::Schema,
) -> crate::Result<Vec<(usize, crate::Result<crate::schedule::ParsedLine>)>> {
    use crate::{Error, ErrorKind};
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line_no = i + 1;
        let text = line.map_err(|e| Error::io(None, e))?;
        let text = if line_no == 1 {
            text.trim_start_matches('\u{feff}')
        } else {
            &text
        };
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let at_line = |reason: String| {
            Error::schedule(None, None, None, format!("{reason} (line {line_no})"))
        };
        let Some((schedule, ms)) = trimmed.rsplit_once(',') else {
            out.push((line_no, Err(at_line("expected 'schedule,ms'".into()))));
            continue;
        };
        let ms = ms.trim();
        if line_no == 1 && ms.parse::<f64>().is_err() {
            continue; // header
        }
        let schedule = schedule.trim();
        let schedule = schedule
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap_or(schedule);
        let parsed = schema
            .parse_line(&format!("{schedule} = {ms}"))
            .map_err(|e| match e.kind() {
                ErrorKind::Schedule {
                    field,
                    value,
                    reason,
                    ..
                } => Error::schedule(
                    None,
                    field.clone(),
                    value.clone(),
                    format!("{reason} (line {line_no})"),
                ),
                _ => e,
            });
        out.push((line_no, parsed));
    }
    Ok(out)
}

//! Schedules as data: the schema a model's schedule embedder expects, validated schedule
//! values, the WACO SuperSchedule text format, and the `f32` encoding fed to the embedder.
//!
//! A [`Schema`] is read once from the bundle's `dashrank.schedule_schema` metadata
//! (`docs/bundle-format.md` §5.1) with [`Schema::from_json`]. It owns every model fact about
//! schedules: field order, vocabularies, loop symbols and the encoded layout. No vocabulary
//! lives in code.
//!
//! - [`Schema::parse_line`] turns a text line (with an optional `= <ms>` suffix) into a
//!   [`ParsedLine`]; [`Schema::format`] prints a [`Schedule`] back.
//! - [`Schema::encode_into`] writes one schedule's row; [`Schema::encode_batch`] encodes many
//!   lines and reports errors **per candidate** ([`EncodedBatch`]): one bad line never fails
//!   the batch.
//! - [`read_measured_lines`] reads a WACO collected-data file, with line numbers in errors.
//!
//! Validation happens at this boundary: a [`Schedule`] can only be built through a schema, so
//! encoding it again only checks that it belongs to the schema it is encoded with.

mod encode;
mod examples;
mod kind;
mod parse;
mod registry;
mod schema;
pub mod space;
mod waco;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

pub use encode::EncodedBatch;
pub use kind::{
    ChoiceKind, ChoiceValues, FieldKind, FieldValue, IntegerEncoding, IntegerKind, PermutationKind,
};
pub use parse::split_measured;
pub use parse::{ParsedLine, Schedule};
pub use schema::{Field, Schema, TextFormat, SCHEMA_VERSION};
pub use waco::{read_measured_file, read_measured_lines};

use crate::error::Error;

/// A schedule-level problem before the candidate index (or line) is known.
#[derive(Debug)]
pub(crate) struct Problem {
    field: Option<String>,
    value: Option<String>,
    reason: String,
}

impl Problem {
    fn new(field: Option<&str>, value: Option<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.map(str::to_owned),
            value,
            reason: reason.into(),
        }
    }

    /// The error for candidate `index` of a batch (or no index).
    fn into_error(self, index: Option<usize>) -> Error {
        Error::schedule(index, self.field, self.value, self.reason)
    }

    /// The error for a schedule read from 1-based text line `line`.
    fn into_error_at_line(self, line: usize) -> Error {
        Error::schedule(
            None,
            self.field,
            self.value,
            format!("{} (line {line})", self.reason),
        )
    }
}

//! Example schedules built from a schema alone, for smoke tests of a model
//! (`dashrank inspect --check`): every field kind gets values it accepts.

use super::kind::{FieldKind, FieldValue, IntegerEncoding, IntegerKind};
use super::schema::Schema;
use crate::error::Result;

impl Schema {
    /// `count` schedule lines that this schema accepts, varied across fields: line `i` takes
    /// value `i mod n` of each `choice` field, the identity loop order rotated by `i` for each
    /// `permutation` field, and the `i`-th accepted value of each `integer` field (powers of
    /// two for `log2` fields), wrapping around.
    ///
    /// # Errors
    ///
    /// None for a validated schema; the schema's own check of each built schedule is kept.
    ///
    /// # Example
    /// ```
    /// use dashrank::{LoadOptions, Model};
    /// let model = Model::load("tests/data/fixtures/tiny-cognate", &LoadOptions::default())?;
    /// let schema = model.schema("spade/spmm")?; // integer, permutation and choice fields
    /// for line in schema.example_lines(4)? {
    ///     schema.parse_line(&line)?;
    /// }
    /// # Ok::<(), dashrank::Error>(())
    /// ```
    pub fn example_lines(&self, count: usize) -> Result<Vec<String>> {
        (0..count)
            .map(|i| {
                let values = self
                    .fields()
                    .iter()
                    .map(|f| match f.kind() {
                        FieldKind::Choice(c) => FieldValue::Choice(i % c.values().len().max(1)),
                        FieldKind::Permutation(p) => {
                            let n = p.symbols().len();
                            FieldValue::Permutation((0..n).map(|k| (k + i) % n.max(1)).collect())
                        }
                        FieldKind::Integer(k) => FieldValue::Integer(integer_example(k, i)),
                    })
                    .collect();
                Ok(self.format(&self.schedule_from_values(values)?))
            })
            .collect()
    }
}

/// The `i`-th example value of an integer field, wrapping within `[min, max]`.
fn integer_example(k: &IntegerKind, i: usize) -> i64 {
    let (min, max) = (k.min(), k.max());
    match k.encoding() {
        IntegerEncoding::Log2 => {
            let powers: Vec<i64> = (0..63)
                .map(|p| 1i64 << p)
                .filter(|v| (min..=max).contains(v))
                .collect();
            match powers.as_slice() {
                [] => min,
                p => p[i % p.len()],
            }
        }
        IntegerEncoding::Linear => {
            let span = u64::try_from(max.saturating_sub(min))
                .unwrap_or(0)
                .saturating_add(1);
            min.saturating_add((i as u64 % span) as i64)
        }
    }
}

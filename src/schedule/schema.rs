//! [`Schema`]: the fields of a model's schedules, their vocabularies and the encoded layout,
//! read from the schema JSON of `docs/bundle-format.md` §5.1.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::kind::FieldKind;
use super::registry;
use crate::error::{Error, Result};

/// The schema format version this library reads.
pub const SCHEMA_VERSION: u32 = 1;

/// Bundle metadata key the schema is stored under; used as the error location.
const SCHEMA_KEY: &str = "dashrank.schedule_schema";

/// How schedules are written as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TextFormat {
    /// WACO SuperSchedule lines: each field's tokens in turn, whitespace-separated, with an
    /// optional trailing `= <milliseconds>`.
    Waco,
}

impl TextFormat {
    const ALL: &'static [TextFormat] = &[TextFormat::Waco];

    /// The name used in the schema JSON (`"waco"`).
    pub fn name(self) -> &'static str {
        match self {
            TextFormat::Waco => "waco",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|f| f.name() == name)
    }
}

/// One field of a schema: a name, a kind, and where it sits in the text and the encoded row.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    name: String,
    kind: FieldKind,
    offset: usize,
    token_offset: usize,
}

impl Field {
    /// The field name (unique within its schema).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The field kind and its parameters.
    pub fn kind(&self) -> &FieldKind {
        &self.kind
    }

    /// First column of this field in the encoded row.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of columns this field takes in the encoded row.
    pub fn width(&self) -> usize {
        self.kind.width()
    }

    /// Index of this field's first token in a schedule line.
    pub fn token_offset(&self) -> usize {
        self.token_offset
    }

    /// Number of tokens this field takes in a schedule line.
    pub fn token_count(&self) -> usize {
        self.kind.token_count()
    }
}

/// The schedule schema of one model head: fields in text order, each with its kind,
/// vocabulary and encoded columns.
///
/// Built once from the bundle with [`Schema::from_json`]; everything else in this module
/// (parsing, printing, encoding) is a method on it.
///
/// # Threads
///
/// `Schema` is immutable plain data: `Send + Sync`, share it by reference or `Arc`.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    name: String,
    text_format: TextFormat,
    fields: Vec<Field>,
    encoded_width: usize,
    token_count: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchema {
    name: String,
    #[allow(dead_code)] // checked before deserializing
    version: u32,
    text_format: String,
    fields: Vec<RawField>,
}

#[derive(Deserialize)]
struct RawField {
    name: String,
    kind: String,
    #[serde(flatten)]
    params: Map<String, Value>,
}

fn schema_error(reason: impl Into<String>) -> Error {
    Error::bundle(SCHEMA_KEY, reason)
}

impl Schema {
    /// Parses and validates a schema from its JSON text (`docs/bundle-format.md` §5.1).
    ///
    /// Checks: version is [`SCHEMA_VERSION`]; `name` is non-empty; `text_format` is known;
    /// there is at least one field; field names are non-empty and unique; every field kind is
    /// registered (`choice`, `permutation`, `integer`) and its parameters are valid (choice
    /// `values` non-empty, unique, all integers or all strings; permutation `symbols` non-empty
    /// and unique; string values and symbols usable as text tokens; integer `min ≤ max`,
    /// `encode` is `log2` (then `min ≥ 1`) or `linear`; unknown parameters rejected).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Bundle`](crate::ErrorKind::Bundle) with key `dashrank.schedule_schema`;
    /// the reason names the offending field.
    pub fn from_json(json: &str) -> Result<Schema> {
        let value: Value = serde_json::from_str(json)
            .map_err(|e| schema_error(format!("not valid JSON: {e}")).with_source(e))?;
        let Value::Object(obj) = &value else {
            return Err(schema_error("expected a JSON object"));
        };
        match obj.get("version") {
            None => return Err(schema_error("missing 'version'")),
            Some(v) if v.as_u64() == Some(u64::from(SCHEMA_VERSION)) => {}
            Some(v) => {
                return Err(schema_error(format!(
                    "unsupported schema version {v} (this library reads version {SCHEMA_VERSION})"
                )))
            }
        }
        let raw: RawSchema = serde_json::from_value(value)
            .map_err(|e| schema_error(format!("malformed schema: {e}")).with_source(e))?;
        Self::from_raw(raw)
    }

    fn from_raw(raw: RawSchema) -> Result<Schema> {
        if raw.name.trim().is_empty() {
            return Err(schema_error("'name' must not be empty"));
        }
        let text_format = TextFormat::from_name(&raw.text_format).ok_or_else(|| {
            let known: Vec<&str> = TextFormat::ALL.iter().map(|f| f.name()).collect();
            schema_error(format!(
                "unknown text_format '{}' (known: {})",
                raw.text_format,
                known.join(", ")
            ))
        })?;
        if raw.fields.is_empty() {
            return Err(schema_error("'fields' must not be empty"));
        }
        let mut fields: Vec<Field> = Vec::with_capacity(raw.fields.len());
        let (mut offset, mut token_offset) = (0, 0);
        for (i, f) in raw.fields.into_iter().enumerate() {
            if f.name.is_empty() {
                return Err(schema_error(format!("field #{i} has an empty name")));
            }
            if fields.iter().any(|g| g.name == f.name) {
                return Err(schema_error(format!(
                    "field '{}' (#{i}) is defined more than once",
                    f.name
                )));
            }
            let build = registry::lookup(&f.kind).ok_or_else(|| {
                schema_error(format!(
                    "field '{}' (#{i}) has unknown kind '{}' (known kinds: {})",
                    f.name,
                    f.kind,
                    registry::known_kinds()
                ))
            })?;
            let kind = build(f.params)
                .map_err(|reason| schema_error(format!("field '{}' (#{i}): {reason}", f.name)))?;
            let field = Field {
                name: f.name,
                offset,
                token_offset,
                kind,
            };
            offset += field.width();
            token_offset += field.token_count();
            fields.push(field);
        }
        Ok(Schema {
            name: raw.name,
            text_format,
            fields,
            encoded_width: offset,
            token_count: token_offset,
        })
    }

    /// The schema as JSON (compact). `Schema::from_json(&s.to_json())` equals `s`.
    pub fn to_json(&self) -> String {
        let fields: Vec<Value> = self
            .fields
            .iter()
            .map(|f| {
                let mut obj = Map::new();
                obj.insert("name".into(), Value::from(f.name.as_str()));
                obj.insert("kind".into(), Value::from(f.kind.name()));
                obj.extend(f.kind.codec().params());
                Value::Object(obj)
            })
            .collect();
        let mut obj = Map::new();
        obj.insert("name".into(), Value::from(self.name.as_str()));
        obj.insert("version".into(), Value::from(SCHEMA_VERSION));
        obj.insert("text_format".into(), Value::from(self.text_format.name()));
        obj.insert("fields".into(), Value::Array(fields));
        Value::Object(obj).to_string()
    }

    /// The schema name, e.g. `waco-superschedule-spmm`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The text format of schedule lines.
    pub fn text_format(&self) -> TextFormat {
        self.text_format
    }

    /// The fields, in text (and encoding) order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The field called `name`, if any.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Columns of one encoded row: the embedder's input width `D`.
    pub fn encoded_width(&self) -> usize {
        self.encoded_width
    }

    /// Tokens of one schedule line, without the `= <ms>` suffix.
    pub fn token_count(&self) -> usize {
        self.token_count
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    const SMALL: &str = r#"{
      "name": "waco-superschedule-spmm",
      "version": 1,
      "text_format": "waco",
      "fields": [
        {"name": "isplit", "kind": "choice", "values": [1, 2, 4, 8]},
        {"name": "order", "kind": "permutation", "symbols": ["i1", "i0", "k1", "k0", "j1", "j0"]},
        {"name": "i1f", "kind": "choice", "values": [0, 1]},
        {"name": "paridx", "kind": "choice", "values": ["i1", "i0"]}
      ]
    }"#;

    fn reason(json: &str) -> String {
        let err = Schema::from_json(json).unwrap_err();
        match err.kind() {
            ErrorKind::Bundle { key, reason } => {
                assert_eq!(key, "dashrank.schedule_schema");
                reason.clone()
            }
            other => panic!("unexpected kind {other:?}"),
        }
    }

    fn with_fields(fields: &str) -> String {
        format!(r#"{{"name": "s", "version": 1, "text_format": "waco", "fields": [{fields}]}}"#)
    }

    #[test]
    fn layout_of_the_spec_example() {
        let s = Schema::from_json(SMALL).unwrap();
        assert_eq!(s.name(), "waco-superschedule-spmm");
        assert_eq!(s.text_format(), TextFormat::Waco);
        assert_eq!(s.token_count(), 1 + 6 + 1 + 1);
        assert_eq!(s.encoded_width(), 1 + 36 + 1 + 1);
        let offsets: Vec<_> = s.fields().iter().map(|f| f.offset()).collect();
        assert_eq!(offsets, [0, 1, 37, 38]);
        let tokens: Vec<_> = s.fields().iter().map(|f| f.token_offset()).collect();
        assert_eq!(tokens, [0, 1, 7, 8]);
        assert_eq!(s.field("order").map(|f| f.width()), Some(36));
        assert_eq!(
            s.field("order").map(|f| f.kind().name()),
            Some("permutation")
        );
        assert!(s.field("nope").is_none());
    }

    #[test]
    fn json_round_trip() {
        let s = Schema::from_json(SMALL).unwrap();
        let again = Schema::from_json(&s.to_json()).unwrap();
        assert_eq!(s, again);
    }

    #[test]
    fn integer_fields_layout_and_round_trip() {
        let s = Schema::from_json(&with_fields(
            r#"{"name": "i_split", "kind": "integer", "min": 1, "max": 1048576, "encode": "log2"},
               {"name": "order", "kind": "permutation", "symbols": ["a", "b"]},
               {"name": "bias", "kind": "integer", "min": -8, "max": 8, "encode": "linear"}"#,
        ))
        .unwrap();
        assert_eq!(s.token_count(), 4);
        assert_eq!(s.encoded_width(), 1 + 4 + 1);
        let offsets: Vec<_> = s.fields().iter().map(|f| f.offset()).collect();
        assert_eq!(offsets, [0, 1, 5]);
        assert_eq!(s.field("bias").map(|f| f.kind().name()), Some("integer"));
        let again = Schema::from_json(&s.to_json()).unwrap();
        assert_eq!(s, again);
        let json: Value = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(
            json["fields"][0],
            serde_json::json!({"name": "i_split", "kind": "integer", "min": 1,
                               "max": 1048576, "encode": "log2"})
        );
    }

    #[test]
    fn schema_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Schema>();
    }

    #[test]
    fn rejects_bad_json_and_top_level() {
        assert!(reason("{").starts_with("not valid JSON"));
        assert_eq!(reason("[]"), "expected a JSON object");
        assert_eq!(reason(r#"{"name": "s"}"#), "missing 'version'");
        let r = reason(r#"{"name": "s", "version": 2, "text_format": "waco", "fields": []}"#);
        assert_eq!(
            r,
            "unsupported schema version 2 (this library reads version 1)"
        );
        let r = reason(r#"{"name": "", "version": 1, "text_format": "waco", "fields": []}"#);
        assert_eq!(r, "'name' must not be empty");
        let r = reason(r#"{"name": "s", "version": 1, "text_format": "tvm", "fields": []}"#);
        assert_eq!(r, "unknown text_format 'tvm' (known: waco)");
        let r = reason(r#"{"name": "s", "version": 1, "text_format": "waco", "fields": []}"#);
        assert_eq!(r, "'fields' must not be empty");
        let r = reason(r#"{"name": "s", "version": 1, "text_format": "waco"}"#);
        assert!(r.contains("missing field `fields`"), "{r}");
        let r = reason(
            r#"{"name": "s", "version": 1, "text_format": "waco", "fields": [], "extra": 1}"#,
        );
        assert!(r.contains("unknown field `extra`"), "{r}");
    }

    #[test]
    fn rejects_bad_fields() {
        let r = reason(&with_fields(
            r#"{"name": "", "kind": "choice", "values": [1]}"#,
        ));
        assert_eq!(r, "field #0 has an empty name");
        let r = reason(&with_fields(
            r#"{"name": "a", "kind": "choice", "values": [1]},
               {"name": "a", "kind": "choice", "values": [2]}"#,
        ));
        assert_eq!(r, "field 'a' (#1) is defined more than once");
        let r = reason(&with_fields(
            r#"{"name": "a", "kind": "range", "min": 0, "max": 4}"#,
        ));
        assert_eq!(
            r,
            "field 'a' (#0) has unknown kind 'range' (known kinds: choice, permutation, integer)"
        );
        let r = reason(&with_fields(
            r#"{"name": "a", "kind": "choice", "values": []}"#,
        ));
        assert_eq!(r, "field 'a' (#0): 'values' must not be empty");
        let r = reason(&with_fields(
            r#"{"name": "o", "kind": "permutation", "symbols": ["i", "i"]}"#,
        ));
        assert_eq!(
            r,
            "field 'o' (#0): symbol 'i' appears more than once in 'symbols'"
        );
        let r = reason(&with_fields(
            r#"{"name": "n", "kind": "integer", "min": 0, "max": 4, "encode": "log2"}"#,
        ));
        assert_eq!(
            r,
            "field 'n' (#0): 'min' (0) must be at least 1 with encode 'log2'"
        );
        let r = reason(&with_fields(
            r#"{"name": "n", "kind": "integer", "min": 1, "max": 4, "encode": "log2", "values": [1]}"#,
        ));
        assert!(
            r.starts_with("field 'n' (#0): bad 'integer' parameters"),
            "{r}"
        );
        assert!(r.contains("unknown field `values`"), "{r}");
        let r = reason(&with_fields(r#"{"name": "a", "values": [1]}"#));
        assert!(r.contains("missing field `kind`"), "{r}");
    }
}

//! The field-kind registry: schema kind names (`choice`, `permutation`, `integer`) mapped to builders
//! that validate a field's JSON parameters into a [`FieldKind`]. An unknown name is a schema
//! error naming the field (see `Schema::from_json`).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::kind::{
    ChoiceKind, ChoiceValues, FieldKind, IntegerEncoding, IntegerKind, PermutationKind,
};

/// Builds a kind from the field's JSON parameters (the object minus `name` and `kind`).
type KindBuilder = fn(Map<String, Value>) -> Result<FieldKind, String>;

/// Field kinds by their schema name. Order is the order listed in error messages.
const REGISTRY: &[(&str, KindBuilder)] = &[
    ("choice", build_choice),
    ("permutation", build_permutation),
    ("integer", build_integer),
];

/// Looks up the builder of a kind by its schema name.
pub(crate) fn lookup(kind: &str) -> Option<KindBuilder> {
    REGISTRY
        .iter()
        .find(|(name, _)| *name == kind)
        .map(|&(_, build)| build)
}

/// The registered kind names, for error messages: `choice, permutation, integer`.
pub(crate) fn known_kinds() -> String {
    REGISTRY
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `s` can be written as one token of a WACO line.
fn is_token(s: &str) -> bool {
    !s.is_empty() && !s.starts_with('#') && !s.chars().any(|c| c.is_whitespace() || c == '=')
}

fn build_choice(params: Map<String, Value>) -> Result<FieldKind, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Params {
        values: Vec<Value>,
    }
    let Params { values } = serde_json::from_value(Value::Object(params))
        .map_err(|e| format!("bad 'choice' parameters: {e}"))?;
    if values.is_empty() {
        return Err("'values' must not be empty".into());
    }
    let values = if values[0].is_string() {
        let mut out = Vec::with_capacity(values.len());
        for (i, v) in values.iter().enumerate() {
            match v.as_str() {
                Some(s) if is_token(s) => out.push(s.to_owned()),
                Some(s) => {
                    return Err(format!(
                        "value {s:?} cannot be a token (empty, whitespace, '=' or leading '#')"
                    ))
                }
                None => return Err(mixed(i, v)),
            }
        }
        ChoiceValues::Strings(out)
    } else {
        let mut out = Vec::with_capacity(values.len());
        for (i, v) in values.iter().enumerate() {
            match v.as_i64() {
                Some(x) => out.push(x),
                None => return Err(mixed(i, v)),
            }
        }
        ChoiceValues::Ints(out)
    };
    let duplicate = match &values {
        ChoiceValues::Ints(v) => first_duplicate(v).map(|x| x.to_string()),
        ChoiceValues::Strings(v) => first_duplicate(v).cloned(),
    };
    if let Some(dup) = duplicate {
        return Err(format!("value {dup} appears more than once in 'values'"));
    }
    Ok(FieldKind::Choice(ChoiceKind::new(values)))
}

fn mixed(i: usize, v: &Value) -> String {
    format!("'values' must be all integers or all strings (element {i} is {v})")
}

fn build_permutation(params: Map<String, Value>) -> Result<FieldKind, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Params {
        symbols: Vec<String>,
    }
    let Params { symbols } = serde_json::from_value(Value::Object(params))
        .map_err(|e| format!("bad 'permutation' parameters: {e}"))?;
    if symbols.is_empty() {
        return Err("'symbols' must not be empty".into());
    }
    if let Some(bad) = symbols.iter().find(|s| !is_token(s)) {
        return Err(format!(
            "symbol {bad:?} cannot be a token (empty, whitespace, '=' or leading '#')"
        ));
    }
    if let Some(dup) = first_duplicate(&symbols) {
        return Err(format!(
            "symbol '{dup}' appears more than once in 'symbols'"
        ));
    }
    Ok(FieldKind::Permutation(PermutationKind::new(symbols)))
}

fn build_integer(params: Map<String, Value>) -> Result<FieldKind, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Params {
        min: i64,
        max: i64,
        encode: String,
    }
    let Params { min, max, encode } = serde_json::from_value(Value::Object(params))
        .map_err(|e| format!("bad 'integer' parameters: {e}"))?;
    let encode = IntegerEncoding::from_name(&encode).ok_or_else(|| {
        let known: Vec<&str> = IntegerEncoding::ALL.iter().map(|e| e.name()).collect();
        format!("unknown encode '{encode}' (known: {})", known.join(", "))
    })?;
    if min > max {
        return Err(format!("'min' ({min}) is greater than 'max' ({max})"));
    }
    if encode == IntegerEncoding::Log2 && min < 1 {
        return Err(format!(
            "'min' ({min}) must be at least 1 with encode 'log2'"
        ));
    }
    Ok(FieldKind::Integer(IntegerKind::new(min, max, encode)))
}

fn first_duplicate<T: PartialEq>(items: &[T]) -> Option<&T> {
    items
        .iter()
        .enumerate()
        .find(|&(i, x)| items[..i].contains(x))
        .map(|(_, x)| x)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn registry_knows_all_kinds() {
        assert!(lookup("choice").is_some());
        assert!(lookup("permutation").is_some());
        assert!(lookup("integer").is_some());
        assert!(lookup("range").is_none());
        assert_eq!(known_kinds(), "choice, permutation, integer");
    }

    #[test]
    fn choice_rejects_bad_vocabularies() {
        let e = build_choice(params(json!({"values": []}))).unwrap_err();
        assert!(e.contains("must not be empty"), "{e}");
        let e = build_choice(params(json!({"values": [1, "a"]}))).unwrap_err();
        assert!(e.contains("all integers or all strings"), "{e}");
        let e = build_choice(params(json!({"values": ["a", 1]}))).unwrap_err();
        assert!(e.contains("element 1"), "{e}");
        let e = build_choice(params(json!({"values": [1.5]}))).unwrap_err();
        assert!(e.contains("all integers or all strings"), "{e}");
        let e = build_choice(params(json!({"values": [1, 2, 1]}))).unwrap_err();
        assert!(e.contains("value 1 appears more than once"), "{e}");
        let e = build_choice(params(json!({"values": ["a", "a"]}))).unwrap_err();
        assert!(e.contains("value a appears more than once"), "{e}");
        let e = build_choice(params(json!({"values": ["a b"]}))).unwrap_err();
        assert!(e.contains("cannot be a token"), "{e}");
        let e = build_choice(params(json!({"valeus": [1]}))).unwrap_err();
        assert!(e.contains("unknown field `valeus`"), "{e}");
        let e = build_choice(params(json!({}))).unwrap_err();
        assert!(e.contains("missing field `values`"), "{e}");
    }

    #[test]
    fn permutation_rejects_bad_symbols() {
        let e = build_permutation(params(json!({"symbols": []}))).unwrap_err();
        assert!(e.contains("must not be empty"), "{e}");
        let e = build_permutation(params(json!({"symbols": ["i", "j", "i"]}))).unwrap_err();
        assert!(e.contains("symbol 'i' appears more than once"), "{e}");
        let e = build_permutation(params(json!({"symbols": ["i", ""]}))).unwrap_err();
        assert!(e.contains("cannot be a token"), "{e}");
        let e = build_permutation(params(json!({"symbols": ["i", "a=b"]}))).unwrap_err();
        assert!(e.contains("cannot be a token"), "{e}");
    }

    #[test]
    fn integer_validates_its_parameters() {
        let k = build_integer(params(json!({"min": 1, "max": 1048576, "encode": "log2"})));
        match k.unwrap() {
            FieldKind::Integer(k) => {
                assert_eq!(
                    (k.min(), k.max(), k.encoding()),
                    (1, 1048576, IntegerEncoding::Log2)
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(build_integer(params(json!({"min": 0, "max": 0, "encode": "linear"}))).is_ok());
        assert!(build_integer(params(json!({"min": -5, "max": 5, "encode": "linear"}))).is_ok());
        let e = build_integer(params(json!({"min": 8, "max": 4, "encode": "linear"}))).unwrap_err();
        assert_eq!(e, "'min' (8) is greater than 'max' (4)");
        let e = build_integer(params(json!({"min": 0, "max": 4, "encode": "log2"}))).unwrap_err();
        assert_eq!(e, "'min' (0) must be at least 1 with encode 'log2'");
        let e = build_integer(params(json!({"min": 1, "max": 4, "encode": "log10"}))).unwrap_err();
        assert_eq!(e, "unknown encode 'log10' (known: log2, linear)");
        let e = build_integer(params(json!({"min": 1, "max": 4}))).unwrap_err();
        assert!(e.contains("missing field `encode`"), "{e}");
        let e = build_integer(params(json!({"min": 1, "encode": "log2"}))).unwrap_err();
        assert!(e.contains("missing field `max`"), "{e}");
        let e = build_integer(params(
            json!({"min": 1, "max": 4, "encode": "log2", "step": 2}),
        ))
        .unwrap_err();
        assert!(e.contains("unknown field `step`"), "{e}");
        let e = build_integer(params(json!({"min": 1.5, "max": 4, "encode": "log2"}))).unwrap_err();
        assert!(e.starts_with("bad 'integer' parameters"), "{e}");
        let e = build_integer(params(json!({"min": "1", "max": 4, "encode": "log2"}))).unwrap_err();
        assert!(e.starts_with("bad 'integer' parameters"), "{e}");
    }
}

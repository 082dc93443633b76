//! Field kinds: how one schedule field is written as text tokens and encoded as `f32` columns.
//!
//! The set of kinds is closed ([`FieldKind`]) but built to grow. A kind is one parameter struct
//! (e.g. [`ChoiceKind`]) implementing the private `KindCodec` trait (token count, encoded width,
//! parse, check, encode, print, JSON parameters). To add a kind (as `integer` was added for
//! COGNATE's matrix-dependent split sizes):
//!
//! 1. write its parameter struct and `impl KindCodec` for it;
//! 2. add a [`FieldKind`] variant and its arm in `FieldKind::codec`;
//! 3. add a [`FieldValue`] variant if no existing one fits;
//! 4. register its JSON name and builder in `registry.rs`;
//! 5. re-export the parameter struct from `schedule/mod.rs` and document the kind in
//!    `docs/bundle-format.md` §5.1.
//!
//! Nothing else in `schedule/` matches on kinds.

use serde_json::{Map, Value};
use std::fmt::Write as _;

/// The value of one field inside a [`Schedule`](super::Schedule).
///
/// `Eq + Hash` so schedules can be deduplicated; new variants must keep that (store
/// integers, or floats by their bit pattern).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FieldValue {
    /// Index into the `values` of a [`ChoiceKind`] field.
    Choice(usize),
    /// Loop order of a [`PermutationKind`] field: element `pos` is the index (into `symbols`)
    /// of the symbol at loop position `pos`, outermost first.
    Permutation(Vec<usize>),
    /// The value of an [`IntegerKind`] field.
    Integer(i64),
}

/// The kind of a schedule field, with its parameters (vocabulary, symbols, …).
///
/// Only `PartialEq`: future kinds may carry floating-point parameters.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FieldKind {
    /// One token from a fixed vocabulary; encoded as the value's index (1 column).
    Choice(ChoiceKind),
    /// `n` tokens using each of `n` symbols once; encoded as the flattened `n × n` one-hot
    /// matrix `P[symbol, position] = 1` (row-major, `n·n` columns).
    Permutation(PermutationKind),
    /// One decimal integer in `[min, max]`; encoded as `log2(x)` or `x` (1 column).
    Integer(IntegerKind),
}

impl FieldKind {
    /// The kind's name as written in the schema JSON (`"choice"`, `"permutation"`,
    /// `"integer"`).
    pub fn name(&self) -> &'static str {
        self.codec().name()
    }

    /// Number of whitespace-separated text tokens the field takes.
    pub fn token_count(&self) -> usize {
        self.codec().token_count()
    }

    /// Number of `f32` columns the field takes in the encoded row.
    pub fn width(&self) -> usize {
        self.codec().width()
    }

    /// The one place that dispatches on the kind.
    pub(crate) fn codec(&self) -> &dyn KindCodec {
        match self {
            FieldKind::Choice(k) => k,
            FieldKind::Permutation(k) => k,
            FieldKind::Integer(k) => k,
        }
    }
}

/// A key no token has (its length byte is 0xFF).
const NO_KEY: u64 = u64::MAX;

/// A token of 1 to 7 bytes packed into a `u64` (bytes little-endian, length in the top byte),
/// so that equal keys mean equal text: the schedule parser's hot-path comparison.
fn short_key(token: &str) -> Option<u64> {
    let b = token.as_bytes();
    if b.is_empty() || b.len() > 7 {
        return None;
    }
    let mut k = (b.len() as u64) << 56;
    for (i, &c) in b.iter().enumerate() {
        k |= u64::from(c) << (8 * i);
    }
    Some(k)
}

/// A field's vocabulary: all integers or all strings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChoiceValues {
    /// Integer values; a token matches when it parses to the same integer.
    Ints(Vec<i64>),
    /// String values; a token matches when it is equal.
    Strings(Vec<String>),
}

impl ChoiceValues {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            ChoiceValues::Ints(v) => v.len(),
            ChoiceValues::Strings(v) => v.len(),
        }
    }

    /// Whether there are no values (never true for a validated schema).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value at `index` as it is printed in a schedule line.
    pub fn token(&self, index: usize) -> Option<String> {
        match self {
            ChoiceValues::Ints(v) => v.get(index).map(|x| x.to_string()),
            ChoiceValues::Strings(v) => v.get(index).cloned(),
        }
    }

    fn position(&self, token: &str) -> Option<usize> {
        match self {
            ChoiceValues::Ints(v) => {
                let x: i64 = token.parse().ok()?;
                v.iter().position(|&y| y == x)
            }
            ChoiceValues::Strings(v) => v.iter().position(|y| y == token),
        }
    }

    fn write_token(&self, index: usize, out: &mut String) {
        match self {
            ChoiceValues::Ints(v) => {
                if let Some(x) = v.get(index) {
                    let _ = write!(out, "{x}");
                }
            }
            ChoiceValues::Strings(v) => {
                if let Some(s) = v.get(index) {
                    out.push_str(s);
                }
            }
        }
    }
}

/// Parameters of a `choice` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChoiceKind {
    values: ChoiceValues,
    /// [`short_key`] of each value's printed token (`NO_KEY` when longer than 7 bytes).
    keys: Vec<u64>,
}

impl ChoiceKind {
    /// A choice over `values` (checked by the registry's builder).
    pub(crate) fn new(values: ChoiceValues) -> Self {
        let keys = (0..values.len())
            .map(|i| {
                values
                    .token(i)
                    .as_deref()
                    .and_then(short_key)
                    .unwrap_or(NO_KEY)
            })
            .collect();
        Self { values, keys }
    }

    /// Index of the value `token` denotes: its printed form by one integer compare per
    /// value, any other spelling (`08`, `+8`, long tokens) through the full parse.
    fn position(&self, token: &str) -> Option<usize> {
        short_key(token)
            .and_then(|k| self.keys.iter().position(|&x| x == k))
            .or_else(|| self.values.position(token))
    }

    /// The vocabulary, in encoding order.
    pub fn values(&self) -> &ChoiceValues {
        &self.values
    }

    fn vocabulary(&self) -> String {
        match &self.values {
            ChoiceValues::Ints(v) => list(v.iter()),
            ChoiceValues::Strings(v) => list(v.iter()),
        }
    }
}

/// Parameters of a `permutation` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermutationKind {
    symbols: Vec<String>,
    /// [`short_key`] of each symbol (`NO_KEY` when longer than 7 bytes).
    keys: Vec<u64>,
}

impl PermutationKind {
    /// A permutation of `symbols` (checked by the registry's builder).
    pub(crate) fn new(symbols: Vec<String>) -> Self {
        let keys = symbols
            .iter()
            .map(|s| short_key(s).unwrap_or(NO_KEY))
            .collect();
        Self { symbols, keys }
    }

    /// Index of the symbol `token` is (exact text).
    fn symbol_index(&self, token: &str) -> Option<usize> {
        match short_key(token) {
            Some(k) => self.keys.iter().position(|&x| x == k),
            None => self.symbols.iter().position(|s| s == token),
        }
    }

    /// The symbols, in encoding order (row order of the one-hot matrix).
    pub fn symbols(&self) -> &[String] {
        &self.symbols
    }
}

/// How an `integer` field is written in the encoded row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IntegerEncoding {
    /// `log2(x)` (the field's `min` is at least 1).
    Log2,
    /// `x` itself.
    Linear,
}

impl IntegerEncoding {
    /// Every encoding, in the order listed in error messages.
    pub(crate) const ALL: &'static [IntegerEncoding] =
        &[IntegerEncoding::Log2, IntegerEncoding::Linear];

    /// The name used in the schema JSON (`"log2"`, `"linear"`).
    pub fn name(self) -> &'static str {
        match self {
            IntegerEncoding::Log2 => "log2",
            IntegerEncoding::Linear => "linear",
        }
    }

    /// The encoding called `name`, if any.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|e| e.name() == name)
    }

    /// The encoded column of `x`.
    pub fn apply(self, x: i64) -> f32 {
        match self {
            IntegerEncoding::Log2 => (x as f64).log2() as f32,
            IntegerEncoding::Linear => x as f32,
        }
    }
}

/// Parameters of an `integer` field: a decimal integer in `[min, max]` (inclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegerKind {
    min: i64,
    max: i64,
    encode: IntegerEncoding,
}

impl IntegerKind {
    /// An integer in `[min, max]` (checked by the registry's builder: `min <= max`, and
    /// `min >= 1` for [`IntegerEncoding::Log2`]).
    pub(crate) fn new(min: i64, max: i64, encode: IntegerEncoding) -> Self {
        Self { min, max, encode }
    }

    /// Smallest accepted value.
    pub fn min(&self) -> i64 {
        self.min
    }

    /// Largest accepted value.
    pub fn max(&self) -> i64 {
        self.max
    }

    /// How the value is encoded (the JSON `encode` parameter).
    pub fn encoding(&self) -> IntegerEncoding {
        self.encode
    }

    fn range(&self) -> String {
        format!("[{}, {}]", self.min, self.max)
    }

    fn check_range(&self, x: i64, value: String) -> Result<(), Rejection> {
        if (self.min..=self.max).contains(&x) {
            Ok(())
        } else {
            Err(Rejection {
                value,
                reason: format!("out of range {}", self.range()),
            })
        }
    }
}

/// Why a field's tokens or value were rejected; the caller adds the field name and index.
#[derive(Debug)]
pub(crate) struct Rejection {
    pub(crate) value: String,
    pub(crate) reason: String,
}

/// What every field kind must provide. Implemented by each kind's parameter struct.
pub(crate) trait KindCodec {
    /// Name in the schema JSON.
    fn name(&self) -> &'static str;
    /// Text tokens per field.
    fn token_count(&self) -> usize;
    /// Encoded columns per field.
    fn width(&self) -> usize;
    /// Parses exactly `token_count()` tokens.
    fn parse(&self, tokens: &[&str]) -> Result<FieldValue, Rejection>;
    /// Checks that `value` is a valid value of this field.
    fn check(&self, value: &FieldValue) -> Result<(), Rejection>;
    /// Writes `width()` columns; `value` has passed `check`.
    fn encode(&self, value: &FieldValue, out: &mut [f32]);
    /// `parse` then `encode`, writing `width()` columns (the batch encoder's path: kinds whose
    /// values allocate override it).
    fn parse_encode(&self, tokens: &[&str], out: &mut [f32]) -> Result<(), Rejection> {
        let value = self.parse(tokens)?;
        self.encode(&value, out);
        Ok(())
    }
    /// Appends the field's text tokens, space-separated; `value` has passed `check`.
    fn write(&self, value: &FieldValue, out: &mut String);
    /// The kind's parameters as schema JSON (everything except `name` and `kind`).
    fn params(&self) -> Map<String, Value>;
}

impl KindCodec for ChoiceKind {
    fn name(&self) -> &'static str {
        "choice"
    }

    fn token_count(&self) -> usize {
        1
    }

    fn width(&self) -> usize {
        1
    }

    fn parse(&self, tokens: &[&str]) -> Result<FieldValue, Rejection> {
        let token = tokens.first().copied().unwrap_or_default();
        self.position(token)
            .map(FieldValue::Choice)
            .ok_or_else(|| Rejection {
                value: token.to_owned(),
                reason: format!("not in vocabulary {}", self.vocabulary()),
            })
    }

    fn check(&self, value: &FieldValue) -> Result<(), Rejection> {
        match value {
            FieldValue::Choice(i) if *i < self.values.len() => Ok(()),
            FieldValue::Choice(i) => Err(Rejection {
                value: format!("index {i}"),
                reason: format!(
                    "choice index out of range (vocabulary has {} values)",
                    self.values.len()
                ),
            }),
            other => Err(wrong_value_kind(other, self.name())),
        }
    }

    fn encode(&self, value: &FieldValue, out: &mut [f32]) {
        if let (FieldValue::Choice(i), Some(slot)) = (value, out.first_mut()) {
            *slot = *i as f32;
        }
    }

    fn write(&self, value: &FieldValue, out: &mut String) {
        if let FieldValue::Choice(i) = value {
            self.values.write_token(*i, out);
        }
    }

    fn params(&self) -> Map<String, Value> {
        let values = match &self.values {
            ChoiceValues::Ints(v) => v.iter().map(|&x| Value::from(x)).collect(),
            ChoiceValues::Strings(v) => v.iter().map(|s| Value::from(s.as_str())).collect(),
        };
        let mut map = Map::new();
        map.insert("values".into(), Value::Array(values));
        map
    }
}

impl KindCodec for PermutationKind {
    fn name(&self) -> &'static str {
        "permutation"
    }

    fn token_count(&self) -> usize {
        self.symbols.len()
    }

    fn width(&self) -> usize {
        self.symbols.len() * self.symbols.len()
    }

    fn parse(&self, tokens: &[&str]) -> Result<FieldValue, Rejection> {
        let n = self.symbols.len();
        let mut order = Vec::with_capacity(n);
        for (pos, token) in tokens.iter().enumerate() {
            match self.symbol_index(token) {
                Some(sym) => order.push(sym),
                None => {
                    return Err(Rejection {
                        value: tokens.join(" "),
                        reason: format!(
                            "unknown symbol '{token}' at position {}; expected a permutation of {}",
                            pos + 1,
                            list(self.symbols.iter())
                        ),
                    })
                }
            }
        }
        self.check_order(&order).map_err(|reason| Rejection {
            value: tokens.join(" "),
            reason,
        })?;
        Ok(FieldValue::Permutation(order))
    }

    fn check(&self, value: &FieldValue) -> Result<(), Rejection> {
        match value {
            FieldValue::Permutation(order) => self.check_order(order).map_err(|reason| Rejection {
                value: format!("{order:?}"),
                reason,
            }),
            other => Err(wrong_value_kind(other, self.name())),
        }
    }

    /// Without building the order vector when the permutation is short (the common case).
    fn parse_encode(&self, tokens: &[&str], out: &mut [f32]) -> Result<(), Rejection> {
        let n = self.symbols.len();
        if n > 64 || tokens.len() != n {
            let value = self.parse(tokens)?;
            self.encode(&value, out);
            return Ok(());
        }
        let Some(out) = out.get_mut(..n * n) else {
            return Ok(());
        };
        out.fill(0.0);
        let mut seen = 0u64;
        for (pos, token) in tokens.iter().enumerate() {
            match self.symbol_index(token) {
                Some(sym) if seen & (1 << sym) == 0 => {
                    seen |= 1 << sym;
                    out[sym * n + pos] = 1.0;
                }
                // Unknown or repeated: the full parser builds the exact message.
                _ => {
                    self.parse(tokens)?;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn encode(&self, value: &FieldValue, out: &mut [f32]) {
        let n = self.symbols.len();
        let Some(out) = out.get_mut(..n * n) else {
            return;
        };
        out.fill(0.0);
        if let FieldValue::Permutation(order) = value {
            for (pos, &sym) in order.iter().enumerate() {
                if let Some(slot) = out.get_mut(sym * n + pos) {
                    *slot = 1.0;
                }
            }
        }
    }

    fn write(&self, value: &FieldValue, out: &mut String) {
        if let FieldValue::Permutation(order) = value {
            for (pos, &sym) in order.iter().enumerate() {
                if pos > 0 {
                    out.push(' ');
                }
                if let Some(s) = self.symbols.get(sym) {
                    out.push_str(s);
                }
            }
        }
    }

    fn params(&self) -> Map<String, Value> {
        let symbols = self
            .symbols
            .iter()
            .map(|s| Value::from(s.as_str()))
            .collect();
        let mut map = Map::new();
        map.insert("symbols".into(), Value::Array(symbols));
        map
    }
}

impl KindCodec for IntegerKind {
    fn name(&self) -> &'static str {
        "integer"
    }

    fn token_count(&self) -> usize {
        1
    }

    fn width(&self) -> usize {
        1
    }

    fn parse(&self, tokens: &[&str]) -> Result<FieldValue, Rejection> {
        let token = tokens.first().copied().unwrap_or_default();
        // Decimal digits with an optional sign: no `1e3`, `0x10`, `1.0` or `_`.
        let digits = token.strip_prefix(['+', '-']).unwrap_or(token);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Rejection {
                value: token.to_owned(),
                reason: format!("not a decimal integer in {}", self.range()),
            });
        }
        // All digits: a parse failure is an overflow of i64, so out of range too.
        let x = token.parse::<i64>().map_err(|_| Rejection {
            value: token.to_owned(),
            reason: format!("out of range {}", self.range()),
        })?;
        self.check_range(x, token.to_owned())?;
        Ok(FieldValue::Integer(x))
    }

    fn check(&self, value: &FieldValue) -> Result<(), Rejection> {
        match value {
            FieldValue::Integer(x) => self.check_range(*x, x.to_string()),
            other => Err(wrong_value_kind(other, self.name())),
        }
    }

    fn encode(&self, value: &FieldValue, out: &mut [f32]) {
        if let (FieldValue::Integer(x), Some(slot)) = (value, out.first_mut()) {
            *slot = self.encode.apply(*x);
        }
    }

    fn write(&self, value: &FieldValue, out: &mut String) {
        if let FieldValue::Integer(x) = value {
            let _ = write!(out, "{x}");
        }
    }

    fn params(&self) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("min".into(), Value::from(self.min));
        map.insert("max".into(), Value::from(self.max));
        map.insert("encode".into(), Value::from(self.encode.name()));
        map
    }
}

impl PermutationKind {
    /// Checks that `order` uses each symbol index exactly once; the reason names the culprit.
    fn check_order(&self, order: &[usize]) -> Result<(), String> {
        let n = self.symbols.len();
        if order.len() != n {
            return Err(format!("expected {n} symbols, found {}", order.len()));
        }
        let mut first_seen: Vec<Option<usize>> = vec![None; n];
        for (pos, &sym) in order.iter().enumerate() {
            let Some(seen) = first_seen.get_mut(sym) else {
                return Err(format!(
                    "symbol index {sym} at position {} out of range ({n} symbols)",
                    pos + 1
                ));
            };
            if let Some(prev) = *seen {
                let missing: Vec<&String> = (0..n)
                    .filter(|s| !order.contains(s))
                    .filter_map(|s| self.symbols.get(s))
                    .collect();
                return Err(format!(
                    "symbol '{}' repeated at positions {} and {}; missing {}",
                    self.symbols.get(sym).map_or("?", String::as_str),
                    prev + 1,
                    pos + 1,
                    list(missing.iter())
                ));
            }
            *seen = Some(pos);
        }
        Ok(())
    }
}

fn wrong_value_kind(value: &FieldValue, kind: &str) -> Rejection {
    Rejection {
        value: format!("{value:?}"),
        reason: format!("not a value of a '{kind}' field"),
    }
}

/// Formats a vocabulary as `[a, b, c]`, eliding the middle of very long lists.
fn list<T: std::fmt::Display>(items: impl ExactSizeIterator<Item = T>) -> String {
    const MAX_SHOWN: usize = 32;
    let n = items.len();
    let mut out = String::from("[");
    for (i, item) in items.enumerate() {
        if n > MAX_SHOWN && i == MAX_SHOWN - 1 {
            let _ = write!(out, ", … ({n} values)");
            break;
        }
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{item}");
    }
    out.push(']');
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn perm(symbols: &[&str]) -> PermutationKind {
        PermutationKind::new(symbols.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn choice_ints_match_by_value() {
        let k = ChoiceKind::new(ChoiceValues::Ints(vec![1, 2, 4]));
        assert!(matches!(k.parse(&["4"]), Ok(FieldValue::Choice(2))));
        assert!(matches!(k.parse(&["04"]), Ok(FieldValue::Choice(2))));
        let err = k.parse(&["3"]).unwrap_err();
        assert_eq!(err.value, "3");
        assert_eq!(err.reason, "not in vocabulary [1, 2, 4]");
        assert!(k.parse(&["i1"]).is_err());
        let mut s = String::new();
        k.write(&FieldValue::Choice(1), &mut s);
        assert_eq!(s, "2");
    }

    #[test]
    fn permutation_names_unknown_repeated_and_missing() {
        let k = perm(&["i1", "i0", "k1", "k0"]);
        let e = k.parse(&["i1", "x", "k1", "k0"]).unwrap_err();
        assert_eq!(e.value, "i1 x k1 k0");
        assert_eq!(
            e.reason,
            "unknown symbol 'x' at position 2; expected a permutation of [i1, i0, k1, k0]"
        );
        let e = k.parse(&["i1", "k1", "i1", "k0"]).unwrap_err();
        assert_eq!(
            e.reason,
            "symbol 'i1' repeated at positions 1 and 3; missing [i0]"
        );
        let e = k.parse(&["k0", "k0", "k0", "k0"]).unwrap_err();
        assert_eq!(
            e.reason,
            "symbol 'k0' repeated at positions 1 and 2; missing [i1, i0, k1]"
        );
    }

    #[test]
    fn permutation_encodes_symbol_by_position() {
        let k = perm(&["a", "b", "c"]);
        let v = k.parse(&["c", "a", "b"]).unwrap();
        assert_eq!(v, FieldValue::Permutation(vec![2, 0, 1]));
        let mut out = [9.0f32; 9];
        k.encode(&v, &mut out);
        // P[c=2, 0] = 1, P[a=0, 1] = 1, P[b=1, 2] = 1, row-major.
        assert_eq!(out, [0., 1., 0., 0., 0., 1., 1., 0., 0.]);
        let mut s = String::new();
        k.write(&v, &mut s);
        assert_eq!(s, "c a b");
    }

    /// The packed-key fast path agrees with the full parse on every spelling.
    #[test]
    fn short_keys_match_exact_text_only() {
        assert_ne!(short_key("a"), short_key("a\0"));
        assert_eq!(short_key(""), None);
        assert_eq!(short_key("12345678"), None);
        let c = ChoiceKind::new(ChoiceValues::Ints(vec![1, 8, 12345678, -4]));
        for (token, index) in [
            ("8", Some(1)),
            ("08", Some(1)),
            ("+8", Some(1)),
            ("12345678", Some(2)),
            ("-4", Some(3)),
            ("80", None),
            ("8\0", None),
        ] {
            assert_eq!(c.position(token), index, "{token:?}");
        }
        let s = ChoiceKind::new(ChoiceValues::Strings(vec![
            "i1".into(),
            "longer_than_7".into(),
        ]));
        assert_eq!(s.position("i1"), Some(0));
        assert_eq!(s.position("longer_than_7"), Some(1));
        assert_eq!(s.position("i1 "), None);
        let p = perm(&["i1", "averylongsymbol", "k0"]);
        assert_eq!(p.symbol_index("k0"), Some(2));
        assert_eq!(p.symbol_index("averylongsymbol"), Some(1));
        assert_eq!(p.symbol_index("k"), None);
    }

    #[test]
    fn check_rejects_foreign_values() {
        let k = perm(&["a", "b"]);
        assert!(k.check(&FieldValue::Choice(0)).is_err());
        assert!(k.check(&FieldValue::Permutation(vec![0, 2])).is_err());
        assert!(k.check(&FieldValue::Permutation(vec![0])).is_err());
        assert!(k.check(&FieldValue::Permutation(vec![1, 1])).is_err());
        assert!(k.check(&FieldValue::Permutation(vec![1, 0])).is_ok());
        let c = ChoiceKind::new(ChoiceValues::Ints(vec![1, 2]));
        assert!(c.check(&FieldValue::Choice(2)).is_err());
        assert!(c.check(&FieldValue::Permutation(vec![0])).is_err());
    }

    #[test]
    fn integer_parses_checks_encodes_and_prints() {
        let k = IntegerKind::new(1, 1 << 20, IntegerEncoding::Log2);
        assert_eq!(k.parse(&["1024"]).unwrap(), FieldValue::Integer(1024));
        assert_eq!(k.parse(&["+0016"]).unwrap(), FieldValue::Integer(16));
        assert_eq!(k.parse(&["1"]).unwrap(), FieldValue::Integer(1));
        assert_eq!(k.parse(&["1048576"]).unwrap(), FieldValue::Integer(1 << 20));
        for bad in ["0", "-4", "1048577", "99999999999999999999"] {
            let e = k.parse(&[bad]).unwrap_err();
            assert_eq!(e.value, bad);
            assert_eq!(e.reason, "out of range [1, 1048576]", "{bad}");
        }
        for bad in [
            "1.0",
            "1e3",
            "0x10",
            "",
            "+",
            "ten",
            "1_000",
            "NUM_MATRIX_COLS",
        ] {
            let e = k.parse(&[bad]).unwrap_err();
            assert_eq!(e.value, bad);
            assert_eq!(e.reason, "not a decimal integer in [1, 1048576]", "{bad}");
        }
        let mut out = [9.0f32];
        k.encode(&FieldValue::Integer(1024), &mut out);
        assert_eq!(out, [10.0]);
        k.encode(&FieldValue::Integer(1), &mut out);
        assert_eq!(out, [0.0]);
        k.encode(&FieldValue::Integer(48), &mut out);
        assert!((out[0] - 48f32.log2()).abs() < 1e-6);
        let mut s = String::new();
        k.write(&FieldValue::Integer(16), &mut s);
        assert_eq!(s, "16");
        assert!(k.check(&FieldValue::Integer(0)).is_err());
        assert!(k.check(&FieldValue::Integer(7)).is_ok());
        assert!(k.check(&FieldValue::Choice(0)).is_err());
        assert_eq!(k.width(), 1);
        assert_eq!(k.token_count(), 1);

        let lin = IntegerKind::new(-3, 3, IntegerEncoding::Linear);
        let v = lin.parse(&["-3"]).unwrap();
        lin.encode(&v, &mut out);
        assert_eq!(out, [-3.0]);
        assert_eq!(
            lin.parse(&["4"]).unwrap_err().reason,
            "out of range [-3, 3]"
        );
        let p = lin.params();
        assert_eq!(p.get("min"), Some(&Value::from(-3)));
        assert_eq!(p.get("max"), Some(&Value::from(3)));
        assert_eq!(p.get("encode"), Some(&Value::from("linear")));
    }

    #[test]
    fn long_vocabulary_is_elided() {
        let s = list(0..100);
        assert!(s.starts_with("[0, 1, 2"), "{s}");
        assert!(s.ends_with(", … (100 values)]"), "{s}");
    }
}

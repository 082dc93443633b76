//! Per-field, per-value lookup tables: the first affine layer after the encoded schedule,
//! folded so that preparing a candidate is a sum of table rows.
//!
//! For a form `bias + M·x + Σ lookups` over the encoded row `x` (see `docs/bundle-format.md`
//! §5.1 for the encoding), each schema field contributes independently:
//!
//! - `choice` (one column `c`, holding the value index `v`): row `v` of
//!   `T[v] = v·M[:, c] + Σ_{lookups on c} L[v]` — an embedding table times its weight slice,
//!   plus the column's own linear coefficient;
//! - `permutation` of `n` symbols (one-hot columns `c + s·n + p`): for each position `p`, row
//!   `s·n + p` of `T = M[:, c..c+n²]ᵀ`, `s` the symbol at `p`;
//! - `integer` (one column holding `log2(x)` or `x`): `x_enc · M[:, c]`.
//!
//! A row is `bias`, then the fields in schema order (positions ascending within a
//! permutation), each added elementwise (integers with a fused multiply-add).

use super::budget::prod;
use super::form::{Lookup, Mat64};
use crate::error::{Error, Result};
use crate::schedule::{FieldKind, Schema};
use crate::simd::gemm::{apply_row_ops, RowOp};
use crate::simd::SimdLevel;

/// One field's contribution.
#[derive(Debug, Clone)]
enum FieldTable {
    Choice {
        col: usize,
        vocab: usize,
        table: Vec<f32>,
    },
    Permutation {
        col: usize,
        n: usize,
        table: Vec<f32>,
    },
    Scalar {
        col: usize,
        coef: Vec<f32>,
    },
}

/// The folded first layer of a schedule embedder (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct FieldTables {
    stride: usize,
    fields: Vec<FieldTable>,
}

/// Why a form over the encoded schedule cannot become tables (the graph then runs on `ort`).
pub(crate) enum TablesError {
    /// A structural mismatch with the schema: a load error.
    Invalid(Error),
    /// A pattern the engine does not fold: fall back.
    Unsupported(String),
}

impl FieldTables {
    /// Builds the tables of `m` (`width × D`, `D` the schema's encoded width) and `lookups`
    /// (all on the encoded row), rows padded to `stride`.
    pub(crate) fn build(
        schema: &Schema,
        m: Option<&Mat64>,
        lookups: &[Lookup],
        width: usize,
        stride: usize,
        origin: &str,
    ) -> Result<FieldTables, TablesError> {
        let col_of = |o: usize, c: usize| m.map_or(0.0, |m| m.at(o, c));
        let mut fields = Vec::new();
        let mut used = vec![false; lookups.len()];
        for field in schema.fields() {
            let c = field.offset();
            let on_field: Vec<usize> = (0..lookups.len())
                .filter(|&i| (c..c + field.width()).contains(&lookups[i].col))
                .collect();
            match field.kind() {
                FieldKind::Choice(ch) => {
                    let vocab = ch.values().len();
                    for &i in &on_field {
                        let lk = &lookups[i];
                        if lk.table.rows < vocab {
                            return Err(TablesError::Invalid(Error::bundle(
                                format!("{origin}: node '{}'", lk.name),
                                format!(
                                    "embedding table has {} rows but schema field '{}' has {vocab} values",
                                    lk.table.rows,
                                    field.name()
                                ),
                            )));
                        }
                        used[i] = true;
                    }
                    let linear = (0..width).any(|o| col_of(o, c) != 0.0);
                    if !linear && on_field.is_empty() {
                        continue;
                    }
                    let mut table = vec![0.0f32; vocab * stride];
                    for v in 0..vocab {
                        for o in 0..width {
                            let mut s = col_of(o, c) * v as f64;
                            for &i in &on_field {
                                s += lookups[i].table.at(v, o);
                            }
                            table[v * stride + o] = s as f32;
                        }
                    }
                    fields.push(FieldTable::Choice {
                        col: c,
                        vocab,
                        table,
                    });
                }
                FieldKind::Permutation(p) => {
                    if let Some(&i) = on_field.first() {
                        return Err(TablesError::Unsupported(format!(
                            "embedding lookup '{}' on the one-hot columns of field '{}'",
                            lookups[i].name,
                            field.name()
                        )));
                    }
                    let n = p.symbols().len();
                    if (0..width).all(|o| (c..c + n * n).all(|k| col_of(o, k) == 0.0)) {
                        continue;
                    }
                    let mut table = vec![0.0f32; n * n * stride];
                    for j in 0..n * n {
                        for o in 0..width {
                            table[j * stride + o] = col_of(o, c + j) as f32;
                        }
                    }
                    fields.push(FieldTable::Permutation { col: c, n, table });
                }
                FieldKind::Integer(_) => {
                    if let Some(&i) = on_field.first() {
                        return Err(TablesError::Unsupported(format!(
                            "embedding lookup '{}' on integer field '{}'",
                            lookups[i].name,
                            field.name()
                        )));
                    }
                    if (0..width).all(|o| col_of(o, c) == 0.0) {
                        continue;
                    }
                    let mut coef = vec![0.0f32; stride];
                    for (o, slot) in coef.iter_mut().enumerate().take(width) {
                        *slot = col_of(o, c) as f32;
                    }
                    fields.push(FieldTable::Scalar { col: c, coef });
                }
            }
        }
        if let Some(i) = used.iter().position(|u| !u) {
            return Err(TablesError::Unsupported(format!(
                "embedding lookup '{}' on column {}, which is not a choice field",
                lookups[i].name, lookups[i].col
            )));
        }
        Ok(FieldTables { stride, fields })
    }

    /// What [`build`](Self::build) allocates at most, in numbers (see `super::budget`): a
    /// table of `vocabulary` rows per choice field, `n²` rows per permutation of `n`
    /// symbols, one row per integer field, each `stride` wide.
    pub(crate) fn cost(schema: &Schema, stride: usize) -> u64 {
        let rows = schema.fields().iter().fold(0u64, |rows, field| {
            let n = match field.kind() {
                FieldKind::Choice(ch) => ch.values().len() as u64,
                FieldKind::Permutation(p) => prod(p.symbols().len(), p.symbols().len()),
                FieldKind::Integer(_) => 1,
            };
            rows.saturating_add(n)
        });
        rows.saturating_mul(stride as u64)
    }

    /// Row additions per candidate (one per choice or integer field, `n` per permutation).
    pub(crate) fn adds(&self) -> usize {
        self.fields
            .iter()
            .map(|f| match f {
                FieldTable::Permutation { n, .. } => *n,
                _ => 1,
            })
            .sum()
    }

    /// Adds the contributions of one encoded row `x` to `out` (`stride` values), field by
    /// field in schema order (one [`RowOp`] per table row; `ops` is scratch space reused from
    /// row to row).
    pub(crate) fn add_row<'t>(
        &'t self,
        level: SimdLevel,
        x: &[f32],
        out: &mut [f32],
        ops: &mut Vec<RowOp<'t>>,
    ) {
        let s = self.stride;
        ops.clear();
        let mut poisoned = false;
        for f in &self.fields {
            match f {
                FieldTable::Choice { col, vocab, table } => {
                    let v = x[*col];
                    // The schema guarantees an index in range; anything else poisons the row.
                    if v >= 0.0 && (v as usize) < *vocab && v.fract() == 0.0 {
                        let v = v as usize;
                        ops.push(RowOp::Add(&table[v * s..(v + 1) * s]));
                    } else {
                        poisoned = true;
                    }
                }
                FieldTable::Permutation { col, n, table } => {
                    for p in 0..*n {
                        match (0..*n).find(|&sym| x[col + sym * n + p] == 1.0) {
                            Some(sym) => {
                                let j = sym * n + p;
                                ops.push(RowOp::Add(&table[j * s..(j + 1) * s]));
                            }
                            None => poisoned = true,
                        }
                    }
                }
                FieldTable::Scalar { col, coef } => ops.push(RowOp::Fma(x[*col], coef)),
            }
        }
        if poisoned {
            out.fill(f32::NAN);
        } else {
            apply_row_ops(level, out, ops);
        }
    }
}

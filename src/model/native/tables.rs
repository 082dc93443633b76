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
use crate::schedule::{Field, FieldKind, Schema};
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

/// The first layer being folded: the linear part `m` (`width × D`, absent when zero) and the
/// lookups, with the row stride of the tables.
struct Layer<'a> {
    m: Option<&'a Mat64>,
    lookups: &'a [Lookup],
    width: usize,
    stride: usize,
}

impl Layer<'_> {
    /// The linear coefficient of output `o` on encoded column `c`.
    fn coef(&self, o: usize, c: usize) -> f64 {
        self.m.map_or(0.0, |m| m.at(o, c))
    }

    /// Indices of the lookups on the columns of `field`.
    fn lookups_on(&self, field: &Field) -> Vec<usize> {
        let c = field.offset();
        (0..self.lookups.len())
            .filter(|&i| (c..c + field.width()).contains(&self.lookups[i].col))
            .collect()
    }

    /// Checks that each lookup on a choice field has a row per value.
    fn check_lookup_rows(
        &self,
        field: &Field,
        vocab: usize,
        on_field: &[usize],
        origin: &str,
    ) -> Result<(), TablesError> {
        for &i in on_field {
            let lk = &self.lookups[i];
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
        }
        Ok(())
    }

    /// Refuses any lookup on a field that is not a choice (`what` names the columns).
    fn refuse_lookups(
        &self,
        field: &Field,
        on_field: &[usize],
        what: &str,
    ) -> Result<(), TablesError> {
        match on_field.first() {
            Some(&i) => Err(TablesError::Unsupported(format!(
                "embedding lookup '{}' on {what} '{}'",
                self.lookups[i].name,
                field.name()
            ))),
            None => Ok(()),
        }
    }

    /// The table of a choice field at column `c`: row `v` is `v·M[:, c]` plus the lookups'
    /// row `v`; `None` when both are absent.
    fn choice_table(&self, c: usize, vocab: usize, on_field: &[usize]) -> Option<FieldTable> {
        let linear = (0..self.width).any(|o| self.coef(o, c) != 0.0);
        if !linear && on_field.is_empty() {
            return None;
        }
        let mut table = vec![0.0f32; vocab * self.stride];
        for v in 0..vocab {
            for o in 0..self.width {
                let mut s = self.coef(o, c) * v as f64;
                for &i in on_field {
                    s += self.lookups[i].table.at(v, o);
                }
                table[v * self.stride + o] = s as f32;
            }
        }
        Some(FieldTable::Choice {
            col: c,
            vocab,
            table,
        })
    }

    /// The table of a permutation of `n` symbols at column `c`: row `j` is `M[:, c + j]`;
    /// `None` when all `n²` columns are zero.
    fn permutation_table(&self, c: usize, n: usize) -> Option<FieldTable> {
        if (0..self.width).all(|o| (c..c + n * n).all(|k| self.coef(o, k) == 0.0)) {
            return None;
        }
        let mut table = vec![0.0f32; n * n * self.stride];
        for j in 0..n * n {
            for o in 0..self.width {
                table[j * self.stride + o] = self.coef(o, c + j) as f32;
            }
        }
        Some(FieldTable::Permutation { col: c, n, table })
    }

    /// The coefficients of an integer field at column `c`; `None` when they are all zero.
    fn scalar_table(&self, c: usize) -> Option<FieldTable> {
        if (0..self.width).all(|o| self.coef(o, c) == 0.0) {
            return None;
        }
        let mut coef = vec![0.0f32; self.stride];
        for (o, slot) in coef.iter_mut().enumerate().take(self.width) {
            *slot = self.coef(o, c) as f32;
        }
        Some(FieldTable::Scalar { col: c, coef })
    }
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
        let layer = Layer {
            m,
            lookups,
            width,
            stride,
        };
        let mut fields = Vec::new();
        let mut used = vec![false; lookups.len()];
        for field in schema.fields() {
            let on_field = layer.lookups_on(field);
            let table = match field.kind() {
                FieldKind::Choice(ch) => {
                    let vocab = ch.values().len();
                    layer.check_lookup_rows(field, vocab, &on_field, origin)?;
                    for &i in &on_field {
                        used[i] = true;
                    }
                    layer.choice_table(field.offset(), vocab, &on_field)
                }
                FieldKind::Permutation(p) => {
                    layer.refuse_lookups(field, &on_field, "the one-hot columns of field")?;
                    layer.permutation_table(field.offset(), p.symbols().len())
                }
                FieldKind::Integer(_) => {
                    layer.refuse_lookups(field, &on_field, "integer field")?;
                    layer.scalar_table(field.offset())
                }
            };
            fields.extend(table);
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

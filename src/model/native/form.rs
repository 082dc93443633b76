//! Affine forms: a value written as `bias + Σ_leaf M_leaf · leaf + Σ lookups`, composed
//! exactly (in `f64`) through the affine operators of the IR.
//!
//! A *leaf* is a value the folding cannot see through: a graph input, or the output of a
//! non-affine operator (ReLU). Linear layers, biases, additions, slices and concatenations
//! only transform the coefficient matrices, so a chain of them collapses into one form and
//! is computed once, by one layer, when a non-affine operator or a stage boundary needs the
//! value (see `fold`).

use super::budget::prod;

/// Index of a leaf (see [`super::fold`]).
pub(crate) type LeafId = usize;

/// A dense `f64` matrix, row-major.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mat64 {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f64>,
}

impl Mat64 {
    pub(crate) fn zeros(rows: usize, cols: usize) -> Self {
        Self {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    pub(crate) fn identity(n: usize) -> Self {
        let mut m = Self::zeros(n, n);
        for i in 0..n {
            m.data[i * n + i] = 1.0;
        }
        m
    }

    pub(crate) fn from_f32(rows: usize, cols: usize, data: &[f32]) -> Self {
        Self {
            rows,
            cols,
            data: data.iter().map(|&v| f64::from(v)).collect(),
        }
    }

    pub(crate) fn at(&self, r: usize, c: usize) -> f64 {
        self.data[r * self.cols + c]
    }

    /// `self · other`, every entry summed over `k` in ascending order.
    ///
    /// Zero terms are skipped on both sides, which leaves every result bit-identical to the
    /// dense sum: the weights are finite (checked at load), so a skipped product is `±0`,
    /// and adding `±0` to a sum that starts at `+0` (and so is never `−0`) changes nothing. Folding meets very
    /// sparse right operands (the identity blocks of concatenated leaves, which
    /// [`embed_rows`](Self::embed_rows) pads with zero rows): when fewer than a quarter of
    /// `other`'s entries are non-zero, its rows are walked as lists of their non-zeros.
    pub(crate) fn matmul(&self, other: &Mat64) -> Mat64 {
        debug_assert_eq!(self.cols, other.rows);
        let mut out = Mat64::zeros(self.rows, other.cols);
        let nonzero = other.data.iter().filter(|&&v| v != 0.0).count();
        // Per row of a sparse `other`, its non-zero entries `(column, value)`.
        let lists = (nonzero * 4 < other.data.len()).then(|| {
            let mut starts = Vec::with_capacity(other.rows + 1);
            let mut entries: Vec<(usize, f64)> = Vec::with_capacity(nonzero);
            starts.push(0);
            for row in other.data.chunks_exact(other.cols.max(1)) {
                entries.extend(
                    row.iter()
                        .enumerate()
                        .filter(|e| *e.1 != 0.0)
                        .map(|(c, &v)| (c, v)),
                );
                starts.push(entries.len());
            }
            (starts, entries)
        });
        for r in 0..self.rows {
            let orow = &mut out.data[r * other.cols..(r + 1) * other.cols];
            for k in 0..self.cols {
                let a = self.data[r * self.cols + k];
                if a == 0.0 {
                    continue;
                }
                match &lists {
                    Some((starts, entries)) => {
                        for &(c, b) in &entries[starts[k]..starts[k + 1]] {
                            orow[c] += a * b;
                        }
                    }
                    None => {
                        let brow = &other.data[k * other.cols..(k + 1) * other.cols];
                        for (o, b) in orow.iter_mut().zip(brow) {
                            *o += a * b;
                        }
                    }
                }
            }
        }
        out
    }

    /// Non-zero entries of each row.
    fn row_nonzeros(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.rows];
        for (r, row) in self.data.chunks_exact(self.cols.max(1)).enumerate() {
            out[r] = row.iter().filter(|&&v| v != 0.0).count() as u64;
        }
        out
    }

    /// Non-zero entries of each column.
    fn col_nonzeros(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.cols];
        for row in self.data.chunks_exact(self.cols.max(1)) {
            for (slot, &v) in out.iter_mut().zip(row) {
                *slot += u64::from(v != 0.0);
            }
        }
        out
    }

    /// What [`matmul`](Self::matmul) of `self · other` costs in budget operations (see
    /// [`super::budget`]).
    pub(crate) fn matmul_cost(&self, other: &Mat64) -> u64 {
        self.product_cost(other.rows, other.cols, &other.row_nonzeros())
    }

    /// What `self · otherᵀ` costs (the product of a lookup table with a weight's transpose).
    pub(crate) fn matmul_transposed_cost(&self, other: &Mat64) -> u64 {
        self.product_cost(other.cols, other.rows, &other.col_nonzeros())
    }

    /// The cost of `self · B`, `B` of `rows × cols` with `row_nonzeros` non-zeros per row:
    /// the numbers [`matmul`](Self::matmul) allocates, the multiply-adds it performs on the
    /// path it takes, and one per entry of either operand it scans.
    fn product_cost(&self, rows: usize, cols: usize, row_nonzeros: &[u64]) -> u64 {
        let nonzero: u64 = row_nonzeros.iter().sum();
        let sparse = nonzero.saturating_mul(4) < prod(rows, cols);
        let mut macs = 0u64;
        for row in self.data.chunks_exact(self.cols.max(1)) {
            for (k, &a) in row.iter().enumerate() {
                if a != 0.0 {
                    let per = if sparse {
                        row_nonzeros.get(k).copied().unwrap_or(0)
                    } else {
                        cols as u64
                    };
                    macs = macs.saturating_add(per);
                }
            }
        }
        // The lists of non-zeros hold (column, value) pairs: two numbers each.
        let lists = if sparse {
            nonzero.saturating_mul(2).saturating_add(rows as u64 + 1)
        } else {
            0
        };
        let scanned = prod(self.rows, self.cols).saturating_add(prod(rows, cols));
        [scanned, macs, lists, prod(self.rows, cols)]
            .iter()
            .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Rows `start..end`.
    pub(crate) fn rows_range(&self, start: usize, end: usize) -> Mat64 {
        Mat64 {
            rows: end - start,
            cols: self.cols,
            data: self.data[start * self.cols..end * self.cols].to_vec(),
        }
    }

    /// Columns `start..end`.
    pub(crate) fn cols_range(&self, start: usize, end: usize) -> Mat64 {
        let mut out = Mat64::zeros(self.rows, end - start);
        for r in 0..self.rows {
            out.data[r * (end - start)..(r + 1) * (end - start)]
                .copy_from_slice(&self.data[r * self.cols + start..r * self.cols + end]);
        }
        out
    }

    /// Places `self` at row offset `at` of a `rows`-row zero matrix.
    pub(crate) fn embed_rows(&self, rows: usize, at: usize) -> Mat64 {
        let mut out = Mat64::zeros(rows, self.cols);
        out.data[at * self.cols..(at + self.rows) * self.cols].copy_from_slice(&self.data);
        out
    }

    /// Places `self` at column offset `at` of a `cols`-column zero matrix.
    pub(crate) fn embed_cols(&self, cols: usize, at: usize) -> Mat64 {
        let mut out = Mat64::zeros(self.rows, cols);
        for r in 0..self.rows {
            out.data[r * cols + at..r * cols + at + self.cols]
                .copy_from_slice(&self.data[r * self.cols..(r + 1) * self.cols]);
        }
        out
    }

    pub(crate) fn add_assign(&mut self, other: &Mat64) {
        debug_assert_eq!((self.rows, self.cols), (other.rows, other.cols));
        for (a, b) in self.data.iter_mut().zip(&other.data) {
            *a += b;
        }
    }

    pub(crate) fn transposed(&self) -> Mat64 {
        let mut out = Mat64::zeros(self.cols, self.rows);
        for r in 0..self.rows {
            for c in 0..self.cols {
                out.data[c * self.rows + r] = self.data[r * self.cols + c];
            }
        }
        out
    }
}

/// An embedding lookup folded into a form: `table[trunc(leaf[col])]`, `table` of
/// `rows × width`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Lookup {
    pub leaf: LeafId,
    pub col: usize,
    pub table: Mat64,
    /// The IR node it came from (for errors).
    pub name: String,
}

/// `bias + Σ terms[leaf] · leaf + Σ lookups`, a value of `width` columns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Form {
    pub width: usize,
    pub bias: Vec<f64>,
    /// `(leaf, M)` with `M` of `width × leaf width`, at most one per leaf, by leaf id.
    pub terms: Vec<(LeafId, Mat64)>,
    pub lookups: Vec<Lookup>,
}

impl Form {
    /// The leaf itself.
    pub(crate) fn leaf(leaf: LeafId, width: usize) -> Form {
        Form {
            width,
            bias: vec![0.0; width],
            terms: vec![(leaf, Mat64::identity(width))],
            lookups: Vec::new(),
        }
    }

    /// An embedding lookup on column `col` of `leaf`.
    pub(crate) fn lookup(leaf: LeafId, col: usize, table: Mat64, name: &str) -> Form {
        Form {
            width: table.cols,
            bias: vec![0.0; table.cols],
            terms: Vec::new(),
            lookups: vec![Lookup {
                leaf,
                col,
                table,
                name: name.to_string(),
            }],
        }
    }

    /// `W · self + b`, `w` of `out × width`.
    pub(crate) fn linear(&self, w: &Mat64, b: Option<&[f32]>) -> Form {
        let mut bias = vec![0.0; w.rows];
        for (o, slot) in bias.iter_mut().enumerate() {
            let mut s = b.map_or(0.0, |b| f64::from(b[o]));
            for (k, &bk) in self.bias.iter().enumerate() {
                s += w.at(o, k) * bk;
            }
            *slot = s;
        }
        let wt = w.transposed();
        Form {
            width: w.rows,
            bias,
            terms: self.terms.iter().map(|(l, m)| (*l, w.matmul(m))).collect(),
            lookups: self
                .lookups
                .iter()
                .map(|lk| Lookup {
                    table: lk.table.matmul(&wt),
                    ..lk.clone()
                })
                .collect(),
        }
    }

    /// `self + b`.
    pub(crate) fn plus_bias(mut self, b: &[f32]) -> Form {
        for (x, &y) in self.bias.iter_mut().zip(b) {
            *x += f64::from(y);
        }
        self
    }

    /// `self + other` (same width).
    pub(crate) fn plus(mut self, other: &Form) -> Form {
        for (x, y) in self.bias.iter_mut().zip(&other.bias) {
            *x += y;
        }
        for (leaf, m) in &other.terms {
            match self.terms.iter_mut().find(|(l, _)| l == leaf) {
                Some((_, mine)) => mine.add_assign(m),
                None => self.terms.push((*leaf, m.clone())),
            }
        }
        self.terms.sort_by_key(|(l, _)| *l);
        self.lookups.extend(other.lookups.iter().cloned());
        self
    }

    /// Columns `start..end`.
    pub(crate) fn slice(&self, start: usize, end: usize) -> Form {
        Form {
            width: end - start,
            bias: self.bias[start..end].to_vec(),
            terms: self
                .terms
                .iter()
                .map(|(l, m)| (*l, m.rows_range(start, end)))
                .collect(),
            lookups: self
                .lookups
                .iter()
                .map(|lk| Lookup {
                    table: lk.table.cols_range(start, end),
                    ..lk.clone()
                })
                .collect(),
        }
    }

    /// The forms side by side.
    pub(crate) fn concat(parts: &[&Form]) -> Form {
        let width: usize = parts.iter().map(|f| f.width).sum();
        let mut out = Form {
            width,
            bias: Vec::with_capacity(width),
            terms: Vec::new(),
            lookups: Vec::new(),
        };
        let mut at = 0;
        for f in parts {
            out.bias.extend_from_slice(&f.bias);
            for (leaf, m) in &f.terms {
                let placed = m.embed_rows(width, at);
                match out.terms.iter_mut().find(|(l, _)| l == leaf) {
                    Some((_, mine)) => mine.add_assign(&placed),
                    None => out.terms.push((*leaf, placed)),
                }
            }
            for lk in &f.lookups {
                out.lookups.push(Lookup {
                    table: lk.table.embed_cols(width, at),
                    ..lk.clone()
                });
            }
            at += f.width;
        }
        out.terms.sort_by_key(|(l, _)| *l);
        out
    }

    /// If the form is exactly one leaf (identity, zero bias, no lookups), that leaf.
    pub(crate) fn as_leaf(&self) -> Option<LeafId> {
        match (self.terms.as_slice(), self.lookups.is_empty()) {
            ([(leaf, m)], true) if self.bias.iter().all(|&b| b == 0.0) && m.is_identity() => {
                Some(*leaf)
            }
            _ => None,
        }
    }

    // Budget costs (see `super::budget`): the numbers each operation allocates and the
    // multiply-adds it performs, computed before it runs.

    /// Numbers held: the bias, the coefficient matrices and the lookup tables.
    pub(crate) fn size(&self) -> u64 {
        let terms = self.terms.iter().map(|(_, m)| m.data.len() as u64);
        let tables = self.lookups.iter().map(|lk| lk.table.data.len() as u64);
        terms
            .chain(tables)
            .fold(self.bias.len() as u64, u64::saturating_add)
    }

    /// Cost of [`leaf`](Self::leaf) of `width` columns.
    pub(crate) fn leaf_cost(width: usize) -> u64 {
        prod(width, width).saturating_add(width as u64)
    }

    /// Cost of [`linear`](Self::linear) with `w`: its transpose, the bias (a multiply-add per
    /// weight) and the products.
    pub(crate) fn linear_cost(&self, w: &Mat64) -> u64 {
        let mut cost = prod(w.rows, w.cols)
            .saturating_mul(2)
            .saturating_add(w.rows as u64);
        for (_, m) in &self.terms {
            cost = cost.saturating_add(w.matmul_cost(m));
        }
        for lk in &self.lookups {
            cost = cost.saturating_add(lk.table.matmul_transposed_cost(w));
        }
        cost
    }

    /// Cost of [`slice`](Self::slice) to `start..end`.
    pub(crate) fn slice_cost(&self, start: usize, end: usize) -> u64 {
        let n = end.saturating_sub(start);
        let terms = self.terms.iter().map(|(_, m)| prod(n, m.cols));
        let tables = self.lookups.iter().map(|lk| prod(lk.table.rows, n));
        terms.chain(tables).fold(n as u64, u64::saturating_add)
    }

    /// Cost of [`concat`](Self::concat) of `parts`: every part's terms and tables placed
    /// into (and added to) blocks of the full width.
    pub(crate) fn concat_cost(parts: &[&Form]) -> u64 {
        let width = parts
            .iter()
            .fold(0u64, |w, f| w.saturating_add(f.width as u64));
        let mut cost = width;
        for f in parts {
            for (_, m) in &f.terms {
                let placed = width.saturating_mul(m.cols as u64);
                cost = cost.saturating_add(placed.saturating_mul(2));
            }
            for lk in &f.lookups {
                cost = cost.saturating_add(width.saturating_mul(lk.table.rows as u64));
            }
        }
        cost
    }
}

impl Mat64 {
    /// Whether this is a square identity matrix.
    fn is_identity(&self) -> bool {
        self.rows == self.cols
            && self.data.iter().enumerate().all(|(i, &v)| {
                let diagonal = i / self.cols.max(1) == i % self.cols.max(1);
                v == if diagonal { 1.0 } else { 0.0 }
            })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn eval(f: &Form, leaves: &[Vec<f64>]) -> Vec<f64> {
        let mut out = f.bias.clone();
        for (l, m) in &f.terms {
            for (o, v) in out.iter_mut().enumerate() {
                *v += (0..m.cols).map(|k| m.at(o, k) * leaves[*l][k]).sum::<f64>();
            }
        }
        for lk in &f.lookups {
            let row = leaves[lk.leaf][lk.col] as usize;
            for (o, v) in out.iter_mut().enumerate() {
                *v += lk.table.at(row, o);
            }
        }
        out
    }

    /// Composition through linear, concat, slice and add equals evaluating step by step.
    #[test]
    fn algebra_matches_step_by_step() {
        let x = vec![1.0, 2.0, 0.0];
        let y = vec![0.5, -1.0];
        let leaves = vec![x.clone(), y.clone()];
        let fx = Form::leaf(0, 3);
        let fy = Form::leaf(1, 2);
        let table = Mat64::from_f32(2, 2, &[10.0, 20.0, 30.0, 40.0]);
        let lk = Form::lookup(0, 2, table, "t"); // x[2] = 0 → row 0
        let cat = Form::concat(&[&fx, &lk, &fy]); // width 7
        let w = Mat64::from_f32(
            2,
            7,
            &[1., 0., 0., 1., 0., 2., 0., 0., 1., 1., 0., 1., 0., 3.],
        );
        let lin = cat.linear(&w, Some(&[0.25, -0.25]));
        let got = eval(&lin, &leaves);
        // concat = [1, 2, 0, 10, 20, 0.5, -1]
        assert_eq!(got, vec![1.0 + 10.0 + 1.0 + 0.25, 2.0 + 20.0 - 3.0 - 0.25]);
        let s = lin.slice(1, 2).plus(&fy.slice(0, 1)).plus_bias(&[1.0]);
        assert_eq!(eval(&s, &leaves), vec![got[1] + 0.5 + 1.0]);
        assert_eq!(fx.as_leaf(), Some(0));
        assert_eq!(lin.as_leaf(), None);
    }

    /// The product without skipping anything: every `a · b` added, `k` ascending.
    fn dense_product(a: &Mat64, b: &Mat64) -> Vec<f64> {
        let mut out = vec![0.0; a.rows * b.cols];
        for r in 0..a.rows {
            for c in 0..b.cols {
                let mut s = 0.0;
                for k in 0..a.cols {
                    s += a.at(r, k) * b.at(k, c);
                }
                out[r * b.cols + c] = s;
            }
        }
        out
    }

    /// Both paths of `matmul` (dense, and the lists of non-zeros of a sparse right operand)
    /// give the bits of the plain dense sum, on matrices with negative and zero entries and
    /// on the padded identity blocks that folding produces.
    #[test]
    fn matmul_skips_zeros_without_changing_bits() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut random = |rows: usize, cols: usize, density: u64| {
            let data = (0..rows * cols)
                .map(|_| {
                    let x = next();
                    if x % 100 < density {
                        ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 3.0
                    } else {
                        0.0
                    }
                })
                .collect();
            Mat64 { rows, cols, data }
        };
        for (density_a, density_b) in [(100, 100), (100, 10), (40, 3), (100, 0), (0, 50)] {
            let a = random(7, 33, density_a);
            let b = random(33, 19, density_b);
            let got = a.matmul(&b);
            let want = dense_product(&a, &b);
            assert_eq!(
                got.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "densities {density_a} % × {density_b} %"
            );
        }
        // A weight times a leaf's identity block placed among zero rows (what `concat`
        // then `linear` computes).
        let w = random(5, 12, 100);
        let placed = Mat64::identity(4).embed_rows(12, 6);
        let want = dense_product(&w, &placed);
        assert_eq!(w.matmul(&placed).data, want);
        assert_eq!(want[4 * 4 + 1], w.at(4, 7));
    }
}

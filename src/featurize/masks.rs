//! Neighbour masks of points of a constant-valued input (the pattern), read out of per-row
//! bitmaps: for an input whose points all carry the same features, a stencil output depends
//! only on which kernel offsets hold an input point, a `k²`-bit mask (`k² ≤ 64`).
//!
//! Mask bit `i_r·k + i_c` stands for the offset `(a_{i_r}, a_{i_c})` (kernel index
//! `κ = i_r + k·i_c`). Bitmaps pay when input rows are long; `rulebook::mask_of_list` builds the same
//! mask from a neighbour list for short rows.

use super::coords::Coords;
use super::rulebook::{Geometry, Neighbours};
use crate::simd::SimdLevel;

/// Bitmap layout for neighbour masks of one conv: input columns in units of the input
/// tensor stride, shifted right by `pad` so every window starts at a non-negative bit.
pub(crate) struct MaskGeometry {
    /// `log2` of the input tensor stride (columns are multiples of it).
    t_shift: u32,
    /// Distance between offsets in units of `t_in` (the dilation).
    dilation: usize,
    /// First offset in units of `t_in`, plus `pad`.
    first: i64,
    pad: i64,
    /// `u64` words per bitmap row.
    words: usize,
}

impl MaskGeometry {
    /// Most bitmap words per task (all kernel rows); wider patterns use the general keys.
    pub const MAX_WORDS: usize = 1 << 16;

    /// The layout for window `geom` at input tensor stride `t_in` over columns below
    /// `ncols`, or `None` when the kernel has more than 64 offsets, the stride is not a
    /// power of two, or the bitmaps would be too wide.
    pub fn new(geom: &Geometry, t_in: u64, ncols: u64) -> Option<Self> {
        let k = geom.k;
        if k * k > 64 || !t_in.is_power_of_two() {
            return None;
        }
        let t_shift = t_in.trailing_zeros();
        let dilation = usize::try_from(geom.step >> t_shift).ok()?;
        let pad = i64::try_from(k * dilation).ok()?;
        let width = (ncols >> t_shift) + 2 * pad as u64 + 64;
        let words = usize::try_from(width / 64 + 2).ok()?;
        (words.checked_mul(k)? <= Self::MAX_WORDS).then(|| Self {
            t_shift,
            dilation,
            first: (geom.offsets[0] >> t_shift) + pad,
            pad,
            words,
        })
    }
}

/// Per-task neighbour-mask scanner: keeps one bitmap row per kernel row in a ring indexed
/// by input row, so an input row is written into its bitmap once when the window reaches it
/// (and cleared once when a later row takes its place), and reads each output point's
/// `k × k` window out of the bitmaps of the current output row's kernel rows.
pub(crate) struct MaskScanner<'a> {
    nb: Neighbours<'a>,
    input: &'a Coords,
    g: &'a MaskGeometry,
    k: usize,
    /// Distance between kernel rows (`d·t`).
    step: u64,
    /// `k` ring rows, then one row that stays zero (for absent kernel rows).
    bits: Vec<u64>,
    /// Per ring row: the input points `start..end` whose bits it holds (empty: none).
    held: Vec<(usize, usize)>,
    /// Per kernel row of the current output row: its bitmap row (`k` = the zero row).
    row_of: Vec<usize>,
}

impl<'a> MaskScanner<'a> {
    pub fn new(input: &'a Coords, geom: &'a Geometry, g: &'a MaskGeometry) -> Self {
        Self {
            nb: Neighbours::new(input, geom, SimdLevel::Scalar),
            input,
            g,
            k: geom.k,
            step: geom.step,
            bits: vec![0; (geom.k + 1) * g.words],
            held: vec![(0, 0); geom.k],
            row_of: vec![geom.k; geom.k],
        }
    }

    /// Writes (`set`) or clears the bits of input points `start..end` in bitmap row `r`.
    fn write(&mut self, r: usize, (start, end): (usize, usize), set: bool) {
        let base = r * self.g.words;
        // Columns ascend, so one word is assembled in a register before it is stored
        // (an `|=` per column would wait on the previous store to the same word).
        let (mut word, mut acc) = (usize::MAX, 0u64);
        for &c in &self.input.cols[start..end] {
            let i = (c >> self.g.t_shift) as usize + self.g.pad as usize;
            if i / 64 != word {
                if word != usize::MAX {
                    self.bits[base + word] = acc;
                }
                (word, acc) = (i / 64, 0);
            }
            if set {
                acc |= 1 << (i % 64);
            }
        }
        if word != usize::MAX {
            self.bits[base + word] = acc;
        }
    }

    /// Points the kernel rows at the bitmaps of output row `row`'s input rows (rows
    /// ascending), writing the input rows the window has just reached.
    pub fn start_row(&mut self, row: u32) {
        self.nb.start_row(row);
        self.row_of.fill(self.k);
        for i in 0..self.nb.row_ranges().len() {
            let (ir, start, end) = self.nb.row_ranges()[i];
            // The window's input rows are `k` consecutive multiples of the kernel-row step
            // (floored), so their ring rows differ.
            let coord = i64::from(row) + self.nb.offset(ir as usize);
            let r = ((coord as u64 / self.step) % self.k as u64) as usize;
            if self.held[r] != (start, end) {
                let old = self.held[r];
                self.write(r, old, false);
                self.write(r, (start, end), true);
                self.held[r] = (start, end);
            }
            self.row_of[ir as usize] = r;
        }
    }

    /// The neighbour mask of the output point at column `col` of the current row: bit
    /// `i_r·k + i_c` set when the input has a point at offset `(a_{i_r}, a_{i_c})`.
    #[inline]
    pub fn mask(&self, col: u32) -> u64 {
        let k = self.k;
        let start = ((col >> self.g.t_shift) as i64 + self.g.first) as usize;
        let low = (1u64 << k) - 1;
        let mut mask = 0u64;
        for ir in 0..k {
            let row = &self.bits[self.row_of[ir] * self.g.words..][..self.g.words];
            let bits = if self.g.dilation == 1 {
                let (w, sh) = (start / 64, start % 64);
                let pair = (u128::from(row[w + 1]) << 64) | u128::from(row[w]);
                (pair >> sh) as u64 & low
            } else {
                (0..k).fold(0u64, |acc, ic| {
                    let i = start + ic * self.g.dilation;
                    acc | (((row[i / 64] >> (i % 64)) & 1) << ic)
                })
            };
            mask |= bits << (ir * k);
        }
        mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::featurize::rulebook::mask_of_list;
    use crate::pattern::CsrPattern;

    /// The ring of bitmaps gives every point the mask of its neighbour list, over rows with
    /// gaps, rows the input lacks, and dilated kernels.
    #[test]
    fn scanner_masks_match_neighbour_lists() {
        let (nrows, ncols) = (120usize, 300u32);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut row_ptr = vec![0usize];
        let mut col_idx = Vec::new();
        for r in 0..nrows {
            // Every seventh row empty; the others about 6 % full.
            if r % 7 != 3 {
                col_idx.extend((0..ncols).filter(|_| next() % 16 == 0));
            }
            row_ptr.push(col_idx.len());
        }
        let p = CsrPattern::new(nrows, ncols as usize, row_ptr, col_idx).expect("valid");
        let input = Coords::from_pattern(&p);
        for (k, dilation) in [(5, 1), (3, 1), (3, 2), (7, 1)] {
            let geom = Geometry::new(k, dilation, 1);
            let g = MaskGeometry::new(&geom, 1, u64::from(ncols)).expect("layout");
            let mut scan = MaskScanner::new(&input, &geom, &g);
            let mut nb = Neighbours::new(&input, &geom, SimdLevel::Scalar);
            let mut checked = 0;
            // Ascending output rows, skipping some, including rows past the input's last.
            for row in (0..nrows as u32 + 4).filter(|r| r % 5 != 1) {
                scan.start_row(row);
                nb.start_row(row);
                for col in (0..ncols).step_by(3) {
                    let want = mask_of_list(nb.point(col), k as u32);
                    assert_eq!(scan.mask(col), want, "k {k} d {dilation} at ({row}, {col})");
                    checked += u32::from(want != 0);
                }
            }
            assert!(checked > 1000, "the test must see many non-empty windows");
        }
    }
}

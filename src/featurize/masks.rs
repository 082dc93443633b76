//! Neighbour masks of points of a constant-valued input (the pattern), read out of per-row
//! bitmaps: for an input whose points all carry the same features, a stencil output depends
//! only on which kernel offsets hold an input point, a `k²`-bit mask (`k² ≤ 64`).
//!
//! Mask bit `i_r·k + i_c` stands for the offset `(a_{i_r}, a_{i_c})` (kernel index
//! `κ = i_r + k·i_c`). Bitmaps pay when input rows are long; [`mask_of_list`] builds the same
//! mask from a neighbour list for short rows.

use super::coords::Coords;
use super::rulebook::{Geometry, Neighbours};

/// Mask bit of kernel index `kappa`.
#[inline]
pub(crate) fn mask_bit(kappa: u32, k: u32) -> u32 {
    (kappa % k) * k + kappa / k
}

/// The mask of a neighbour list `(κ, point)`.
#[inline]
pub(crate) fn mask_of_list(list: &[(u32, u32)], k: u32) -> u64 {
    list.iter()
        .fold(0u64, |m, &(kappa, _)| m | (1u64 << mask_bit(kappa, k)))
}

/// The kernel indices of a mask, ascending.
pub(crate) fn mask_kappas(mask: u64, k: u32) -> impl Iterator<Item = u32> {
    (0..k).flat_map(move |ic| {
        (0..k).filter_map(move |ir| (mask >> (ir * k + ic) & 1 == 1).then_some(ir + k * ic))
    })
}

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

/// Per-task neighbour-mask scanner: for each output row, sets one bitmap row per kernel row
/// from the input row it meets, reads each output point's `k × k` window out of them, and
/// clears them again.
pub(crate) struct MaskScanner<'a> {
    nb: Neighbours<'a>,
    input: &'a Coords,
    g: &'a MaskGeometry,
    k: usize,
    bits: Vec<u64>,
    /// The input row ranges set for the current output row.
    set: Vec<(u32, usize, usize)>,
}

impl<'a> MaskScanner<'a> {
    pub fn new(input: &'a Coords, geom: &'a Geometry, g: &'a MaskGeometry) -> Self {
        Self {
            nb: Neighbours::new(input, geom),
            input,
            g,
            k: geom.k,
            bits: vec![0; geom.k * g.words],
            set: Vec::with_capacity(geom.k),
        }
    }

    /// Sets the bitmaps for output row `row` (rows ascending).
    pub fn start_row(&mut self, row: u32) {
        self.nb.start_row(row);
        self.set.clear();
        self.set.extend_from_slice(self.nb.row_ranges());
        for &(ir, start, end) in &self.set {
            let base = ir as usize * self.g.words;
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
                acc |= 1 << (i % 64);
            }
            if word != usize::MAX {
                self.bits[base + word] = acc;
            }
        }
    }

    /// Clears the bitmaps of the current row.
    pub fn end_row(&mut self) {
        for &(ir, start, end) in &self.set {
            let base = ir as usize * self.g.words;
            for &c in &self.input.cols[start..end] {
                let i = (c >> self.g.t_shift) as usize + self.g.pad as usize;
                self.bits[base + i / 64] = 0;
            }
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
            let row = &self.bits[ir * self.g.words..][..self.g.words];
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

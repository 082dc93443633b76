//! Repacking a CSR matrix into the level storage of a [`TacoProgram`]'s sparse tensor
//! (WACO's `FormatScheduler::pack`), and sizing that storage before it is allocated.
//!
//! The nonzeros are sorted by their coordinates in level order; a dense level has one
//! position per coordinate under each parent position, a compressed level one per distinct
//! coordinate prefix (TACO's `pos`/`crd` arrays, `int32`). The values array has one entry per
//! position of the last level, so dense levels under compressed ones store zeros.

use super::{TacoOptions, TacoProgram, TacoTensor};
use crate::error::{Error, ErrorKind, Result};
use crate::pattern::CsrPattern;
use crate::schedule::space::LevelFormat;

/// The size of one level of a repacked layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelSize {
    /// Positions of this level (parent positions × extent when dense, stored coordinates
    /// when compressed).
    pub positions: u64,
    /// Length of the `pos` array (compressed levels: parent positions + 1; dense: 0).
    pub pos_len: u64,
}

/// The sizes of a repacked layout, computed from the pattern before anything is allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TacoLayout {
    /// One entry per level, outermost first.
    pub levels: Vec<LevelSize>,
    /// Length of the values array (positions of the last level).
    pub values: u64,
    /// The largest values or `pos` array accepted ([`TacoOptions::max_positions_per_nonzero`]
    /// × nonzeros, and never less than TACO's CSR needs: rows + 1).
    pub limit: u64,
}

impl TacoLayout {
    /// The largest array of the layout (values or one level's `pos`).
    pub fn largest_array(&self) -> u64 {
        self.levels
            .iter()
            .map(|l| l.pos_len)
            .fold(self.values, u64::max)
    }

    /// Whether the layout is within its limit and TACO's `int32` positions.
    pub fn fits(&self) -> bool {
        self.largest_array() <= self.limit.min(i32::MAX as u64)
    }

    /// Positions stored over all levels (values, `pos` and `crd` arrays), a measure of the
    /// layout's memory in 4-byte words.
    pub fn stored_words(&self) -> u64 {
        let index: u64 = self
            .levels
            .iter()
            .filter(|l| l.pos_len > 0)
            .map(|l| l.pos_len + l.positions)
            .sum();
        index + self.values
    }
}

/// One level of a repacked tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackedLevel {
    /// A dense level of this extent.
    Dense {
        /// The level's dimension.
        size: u32,
    },
    /// A compressed level: `crd[pos[p]..pos[p + 1]]` are the coordinates under parent `p`.
    Compressed {
        /// Positions, one per parent position plus one.
        pos: Vec<i32>,
        /// Coordinates.
        crd: Vec<i32>,
    },
}

/// A sparse tensor repacked for a program: what a `taco_tensor_t` points to.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedTensor {
    /// Dimensions in storage order (the mode ordering is the identity).
    pub dims: Vec<u32>,
    /// One entry per level, outermost first.
    pub levels: Vec<PackedLevel>,
    /// Values, one per position of the last level (zeros where no nonzero lands).
    pub vals: Vec<f32>,
}

/// The nonzeros as `(key, nonzero index)`, sorted: `key` packs the level coordinates,
/// outermost level in the high bits; `shifts[l]` is the bit where level `l` starts.
struct SortedCoordinates {
    keys: Vec<(u64, u32)>,
    shifts: Vec<u32>,
}

impl SortedCoordinates {
    fn new(tensor: &TacoTensor, kernel_rows: char, pattern: &CsrPattern) -> Result<Self> {
        let bits: Vec<u32> = tensor
            .vars
            .iter()
            .map(|v| u32::BITS - (v.extent - 1).leading_zeros())
            .collect();
        let total: u32 = bits.iter().sum();
        if total > u64::BITS {
            return Err(Error::invalid_argument(format!(
                "the layout's coordinates need {total} bits, more than 64"
            )));
        }
        let mut shifts = vec![0; bits.len()];
        let mut acc = 0;
        for l in (0..bits.len()).rev() {
            shifts[l] = acc;
            acc += bits[l];
        }
        let mut keys = Vec::with_capacity(pattern.nnz());
        let mut n = 0u32;
        for (row, cols) in pattern.rows() {
            for &col in cols {
                let mut key = 0u64;
                for (v, s) in tensor.vars.iter().zip(&shifts) {
                    let x = if v.axis == kernel_rows {
                        row as u32
                    } else {
                        col
                    };
                    key |= u64::from(v.coordinate(x)) << s;
                }
                keys.push((key, n));
                n += 1;
            }
        }
        keys.sort_unstable();
        Ok(Self { keys, shifts })
    }

    /// Whether nonzero `i` (in sorted order) starts a new coordinate prefix at `level`.
    fn starts_prefix(&self, i: usize, level: usize) -> bool {
        let s = self.shifts[level];
        i == 0 || self.keys[i].0.checked_shr(s) != self.keys[i - 1].0.checked_shr(s)
    }

    fn coordinate(&self, i: usize, level: usize, extent: u32) -> u32 {
        let c = self.keys[i].0.checked_shr(self.shifts[level]).unwrap_or(0);
        (c & u64::from(u32::MAX >> (extent - 1).leading_zeros())) as u32
    }
}

impl TacoProgram {
    /// The sizes of the sparse tensor's layout for `pattern`, without allocating it.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] when the pattern's
    /// shape is not the program's.
    pub fn layout(&self, pattern: &CsrPattern, options: &TacoOptions) -> Result<TacoLayout> {
        self.check_shape(pattern)?;
        let sorted = SortedCoordinates::new(self.sparse(), self.kernel.sparse_axes()[0], pattern)?;
        Ok(self.layout_of(&sorted, pattern, options))
    }

    /// [`Self::layout`], refused when it exceeds its limit.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::LayoutTooLarge`] when it does; as
    /// [`Self::layout`].
    pub fn check_layout(&self, pattern: &CsrPattern, options: &TacoOptions) -> Result<TacoLayout> {
        let layout = self.layout(pattern, options)?;
        if layout.fits() {
            Ok(layout)
        } else {
            Err(too_large(&layout, pattern.nnz(), options))
        }
    }

    /// Repacks `pattern` (with `values` in CSR order, or all ones) into the sparse tensor's
    /// level storage.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::LayoutTooLarge`] when the layout
    /// exceeds its limit ([`TacoLayout::fits`]); nothing large is allocated then.
    /// [`ErrorKind::InvalidArgument`] when the shape
    /// differs from the program's or `values` does not have one value per nonzero.
    pub fn pack(
        &self,
        pattern: &CsrPattern,
        values: Option<&[f32]>,
        options: &TacoOptions,
    ) -> Result<PackedTensor> {
        self.check_shape(pattern)?;
        if let Some(v) = values {
            if v.len() != pattern.nnz() {
                return Err(Error::invalid_argument(format!(
                    "{} values for {} nonzeros",
                    v.len(),
                    pattern.nnz()
                )));
            }
        }
        let tensor = self.sparse();
        let sorted = SortedCoordinates::new(tensor, self.kernel.sparse_axes()[0], pattern)?;
        let layout = self.layout_of(&sorted, pattern, options);
        if !layout.fits() {
            return Err(too_large(&layout, pattern.nnz(), options));
        }
        Ok(fill(tensor, &sorted, &layout, values))
    }

    fn layout_of(
        &self,
        sorted: &SortedCoordinates,
        pattern: &CsrPattern,
        options: &TacoOptions,
    ) -> TacoLayout {
        let tensor = self.sparse();
        let mut parent: u64 = 1;
        let mut levels = Vec::with_capacity(tensor.levels.len());
        for (l, (format, var)) in tensor.levels.iter().zip(&tensor.vars).enumerate() {
            let size = match format {
                LevelFormat::Uncompressed => LevelSize {
                    positions: parent.saturating_mul(u64::from(var.extent)),
                    pos_len: 0,
                },
                LevelFormat::Compressed => LevelSize {
                    positions: (0..sorted.keys.len())
                        .filter(|&i| sorted.starts_prefix(i, l))
                        .count() as u64,
                    pos_len: parent.saturating_add(1),
                },
            };
            parent = size.positions;
            levels.push(size);
        }
        let per_nonzero = u64::from(options.max_positions_per_nonzero);
        let limit =
            (per_nonzero.saturating_mul(pattern.nnz() as u64)).max(pattern.nrows() as u64 + 1);
        TacoLayout {
            levels,
            values: parent,
            limit,
        }
    }

    fn check_shape(&self, pattern: &CsrPattern) -> Result<()> {
        let [x, y] = self.kernel.sparse_axes();
        // An axis is one whole variable of its extent, or a split whose outer variable
        // counts the inner blocks it takes to cover the extent.
        let covers = |axis: char, n: usize| {
            let n = n as u64;
            match self
                .sparse()
                .vars
                .iter()
                .filter(|v| v.axis == axis)
                .collect::<Vec<_>>()[..]
            {
                [whole] => u64::from(whole.extent) == n,
                [outer, inner] => u64::from(outer.extent) == n.div_ceil(u64::from(inner.extent)),
                _ => false,
            }
        };
        if covers(x, pattern.nrows()) && covers(y, pattern.ncols()) {
            Ok(())
        } else {
            Err(Error::invalid_argument(format!(
                "the program is for a matrix of another shape than {} x {}",
                pattern.nrows(),
                pattern.ncols()
            )))
        }
    }
}

fn too_large(layout: &TacoLayout, nnz: usize, options: &TacoOptions) -> Error {
    Error::new(ErrorKind::LayoutTooLarge {
        positions: layout.largest_array(),
        limit: layout.limit.min(i32::MAX as u64),
        reason: format!(
            "{} per nonzero for {nnz} nonzeros; dense levels under compressed ones store zeros",
            options.max_positions_per_nonzero
        ),
    })
}

fn fill(
    tensor: &TacoTensor,
    sorted: &SortedCoordinates,
    layout: &TacoLayout,
    values: Option<&[f32]>,
) -> PackedTensor {
    let mut levels: Vec<PackedLevel> = tensor
        .levels
        .iter()
        .zip(&tensor.vars)
        .zip(&layout.levels)
        .map(|((format, var), size)| match format {
            LevelFormat::Uncompressed => PackedLevel::Dense { size: var.extent },
            LevelFormat::Compressed => PackedLevel::Compressed {
                pos: vec![0; size.pos_len as usize],
                crd: Vec::with_capacity(size.positions as usize),
            },
        })
        .collect();
    let mut vals = vec![0.0f32; layout.values as usize];
    for (i, &(_, nz)) in sorted.keys.iter().enumerate() {
        let mut p = 0usize;
        for (l, level) in levels.iter_mut().enumerate() {
            let c = sorted.coordinate(i, l, tensor.vars[l].extent);
            p = match level {
                PackedLevel::Dense { size } => p * (*size as usize) + c as usize,
                PackedLevel::Compressed { pos, crd } => {
                    if sorted.starts_prefix(i, l) {
                        crd.push(c as i32);
                        pos[p + 1] += 1;
                    }
                    crd.len() - 1
                }
            };
        }
        vals[p] = values.map_or(1.0, |v| v[nz as usize]);
    }
    for level in &mut levels {
        if let PackedLevel::Compressed { pos, .. } = level {
            for q in 1..pos.len() {
                pos[q] += pos[q - 1];
            }
        }
    }
    PackedTensor {
        dims: tensor.dims(),
        levels,
        vals,
    }
}

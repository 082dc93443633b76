//! SPADE accelerator: the 256-configuration space of the COGNATE/DASH papers.
//!
//! Evidence: COGNATE (seed 001) Table 1 and §4 "Program Configuration Search Space for
//! SPADE": row panels {4, 32, 256, 2048} × column panels {1024, 16384, 65536,
//! `NUM_MATRIX_COLS`} × split {32, 256} × barrier × cache bypass × matrix reorder (binary) =
//! 4·4·2·2·2·2 = **256**; appendix E shows the CSV row
//! `name, row_panels, column_panels, split, barrier, bypass, reorder, time =
//! 144, 4, 1024, 1, 0, 0, 0, 38.83592`.
//!
//! Readings of ours, marked \[inferred\] in the docs below:
//! - **split in the CSV.** The example row has `split = 1` and its mapped form `k_split = 32`,
//!   while the space lists split ∈ {32, 256}. We read the CSV value in units of 32 columns
//!   (1 ↦ 32, 8 ↦ 256) and also accept the factors themselves (32, 256; the two sets do not
//!   overlap). We always *write* the factor.
//! - **column panels are widths.** A panel of at least `ncols` columns covers the matrix like
//!   `NUM_MATRIX_COLS`, so such a candidate is a [`Duplicate`](super::CandidateStatus::Duplicate)
//!   for that matrix (a per-candidate status, never an error).
//! - **default.** The papers use "the default optimizations" of each system as the baseline
//!   without listing SPADE's; we take row panels 32, one column panel (`NUM_MATRIX_COLS`),
//!   split 32, barrier / bypass / reorder off — no tiling across columns and no optional
//!   feature enabled.

use std::fmt;

use super::{
    parse_flag, parse_u32, space_error, unsupported, Kernel, MatrixShape, ScheduleSpace, Target,
};
use crate::error::Result;

/// SPADE's row-panel values.
pub const ROW_PANELS: [u32; 4] = [4, 32, 256, 2048];
/// SPADE's fixed column-panel values (the fourth is [`ColumnPanels::AllColumns`]).
pub const COLUMN_PANELS: [u32; 3] = [1024, 16384, 65536];
/// SPADE's split factors.
pub const SPLITS: [u32; 2] = [32, 256];
/// The token of the matrix-dependent column-panel value.
pub const NUM_MATRIX_COLS: &str = "NUM_MATRIX_COLS";

/// A column-panel value: a fixed width or the whole matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnPanels {
    /// A fixed panel width in columns.
    Fixed(u32),
    /// `NUM_MATRIX_COLS`: one panel spanning all columns.
    AllColumns,
}

impl ColumnPanels {
    /// The width for a matrix with `ncols` columns.
    pub fn resolve(self, ncols: usize) -> u32 {
        match self {
            ColumnPanels::Fixed(w) => w,
            ColumnPanels::AllColumns => u32::try_from(ncols).unwrap_or(u32::MAX),
        }
    }
}

impl fmt::Display for ColumnPanels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnPanels::Fixed(w) => write!(f, "{w}"),
            ColumnPanels::AllColumns => f.write_str(NUM_MATRIX_COLS),
        }
    }
}

/// One SPADE configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpadeConfig {
    /// Row panels (one of [`ROW_PANELS`]).
    pub row_panels: u32,
    /// Column panels (one of [`COLUMN_PANELS`] or all columns).
    pub column_panels: ColumnPanels,
    /// Split factor (one of [`SPLITS`]).
    pub split: u32,
    /// Barrier between tiles.
    pub barrier: bool,
    /// Cache bypass.
    pub bypass: bool,
    /// Matrix reordering.
    pub reorder: bool,
}

impl SpadeConfig {
    /// `NUM_MATRIX_COLS` replaced by `ncols` (a fixed width is kept).
    pub fn resolve(self, ncols: usize) -> Self {
        Self {
            column_panels: ColumnPanels::Fixed(self.column_panels.resolve(ncols)),
            ..self
        }
    }

    /// The six tokens `row_panels column_panels split barrier bypass reorder`, parsed.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) naming the bad field.
    pub fn from_tokens(t: &[&str]) -> Result<Self> {
        let [r, c, s, b, y, o] = t else {
            return Err(space_error(
                "spade",
                t.join(" "),
                "expected row_panels column_panels split barrier bypass reorder",
            ));
        };
        let column_panels = if c.trim() == NUM_MATRIX_COLS {
            ColumnPanels::AllColumns
        } else {
            ColumnPanels::Fixed(parse_u32("column_panels", c)?)
        };
        // [inferred] 1 and 8 are the split in units of 32 (the papers' example row).
        let split = match parse_u32("split", s)? {
            1 => 32,
            8 => 256,
            v => v,
        };
        Ok(SpadeConfig {
            row_panels: parse_u32("row_panels", r)?,
            column_panels,
            split,
            barrier: parse_flag("barrier", b)?,
            bypass: parse_flag("bypass", y)?,
            reorder: parse_flag("reorder", o)?,
        })
    }

    /// The six values as tokens (`column_panels` as stored: a number or `NUM_MATRIX_COLS`).
    pub fn to_tokens(&self) -> [String; 6] {
        [
            self.row_panels.to_string(),
            self.column_panels.to_string(),
            self.split.to_string(),
            u8::from(self.barrier).to_string(),
            u8::from(self.bypass).to_string(),
            u8::from(self.reorder).to_string(),
        ]
    }
}

/// One CSV row `name, row_panels, column_panels, split, barrier, bypass, reorder[, time]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SpadeRow {
    /// The matrix name (first column).
    pub name: String,
    /// The configuration.
    pub config: SpadeConfig,
    /// Measured time, when present.
    pub time: Option<f64>,
}

impl SpadeRow {
    /// The CSV header (with `time`).
    pub const HEADER: &'static str =
        "name, row_panels, column_panels, split, barrier, bypass, reorder, time";

    /// Parses one CSV row (comma-separated, whitespace around fields ignored).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) naming the bad field.
    pub fn parse_csv(line: &str) -> Result<Self> {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 7 && f.len() != 8 {
            return Err(space_error("spade csv", line, "expected 7 or 8 fields"));
        }
        let time = match f.get(7) {
            None => None,
            Some(t) => Some(
                t.parse::<f64>()
                    .map_err(|e| space_error("time", t, "expected a number").with_source(e))?,
            ),
        };
        Ok(SpadeRow {
            name: f[0].to_owned(),
            config: SpadeConfig::from_tokens(&f[1..7])?,
            time,
        })
    }

    /// The CSV row, fields separated by `", "` as in the papers.
    pub fn to_csv(&self) -> String {
        let mut f = vec![self.name.clone()];
        f.extend(self.config.to_tokens());
        if let Some(t) = self.time {
            f.push(t.to_string());
        }
        f.join(", ")
    }
}

/// The SPADE space for one kernel (the same 256 configurations for SpMM and SDDMM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpadeSpace {
    kernel: Kernel,
}

impl SpadeSpace {
    /// The kernels SPADE has a space for.
    pub const KERNELS: [Kernel; 2] = [Kernel::SpMM, Kernel::SDDMM];

    /// The space for `kernel`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnsupportedKernel`](crate::ErrorKind::UnsupportedKernel) for SpMV (the
    /// papers define SPADE's space for SpMM and SDDMM only).
    pub fn new(kernel: Kernel) -> Result<Self> {
        if !Self::KERNELS.contains(&kernel) {
            return Err(unsupported(Target::Spade, kernel, &Self::KERNELS));
        }
        Ok(Self { kernel })
    }

    /// The kernel.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }
}

impl ScheduleSpace for SpadeSpace {
    type Config = SpadeConfig;

    fn name(&self) -> String {
        format!("spade-{}", self.kernel)
    }

    /// The 256 configurations, `NUM_MATRIX_COLS` substituted by `shape.cols`; order: row
    /// panels → column panels (1024, 16384, 65536, all) → split → barrier → bypass → reorder.
    fn enumerate(&self, shape: &MatrixShape) -> Vec<SpadeConfig> {
        let cols = COLUMN_PANELS
            .iter()
            .map(|&w| ColumnPanels::Fixed(w))
            .chain([ColumnPanels::AllColumns]);
        let cols: Vec<ColumnPanels> = cols.collect();
        let mut out = Vec::with_capacity(256);
        for &row_panels in &ROW_PANELS {
            for &c in &cols {
                for &split in &SPLITS {
                    for bits in 0u8..8 {
                        let cfg = SpadeConfig {
                            row_panels,
                            column_panels: c,
                            split,
                            barrier: bits & 4 != 0,
                            bypass: bits & 2 != 0,
                            reorder: bits & 1 != 0,
                        };
                        out.push(cfg.resolve(shape.cols));
                    }
                }
            }
        }
        out
    }

    /// The `NUM_MATRIX_COLS` configurations (column panel `AllColumns`, the fourth of
    /// [`Self::enumerate`]'s column panels).
    fn line_depends_on_shape(&self, index: usize) -> bool {
        (index / 16) % 4 == 3
    }

    fn len(&self) -> usize {
        ROW_PANELS.len() * (COLUMN_PANELS.len() + 1) * SPLITS.len() * 8
    }

    fn default_config(&self, shape: &MatrixShape) -> SpadeConfig {
        SpadeConfig {
            row_panels: 32,
            column_panels: ColumnPanels::AllColumns,
            split: 32,
            barrier: false,
            bypass: false,
            reorder: false,
        }
        .resolve(shape.cols)
    }

    /// Row panels, split and column panels must be values of the space (a fixed width equal
    /// to `shape.cols` is the substituted `NUM_MATRIX_COLS`); the matrix must have columns.
    fn validate(&self, c: &SpadeConfig, shape: &MatrixShape) -> Result<()> {
        if !ROW_PANELS.contains(&c.row_panels) {
            return Err(space_error(
                "row_panels",
                c.row_panels,
                "not in {4, 32, 256, 2048}",
            ));
        }
        if !SPLITS.contains(&c.split) {
            return Err(space_error("split", c.split, "not in {32, 256}"));
        }
        if shape.cols == 0 {
            return Err(space_error(
                "column_panels",
                c.column_panels,
                "matrix has no columns",
            ));
        }
        let w = c.column_panels.resolve(shape.cols);
        if !COLUMN_PANELS.contains(&w) && w as usize != shape.cols {
            return Err(space_error(
                "column_panels",
                c.column_panels,
                format!(
                    "not in {{1024, 16384, 65536, NUM_MATRIX_COLS = {}}}",
                    shape.cols
                ),
            ));
        }
        Ok(())
    }

    /// `row_panels column_panels split barrier bypass reorder`, column panels resolved.
    fn to_line(&self, c: &SpadeConfig) -> String {
        c.to_tokens().join(" ")
    }

    /// \[inferred\] A column panel at least as wide as the matrix is `NUM_MATRIX_COLS`.
    fn duplicate_key(&self, c: &SpadeConfig, shape: &MatrixShape) -> String {
        let w = c.column_panels.resolve(shape.cols);
        let cap = u32::try_from(shape.cols).unwrap_or(u32::MAX);
        let c = SpadeConfig {
            column_panels: ColumnPanels::Fixed(w.min(cap)),
            ..*c
        };
        c.to_tokens().join(" ")
    }
}

//! The registry of schedule spaces, keyed by name and by (target, kernel), and [`AnySpace`],
//! one type for any of them.
//!
//! | name | target | kernel | space |
//! |---|---|---|---|
//! | `taco-spmm`, `taco-sddmm`, `taco-spmv` | `cpu-taco` | SpMM, SDDMM, SpMV | [`TacoSpace::waco`] |
//! | `spade-spmm`, `spade-sddmm` | `spade` | SpMM, SDDMM | [`SpadeSpace`] |
//! | `sparsetir-spmm`, `sparsetir-sddmm` | `gpu-sparsetir` | SpMM, SDDMM | [`SparseTirSpace`] |
//!
//! SPADE and SparseTIR have no SpMV space: asking for one is
//! [`ErrorKind::UnsupportedKernel`](crate::ErrorKind::UnsupportedKernel).
//!
//! An [`AnySpace`] prints its configurations in one of two [`LineForm`]s: the toolchain's
//! native line (WACO SuperSchedule, SPADE's six values, SparseTIR's seven) or COGNATE's
//! unified line (what COGNATE/DASH heads parse, see [`cognate`](super::cognate)).
//! [`LineForm::for_schema`] picks the form a head's schema parses.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use super::{
    space_error, GpuConfig, Kernel, MatrixShape, ScheduleSpace, ShapeStatuses, SpadeConfig,
    SpadeSpace, SparseTirSpace, SuperSchedule, TacoSpace, Target, ToUnified, Unified,
};
use crate::error::{Error, Result};
use crate::schedule::Schema;

/// One registered space: its name and the (target, kernel) pair it is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpaceEntry {
    /// The name, `<target short name>-<kernel>` (e.g. `taco-spmm`).
    pub name: &'static str,
    /// The target.
    pub target: Target,
    /// The kernel.
    pub kernel: Kernel,
}

/// Every registered space, in a fixed order (TACO, SPADE, SparseTIR; SpMM, SDDMM, SpMV).
pub const SPACES: [SpaceEntry; 7] = [
    entry("taco-spmm", Target::CpuTaco, Kernel::SpMM),
    entry("taco-sddmm", Target::CpuTaco, Kernel::SDDMM),
    entry("taco-spmv", Target::CpuTaco, Kernel::SpMV),
    entry("spade-spmm", Target::Spade, Kernel::SpMM),
    entry("spade-sddmm", Target::Spade, Kernel::SDDMM),
    entry("sparsetir-spmm", Target::GpuSparseTir, Kernel::SpMM),
    entry("sparsetir-sddmm", Target::GpuSparseTir, Kernel::SDDMM),
];

const fn entry(name: &'static str, target: Target, kernel: Kernel) -> SpaceEntry {
    SpaceEntry {
        name,
        target,
        kernel,
    }
}

/// Which text line a space prints for each configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LineForm {
    /// The toolchain's own line (WACO SuperSchedule tokens, SPADE's six values, SparseTIR's
    /// seven): what WACO heads parse.
    Native,
    /// COGNATE's unified line (`I J K loop_1..loop_7 <hetero>`): what COGNATE/DASH heads parse.
    Unified,
}

impl LineForm {
    /// The canonical name (`native`, `unified`).
    pub fn as_str(self) -> &'static str {
        match self {
            LineForm::Native => "native",
            LineForm::Unified => "unified",
        }
    }

    /// The form `schema` parses for `space`: native if the schema accepts the native line of
    /// the space's default configuration, else unified if it accepts the unified line.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when the schema
    /// accepts neither (the head is not for this space); the message gives both reasons.
    pub fn for_schema(schema: &Schema, space: &AnySpace) -> Result<LineForm> {
        let shape = MatrixShape::new(1024, 1024, 4096);
        let default = space.default_config(&shape);
        let native = match schema.parse_line(&default.native_line()) {
            Ok(_) => return Ok(LineForm::Native),
            Err(e) => e,
        };
        let unified = default
            .to_unified()
            .and_then(|u| schema.parse_line(&u.to_line()));
        match unified {
            Ok(_) => Ok(LineForm::Unified),
            Err(u) => Err(Error::invalid_argument(format!(
                "schema '{}' parses neither the native nor the unified lines of space '{}' \
                 (native: {native}; unified: {u})",
                schema.name(),
                space.entry().name
            ))),
        }
    }
}

impl FromStr for LineForm {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "native" => Ok(LineForm::Native),
            "unified" => Ok(LineForm::Unified),
            other => Err(Error::invalid_argument(format!(
                "unknown line form '{other}' (expected native or unified)"
            ))),
        }
    }
}

impl fmt::Display for LineForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parameters of the registered spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceOptions {
    /// SparseTIR's feature size `F` (dense columns of SpMM's `B`, SDDMM's reduction length).
    /// Default 128.
    pub feat_size: u32,
    /// The line form. Default [`LineForm::Native`].
    pub form: LineForm,
}

impl Default for SpaceOptions {
    fn default() -> Self {
        Self {
            feat_size: 128,
            form: LineForm::Native,
        }
    }
}

/// A configuration of any registered space.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyConfig {
    /// A WACO SuperSchedule (TACO).
    Taco(SuperSchedule),
    /// A SPADE configuration.
    Spade(SpadeConfig),
    /// A SparseTIR configuration.
    SparseTir(GpuConfig),
}

impl AnyConfig {
    /// The target this configuration is for.
    pub fn target(&self) -> Target {
        match self {
            AnyConfig::Taco(_) => Target::CpuTaco,
            AnyConfig::Spade(_) => Target::Spade,
            AnyConfig::SparseTir(_) => Target::GpuSparseTir,
        }
    }

    /// The configuration in its toolchain's own input form, for a matrix of `shape`:
    ///
    /// | target | form | example |
    /// |---|---|---|
    /// | TACO | a stock `taco` command line ([`TacoProgram::command_line`](crate::program::taco::TacoProgram::command_line), all cores) | `taco "C(i1,i0,j)=A(k,i1,i0)*B(k,j)" -f=C:ddd … -s="parallelize(i1b,CPUThread,NoRaces)" -nthreads=2 -schedule=dynamic,16` |
    /// | SPADE | the papers' CSV row with `name` in the first column ([`SpadeRow`](super::SpadeRow)) | `m, 4, 1024, 32, 0, 0, 0` |
    /// | SparseTIR | the JSON configuration ([`GpuConfig::to_json`]) | `{"kernel":"spmm","row_tile":8,…}` |
    ///
    /// `name` is used by SPADE only (the matrix name column). A space's default renders as
    /// the toolchain's own default program through
    /// [`SpaceCandidates::render`](crate::SpaceCandidates::render) (TACO: its CSR program).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) when a TACO SuperSchedule fails its
    /// structural checks (an enumerated configuration never does);
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty matrix.
    ///
    /// # Example
    /// ```
    /// use dashrank::schedule::space::{AnyConfig, MatrixShape, SpadeConfig, SuperSchedule};
    /// use dashrank::Kernel;
    /// let shape = MatrixShape::new(1000, 200, 5000);
    /// let line = "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16";
    /// let taco = AnyConfig::Taco(SuperSchedule::parse(Kernel::SpMM, line)?);
    /// assert!(taco.render("m", &shape)?.starts_with("taco \"C(i1,i0,j)=A(k,i1,i0)*B(k,j)\""));
    /// let spade = AnyConfig::Spade(SpadeConfig::from_tokens(&["4", "1024", "32", "0", "0", "0"])?);
    /// assert_eq!(spade.render("144", &shape)?, "144, 4, 1024, 32, 0, 0, 0");
    /// # Ok::<(), dashrank::Error>(())
    /// ```
    pub fn render(&self, name: &str, shape: &MatrixShape) -> Result<String> {
        use crate::program::taco::{TacoOptions, TacoProgram};
        Ok(match self {
            AnyConfig::Taco(c) => {
                TacoProgram::from_superschedule(c, shape, &TacoOptions::default())?.command_line()
            }
            AnyConfig::Spade(c) => super::SpadeRow {
                name: name.to_owned(),
                config: *c,
                time: None,
            }
            .to_csv(),
            AnyConfig::SparseTir(c) => c.to_json(),
        })
    }

    /// The toolchain's own line ([`LineForm::Native`]).
    pub fn native_line(&self) -> String {
        match self {
            AnyConfig::Taco(c) => c.to_line(),
            AnyConfig::Spade(c) => c.to_tokens().join(" "),
            AnyConfig::SparseTir(c) => super::sparsetir::native_line(c),
        }
    }
}

impl ToUnified for AnyConfig {
    fn to_unified(&self) -> Result<Unified> {
        match self {
            AnyConfig::Taco(c) => c.to_unified(),
            AnyConfig::Spade(c) => c.to_unified(),
            AnyConfig::SparseTir(c) => c.to_unified(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Inner {
    Taco(TacoSpace),
    Spade(SpadeSpace),
    SparseTir(SparseTirSpace),
}

/// Any registered space, with the line form it prints: what the C ABI, the TVM module and the
/// CLI enumerate and rank.
///
/// # Example
/// ```
/// use dashrank::schedule::space::{AnySpace, LineForm, MatrixShape, ScheduleSpace, SpaceOptions};
/// use dashrank::{ErrorKind, Kernel, Target};
/// let space = AnySpace::from_name("spade-sddmm", &SpaceOptions::default())?;
/// assert_eq!((space.target(), space.kernel()), (Target::Spade, Kernel::SDDMM));
/// let list = space.candidates(&MatrixShape::new(100, 5000, 900));
/// assert_eq!(list.items.len(), 256);
///
/// let opts = SpaceOptions { feat_size: 64, form: LineForm::Unified };
/// let gpu = AnySpace::new(Target::GpuSparseTir, Kernel::SpMM, &opts)?;
/// assert_eq!(gpu.entry().name, "sparsetir-spmm");
/// let err = AnySpace::new(Target::Spade, Kernel::SpMV, &opts).unwrap_err();
/// assert!(matches!(err.kind(), ErrorKind::UnsupportedKernel { .. }));
/// # Ok::<(), dashrank::Error>(())
/// ```
///
/// # Threads
/// Plain data: `Send + Sync`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnySpace {
    inner: Inner,
    form: LineForm,
}

impl AnySpace {
    /// The space for `(target, kernel)` with these options.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnsupportedKernel`](crate::ErrorKind::UnsupportedKernel) when the target
    /// has no space for the kernel.
    pub fn new(target: Target, kernel: Kernel, options: &SpaceOptions) -> Result<Self> {
        let inner = match target {
            Target::CpuTaco => Inner::Taco(TacoSpace::waco(kernel)),
            Target::Spade => Inner::Spade(SpadeSpace::new(kernel)?),
            Target::GpuSparseTir => {
                Inner::SparseTir(SparseTirSpace::new(kernel, options.feat_size)?)
            }
        };
        Ok(Self {
            inner,
            form: options.form,
        })
    }

    /// The space named `<target>-<kernel>` (see [`SPACES`]; the target by its short or
    /// canonical name, e.g. `taco-spmm` or `cpu-taco-spmm`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnsupportedKernel`](crate::ErrorKind::UnsupportedKernel) for a target and
    /// kernel without a space (`spade-spmv`);
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for any other unknown
    /// name (the message lists the registered names).
    pub fn from_name(name: &str, options: &SpaceOptions) -> Result<Self> {
        let name = name.trim();
        let parsed = name.rsplit_once('-').and_then(|(t, k)| {
            let target = t.parse::<Target>().ok()?;
            Some((target, k.parse::<Kernel>().ok()?))
        });
        let Some((target, kernel)) = parsed else {
            let names: Vec<&str> = SPACES.iter().map(|e| e.name).collect();
            return Err(Error::invalid_argument(format!(
                "unknown schedule space '{name}' (expected one of: {})",
                names.join(", ")
            )));
        };
        Self::new(target, kernel, options)
    }

    /// The same space printing lines in `form`.
    pub fn with_form(mut self, form: LineForm) -> Self {
        self.form = form;
        self
    }

    /// The registry entry of this space.
    pub fn entry(&self) -> SpaceEntry {
        let (target, kernel) = (self.target(), self.kernel());
        SPACES
            .iter()
            .copied()
            .find(|e| e.target == target && e.kernel == kernel)
            .unwrap_or(entry("unregistered", target, kernel))
    }

    /// The target.
    pub fn target(&self) -> Target {
        match &self.inner {
            Inner::Taco(_) => Target::CpuTaco,
            Inner::Spade(_) => Target::Spade,
            Inner::SparseTir(_) => Target::GpuSparseTir,
        }
    }

    /// The kernel.
    pub fn kernel(&self) -> Kernel {
        match &self.inner {
            Inner::Taco(s) => s.kernel,
            Inner::Spade(s) => s.kernel(),
            Inner::SparseTir(s) => s.kernel(),
        }
    }

    /// The line form.
    pub fn form(&self) -> LineForm {
        self.form
    }

    fn wrong_target(&self, config: &AnyConfig) -> Error {
        space_error(
            "config",
            config.target(),
            format!(
                "a {} configuration given to space {}",
                config.target(),
                self.entry().name
            ),
        )
    }
}

impl From<TacoSpace> for AnySpace {
    /// A custom TACO space (e.g. shrunk split lists), printing native lines.
    fn from(space: TacoSpace) -> Self {
        Self {
            inner: Inner::Taco(space),
            form: LineForm::Native,
        }
    }
}

impl From<SpadeSpace> for AnySpace {
    fn from(space: SpadeSpace) -> Self {
        Self {
            inner: Inner::Spade(space),
            form: LineForm::Native,
        }
    }
}

impl From<SparseTirSpace> for AnySpace {
    fn from(space: SparseTirSpace) -> Self {
        Self {
            inner: Inner::SparseTir(space),
            form: LineForm::Native,
        }
    }
}

impl ScheduleSpace for AnySpace {
    type Config = AnyConfig;

    /// The registered name, with `-unified` appended in unified form.
    fn name(&self) -> String {
        match self.form {
            LineForm::Native => self.entry().name.to_owned(),
            LineForm::Unified => format!("{}-unified", self.entry().name),
        }
    }

    fn enumerate(&self, shape: &MatrixShape) -> Vec<AnyConfig> {
        match &self.inner {
            Inner::Taco(s) => s
                .enumerate(shape)
                .into_iter()
                .map(AnyConfig::Taco)
                .collect(),
            Inner::Spade(s) => s
                .enumerate(shape)
                .into_iter()
                .map(AnyConfig::Spade)
                .collect(),
            Inner::SparseTir(s) => {
                let all = s.enumerate(shape).into_iter();
                all.map(AnyConfig::SparseTir).collect()
            }
        }
    }

    fn default_config(&self, shape: &MatrixShape) -> AnyConfig {
        match &self.inner {
            Inner::Taco(s) => AnyConfig::Taco(s.default_config(shape)),
            Inner::Spade(s) => AnyConfig::Spade(s.default_config(shape)),
            Inner::SparseTir(s) => AnyConfig::SparseTir(s.default_config(shape)),
        }
    }

    /// The wrapped space's rules; in unified form the configuration must also have a unified
    /// form.
    fn validate(&self, config: &AnyConfig, shape: &MatrixShape) -> Result<()> {
        match (&self.inner, config) {
            (Inner::Taco(s), AnyConfig::Taco(c)) => s.validate(c, shape)?,
            (Inner::Spade(s), AnyConfig::Spade(c)) => s.validate(c, shape)?,
            (Inner::SparseTir(s), AnyConfig::SparseTir(c)) => s.validate(c, shape)?,
            _ => return Err(self.wrong_target(config)),
        }
        if self.form == LineForm::Unified {
            config.to_unified()?;
        }
        Ok(())
    }

    /// The native or unified line; empty when the configuration has no unified form (the
    /// model then reports that candidate alone as unparsable).
    fn to_line(&self, config: &AnyConfig) -> String {
        match self.form {
            LineForm::Native => config.native_line(),
            LineForm::Unified => config.to_unified().map(|u| u.to_line()).unwrap_or_default(),
        }
    }

    fn duplicate_key(&self, config: &AnyConfig, shape: &MatrixShape) -> String {
        match (&self.inner, config) {
            (Inner::Taco(s), AnyConfig::Taco(c)) => s.duplicate_key(c, shape),
            (Inner::Spade(s), AnyConfig::Spade(c)) => s.duplicate_key(c, shape),
            (Inner::SparseTir(s), AnyConfig::SparseTir(c)) => s.duplicate_key(c, shape),
            _ => format!("{}: {}", config.target(), config.native_line()),
        }
    }

    fn len(&self) -> usize {
        match &self.inner {
            Inner::Taco(s) => s.len(),
            Inner::Spade(s) => s.len(),
            Inner::SparseTir(s) => s.len(),
        }
    }

    fn configs_into(&self, range: Range<usize>, shape: &MatrixShape, out: &mut Vec<AnyConfig>) {
        match &self.inner {
            Inner::Taco(s) => {
                let mut v = Vec::with_capacity(range.len());
                s.configs_into(range, shape, &mut v);
                out.extend(v.into_iter().map(AnyConfig::Taco));
            }
            Inner::Spade(s) => {
                let mut v = Vec::with_capacity(range.len());
                s.configs_into(range, shape, &mut v);
                out.extend(v.into_iter().map(AnyConfig::Spade));
            }
            Inner::SparseTir(s) => {
                let mut v = Vec::with_capacity(range.len());
                s.configs_into(range, shape, &mut v);
                out.extend(v.into_iter().map(AnyConfig::SparseTir));
            }
        }
    }

    fn lines_into(&self, range: Range<usize>, shape: &MatrixShape, out: &mut Vec<String>) {
        match (&self.inner, self.form) {
            (Inner::Taco(s), LineForm::Native) => s.lines_into(range, shape, out),
            _ => {
                let mut configs = Vec::with_capacity(range.len());
                self.configs_into(range, shape, &mut configs);
                out.extend(configs.iter().map(|c| self.to_line(c)));
            }
        }
    }

    fn line_depends_on_shape(&self, index: usize) -> bool {
        match &self.inner {
            Inner::Taco(s) => s.line_depends_on_shape(index),
            Inner::Spade(s) => s.line_depends_on_shape(index),
            Inner::SparseTir(s) => s.line_depends_on_shape(index),
        }
    }

    fn default_index(&self, shape: &MatrixShape) -> Option<usize> {
        match &self.inner {
            Inner::Taco(s) => s.default_index(shape),
            Inner::Spade(s) => s.default_index(shape),
            Inner::SparseTir(s) => s.default_index(shape),
        }
    }

    fn index_of(&self, config: &AnyConfig, shape: &MatrixShape) -> Option<usize> {
        match (&self.inner, config) {
            (Inner::Taco(s), AnyConfig::Taco(c)) => s.index_of(c, shape),
            (Inner::Spade(s), AnyConfig::Spade(c)) => s.index_of(c, shape),
            (Inner::SparseTir(s), AnyConfig::SparseTir(c)) => s.index_of(c, shape),
            _ => None,
        }
    }

    /// The wrapped space's statuses (see [`Mapped`](super::Mapped)'s note on configurations
    /// without a unified form).
    fn shape_statuses(&self, shape: &MatrixShape) -> ShapeStatuses {
        match &self.inner {
            Inner::Taco(s) => s.shape_statuses(shape),
            Inner::Spade(s) => s.shape_statuses(shape),
            Inner::SparseTir(s) => s.shape_statuses(shape),
        }
    }
}

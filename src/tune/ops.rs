//! What tuning needs to know about a space's candidates: their toolchain form, what makes two
//! of them the same program, whether one must not run, and their neighbours.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::error::Result;
use crate::pattern::CsrPattern;
use crate::program::taco::TacoOptions;
use crate::rank::{SpaceCandidates, SpaceConfig};
use crate::schedule::space::{AnyConfig, TacoSpace};

/// The space-specific side of [`tune`](super::tune).
pub trait CandidateOps {
    /// Candidate `index` as its toolchain runs it.
    ///
    /// # Errors
    ///
    /// When the candidate has no toolchain form (a hand-built configuration).
    fn render(&self, index: usize) -> Result<String>;

    /// What makes two candidates the same program: by default their toolchain form.
    ///
    /// # Errors
    ///
    /// As [`Self::render`].
    fn key(&self, index: usize) -> Result<String> {
        self.render(index)
    }

    /// Why candidate `index` must not run on this matrix, if so.
    fn refuse(&self, index: usize) -> Option<String> {
        let _ = index;
        None
    }

    /// Candidates one step away from `index` in the space (none by default).
    fn neighbours(&self, index: usize) -> Vec<usize> {
        let _ = index;
        Vec::new()
    }

    /// The family of candidate `index` for
    /// [`TuneOptions::seeds_per_family`](super::TuneOptions::seeds_per_family): candidates
    /// of one family share the structure neighbour steps rarely leave (for TACO, the loop
    /// order). `None` (the default) puts each candidate in a family of its own.
    fn family(&self, index: usize) -> Option<String> {
        let _ = index;
        None
    }
}

/// Candidates of any space, by their lines: the form is the line the head parsed, no
/// neighbours.
pub struct LineOps<'a, C: SpaceConfig> {
    candidates: &'a SpaceCandidates<C>,
}

impl<'a, C: SpaceConfig> LineOps<'a, C> {
    /// Ops over these candidates.
    pub fn new(candidates: &'a SpaceCandidates<C>) -> Self {
        Self { candidates }
    }
}

impl<C: SpaceConfig> CandidateOps for LineOps<'_, C> {
    fn render(&self, index: usize) -> Result<String> {
        Ok(self.candidates.line(index).unwrap_or_default())
    }
}

/// Candidates of a registered space in their toolchain's form
/// ([`SpaceCandidates::render_with`]); for TACO: distinct by program, refused when stock TACO
/// cannot build their program ([`TacoProgram::stock_taco_limit`](crate::program::taco::TacoProgram::stock_taco_limit))
/// or their layout of the matrix is too large ([`with_pattern`](Self::with_pattern)), with
/// WACO-space neighbours ([`crate::schedule::space::SuperSchedule::neighbours`]) and their
/// loop order as their family.
pub struct ToolchainOps<'a> {
    candidates: &'a SpaceCandidates<AnyConfig>,
    name: String,
    taco: TacoOptions,
    pattern: Option<&'a CsrPattern>,
    /// Layout verdicts by the sparse tensor's layout (formats and modes).
    layouts: RefCell<HashMap<String, Option<String>>>,
}

impl<'a> ToolchainOps<'a> {
    /// Ops over these candidates; `name` is the matrix name SPADE rows carry.
    pub fn new(candidates: &'a SpaceCandidates<AnyConfig>, name: &str) -> Self {
        Self {
            candidates,
            name: name.to_owned(),
            taco: TacoOptions::default(),
            pattern: None,
            layouts: RefCell::new(HashMap::new()),
        }
    }

    /// TACO programs with these options.
    pub fn with_taco(mut self, taco: TacoOptions) -> Self {
        self.taco = taco;
        self
    }

    /// The matrix itself, so that TACO candidates whose layout of it exceeds the limit are
    /// refused before they run.
    pub fn with_pattern(mut self, pattern: &'a CsrPattern) -> Self {
        self.pattern = Some(pattern);
        self
    }
}

impl CandidateOps for ToolchainOps<'_> {
    fn render(&self, index: usize) -> Result<String> {
        self.candidates.render_with(index, &self.name, &self.taco)
    }

    fn refuse(&self, index: usize) -> Option<String> {
        let program = match self.candidates.config(index)? {
            AnyConfig::Taco(_) => self.candidates.taco_program(index, &self.taco).ok()?,
            _ => return None,
        };
        if let Some(why) = program.stock_taco_limit() {
            return Some(why);
        }
        let pattern = self.pattern?;
        let sparse = program.sparse();
        let key = format!("{}:{:?}", sparse.format_letters(), sparse.dims());
        let key = format!(
            "{key}:{:?}",
            sparse.vars.iter().map(|v| &v.name).collect::<Vec<_>>()
        );
        let mut cache = self.layouts.borrow_mut();
        cache
            .entry(key)
            .or_insert_with(|| {
                program
                    .check_layout(pattern, &self.taco)
                    .err()
                    .map(|e| e.to_string())
            })
            .clone()
    }

    fn neighbours(&self, index: usize) -> Vec<usize> {
        let Some(AnyConfig::Taco(s)) = self.candidates.config(index) else {
            return Vec::new();
        };
        let rules = TacoSpace::waco(s.kernel);
        s.neighbours(&rules)
            .into_iter()
            .filter_map(|n| self.candidates.index_of(&AnyConfig::Taco(n)))
            .collect()
    }

    fn family(&self, index: usize) -> Option<String> {
        match self.candidates.config(index)? {
            AnyConfig::Taco(s) => Some(s.order.join(" ")),
            _ => None,
        }
    }
}

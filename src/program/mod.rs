//! Toolchain programs: what a ranked candidate becomes in the toolchain that runs it.
//!
//! The last stage of the data path (matrix → featurizer → schedule encoding → model →
//! ranking → **program**). [`taco`] turns a WACO SuperSchedule into a complete stock-TACO
//! program (command line, C++ API snippet, repacked sparse tensor); SparseTIR and SPADE
//! configurations are already their toolchains' input (a JSON configuration, a CSV row) and
//! render through [`AnyConfig::render`](crate::schedule::space::AnyConfig::render).

pub mod taco;

use crate::error::{Error, Result};
use crate::rank::SpaceCandidates;
use crate::schedule::space::AnyConfig;
use taco::{TacoOptions, TacoProgram};

impl SpaceCandidates<AnyConfig> {
    /// Candidate `index` in its toolchain's own form for this matrix, with TACO programs
    /// using every core ([`Self::render_with`]).
    ///
    /// # Errors
    ///
    /// As [`Self::render_with`].
    pub fn render(&self, index: usize, name: &str) -> Result<String> {
        self.render_with(index, name, &TacoOptions::default())
    }

    /// Candidate `index` in its toolchain's own form ([`AnyConfig::render`]); the default of
    /// a TACO space is TACO's own CSR program ([`TacoProgram::csr`]).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an index out of
    /// range; as [`AnyConfig::render`].
    pub fn render_with(&self, index: usize, name: &str, taco: &TacoOptions) -> Result<String> {
        match self.config(index) {
            Some(AnyConfig::Taco(_)) => Ok(self.taco_program(index, taco)?.command_line()),
            Some(other) => other.render(name, &self.shape()),
            None => Err(out_of_range(index, self.len())),
        }
    }

    /// The TACO program of candidate `index`: the SuperSchedule's program, or TACO's CSR for
    /// the space's default.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an index out of
    /// range or a candidate of another toolchain; as [`TacoProgram::from_superschedule`].
    pub fn taco_program(&self, index: usize, options: &TacoOptions) -> Result<TacoProgram> {
        match self.config(index) {
            Some(AnyConfig::Taco(s)) if index == self.default_index() => {
                TacoProgram::csr(s.kernel, &self.shape(), options)
            }
            Some(AnyConfig::Taco(s)) => TacoProgram::from_superschedule(&s, &self.shape(), options),
            Some(other) => Err(Error::invalid_argument(format!(
                "candidate {index} is a {} configuration, not a TACO SuperSchedule",
                other.target()
            ))),
            None => Err(out_of_range(index, self.len())),
        }
    }
}

fn out_of_range(index: usize, len: usize) -> Error {
    Error::invalid_argument(format!(
        "candidate index {index} is out of range (0..{len})"
    ))
}

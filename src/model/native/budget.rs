//! The load budget of the native engine: how much work importing and compiling one graph may
//! do, so that a bundle whose files pass every integrity check but hold a hostile graph (a
//! 2^20-wide layer, 60 000 chained ReLUs, an input concatenated with itself 512 times) fails
//! with [`ErrorKind::LoadBudget`] instead of exhausting the host's memory.
//!
//! The budget counts *operations*: one per number the importer or the compiler allocates
//! (weights, affine forms, packed layers, lookup tables), one per multiply-add it performs,
//! and [`CHUNK_ROWS`] per column of every row buffer of the compiled program (the working
//! memory of one 128-row chunk when the model runs). Every charge is made before the work it
//! pays for. A graph compiled within budget `B` has used at most `8·B` bytes of memory at
//! load and holds at most `B` numbers, so one scored row costs at most `B` multiply-adds.
//!
//! `B = BundleLimits::native_budget_base + BundleLimits::native_budget_per_byte × bytes`, with
//! `bytes` the size of the graph's files (a head's schedule embedder and predictor together:
//! they compile as one program). See `docs/reliability.md`.

use std::cell::Cell;

use crate::bundle::{BundleFile, BundleLimits};
use crate::error::{Error, ErrorKind, Result};

/// Rows of the working chunk of a compiled program (see `program`); each column of a row
/// buffer is charged this many times.
pub(crate) const CHUNK_ROWS: u64 = 128;

/// `a × b`, saturating.
pub(crate) fn prod(a: usize, b: usize) -> u64 {
    (a as u64).saturating_mul(b as u64)
}

/// The running total of one graph's load against its budget.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: u64,
    used: Cell<u64>,
    /// The files, for errors and the formula.
    graph: String,
    bytes: u64,
}

impl Budget {
    /// The budget of a graph made of `files`.
    pub(crate) fn new(limits: &BundleLimits, files: &[&BundleFile]) -> Self {
        let bytes: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
        let graph: Vec<&str> = files.iter().map(|f| f.origin.as_str()).collect();
        Self {
            limit: limits
                .native_budget_base
                .saturating_add(limits.native_budget_per_byte.saturating_mul(bytes)),
            used: Cell::new(0),
            graph: graph.join(" + "),
            bytes,
        }
    }

    /// Charges `ops` operations for work at `node`, or fails without charging when the total
    /// would pass the limit.
    pub(crate) fn charge(&self, ops: u64, node: &str) -> Result<()> {
        let total = self.used.get().saturating_add(ops);
        if total > self.limit {
            return Err(Error::new(ErrorKind::LoadBudget {
                graph: self.graph.clone(),
                node: node.to_string(),
                needed: total,
                budget: self.limit,
                bytes: self.bytes,
            }));
        }
        self.used.set(total);
        Ok(())
    }
}

//! TACO's scheduling commands as the stock `taco` CLI and C++ API spell them
//! (`include/taco/index_notation/index_notation.h`, `ir_tags.h`, `tools/taco.cpp`).

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::schedule::space::{parse_u32, space_error};

/// TACO's `ParallelUnit` (`ir_tags.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum ParallelUnit {
    NotParallel,
    DefaultUnit,
    GPUBlock,
    GPUWarp,
    GPUThread,
    CPUThread,
    CPUVector,
}

/// TACO's `OutputRaceStrategy` (`ir_tags.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum OutputRaceStrategy {
    IgnoreRaces,
    NoRaces,
    Atomics,
    Temporary,
    ParallelReduction,
}

/// TACO's `BoundType` (`index_notation.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum BoundType {
    MinExact,
    MinConstraint,
    MaxExact,
    MaxConstraint,
}

/// TACO's `AssembleStrategy` (`ir_tags.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum AssembleStrategy {
    Append,
    Insert,
}

macro_rules! named_enum {
    ($t:ty, $what:literal, [$($v:ident),*]) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self { $(Self::$v => f.write_str(stringify!($v)),)* }
            }
        }
        impl FromStr for $t {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                match s.trim() {
                    $(stringify!($v) => Ok(Self::$v),)*
                    other => Err(space_error($what, other, concat!("unknown ", $what))),
                }
            }
        }
    };
}
named_enum!(
    ParallelUnit,
    "ParallelUnit",
    [
        NotParallel,
        DefaultUnit,
        GPUBlock,
        GPUWarp,
        GPUThread,
        CPUThread,
        CPUVector
    ]
);
named_enum!(
    OutputRaceStrategy,
    "OutputRaceStrategy",
    [IgnoreRaces, NoRaces, Atomics, Temporary, ParallelReduction]
);
named_enum!(
    BoundType,
    "BoundType",
    [MinExact, MinConstraint, MaxExact, MaxConstraint]
);
named_enum!(AssembleStrategy, "AssembleStrategy", [Append, Insert]);

/// One TACO scheduling command, as `-s=` takes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TacoCommand {
    /// `bound(index,bound_index,extent,kind)`: the loop over `index` runs over the constant
    /// `extent` (a compile-time trip count) under the new name `bound_index`.
    Bound {
        /// The bounded index variable.
        index: String,
        /// Its new name.
        bound: String,
        /// The bound.
        extent: u32,
        /// How the bound applies.
        kind: BoundType,
    },
    /// `reorder(v1,…,vn)`: the loop nest order, outermost first.
    Reorder(Vec<String>),
    /// `parallelize(index,unit,races)`.
    Parallelize {
        /// The parallel variable.
        index: String,
        /// Hardware unit.
        unit: ParallelUnit,
        /// How output races are handled.
        races: OutputRaceStrategy,
    },
    /// `assemble(tensor,strategy)`: how a sparse result is assembled (stock TACO needs
    /// `Insert` to parallelize a loop that writes a sparse result).
    Assemble {
        /// The result tensor.
        tensor: String,
        /// The strategy.
        strategy: AssembleStrategy,
    },
}

impl fmt::Display for TacoCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TacoCommand::Bound {
                index,
                bound,
                extent,
                kind,
            } => write!(f, "bound({index},{bound},{extent},{kind})"),
            TacoCommand::Reorder(v) => write!(f, "reorder({})", v.join(",")),
            TacoCommand::Parallelize { index, unit, races } => {
                write!(f, "parallelize({index},{unit},{races})")
            }
            TacoCommand::Assemble { tensor, strategy } => {
                write!(f, "assemble({tensor},{strategy})")
            }
        }
    }
}

impl FromStr for TacoCommand {
    type Err = Error;

    /// Parses `name(arg,…)`; whitespace around arguments and surrounding quotes are ignored.
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().trim_matches('"');
        let bad = |why: &str| space_error("taco command", s, why.to_owned());
        let (name, rest) = t
            .split_once('(')
            .ok_or_else(|| bad("expected name(args)"))?;
        let args = rest.strip_suffix(')').ok_or_else(|| bad("missing ')'"))?;
        let args: Vec<String> = args.split(',').map(|a| a.trim().to_owned()).collect();
        if args
            .iter()
            .any(|a| !is_identifier(a) && a.parse::<u32>().is_err())
        {
            return Err(bad("arguments must be identifiers or unsigned integers"));
        }
        match (name.trim(), args.len()) {
            ("bound", 4) => Ok(TacoCommand::Bound {
                index: args[0].clone(),
                bound: args[1].clone(),
                extent: parse_u32("bound extent", &args[2])?,
                kind: args[3].parse()?,
            }),
            ("reorder", _) => Ok(TacoCommand::Reorder(args)),
            ("parallelize", 3) => Ok(TacoCommand::Parallelize {
                index: args[0].clone(),
                unit: args[1].parse()?,
                races: args[2].parse()?,
            }),
            ("assemble", 2) => Ok(TacoCommand::Assemble {
                tensor: args[0].clone(),
                strategy: args[1].parse()?,
            }),
            _ => Err(bad(
                "expected bound/4, reorder/n, parallelize/3 or assemble/2",
            )),
        }
    }
}

/// A C identifier: a letter or `_`, then letters, digits or `_`.
pub(crate) fn is_identifier(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

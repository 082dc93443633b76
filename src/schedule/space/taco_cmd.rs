//! TACO scheduling commands and formats, and their mapping to and from WACO SuperSchedules.
//!
//! TACO's scheduling language (`include/taco/index_notation/index_notation.h`, `ir_tags.h`):
//! `split(i,i1,i0,32)`, `reorder(i1,k1,i0,k0,j1,j0)`, `parallelize(i1,CPUThread,NoRaces)`;
//! formats are TACO's `-f=A:ds:0,1` strings (level letters `d` dense, `s` compressed, then the
//! mode ordering).
//!
//! # Mapping a SuperSchedule to TACO input
//!
//! Evidence: `code_generator/{spmm,sddmm,spmv}.cc` and `code_generator/include/
//! {execution_manager.hpp,format_schedule.hpp}` in `nullplay/Workload-Aware-Co-Optimization`.
//! WACO splits an axis `x` by extent `s` in the *format*: `FormatScheduler::split` replaces
//! mode `x` by `x1` (outer, `ceil(dim/s)`) and `x0` (inner, `s`), so the sparse matrix becomes
//! the 4-mode tensor `A(x1,x0,y1,y0)`; the level order of `A` is the loop order restricted to
//! `A`'s loops (`freorder("A", rA)`); then `execution_manager.hpp::gen_sched` emits
//! `reorder(…)` and `parallelize(v,CPUThread,NoRaces|Atomics)` (`Atomics` when `v` is not an
//! output index) and the OpenMP runtime gets `omp_set_schedule(omp_sched_dynamic, chunk)`.
//! We write that as stock TACO text:
//!
//! | SuperSchedule | [`TacoSchedule`] text |
//! |---|---|
//! | `isplit` = s (each split axis, line order) | `-s=split(i,i1,i0,s)` (also for s = 1) |
//! | loop order | `-s=reorder(…)` |
//! | flags `x1f x0f y1f y0f` | `-f=A:<levels>:<ordering>` over the modes `(x1,x0,y1,y0)` |
//! | `paridx` | `-s=parallelize(paridx,CPUThread,NoRaces\|Atomics)` |
//! | `parnum`, `parchunk` | `OMP_NUM_THREADS=parnum OMP_SCHEDULE=dynamic,parchunk` |
//!
//! The format's level `l` stores mode `ordering[l]` with letter `levels[l]`; flag `0` ↦ `s`,
//! `1` ↦ `d`. Example (SpMM `16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16`):
//! `OMP_NUM_THREADS=48 OMP_SCHEDULE=dynamic,16 -f=A:ssds:2,3,0,1 -s=split(i,i1,i0,16)
//! -s=split(k,k1,k0,256) -s=split(j,j1,j0,1) -s=reorder(k1,k0,i1,i0,j1,j0)
//! -s=parallelize(i1,CPUThread,NoRaces)`.
//!
//! Differences from WACO's own driver, which are presentation only: the driver drops splits
//! of extent 1 and renames `x1` to `x` (`spmm.cc`, "Erase Split Size = 1"), and appends `b` to
//! dense loop names it bounds (`bound(x,xb,dim,MaxExact)`); we keep every split so the mapping
//! is lossless. Format splitting is not a stock TACO primitive (WACO repacks coordinates
//! itself), so the `-f` string describes the already-split 4-mode tensor.

use std::fmt;
use std::str::FromStr;

use super::taco::{LevelFormat, SuperSchedule};
use super::Kernel;
use super::{parse_u32, space_error};
use crate::error::{Error, Result};

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

/// One TACO scheduling command.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TacoCommand {
    /// `split(index,outer,inner,factor)`: `inner` has extent `factor`.
    Split {
        /// The split index variable.
        index: String,
        /// New outer variable.
        outer: String,
        /// New inner variable.
        inner: String,
        /// Inner extent.
        factor: u32,
    },
    /// `reorder(v1,…,vn)`.
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
}

impl fmt::Display for TacoCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TacoCommand::Split {
                index,
                outer,
                inner,
                factor,
            } => write!(f, "split({index},{outer},{inner},{factor})"),
            TacoCommand::Reorder(v) => write!(f, "reorder({})", v.join(",")),
            TacoCommand::Parallelize { index, unit, races } => {
                write!(f, "parallelize({index},{unit},{races})")
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
        if args.iter().any(String::is_empty) {
            return Err(bad("empty argument"));
        }
        match (name.trim(), args.len()) {
            ("split", 4) => Ok(TacoCommand::Split {
                index: args[0].clone(),
                outer: args[1].clone(),
                inner: args[2].clone(),
                factor: parse_u32("split factor", &args[3])?,
            }),
            ("reorder", _) => Ok(TacoCommand::Reorder(args)),
            ("parallelize", 3) => Ok(TacoCommand::Parallelize {
                index: args[0].clone(),
                unit: args[1].parse()?,
                races: args[2].parse()?,
            }),
            _ => Err(bad("expected split/4, reorder/n or parallelize/3")),
        }
    }
}

/// A TACO format string `tensor:levels:ordering`, e.g. `A:ssds:2,3,0,1`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SplitFormat {
    /// Tensor name.
    pub tensor: String,
    /// Level formats in storage order.
    pub levels: Vec<LevelFormat>,
    /// `ordering[l]` = the tensor mode stored at level `l`.
    pub ordering: Vec<usize>,
}

impl fmt::Display for SplitFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let letters: String = self.levels.iter().map(|l| l.letter()).collect();
        let ord: Vec<String> = self.ordering.iter().map(usize::to_string).collect();
        write!(f, "{}:{letters}:{}", self.tensor, ord.join(","))
    }
}

impl FromStr for SplitFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = |why: &str| space_error("format", s, why.to_owned());
        let mut parts = s.trim().split(':');
        let tensor = parts.next().unwrap_or_default().to_owned();
        let letters = parts.next().ok_or_else(|| bad("expected tensor:levels"))?;
        let levels = letters
            .chars()
            .map(|c| match c {
                'd' => Ok(LevelFormat::Uncompressed),
                's' => Ok(LevelFormat::Compressed),
                _ => Err(bad("level letters must be d or s")),
            })
            .collect::<Result<Vec<_>>>()?;
        let ordering = match parts.next() {
            None => (0..levels.len()).collect(),
            Some(o) => o
                .split(',')
                .map(|x| {
                    x.trim()
                        .parse::<usize>()
                        .map_err(|_| bad("bad mode ordering"))
                })
                .collect::<Result<Vec<_>>>()?,
        };
        let identifier = tensor.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && tensor
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !identifier {
            return Err(bad(
                "the tensor name must be an identifier (letters, digits, _)",
            ));
        }
        if levels.is_empty() {
            return Err(bad("expected at least one level letter (d or s)"));
        }
        let mut sorted = ordering.clone();
        sorted.sort_unstable();
        if tensor.is_empty()
            || parts.next().is_some()
            || sorted != (0..levels.len()).collect::<Vec<_>>()
        {
            return Err(bad("expected tensor:levels[:permutation of 0..n]"));
        }
        Ok(SplitFormat {
            tensor,
            levels,
            ordering,
        })
    }
}

/// A CPU schedule in TACO terms: the format of `A`, the commands, and the OpenMP settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TacoSchedule {
    /// The kernel (fixes the index names and which indices are outputs).
    pub kernel: Kernel,
    /// Format of the split sparse matrix `A(x1,x0,y1,y0)`.
    pub format: SplitFormat,
    /// Scheduling commands, in order.
    pub commands: Vec<TacoCommand>,
    /// `OMP_NUM_THREADS`.
    pub threads: u32,
    /// Chunk of `OMP_SCHEDULE=dynamic,chunk`.
    pub chunk: u32,
}

fn split_modes(kernel: Kernel) -> Vec<String> {
    let [x, y] = kernel.sparse_axes();
    vec![
        format!("{x}1"),
        format!("{x}0"),
        format!("{y}1"),
        format!("{y}0"),
    ]
}

impl TacoSchedule {
    /// The TACO form of a SuperSchedule (see the module docs for the mapping).
    ///
    /// # Errors
    ///
    /// The SuperSchedule fails [`SuperSchedule::validate`].
    pub fn from_superschedule(s: &SuperSchedule) -> Result<Self> {
        s.validate()?;
        let modes = split_modes(s.kernel);
        let mut levels = Vec::with_capacity(4);
        let mut ordering = Vec::with_capacity(4);
        for v in s.order.iter() {
            if let Some(m) = modes.iter().position(|x| x == v) {
                ordering.push(m);
                levels.push(s.formats[m]);
            }
        }
        let mut commands: Vec<TacoCommand> = s
            .kernel
            .split_axes()
            .iter()
            .zip(&s.splits)
            .map(|(a, f)| TacoCommand::Split {
                index: a.to_string(),
                outer: format!("{a}1"),
                inner: format!("{a}0"),
                factor: *f,
            })
            .collect();
        commands.push(TacoCommand::Reorder(s.order.clone()));
        commands.push(TacoCommand::Parallelize {
            index: s.par_index.clone(),
            unit: ParallelUnit::CPUThread,
            races: race_for(s.kernel, &s.par_index),
        });
        Ok(TacoSchedule {
            kernel: s.kernel,
            format: SplitFormat {
                tensor: "A".to_owned(),
                levels,
                ordering,
            },
            commands,
            threads: s.threads,
            chunk: s.chunk,
        })
    }

    /// Back to a SuperSchedule.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) when the schedule is not one WACO
    /// can express: a split axis without exactly one `split(x,x1,x0,s)`, no or several
    /// `reorder`/`parallelize`, a race strategy other than the one TACO needs, a format not
    /// over `A`'s four split modes, or `A`'s level order differing from the loop order.
    pub fn to_superschedule(&self) -> Result<SuperSchedule> {
        let k = self.kernel;
        let mut splits = Vec::new();
        for a in k.split_axes() {
            let found: Vec<u32> = self
                .commands
                .iter()
                .filter_map(|c| match c {
                    TacoCommand::Split {
                        index,
                        outer,
                        inner,
                        factor,
                    } if *index == a.to_string()
                        && *outer == format!("{a}1")
                        && *inner == format!("{a}0") =>
                    {
                        Some(*factor)
                    }
                    _ => None,
                })
                .collect();
            match found.as_slice() {
                [f] => splits.push(*f),
                _ => {
                    return Err(space_error(
                        "split",
                        a,
                        format!("need exactly one split({a},{a}1,{a}0,s)"),
                    ))
                }
            }
        }
        let reorders: Vec<&Vec<String>> = self
            .commands
            .iter()
            .filter_map(|c| match c {
                TacoCommand::Reorder(v) => Some(v),
                _ => None,
            })
            .collect();
        let [order] = reorders.as_slice() else {
            return Err(space_error(
                "reorder",
                reorders.len(),
                "need exactly one reorder",
            ));
        };
        let pars: Vec<(&String, ParallelUnit, OutputRaceStrategy)> = self
            .commands
            .iter()
            .filter_map(|c| match c {
                TacoCommand::Parallelize { index, unit, races } => Some((index, *unit, *races)),
                _ => None,
            })
            .collect();
        let [(par, unit, races)] = pars.as_slice() else {
            return Err(space_error(
                "parallelize",
                pars.len(),
                "need exactly one parallelize",
            ));
        };
        if *unit != ParallelUnit::CPUThread {
            return Err(space_error(
                "parallelize",
                unit,
                "WACO parallelizes over CPUThread",
            ));
        }
        let want = race_for(k, par);
        if *races != want {
            return Err(space_error(
                "parallelize",
                races,
                format!("{par} needs {want} (execution_manager.hpp gen_sched)"),
            ));
        }
        let f = &self.format;
        if f.tensor != "A" || f.levels.len() != 4 {
            return Err(space_error("format", f, "expected A with 4 levels"));
        }
        let modes = split_modes(k);
        let a_order: Vec<&String> = order.iter().filter(|v| modes.contains(v)).collect();
        let level_vars: Vec<&String> = f.ordering.iter().map(|&m| &modes[m]).collect();
        if a_order != level_vars {
            return Err(space_error(
                "format",
                f,
                "A's level order must follow the loop order (WACO freorder)",
            ));
        }
        let mut formats = [LevelFormat::Compressed; 4];
        for (l, &m) in f.ordering.iter().enumerate() {
            formats[m] = f.levels[l];
        }
        let s = SuperSchedule {
            kernel: k,
            splits,
            order: (*order).clone(),
            formats,
            par_index: (*par).clone(),
            threads: self.threads,
            chunk: self.chunk,
        };
        s.validate()?;
        Ok(s)
    }

    /// Parses the text form written by `Display` (tokens in any order, `-s=` values may be
    /// double-quoted).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) on an unknown or malformed token, or
    /// a missing format / OpenMP setting.
    pub fn parse(kernel: Kernel, text: &str) -> Result<Self> {
        let (mut format, mut threads, mut chunk) = (None, None, None);
        let mut commands = Vec::new();
        for tok in text.split_whitespace() {
            if let Some(v) = tok.strip_prefix("OMP_NUM_THREADS=") {
                threads = Some(parse_u32("OMP_NUM_THREADS", v)?);
            } else if let Some(v) = tok.strip_prefix("OMP_SCHEDULE=") {
                let c = v
                    .strip_prefix("dynamic,")
                    .ok_or_else(|| space_error("OMP_SCHEDULE", v, "expected dynamic,<chunk>"))?;
                chunk = Some(parse_u32("OMP_SCHEDULE", c)?);
            } else if let Some(v) = tok.strip_prefix("-f=") {
                format = Some(v.trim_matches('"').parse::<SplitFormat>()?);
            } else if let Some(v) = tok.strip_prefix("-s=") {
                commands.push(v.parse::<TacoCommand>()?);
            } else {
                return Err(space_error("taco schedule", tok, "unknown token"));
            }
        }
        let missing = |what: &str| space_error("taco schedule", text, format!("missing {what}"));
        Ok(TacoSchedule {
            kernel,
            format: format.ok_or_else(|| missing("-f="))?,
            commands,
            threads: threads.ok_or_else(|| missing("OMP_NUM_THREADS="))?,
            chunk: chunk.ok_or_else(|| missing("OMP_SCHEDULE="))?,
        })
    }
}

impl fmt::Display for TacoSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "OMP_NUM_THREADS={} OMP_SCHEDULE=dynamic,{} -f={}",
            self.threads, self.chunk, self.format
        )?;
        for c in &self.commands {
            write!(f, " -s={c}")?;
        }
        Ok(())
    }
}

/// `NoRaces` when the parallel loop indexes the output, else `Atomics` (`gen_sched`).
fn race_for(kernel: Kernel, var: &str) -> OutputRaceStrategy {
    let axis = var.chars().next().unwrap_or(' ');
    if kernel.output_axes().contains(&axis) {
        OutputRaceStrategy::NoRaces
    } else {
        OutputRaceStrategy::Atomics
    }
}

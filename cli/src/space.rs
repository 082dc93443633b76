//! `--space`, `--kernel`, `--feat-size`, `--max-split` and `--head` to a head and a space.

use anyhow::{bail, Result};
use dashrank::schedule::space::{AnySpace, SpaceOptions, TacoSpace};
use dashrank::{workflow, Kernel, Model, Target};

use crate::flags::{KernelArg, SpaceArg, SpaceArgs};

/// The head that ranks the chosen space (named, or the model's one head for the target and
/// kernel) and the space for that head's kernel.
pub fn resolve_space(
    model: &Model,
    head: Option<&str>,
    space: SpaceArg,
    args: &SpaceArgs,
) -> Result<(String, AnySpace)> {
    let target = match space {
        SpaceArg::Taco => Target::CpuTaco,
        SpaceArg::Spade => Target::Spade,
        SpaceArg::Sparsetir => Target::GpuSparseTir,
    };
    let kernel = args.kernel.map(|k| match k {
        KernelArg::Spmm => Kernel::SpMM,
        KernelArg::Sddmm => Kernel::SDDMM,
        KernelArg::Spmv => Kernel::SpMV,
    });
    let h = workflow::select_head(model.info(), head, Some(target), kernel)?;
    let options = SpaceOptions {
        feat_size: args.feat_size,
        ..SpaceOptions::default()
    };
    let space = match (args.max_split, target) {
        (None, _) => AnySpace::new(target, h.kernel, &options)?,
        (Some(n), Target::CpuTaco) => AnySpace::from(TacoSpace::waco_up_to(h.kernel, n, n)),
        (Some(_), _) => bail!("--max-split cuts the TACO space; {target} spaces are fixed"),
    };
    Ok((h.name.clone(), space))
}

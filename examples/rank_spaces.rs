//! How a TACO (CPU), a SparseTIR (GPU) and a SPADE (accelerator) user rank their toolchain's
//! whole schedule space for one matrix, with the toolchain's default always reported.
//!
//! ```sh
//! cargo run --release --example rank_spaces -- [BUNDLE] [MATRIX.csr|.mtx]
//! ```
//! Defaults: the seeded COGNATE fixture bundle `tests/data/fixtures/tiny-cognate` (random
//! weights: the ranking shows the mechanics, not real performance) and a real matrix from
//! `../shared` when present, else a synthetic banded matrix.

use dashrank::model::MatrixEmbedding;
use dashrank::rank::SpaceConfig;
use dashrank::schedule::space::{
    Kernel, Mapped, MatrixShape, SpadeSpace, SparseTirSpace, TacoSpace,
};
use dashrank::{CostModel, CsrPattern, LoadOptions, Model, SpaceCandidates, SpaceTopK};

fn banded(n: usize) -> dashrank::Result<CsrPattern> {
    let (mut row_ptr, mut cols) = (vec![0usize], Vec::new());
    for r in 0..n {
        for c in r.saturating_sub(2)..(r + 3).min(n) {
            cols.push(c as u32);
        }
        row_ptr.push(cols.len());
    }
    CsrPattern::new(n, n, row_ptr, cols)
}

/// The matrix named on the command line, else the real one from `../shared` when present,
/// else a synthetic banded matrix.
fn matrix_from(arg: Option<&String>) -> dashrank::Result<CsrPattern> {
    let real = "../shared/data/waco/matrices/cca.csr";
    match arg {
        Some(path) => CsrPattern::read_file(path),
        None if std::path::Path::new(real).exists() => CsrPattern::read_file(real),
        None => banded(2000),
    }
}

/// Prints one space's top candidates (the default flagged) with their lines.
fn print_top(name: &str, len: usize, line: &dyn Fn(usize) -> Option<String>, top: &SpaceTopK) {
    println!("\n{name}: {len} candidates, {} ranked", top.ranked);
    for e in &top.entries {
        let tag = if e.is_default { "default" } else { "" };
        let rank = e.rank.map_or("-".to_string(), |r| (r + 1).to_string());
        println!(
            "  #{rank:<6} score {:>10.5}  {tag:<7}  {}",
            e.score,
            line(e.index).unwrap_or_default()
        );
    }
}

/// The measure-callback loop: measures the model's top 3 and the default, keeps the fastest.
/// (Here a stand-in "measurement"; a compiler would time the generated kernel.)
fn tune_and_print<C: SpaceConfig>(
    model: &Model,
    matrix: &MatrixEmbedding,
    name: &str,
    space: &SpaceCandidates<C>,
) -> dashrank::Result<()> {
    let tuned = model.tune(matrix, space, 3, |index| Some(1.0 + index as f64 % 7.0))?;
    if let Some(best) = &tuned.best {
        println!(
            "\n{name} tuning: fastest measured {} ({:?} ms); default {:?} ms",
            space.line(best.index).unwrap_or_default(),
            best.ms,
            tuned.default_measurement().and_then(|m| m.ms)
        );
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bundle = args
        .first()
        .map_or("tests/data/fixtures/tiny-cognate", String::as_str);
    let pattern = matrix_from(args.get(1))?;
    let model = Model::load(bundle, &LoadOptions::default())?;
    let shape = MatrixShape::from(&pattern);
    let matrix = model.embed_matrix(&pattern)?; // once per matrix, cached

    // TACO (CPU): WACO SuperSchedules, mapped to COGNATE's unified form for this model.
    // (A WACO bundle's `cpu-taco/*` head takes `TacoSpace` lines directly.)
    let mut taco = TacoSpace::waco(Kernel::SpMM);
    taco.splits = taco.splits.iter().map(|_| vec![1, 4, 16]).collect();
    taco.chunks = vec![16, 64];
    let cpu = model.prepare_space("cpu-taco/spmm", &Mapped(taco), &shape)?;
    // SparseTIR (GPU): the 288 SpMM configurations for feature size 64.
    let gpu = model.prepare_space(
        "gpu-sparsetir/spmm",
        &Mapped(SparseTirSpace::new(Kernel::SpMM, 64)?),
        &shape,
    )?;
    // SPADE: the 256 configurations with NUM_MATRIX_COLS = this matrix's columns.
    let spade = model.prepare_space(
        "spade/spmm",
        &Mapped(SpadeSpace::new(Kernel::SpMM)?),
        &shape,
    )?;

    println!(
        "matrix {} x {}, {} nonzeros; model {} ({})",
        pattern.nrows(),
        pattern.ncols(),
        pattern.nnz(),
        model.info().model_name,
        model.info().family
    );
    let tops = [
        model.top_k_with_default(&matrix, &cpu, 3)?,
        model.top_k_with_default(&matrix, &gpu, 3)?,
        model.top_k_with_default(&matrix, &spade, 3)?,
    ];
    print_top("TACO", cpu.len(), &|i| cpu.line(i), &tops[0]);
    print_top("SparseTIR", gpu.len(), &|i| gpu.line(i), &tops[1]);
    print_top("SPADE", spade.len(), &|i| spade.line(i), &tops[2]);

    tune_and_print(&model, &matrix, "SPADE", &spade)?;
    Ok(())
}

//! Tests of the schedule spaces.

use std::path::{Path, PathBuf};

use super::cognate::SEGMENTS;
use super::*;
use crate::program::taco::{TacoOptions, TacoProgram};

fn shape(rows: usize, cols: usize) -> MatrixShape {
    MatrixShape::new(rows, cols, rows * 4)
}

// ---------------------------------------------------------------- COGNATE worked example

#[test]
fn papers_worked_example_maps_exactly() {
    let row = SpadeRow::parse_csv("144, 4, 1024, 1, 0, 0, 0, 38.83592").unwrap();
    assert_eq!(row.name, "144");
    assert_eq!(row.config.split, 32);
    assert_eq!(row.time, Some(38.83592));
    let u = row.config.to_unified().unwrap();
    assert_eq!(
        u.to_csv_row(&row.name, row.time),
        "144, 4, 1024, 32, 6, 7, 2, 4, 1, 3, 5, 0, 0, 0, 38.83592"
    );
    assert_eq!(
        u.to_csv_row("144", None),
        "144, 4, 1024, 32, 6, 7, 2, 4, 1, 3, 5, 0, 0, 0"
    );
    assert_eq!(u.loop_names(), ["k2", "k3", "i2", "j2", "i1", "j1", "k1"]);
}

#[test]
fn spade_barrier_order() {
    let mut c = SpadeRow::parse_csv("m, 32, 16384, 256, 1, 1, 0")
        .unwrap()
        .config;
    let u = c.to_unified().unwrap();
    assert_eq!(u.loop_names(), ["k2", "k3", "j2", "i2", "i1", "j1", "k1"]);
    assert_eq!(u.to_line(), "32 16384 256 6 7 4 2 1 3 5 1 1 0");
    c.column_panels = ColumnPanels::AllColumns;
    assert!(c.to_unified().is_err());
    assert!(c.resolve(777).to_unified().is_ok());
}

#[test]
fn unified_rejects_bad_segments() {
    assert!(Unified::from_segments([1, 1, 1], &["i1"; 7], vec![]).is_err());
    assert!(Unified::from_segments([1, 1, 1], &SEGMENTS[..6], vec![]).is_err());
    let u = Unified::from_segments([1, 1, 1], &SEGMENTS, vec![]).unwrap();
    assert_eq!(u.order, [1, 2, 3, 4, 5, 6, 7]);
}

// ---------------------------------------------------------------- SPADE

#[test]
fn spade_space_has_256_and_marks_duplicates() {
    let space = SpadeSpace::new(Kernel::SpMM).unwrap();
    let big = shape(100_000, 100_000);
    assert_eq!(space.enumerate(&big).len(), 256);
    let list = space.candidates(&big);
    assert_eq!(list.items.len(), 256);
    assert_eq!(list.valid_indices().len(), 256);
    let d = &list.items[list.default_index];
    assert_eq!(d.line, "32 100000 32 0 0 0");

    // 5000 columns: 16384 and 65536 panels duplicate NUM_MATRIX_COLS; 1024 does not.
    let small = shape(10, 5000);
    let list = space.candidates(&small);
    assert_eq!(list.items.len(), 256);
    let dups = list
        .items
        .iter()
        .filter(|c| matches!(c.status, CandidateStatus::Duplicate { .. }))
        .count();
    assert_eq!(dups, 4 * 2 * 8 * 2);
    for c in &list.items {
        if let CandidateStatus::Duplicate { of } = c.status {
            assert!(of < list.items.len());
            assert_eq!(
                list.items[of].config.column_panels,
                ColumnPanels::Fixed(16384)
            );
            assert!(list.items[of].status.is_valid());
        }
    }
    let d = SpadeSpace::new(Kernel::SDDMM)
        .unwrap()
        .default_config(&small);
    assert!(space.validate(&d, &small).is_ok());
}

#[test]
fn spade_csv_round_trip_and_validation() {
    for line in [
        "a, 4, 1024, 32, 0, 1, 1, 1.5",
        "b, 2048, NUM_MATRIX_COLS, 256, 1, 0, 0",
        "c, 256, 65536, 256, 1, 1, 1",
    ] {
        let row = SpadeRow::parse_csv(line).unwrap();
        assert_eq!(row.to_csv(), line);
    }
    assert_eq!(
        SpadeRow::parse_csv("x, 4, 1024, 8, 0, 0, 0")
            .unwrap()
            .config
            .split,
        256
    );
    for bad in [
        "x, 4, 1024, 32, 2, 0, 0",
        "x, 4, 1024, 32, 0, 0",
        "x, 4, wide, 32, 0, 0, 0",
        "x, 4, 1024, 32, 0, 0, 0, fast",
    ] {
        assert!(SpadeRow::parse_csv(bad).is_err(), "{bad}");
    }
    let space = SpadeSpace::new(Kernel::SpMM).unwrap();
    let s = shape(10, 5000);
    let mut c = SpadeRow::parse_csv("x, 4, 1024, 64, 0, 0, 0")
        .unwrap()
        .config;
    assert!(space.validate(&c, &s).is_err());
    c.split = 32;
    c.row_panels = 5;
    assert!(space.validate(&c, &s).is_err());
    c.row_panels = 4;
    c.column_panels = ColumnPanels::Fixed(4999);
    assert!(space.validate(&c, &s).is_err());
    c.column_panels = ColumnPanels::Fixed(5000);
    assert!(space.validate(&c, &s).is_ok());
}

// ---------------------------------------------------------------- SparseTIR

#[test]
fn sparsetir_spaces_have_288_and_valid_defaults() {
    for kernel in [Kernel::SpMM, Kernel::SDDMM] {
        let space = SparseTirSpace::new(kernel, 128).unwrap();
        let s = shape(1000, 1000);
        let all = space.enumerate(&s);
        assert_eq!(all.len(), 288, "{kernel:?}");
        let list = space.candidates(&s);
        assert_eq!(list.items.len(), 288, "default must be enumerated");
        let d = &list.items[list.default_index];
        assert!(d.status.is_valid(), "{:?}", d.status);
        let lines: std::collections::HashSet<_> = list.lines().into_iter().collect();
        assert_eq!(lines.len(), 288);
        // Every configuration maps to a unified form.
        for c in &all {
            let u = c.to_unified().unwrap();
            assert_eq!(u.j_split, 1);
            let p_j = u.order.iter().position(|&n| n == 3).unwrap();
            assert_eq!(u.order[p_j + 1], 4, "j' right after j");
        }
    }
    let spmm = SparseTirSpace::new(Kernel::SpMM, 128).unwrap();
    let d = spmm.default_config(&shape(1, 1));
    assert_eq!(spmm.to_line(&d), "8 32 2 1 0 1 1");
    assert_eq!(
        d.to_unified().unwrap().to_line(),
        "8 1 64 1 2 5 7 3 4 6 32 2 1 1 1"
    );
}

#[test]
fn sparsetir_validity_and_json() {
    let s = shape(10, 10);
    let spmm = SparseTirSpace::new(Kernel::SpMM, 32).unwrap();
    let list = spmm.candidates(&s);
    // F = 32: tile 16·{1,2} and 32·1 divide 32; 16·4, 32·2, 32·4 do not.
    let valid = list.valid_indices().len();
    assert_eq!(valid, 6 * 3 * 2 * 2 * 2);
    let sddmm = SparseTirSpace::new(Kernel::SDDMM, 16).unwrap();
    let d = sddmm.default_config(&s);
    assert_eq!(d.thread_x, 16);
    assert!(sddmm.validate(&d, &s).is_ok());
    let mut bad = d;
    bad.bind_k1 = true;
    assert!(sddmm.validate(&bad, &s).is_err());
    bad = d;
    bad.row_tile = 128;
    bad.thread_x = 16;
    assert!(sddmm.validate(&bad, &s).is_err());

    let json = d.to_json();
    assert!(json.contains("\"kernel\":\"sddmm\""), "{json}");
    assert!(json.contains("\"order\":\"reduction_outer\""), "{json}");
    assert_eq!(GpuConfig::from_json(&json).unwrap(), d);
    let all = spmm.enumerate(&s);
    assert_eq!(
        GpuConfig::list_from_json(&GpuConfig::list_to_json(&all)).unwrap(),
        all
    );
    assert!(GpuConfig::from_json(r#"{"kernel":"spmv"}"#).is_err());
    assert!(GpuConfig::from_json(&json.replace('}', ",\"extra\":1}")).is_err());
}

// ---------------------------------------------------------------- TACO / WACO

const SPMM_LINE: &str = "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16";

#[test]
fn waco_line_of_the_digest_example_in_unified_form() {
    let s = SuperSchedule::parse(Kernel::SpMM, &format!("{SPMM_LINE} = 14.815")).unwrap();
    assert_eq!(s.to_line(), SPMM_LINE);
    // WACO SpMM (k→j, j→k): I=16, J=256, K=1; order k1 k0 i1 i0 j1 j0 → j1 j2 i1 i2 k1 k2 k3.
    let u = s.to_unified().unwrap();
    assert_eq!(u.loop_names(), ["j1", "j2", "i1", "i2", "k1", "k2", "k3"]);
    assert_eq!(u.to_line(), "16 256 1 3 4 1 2 5 6 7 1 0 0 0 1 48 16");
}

#[test]
fn bad_superschedules_are_refused() {
    // Bad SuperSchedules.
    for bad in [
        "3 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16",
        "16 256 1 k0 k1 i1 i0 j1 j0 1 0 0 0 i1 48 16",
        "16 256 1 k1 k0 i1 i0 j1 j1 1 0 0 0 i1 48 16",
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 2 0 i1 48 16",
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i0 48 16",
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 0",
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48",
    ] {
        assert!(SuperSchedule::parse(Kernel::SpMM, bad).is_err(), "{bad}");
    }
}

fn collected_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/waco/collected");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipping: WACO collected data not found at {}",
            dir.display()
        );
        None
    }
}

fn round_trip_collected(kernel: Kernel, sub: &str) {
    let Some(dir) = collected_dir() else { return };
    let mut n = 0;
    let mut files: Vec<_> = std::fs::read_dir(dir.join(sub))
        .unwrap()
        .flatten()
        .collect();
    files.sort_by_key(|e| e.path());
    for entry in files {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let s = SuperSchedule::parse(kernel, line).unwrap();
            let (body, _) = crate::schedule::split_measured(line);
            assert_eq!(
                s.to_line(),
                body.split_whitespace().collect::<Vec<_>>().join(" ")
            );
            let p = TacoProgram::from_superschedule(&s, &shape(1000, 700), &TacoOptions::default())
                .unwrap();
            assert_eq!(
                TacoProgram::parse_command_line(&p.command_line()).unwrap(),
                p
            );
            let u = s.to_unified().unwrap();
            assert_eq!(u.order.iter().map(|&x| u32::from(x)).sum::<u32>(), 28);
            n += 1;
        }
    }
    assert!(n > 100, "{sub}: only {n} lines");
}

#[test]
fn collected_spmm_lines_round_trip() {
    round_trip_collected(Kernel::SpMM, "SpMM");
}

#[test]
fn collected_sddmm_lines_round_trip() {
    round_trip_collected(Kernel::SDDMM, "SDDMM");
}

#[test]
fn spmv_round_trip_and_no_unified_form() {
    let line = "4 8 i1 k1 i0 k0 0 1 0 1 i1 48 64";
    let s = SuperSchedule::parse(Kernel::SpMV, line).unwrap();
    assert_eq!(s.to_line(), line);
    let p = TacoProgram::from_superschedule(&s, &shape(100, 100), &TacoOptions::default()).unwrap();
    assert_eq!(p.expression(), "C(i1,i0)=A(i1,k1,i0,k0)*B(k1,k0)");
    assert_eq!(p.sparse().format_letters(), "ssdd");
    assert!(s.to_unified().is_err());
}

#[test]
fn taco_space_sizes_and_defaults() {
    let s = shape(1 << 20, 1 << 20);
    let expect = [
        (
            Kernel::SpMM,
            611_712,
            "1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 32",
        ),
        (
            Kernel::SDDMM,
            544_320,
            "1 1 1 i1 i0 j1 j0 k1 k0 1 1 0 1 i1 48 32",
        ),
        (Kernel::SpMV, 31_104, "1 1 i1 i0 k1 k0 1 1 0 1 i1 48 128"),
    ];
    for (kernel, size, default) in expect {
        let space = TacoSpace::waco(kernel);
        let all = space.enumerate(&s);
        assert_eq!(all.len(), size, "{kernel:?}");
        let d = space.default_config(&s);
        assert_eq!(space.to_line(&d), default);
        assert!(all.contains(&d), "{kernel:?} default not enumerated");
        assert!(all.iter().take(2000).all(|c| c.validate().is_ok()));
        assert_eq!(all, space.enumerate(&s), "deterministic");
    }
}

#[test]
fn taco_space_small_matrix_duplicates() {
    let mut space = TacoSpace::waco(Kernel::SpMV);
    space.splits = vec![vec![1, 2, 4], vec![1, 8]];
    space.chunks = vec![32];
    let list = space.candidates(&shape(2, 100));
    // The default's chunk (128) is not in the list, so it is appended.
    assert_eq!(list.items.len(), 3 * 2 * 6 * 16 + 1);
    assert_eq!(list.default_index, 3 * 2 * 6 * 16);
    // isplit 4 ≥ rows (2) behaves like isplit 2.
    let dup = list
        .items
        .iter()
        .filter(|c| c.config.splits[0] == 4)
        .all(|c| matches!(c.status, CandidateStatus::Duplicate { .. }));
    assert!(dup);
    assert_eq!(
        list.items[list.default_index].line,
        "1 1 i1 i0 k1 k0 1 1 0 1 i1 48 128"
    );
    let mapped = Mapped(SpadeSpace::new(Kernel::SpMM).unwrap());
    let l = mapped.candidates(&shape(8, 1024));
    assert!(l.items.iter().all(|c| !c.line.is_empty()));
    assert_eq!(mapped.name(), "spade-spmm-unified");
}

// ---------------------------------------------------------------- registry

#[test]
fn registry_names_every_target_kernel_pair_with_a_space() {
    let opts = SpaceOptions::default();
    for e in SPACES {
        let by_name = AnySpace::from_name(e.name, &opts).unwrap();
        let by_pair = AnySpace::new(e.target, e.kernel, &opts).unwrap();
        assert_eq!(by_name, by_pair);
        assert_eq!(by_name.entry(), e);
        assert_eq!(by_name.name(), e.name);
        assert_eq!(e.name, format!("{}-{}", e.target.short_name(), e.kernel));
    }
    for target in Target::ALL {
        for kernel in Kernel::ALL {
            let registered = SPACES
                .iter()
                .any(|e| e.target == target && e.kernel == kernel);
            match AnySpace::new(target, kernel, &opts) {
                Ok(_) => assert!(registered, "{target} {kernel}"),
                Err(e) => {
                    assert!(!registered, "{target} {kernel}");
                    match e.kind() {
                        crate::ErrorKind::UnsupportedKernel {
                            target: t,
                            kernel: k,
                            supported,
                        } => {
                            assert_eq!((t.as_str(), k.as_str()), (target.as_str(), "spmv"));
                            assert_eq!(supported, &["spmm", "sddmm"]);
                        }
                        other => panic!("{other:?}"),
                    }
                }
            }
        }
    }
    let e = AnySpace::from_name("taco-spgemm", &opts).unwrap_err();
    assert!(e.to_string().contains("sparsetir-sddmm"), "{e}");
    let canonical = AnySpace::from_name("gpu-sparsetir-sddmm", &opts).unwrap();
    assert_eq!(canonical.entry().name, "sparsetir-sddmm");
    let e = AnySpace::from_name("spade-spmv", &opts).unwrap_err();
    assert!(
        matches!(e.kind(), crate::ErrorKind::UnsupportedKernel { .. }),
        "{e}"
    );
    assert!(SpadeSpace::new(Kernel::SpMV).is_err());
    assert!(SparseTirSpace::new(Kernel::SpMV, 64).is_err());
}

#[test]
fn any_space_equals_the_wrapped_space_in_both_forms() {
    let shape = shape(3000, 5000);
    let spade = SpadeSpace::new(Kernel::SpMM).unwrap();
    let any = AnySpace::from(spade);
    let (a, b) = (any.candidates(&shape), spade.candidates(&shape));
    assert_eq!(a.lines(), b.lines());
    assert_eq!(a.default_index, b.default_index);
    let statuses = |l: &CandidateList<AnyConfig>| -> Vec<CandidateStatus<'static>> {
        l.items.iter().map(|c| c.status.clone()).collect()
    };
    let want: Vec<CandidateStatus<'static>> = b.items.iter().map(|c| c.status.clone()).collect();
    assert_eq!(statuses(&a), want);

    let gpu = SparseTirSpace::new(Kernel::SDDMM, 16).unwrap();
    let unified = AnySpace::from(gpu).with_form(LineForm::Unified);
    assert_eq!(unified.name(), "sparsetir-sddmm-unified");
    let (a, b) = (unified.candidates(&shape), Mapped(gpu).candidates(&shape));
    assert_eq!(a.lines(), b.lines());
    assert_eq!(a.valid_indices(), b.valid_indices());

    // A configuration of another target is invalid for the space, never a panic.
    let taco = AnyConfig::Taco(SuperSchedule::parse(Kernel::SpMM, SPMM_LINE).unwrap());
    let e = unified.validate(&taco, &shape).unwrap_err();
    assert!(e.to_string().contains("sparsetir-sddmm"), "{e}");
}

#[test]
fn line_form_follows_the_schema() {
    let load = |dir: &str| {
        let path = format!("tests/data/fixtures/{dir}");
        crate::Model::load(path, &crate::LoadOptions::default()).unwrap()
    };
    let (waco, cognate) = (load("tiny-waco-spmm"), load("tiny-cognate"));
    let (waco, cognate) = (
        waco.schema("cpu-taco/spmm").unwrap(),
        cognate.schema("cpu-taco/spmm").unwrap(),
    );
    let taco = AnySpace::from_name("taco-spmm", &SpaceOptions::default()).unwrap();
    assert_eq!(LineForm::for_schema(waco, &taco).unwrap(), LineForm::Native);
    assert_eq!(
        LineForm::for_schema(cognate, &taco).unwrap(),
        LineForm::Unified
    );
    let spade = AnySpace::from_name("spade-spmm", &SpaceOptions::default()).unwrap();
    let e = LineForm::for_schema(waco, &spade).unwrap_err();
    assert!(e.to_string().contains("spade-spmm"), "{e}");
    assert_eq!("unified".parse::<LineForm>().unwrap(), LineForm::Unified);
    assert!("mapped".parse::<LineForm>().is_err());
}

#[test]
fn spade_and_sparsetir_configs_render_in_their_toolchains_form() {
    // The SPADE default for a 5000-column matrix, as the papers' CSV row.
    let space = AnySpace::from_name("spade-spmm", &SpaceOptions::default()).unwrap();
    let d = space.default_config(&shape(10, 5000));
    let row = d.render("cage4", &shape(10, 5000)).unwrap();
    assert_eq!(row, "cage4, 32, 5000, 32, 0, 0, 0");
    assert_eq!(
        AnyConfig::Spade(SpadeRow::parse_csv(&row).unwrap().config),
        d
    );

    // SparseTIR: JSON that reads back to the same configuration.
    let space = AnySpace::from_name("sparsetir-sddmm", &SpaceOptions::default()).unwrap();
    for c in space.enumerate(&shape(10, 10)).into_iter().take(20) {
        let AnyConfig::SparseTir(g) = &c else {
            panic!("{c:?}")
        };
        let json = c.render("m", &shape(10, 10)).unwrap();
        assert_eq!(GpuConfig::from_json(&json).unwrap(), *g);
        assert!(json.starts_with("{\"kernel\":\"sddmm\""), "{json}");
    }
}

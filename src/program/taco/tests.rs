//! Tests of TACO programs: the mapping, the text forms, and the repacking.

use super::*;
use crate::ErrorKind;

fn opts() -> TacoOptions {
    TacoOptions {
        threads: Some(2),
        ..TacoOptions::default()
    }
}

fn program(kernel: Kernel, line: &str, rows: usize, cols: usize) -> TacoProgram {
    let s = SuperSchedule::parse(kernel, line).unwrap();
    TacoProgram::from_superschedule(&s, &MatrixShape::new(rows, cols, rows), &opts()).unwrap()
}

fn commands(p: &TacoProgram) -> Vec<String> {
    p.commands().iter().map(ToString::to_string).collect()
}

#[test]
fn a_split_is_a_repacking_with_extent_one_loops_dropped() {
    // ksplit 256 covers the 200 columns: k1 (extent 1) goes, k keeps k0's place and flag.
    let p = program(
        Kernel::SpMM,
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16",
        1000,
        200,
    );
    assert_eq!(p.expression(), "C(i1,i0,j)=A(k,i1,i0)*B(k,j)");
    assert_eq!(p.sparse().format_letters(), "sds");
    assert_eq!(p.sparse().dims(), [200, 63, 16]);
    assert_eq!(p.tensors()[0].dims(), [63, 16, 256]);
    assert_eq!(
        commands(&p),
        [
            "bound(i1,i1b,63,MaxExact)",
            "bound(j,jb,256,MaxExact)",
            "reorder(k,i1b,i0,jb)",
            "parallelize(i1b,CPUThread,NoRaces)"
        ]
    );
    assert_eq!((p.threads(), p.chunk()), (2, 16));
    // The same line on a wider matrix keeps both k loops.
    let p = program(
        Kernel::SpMM,
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16",
        1000,
        800,
    );
    assert_eq!(p.expression(), "C(i1,i0,j)=A(k1,k0,i1,i0)*B(k1,k0,j)");
    assert_eq!(p.sparse().format_letters(), "ssds");
    assert_eq!(p.sparse().dims(), [4, 256, 63, 16]);
    // A split of 1 drops the inner loop: `i` takes i1's place and flag.
    let p = program(
        Kernel::SpMM,
        "1 8 4 k1 i1 i0 k0 j1 j0 0 1 1 0 i1 48 32",
        100,
        100,
    );
    assert_eq!(p.expression(), "C(i,j1,j0)=A(k1,i,k0)*B(k1,k0,j1,j0)");
    assert_eq!(p.sparse().format_letters(), "dss");
    assert!(commands(&p).contains(&"parallelize(i,CPUThread,NoRaces)".to_owned()));
}

#[test]
fn a_loop_dense_in_every_tensor_is_bounded_and_a_reduction_loop_races_atomically() {
    // SDDMM parallel over j1 (an output mode): NoRaces; the result has A's layout; no
    // `bound` (stock TACO's code for it beside `assemble` does not compile).
    let p = program(
        Kernel::SDDMM,
        "4 4 8 j1 i1 i0 j0 k1 k0 1 1 1 0 j1 48 8",
        64,
        64,
    );
    assert_eq!(
        p.expression(),
        "C(j1,i1,i0,j0)=A(j1,i1,i0,j0)*B(i1,i0,k1,k0)*D(j1,j0,k1,k0)"
    );
    assert_eq!(p.tensors()[0].levels, p.sparse().levels);
    assert_eq!(
        commands(&p),
        [
            "reorder(j1,i1,i0,j0,k1,k0)",
            "assemble(C,Insert)",
            "parallelize(j1,CPUThread,NoRaces)"
        ]
    );
    // Stock TACO cannot assemble that result (four levels); it can WACO's FixedCSR.
    assert!(
        p.stock_taco_limit().unwrap().contains("not ddds"),
        "{:?}",
        p.stock_taco_limit()
    );
    let fixed = program(
        Kernel::SDDMM,
        "1 1 1 i1 i0 j1 j0 k1 k0 1 1 0 1 i1 48 32",
        64,
        64,
    );
    assert_eq!(fixed.stock_taco_limit(), None);
    assert_eq!(fixed.loop_order(), ["i", "j", "k"]);
    let k_outside = program(
        Kernel::SDDMM,
        "1 1 16 i1 i0 k1 j1 j0 k0 1 1 0 1 i1 48 32",
        64,
        64,
    );
    assert!(k_outside.stock_taco_limit().unwrap().contains("innermost"));
    // Programs of the other kernels build.
    let spmm = program(
        Kernel::SpMM,
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16",
        100,
        100,
    );
    assert_eq!(spmm.stock_taco_limit(), None);
    assert_eq!(spmm.loop_order(), ["k", "i1", "i0", "j"]);
    // SpMV: compressed everywhere, nothing to bound.
    let p = program(Kernel::SpMV, "4 8 i1 k1 i0 k0 0 0 0 0 i1 48 64", 100, 100);
    assert_eq!(commands(&p)[0], "reorder(i1,k1,i0,k0)");
}

#[test]
fn the_default_is_tacos_own_csr() {
    let shape = MatrixShape::new(30, 40, 100);
    let spmm = TacoProgram::csr(Kernel::SpMM, &shape, &opts()).unwrap();
    assert_eq!(
        spmm.command_line(),
        "taco \"C(i,j)=A(i,k)*B(k,j)\" -f=C:dd -f=A:ds -f=B:dd -t=C:float -t=A:float \
         -t=B:float -d=C:30,256 -d=A:30,40 -d=B:40,256 \
         -s=\"parallelize(i,CPUThread,NoRaces)\" -nthreads=2 -schedule=dynamic,32"
    );
    let sddmm = TacoProgram::csr(Kernel::SDDMM, &shape, &opts()).unwrap();
    assert_eq!(sddmm.expression(), "C(i,j)=A(i,j)*B(i,k)*D(j,k)");
    assert_eq!(
        commands(&sddmm),
        ["assemble(C,Insert)", "parallelize(i,CPUThread,NoRaces)"]
    );
    let spmv = TacoProgram::csr(Kernel::SpMV, &shape, &opts()).unwrap();
    assert_eq!(spmv.expression(), "C(i)=A(i,k)*B(k)");
    assert_eq!(spmv.chunk(), 128);
    // WACO's FixedCSR is the default line: the same program plus `bound`.
    let fixed = program(
        Kernel::SpMM,
        "1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 32",
        30,
        40,
    );
    assert_eq!(fixed.expression(), spmm.expression());
    assert_eq!(
        commands(&fixed),
        [
            "bound(i,ib,30,MaxExact)",
            "bound(j,jb,256,MaxExact)",
            "reorder(ib,k,jb)",
            "parallelize(ib,CPUThread,NoRaces)"
        ]
    );
}

#[test]
fn threads_default_to_every_core_and_the_options_are_checked() {
    let s = SuperSchedule::parse(Kernel::SpMV, "4 8 i1 k1 i0 k0 0 0 0 0 i1 48 64").unwrap();
    let p =
        TacoProgram::from_superschedule(&s, &MatrixShape::new(9, 9, 9), &TacoOptions::default())
            .unwrap();
    let cores = std::thread::available_parallelism().unwrap().get() as u32;
    assert_eq!(p.threads(), cores);
    let err = TacoProgram::from_superschedule(&s, &MatrixShape::new(0, 9, 0), &opts()).unwrap_err();
    assert!(
        err.to_string().contains("1 to 2147483647 rows, got 0"),
        "{err}"
    );
    let wide = TacoOptions {
        dense_extent: 0,
        ..opts()
    };
    assert!(TacoProgram::csr(Kernel::SpMM, &MatrixShape::new(9, 9, 9), &wide).is_err());
}

#[test]
fn command_lines_and_snippets_of_every_kernel_read_back() {
    let cases = [
        (Kernel::SpMM, "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16"),
        (Kernel::SpMM, "2 4 8 i1 k1 i0 k0 j1 j0 0 1 1 0 i1 48 4"),
        (Kernel::SDDMM, "4 4 8 j1 i1 i0 j0 k1 k0 1 1 1 0 j1 48 8"),
        (Kernel::SpMV, "4 8 i1 k1 i0 k0 0 1 0 1 i1 48 64"),
    ];
    for (kernel, line) in cases {
        let p = program(kernel, line, 100, 300);
        let text = p.command_line();
        assert_eq!(TacoProgram::parse_command_line(&text).unwrap(), p, "{text}");
        let cpp = p.cpp_snippet();
        assert!(cpp.contains(&format!(
            "{};",
            p.expression()
                .replace(',', ", ")
                .replace('=', " = ")
                .replace('*', " * ")
        )));
        assert!(cpp.contains("taco_set_num_threads(2);"), "{cpp}");
        for c in p.commands() {
            let name = c.to_string();
            let name = name.split('(').next().unwrap();
            assert!(cpp.contains(&format!("stmt = stmt.{name}(")), "{cpp}");
        }
        let csr = TacoProgram::csr(kernel, &MatrixShape::new(7, 9, 20), &opts()).unwrap();
        assert_eq!(
            TacoProgram::parse_command_line(&csr.command_line()).unwrap(),
            csr
        );
    }
    for bad in [
        "tacco \"C(i)=A(i,k)*B(k)\"",
        "taco \"C(i)=A(i,k)*B(k)",
        "taco \"C(i)=A(i,k)*B(k)\" -f=C:d -f=A:ds -f=B:d -nthreads=1 -schedule=dynamic,1",
        "taco \"C(x)=A(x,k)*B(k)\" -f=C:d -f=A:ds -f=B:d -d=C:2 -d=A:2,3 -d=B:3 -nthreads=1 -schedule=dynamic,1",
        "taco \"C(i)=A(i,k)*B(k)\" -f=C:d -f=A:dq -f=B:d -d=C:2 -d=A:2,3 -d=B:3",
        "taco \"C(i)=A(i,k)*B(k)\" -f=C:d -f=A:ds -f=B:d -d=C:2 -d=A:3,3 -d=B:3 -nthreads=1 -schedule=dynamic,1",
        "taco \"C(i)=A(i,k)*B(k)\" -s=\"split(i,i0,i1,4)\"",
    ] {
        assert!(TacoProgram::parse_command_line(bad).is_err(), "{bad}");
    }
}

#[test]
fn commands_parse_and_print() {
    for c in [
        "bound(j,jb,256,MaxExact)",
        "reorder(i1,k1,i0,k0,jb)",
        "parallelize(i1,CPUThread,NoRaces)",
        "parallelize(k1,CPUThread,Atomics)",
        "assemble(C,Insert)",
    ] {
        assert_eq!(c.parse::<TacoCommand>().unwrap().to_string(), c);
    }
    let spaced: TacoCommand = "\"bound( j , jb, 256 ,MaxExact )\"".parse().unwrap();
    assert_eq!(spaced.to_string(), "bound(j,jb,256,MaxExact)");
    for bad in [
        "bound(j,jb,256)",
        "bound(j,jb,x,MaxExact)",
        "split(i,i0,i1,4)",
        "reorder(",
        "reorder(i,)",
        "parallelize(i,CPU,NoRaces)",
        "assemble(C,Later)",
        "reorder(i j)",
    ] {
        assert!(bad.parse::<TacoCommand>().is_err(), "{bad}");
    }
}

/// Every stored `(row, col, value)` of a packed tensor, walking its levels.
fn unpack(p: &TacoProgram, packed: &PackedTensor) -> Vec<(u32, u32, f32)> {
    let vars = &p.sparse().vars;
    let mut out = Vec::new();
    walk(vars, packed, 0, 0, &mut Vec::new(), &mut out);
    out.sort_by_key(|a| (a.0, a.1));
    out
}

fn walk(
    vars: &[LoopVar],
    packed: &PackedTensor,
    level: usize,
    parent: usize,
    coords: &mut Vec<u32>,
    out: &mut Vec<(u32, u32, f32)>,
) {
    if level == vars.len() {
        let v = packed.vals[parent];
        if v != 0.0 {
            let axis = |a: char| {
                let mut x = 0;
                for (var, c) in vars.iter().zip(coords.iter()) {
                    if var.axis == a {
                        x = match var.part {
                            AxisPart::Inner => x + c,
                            AxisPart::Outer => c * var.inner,
                            AxisPart::Whole => *c,
                        };
                    }
                }
                x
            };
            out.push((
                axis('i'),
                axis(if vars.iter().any(|v| v.axis == 'k') {
                    'k'
                } else {
                    'j'
                }),
                v,
            ));
        }
        return;
    }
    let children: Vec<(usize, u32)> = match &packed.levels[level] {
        PackedLevel::Dense { size } => (0..*size)
            .map(|c| (parent * *size as usize + c as usize, c))
            .collect(),
        PackedLevel::Compressed { pos, crd } => (pos[parent] as usize..pos[parent + 1] as usize)
            .map(|q| (q, crd[q] as u32))
            .collect(),
    };
    for (q, c) in children {
        coords.push(c);
        walk(vars, packed, level + 1, q, coords, out);
        coords.pop();
    }
}

fn random_pattern(rows: usize, cols: usize, seed: u64) -> (CsrPattern, Vec<f32>) {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let mut row_ptr = vec![0];
    let mut col_idx = Vec::new();
    for _ in 0..rows {
        let mut cols_here: Vec<u32> = (0..next() % 6).map(|_| (next() % cols) as u32).collect();
        cols_here.sort_unstable();
        cols_here.dedup();
        col_idx.extend(cols_here);
        row_ptr.push(col_idx.len());
    }
    let values = (0..col_idx.len()).map(|n| 1.0 + n as f32).collect();
    (
        CsrPattern::new(rows, cols, row_ptr, col_idx).unwrap(),
        values,
    )
}

use crate::CsrPattern;

#[test]
fn packing_keeps_every_nonzero_where_its_coordinates_say() {
    let (pattern, values) = random_pattern(37, 53, 7);
    let mut want: Vec<(u32, u32, f32)> = Vec::new();
    let mut n = 0;
    for (r, cols) in pattern.rows() {
        for &c in cols {
            want.push((r as u32, c, values[n]));
            n += 1;
        }
    }
    want.sort_by_key(|a| (a.0, a.1));
    let shape = MatrixShape::from(&pattern);
    let space = crate::schedule::space::TacoSpace::waco_up_to(Kernel::SpMM, 8, 1);
    let mut checked = 0;
    let loose = TacoOptions {
        max_positions_per_nonzero: 1000,
        ..opts()
    };
    for s in crate::schedule::space::ScheduleSpace::enumerate(&space, &shape)
        .iter()
        .step_by(7)
    {
        let p = TacoProgram::from_superschedule(s, &shape, &opts()).unwrap();
        let packed = p.pack(&pattern, Some(&values), &loose).unwrap();
        assert_eq!(unpack(&p, &packed), want, "{}", s.to_line());
        let layout = p.layout(&pattern, &loose).unwrap();
        assert_eq!(layout.values, packed.vals.len() as u64);
        checked += 1;
    }
    assert!(checked > 100);
    // TACO's CSR is CSR.
    let csr = TacoProgram::csr(Kernel::SpMM, &shape, &opts()).unwrap();
    let packed = csr.pack(&pattern, None, &opts()).unwrap();
    let PackedLevel::Compressed { pos, crd } = &packed.levels[1] else {
        panic!()
    };
    let row_ptr: Vec<i32> = pattern.to_row_ptr().iter().map(|&p| p as i32).collect();
    assert_eq!(pos, &row_ptr);
    assert_eq!(
        crd.iter().map(|&c| c as u32).collect::<Vec<_>>(),
        pattern.col_idx()
    );
    assert!(packed.vals.iter().all(|&v| v == 1.0));
}

#[test]
fn a_layout_of_stored_zeros_is_refused_before_it_is_allocated() {
    // One nonzero per row of a 4096 x 4096 matrix; a dense column level under the
    // compressed rows stores 4096 positions per nonzero.
    let n = 4096;
    let row_ptr: Vec<usize> = (0..=n).collect();
    let col_idx: Vec<u32> = (0..n as u32).collect();
    let pattern = CsrPattern::new(n, n, row_ptr, col_idx).unwrap();
    let shape = MatrixShape::from(&pattern);
    let s = SuperSchedule::parse(Kernel::SpMM, "1 1 1 i1 i0 k1 k0 j1 j0 0 1 1 1 i1 48 32").unwrap();
    let p = TacoProgram::from_superschedule(&s, &shape, &opts()).unwrap();
    assert_eq!(p.sparse().format_letters(), "sd");
    let layout = p.layout(&pattern, &opts()).unwrap();
    assert_eq!(layout.values, (n * n) as u64);
    assert_eq!(layout.limit, 20 * n as u64);
    assert!(!layout.fits());
    let err = p.pack(&pattern, None, &opts()).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::LayoutTooLarge { positions, limit: 81920, .. } if *positions == (n * n) as u64),
        "{err}"
    );
    // TACO's CSR always fits, even when rows outnumber nonzeros twentyfold.
    let sparse = CsrPattern::new(1000, 10, vec![0; 1001], vec![]).unwrap();
    let csr = TacoProgram::csr(Kernel::SpMM, &MatrixShape::from(&sparse), &opts()).unwrap();
    assert!(csr.layout(&sparse, &opts()).unwrap().fits());
    // The limit is an option.
    let loose = TacoOptions {
        max_positions_per_nonzero: 5000,
        ..opts()
    };
    assert!(p.pack(&pattern, None, &loose).is_ok());
    // A program for another shape is refused.
    let other = TacoProgram::csr(Kernel::SpMM, &MatrixShape::new(5, 5, 1), &opts()).unwrap();
    assert!(other.pack(&pattern, None, &opts()).is_err());
    assert!(csr.pack(&sparse, Some(&[1.0]), &opts()).is_err());
}

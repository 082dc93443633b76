//! The featurizer's dispatch table: one set of kernel functions per [`SimdLevel`], chosen
//! once per run by [`Kernels::for_level`].
//!
//! Each entry is a plain function pointer; the AVX2 and AVX-512 entries call code compiled
//! with those target features, and are only reachable through this table, which checks that
//! the CPU supports the level first. Calls are per micro-kernel block or per row batch, so
//! the indirect call costs nothing measurable.

#[cfg(test)]
use super::conv::FRESH;
use super::conv::{self, GemmArgs};
use super::pool;
use super::SimdLevel;

/// Kernel functions of one SIMD level (see `simd::conv` and `simd::pool` for semantics).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kernels {
    /// The level these kernels belong to.
    pub level: SimdLevel,
    /// Gathered rows × weight slice, stored or added into output rows.
    pub gemm: fn(GemmArgs<'_>),
    /// `x = if 0 > x { 0 } else { x }`.
    pub relu: fn(&mut [f32]),
    /// `d = d + s`.
    pub add: fn(&mut [f32], &[f32]),
    /// Every row plus the bias row.
    pub bias: fn(&mut [f32], &[f32]),
    /// Every row plus the bias row, then ReLU (`bias` then `relu` in one pass).
    pub bias_relu: fn(&mut [f32], &[f32]),
    /// NaN-propagating per-lane max.
    pub max_into: fn(&mut [f32], &[f32]),
    /// `acc = acc + f64(s)` (`acc = f64(s)` when the flag is set).
    pub sum_f64: fn(&mut [f64], &[f32], bool),
    /// `acc = Σ f64(table row)` over row ids, in order.
    pub sum_rows_f64: fn(&mut [f64], &[f32], &[u32]),
    /// `acc = acc + s` in `f64`.
    pub add_f64: fn(&mut [f64], &[f64]),
}

static SCALAR: Kernels = Kernels {
    level: SimdLevel::Scalar,
    gemm: conv::gemm_scalar,
    relu: pool::relu::scalar,
    add: pool::add::scalar,
    bias: pool::bias::scalar,
    bias_relu: pool::bias_relu::scalar,
    max_into: pool::max_into::scalar,
    sum_f64: pool::sum_f64::scalar,
    sum_rows_f64: pool::sum_rows_f64::scalar,
    add_f64: pool::add_f64::scalar,
};

#[cfg(target_arch = "x86_64")]
static AVX2: Kernels = Kernels {
    level: SimdLevel::Avx2,
    gemm: conv::gemm_avx2,
    relu: pool::relu::avx2,
    add: pool::add::avx2,
    bias: pool::bias::avx2,
    bias_relu: pool::bias_relu::avx2,
    max_into: pool::max_into::avx2,
    sum_f64: pool::sum_f64::avx2,
    sum_rows_f64: pool::sum_rows_f64::avx2,
    add_f64: pool::add_f64::avx2,
};

#[cfg(target_arch = "x86_64")]
static AVX512: Kernels = Kernels {
    level: SimdLevel::Avx512,
    gemm: conv::gemm_avx512,
    relu: pool::relu::avx512,
    add: pool::add::avx512,
    bias: pool::bias::avx512,
    bias_relu: pool::bias_relu::avx512,
    max_into: pool::max_into::avx512,
    sum_f64: pool::sum_f64::avx512,
    sum_rows_f64: pool::sum_rows_f64::avx512,
    add_f64: pool::add_f64::avx512,
};

impl Kernels {
    /// The kernels of `level`, or of the best supported level below it when the CPU lacks
    /// `level` (callers validate the level first; this keeps the table sound regardless).
    pub(crate) fn for_level(level: SimdLevel) -> &'static Kernels {
        let level = level.min(SimdLevel::detect());
        match level {
            SimdLevel::Scalar => &SCALAR,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => &AVX2,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 => &AVX512,
            #[cfg(not(target_arch = "x86_64"))]
            _ => &SCALAR,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the conv micro-kernel on every supported level over `m` of `rows` (`m` from 1 to
    /// all: every cut into groups of rows), stored and added, and checks that every level
    /// gives the same bits and that they are the documented arithmetic: one FMA chain over
    /// every input channel, from `+0.0`, on the row-major weights `w` the kernel was given
    /// packed.
    fn check_gemm_levels(cin: usize, cout: usize, w: &[f32], rows: &[Vec<f32>], init: &[f32]) {
        let n = rows.len();
        let packed = conv::pack_weights(w, cin, cout);
        for m in 1..=n {
            let mut want: Option<Vec<u32>> = None;
            for level in SimdLevel::supported() {
                let k = Kernels::for_level(level);
                let mut dst = init.to_vec();
                // The rows in a table, in reverse order after a spare row.
                let x: Vec<f32> = std::iter::repeat_n(&rows[0], 1)
                    .chain(rows[..m].iter().rev())
                    .flatten()
                    .copied()
                    .collect();
                let ids: Vec<u32> = (0..m).map(|r| (m - r) as u32).collect();
                // Rows in reverse order with a gap, every other one fresh.
                let offs: Vec<usize> = (0..m)
                    .map(|r| ((n - r) * cout) | if r % 2 == 1 { FRESH } else { 0 })
                    .collect();
                (k.gemm)(GemmArgs {
                    x: &x,
                    rows: &ids,
                    w: &packed,
                    cout,
                    dst: &mut dst,
                    offs: &offs,
                });
                let bits: Vec<u32> = dst.iter().map(|x| x.to_bits()).collect();
                match &want {
                    None => want = Some(bits),
                    Some(b) => assert_eq!(&bits, b, "cin {cin} cout {cout} m {m} level {level}"),
                }
            }
            // And the arithmetic is the documented one (checked on the scalar result).
            let want = want.expect("scalar level always runs");
            for (r, row) in rows.iter().enumerate().take(m) {
                for j in 0..cout {
                    let mut acc = 0.0f32;
                    for (ci, &x) in row.iter().enumerate() {
                        acc = x.mul_add(w[ci * cout + j], acc);
                    }
                    let o = (n - r) * cout + j;
                    let v = if r % 2 == 1 { acc } else { init[o] + acc };
                    assert_eq!(want[o], v.to_bits(), "cin {cin} cout {cout} m {m} row {r}");
                }
            }
        }
    }

    /// A deterministic stream of values in `[-1, 1)`.
    fn uniform(seed: u64) -> impl FnMut() -> f32 {
        let mut seed = seed;
        move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
    }

    /// Shapes `(cin, cout)`: every mix of panel widths and column tails, and inputs of one
    /// to several blocks of sixteen channels.
    const GEMM_SHAPES: [(usize, usize); 10] = [
        (1, 32),
        (3, 7),
        (32, 32),
        (17, 45),
        (64, 256),
        (5, 1),
        (9, 56),
        (4, 50),
        (2, 24),
        (40, 33),
    ];

    /// Up to two full AVX-512 groups and a part.
    const GEMM_ROWS: usize = 25;

    /// The conv micro-kernel gives the same bits on every supported level, for every row
    /// count and column tail, stored and added, on dense inputs.
    #[test]
    fn gemm_levels_agree_bit_for_bit() {
        let mut next = uniform(7);
        for (cin, cout) in GEMM_SHAPES {
            let w: Vec<f32> = (0..cin * cout).map(|_| next()).collect();
            let rows: Vec<Vec<f32>> = (0..GEMM_ROWS)
                .map(|_| (0..cin).map(|_| next()).collect())
                .collect();
            let init: Vec<f32> = (0..(GEMM_ROWS + 1) * cout).map(|_| next()).collect();
            check_gemm_levels(cin, cout, &w, &rows, &init);
        }
    }

    /// The same on inputs like ReLU outputs: some channels zero in every row (`+0.0` or
    /// `−0.0`), others in some rows, channels zero but for a NaN or an infinity, and rows
    /// (the last five) zero in every channel.
    #[test]
    fn gemm_levels_agree_on_zero_channels() {
        let mut next = uniform(11);
        for (cin, cout) in GEMM_SHAPES {
            let w: Vec<f32> = (0..cin * cout).map(|_| next()).collect();
            let rows: Vec<Vec<f32>> = (0..GEMM_ROWS)
                .map(|r| {
                    (0..cin)
                        .map(|c| match (c % 5, (r + c) % 3) {
                            // Channels zero but for one NaN or infinity: live.
                            _ if cin > 2 && c + 1 == cin => [0.0, f32::NAN][usize::from(r == 7)],
                            _ if cin > 2 && c + 2 == cin => {
                                [0.0, f32::INFINITY][usize::from(r == 9)]
                            }
                            (0, _) => 0.0,
                            (1, _) => -0.0,
                            (2, 0) => 0.0,
                            _ if r >= 20 => 0.0,
                            _ => next().max(0.0),
                        })
                        .collect()
                })
                .collect();
            let init: Vec<f32> = (0..(GEMM_ROWS + 1) * cout).map(|_| next()).collect();
            check_gemm_levels(cin, cout, &w, &rows, &init);
        }
    }

    /// The same where a chain passes through `−0.0` (an FMA's exact result underflowing from
    /// below) and then ends at `+0.0` (`0 · w` with `w > 0` added to it): every level keeps
    /// the sign of the zero the chain ends at.
    #[test]
    fn gemm_levels_agree_through_negative_zero() {
        for (cin, cout) in [(2, 32), (20, 32), (40, 16), (3, 7)] {
            // Channel 0: a tiny value times a tiny negative weight (`−1e-60` rounds to
            // `−0.0`); every other channel zero in every row, with positive weights.
            let w: Vec<f32> = (0..cin * cout)
                .map(|i| if i < cout { -1e-30 } else { 0.5 })
                .collect();
            let rows: Vec<Vec<f32>> = (0..GEMM_ROWS)
                .map(|_| (0..cin).map(|c| if c == 0 { 1e-30 } else { 0.0 }).collect())
                .collect();
            let init = vec![1.0f32; (GEMM_ROWS + 1) * cout];
            // The chain ends at `+0.0`, after `−0.0` from channel 0 alone.
            let full = (1..cin).fold(1e-30f32.mul_add(-1e-30, 0.0), |a, _| 0.0f32.mul_add(0.5, a));
            assert_eq!(full.to_bits(), 0.0f32.to_bits());
            assert_eq!(1e-30f32.mul_add(-1e-30, 0.0).to_bits(), (-0.0f32).to_bits());
            check_gemm_levels(cin, cout, &w, &rows, &init);
        }
    }

    /// A row index past the table is a caller bug the kernel refuses before reading.
    #[test]
    #[should_panic(expected = "input rows in the table")]
    fn gemm_refuses_rows_past_the_table() {
        let k = Kernels::for_level(SimdLevel::detect());
        let (x, w, mut dst) = (vec![1.0f32; 2 * 4], vec![1.0f32; 4 * 3], vec![0.0f32; 3]);
        (k.gemm)(GemmArgs {
            x: &x,
            rows: &[2],
            w: &w,
            cout: 3,
            dst: &mut dst,
            offs: &[FRESH],
        });
    }

    /// On every level, a row past the table or an output row past `dst` anywhere in a call's
    /// list (in a full group of rows or the last, partial one) is refused before any row is
    /// read, and the last rows that fit are accepted.
    #[test]
    fn gemm_checks_every_row_on_every_level() {
        let (cin, cout, table_rows, out_rows) = (4, 3, 5, 50);
        let (x, w) = (vec![1.0f32; table_rows * cin], vec![1.0f32; cin * cout]);
        let call = |level, rows: &[u32], offs: &[usize]| {
            let k = Kernels::for_level(level);
            let mut dst = vec![0.0f32; out_rows * cout];
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (k.gemm)(GemmArgs {
                    x: &x,
                    rows,
                    w: &w,
                    cout,
                    dst: &mut dst,
                    offs,
                })
            }))
            .map_err(|e| {
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            })
        };
        for level in SimdLevel::supported() {
            for n in [1usize, 12, 13, 40] {
                for bad in [0, n / 2, n - 1] {
                    let mut rows = vec![(table_rows - 1) as u32; n];
                    let offs: Vec<usize> = (0..n).map(|r| (r * cout) | FRESH).collect();
                    let last = vec![(out_rows - 1) * cout; n];
                    assert_eq!(call(level, &rows, &offs), Ok(()), "{level:?} n={n}");
                    assert_eq!(call(level, &rows, &last), Ok(()), "{level:?} n={n}");
                    rows[bad] = table_rows as u32;
                    let err = call(level, &rows, &offs).expect_err("row past the table");
                    if level != SimdLevel::Scalar {
                        assert!(err.contains("input rows in the table"), "{level:?}: {err}");
                    }
                    rows[bad] = 0;
                    let mut offs = offs;
                    offs[bad] = (out_rows * cout - 1) | FRESH;
                    let err = call(level, &rows, &offs).expect_err("output row past dst");
                    if level != SimdLevel::Scalar {
                        assert!(err.contains("output rows in bounds"), "{level:?}: {err}");
                    }
                }
            }
        }
    }
}

//! The arithmetic peak of one core: fused multiply-adds with no dependency between them, the
//! physics a matrix product is measured against (numpy's sgemm may use narrower vectors than
//! the CPU has).

use std::time::Instant;

/// Independent accumulators per loop iteration: enough to cover the FMA latency of two
/// pipes on current x86 cores, few enough to stay in registers.
const CHAINS: usize = 12;

/// Loop iterations per measurement (each does `CHAINS` vector FMAs).
const ITERATIONS: u64 = 50_000_000;

/// Peak multiply-adds per second of one core, in GMAC/s, as `(level, rate)` for every
/// vector width the CPU has (AVX-512 and AVX2 with FMA); best of three runs each.
pub fn fma_peaks() -> Vec<(&'static str, f64)> {
    let mut peaks = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512 F is available (checked above).
            peaks.push(("AVX-512", best_of_3(|| unsafe { x86::avx512() })));
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: AVX2 and FMA are available (checked above).
            peaks.push(("AVX2", best_of_3(|| unsafe { x86::avx2() })));
        }
    }
    peaks
}

/// The highest rate of three runs of `run` (which returns multiply-adds done and a value to
/// keep the work alive).
fn best_of_3(run: impl Fn() -> (u64, f32)) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            let (macs, keep) = run();
            std::hint::black_box(keep);
            macs as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .fold(0.0, f64::max)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{CHAINS, ITERATIONS};

    /// `CHAINS` chains of 16-lane FMAs.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn avx512() -> (u64, f32) {
        let (b, c) = (_mm512_set1_ps(1.000_000_1), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(std::hint::black_box(0.5)); CHAINS];
        for _ in 0..ITERATIONS {
            for a in &mut acc {
                *a = _mm512_fmadd_ps(*a, b, c);
            }
        }
        let keep = acc.iter().map(|&a| _mm512_reduce_add_ps(a)).sum();
        (ITERATIONS * CHAINS as u64 * 16, keep)
    }

    /// `CHAINS` chains of 8-lane FMAs.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn avx2() -> (u64, f32) {
        let (b, c) = (_mm256_set1_ps(1.000_000_1), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(std::hint::black_box(0.5)); CHAINS];
        for _ in 0..ITERATIONS {
            for a in &mut acc {
                *a = _mm256_fmadd_ps(*a, b, c);
            }
        }
        let mut keep = 0.0;
        for a in acc {
            let mut lanes = [0f32; 8];
            // SAFETY: 8 lanes written.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), a) };
            keep += lanes.iter().sum::<f32>();
        }
        (ITERATIONS * CHAINS as u64 * 8, keep)
    }
}

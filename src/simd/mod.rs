//! SIMD levels: the one place that decides which instruction set the numeric kernels use.
//!
//! Every hot loop of the library (the featurizer's sparse convolutions and pools, the dense
//! heads' layers) exists as a portable scalar version and as x86-64 versions compiled with
//! AVX2+FMA or AVX-512 enabled. Which one runs is a [`SimdLevel`], chosen once per model at
//! load ([`crate::LoadOptions::simd`]) and passed down; kernels never probe the CPU
//! themselves.
//!
//! # Determinism across levels
//!
//! The levels are interchangeable bit for bit: each kernel fixes its accumulation order
//! independently of the vector width (see the kernel's own docs), and the scalar version
//! uses fused multiply-add ([`f32::mul_add`]) wherever the vector versions use FMA. A result
//! computed on an AVX-512 machine therefore equals the one computed on an AVX2-only machine
//! or with the scalar kernels. Tests force each level the machine supports and compare.
//!
//! # Forcing a level
//!
//! [`LoadOptions::simd`](crate::LoadOptions::simd) picks a level for one model (an error if
//! the CPU lacks it). For whole test runs, the environment variable `DASHRANK_SIMD`
//! (`scalar`, `avx2` or `avx512`) caps the level that [`SimdLevel::best`] reports, so CI can
//! run the suite on the AVX2 or scalar path of an AVX-512 machine. It is read once per
//! process and only lowers the level, never raises it above what the CPU supports.

pub(crate) mod conv;
pub(crate) mod kernels;
pub(crate) mod pool;
pub(crate) mod scan;

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use crate::error::{Error, Result};

pub mod gemm;

/// Asks the CPU to bring the cache lines of `row` (up to its first 256 bytes) into L1, for
/// an output row that a kernel will soon write (or read, add and write), so that its first
/// touch does not wait on memory: rows written anywhere in a table are invisible to the
/// hardware prefetchers. A hint only: it never faults and changes no value.
#[inline(always)]
pub(crate) fn prefetch_row_l1(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = row.as_ptr().cast::<i8>();
        for off in (0..(row.len() * 4).min(256)).step_by(64) {
            // SAFETY: `off` is inside the row; a prefetch never faults (SSE, baseline x86-64).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// An instruction-set level of the numeric kernels, ordered from least to most capable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimdLevel {
    /// Portable Rust; fused multiply-add through [`f32::mul_add`].
    Scalar,
    /// x86-64 AVX2 with FMA (256-bit vectors).
    Avx2,
    /// x86-64 AVX-512 F/BW/DQ/VL (512-bit vectors).
    Avx512,
}

impl SimdLevel {
    /// All levels, least capable first.
    pub const ALL: [SimdLevel; 3] = [SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512];

    /// The most capable level this CPU supports, ignoring `DASHRANK_SIMD`.
    pub fn detect() -> SimdLevel {
        static DETECTED: OnceLock<SimdLevel> = OnceLock::new();
        *DETECTED.get_or_init(detect_cpu)
    }

    /// The level models use by default: [`SimdLevel::detect`], lowered to `DASHRANK_SIMD`
    /// when that is set (an unparsable value is logged and ignored).
    pub fn best() -> SimdLevel {
        static BEST: OnceLock<SimdLevel> = OnceLock::new();
        *BEST.get_or_init(|| {
            let detected = Self::detect();
            match std::env::var("DASHRANK_SIMD") {
                Ok(text) if !text.trim().is_empty() => match text.parse::<SimdLevel>() {
                    Ok(cap) => cap.min(detected),
                    Err(e) => {
                        log::warn!("ignoring DASHRANK_SIMD: {e}");
                        detected
                    }
                },
                _ => detected,
            }
        })
    }

    /// Whether this CPU can run kernels of this level.
    pub fn is_supported(self) -> bool {
        self <= Self::detect()
    }

    /// Checks that this CPU supports the level.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) naming the level and
    /// the best one available.
    pub fn require(self) -> Result<SimdLevel> {
        if self.is_supported() {
            Ok(self)
        } else {
            Err(Error::invalid_argument(format!(
                "SIMD level '{self}' is not supported by this CPU (best available: '{}')",
                Self::detect()
            )))
        }
    }

    /// The levels this CPU supports, least capable first.
    pub fn supported() -> impl Iterator<Item = SimdLevel> {
        Self::ALL.into_iter().filter(|l| l.is_supported())
    }

    /// Lower-case name: `scalar`, `avx2`, `avx512`.
    pub fn as_str(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
        }
    }
}

impl Default for SimdLevel {
    /// [`SimdLevel::best`].
    fn default() -> Self {
        Self::best()
    }
}

impl fmt::Display for SimdLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SimdLevel {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "scalar" => Ok(SimdLevel::Scalar),
            "avx2" => Ok(SimdLevel::Avx2),
            "avx512" | "avx-512" => Ok(SimdLevel::Avx512),
            other => Err(Error::invalid_argument(format!(
                "unknown SIMD level '{other}' (expected scalar, avx2 or avx512)"
            ))),
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn detect_cpu() -> SimdLevel {
    use std::arch::is_x86_feature_detected as has;
    // POPCNT comes with every AVX2 CPU; the column searches (`scan`) use it.
    let base = has!("fma") && has!("popcnt");
    if base && has!("avx512f") && has!("avx512bw") && has!("avx512dq") && has!("avx512vl") {
        SimdLevel::Avx512
    } else if base && has!("avx2") {
        SimdLevel::Avx2
    } else {
        SimdLevel::Scalar
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_cpu() -> SimdLevel {
    SimdLevel::Scalar
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_order_and_cap() {
        assert_eq!("AVX2".parse::<SimdLevel>().unwrap(), SimdLevel::Avx2);
        assert_eq!("avx-512".parse::<SimdLevel>().unwrap(), SimdLevel::Avx512);
        let e = "sse".parse::<SimdLevel>().unwrap_err();
        assert!(e.to_string().contains("scalar, avx2 or avx512"), "{e}");
        assert!(SimdLevel::Scalar < SimdLevel::Avx2 && SimdLevel::Avx2 < SimdLevel::Avx512);
        assert!(SimdLevel::Scalar.is_supported());
        assert!(SimdLevel::best() <= SimdLevel::detect());
        assert!(SimdLevel::supported().any(|l| l == SimdLevel::detect()));
        for l in SimdLevel::ALL {
            assert_eq!(l.require().is_ok(), l.is_supported());
            assert_eq!(l.to_string().parse::<SimdLevel>().unwrap(), l);
        }
    }
}

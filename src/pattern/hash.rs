//! Stable content hash of a pattern's structure, for caches keyed by matrix.

use super::CsrPattern;

const SEED: u64 = 0x6461_7368_7261_6e6b; // "dashrank"
const K: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn absorb(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(K).rotate_left(31)
}

/// MurmurHash3's 64-bit finaliser.
#[inline]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

impl CsrPattern {
    /// A 64-bit hash of the structure: shape, non-empty rows and their columns.
    ///
    /// Stable across runs, platforms and Rust versions (it uses no `std::hash` machinery),
    /// and proportional to the entries (empty rows cost nothing): starting from a fixed seed,
    /// each value `w` of the sequence `nrows, ncols, nnz`, then for each non-empty row its
    /// index and end offset (`nonempty_rows()[i], row_starts()[i + 1]`), then
    /// `col_idx[0..nnz]`, widened to `u64`, is absorbed
    /// as `h = rotl((h ^ w) * 0x9E3779B97F4A7C15, 31)` (wrapping), and the result goes through
    /// MurmurHash3's `fmix64` finaliser. Not cryptographic: use it for cache keys, not for
    /// integrity against adversaries.
    pub fn content_hash(&self) -> u64 {
        let mut h = SEED;
        h = absorb(h, self.nrows() as u64);
        h = absorb(h, self.ncols() as u64);
        h = absorb(h, self.nnz() as u64);
        for (&r, &end) in self.nonempty_rows().iter().zip(&self.row_starts()[1..]) {
            h = absorb(h, u64::from(r));
            h = absorb(h, end as u64);
        }
        for &c in self.col_idx() {
            h = absorb(h, u64::from(c));
        }
        fmix64(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_discriminates() {
        let a = CsrPattern::new(2, 3, vec![0, 2, 3], vec![0, 2, 1]).expect("valid");
        let b = CsrPattern::new(2, 3, vec![0, 2, 3], vec![2, 0, 1]).expect("valid");
        let c = CsrPattern::new(2, 3, vec![0, 1, 3], vec![0, 1, 2]).expect("valid");
        let d = CsrPattern::new(3, 2, vec![0, 2, 3, 3], vec![0, 1, 1]).expect("valid");
        assert_eq!(a.content_hash(), b.content_hash());
        assert_ne!(a.content_hash(), c.content_hash());
        assert_ne!(a.content_hash(), d.content_hash());
        // Pinned value: changing the algorithm breaks persisted caches.
        assert_eq!(a.content_hash(), PINNED);
    }

    const PINNED: u64 = 9_089_588_815_542_592_097;
}

//! Content hashes of a pattern's structure: a fast 64-bit hash, and a SHA-256 digest for
//! keys that must not collide (the embedding cache).

use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::CsrPattern;

/// A pattern's hash and digest, each computed once. Compares equal to any other cell, so
/// that it never affects the equality of patterns.
#[derive(Debug, Clone, Default)]
pub(crate) struct HashCell {
    hash: OnceLock<u64>,
    digest: OnceLock<[u8; 32]>,
}

impl PartialEq for HashCell {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for HashCell {}

/// Independent hash lanes: the multiply chains of the lanes overlap in the CPU.
const LANES: usize = 4;

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
    /// A 64-bit hash of the structure (shape, non-empty rows, columns), computed on the first
    /// call and remembered (a cache hit in
    /// [`CostModel::embed_matrix`](crate::CostModel::embed_matrix) costs a lookup).
    ///
    /// Stable across runs, platforms and Rust versions (it uses no `std::hash` machinery), and
    /// proportional to the entries (empty rows cost nothing). The sequence of 64-bit words is
    /// `nrows, ncols, nnz`, then for each non-empty row `nonempty_rows()[i]` and its end
    /// offset `row_starts()[i + 1]`, then `col_idx` two at a time (`lo | hi << 32`; an odd last
    /// one alone). Word
    /// `i` goes to lane `i mod 4`; each lane starts from `SEED + lane` and absorbs its words as
    /// `h = rotl((h ^ w) * 0x9E3779B97F4A7C15, 31)` (wrapping); the four lanes are absorbed in
    /// order into the seed and the result goes through MurmurHash3's `fmix64`. Not
    /// cryptographic and not collision-resistant: two different patterns with the same hash
    /// are easy to construct. Keys that must tell patterns apart use
    /// [`content_digest`](Self::content_digest).
    pub fn content_hash(&self) -> u64 {
        *self.hash.hash.get_or_init(|| self.compute_hash())
    }

    /// SHA-256 of the structure, computed on the first call and remembered: the key of the
    /// embedding cache, so that a pattern never gets another pattern's embedding (finding two
    /// patterns with one digest means finding a SHA-256 collision).
    ///
    /// Stable across runs and platforms, proportional to the entries, and allocation-free.
    /// The digested bytes are `dashrank-pattern-v1\0`, then `nrows`, `ncols`, `nnz` and the
    /// number of non-empty rows as little-endian `u64`, then every
    /// [`nonempty_rows`](Self::nonempty_rows) index as a little-endian `u32`, every row end
    /// offset (`row_starts()[1..]`) as a `u64`, and every column as a `u32`.
    pub fn content_digest(&self) -> [u8; 32] {
        *self.hash.digest.get_or_init(|| self.compute_digest())
    }

    fn compute_digest(&self) -> [u8; 32] {
        let mut sha = Sha256::new();
        sha.update(b"dashrank-pattern-v1\0");
        let rows = self.nonempty_rows();
        for n in [self.nrows(), self.ncols(), self.nnz(), rows.len()] {
            sha.update((n as u64).to_le_bytes());
        }
        digest_words(&mut sha, rows.iter().map(|r| r.to_le_bytes()));
        let ends = self.row_starts()[1..].iter();
        digest_words(&mut sha, ends.map(|&e| (e as u64).to_le_bytes()));
        digest_words(&mut sha, self.col_idx().iter().map(|c| c.to_le_bytes()));
        sha.finalize().into()
    }

    fn compute_hash(&self) -> u64 {
        let mut lanes: [u64; LANES] = std::array::from_fn(|i| SEED.wrapping_add(i as u64));
        let mut n = 0usize;
        let mut push = |w: u64| {
            lanes[n % LANES] = absorb(lanes[n % LANES], w);
            n += 1;
        };
        push(self.nrows() as u64);
        push(self.ncols() as u64);
        push(self.nnz() as u64);
        for (&r, &end) in self.nonempty_rows().iter().zip(&self.row_starts()[1..]) {
            push(u64::from(r));
            push(end as u64);
        }
        let pairs = self.col_idx().chunks_exact(2);
        let odd = pairs.remainder().first().copied();
        for pair in pairs {
            push(u64::from(pair[0]) | u64::from(pair[1]) << 32);
        }
        if let Some(c) = odd {
            push(u64::from(c));
        }
        let h = lanes.iter().fold(SEED, |h, &l| absorb(h, l));
        fmix64(h)
    }
}

/// Feeds `words` to `sha` through a buffer on the stack.
fn digest_words<const N: usize>(sha: &mut Sha256, words: impl Iterator<Item = [u8; N]>) {
    let mut buf = [0u8; 4096];
    let mut len = 0;
    for w in words {
        if len + N > buf.len() {
            sha.update(&buf[..len]);
            len = 0;
        }
        buf[len..len + N].copy_from_slice(&w);
        len += N;
    }
    sha.update(&buf[..len]);
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

    #[test]
    fn digest_is_stable_and_discriminates() {
        let a = CsrPattern::new(2, 3, vec![0, 2, 3], vec![0, 2, 1]).expect("valid");
        let b = CsrPattern::new(2, 3, vec![0, 2, 3], vec![2, 0, 1]).expect("valid");
        let c = CsrPattern::new(2, 3, vec![0, 1, 3], vec![0, 1, 2]).expect("valid");
        let e = CsrPattern::new(3, 3, vec![0, 2, 3, 3], vec![0, 2, 1]).expect("valid");
        assert_eq!(a.content_digest(), b.content_digest());
        assert_ne!(a.content_digest(), c.content_digest());
        assert_ne!(a.content_digest(), e.content_digest());
        // The bytes of the documented encoding, digested directly.
        let mut bytes = b"dashrank-pattern-v1\0".to_vec();
        for n in [2u64, 3, 3, 2] {
            bytes.extend(n.to_le_bytes());
        }
        for r in [0u32, 1] {
            bytes.extend(r.to_le_bytes());
        }
        for end in [2u64, 3] {
            bytes.extend(end.to_le_bytes());
        }
        for col in [0u32, 2, 1] {
            bytes.extend(col.to_le_bytes());
        }
        assert_eq!(a.content_digest(), <[u8; 32]>::from(Sha256::digest(&bytes)));
        // Longer than the stack buffer.
        let n = 5000;
        let big = CsrPattern::new(n, n, (0..=n).collect(), (0..n as u32).collect()).expect("valid");
        let mut bytes = b"dashrank-pattern-v1\0".to_vec();
        for v in [n as u64, n as u64, n as u64, n as u64] {
            bytes.extend(v.to_le_bytes());
        }
        bytes.extend((0..n as u32).flat_map(u32::to_le_bytes));
        bytes.extend((1..=n as u64).flat_map(u64::to_le_bytes));
        bytes.extend((0..n as u32).flat_map(u32::to_le_bytes));
        assert_eq!(
            big.content_digest(),
            <[u8; 32]>::from(Sha256::digest(&bytes))
        );
    }

    const PINNED: u64 = 7_986_548_344_427_538_817;
}

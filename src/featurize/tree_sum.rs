//! Per-channel `f64` sums over the rows of a sparse value in a fixed binary tree, so the
//! result does not depend on how the rows are split into bands or parallel tasks.
//!
//! Global average pooling needs `Σ_points x` per channel. A point's contribution enters its
//! row's *leaf sum* (the row's points in column order, the first one converted, the next
//! ones added). Rows are the leaves `ℓ = row / t` (`t` the tensor stride) of a complete
//! binary tree over `0..2⁶⁴`; a node's sum is `left + right`, or the one non-empty child
//! alone. The total is the root. Every `+` is an `f64` addition fixed by the coordinates
//! alone, so any split of the rows (bands, tasks, thread counts) gives the same bits.
//!
//! [`TreeSum`] evaluates the tree from leaves pushed in ascending order with a stack of
//! complete nodes (levels decreasing, lowest common ancestors strictly decreasing up the
//! stack), merging two nodes as soon as a later node shows their common ancestor is
//! complete. A task's stack refuses merges whose node could still contain leaves before the
//! task's first leaf (`lo`); pushing that stack's nodes into the stack of everything before
//! it then completes them.

use crate::simd::kernels::Kernels;

/// A partial tree sum over a contiguous range of leaves (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct TreeSum {
    channels: usize,
    /// No merge may produce a node starting before this leaf.
    lo: u64,
    /// `(level, first leaf)` of each stacked node.
    nodes: Vec<(u32, u64)>,
    /// `channels` sums per stacked node.
    sums: Vec<f64>,
}

/// Level of the smallest node containing leaves `a` and `b` (`a != b`).
#[inline]
fn lca(a: u64, b: u64) -> u32 {
    64 - (a ^ b).leading_zeros()
}

impl TreeSum {
    /// An empty sum whose leaves all lie at or after `lo`.
    pub fn new(channels: usize, lo: u64) -> Self {
        Self {
            channels,
            lo,
            nodes: Vec::new(),
            sums: Vec::new(),
        }
    }

    /// Pushes the leaf `leaf` (after every leaf pushed so far) and returns its slot, which
    /// the caller fills with the leaf sum.
    pub fn push_leaf(&mut self, leaf: u64, k: &Kernels) -> &mut [f64] {
        self.merge_before(leaf, k);
        self.nodes.push((0, leaf));
        let c = self.channels;
        self.sums.resize(self.sums.len() + c, 0.0);
        let at = self.sums.len() - c;
        &mut self.sums[at..]
    }

    /// Appends all of `other`'s nodes (whose leaves follow this sum's).
    pub fn extend(&mut self, other: &TreeSum, k: &Kernels) {
        let c = self.channels;
        for (i, &(level, start)) in other.nodes.iter().enumerate() {
            self.merge_before(start, k);
            self.nodes.push((level, start));
            self.sums.extend_from_slice(&other.sums[i * c..(i + 1) * c]);
        }
    }

    /// Merges stacked nodes whose common ancestor lies entirely before the leaf `next`.
    fn merge_before(&mut self, next: u64, k: &Kernels) {
        let c = self.channels;
        while self.nodes.len() >= 2 {
            let n = self.nodes.len();
            let (lu, su) = self.nodes[n - 2];
            let (_, st) = self.nodes[n - 1];
            let up = lca(su, st);
            let start = if up >= 64 {
                0
            } else {
                su & !((1u64 << up) - 1)
            };
            if up >= lca(st, next) || start < self.lo {
                break;
            }
            debug_assert!(lu < up);
            let (left, right) = self.sums.split_at_mut((n - 1) * c);
            (k.add_f64)(&mut left[(n - 2) * c..], &right[..c]);
            self.sums.truncate((n - 1) * c);
            self.nodes.truncate(n - 1);
            self.nodes[n - 2] = (up, start);
        }
    }

    /// The root sum (zeros when no leaf was pushed). Only meaningful for a sum starting at
    /// leaf 0 (`lo = 0`).
    pub fn total(&self, k: &Kernels) -> Vec<f64> {
        let c = self.channels;
        let n = self.nodes.len();
        if n == 0 {
            return vec![0.0; c];
        }
        let mut acc = self.sums[(n - 1) * c..].to_vec();
        for i in (0..n - 1).rev() {
            let mut left = self.sums[i * c..(i + 1) * c].to_vec();
            (k.add_f64)(&mut left, &acc);
            acc = left;
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::SimdLevel;

    /// The tree's value, by recursion over levels.
    fn reference(leaves: &[(u64, f64)], level: u32, start: u64) -> Option<f64> {
        let end = start.saturating_add(1u64 << level.min(63)).max(start + 1);
        let inside: Vec<(u64, f64)> = leaves
            .iter()
            .copied()
            .filter(|&(l, _)| l >= start && (level >= 64 || l < end))
            .collect();
        if inside.is_empty() {
            return None;
        }
        if level == 0 {
            return Some(inside[0].1);
        }
        let half = 1u64 << (level - 1);
        let l = reference(&inside, level - 1, start);
        let r = reference(&inside, level - 1, start + half);
        match (l, r) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        }
    }

    #[test]
    fn any_split_gives_the_tree_sum() {
        let k = Kernels::for_level(SimdLevel::Scalar);
        let mut seed = 3u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for case in 0..40 {
            let mut leaves: Vec<(u64, f64)> = Vec::new();
            let mut l = next() % 5;
            for _ in 0..(1 + next() % 60) {
                // Magnitudes far apart, so the order of the additions shows in the bits.
                let v = (next() % 1000) as f64 * 10f64.powi((next() % 30) as i32 - 15);
                leaves.push((l, v));
                l += 1 + next() % if case % 2 == 0 { 3 } else { 100 };
            }
            let want = reference(&leaves, 20, 0).expect("non-empty").to_bits();
            // One sum over everything, and the same leaves cut into random tasks.
            let mut whole = TreeSum::new(1, 0);
            for &(l, v) in &leaves {
                whole.push_leaf(l, k)[0] = v;
            }
            assert_eq!(whole.total(k)[0].to_bits(), want, "case {case} whole");
            let mut global = TreeSum::new(1, 0);
            let mut i = 0;
            while i < leaves.len() {
                let n = 1 + (next() as usize % 7);
                let part = &leaves[i..(i + n).min(leaves.len())];
                let mut t = TreeSum::new(1, part[0].0);
                for &(l, v) in part {
                    t.push_leaf(l, k)[0] = v;
                }
                global.extend(&t, k);
                i += n;
            }
            assert_eq!(global.total(k)[0].to_bits(), want, "case {case} split");
        }
    }
}

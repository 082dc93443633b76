//! Memoized sparse convolution: features computed once per distinct receptive field.
//!
//! A featurizer's input is the sparsity pattern, whose points all carry the same feature
//! (1.0). A conv output at a point is then a function of which kernel offsets hold an input
//! point — its *neighbour mask* — and real matrices have few distinct masks: the eleven
//! WACO matrices have 15 to 9 795 distinct 5×5 masks for 10⁵–10⁶ points. The same holds one
//! layer up, where a point's output is a function of its neighbours' masks, and so on
//! until receptive fields become unique.
//!
//! A [`Memo`] value stores one feature row per distinct receptive field (`table`) and, per
//! point, the row it uses (`ids`). A conv reading a memo value:
//!
//! 1. multiplies every table row by every kernel slice once: `P[κ][id] = table[id] · W[κ]`
//!    (`u·K` small GEMMs instead of one per neighbour pair);
//! 2. gives each output point its *key*, the list of `(κ, id)` of its neighbours in
//!    visiting order (kernel row, then column: a canonical order of the set), and dedupes
//!    keys per task;
//! 3. computes one output row per distinct key: `Σ P[κ][id]` over the key in key order,
//!    then bias and the fused ReLU;
//! 4. returns a memo value again if the distinct keys are few (merging the tasks' keys in
//!    task order, so row ids never depend on the thread count), else dense features.
//!
//! Every output row is a function of its key alone, computed by the same code in the same
//! order wherever it occurs, so results are bit-identical for any thread count.

use std::sync::Arc;

use rayon::prelude::*;

use super::avg_pool::{add_partials, chunk_sum};
use super::kernel::{products, split_by_tasks};
use super::{BufferPool, Features, SparseConv, SparseValue};
use crate::featurize::coords::Coords;
use crate::featurize::rulebook::{tasks, Neighbours};

/// Features stored once per distinct receptive field: point `i` has row `ids[i]` of the
/// `[rows, channels]` table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Memo {
    /// Row of `table` per point.
    pub ids: Vec<u32>,
    /// `[rows, channels]`, row-major.
    pub table: Vec<f32>,
}

impl Memo {
    /// The value where every one of `n` points has the features `row`.
    pub fn constant(n: usize, row: Vec<f32>) -> Self {
        Self {
            ids: vec![0; n],
            table: row,
        }
    }

    /// Number of distinct rows for `channels` channels.
    pub fn rows(&self, channels: usize) -> usize {
        self.table.len().checked_div(channels).unwrap_or(0)
    }

    /// The `[n, channels]` features, one table row per point.
    pub fn expand(&self, channels: usize, dst: &mut [f32]) {
        if channels == 0 {
            return;
        }
        dst.par_chunks_mut(channels * 4096)
            .zip(self.ids.par_chunks(4096))
            .for_each(|(d, ids)| {
                for (row, &id) in d.chunks_exact_mut(channels).zip(ids) {
                    row.copy_from_slice(&self.table[id as usize * channels..][..channels]);
                }
            });
    }

    /// Per-channel sums over all points in `f64`: each row's point count times the row,
    /// summed in row order.
    pub fn sums(&self, channels: usize) -> Vec<f64> {
        if channels == 0 {
            return Vec::new();
        }
        let mut counts = vec![0u64; self.rows(channels)];
        for &id in &self.ids {
            counts[id as usize] += 1;
        }
        let mut total = vec![0.0f64; channels];
        for (row, &n) in self.table.chunks_exact(channels).zip(&counts) {
            for (t, &v) in total.iter_mut().zip(row) {
                *t += n as f64 * f64::from(v);
            }
        }
        total
    }
}

/// Keep a memo output only when its distinct rows are at most this fraction of its points.
const KEEP_MEMO_FRACTION: usize = 4;

/// Whether a conv with kernel volume `volume` should read `memo` (with `n` points) through
/// per-row products: when the products `rows · K` are fewer than the input points, hence
/// fewer than the neighbour pairs a direct conv would multiply.
pub(crate) fn worth_it(memo: &Memo, channels: usize, volume: usize, n: usize) -> bool {
    memo.rows(channels).saturating_mul(volume) <= n
}

/// Runs `conv` on the memo input `x`/`memo` for the output points `out`.
pub(crate) fn conv(
    conv: &SparseConv,
    x: &SparseValue,
    memo: &Memo,
    out: Arc<Coords>,
    pool: &BufferPool,
) -> SparseValue {
    let (cin, cout, volume) = (conv.cin, conv.cout, conv.geom.volume());
    let u = memo.rows(cin);
    // P[κ][id], `[K, u, cout]`.
    let prods = products(&memo.table, u, cin, &conv.weights, volume, cout);
    let row_of = |kappa: u32, id: u32| -> &[f32] {
        &prods[(kappa as usize * u + id as usize) * cout..][..cout]
    };
    let tasks = tasks(&out);
    // With a single input row the key is the neighbour mask (bit `i_r·k + i_c`).
    let masks = (u == 1)
        .then(|| MaskGeometry::new(conv, &x.coords))
        .flatten();
    // One output row per key: `Σ P[κ][id]` over the key in key order, bias, ReLU.
    let k = conv.geom.k as u32;
    let compute_rows = |keys: &KeySet| -> Vec<f32> {
        let mut table = vec![0.0f32; keys.len() * cout];
        let mut pairs = Vec::with_capacity(volume);
        for (key, row) in table.chunks_exact_mut(cout).enumerate() {
            pairs.clear();
            match (&masks, keys.key(key)) {
                (Some(_), &[mask]) => pairs.extend(mask_pairs(mask, k)),
                (_, key) => pairs.extend(key.iter().map(|&p| unpack(p))),
            }
            sum_rows(row, pairs.iter().map(|&(kappa, id)| row_of(kappa, id)));
            if let Some(b) = &conv.bias {
                add_row(row, b);
            }
            if conv.relu {
                for a in row.iter_mut() {
                    *a = if *a < 0.0 { 0.0 } else { *a };
                }
            }
        }
        table
    };
    // Per task: distinct keys (first-occurrence order) and per point its key.
    let locals: Vec<TaskKeys> = tasks
        .par_iter()
        .map(|rows| {
            let mut keys = KeySet::default();
            let mut point_keys =
                Vec::with_capacity(out.row_start[rows.end] - out.row_start[rows.start]);
            if let Some(g) = &masks {
                let mut scan = MaskScanner::new(&x.coords, &conv.geom, g);
                // Neighbouring points often share a mask.
                let mut last = None;
                for ri in rows.clone() {
                    scan.start_row(out.rows[ri]);
                    for p in out.row_range(ri) {
                        let mask = scan.mask(out.cols[p]);
                        let id = match last {
                            Some((m, id)) if m == mask => id,
                            _ => keys.insert(&[mask]),
                        };
                        last = Some((mask, id));
                        point_keys.push(id);
                    }
                    scan.end_row();
                }
            } else {
                let mut nb = Neighbours::new(&x.coords, &conv.geom);
                let mut key = Vec::with_capacity(volume);
                for ri in rows.clone() {
                    nb.start_row(out.rows[ri]);
                    for p in out.row_range(ri) {
                        key.clear();
                        key.extend(
                            nb.point_unsorted(out.cols[p])
                                .iter()
                                .map(|&(kappa, q)| pack(kappa, memo.ids[q as usize])),
                        );
                        point_keys.push(keys.insert(&key));
                    }
                }
            }
            TaskKeys { keys, point_keys }
        })
        .collect();

    let n = out.len();
    let local_total: usize = locals.iter().map(|t| t.keys.len()).sum();
    let (features, sums) = if local_total.saturating_mul(KEEP_MEMO_FRACTION) <= n {
        // Merge the tasks' keys in task order: global ids in first-occurrence order.
        let mut global = KeySet::default();
        let maps: Vec<Vec<u32>> = locals
            .iter()
            .map(|t| {
                (0..t.keys.len())
                    .map(|k| global.insert(t.keys.key(k)))
                    .collect()
            })
            .collect();
        let mut ids = Vec::with_capacity(n);
        for (t, map) in locals.iter().zip(&maps) {
            ids.extend(t.point_keys.iter().map(|&k| map[k as usize]));
        }
        let table = compute_rows(&global);
        let memo = Memo { ids, table };
        let sums = conv.sums.then(|| memo.sums(cout));
        (Features::Memo(memo), sums)
    } else {
        let mut feats = pool.take(n * cout);
        let blocks = split_by_tasks(&mut feats, &out, &tasks, cout);
        let partials: Vec<Option<Vec<f64>>> = locals
            .par_iter()
            .zip(blocks)
            .map(|(t, dst)| {
                let table = compute_rows(&t.keys);
                for (row, &k) in dst.chunks_exact_mut(cout).zip(&t.point_keys) {
                    row.copy_from_slice(&table[k as usize * cout..][..cout]);
                }
                (conv.sums && cout > 0).then(|| chunk_sum(dst, cout))
            })
            .collect();
        let sums = (conv.sums && cout > 0).then(|| add_partials(partials.iter().flatten(), cout));
        (Features::Dense(feats), sums)
    };
    SparseValue {
        coords: out,
        feats: features,
        channels: cout,
        sums,
    }
}

/// The `(κ, row 0)` pairs of a neighbour mask in visiting order (bit `i_r·k + i_c`
/// ascending), the order [`Neighbours::point_unsorted`] lists them in.
fn mask_pairs(mask: u64, k: u32) -> impl Iterator<Item = (u32, u32)> {
    let mut m = mask;
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let b = m.trailing_zeros();
            m &= m - 1;
            (b / k + k * (b % k), 0)
        })
    })
}

/// Bitmap layout for neighbour masks of one conv: input columns in units of the input
/// tensor stride, shifted right by `pad` so every window starts at a non-negative bit.
struct MaskGeometry {
    /// `log2` of the input tensor stride (columns are multiples of it).
    t_shift: u32,
    /// Distance between offsets in units of `t_in` (the dilation).
    dilation: usize,
    /// First offset in units of `t_in`, plus `pad`.
    first: i64,
    pad: i64,
    /// `u64` words per bitmap row.
    words: usize,
}

impl MaskGeometry {
    /// Most bitmap words per task (all kernel rows); wider patterns use the general keys.
    const MAX_WORDS: usize = 1 << 16;

    fn new(conv: &SparseConv, input: &Coords) -> Option<Self> {
        let k = conv.geom.k;
        if k * k > 64 || conv.stride == 0 {
            return None;
        }
        let t_in = conv.t_out / conv.stride;
        if !t_in.is_power_of_two() {
            return None;
        }
        let t_shift = t_in.trailing_zeros();
        let dilation = usize::try_from(conv.geom.step >> t_shift).ok()?;
        let max_col = input.cols.par_iter().copied().max().unwrap_or(0);
        let pad = i64::try_from(k * dilation).ok()?;
        let width = (u64::from(max_col) >> t_shift) + 2 * pad as u64 + 64;
        let words = usize::try_from(width / 64 + 2).ok()?;
        (words.checked_mul(k)? <= Self::MAX_WORDS).then(|| Self {
            t_shift,
            dilation,
            first: (conv.geom.offsets[0] >> t_shift) + pad,
            pad,
            words,
        })
    }
}

/// Per-task neighbour-mask scanner: for each output row, sets one bitmap row per kernel row
/// from the input row it meets, reads each output point's `k × k` window out of them, and
/// clears them again.
struct MaskScanner<'a> {
    nb: Neighbours<'a>,
    input: &'a Coords,
    g: &'a MaskGeometry,
    k: usize,
    bits: Vec<u64>,
    /// The input row ranges set for the current output row.
    set: Vec<(u32, usize, usize)>,
}

impl<'a> MaskScanner<'a> {
    fn new(
        input: &'a Coords,
        geom: &'a crate::featurize::rulebook::Geometry,
        g: &'a MaskGeometry,
    ) -> Self {
        Self {
            nb: Neighbours::new(input, geom),
            input,
            g,
            k: geom.k,
            bits: vec![0; geom.k * g.words],
            set: Vec::with_capacity(geom.k),
        }
    }

    fn start_row(&mut self, row: u32) {
        self.nb.start_row(row);
        self.set.clear();
        self.set.extend_from_slice(self.nb.row_ranges());
        for &(ir, start, end) in &self.set {
            let base = ir as usize * self.g.words;
            // Columns ascend, so one word is assembled in a register before it is stored
            // (an `|=` per column would wait on the previous store to the same word).
            let (mut word, mut acc) = (usize::MAX, 0u64);
            for &c in &self.input.cols[start..end] {
                let i = (c >> self.g.t_shift) as usize + self.g.pad as usize;
                if i / 64 != word {
                    if word != usize::MAX {
                        self.bits[base + word] = acc;
                    }
                    (word, acc) = (i / 64, 0);
                }
                acc |= 1 << (i % 64);
            }
            if word != usize::MAX {
                self.bits[base + word] = acc;
            }
        }
    }

    fn end_row(&mut self) {
        for &(ir, start, end) in &self.set {
            let base = ir as usize * self.g.words;
            for &c in &self.input.cols[start..end] {
                let i = (c >> self.g.t_shift) as usize + self.g.pad as usize;
                self.bits[base + i / 64] = 0;
            }
        }
    }

    /// The neighbour mask of the output point at column `col` of the current row: bit
    /// `i_r·k + i_c` set when the input has a point at offset `(a_{i_r}, a_{i_c})`.
    #[inline]
    fn mask(&self, col: u32) -> u64 {
        let k = self.k;
        let start = ((col >> self.g.t_shift) as i64 + self.g.first) as usize;
        let low = (1u64 << k) - 1;
        let mut mask = 0u64;
        for ir in 0..k {
            let row = &self.bits[ir * self.g.words..][..self.g.words];
            let bits = if self.g.dilation == 1 {
                let (w, sh) = (start / 64, start % 64);
                let pair = (u128::from(row[w + 1]) << 64) | u128::from(row[w]);
                (pair >> sh) as u64 & low
            } else {
                (0..k).fold(0u64, |acc, ic| {
                    let i = start + ic * self.g.dilation;
                    acc | (((row[i / 64] >> (i % 64)) & 1) << ic)
                })
            };
            mask |= bits << (ir * k);
        }
        mask
    }
}

/// One task's distinct keys, and each point's key.
struct TaskKeys {
    keys: KeySet,
    point_keys: Vec<u32>,
}

/// `row = Σ srcs` in order (the first copied), with AVX where available.
fn sum_rows<'s>(row: &mut [f32], mut srcs: impl Iterator<Item = &'s [f32]>) {
    match srcs.next() {
        Some(first) => row.copy_from_slice(first),
        None => row.fill(0.0),
    }
    for src in srcs {
        add_row(row, src);
    }
}

/// `row += src` elementwise.
#[inline]
fn add_row(row: &mut [f32], src: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU supports AVX (checked just above).
        unsafe { add_row_avx(row, src) };
        return;
    }
    add_row_impl(row, src);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn add_row_avx(row: &mut [f32], src: &[f32]) {
    add_row_impl(row, src);
}

#[inline(always)]
fn add_row_impl(row: &mut [f32], src: &[f32]) {
    for (a, b) in row.iter_mut().zip(src) {
        *a += *b;
    }
}

#[inline]
fn pack(kappa: u32, id: u32) -> u64 {
    (u64::from(kappa) << 32) | u64::from(id)
}

#[inline]
fn unpack(pair: u64) -> (u32, u32) {
    ((pair >> 32) as u32, pair as u32)
}

/// A set of keys (`u64` sequences) numbered in insertion order: open addressing over a
/// power-of-two slot array, keys stored back to back in one arena.
#[derive(Default)]
struct KeySet {
    /// `0` = empty, else key number + 1.
    slots: Vec<u32>,
    hashes: Vec<u64>,
    /// Key `k` is `arena[starts[k]..starts[k + 1]]`.
    starts: Vec<usize>,
    arena: Vec<u64>,
}

impl KeySet {
    fn len(&self) -> usize {
        self.hashes.len()
    }

    fn key(&self, k: usize) -> &[u64] {
        let end = self.starts.get(k + 1).copied().unwrap_or(self.arena.len());
        &self.arena[self.starts[k]..end]
    }

    fn hash(key: &[u64]) -> u64 {
        let mut h = key.len() as u64;
        for &v in key {
            h = (h.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        h ^ (h >> 29)
    }

    /// The number of `key`, inserting it if new.
    #[inline]
    fn insert(&mut self, key: &[u64]) -> u32 {
        if (self.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let h = Self::hash(key);
        let mask = self.slots.len() - 1;
        let mut i = (h as usize) & mask;
        loop {
            match self.slots[i] {
                0 => {
                    let k = self.len();
                    self.slots[i] = k as u32 + 1;
                    self.hashes.push(h);
                    self.starts.push(self.arena.len());
                    self.arena.extend_from_slice(key);
                    return k as u32;
                }
                s => {
                    let k = (s - 1) as usize;
                    // Element by element: keys are short, and a slice `==` calls `memcmp`.
                    let old = self.key(k);
                    if self.hashes[k] == h
                        && old.len() == key.len()
                        && old.iter().zip(key).all(|(a, b)| a == b)
                    {
                        return k as u32;
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(64);
        self.slots = vec![0; size];
        let mask = size - 1;
        for (k, &h) in self.hashes.iter().enumerate() {
            let mut i = (h as usize) & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = k as u32 + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_set_numbers_in_insertion_order() {
        let mut s = KeySet::default();
        let keys: Vec<Vec<u64>> = (0..1000u64).map(|i| vec![i % 7, i % 13, i]).collect();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(s.insert(k), i as u32);
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(s.insert(k), i as u32);
            assert_eq!(s.key(i), k.as_slice());
        }
        assert_eq!(s.insert(&[]), 1000);
        assert_eq!(s.insert(&[]), 1000);
        assert_eq!(s.len(), 1001);
    }

    #[test]
    fn memo_sums_and_expand() {
        let m = Memo {
            ids: vec![1, 0, 1, 1],
            table: vec![1.0, 2.0, 10.0, 20.0],
        };
        assert_eq!(m.rows(2), 2);
        assert_eq!(m.sums(2), vec![31.0, 62.0]);
        let mut d = vec![0.0; 8];
        m.expand(2, &mut d);
        assert_eq!(d, vec![10.0, 20.0, 1.0, 2.0, 10.0, 20.0, 10.0, 20.0]);
    }
}

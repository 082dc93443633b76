//! [`TacoSpace`] by index: the enumeration as blocks of a fixed inner size, so that a
//! configuration, its line and its status for a matrix are computed from its index alone,
//! without building the other 611 711.
//!
//! The enumeration ([`TacoSpace`]'s docs) is nested: split combination → allowed loop order
//! → format flags → chunk. One *block* per split combination holds its allowed orders (which
//! depend only on the dense split) × `flags × chunks` configurations.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use super::taco::{LevelFormat, SuperSchedule, TacoSpace};
use super::{CandidateStatus, Kernel, MatrixShape, ScheduleSpace, ShapeStatuses};

/// The block structure of one [`TacoSpace`].
pub(super) struct Layout {
    /// Per block: the split value of each axis.
    pub combos: Vec<Vec<u32>>,
    /// Every permutation of the loop names, lexicographic.
    pub orders: Vec<Vec<String>>,
    /// Per block: the allowed order indices, in enumeration order.
    pub allowed: Vec<Vec<u16>>,
    /// Per block: index of its first configuration.
    pub starts: Vec<usize>,
    /// Format flag values (`x1f` most significant), in enumeration order.
    pub flags: Vec<u8>,
    /// Configurations per allowed order: `flags × chunks`.
    pub inner: usize,
    pub len: usize,
    /// Per order: its loop names as line tokens, each followed by a space.
    pub order_text: Vec<String>,
    /// Per order: the parallel loop and thread count tokens, each followed by a space.
    pub par_text: Vec<String>,
    /// Per chunk: its token.
    pub chunk_text: Vec<String>,
}

/// One configuration's coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Coord {
    pub block: usize,
    pub order: usize,
    pub flags: u8,
    pub chunk: usize,
}

fn formats(bits: u8) -> [LevelFormat; 4] {
    [3, 2, 1, 0].map(|s| {
        if bits >> s & 1 == 1 {
            LevelFormat::Uncompressed
        } else {
            LevelFormat::Compressed
        }
    })
}

/// Layouts of the spaces indexed most recently, at most [`LAYOUT_CACHE`]: building one
/// generates and checks every permutation of the loop names, which per-index access
/// (`config(i)` and `line(i)` from a top-k report, the C ABI or the TVM module) would otherwise
/// repeat for every printed candidate. Keyed by the space's whole value, since its fields are
/// public and may change between calls.
static LAYOUTS: Mutex<Vec<(TacoSpace, Arc<Layout>)>> = Mutex::new(Vec::new());

/// Most layouts kept (a WACO SpMM layout holds about 0.2 MB).
const LAYOUT_CACHE: usize = 8;

impl TacoSpace {
    /// The block structure, from [`LAYOUTS`] or built and kept there.
    pub(super) fn layout(&self) -> Arc<Layout> {
        // A poisoned lock only means another thread panicked while holding it: the cache then
        // goes unused, never wrong.
        if let Ok(cache) = LAYOUTS.lock() {
            if let Some((_, layout)) = cache.iter().find(|(space, _)| space == self) {
                return Arc::clone(layout);
            }
        }
        let layout = Arc::new(self.build_layout());
        if let Ok(mut cache) = LAYOUTS.lock() {
            if cache.len() >= LAYOUT_CACHE {
                cache.remove(0);
            }
            cache.push((self.clone(), Arc::clone(&layout)));
        }
        layout
    }

    /// The block structure (a few thousand small vectors).
    fn build_layout(&self) -> Layout {
        let mut combos: Vec<Vec<u32>> = vec![Vec::new()];
        for list in &self.splits {
            combos = combos
                .iter()
                .flat_map(|p| {
                    list.iter().map(move |v| {
                        let mut q = p.clone();
                        q.push(*v);
                        q
                    })
                })
                .collect();
        }
        let orders = self.all_orders();
        let mut by_dense: HashMap<u32, Vec<u16>> = HashMap::new();
        let flags: Vec<u8> = (0u8..16)
            .filter(|&b| !(self.kernel == Kernel::SDDMM && b == 15))
            .collect();
        let inner = flags.len() * self.chunks.len();
        let mut allowed = Vec::with_capacity(combos.len());
        let mut starts = Vec::with_capacity(combos.len());
        let mut at = 0;
        for splits in &combos {
            let dense = self.dense_split_index().map_or(1, |i| splits[i]);
            let list = by_dense
                .entry(dense)
                .or_insert_with(|| {
                    (0..orders.len())
                        .filter(|&o| self.order_allowed(&orders[o], dense))
                        .map(|o| o as u16)
                        .collect()
                })
                .clone();
            starts.push(at);
            at += list.len() * inner;
            allowed.push(list);
        }
        let order_text = orders.iter().map(|o| format!("{} ", o.join(" "))).collect();
        let par_text = orders
            .iter()
            .map(|o| format!("{} {} ", self.par_index_for(o), self.threads))
            .collect();
        let chunk_text = self.chunks.iter().map(u32::to_string).collect();
        Layout {
            combos,
            orders,
            allowed,
            starts,
            flags,
            inner,
            len: at,
            order_text,
            par_text,
            chunk_text,
        }
    }
}

impl Layout {
    pub fn coord(&self, index: usize) -> Option<Coord> {
        if index >= self.len {
            return None;
        }
        let block = self.starts.partition_point(|&s| s <= index) - 1;
        let rem = index - self.starts[block];
        let order = self.allowed[block][rem / self.inner] as usize;
        let fc = rem % self.inner;
        let chunks = self.inner / self.flags.len();
        Some(Coord {
            block,
            order,
            flags: self.flags[fc / chunks],
            chunk: fc % chunks,
        })
    }

    pub fn config(&self, space: &TacoSpace, c: Coord) -> SuperSchedule {
        let order = self.orders[c.order].clone();
        SuperSchedule {
            kernel: space.kernel,
            splits: self.combos[c.block].clone(),
            par_index: space.par_index_for(&order),
            order,
            formats: formats(c.flags),
            threads: space.threads,
            chunk: space.chunks[c.chunk],
        }
    }

    /// The index of a coordinate (its order and flags must exist in the block).
    fn index(&self, block: usize, order: usize, flags: u8, chunk: usize) -> Option<usize> {
        let pos = self.allowed[block]
            .iter()
            .position(|&o| o as usize == order)?;
        let f = self.flags.iter().position(|&b| b == flags)?;
        let chunks = self.inner / self.flags.len();
        Some(self.starts[block] + pos * self.inner + f * chunks + chunk)
    }
}

impl TacoSpace {
    /// Lines of configurations `range`, formatted from precomputed tokens.
    pub(super) fn lines_fast(&self, range: Range<usize>, out: &mut Vec<String>) {
        let layout = self.layout();
        let end = range.end.min(layout.len);
        if range.start >= end {
            return;
        }
        let mut split_text = String::new();
        let mut block = usize::MAX;
        out.reserve(end - range.start);
        for i in range.start..end {
            let Some(c) = layout.coord(i) else { break };
            if c.block != block {
                block = c.block;
                split_text.clear();
                for v in &layout.combos[block] {
                    let _ = write!(split_text, "{v} ");
                }
            }
            let mut line = String::with_capacity(48);
            line.push_str(&split_text);
            line.push_str(&layout.order_text[c.order]);
            for s in [3, 2, 1, 0] {
                line.push(if c.flags >> s & 1 == 1 { '1' } else { '0' });
                line.push(' ');
            }
            line.push_str(&layout.par_text[c.order]);
            line.push_str(&layout.chunk_text[c.chunk]);
            out.push(line);
        }
    }

    /// Configurations `range`.
    pub(super) fn configs_fast(&self, range: Range<usize>, out: &mut Vec<SuperSchedule>) {
        let layout = self.layout();
        for i in range {
            match layout.coord(i) {
                Some(c) => out.push(layout.config(self, c)),
                None => break,
            }
        }
    }

    /// Where a configuration sits in the enumeration, if it does.
    pub(super) fn index_fast(&self, default: &SuperSchedule) -> Option<usize> {
        let layout = self.layout();
        let block = layout.combos.iter().position(|c| *c == default.splits)?;
        let order = layout.orders.iter().position(|o| *o == default.order)?;
        let flags = default
            .formats
            .iter()
            .fold(0u8, |acc, f| acc << 1 | f.flag());
        let chunk = self.chunks.iter().position(|&c| c == default.chunk)?;
        let index = layout.index(block, order, flags, chunk)?;
        // The decoded configuration must be the default (threads, par index).
        (layout.config(self, layout.coord(index)?) == *default).then_some(index)
    }

    /// Duplicates for `shape` by the rule of [`TacoSpace::duplicate_key`] (splits clamped to
    /// the axis extents), block by block: nothing to do unless some split exceeds its axis.
    pub(super) fn shape_statuses_fast(&self, shape: &MatrixShape) -> ShapeStatuses {
        let layout = self.layout();
        let mut out = ShapeStatuses::all_valid(layout.len);
        // Validity depends on the splits, the chunk and the thread count only (orders and
        // the parallel loop are valid by construction): check one configuration per
        // (block, chunk).
        let chunks = self.chunks.len();
        for (b, allowed) in layout.allowed.iter().enumerate() {
            let Some(&first) = allowed.first() else {
                continue;
            };
            for ch in 0..chunks {
                let probe = Coord {
                    block: b,
                    order: first as usize,
                    flags: layout.flags[0],
                    chunk: ch,
                };
                if let Err(e) = self.validate(&layout.config(self, probe), shape) {
                    let reason = e.to_string();
                    for pos in 0..allowed.len() {
                        for f in 0..layout.flags.len() {
                            let i = layout.starts[b] + pos * layout.inner + f * chunks + ch;
                            out.set(
                                i,
                                CandidateStatus::InvalidForMatrix {
                                    reason: std::borrow::Cow::Owned(reason.clone()),
                                },
                            );
                        }
                    }
                }
            }
        }
        let caps = self.split_caps(shape);
        let clamps =
            |v: &[u32]| -> Vec<u32> { v.iter().zip(&caps).map(|(s, c)| (*s).min(*c)).collect() };
        if layout.combos.iter().all(|c| clamps(c) == *c) {
            return out;
        }
        // Blocks grouped by clamped splits, in enumeration order.
        let mut groups: HashMap<Vec<u32>, Vec<usize>> = HashMap::new();
        for (b, combo) in layout.combos.iter().enumerate() {
            groups.entry(clamps(combo)).or_default().push(b);
        }
        for members in groups.values() {
            for (k, &b) in members.iter().enumerate().skip(1) {
                for (pos, &o) in layout.allowed[b].iter().enumerate() {
                    // The first earlier block of the group with this order holds the key.
                    let Some((first, fpos)) = members[..k].iter().find_map(|&e| {
                        layout.allowed[e]
                            .iter()
                            .position(|&x| x == o)
                            .map(|p| (e, p))
                    }) else {
                        continue;
                    };
                    let from = layout.starts[b] + pos * layout.inner;
                    let to = layout.starts[first] + fpos * layout.inner;
                    for j in 0..layout.inner {
                        out.set(from + j, CandidateStatus::Duplicate { of: to + j });
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn small(kernel: Kernel) -> TacoSpace {
        let mut s = TacoSpace::waco(kernel);
        s.splits = s
            .splits
            .iter()
            .map(|l| l[..l.len().min(3)].to_vec())
            .collect();
        s.chunks = vec![1, 32];
        s
    }

    /// Cached layouts follow the space's value: a space changed after it was indexed, and
    /// more distinct spaces than the cache keeps, still index like their enumeration.
    #[test]
    fn cached_layouts_follow_the_space() {
        let shape = MatrixShape::new(1000, 1000, 5000);
        let check = |space: &TacoSpace| {
            let list = space.candidates(&shape);
            let n = space.enumerate(&shape).len();
            assert_eq!(space.len(), n);
            for i in [0, n / 2, n - 1] {
                let mut lines = Vec::new();
                space.lines_fast(i..i + 1, &mut lines);
                assert_eq!(lines, [list.items[i].line.clone()], "line #{i}");
            }
        };
        let mut space = small(Kernel::SpMM);
        check(&space);
        space.chunks.push(64);
        space.threads = 7;
        check(&space);
        for c in 1..=(LAYOUT_CACHE as u32 + 2) {
            let mut s = small(Kernel::SDDMM);
            s.chunks = vec![c];
            check(&s);
        }
        check(&space);
    }

    /// The index methods agree with the plain enumeration, for every kernel and for shapes
    /// with and without clamped splits.
    #[test]
    fn index_methods_match_the_enumeration() {
        let mut odd = small(Kernel::SpMM);
        odd.splits[0] = vec![1, 3];
        odd.chunks = vec![0, 32];
        for (kernel, space) in Kernel::ALL
            .into_iter()
            .map(|k| (k, small(k)))
            .chain([(Kernel::SpMM, odd)])
        {
            for shape in [
                MatrixShape::new(1000, 1000, 5000),
                MatrixShape::new(2, 3, 4),
            ] {
                let list = space.candidates(&shape);
                let n = space.enumerate(&shape).len();
                assert_eq!(space.len(), n, "{kernel} len");
                let mut lines = Vec::new();
                space.lines_fast(0..n, &mut lines);
                let mut configs = Vec::new();
                space.configs_fast(0..n, &mut configs);
                let statuses = space.shape_statuses_fast(&shape);
                for (i, item) in list.items.iter().take(n).enumerate() {
                    assert_eq!(lines[i], item.line, "{kernel} line #{i}");
                    assert_eq!(configs[i], item.config, "{kernel} config #{i}");
                    assert_eq!(
                        statuses.get(i).map(CandidateStatus::into_owned),
                        Some(item.status.clone()),
                        "{kernel} status #{i} for {shape:?}"
                    );
                }
                let default = space.default_config(&shape);
                assert_eq!(
                    space.index_fast(&default),
                    list.items
                        .iter()
                        .position(|c| c.config == default)
                        .filter(|&i| i < n)
                );
            }
        }
    }
}

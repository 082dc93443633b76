//! The block search's results kept for the next layers of a stride-1 group.
//!
//! A stride-1 layer's output points are its input points, so in a chain of stride-1 layers
//! of one geometry (DASH's `conv2 → conv3`, `conv4 → conv5 → conv6`, …) every layer searches
//! the same neighbours for the same output points: only the rows stored at them differ. The
//! first layer of such a chain records, per output row, what the block search found — each
//! point's neighbour mask and, per kernel row, where its first neighbour lies *within that
//! input row* — and the later layers hand those to their pair sinks instead of searching
//! again ([`Neighbours::with_memo`](super::rulebook::Neighbours::with_memo)). Positions
//! within an input row do not depend on the window the row sits in (windows hold whole
//! coordinate rows, and a band's halo changes only where rows start), so the later layers
//! get exactly the pairs, in exactly the order, that their own search would give: values
//! cannot change, only the time spent finding them.

use std::collections::VecDeque;
use std::ops::Range;

/// What a task's neighbour searches do with their layer group's memo.
#[derive(Clone, Copy, Default)]
pub(crate) enum MemoUse<'a> {
    /// Search, keep nothing.
    #[default]
    Off,
    /// Search, and record what was found for the later layers of the group.
    Record,
    /// Take the rows the memo holds from it; search the others.
    Replay(&'a SearchMemo),
}

/// The block search's findings kept for a chain's later layers: the chunks its first layer's
/// tasks recorded, rows ascending across them. Chunks are kept as recorded (no copy) and
/// dropped whole once every later layer is past their last row.
#[derive(Debug, Default)]
pub(crate) struct SearchMemo {
    chunks: VecDeque<MemoChunk>,
}

impl SearchMemo {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.chunks.iter().map(MemoChunk::bytes).sum()
    }

    /// Appends `chunk`, whose rows all lie above the memo's; a memo whose rows would not
    /// ascend is emptied instead (its layers then search).
    pub fn append(&mut self, chunk: MemoChunk) {
        let (Some(&first), last) = (chunk.rows.first(), self.last_row()) else {
            return;
        };
        if last.is_some_and(|last| last >= first) {
            self.chunks.clear();
            return;
        }
        self.chunks.push_back(chunk);
    }

    /// The highest row held.
    fn last_row(&self) -> Option<u32> {
        self.chunks.back().and_then(|c| c.rows.last().copied())
    }

    /// Drops the chunks whose rows all lie below `row` (every later layer is past them).
    pub fn drop_below(&mut self, row: i64) {
        while let Some(c) = self.chunks.front() {
            match c.rows.last() {
                Some(&last) if i64::from(last) >= row => return,
                _ => self.chunks.pop_front(),
            };
        }
    }

    /// The chunk holding output row `row` and the row's points in it, searching forward
    /// from `*at` (chunk, row index; rows are asked for in ascending order); `None` when the
    /// memo does not hold the row.
    pub(super) fn row(
        &self,
        row: u32,
        at: &mut (usize, usize),
    ) -> Option<(&MemoChunk, Range<usize>)> {
        while let Some(c) = self.chunks.get(at.0) {
            if c.rows.last().is_some_and(|&last| last >= row) {
                // Usually the row after the last one asked for.
                let start = at.1.min(c.rows.len());
                let i = if c.rows[start] >= row {
                    start
                } else {
                    start + c.rows[start..].partition_point(|&r| r < row)
                };
                at.1 = i;
                return (c.rows[i] == row).then(|| (c, c.points(i)));
            }
            *at = (at.0 + 1, 0);
        }
        None
    }
}

/// What one task's block search found for consecutive output rows (ascending).
#[derive(Debug, Default)]
pub(crate) struct MemoChunk {
    /// Output row coordinates, ascending.
    rows: Vec<u32>,
    /// Row `i`'s points are `ends[i − 1]..ends[i]` (from 0 for the first).
    ends: Vec<u32>,
    /// Per point, its neighbour mask (bit `i_r·k + i_c`).
    masks: Vec<u32>,
    /// Per kernel row `i_r`, per point: the position of its first neighbour at or right of
    /// the window's left end within input row `R + a_r`, counted from that row's first point
    /// (any value where the mask has no bit in that row).
    firsts: Vec<Vec<u32>>,
}

impl MemoChunk {
    /// An empty chunk for kernels of size `k`.
    pub fn new(k: usize) -> Self {
        Self {
            firsts: vec![Vec::new(); k],
            ..Self::default()
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        let firsts: usize = self.firsts.iter().map(Vec::capacity).sum();
        (self.rows.capacity() + self.ends.capacity() + self.masks.capacity() + firsts) * 4
    }

    /// Bytes a chunk of `points` points in `rows` rows of kernel size `k` holds.
    pub fn bytes_for(points: usize, rows: usize, k: usize) -> usize {
        (2 * rows + points * (1 + k)) * 4
    }

    /// The points of row index `i`.
    fn points(&self, i: usize) -> Range<usize> {
        let begin = if i == 0 { 0 } else { self.ends[i - 1] };
        begin as usize..self.ends[i] as usize
    }

    /// Room for `points` more points in `rows` more rows.
    pub(super) fn reserve(&mut self, points: usize, rows: usize) {
        self.rows.reserve(rows);
        self.ends.reserve(rows);
        self.masks.reserve(points);
        for kept in &mut self.firsts {
            kept.reserve(points);
        }
    }

    /// Starts output row `row` (above every row held).
    pub(super) fn start_row(&mut self, row: u32) {
        debug_assert!(self.rows.last().is_none_or(|&r| r < row));
        self.rows.push(row);
        self.ends.push(self.masks.len() as u32);
    }

    /// Appends the current row's next `n` points: lane `j`'s mask `masks[j]` and its first
    /// neighbour per kernel row `firsts[i_r][j]`, kept relative to `bases[i_r]` (where
    /// input row `R + a_r` starts).
    #[inline]
    pub(super) fn push_block(
        &mut self,
        n: usize,
        masks: &[u32; 16],
        firsts: &[[u32; 16]],
        bases: &[u32],
    ) {
        self.masks.extend_from_slice(&masks[..n]);
        for ((kept, first), &base) in self.firsts.iter_mut().zip(firsts).zip(bases) {
            kept.extend(first[..n].iter().map(|&f| f.wrapping_sub(base)));
        }
        if let Some(end) = self.ends.last_mut() {
            *end = self.masks.len() as u32;
        }
    }

    /// Points `p..p + n` (`n ≤ 16`) as the block search gives them: their masks, and per
    /// kernel row their first neighbours, `bases[i_r]` added back.
    #[inline]
    pub(super) fn block(
        &self,
        p: usize,
        n: usize,
        bases: &[u32],
        masks: &mut [u32; 16],
        firsts: &mut [[u32; 16]],
    ) {
        masks[..n].copy_from_slice(&self.masks[p..p + n]);
        for ((out, kept), &base) in firsts.iter_mut().zip(&self.firsts).zip(bases) {
            for (o, &f) in out[..n].iter_mut().zip(&kept[p..p + n]) {
                *o = base.wrapping_add(f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk of rows `rows`, each of `n` points whose masks count up from `seed`.
    fn chunk_of(rows: &[u32], n: usize, seed: u32) -> MemoChunk {
        let mut m = MemoChunk::new(3);
        let mut next = seed;
        for &r in rows {
            m.start_row(r);
            let mut masks = [0u32; 16];
            let mut firsts = [[0u32; 16]; 3];
            for j in 0..n {
                masks[j] = next;
                for (ir, f) in firsts.iter_mut().enumerate() {
                    f[j] = 100 + next * 3 + ir as u32;
                }
                next += 1;
            }
            m.push_block(n, &masks, &firsts, &[100, 100, 100]);
        }
        m
    }

    /// Row `row` of `memo` as the block search gives it (bases 1000), searching from `at`.
    fn replay(memo: &SearchMemo, row: u32, at: &mut (usize, usize)) -> Option<Vec<[u32; 4]>> {
        let (chunk, points) = memo.row(row, at)?;
        let (mut masks, mut firsts) = ([0u32; 16], [[0u32; 16]; 3]);
        chunk.block(
            points.start,
            points.len(),
            &[1000; 3],
            &mut masks,
            &mut firsts,
        );
        let lane = |j: usize| [masks[j], firsts[0][j], firsts[1][j], firsts[2][j]];
        Some((0..points.len()).map(lane).collect())
    }

    #[test]
    fn rows_append_drop_and_replay_in_order() {
        let mut m = SearchMemo::default();
        m.append(chunk_of(&[2, 5, 9], 2, 0));
        m.append(chunk_of(&[11, 12], 3, 6));
        let mut at = (0, 0);
        assert_eq!(replay(&m, 1, &mut at), None);
        assert_eq!(
            replay(&m, 5, &mut at),
            Some(vec![[2, 1006, 1007, 1008], [3, 1009, 1010, 1011]])
        );
        assert_eq!(replay(&m, 10, &mut at), None);
        let row11 = replay(&m, 11, &mut at).expect("row 11");
        assert_eq!(row11.len(), 3);
        assert_eq!(row11[1], [7, 1021, 1022, 1023]);
        // Chunks go whole once every reader is past their last row.
        m.drop_below(9);
        assert!(replay(&m, 9, &mut (0, 0)).is_some());
        m.drop_below(10);
        assert_eq!(replay(&m, 9, &mut (0, 0)), None);
        assert_eq!(
            replay(&m, 12, &mut (0, 0)).map(|r| r[0]),
            Some([9, 1027, 1028, 1029])
        );
        // Rows that would not ascend empty the memo: its layers search instead.
        m.append(chunk_of(&[12], 1, 0));
        assert_eq!(m.bytes(), 0);
        assert_eq!(replay(&m, 12, &mut (0, 0)), None);
    }
}

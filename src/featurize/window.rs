//! The rows of a sparse value that are held at one time while bands stream through.
//!
//! A [`Window`] holds the value's points in a range of rows (the *halo* still needed by
//! later bands, plus the rows of the current band) with their features stored by reference:
//! point `p` has feature row `ids[p]` of `table`. Points with the same receptive field
//! share a row (see `jobs`), and `shared[id]` says whether a row is used by two or more
//! points. A row used by one point makes every key containing it unique, so the executor
//! hashes only keys made of shared rows.
//!
//! Row ids are only meaningful inside one window; [`Window::keep_from`] renumbers them when
//! it drops the rows no later band needs.

use super::coords::Coords;
use super::memory::{BufferPool, Charge, Memory, RowBuf};
use crate::error::Result;

/// A window cut down to a halo of at least `1 / HALO_IN_PLACE` of its points keeps it in
/// its own table and vectors, and the next band grows them in place; a smaller halo is
/// copied out and the large table returned to the pool for the next layer. It trades the
/// copies of large halos against the memory of tables held between bands.
const HALO_IN_PLACE: usize = 4;

/// Rows of a sparse value held at one time (see the module docs).
#[derive(Debug)]
pub(crate) struct Window<'m> {
    /// The points.
    pub coords: Coords,
    /// Feature row of every point.
    pub ids: Vec<u32>,
    /// `[rows, channels]` feature rows (a buffer from the pool).
    pub table: RowBuf,
    /// Per table row: used by two or more points.
    pub shared: Vec<bool>,
    /// Feature channels.
    pub channels: usize,
    /// This window's share of the run's memory budget.
    pub charge: Option<Charge<'m>>,
}

impl<'m> Window<'m> {
    /// An empty window.
    pub fn empty(channels: usize) -> Self {
        Self {
            coords: Coords::empty(),
            ids: Vec::new(),
            table: RowBuf::default(),
            shared: Vec::new(),
            channels,
            charge: None,
        }
    }

    /// Bytes a window of `points` points and `rows` table rows of `channels` holds, with
    /// `row_count` coordinate rows.
    pub fn bytes_for(points: usize, row_count: usize, rows: usize, channels: usize) -> usize {
        points * 8 + row_count * 12 + rows * (channels * 4 + 1) + 64
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Number of feature rows.
    pub fn table_rows(&self) -> usize {
        self.shared.len()
    }

    /// Feature row `id`.
    #[inline]
    pub fn row(&self, id: u32) -> &[f32] {
        let c = self.channels;
        &self.table[id as usize * c..][..c]
    }

    /// Whether every point has the same feature row, shared (the pattern itself).
    pub fn is_constant(&self) -> bool {
        self.shared == [true]
    }

    /// The rows at or after row coordinate `lo` (table rows that no kept point uses are
    /// dropped, ids renumbered in the rows' order), charged to `mem`: compacted within the
    /// window's own table and vectors, or copied into small ones when they are few (see
    /// [`HALO_IN_PLACE`]).
    pub fn keep_from(
        self,
        lo: i64,
        pool: &BufferPool,
        mem: &'m Memory,
        node: &str,
    ) -> Result<Window<'m>> {
        let keep = self.coords.rows_between(lo, i64::MAX);
        if keep.start == 0 {
            return Ok(self);
        }
        let c = self.channels;
        if keep.is_empty() {
            pool.give(self.table);
            return Ok(Window::empty(c));
        }
        let pts = self.coords.points_of(keep.clone());
        // A large halo stays in the window's own vectors and table (no copy), a small one
        // moves to small ones and the large ones go back to the pool.
        let in_place = (self.ids.len() - pts.start) * HALO_IN_PLACE >= self.ids.len();
        let (coords, mut ids) = if in_place {
            let (mut coords, mut ids) = (self.coords, self.ids);
            coords.keep_rows_from(keep.start);
            ids.drain(..pts.start);
            (coords, ids)
        } else {
            (self.coords.copy_rows(keep), self.ids[pts].to_vec())
        };
        let renumber = Renumbering::of(&ids);
        // A kept row stays shared when it was: the points that shared it may be split by
        // the cut, but "shared" only has to be true for rows used by two or more points.
        let (table, shared) = if in_place {
            renumber.compact(self.table, self.shared, c)
        } else {
            let kept = renumber.copy(&self.table, &self.shared, pool, c);
            pool.give(self.table);
            kept
        };
        renumber.apply(&mut ids);
        let bytes = Self::bytes_for(ids.len(), coords.rows.len(), shared.len(), c);
        let charge = mem.charge(bytes, node, "the halo rows kept for the next band")?;
        Ok(Window {
            coords,
            ids,
            table,
            shared,
            channels: c,
            charge: Some(charge),
        })
    }

    /// Returns the table buffer to the pool.
    pub fn release(self, pool: &BufferPool) {
        pool.give(self.table);
    }
}

/// The new ids of the table rows some kept points use: `0, 1, 2, …` in ascending order of
/// the old ids, so no row moves to a higher place when the rows are compacted in their table.
struct Renumbering {
    /// Lowest old id used.
    lo_id: u32,
    /// Per old id from `lo_id`: its new id, or `u32::MAX` when no kept point uses it.
    map: Vec<u32>,
    /// Rows kept.
    kept: usize,
}

impl Renumbering {
    /// The renumbering of the rows that `ids` use (`ids` not empty).
    fn of(ids: &[u32]) -> Self {
        let (lo_id, hi_id) = ids
            .iter()
            .fold((u32::MAX, 0), |(lo, hi), &id| (lo.min(id), hi.max(id)));
        let mut map = vec![u32::MAX; (hi_id - lo_id) as usize + 1];
        for &id in ids {
            map[(id - lo_id) as usize] = 0;
        }
        let mut kept = 0;
        for m in map.iter_mut().filter(|m| **m != u32::MAX) {
            *m = kept;
            kept += 1;
        }
        Self {
            lo_id,
            map,
            kept: kept as usize,
        }
    }

    /// `(old id, new id)` of every kept row, ascending.
    fn kept_rows(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.map
            .iter()
            .enumerate()
            .filter(|(_, &m)| m != u32::MAX)
            .map(|(i, &m)| (self.lo_id as usize + i, m as usize))
    }

    /// The kept rows of `table` (rows of `c` values) and their shared flags, moved to
    /// their new places within the same buffers.
    fn compact(&self, mut table: RowBuf, mut shared: Vec<bool>, c: usize) -> (RowBuf, Vec<bool>) {
        let mut moves = RowMoves::new(c);
        for (old, new) in self.kept_rows() {
            moves.push(&mut table, old, new);
            shared[new] = shared[old];
        }
        moves.flush(&mut table);
        shared.truncate(self.kept);
        table.resize_in_place(self.kept * c);
        (table, shared)
    }

    /// The kept rows of `table` and their shared flags, copied into a pooled table and a
    /// new vector.
    fn copy(
        &self,
        table: &[f32],
        shared: &[bool],
        pool: &BufferPool,
        c: usize,
    ) -> (RowBuf, Vec<bool>) {
        let mut kept = pool.take(self.kept * c);
        let mut flags = Vec::with_capacity(self.kept);
        for (old, new) in self.kept_rows() {
            kept[new * c..(new + 1) * c].copy_from_slice(&table[old * c..][..c]);
            flags.push(shared[old]);
        }
        (kept, flags)
    }

    /// Gives `ids` their new ids.
    fn apply(&self, ids: &mut [u32]) {
        for id in ids {
            *id = self.map[(*id - self.lo_id) as usize];
        }
    }
}

/// Moves of table rows to lower places, run by run (a run of consecutive rows moves in one
/// copy).
struct RowMoves {
    c: usize,
    /// The pending run: first row's place, its new place, rows.
    run: (usize, usize, usize),
}

impl RowMoves {
    fn new(c: usize) -> Self {
        Self { c, run: (0, 0, 0) }
    }

    /// Moves row `from` to row `to` (`to ≤ from`, after every earlier move's rows).
    fn push(&mut self, table: &mut [f32], from: usize, to: usize) {
        let (f, t, n) = self.run;
        if n > 0 && f + n == from && t + n == to {
            self.run.2 += 1;
            return;
        }
        self.flush(table);
        self.run = (from, to, 1);
    }

    /// Does the pending move.
    fn flush(&mut self, table: &mut [f32]) {
        let (f, t, n) = std::mem::take(&mut self.run);
        if n > 0 && f != t {
            let c = self.c;
            table.copy_within(f * c..(f + n) * c, t * c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four rows of points whose ids share table rows out of order, with row `r` of the
    /// table filled with `r`'s value in both channels.
    fn shared_window(mem: &Memory) -> Window<'_> {
        let coords = Coords {
            rows: vec![0, 2, 4, 6],
            row_start: vec![0, 2, 4, 7, 9],
            cols: vec![0, 4, 2, 6, 0, 2, 8, 4, 6],
        };
        let ids = vec![5, 0, 4, 1, 6, 2, 6, 3, 2];
        let table: Vec<f32> = (0..7).flat_map(|r| [r as f32, 10.0 + r as f32]).collect();
        Window {
            coords,
            ids,
            table: RowBuf::from_vec(table),
            shared: vec![false, false, true, false, false, false, true],
            channels: 2,
            charge: Some(mem.charge(64, "test", "a window").unwrap()),
        }
    }

    /// `shared_window` cut at row `lo`: the kept window, whether it kept its table, and
    /// whether every kept point still reads the values it read (its first kept point is
    /// `first`).
    fn cut(mem: &Memory, lo: i64, first: usize) -> (Window<'_>, bool, bool) {
        let pool = BufferPool::default();
        let before = shared_window(mem);
        let expected: Vec<Vec<f32>> = (first..before.len())
            .map(|p| before.row(before.ids[p]).to_vec())
            .collect();
        let address = before.table.as_ptr();
        let kept = before.keep_from(lo, &pool, mem, "test").unwrap();
        let got: Vec<Vec<f32>> = kept.ids.iter().map(|&id| kept.row(id).to_vec()).collect();
        let same_table = kept.table.as_ptr() == address;
        (kept, same_table, got == expected)
    }

    #[test]
    fn kept_points_keep_their_rows_compacted_in_place() {
        let mem = Memory::new(1 << 20);
        let (kept, same_table, same_values) = cut(&mem, 4, 4);
        assert_eq!(kept.coords.rows, [4, 6]);
        assert_eq!(kept.coords.row_start, [0, 3, 5]);
        assert_eq!(kept.coords.cols, [0, 2, 8, 4, 6]);
        // Old rows 2, 3, 6 (ascending), so ids 6, 2, 6, 3, 2 → 2, 0, 2, 1, 0.
        assert_eq!(kept.ids, [2, 0, 2, 1, 0]);
        assert_eq!(kept.shared, [true, false, true]);
        assert_eq!(kept.table.len(), 3 * 2);
        assert!(same_table && same_values);
    }

    #[test]
    fn a_small_halo_moves_to_a_small_table() {
        let mem = Memory::new(1 << 20);
        let (kept, same_table, same_values) = cut(&mem, 6, 7);
        assert_eq!(kept.coords.rows, [6]);
        assert_eq!(kept.coords.row_start, [0, 2]);
        // Old rows 3, 2 → 1, 0.
        assert_eq!(kept.ids, [1, 0]);
        assert_eq!(kept.shared, [true, false]);
        assert_eq!(kept.table.len(), 2 * 2);
        assert!(!same_table && same_values);
    }

    #[test]
    fn keeping_nothing_or_everything() {
        let mem = Memory::new(1 << 20);
        let pool = BufferPool::default();
        let all = shared_window(&mem)
            .keep_from(0, &pool, &mem, "test")
            .unwrap();
        assert_eq!(all.ids, [5, 0, 4, 1, 6, 2, 6, 3, 2]);
        let none = shared_window(&mem)
            .keep_from(7, &pool, &mem, "test")
            .unwrap();
        assert_eq!((none.len(), none.table_rows()), (0, 0));
    }
}

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

    /// The rows at or after row coordinate `lo`, in a new compact window (table rows that no
    /// kept point uses are dropped, ids renumbered), charged to `mem`.
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
        let coords = self.coords.copy_rows(keep);
        // Old row id → new, in order of first use.
        let mut map = vec![u32::MAX; self.shared.len()];
        let mut order: Vec<u32> = Vec::new();
        let ids: Vec<u32> = self.ids[pts]
            .iter()
            .map(|&id| {
                let m = &mut map[id as usize];
                if *m == u32::MAX {
                    *m = order.len() as u32;
                    order.push(id);
                }
                *m
            })
            .collect();
        let bytes = Self::bytes_for(ids.len(), coords.rows.len(), order.len(), c);
        let charge = mem.charge(bytes, node, "the halo rows kept for the next band")?;
        let mut table = pool.take(order.len() * c);
        let mut shared = Vec::with_capacity(order.len());
        for (dst, &id) in table.chunks_exact_mut(c.max(1)).zip(&order) {
            dst.copy_from_slice(self.row(id));
        }
        // A kept row stays shared when it was: the points that shared it may be split by
        // the cut, but "shared" only has to be true for rows used by two or more points.
        shared.extend(order.iter().map(|&id| self.shared[id as usize]));
        pool.give(self.table);
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

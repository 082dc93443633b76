//! Memory of a featurizer run: the budget it may not exceed, and the pool of feature
//! buffers a graph keeps between bands and runs.
//!
//! # Accounting
//!
//! A run charges [`Memory`] for everything whose size grows with the input: the row
//! windows of every sparse value (coordinates, row ids, feature tables), the coordinates and
//! per-task scratch of the band being computed, and the pooled-sum stacks. Small per-task
//! fixed-size scratch (kernel buckets, micro-kernel tiles) is not charged. A charge that
//! would take the live total above the budget fails with
//! [`ErrorKind::Featurize`](crate::ErrorKind::Featurize) naming the node and the sizes,
//! before the memory is touched; the run then unwinds and frees everything it holds.
//!
//! # Pool
//!
//! [`BufferPool`] keeps released feature tables for reuse, because fresh multi-MB
//! allocations are page-faulted in on first touch at about the cost of the arithmetic. It
//! keeps at most [`BufferPool::MAX_BUFFERS`] buffers and [`BufferPool::MAX_BYTES`] bytes while
//! a run is going, and at most [`BufferPool::RETAINED_BYTES`] between runs: a run trims the
//! pool when it ends, so a graph that has featurized one very large matrix does not keep
//! that matrix's buffers afterwards. Buffers under [`BufferPool::MIN_BYTES`] are not kept
//! (the allocator recycles those without faulting pages in), so the small tables of the last
//! layers do not take the places of the large ones. Over the count the smallest go first;
//! over the bytes while a run goes, the ones returned longest ago (the latest are the
//! tables the next band asks for); when a run ends, the largest. A table is taken from the
//! buffers returned last, whose lines the caches are likeliest to still hold.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// The budget and live total of one run.
#[derive(Debug)]
pub(crate) struct Memory {
    limit: usize,
    live: AtomicUsize,
    peak: AtomicUsize,
}

impl Memory {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// Charges `bytes` for `what` at `node`, released when the returned guard drops.
    pub fn charge(&self, bytes: usize, node: &str, what: &str) -> Result<Charge<'_>> {
        let mut cur = self.live.load(Ordering::Relaxed);
        loop {
            let next = cur.saturating_add(bytes);
            if next > self.limit {
                return Err(Error::featurize(
                    node,
                    format!(
                        "featurizer memory budget exceeded: {what} needs {} on top of {} in use, budget {} (raise FeaturizeOptions::memory_budget / LoadOptions::featurize_memory_budget, or lower band_entries)",
                        mib(bytes),
                        mib(cur),
                        mib(self.limit)
                    ),
                ));
            }
            match self
                .live
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.peak.fetch_max(next, Ordering::Relaxed);
                    return Ok(Charge { mem: self, bytes });
                }
                Err(now) => cur = now,
            }
        }
    }

    /// Highest live total so far.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

/// `bytes` as MiB text.
fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// A charged amount; returned to the budget on drop.
#[derive(Debug)]
pub(crate) struct Charge<'m> {
    mem: &'m Memory,
    bytes: usize,
}

impl Drop for Charge<'_> {
    fn drop(&mut self) {
        self.mem.live.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// A table of feature rows whose first value starts a cache line (64 bytes): rows of a
/// multiple of 16 channels then never straddle a line boundary, so the SIMD kernels' vector
/// loads and stores of a row are never split between two lines (the allocator's large
/// blocks start 16 bytes into a page). Dereferences to the rows' values.
#[derive(Debug, Default)]
pub(crate) struct RowBuf {
    /// The values, with up to [`RowBuf::SLACK`] unused ones in front of `start`.
    buf: Vec<f32>,
    start: usize,
    len: usize,
}

impl RowBuf {
    /// Values beyond the length kept so that the start can move to a line boundary.
    const SLACK: usize = 15;

    /// `n` zeros, aligned, with room for `room` more values. Allocated zeroed, so the pages
    /// of a large buffer are not touched until its values are written.
    fn zeroed_with_room(n: usize, room: usize) -> Self {
        let mut b = Self {
            buf: vec![0.0; n + room + Self::SLACK],
            ..Self::default()
        };
        b.resize(n);
        b
    }

    /// `n` zeros, aligned.
    #[cfg(test)]
    pub fn zeroed(n: usize) -> Self {
        Self::zeroed_with_room(n, 0)
    }

    /// The values of `v` as they are (not aligned; for tables too small to matter).
    pub fn from_vec(v: Vec<f32>) -> Self {
        Self {
            len: v.len(),
            buf: v,
            start: 0,
        }
    }

    /// Length `n`, aligned, with unspecified values (zeros where the buffer grew).
    fn resize(&mut self, n: usize) {
        if self.buf.len() < n + Self::SLACK {
            self.buf.resize(n + Self::SLACK, 0.0);
        }
        let offset = self.buf.as_ptr().align_offset(64);
        self.start = if offset <= Self::SLACK { offset } else { 0 };
        self.len = n;
    }

    /// Sets the length to `n` without moving the values when the allocation holds `n`
    /// aligned values from the current start (values past the old length are zeros or
    /// stale); `false`, and unchanged, when it would have to move.
    pub fn resize_in_place(&mut self, n: usize) -> bool {
        let end = self.start + n;
        if end > self.buf.capacity() {
            return false;
        }
        if self.buf.len() < end {
            self.buf.resize(end, 0.0);
        }
        self.len = n;
        true
    }

    /// Values allocated.
    fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Whether `n` aligned values fit without growing.
    fn holds(&self, n: usize) -> bool {
        self.buf.len() >= n + Self::SLACK
    }
}

impl std::ops::Deref for RowBuf {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        &self.buf[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for RowBuf {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// Feature buffers kept for reuse by later bands and runs of a graph (see the module docs).
#[derive(Default)]
pub(crate) struct BufferPool {
    bufs: Mutex<Vec<RowBuf>>,
}

impl BufferPool {
    /// Most buffers kept.
    pub const MAX_BUFFERS: usize = 32;
    /// Most bytes kept while a run is going. It trades memory held beside the run's own
    /// (charged) tables against tables faulted in anew: two slabs of a wide graph return
    /// about one band's tables of every layer per band, and a pool that cannot hold them
    /// drops tables the next band asks for again (BENCHMARKS.md, "A pool that keeps a band's
    /// tables").
    pub const MAX_BYTES: usize = 512 << 20;
    /// Most bytes kept between runs.
    pub const RETAINED_BYTES: usize = 64 << 20;
    /// Smallest buffer kept (a page): the allocator recycles smaller ones itself, and they
    /// would only take the places of large ones.
    pub const MIN_BYTES: usize = 4 << 10;

    /// Room a new buffer has beyond its first length, as a fraction of it: a layer's band
    /// tables differ by a few percent from band to band, and a buffer made to the exact size
    /// would fit no later, larger band. The room is address space until a band writes it.
    const ROOM_DIVISOR: usize = 8;

    /// A buffer of length `n` with **unspecified contents** (stale values from an earlier
    /// use): callers overwrite all of it. Takes, of the pooled buffers with capacity in
    /// `n..=2n`, the one returned last (preferring one already at least `n` long): its
    /// lines are the likeliest to be still in the caches, so the band writing it does not
    /// wait on memory for them. Else allocates one with room for `n / ROOM_DIVISOR` more.
    pub fn take(&self, n: usize) -> RowBuf {
        let pooled = {
            let mut bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
            let fits = |v: &RowBuf| v.capacity() >= n && v.capacity() - n <= n;
            let pick = (0..bufs.len())
                .filter(|&i| fits(&bufs[i]))
                .max_by_key(|&i| (bufs[i].holds(n), i));
            pick.map(|i| bufs.remove(i))
        };
        match pooled {
            Some(mut v) => {
                v.resize(n);
                v
            }
            None => RowBuf::zeroed_with_room(n, n / Self::ROOM_DIVISOR),
        }
    }

    /// Returns a buffer to the pool (unless it is under [`MIN_BYTES`](Self::MIN_BYTES) or
    /// over [`MAX_BYTES`](Self::MAX_BYTES)), then drops buffers while over the limits: over
    /// the count the smallest, over the bytes the ones returned longest ago (the pool keeps
    /// them in the order they came back; the latest are the tables the next band asks for).
    pub fn give(&self, v: RowBuf) {
        if v.capacity() * 4 < Self::MIN_BYTES || v.capacity() * 4 > Self::MAX_BYTES {
            return;
        }
        let mut bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
        bufs.push(v);
        if bufs.len() > Self::MAX_BUFFERS {
            if let Some(i) = (0..bufs.len()).min_by_key(|&i| bufs[i].capacity()) {
                bufs.remove(i);
            }
        }
        let mut total: usize = bufs.iter().map(|b| b.capacity() * 4).sum();
        while total > Self::MAX_BYTES {
            total -= bufs.remove(0).capacity() * 4;
        }
    }

    /// Trims the pool to [`RETAINED_BYTES`](Self::RETAINED_BYTES) (end of a run).
    pub fn trim(&self) {
        let mut bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
        Self::shrink(&mut bufs, Self::RETAINED_BYTES);
    }

    /// Bytes held.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        let bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
        bufs.iter().map(|b| b.capacity() * 4).sum()
    }

    /// Drops the largest buffers while they hold more than `bytes` (the largest first: they
    /// are the ones a large matrix left behind).
    fn shrink(bufs: &mut Vec<RowBuf>, bytes: usize) {
        bufs.sort_by_key(|b| b.capacity());
        let mut total: usize = bufs.iter().map(|b| b.capacity() * 4).sum();
        while total > bytes {
            let Some(b) = bufs.pop() else { break };
            total -= b.capacity() * 4;
        }
    }
}

impl Clone for BufferPool {
    /// A clone starts with an empty pool.
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.bufs.lock().map(|b| b.len()).unwrap_or(0);
        f.debug_struct("BufferPool").field("buffers", &n).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_fails_cleanly_and_releases() {
        let m = Memory::new(1000);
        let a = m.charge(600, "n", "table").expect("fits");
        let e = m.charge(500, "conv3", "a table").expect_err("over budget");
        let text = e.to_string();
        assert!(
            text.contains("conv3") && text.contains("memory budget"),
            "{text}"
        );
        drop(a);
        let _b = m.charge(900, "n", "x").expect("fits after release");
        assert_eq!(m.peak(), 900);
    }

    /// Small buffers are not kept, and over the count the smallest go: the large tables,
    /// whose pages cost the most to fault in again, stay.
    #[test]
    fn pool_keeps_the_large_buffers() {
        let p = BufferPool::default();
        p.give(RowBuf::zeroed(1000)); // under 4 KiB: not kept
        assert_eq!(p.bytes(), 0);
        let large = BufferPool::MIN_BYTES; // floats: 4 × the smallest size kept
        p.give(RowBuf::zeroed(large));
        for i in 0..BufferPool::MAX_BUFFERS {
            p.give(RowBuf::zeroed(BufferPool::MIN_BYTES / 4 + i));
        }
        let bufs = p.bufs.lock().expect("lock");
        assert_eq!(bufs.len(), BufferPool::MAX_BUFFERS);
        assert!(bufs.iter().any(|b| b.capacity() == large + RowBuf::SLACK));
        assert!(bufs
            .iter()
            .all(|b| b.capacity() > BufferPool::MIN_BYTES / 4));
    }

    /// Tables from the pool, new or reused at another length, start on a cache line.
    #[test]
    fn tables_start_on_a_cache_line() {
        let p = BufferPool::default();
        for n in [0usize, 16, 1000, 5000, 1 << 20] {
            for m in [n, n.saturating_sub(3), n + 5] {
                let b = p.take(m);
                assert_eq!((b.len(), b.as_ptr() as usize % 64), (m, 0), "{n} then {m}");
                p.give(b);
            }
        }
        assert_eq!(&*RowBuf::from_vec(vec![1.0, 2.0]), &[1.0, 2.0]);
    }

    #[test]
    fn pool_is_capped_and_trimmed() {
        let p = BufferPool::default();
        for _ in 0..12 {
            p.give(RowBuf::zeroed(1 << 20)); // 4 MiB each
        }
        assert!(p.bytes() <= BufferPool::MAX_BYTES);
        assert!(p.bufs.lock().expect("lock").len() <= BufferPool::MAX_BUFFERS);
        p.give(RowBuf::zeroed(40 << 20)); // 160 MiB
        p.trim();
        assert!(p.bytes() <= BufferPool::RETAINED_BYTES, "{}", p.bytes());
        assert_eq!(p.take(1 << 20).len(), 1 << 20);
    }

    /// While a run goes, over the bytes the buffers returned longest ago go (not the
    /// largest: those are the ones the next band of a wide layer asks for).
    #[test]
    fn pool_drops_the_oldest_over_its_bytes() {
        let p = BufferPool::default();
        let quarter = BufferPool::MAX_BYTES / 4 / 4; // values: a quarter of the bytes
        let mut firsts = Vec::new();
        for extra in 0..5 {
            // Untouched zeroed pages: no memory is faulted in.
            let b = RowBuf::zeroed(quarter + extra * 1024);
            firsts.push(b.as_ptr() as usize);
            p.give(b);
        }
        assert!(p.bytes() <= BufferPool::MAX_BYTES);
        let kept: Vec<usize> = p
            .bufs
            .lock()
            .expect("lock")
            .iter()
            .map(|b| b.as_ptr() as usize)
            .collect();
        assert!(!kept.contains(&firsts[0]), "the oldest went");
        assert!(kept.contains(&firsts[4]), "the latest (and largest) stayed");
    }

    /// Of the buffers that fit, the one returned last is taken (its lines are the likeliest
    /// to be cached), and one long enough before one that must grow.
    #[test]
    fn pool_takes_the_buffer_returned_last() {
        let p = BufferPool::default();
        let n = 1 << 16;
        let (older, newer) = (RowBuf::zeroed(n), RowBuf::zeroed(n));
        let at = newer.as_ptr() as usize;
        p.give(older);
        p.give(newer);
        assert_eq!(p.take(n).as_ptr() as usize, at, "the latest");
        // A shorter buffer returned after a long-enough one: the long-enough one.
        let long = RowBuf::zeroed(n);
        let at = long.as_ptr() as usize;
        let mut short = RowBuf::zeroed(n);
        short.resize(n / 2 + 1);
        short.buf.truncate(n / 2 + 1 + RowBuf::SLACK);
        p.give(long);
        p.give(short);
        assert_eq!(p.take(n).as_ptr() as usize, at, "the one long enough");
    }

    /// A new buffer has room beyond its first length, so a slightly larger later band
    /// takes it again instead of a new one.
    #[test]
    fn new_buffers_have_room_for_larger_bands() {
        let p = BufferPool::default();
        let n = 1 << 20;
        let first = p.take(n);
        assert_eq!(first.len(), n);
        let at = first.as_ptr() as usize;
        p.give(first);
        let larger = p.take(n + n / (2 * BufferPool::ROOM_DIVISOR));
        assert_eq!(larger.as_ptr() as usize, at, "taken again");
        assert!(larger.iter().all(|&v| v == 0.0));
    }
}

//! Splitting a call's rows into parallel tasks, and the per-thread scratch buffers tasks use.
//!
//! A compiler's call holds a few hundred candidates: two or three tasks of 128 rows, each about
//! ten microseconds of arithmetic. A rayon fork-join entered from a thread outside the pool
//! costs a chain of wake-ups (inject, wake a worker, split, wake another, wake the caller)
//! as long as the work itself, and running the first task on the caller beside rayon's
//! idle-spinning workers oversubscribes a small machine (measured: a worse median). So calls
//! of models on the global pool go through a [`Team`]: the calling thread plus
//! `available_parallelism - 1` helper threads that claim tasks from one atomic counter, spin
//! briefly after a call ([`SPIN`]) so back-to-back calls find them awake, then park. One caller
//! uses the team at a time; a concurrent caller (or a model with its own rayon pool) uses
//! rayon. Which thread runs a task never changes its result: every task's rows are computed
//! independently.

use std::cell::{RefCell, UnsafeCell};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rayon::prelude::*;

/// How long an idle helper spins before it parks.
pub(crate) const SPIN: Duration = Duration::from_micros(100);

/// Most helper threads the team starts (the caller is one more).
const MAX_HELPERS: usize = 15;

/// Runs `work(i, chunk)` for every `chunk_len`-element chunk `i` of `data`, in parallel when
/// `parallel` and there is more than one chunk.
pub(crate) fn for_each_chunk_mut<T: Send>(
    data: &mut [T],
    chunk_len: usize,
    parallel: bool,
    work: impl Fn(usize, &mut [T]) + Sync,
) {
    let chunk_len = chunk_len.max(1);
    if data.len() <= chunk_len || !parallel {
        for (i, c) in data.chunks_mut(chunk_len).enumerate() {
            work(i, c);
        }
        return;
    }
    let n = data.len().div_ceil(chunk_len);
    if rayon::current_thread_index().is_none() {
        if let Some(team) = Team::global() {
            let base = SendPtr(data.as_mut_ptr());
            let len = data.len();
            let ran = team.run(n, &|i| {
                let start = i * chunk_len;
                let m = chunk_len.min(len - start);
                // SAFETY: task `i` is claimed exactly once, so chunks are disjoint, within
                // `data`, and `data` outlives `run` (which returns after every task).
                let chunk = unsafe { std::slice::from_raw_parts_mut(base.get().add(start), m) };
                work(i, chunk);
            });
            if ran {
                return;
            }
        }
    }
    data.par_chunks_mut(chunk_len)
        .enumerate()
        .for_each(|(i, c)| work(i, c));
}

/// `work(i)` for `i` in `0..n`, in parallel when `parallel`, results in order.
pub(crate) fn map_tasks<R: Send>(
    n: usize,
    parallel: bool,
    work: impl Fn(usize) -> R + Sync,
) -> Vec<R> {
    let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
    for_each_chunk_mut(&mut out, 1, parallel, |i, slot| slot[0] = Some(work(i)));
    out.into_iter().flatten().collect()
}

/// A raw pointer that may cross threads (the tasks using it touch disjoint parts).
struct SendPtr<T>(*mut T);

impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SendPtr<T> {}
// SAFETY: used only under `for_each_chunk_mut`'s disjointness argument.
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

thread_local! {
    /// Row buffers of the native engine, kept per thread from call to call.
    static SCRATCH: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's scratch buffers (fresh ones if they are in use further up
/// the stack). Buffers keep their size between calls: bounded by the largest task a thread
/// has run (rows per task × the program's buffer widths).
pub(crate) fn with_scratch<R>(f: impl FnOnce(&mut Vec<Vec<f32>>) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut own) => f(&mut own),
        Err(_) => f(&mut Vec::new()),
    })
}

/// A call's job; published with its borrow's lifetime erased (`'static`).
type Job<'a> = dyn Fn(usize) + Sync + 'a;

/// State shared by the caller and the helpers.
///
/// Protocol: `epoch` is odd while a job is open, even while closed. The caller writes `job`,
/// `tasks`, `next`, `done` only while closed with `active == 0`; a helper reads them only
/// after incrementing `active` and then seeing the open epoch it woke for (both `SeqCst`, so
/// either the caller sees the helper active and waits, or the helper sees the epoch moved on
/// and leaves without touching the job).
struct Shared {
    epoch: AtomicU64,
    job: UnsafeCell<Option<*const Job<'static>>>,
    tasks: AtomicUsize,
    next: AtomicUsize,
    done: AtomicUsize,
    active: AtomicUsize,
    panicked: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    sleepers: AtomicUsize,
    park: Mutex<()>,
    wake: Condvar,
}

// SAFETY: `job` is accessed only under the protocol documented on `Shared`.
unsafe impl Sync for Shared {}
// SAFETY: as above.
unsafe impl Send for Shared {}

/// The calling thread plus helper threads, for calls of a few short tasks (module docs).
pub(crate) struct Team {
    shared: Arc<Shared>,
    /// Held by the one caller using the team.
    busy: AtomicBool,
    helpers: usize,
}

impl Team {
    /// The process-wide team (`None` on a single-core machine or when threads cannot start).
    fn global() -> Option<&'static Team> {
        static TEAM: OnceLock<Option<Team>> = OnceLock::new();
        TEAM.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            Team::new(cores.saturating_sub(1).min(MAX_HELPERS))
        })
        .as_ref()
    }

    fn new(helpers: usize) -> Option<Team> {
        if helpers == 0 {
            return None;
        }
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            job: UnsafeCell::new(None),
            tasks: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            panicked: Mutex::new(None),
            sleepers: AtomicUsize::new(0),
            park: Mutex::new(()),
            wake: Condvar::new(),
        });
        for i in 0..helpers {
            let s = Arc::clone(&shared);
            let started = std::thread::Builder::new()
                .name(format!("dashrank-helper-{i}"))
                .spawn(move || helper(&s));
            if let Err(e) = started {
                log::warn!("cannot start helper thread: {e}; using rayon");
                return None;
            }
        }
        Some(Team {
            shared,
            busy: AtomicBool::new(false),
            helpers,
        })
    }

    /// Runs `job(i)` for `i` in `0..tasks` on this thread and the helpers; returns false
    /// (running nothing) when another caller holds the team. A panic in a task is resumed
    /// here after every task has finished.
    fn run(&self, tasks: usize, job: &Job<'_>) -> bool {
        if self
            .busy
            .compare_exchange(false, true, SeqCst, SeqCst)
            .is_err()
        {
            return false;
        }
        let s = &*self.shared;
        // SAFETY: closed epoch and no active helper (the previous `run` waited for that).
        // The lifetime is erased only while published: `Close` waits until no helper can
        // reach the job before `run` returns or unwinds.
        unsafe {
            let erased: *const Job<'static> = std::mem::transmute::<&Job<'_>, &Job<'static>>(job);
            *s.job.get() = Some(erased);
        }
        s.tasks.store(tasks, SeqCst);
        s.next.store(0, SeqCst);
        s.done.store(0, SeqCst);
        s.epoch.fetch_add(1, SeqCst); // open
        if s.sleepers.load(SeqCst) > 0 && self.helpers > 0 {
            let _guard = s.park.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        let close = Close { team: self };
        claim_tasks(s, job);
        wait_until(|| s.done.load(SeqCst) >= tasks);
        drop(close);
        let panic = s.panicked.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(p) = panic {
            resume_unwind(p);
        }
        true
    }
}

/// Closes the open job and waits until no helper is inside it; releases the team. Runs on
/// unwinding too, so a borrowed job never outlives its frame.
struct Close<'a> {
    team: &'a Team,
}

impl Drop for Close<'_> {
    fn drop(&mut self) {
        let s = &*self.team.shared;
        s.next.store(usize::MAX / 2, SeqCst); // no more claims
        s.epoch.fetch_add(1, SeqCst); // closed
        wait_until(|| s.active.load(SeqCst) == 0);
        // SAFETY: closed and no helper active: nobody reads `job`.
        unsafe { *s.job.get() = None };
        self.team.busy.store(false, SeqCst);
    }
}

/// Spins until `done()`, yielding the core after a short spin (a helper descheduled on a
/// busy host then gets it back instead of waiting behind a spinning caller).
fn wait_until(done: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !done() {
        if spins < 2048 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Claims and runs tasks until none are left; a panic is recorded, not propagated.
fn claim_tasks(s: &Shared, job: &Job<'_>) {
    let tasks = s.tasks.load(SeqCst);
    loop {
        let i = s.next.fetch_add(1, SeqCst);
        if i >= tasks {
            return;
        }
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| job(i))) {
            let mut slot = s.panicked.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert(p);
        }
        s.done.fetch_add(1, SeqCst);
    }
}

fn helper(s: &Shared) {
    let mut seen = s.epoch.load(SeqCst);
    loop {
        // Wait for the epoch to move: spin for `SPIN`, then park.
        let started = Instant::now();
        let mut spins = 0u32;
        let epoch = loop {
            let e = s.epoch.load(SeqCst);
            if e != seen {
                break e;
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) && started.elapsed() > SPIN {
                let mut guard = s.park.lock().unwrap_or_else(|e| e.into_inner());
                s.sleepers.fetch_add(1, SeqCst);
                while s.epoch.load(SeqCst) == seen {
                    guard = s.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
                }
                s.sleepers.fetch_sub(1, SeqCst);
            } else {
                std::hint::spin_loop();
            }
        };
        seen = epoch;
        if epoch % 2 == 0 {
            continue; // a close: nothing to do
        }
        s.active.fetch_add(1, SeqCst);
        if s.epoch.load(SeqCst) == epoch {
            // SAFETY: active with the epoch still open: the caller keeps the job alive and
            // does not write `job` until we leave (protocol on `Shared`).
            if let Some(job) = unsafe { *s.job.get() } {
                claim_tasks(s, unsafe { &*job });
            }
        }
        s.active.fetch_sub(1, SeqCst);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_runs_once_with_its_index() {
        for n in [0usize, 1, 5, 128, 129, 256, 300, 5000] {
            for parallel in [false, true] {
                let mut data = vec![0usize; n];
                for_each_chunk_mut(&mut data, 128, parallel, |i, c| {
                    for (j, x) in c.iter_mut().enumerate() {
                        *x += i * 128 + j + 1;
                    }
                });
                assert!(data.iter().enumerate().all(|(k, &x)| x == k + 1), "{n}");
            }
        }
        assert_eq!(map_tasks(7, true, |i| i * i), vec![0, 1, 4, 9, 16, 25, 36]);
        assert!(map_tasks(0, true, |i| i).is_empty());
    }

    /// Many callers at once: each call's tasks run exactly once, whether it got the team or
    /// fell back to rayon.
    #[test]
    fn concurrent_callers_get_complete_results() {
        let team = Team::new(2).unwrap();
        std::thread::scope(|scope| {
            for t in 0..8usize {
                let team = &team;
                scope.spawn(move || {
                    for round in 0..300usize {
                        let n = 1 + (t + round) % 9;
                        let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                        let job = |i: usize| {
                            hits[i].fetch_add(1, SeqCst);
                        };
                        if !team.run(n, &job) {
                            (0..n).into_par_iter().for_each(job);
                        }
                        assert!(hits.iter().all(|h| h.load(SeqCst) == 1));
                    }
                });
            }
        });
    }

    /// A panicking task reaches the caller after the other tasks ran, and the team stays
    /// usable.
    #[test]
    fn a_task_panic_is_resumed_on_the_caller() {
        let team = Team::new(1).unwrap();
        let ran = AtomicUsize::new(0);
        let job = |i: usize| {
            ran.fetch_add(1, SeqCst);
            assert!(i != 3, "task 3 fails");
        };
        let r = catch_unwind(AssertUnwindSafe(|| team.run(8, &job)));
        assert!(r.is_err());
        assert_eq!(ran.load(SeqCst), 8);
        let count = AtomicUsize::new(0);
        assert!(team.run(5, &|_| {
            count.fetch_add(1, SeqCst);
        }));
        assert_eq!(count.load(SeqCst), 5);
    }
}

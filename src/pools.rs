//! The rayon pools of `threads: Some(n)`: one per calling thread and size, shared by every
//! model and featurizer that thread calls.
//!
//! A model loaded with `threads: Some(n)` runs its featurizer in a pool of `n` threads, and
//! for `n ≥ 2` its dense layers too. Pools are registered by (calling thread, `n`):
//!
//! - models of equal size called from one thread share a pool, so a host keeping a hundred
//!   models with threads 1–4 runs 1 + 2 + 3 + 4 pool threads per calling thread, not a pool
//!   (or two) per model;
//! - two threads calling at once never queue behind each other in one pool: a compiler that
//!   lowers on eight threads with a `threads: Some(1)` model featurizes eight matrices at once.
//!
//! The registry holds pools weakly: a pool lives while some model (or
//! [`FeaturizerGraph`](crate::featurize::FeaturizerGraph)) holds it for a caller that is
//! still alive, and its threads exit when the last holder drops it or the calling thread
//! ends (holders prune pools of ended callers whenever they start a new one).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::ThreadId;

use rayon::ThreadPool;

thread_local! {
    /// Alive while the calling thread is: a pool registered for this thread is stale once
    /// the weak handle to it no longer upgrades.
    static CALLER: Arc<()> = Arc::new(());
    /// Whether this thread is a worker of one of these pools: nested calls (a model's
    /// scoring inside its own prepare pass) run where they are.
    static IN_POOL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

type Key = (ThreadId, usize);

/// A pool and the liveness of the thread it serves.
#[derive(Debug, Clone)]
struct Entry<P> {
    caller: Weak<()>,
    pool: P,
}

/// The pools one model or featurizer has used, by calling thread and size.
#[derive(Debug, Default)]
pub(crate) struct CallerPools {
    held: Mutex<HashMap<Key, Entry<Arc<ThreadPool>>>>,
}

impl CallerPools {
    /// Runs `f` in the calling thread's pool of `n` threads, or right here when this thread
    /// already is a worker of such a pool.
    ///
    /// # Errors
    ///
    /// The operating system's reason when the threads cannot be started.
    pub(crate) fn install<R: Send>(
        &self,
        n: usize,
        f: impl FnOnce() -> R + Send,
    ) -> Result<R, String> {
        if IN_POOL.get() {
            return Ok(f());
        }
        Ok(self.for_caller(n)?.install(f))
    }

    /// The calling thread's pool of `n` threads, started on first use and held from then on.
    ///
    /// # Errors
    ///
    /// The operating system's reason when the threads cannot be started.
    pub(crate) fn for_caller(&self, n: usize) -> Result<Arc<ThreadPool>, String> {
        let (key, caller) = caller_key(n);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = held.get(&key) {
            return Ok(Arc::clone(&entry.pool));
        }
        held.retain(|_, e| e.caller.strong_count() > 0);
        let pool = registered(key)?;
        let entry = Entry {
            caller,
            pool: Arc::clone(&pool),
        };
        held.insert(key, entry);
        Ok(pool)
    }
}

/// This thread's registry key for size `n`, and its liveness handle.
fn caller_key(n: usize) -> (Key, Weak<()>) {
    let caller = CALLER.with(Arc::downgrade);
    ((std::thread::current().id(), n), caller)
}

/// The process's pool for `key`, shared while someone holds it.
fn registered(key: Key) -> Result<Arc<ThreadPool>, String> {
    static POOLS: OnceLock<Mutex<HashMap<Key, Weak<ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(pool) = pools.get(&key).and_then(Weak::upgrade) {
        return Ok(pool);
    }
    pools.retain(|_, p| p.strong_count() > 0);
    let n = key.1;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(move |i| format!("dashrank-{n}x-{i}"))
        .start_handler(|_| IN_POOL.set(true))
        .build()
        .map(Arc::new)
        .map_err(|e| e.to_string())?;
    pools.insert(key, Arc::downgrade(&pool));
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_shared_per_caller_and_size_while_held() {
        // Sizes no other test of the crate uses.
        let (one, two) = (CallerPools::default(), CallerPools::default());
        let a = one.for_caller(13).unwrap();
        let b = two.for_caller(13).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one caller, one size: one pool");
        assert_eq!(a.current_num_threads(), 13);
        assert!(!Arc::ptr_eq(&a, &one.for_caller(11).unwrap()));
        let elsewhere = std::thread::scope(|s| s.spawn(|| one.for_caller(13).unwrap()).join());
        assert!(
            !Arc::ptr_eq(&a, &elsewhere.unwrap()),
            "another caller, its own pool"
        );
        assert_eq!(one.held.lock().unwrap().len(), 3);
        // The ended caller's pool is dropped when `one` starts its next pool.
        drop(one.for_caller(17).unwrap());
        assert_eq!(
            one.held.lock().unwrap().len(),
            3,
            "this thread's 13, 11 and 17"
        );
        drop((a, b, one, two));
        // Released: the next caller starts a new pool.
        let weak = Arc::downgrade(&CallerPools::default().for_caller(13).unwrap());
        assert!(weak.upgrade().is_none());
    }
}

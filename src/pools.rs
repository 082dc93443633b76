//! The rayon pools of `threads: Some(n)`, shared by every model and featurizer of the process.
//!
//! A model loaded with `threads: Some(n)` runs its featurizer in a pool of `n` threads, and
//! for `n ≥ 2` its dense layers too. Pools are registered here by size: models of equal size
//! share one, so a host keeping a hundred models with threads 1–4 runs 1 + 2 + 3 + 4 pool
//! threads, not one pool (or two) per model. The registry holds pools weakly: a pool lives while some model (or
//! [`FeaturizerGraph`](crate::featurize::FeaturizerGraph)) holds it, and its threads exit when
//! the last one is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rayon::ThreadPool;

/// The pool of `n` threads, started on first use and shared while someone holds it.
///
/// # Errors
///
/// The operating system's reason when the threads cannot be started.
pub(crate) fn shared(n: usize) -> Result<Arc<ThreadPool>, String> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Weak<ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(pool) = pools.get(&n).and_then(Weak::upgrade) {
        return Ok(pool);
    }
    pools.retain(|_, p| p.strong_count() > 0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(move |i| format!("dashrank-{n}x-{i}"))
        .build()
        .map(Arc::new)
        .map_err(|e| e.to_string())?;
    pools.insert(n, Arc::downgrade(&pool));
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_of_one_size_are_shared_while_held() {
        // Sizes no other test of the crate uses.
        let a = shared(13).unwrap();
        let b = shared(13).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.current_num_threads(), 13);
        let c = shared(11).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        drop((a, b));
        // Released: the next caller starts a new pool.
        let weak = Arc::downgrade(&shared(13).unwrap());
        assert!(weak.upgrade().is_none());
        drop(c);
    }
}

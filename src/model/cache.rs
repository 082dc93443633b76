//! Matrix embeddings and their cache.
//!
//! The featurizer dominates ranking time (it runs over every nonzero), so a model keeps the
//! most recently used embeddings keyed by the pattern's SHA-256 digest
//! ([`CsrPattern::content_digest`](crate::CsrPattern::content_digest)): a pattern never gets
//! another pattern's embedding unless SHA-256 collides.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The embedding of one matrix under one model; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct MatrixEmbedding(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    values: Vec<f32>,
    conv_features: Vec<f32>,
    pattern_hash: u64,
    model_hash: u64,
    model_instance: u64,
}

impl MatrixEmbedding {
    pub(crate) fn new(
        values: Vec<f32>,
        conv_features: Vec<f32>,
        pattern_hash: u64,
        model_hash: u64,
        model_instance: u64,
    ) -> Self {
        Self(Arc::new(Inner {
            values,
            conv_features,
            pattern_hash,
            model_hash,
            model_instance,
        }))
    }

    /// The embedding vector.
    pub fn values(&self) -> &[f32] {
        &self.0.values
    }

    /// The featurizer output it was computed from (pooled sparse-conv features).
    pub fn conv_features(&self) -> &[f32] {
        &self.0.conv_features
    }

    /// Content hash of the matrix pattern.
    pub fn pattern_hash(&self) -> u64 {
        self.0.pattern_hash
    }

    /// Content hash of the model that computed it.
    pub fn model_hash(&self) -> u64 {
        self.0.model_hash
    }

    /// The loaded model instance that computed it: only that instance accepts it (two
    /// models loaded from the same files are different instances).
    pub(crate) fn model_instance(&self) -> u64 {
        self.0.model_instance
    }
}

/// The cache key: a pattern's SHA-256 digest.
pub(crate) type PatternKey = [u8; 32];

/// A small LRU of embeddings keyed by pattern digest.
#[derive(Debug)]
pub(crate) struct MatrixCache {
    capacity: usize,
    state: Mutex<(HashMap<PatternKey, MatrixEmbedding>, VecDeque<PatternKey>)>,
}

impl MatrixCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            state: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    pub(crate) fn get(&self, key: PatternKey) -> Option<MatrixEmbedding> {
        if self.capacity == 0 {
            return None;
        }
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        let hit = map.get(&key).cloned()?;
        if let Some(pos) = order.iter().position(|&k| k == key) {
            order.remove(pos);
        }
        order.push_back(key);
        Some(hit)
    }

    pub(crate) fn insert(&self, key: PatternKey, value: MatrixEmbedding) {
        if self.capacity == 0 {
            return;
        }
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(key, value).is_none() {
            order.push_back(key);
        }
        while map.len() > self.capacity {
            match order.pop_front() {
                Some(old) => {
                    map.remove(&old);
                }
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_least_recent() {
        let c = MatrixCache::new(2);
        let e = |v: f32| MatrixEmbedding::new(vec![v], vec![], 0, 0, 0);
        let k = |i: u8| [i; 32];
        c.insert(k(1), e(1.0));
        c.insert(k(2), e(2.0));
        assert!(c.get(k(1)).is_some()); // 1 is now most recent
        c.insert(k(3), e(3.0));
        assert!(c.get(k(2)).is_none());
        assert_eq!(c.get(k(1)).map(|x| x.values()[0]), Some(1.0));
        assert_eq!(c.get(k(3)).map(|x| x.values()[0]), Some(3.0));
        let off = MatrixCache::new(0);
        off.insert(k(1), e(1.0));
        assert!(off.get(k(1)).is_none());
    }
}

//! Decoded frames kept in host memory within a byte budget, so that every
//! epoch after the first reads them instead of decoding them again.
//!
//! The cache is filled, never churned: a frame is kept when it fits in what
//! is left of the budget, and stays until the budget is lowered. Training
//! samples windows in a new random order every epoch, so any frame is as
//! likely to be needed as any other: a cache holding a fraction `f` of the
//! frames serves about `f` of the reads whatever it keeps, and keeping the
//! first frames it sees costs no bookkeeping and no copies on a hit (an
//! LRU would evict and decode again at the same hit rate).
//!
//! Frames are shared as `Arc<[u8]>`: a hit clones the pointer under the
//! lock and copies the bytes outside it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A frame's name in the cache: the file (a number its owner gives each
/// video file) and the frame's index in presentation order.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct FrameKey {
    pub file: usize,
    pub frame: usize,
}

/// What the cache holds and how well it serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameCacheUsage {
    /// The most bytes it may hold.
    pub budget_bytes: usize,
    /// Bytes of frames held.
    pub bytes: usize,
    /// Frames held.
    pub frames: usize,
    /// Frames read from the cache.
    pub hits: u64,
    /// Frames decoded because the cache did not hold them.
    pub misses: u64,
}

impl FrameCacheUsage {
    /// `hits / (hits + misses)`, 0 before the first read.
    pub fn hit_rate(&self) -> f64 {
        let reads = self.hits + self.misses;
        if reads == 0 {
            0.0
        } else {
            self.hits as f64 / reads as f64
        }
    }
}

#[derive(Debug, Default)]
struct Held {
    budget: usize,
    bytes: usize,
    frames: HashMap<FrameKey, Arc<[u8]>>,
}

/// Decoded frames by [`FrameKey`], at most a budget of bytes (0: none kept).
#[derive(Debug, Default)]
pub struct FrameCache {
    held: Mutex<Held>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl FrameCache {
    /// An empty cache that keeps at most `budget_bytes` of frames.
    pub fn new(budget_bytes: usize) -> Self {
        let cache = FrameCache::default();
        cache.set_budget(budget_bytes);
        cache
    }

    /// Changes the budget; frames are dropped (all of them) only when what
    /// is held no longer fits.
    pub fn set_budget(&self, budget_bytes: usize) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.budget = budget_bytes;
        if held.bytes > budget_bytes {
            held.frames.clear();
            held.bytes = 0;
        }
    }

    /// True when the budget is above zero (frames may be kept).
    pub fn is_enabled(&self) -> bool {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).budget > 0
    }

    /// The frame held for `key`, counted as a hit, or `None`, counted as a miss.
    pub fn get(&self, key: FrameKey) -> Option<Arc<[u8]>> {
        let found = self.held.lock().unwrap_or_else(|p| p.into_inner()).frames.get(&key).cloned();
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Keeps `frame` under `key` if it fits in what is left of the budget;
    /// returns whether it is held (a frame already held stays as it is).
    pub fn insert(&self, key: FrameKey, frame: Arc<[u8]>) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.frames.contains_key(&key) {
            return true;
        }
        if held.bytes + frame.len() > held.budget {
            return false;
        }
        held.bytes += frame.len();
        held.frames.insert(key, frame);
        true
    }

    /// What the cache holds and its hits and misses so far.
    pub fn usage(&self) -> FrameCacheUsage {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        FrameCacheUsage {
            budget_bytes: held.budget,
            bytes: held.bytes,
            frames: held.frames.len(),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    /// Forgets the hit and miss counts (the frames stay).
    pub fn reset_counts(&self) {
        self.hits.store(0, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(bytes: usize, value: u8) -> Arc<[u8]> {
        vec![value; bytes].into()
    }

    #[test]
    fn keeps_frames_within_the_budget_and_counts_reads() {
        let cache = FrameCache::new(250);
        let key = |frame| FrameKey { file: 1, frame };
        assert!(cache.get(key(0)).is_none());
        assert!(cache.insert(key(0), frame(100, 7)));
        assert!(cache.insert(key(1), frame(100, 8)));
        assert!(!cache.insert(key(2), frame(100, 9)), "past the budget");
        assert!(cache.insert(key(1), frame(100, 0)), "already held");
        assert_eq!(cache.get(key(1)).unwrap()[0], 8, "the first frame kept stays");
        assert!(cache.get(key(2)).is_none());
        let usage = cache.usage();
        assert_eq!((usage.budget_bytes, usage.bytes, usage.frames, usage.hits, usage.misses), (250, 200, 2, 1, 2));
        assert!((usage.hit_rate() - 1.0 / 3.0).abs() < 1e-12);
        cache.reset_counts();
        assert_eq!(cache.usage().hit_rate(), 0.0);
    }

    #[test]
    fn a_lower_budget_drops_what_no_longer_fits() {
        let cache = FrameCache::new(0);
        assert!(!cache.is_enabled());
        assert!(!cache.insert(FrameKey { file: 0, frame: 0 }, frame(1, 0)));
        cache.set_budget(10);
        assert!(cache.insert(FrameKey { file: 0, frame: 0 }, frame(8, 0)));
        cache.set_budget(9);
        assert_eq!(cache.usage().frames, 1, "still fits");
        cache.set_budget(4);
        assert_eq!((cache.usage().frames, cache.usage().bytes), (0, 0));
    }
}

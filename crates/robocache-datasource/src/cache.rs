//! A byte-budgeted cache of whole low-dimensional streams: the first window
//! that touches a stream reads all of it (one HDF5 read instead of one per
//! window); later windows slice memory. Least recently used streams leave
//! first; images never enter (they are read row by row).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use robocache_cpu::HostVec;

/// `(episode, stream)` indices.
pub(crate) type StreamKey = (usize, usize);

/// How much of its budget the cache holds, and how well it serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// Bytes of stream data held.
    pub bytes: usize,
    /// The most it may hold.
    pub budget: usize,
    /// Streams held.
    pub streams: usize,
    /// Reads served from memory.
    pub hits: u64,
    /// Reads that went to the file.
    pub misses: u64,
}

#[derive(Debug)]
struct Entry {
    data: Arc<HostVec>,
    bytes: usize,
    /// The clock at its last use: set under the read lock, so a hit never
    /// waits for another.
    last_used: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<StreamKey, Entry>,
    bytes: usize,
}

/// The cache: a map under a read-write lock, so that the loader's threads,
/// each reading a stream's rows for every window of its batches, look up
/// together (a hit takes the read lock; only an insert takes the write
/// lock). Recency and the counts are atomics.
#[derive(Debug)]
pub(crate) struct StreamCache {
    budget: usize,
    state: RwLock<State>,
    clock: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl StreamCache {
    pub fn new(budget: usize) -> Self {
        StreamCache {
            budget,
            state: RwLock::new(State::default()),
            clock: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// True when a stream of `bytes` may enter (images never do; see the caller).
    pub fn admits(&self, bytes: usize) -> bool {
        bytes > 0 && bytes <= self.budget
    }

    pub fn get(&self, key: StreamKey) -> Option<Arc<HostVec>> {
        let found = self.read().entries.get(&key).map(|entry| {
            entry.last_used.store(self.clock.fetch_add(1, Ordering::Relaxed) + 1, Ordering::Relaxed);
            entry.data.clone()
        });
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Keeps `data` (a whole stream of `bytes`), evicting the least
    /// recently used streams while the budget lacks room. A stream larger
    /// than the budget is not kept.
    pub fn insert(&self, key: StreamKey, data: Arc<HostVec>, bytes: usize) {
        if !self.admits(bytes) {
            return;
        }
        let mut state = self.write();
        if state.entries.contains_key(&key) {
            return;
        }
        while state.bytes + bytes > self.budget {
            let oldest = state.entries.iter().min_by_key(|(_, e)| e.last_used.load(Ordering::Relaxed)).map(|(k, _)| *k);
            let Some(oldest) = oldest else { break };
            if let Some(evicted) = state.entries.remove(&oldest) {
                state.bytes -= evicted.bytes;
            }
        }
        let last_used = AtomicU64::new(self.clock.fetch_add(1, Ordering::Relaxed) + 1);
        state.bytes += bytes;
        state.entries.insert(key, Entry { data, bytes, last_used });
    }

    pub fn usage(&self) -> CacheUsage {
        let state = self.read();
        CacheUsage {
            bytes: state.bytes,
            budget: self.budget,
            streams: state.entries.len(),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_within_budget() {
        let cache = StreamCache::new(100);
        let data = |n| Arc::new(HostVec::U8(vec![0; n]));
        cache.insert((0, 0), data(40), 40);
        cache.insert((0, 1), data(40), 40);
        assert!(cache.get((0, 0)).is_some()); // (0, 1) is now the oldest
        cache.insert((0, 2), data(40), 40);
        assert!(cache.get((0, 1)).is_none());
        assert!(cache.get((0, 0)).is_some() && cache.get((0, 2)).is_some());
        let usage = cache.usage();
        assert_eq!((usage.bytes, usage.streams), (80, 2));
        cache.insert((1, 0), data(101), 101); // larger than the budget: not admitted
        assert_eq!(cache.usage().bytes, 80);
    }
}

//! A byte-budgeted cache of whole low-dimensional streams: the first window
//! that touches a stream reads all of it (one HDF5 read instead of one per
//! window); later windows slice memory. Least recently used streams leave
//! first; images never enter (they are read row by row).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

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
    last_used: u64,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<StreamKey, Entry>,
    bytes: usize,
    clock: u64,
    hits: u64,
    misses: u64,
}

/// The cache (shared by reader threads).
#[derive(Debug)]
pub(crate) struct StreamCache {
    budget: usize,
    state: Mutex<State>,
}

impl StreamCache {
    pub fn new(budget: usize) -> Self {
        StreamCache { budget, state: Mutex::new(State::default()) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the map inconsistent
        // (every update is a single insert or remove), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// True when a stream of `bytes` may be cached at all.
    pub fn admits(&self, bytes: usize) -> bool {
        bytes > 0 && bytes <= self.budget
    }

    pub fn get(&self, key: StreamKey) -> Option<Arc<HostVec>> {
        let mut state = self.lock();
        state.clock += 1;
        let clock = state.clock;
        match state.entries.get_mut(&key) {
            Some(entry) => {
                entry.last_used = clock;
                let data = entry.data.clone();
                state.hits += 1;
                Some(data)
            }
            None => {
                state.misses += 1;
                None
            }
        }
    }

    /// Inserts a stream, evicting the least recently used ones to stay within budget.
    pub fn insert(&self, key: StreamKey, data: Arc<HostVec>, bytes: usize) {
        if !self.admits(bytes) {
            return;
        }
        let mut state = self.lock();
        if state.entries.contains_key(&key) {
            return;
        }
        while state.bytes + bytes > self.budget {
            let Some(oldest) = state.entries.iter().min_by_key(|(_, e)| e.last_used).map(|(k, _)| *k) else { break };
            if let Some(evicted) = state.entries.remove(&oldest) {
                state.bytes -= evicted.bytes;
            }
        }
        state.clock += 1;
        let last_used = state.clock;
        state.bytes += bytes;
        state.entries.insert(key, Entry { data, bytes, last_used });
    }

    pub fn usage(&self) -> CacheUsage {
        let state = self.lock();
        CacheUsage {
            bytes: state.bytes,
            budget: self.budget,
            streams: state.entries.len(),
            hits: state.hits,
            misses: state.misses,
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

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
//!
//! Readers decoding side by side (a loader's workers) would each decode a
//! frame none has kept yet. [`FrameCache::lookup`] therefore hands the first
//! reader a [`Claim`] on a frame it decodes for the cache, and the readers
//! after it a [`PendingFrame`] to wait for; a reader settles its own claims
//! before it waits, so no two wait for each other. The protocol is
//! `robocache-claims`' [`ClaimMap`], which the device frame cache and the
//! block cache share.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use robocache_claims::{ClaimMap, Claims, Found, Waiter};

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

/// The budget and what is held against it (kept under the claim map's lock).
#[derive(Debug, Default)]
struct Budget {
    budget: usize,
    bytes: usize,
    /// Frames held.
    count: usize,
    /// A claimed frame did not fit: nothing is claimed any more.
    full: bool,
}

impl Budget {
    /// Claims are made while the budget has room.
    fn may_claim(&self) -> bool {
        !self.full && self.bytes < self.budget
    }

    /// Holds `frame` if it fits in what is left (else nothing is claimed
    /// any more); the `(index, frame)` to hold.
    fn admit(&mut self, free: &[usize], frame: &Arc<[u8]>) -> Vec<(usize, Arc<[u8]>)> {
        if free.is_empty() {
            return Vec::new();
        }
        if self.bytes + frame.len() > self.budget {
            self.full = true;
            return Vec::new();
        }
        self.bytes += frame.len();
        self.count += 1;
        vec![(0, frame.clone())]
    }
}

/// A frame one reader decodes for the cache while others wait for it:
/// finished with the frame once kept, with `None` once given up.
pub type PendingFrame = robocache_claims::Pending<Arc<[u8]>>;

/// What a reader does with a frame ([`FrameCache::lookup`]).
#[derive(Debug)]
pub enum Lookup<'a> {
    /// Held: copy it.
    Held(Arc<[u8]>),
    /// Not held: decode it, and keep it with the claim when there is one
    /// (readers beside this one then wait for it instead of decoding it).
    Decode(Option<Claim<'a>>),
    /// Another reader is decoding it: wait ([`FrameCache::wait`]) once every
    /// claim of this reader is settled.
    Wait(Waiter<Arc<[u8]>>),
}

/// A reader's promise to decode a frame for the cache. [`Claim::keep`]
/// settles it; dropped unsettled (the decode failed), it is given up, and
/// the readers waiting for the frame decode it themselves. A reader must
/// settle or drop its claims before it waits for anyone else's, so that no
/// two readers wait for each other.
#[derive(Debug)]
pub struct Claim<'a> {
    cache: &'a FrameCache,
    key: FrameKey,
    claims: Claims<'a, FrameKey, Arc<[u8]>, Budget>,
}

impl Claim<'_> {
    /// Keeps `frame` (as [`FrameCache::insert`]) and hands it to the readers
    /// waiting for it; returns whether it is held.
    pub fn keep(self, frame: Arc<[u8]>) -> bool {
        self.cache.settle(self.claims, self.key, frame)
    }
}

/// Decoded frames by [`FrameKey`], at most a budget of bytes (0: none
/// kept). Each frame is decoded once while claimed (a
/// [`robocache_claims::ClaimMap`]).
#[derive(Debug, Default)]
pub struct FrameCache {
    frames: ClaimMap<FrameKey, Arc<[u8]>, Budget>,
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
        self.frames.drop_held_if(|held| {
            held.budget = budget_bytes;
            held.full = false;
            let over = held.bytes > budget_bytes;
            if over {
                held.bytes = 0;
                held.count = 0;
            }
            over
        });
    }

    /// True when the budget is above zero (frames may be kept).
    pub fn is_enabled(&self) -> bool {
        self.frames.with_state(|held| held.budget > 0)
    }

    fn count(&self, hit: bool) {
        let counter = if hit { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The frame held for `key`, counted as a hit, or `None`, counted as a miss.
    pub fn get(&self, key: FrameKey) -> Option<Arc<[u8]>> {
        let found = self.frames.get(&key);
        self.count(found.is_some());
        found
    }

    /// What a reader does with the frame `key`: copy it (a hit), decode it
    /// (a miss; claimed while the budget has room), or wait for the reader
    /// decoding it (counted by [`FrameCache::wait`]).
    pub fn lookup(&self, key: FrameKey) -> Lookup<'_> {
        let (mut found, claims) = self.frames.find(&[key], Budget::may_claim);
        let lookup = match found.pop() {
            Some(Found::Held(frame)) => Lookup::Held(frame),
            Some(Found::Wait(waiter)) => return Lookup::Wait(waiter),
            Some(Found::Compute) | None => {
                Lookup::Decode((!claims.is_empty()).then_some(Claim { cache: self, key, claims }))
            }
        };
        self.count(matches!(lookup, Lookup::Held(_)));
        lookup
    }

    /// The frame another reader was decoding, once it kept it (a hit), or
    /// `None` where it gave it up (a miss: decode it).
    pub fn wait(&self, pending: &PendingFrame) -> Option<Arc<[u8]>> {
        let frame = pending.wait();
        self.count(frame.is_some());
        frame
    }

    /// Keeps `frame` under `key` if it fits in what is left of the budget;
    /// returns whether it is held (a frame already held stays as it is).
    pub fn insert(&self, key: FrameKey, frame: Arc<[u8]>) -> bool {
        self.settle(self.frames.no_claims(), key, frame)
    }

    /// Holds `frame` where it fits, settling `claims` (of `key` or none).
    fn settle(&self, claims: Claims<'_, FrameKey, Arc<[u8]>, Budget>, key: FrameKey, frame: Arc<[u8]>) -> bool {
        let mut kept = false;
        let settled = self.frames.keep(claims, &[key], |held, free| {
            let admitted = held.admit(free, &frame);
            kept = !admitted.is_empty();
            Ok::<_, std::convert::Infallible>(admitted)
        });
        let Ok(()) = settled;
        kept || self.frames.get(&key).is_some()
    }

    /// What the cache holds and its hits and misses so far.
    pub fn usage(&self) -> FrameCacheUsage {
        let (budget_bytes, bytes, frames) = self.frames.with_state(|held| (held.budget, held.bytes, held.count));
        FrameCacheUsage {
            budget_bytes,
            bytes,
            frames,
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
    fn a_claimed_frame_is_handed_to_the_reader_waiting_for_it() {
        let cache = FrameCache::new(250);
        let key = FrameKey { file: 2, frame: 5 };
        let Lookup::Decode(Some(claim)) = cache.lookup(key) else { panic!("a miss, claimed") };
        let Lookup::Wait(pending) = cache.lookup(key) else { panic!("being decoded: a wait") };
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| cache.wait(&pending));
            assert!(claim.keep(frame(100, 3)));
            assert_eq!(waiter.join().unwrap().expect("kept, so handed over")[0], 3);
        });
        assert!(matches!(cache.lookup(key), Lookup::Held(_)));
        let usage = cache.usage();
        assert_eq!((usage.frames, usage.bytes, usage.hits, usage.misses), (1, 100, 2, 1));
    }

    #[test]
    fn a_claim_given_up_sends_the_waiting_reader_to_decode() {
        let cache = FrameCache::new(150);
        let key = |frame| FrameKey { file: 0, frame };
        let Lookup::Decode(Some(claim)) = cache.lookup(key(0)) else { panic!("claimed") };
        let Lookup::Wait(pending) = cache.lookup(key(0)) else { panic!("a wait") };
        drop(claim); // the decode failed
        assert!(cache.wait(&pending).is_none());
        assert!(matches!(cache.lookup(key(0)), Lookup::Decode(Some(_))), "free to claim again");
        // A claimed frame that does not fit is given up, and nothing is
        // claimed after that.
        let Lookup::Decode(Some(first)) = cache.lookup(key(1)) else { panic!("claimed") };
        let Lookup::Decode(Some(second)) = cache.lookup(key(2)) else { panic!("claimed") };
        let Lookup::Wait(pending) = cache.lookup(key(2)) else { panic!("a wait") };
        assert!(first.keep(frame(100, 1)));
        assert!(!second.keep(frame(100, 2)), "past the budget");
        assert!(cache.wait(&pending).is_none());
        assert!(matches!(cache.lookup(key(3)), Lookup::Decode(None)), "a full cache claims nothing");
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

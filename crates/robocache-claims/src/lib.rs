//! Computed once: [`ClaimMap`], a map of values that one thread computes
//! (decodes, fetches) while the other threads that need them meanwhile wait
//! for it instead of computing them too. robocache's three caches share it:
//! the host frame cache (`robocache-video`), the frame cache on a loader's
//! device (`robocache`) and the node-local block cache (`robocache-storage`,
//! for its threads; a file lock covers other processes).
//!
//! The protocol, tested once here:
//! - [`ClaimMap::find`] looks keys up under one lock. A key held is
//!   [`Found::Held`]; a key another caller is computing is [`Found::Wait`];
//!   any other key is [`Found::Compute`], and the caller claims it when the
//!   map's state says there is room (the claim is in the [`Claims`] it
//!   gets back), so that callers after it wait instead of computing it.
//! - Each key is computed once while claimed: a caller settles its claims
//!   with [`ClaimMap::keep`], which holds the values the map's state admits
//!   and hands them to every waiter.
//! - A claim given up (not admitted, or its [`Claims`] dropped because the
//!   computation failed) removes the key and wakes its waiters with `None`:
//!   the work goes back to them.
//! - A caller settles or drops its claims before it waits for anyone
//!   else's, so that no two callers wait for each other.
//!
//! The map keeps a state of its own `S` under the same lock (a byte budget
//! and what is held against it); [`ClaimMap::find`] and [`ClaimMap::keep`]
//! consult it.
//!
//! ```
//! use robocache_claims::{ClaimMap, Found};
//!
//! // Values held while fewer than 2 are: the state counts them.
//! let map: ClaimMap<&str, u32, usize> = ClaimMap::new(0);
//! let (found, claims) = map.find(&["a"], |held| *held < 2);
//! assert!(matches!(found[0], Found::Compute));
//! // A second caller finds "a" being computed: it waits.
//! let (again, _) = map.find(&["a"], |held| *held < 2);
//! let Found::Wait(waiter) = &again[0] else { unreachable!() };
//! std::thread::scope(|scope| {
//!     let waiting = scope.spawn(|| map.wait(waiter));
//!     map.keep(claims, &["a"], |held, free| {
//!         *held += free.len();
//!         Ok::<_, ()>(free.iter().map(|&i| (i, 42)).collect())
//!     })
//!     .unwrap();
//!     assert_eq!(waiting.join().unwrap(), Some(42));
//! });
//! assert_eq!(map.get(&"a"), Some(42));
//! ```

mod pending;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

pub use pending::Pending;

/// A value another caller is computing: [`ClaimMap::wait`] for it.
pub type Waiter<V> = Arc<Pending<V>>;

/// What [`ClaimMap::find`] found for a key.
pub enum Found<V> {
    /// Held: use it.
    Held(V),
    /// Neither held nor being computed: compute it (claimed when the
    /// [`Claims`] returned with it hold the key).
    Compute,
    /// Another caller is computing it: [`ClaimMap::wait`] for it once this
    /// caller's own claims are settled.
    Wait(Waiter<V>),
}

impl<V> fmt::Debug for Found<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Found::Held(_) => "Held",
            Found::Compute => "Compute",
            Found::Wait(_) => "Wait",
        })
    }
}

enum Slot<V> {
    Held(V),
    Claimed(Waiter<V>),
}

struct Inner<K, V, S> {
    slots: HashMap<K, Slot<V>>,
    state: S,
}

/// Values by key, each computed once by the caller that claimed it while
/// others wait (see the crate docs), with a state `S` kept under the same
/// lock. A lock poisoned by a panic elsewhere is taken over: what it
/// guards is consistent after every step.
pub struct ClaimMap<K, V, S = ()> {
    inner: Mutex<Inner<K, V, S>>,
}

impl<K: Eq + Hash + Clone, V: Clone, S: fmt::Debug> fmt::Debug for ClaimMap<K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("ClaimMap").field("slots", &inner.slots.len()).field("state", &inner.state).finish()
    }
}

impl<K: Eq + Hash + Clone, V: Clone, S: Default> Default for ClaimMap<K, V, S> {
    fn default() -> Self {
        Self::new(S::default())
    }
}

/// The keys one caller claimed. [`ClaimMap::keep`] settles them; dropped
/// unsettled, they are given up: removed from the map, and their waiters
/// woken with `None` to compute them themselves.
pub struct Claims<'a, K: Eq + Hash + Clone, V: Clone, S> {
    map: &'a ClaimMap<K, V, S>,
    claimed: Vec<(K, Waiter<V>)>,
}

impl<K: Eq + Hash + Clone, V: Clone, S> fmt::Debug for Claims<'_, K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Claims").field("claimed", &self.claimed.len()).finish()
    }
}

impl<K: Eq + Hash + Clone, V: Clone, S> Claims<'_, K, V, S> {
    /// How many keys are claimed and not yet settled.
    pub fn len(&self) -> usize {
        self.claimed.len()
    }

    /// True when nothing is claimed.
    pub fn is_empty(&self) -> bool {
        self.claimed.is_empty()
    }

    /// True when `key` is claimed here.
    pub fn holds(&self, key: &K) -> bool {
        self.claimed.iter().any(|(k, _)| k == key)
    }

    /// Gives up every claim still unsettled.
    fn give_up(&mut self) {
        if self.claimed.is_empty() {
            return;
        }
        {
            let mut inner = self.map.lock();
            for (key, waiter) in &self.claimed {
                if matches!(inner.slots.get(key), Some(Slot::Claimed(w)) if Arc::ptr_eq(w, waiter)) {
                    inner.slots.remove(key);
                }
            }
        }
        for (_, waiter) in self.claimed.drain(..) {
            waiter.finish(None);
        }
    }
}

impl<K: Eq + Hash + Clone, V: Clone, S> Drop for Claims<'_, K, V, S> {
    fn drop(&mut self) {
        self.give_up();
    }
}

impl<K: Eq + Hash + Clone, V: Clone, S> ClaimMap<K, V, S> {
    /// An empty map with state `state`.
    pub fn new(state: S) -> Self {
        ClaimMap { inner: Mutex::new(Inner { slots: HashMap::new(), state }) }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<K, V, S>> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Looks `keys` up under one lock: each is held, being computed by
    /// another caller, or to compute. Keys to compute are claimed when
    /// `may_claim` (asked once, with the state) says so; a key listed twice
    /// is claimed once.
    pub fn find(&self, keys: &[K], may_claim: impl FnOnce(&S) -> bool) -> (Vec<Found<V>>, Claims<'_, K, V, S>) {
        let mut inner = self.lock();
        let claim = may_claim(&inner.state);
        let mut claimed = Vec::new();
        let found = keys
            .iter()
            .map(|key| {
                if claimed.iter().any(|(k, _)| k == key) {
                    return Found::Compute; // claimed by this very call (a key listed twice)
                }
                match inner.slots.get(key) {
                    Some(Slot::Held(value)) => Found::Held(value.clone()),
                    Some(Slot::Claimed(waiter)) => Found::Wait(waiter.clone()),
                    None => {
                        if claim {
                            let waiter = Waiter::default();
                            inner.slots.insert(key.clone(), Slot::Claimed(waiter.clone()));
                            claimed.push((key.clone(), waiter));
                        }
                        Found::Compute
                    }
                }
            })
            .collect();
        (found, Claims { map: self, claimed })
    }

    /// No claims: for [`ClaimMap::keep`] of values computed without one.
    pub fn no_claims(&self) -> Claims<'_, K, V, S> {
        Claims { map: self, claimed: Vec::new() }
    }

    /// Settles `claims` with the values computed for `keys`. Under one
    /// lock, `admit` gets the state and the indices into `keys` of the keys
    /// free to hold (neither held nor claimed by another caller; a key
    /// listed twice, once) and returns the `(index, value)` pairs to hold.
    /// Those are held and handed to their waiters; every claim of `claims`
    /// not among them is given up. An error from `admit` gives them all up.
    pub fn keep<E>(
        &self,
        mut claims: Claims<'_, K, V, S>,
        keys: &[K],
        admit: impl FnOnce(&mut S, &[usize]) -> Result<Vec<(usize, V)>, E>,
    ) -> Result<(), E> {
        let mut settled = Vec::new();
        let result = {
            let mut inner = self.lock();
            let mut seen = HashSet::with_capacity(keys.len());
            let free: Vec<usize> = (0..keys.len())
                .filter(|&i| {
                    let key = &keys[i];
                    let free = match inner.slots.get(key) {
                        None => true,
                        Some(Slot::Held(_)) => false,
                        Some(Slot::Claimed(waiter)) => {
                            claims.claimed.iter().any(|(k, w)| k == key && Arc::ptr_eq(w, waiter))
                        }
                    };
                    free && seen.insert(key)
                })
                .collect();
            let mut is_free = vec![false; keys.len()];
            free.iter().for_each(|&i| is_free[i] = true);
            admit(&mut inner.state, &free).map(|held| {
                for (i, value) in held {
                    // Only a free key is held: never one another caller holds or computes.
                    if !is_free.get(i).copied().unwrap_or(false) {
                        continue;
                    }
                    is_free[i] = false;
                    let key = &keys[i];
                    if let Some(Slot::Claimed(waiter)) = inner.slots.insert(key.clone(), Slot::Held(value.clone())) {
                        settled.push((key.clone(), waiter, value));
                    }
                }
            })
        }; // the lock is released here, before any waiter is woken
           // Hand what is held to its waiters; give up the rest.
        for (key, waiter, value) in settled {
            claims.claimed.retain(|(k, w)| !(*k == key && Arc::ptr_eq(w, &waiter)));
            waiter.finish(Some(value));
        }
        claims.give_up();
        result
    }

    /// The value another caller was computing, once it is held, or `None`
    /// where the claim was given up (compute it).
    pub fn wait(&self, waiter: &Waiter<V>) -> Option<V> {
        waiter.wait()
    }

    /// The value held for `key`.
    pub fn get(&self, key: &K) -> Option<V> {
        match self.lock().slots.get(key) {
            Some(Slot::Held(value)) => Some(value.clone()),
            _ => None,
        }
    }

    /// Runs `f` on the state, under the lock.
    pub fn with_state<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.lock().state)
    }

    /// Runs `f` on the state under the lock and, where it returns true,
    /// drops every value held (claims stay).
    pub fn drop_held_if(&self, f: impl FnOnce(&mut S) -> bool) {
        let mut inner = self.lock();
        if f(&mut inner.state) {
            inner.slots.retain(|_, slot| matches!(slot, Slot::Claimed(_)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Holds values while fewer than `room` are held.
    fn admit_within(room: usize) -> impl Fn(&mut usize, &[usize]) -> Result<Vec<(usize, u32)>, ()> {
        move |held, free| {
            let take: Vec<usize> = free.iter().copied().take(room.saturating_sub(*held)).collect();
            *held += take.len();
            Ok(take.into_iter().map(|i| (i, 100 + i as u32)).collect())
        }
    }

    #[test]
    fn each_key_is_computed_once_and_waiters_get_it() {
        let map: ClaimMap<u32, u32, usize> = ClaimMap::new(0);
        let (found, claims) = map.find(&[1, 2, 1], |_| true);
        assert!(found.iter().all(|f| matches!(f, Found::Compute)), "{found:?}");
        assert_eq!(claims.len(), 2, "a key listed twice is claimed once");
        let (second, none) = map.find(&[2, 3], |_| false);
        assert!(none.is_empty(), "nothing claimed when the state says no");
        let Found::Wait(waiter) = &second[0] else { panic!("2 is being computed: {second:?}") };
        assert!(matches!(second[1], Found::Compute));
        std::thread::scope(|scope| {
            let waiters: Vec<_> = (0..4).map(|_| scope.spawn(|| map.wait(waiter))).collect();
            map.keep(claims, &[1, 2, 1], admit_within(10)).unwrap();
            for waiter in waiters {
                assert_eq!(waiter.join().unwrap(), Some(101), "key 2 is index 1 of the keys kept");
            }
        });
        assert_eq!((map.get(&1), map.get(&2)), (Some(100), Some(101)));
        assert_eq!(map.with_state(|held| *held), 2, "the key listed twice is offered once");
        let (third, _) = map.find(&[1], |_| true);
        assert!(matches!(third[0], Found::Held(100)));
    }

    #[test]
    fn a_claim_given_up_hands_the_work_back() {
        let map: ClaimMap<u32, u32, usize> = ClaimMap::new(0);
        let (_, claims) = map.find(&[7], |_| true);
        let (found, _) = map.find(&[7], |_| true);
        let Found::Wait(waiter) = &found[0] else { panic!("a wait") };
        drop(claims); // the computation failed
        assert_eq!(map.wait(waiter), None);
        let (again, claims) = map.find(&[7], |_| true);
        assert!(matches!(again[0], Found::Compute) && claims.holds(&7), "free to claim again");

        // Claimed but not admitted (no room): given up, and the waiter computes it.
        let (found, _) = map.find(&[7], |_| true);
        let Found::Wait(waiter) = &found[0] else { panic!("a wait") };
        map.keep(claims, &[7], admit_within(0)).unwrap();
        assert_eq!(map.wait(waiter), None);
        assert_eq!(map.get(&7), None);

        // An error from `admit` gives every claim up.
        let (_, claims) = map.find(&[8, 9], |_| true);
        assert_eq!(map.keep(claims, &[8, 9], |_, _| Err("failed")), Err("failed"));
        let (found, _) = map.find(&[8, 9], |_| false);
        assert!(found.iter().all(|f| matches!(f, Found::Compute)));
    }

    #[test]
    fn keys_held_or_claimed_by_another_are_not_free() {
        let map: ClaimMap<u32, u32, usize> = ClaimMap::new(0);
        let (_, theirs) = map.find(&[1], |_| true);
        map.keep(map.no_claims(), &[2], admit_within(10)).unwrap();
        let mut offered = Vec::new();
        map.keep(map.no_claims(), &[1, 2, 3], |_, free: &[usize]| {
            offered = free.to_vec();
            Ok::<_, ()>(Vec::new())
        })
        .unwrap();
        assert_eq!(offered, [2], "1 is claimed by another, 2 held: only 3 (index 2) is free");
        drop(theirs);
        map.drop_held_if(|held| {
            *held = 0;
            true
        });
        assert_eq!(map.get(&2), None);
    }
}

//! [`Pending`]: a value one thread produces while others wait for it: the
//! caller that claims a key of a [`crate::ClaimMap`] finishes it; callers
//! that need the key meanwhile wait on it instead of computing it too.

use std::sync::{Condvar, Mutex};

/// A value being produced: finished once, with `Some(value)` or with
/// `None` (given up); waiting returns what it finished with.
#[derive(Debug)]
pub struct Pending<T> {
    /// `Some(result)` once finished.
    done: Mutex<Option<Option<T>>>,
    finished: Condvar,
}

impl<T> Default for Pending<T> {
    fn default() -> Self {
        Pending { done: Mutex::new(None), finished: Condvar::new() }
    }
}

impl<T: Clone> Pending<T> {
    /// Finishes with `value` (`None`: given up) and wakes every waiter. A
    /// lock poisoned by a panic elsewhere is taken over: the value is
    /// still handed out.
    pub fn finish(&self, value: Option<T>) {
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
        self.finished.notify_all();
    }

    /// Blocks until finished; the value, or `None` where it was given up.
    pub fn wait(&self) -> Option<T> {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        while done.is_none() {
            done = self.finished.wait(done).unwrap_or_else(|p| p.into_inner());
        }
        done.clone().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_get_what_it_finished_with() {
        let kept = Pending::default();
        let given_up = Pending::<u32>::default();
        std::thread::scope(|scope| {
            let waiters: Vec<_> = (0..3).map(|_| scope.spawn(|| (kept.wait(), given_up.wait()))).collect();
            kept.finish(Some(7));
            given_up.finish(None);
            for waiter in waiters {
                assert_eq!(waiter.join().unwrap(), (Some(7), None));
            }
        });
        assert_eq!(kept.wait(), Some(7), "a wait after the finish returns at once");
    }
}

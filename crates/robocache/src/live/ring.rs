//! The samples of one live stream: a bounded ring of the latest samples,
//! the first sample since the last reset (windows clamp to it), and how
//! many were pushed.

use std::collections::VecDeque;

use crate::Tensor;

/// One sample's value: the row's bytes (f32 for resident streams, the
/// dataset's dtype otherwise), or a camera frame on the live device (8-bit
/// RGB `[1, H, W, 3]`, already cropped and resized as the spec asks).
#[derive(Clone, Debug)]
pub(super) enum Value {
    Row(Vec<u8>),
    Frame(Tensor),
}

/// The samples a live stream keeps.
#[derive(Debug)]
pub(super) struct SampleRing {
    capacity: usize,
    times: VecDeque<f64>,
    values: VecDeque<Value>,
    /// The first sample since the last reset, kept after the ring drops it.
    first: Option<(f64, Value)>,
    /// Samples pushed since the last reset.
    pushed: u64,
}

/// What a window reads of a ring, copied out under its lock.
#[derive(Debug)]
pub(super) struct RingSnapshot {
    /// The samples' times, oldest first.
    pub times: Vec<f64>,
    pub values: Vec<Value>,
    /// The first sample since the reset (time, value), which `times[0]` is
    /// when the ring has not dropped it.
    pub first: Option<(f64, Value)>,
    /// The sample number (since the reset) of `times[0]`.
    pub first_number: u64,
}

impl SampleRing {
    pub(super) fn new(capacity: usize) -> Self {
        SampleRing {
            capacity: capacity.max(2),
            times: VecDeque::new(),
            values: VecDeque::new(),
            first: None,
            pushed: 0,
        }
    }

    /// The latest sample's time.
    pub(super) fn last_time(&self) -> Option<f64> {
        self.times.back().copied()
    }

    /// Appends a sample (its time after the latest, checked by the caller).
    pub(super) fn push(&mut self, time: f64, value: Value) {
        if self.first.is_none() {
            self.first = Some((time, value.clone()));
        }
        if self.times.len() == self.capacity {
            self.times.pop_front();
            self.values.pop_front();
        }
        self.times.push_back(time);
        self.values.push_back(value);
        self.pushed += 1;
    }

    /// Forgets every sample (a new episode).
    pub(super) fn clear(&mut self) {
        self.times.clear();
        self.values.clear();
        self.first = None;
        self.pushed = 0;
    }

    /// The samples at or before `until` (every sample when `None`), copied.
    pub(super) fn snapshot(&self, until: Option<f64>) -> RingSnapshot {
        let end = match until {
            Some(until) => self.times.partition_point(|&t| t <= until),
            None => self.times.len(),
        };
        RingSnapshot {
            times: self.times.range(..end).copied().collect(),
            values: self.values.range(..end).cloned().collect(),
            first: self.first.clone(),
            first_number: self.pushed - self.times.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SampleRing, Value};

    #[test]
    fn a_full_ring_drops_its_oldest_but_keeps_the_first_sample() {
        let mut ring = SampleRing::new(2);
        for t in 0..4 {
            ring.push(f64::from(t), Value::Row(vec![t as u8]));
        }
        let all = ring.snapshot(None);
        assert_eq!((all.times, all.first_number), (vec![2.0, 3.0], 2));
        assert!(matches!(all.first, Some((0.0, Value::Row(ref v))) if v == &[0]));
        assert_eq!(ring.snapshot(Some(2.5)).times, [2.0]);
        ring.clear();
        assert!(ring.snapshot(None).first.is_none() && ring.last_time().is_none());
    }
}

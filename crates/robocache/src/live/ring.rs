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
    /// The sample number (since the reset) of `times[0]` (or of where it
    /// would be, when the snapshot is empty).
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

    /// The samples a window from `from` to `end` reads, copied: from the
    /// last at or before `from` (the oldest kept when none is) to `end`.
    pub(super) fn snapshot(&self, from: f64, end: End) -> RingSnapshot {
        let start = self.times.partition_point(|&t| t <= from).saturating_sub(1);
        let end = match end {
            End::AtOrBefore(until) => self.times.partition_point(|&t| t <= until),
            End::FirstAtOrAfter(until) => (self.times.partition_point(|&t| t < until) + 1).min(self.times.len()),
        };
        self.copy(start.min(end)..end)
    }

    /// The last `count` samples at or before `until`, copied.
    pub(super) fn snapshot_last(&self, until: f64, count: usize) -> RingSnapshot {
        let end = self.times.partition_point(|&t| t <= until);
        self.copy(end.saturating_sub(count)..end)
    }

    fn copy(&self, range: std::ops::Range<usize>) -> RingSnapshot {
        RingSnapshot {
            first_number: self.pushed - self.times.len() as u64 + range.start as u64,
            times: self.times.range(range.clone()).copied().collect(),
            values: self.values.range(range).cloned().collect(),
            first: self.first.clone(),
        }
    }
}

/// Where a window's samples end.
#[derive(Clone, Copy, Debug)]
pub(super) enum End {
    /// At the last sample at or before this time (causal windows).
    AtOrBefore(f64),
    /// At the first sample at or after it (interpolation needs it).
    FirstAtOrAfter(f64),
}

#[cfg(test)]
mod tests {
    use super::{End, SampleRing, Value};

    #[test]
    fn a_full_ring_drops_its_oldest_but_keeps_the_first_sample() {
        let mut ring = SampleRing::new(2);
        for t in 0..4 {
            ring.push(f64::from(t), Value::Row(vec![t as u8]));
        }
        let all = ring.snapshot(0.0, End::FirstAtOrAfter(9.0));
        assert_eq!((all.times, all.first_number), (vec![2.0, 3.0], 2));
        assert!(matches!(all.first, Some((0.0, Value::Row(ref v))) if v == &[0]));
        assert_eq!(ring.snapshot(0.0, End::AtOrBefore(2.5)).times, [2.0]);
        assert_eq!(ring.snapshot(2.5, End::FirstAtOrAfter(2.6)).times, [2.0, 3.0]);
        let last = ring.snapshot_last(3.0, 1);
        assert_eq!((last.times, last.first_number), (vec![3.0], 3));
        ring.clear();
        assert!(ring.snapshot(0.0, End::AtOrBefore(9.0)).first.is_none() && ring.last_time().is_none());
    }
}

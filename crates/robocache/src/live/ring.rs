//! The samples of one live stream: the latest samples over a time span
//! (in the data's own seconds), bounded in bytes, the first sample since the
//! last reset (windows clamp to it), and how many were pushed.
//!
//! A ring keeps every sample newer than `latest - span`, and the last
//! `kept_before_span` at or before it (one for time windows: the sample a
//! window reaching back `span` from the latest holds or interpolates from;
//! for `delta_timestamps`, the frames a window counts back). Past `max_bytes` (a frame counts its bytes on the
//! device) it drops its oldest samples anyway: a window that would read one
//! of them is then an error, never a different value (`live::window`).

use std::collections::VecDeque;

use crate::Tensor;

/// What a sample's bookkeeping costs beyond its value (its time, its place
/// in the deque, the value's header), counted against `max_bytes`.
const SAMPLE_OVERHEAD_BYTES: usize = 48;

/// One sample's value: the row's bytes (f32 for resident streams, the
/// dataset's dtype otherwise), or a camera frame on the live device (8-bit
/// RGB `[1, H, W, 3]`, already cropped and resized as the spec asks).
#[derive(Clone, Debug)]
pub(super) enum Value {
    Row(Vec<u8>),
    Frame(Tensor),
}

impl Value {
    fn bytes(&self) -> usize {
        SAMPLE_OVERHEAD_BYTES
            + match self {
                Value::Row(bytes) => bytes.len(),
                Value::Frame(frame) => frame.size_in_bytes(),
            }
    }
}

/// How much a ring keeps (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct RingLimits {
    /// Seconds back from the latest sample that windows may read.
    pub span_s: f64,
    /// Samples kept at or before `latest - span_s` (at least one).
    pub kept_before_span: usize,
    /// The most bytes of samples kept.
    pub max_bytes: usize,
}

/// The samples a live stream keeps.
#[derive(Debug)]
pub(super) struct SampleRing {
    limits: RingLimits,
    times: VecDeque<f64>,
    values: VecDeque<Value>,
    /// Bytes of the kept samples (with their overhead).
    bytes: usize,
    /// The first sample since the last reset, kept after the ring drops it.
    first: Option<(f64, Value)>,
    /// Samples pushed since the last reset.
    pushed: u64,
    /// Whether a sample was dropped for the byte bound (not by time) since
    /// the last reset: what an error says.
    dropped_for_bytes: bool,
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
    /// The oldest sample the ring still holds, when it has dropped some
    /// (windows reaching before it are errors).
    pub oldest_kept: Option<f64>,
    /// The ring's limits and whether it dropped samples for its byte bound.
    pub limits: RingLimits,
    pub dropped_for_bytes: bool,
}

impl SampleRing {
    pub(super) fn new(limits: RingLimits) -> Self {
        SampleRing {
            limits,
            times: VecDeque::new(),
            values: VecDeque::new(),
            bytes: 0,
            first: None,
            pushed: 0,
            dropped_for_bytes: false,
        }
    }

    /// The first sample's time since the reset.
    pub(super) fn first_time(&self) -> Option<f64> {
        self.first.as_ref().map(|(t, _)| *t)
    }

    /// The latest sample's time.
    pub(super) fn last_time(&self) -> Option<f64> {
        self.times.back().copied()
    }

    /// Appends a sample (its time after the latest, checked by the caller)
    /// and drops what the limits no longer keep.
    pub(super) fn push(&mut self, time: f64, value: Value) {
        if self.first.is_none() {
            self.first = Some((time, value.clone()));
        }
        self.bytes += value.bytes();
        self.times.push_back(time);
        self.values.push_back(value);
        self.pushed += 1;
        let cutoff = time - self.limits.span_s;
        let before = self.limits.kept_before_span.max(1);
        while self.times.get(before).is_some_and(|&t| t <= cutoff) {
            self.pop_front();
        }
        while self.bytes > self.limits.max_bytes && self.times.len() > 1 {
            self.pop_front();
            self.dropped_for_bytes = true;
        }
    }

    fn pop_front(&mut self) {
        self.times.pop_front();
        if let Some(value) = self.values.pop_front() {
            self.bytes -= value.bytes();
        }
    }

    /// Forgets every sample (a new episode).
    pub(super) fn clear(&mut self) {
        self.times.clear();
        self.values.clear();
        self.bytes = 0;
        self.first = None;
        self.pushed = 0;
        self.dropped_for_bytes = false;
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
        let dropped = self.pushed > self.times.len() as u64;
        RingSnapshot {
            first_number: self.pushed - self.times.len() as u64 + range.start as u64,
            times: self.times.range(range.clone()).copied().collect(),
            values: self.values.range(range).cloned().collect(),
            first: self.first.clone(),
            oldest_kept: self.times.front().copied().filter(|_| dropped),
            limits: self.limits,
            dropped_for_bytes: self.dropped_for_bytes,
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
    use super::{End, RingLimits, SampleRing, Value, SAMPLE_OVERHEAD_BYTES};

    fn ring(span_s: f64, kept_before_span: usize, max_bytes: usize) -> SampleRing {
        SampleRing::new(RingLimits { span_s, kept_before_span, max_bytes })
    }

    #[test]
    fn a_ring_keeps_its_span_and_the_sample_before_it_and_the_first_sample() {
        let mut ring = ring(1.5, 1, usize::MAX);
        for t in 0..5 {
            ring.push(f64::from(t), Value::Row(vec![t as u8]));
        }
        // Latest 4: the span reaches 2.5; 2 is the last at or before it.
        let all = ring.snapshot(0.0, End::FirstAtOrAfter(9.0));
        assert_eq!((all.times, all.first_number, all.oldest_kept), (vec![2.0, 3.0, 4.0], 2, Some(2.0)));
        assert!(matches!(all.first, Some((0.0, Value::Row(ref v))) if v == &[0]));
        assert_eq!(ring.snapshot(0.0, End::AtOrBefore(3.5)).times, [2.0, 3.0]);
        assert_eq!(ring.snapshot(3.5, End::FirstAtOrAfter(3.6)).times, [3.0, 4.0]);
        let last = ring.snapshot_last(4.0, 1);
        assert_eq!((last.times, last.first_number), (vec![4.0], 4));
        // A hundred times faster, the same span: every sample of it kept.
        for k in 1..=1000 {
            ring.push(4.0 + f64::from(k) * 0.01, Value::Row(vec![0]));
        }
        let kept = ring.snapshot(f64::NEG_INFINITY, End::AtOrBefore(f64::INFINITY)).times;
        let cutoff = kept[kept.len() - 1] - 1.5;
        assert!(kept[0] <= cutoff && kept[1] > cutoff && (150..=152).contains(&kept.len()), "{kept:?}");
        ring.clear();
        assert!(ring.snapshot(0.0, End::AtOrBefore(9.0)).first.is_none() && ring.last_time().is_none());
    }

    #[test]
    fn the_byte_bound_drops_the_oldest_and_says_so() {
        let mut bounded = ring(100.0, 1, 3 * (SAMPLE_OVERHEAD_BYTES + 4));
        for t in 0..5 {
            bounded.push(f64::from(t), Value::Row(vec![0; 4]));
        }
        let all = bounded.snapshot(0.0, End::AtOrBefore(9.0));
        assert_eq!((all.times, all.oldest_kept, all.dropped_for_bytes), (vec![2.0, 3.0, 4.0], Some(2.0), true));
        // Frames counted back: three at or before the span's start kept.
        let mut counted = ring(0.5, 3, usize::MAX);
        for t in 0..10 {
            counted.push(f64::from(t), Value::Row(vec![0]));
        }
        assert_eq!(counted.snapshot_last(9.0, 9).times, [6.0, 7.0, 8.0, 9.0]);
    }
}

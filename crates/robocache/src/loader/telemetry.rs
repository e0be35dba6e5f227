//! Data-stall telemetry: how long the consumer waited in `next()` for each
//! batch, the fraction of its wall time spent waiting, and throughput.

use std::time::{Duration, Instant};

use serde::Serialize;

/// A summary of what a loader delivered so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TelemetryReport {
    /// Batches delivered.
    pub batches: u64,
    /// Windows delivered.
    pub samples: u64,
    /// Wall time from the first request to the last delivery, in seconds.
    pub elapsed_s: f64,
    /// Time the consumer spent waiting inside `next()`, in seconds.
    pub waited_s: f64,
    /// `waited_s / elapsed_s`: the share of the consumer's time lost to data.
    pub stall_fraction: f64,
    /// Mean and 99th-percentile wait per batch, in milliseconds.
    pub wait_mean_ms: f64,
    pub wait_p99_ms: f64,
    /// Batches and windows per second of wall time.
    pub batches_per_s: f64,
    pub samples_per_s: f64,
}

/// Per-batch waits, recorded by the loader's iterator.
#[derive(Clone, Debug, Default)]
pub struct Telemetry {
    started: Option<Instant>,
    last: Option<Instant>,
    waits: Vec<Duration>,
    samples: u64,
}

impl Telemetry {
    /// Records one batch: when `next()` was entered and how many windows it returned.
    pub fn record(&mut self, entered: Instant, samples: usize) {
        let now = Instant::now();
        self.started.get_or_insert(entered);
        self.last = Some(now);
        self.waits.push(now - entered);
        self.samples += samples as u64;
    }

    /// Forgets everything (e.g. after warm-up).
    pub fn reset(&mut self) {
        *self = Telemetry::default();
    }

    /// The summary so far.
    pub fn report(&self) -> TelemetryReport {
        let elapsed = match (self.started, self.last) {
            (Some(start), Some(last)) => (last - start).as_secs_f64(),
            _ => 0.0,
        };
        let waited: f64 = self.waits.iter().map(Duration::as_secs_f64).sum();
        let mut sorted: Vec<f64> = self.waits.iter().map(|w| w.as_secs_f64() * 1e3).collect();
        sorted.sort_by(f64::total_cmp);
        let batches = self.waits.len() as u64;
        let p99 = sorted.get(((sorted.len() as f64 * 0.99).ceil() as usize).saturating_sub(1)).copied().unwrap_or(0.0);
        TelemetryReport {
            batches,
            samples: self.samples,
            elapsed_s: elapsed,
            waited_s: waited,
            stall_fraction: if elapsed > 0.0 { (waited / elapsed).min(1.0) } else { 0.0 },
            wait_mean_ms: if batches > 0 { waited * 1e3 / batches as f64 } else { 0.0 },
            wait_p99_ms: p99,
            batches_per_s: if elapsed > 0.0 { batches as f64 / elapsed } else { 0.0 },
            samples_per_s: if elapsed > 0.0 { self.samples as f64 / elapsed } else { 0.0 },
        }
    }
}

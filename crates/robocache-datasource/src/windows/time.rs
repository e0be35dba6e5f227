//! Time windows on a policy clock (docs/datasets.md): a sample is an anchor time
//! `t` in an episode; its targets are `t + k / hz` for
//! `k = -history … horizon - 1`. Every stream is resampled onto the targets
//! by its channel kind (or, for causal windows, held from its samples at or
//! before each target) (the `robocache` facade does it, on the CPU or the
//! GPU); targets outside a stream's time range are masked.
//!
//! Anchors of an episode run from the earliest first sample to the latest
//! last sample of the chosen streams, every `1 / hz` seconds. A stream with
//! no samples in an episode (a ROS 2 topic missing from one bag) places no
//! anchor, and its every target in that episode is padding (masked).
//! An episode of more than [`super::MAX_EPISODE_WINDOWS`] anchors is an
//! error naming it, never an allocation of that size.

use crate::dataset::DatasetReader;
use crate::{Error, Result};

/// The policy clock and the window around each anchor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeWindowSpec {
    /// Policy rate in Hz: targets and anchors are `1 / hz` apart.
    pub hz: f64,
    /// Targets before the anchor.
    pub history: usize,
    /// Targets from the anchor on (the anchor is the first of them).
    pub horizon: usize,
    /// Causal windows: each stream's value at a target is computed only from
    /// its samples at or before the target (zero-order hold for every
    /// channel kind), so that a running policy can compute the same window
    /// live. Before a stream's first sample a target is padding and holds
    /// zeros; after its last the last sample is held and is valid. Off (the
    /// default): each channel by its kind (linear, slerp, hold) with the
    /// edges clamped, valid inside the stream's time range only
    /// (docs/loader.md, "Causal windows").
    pub causal: bool,
}

impl TimeWindowSpec {
    /// Targets per window: `history + horizon`.
    pub fn window_len(&self) -> usize {
        self.history + self.horizon
    }

    /// The target times of the window anchored at `anchor`.
    pub fn targets(&self, anchor: f64) -> Vec<f64> {
        (0..self.window_len()).map(|k| anchor + (k as f64 - self.history as f64) / self.hz).collect()
    }

    fn check(&self) -> Result<()> {
        if !(self.hz.is_finite() && self.hz > 0.0) {
            return Err(Error::Invalid(format!("policy rate {} Hz is not a positive rate", self.hz)));
        }
        if self.window_len() == 0 {
            return Err(Error::Invalid("history + horizon must be at least 1".into()));
        }
        Ok(())
    }
}

/// One sample: an episode and an anchor time in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeWindow {
    /// The sample number.
    pub sample: usize,
    /// The episode index in the dataset.
    pub episode: usize,
    /// The anchor time in seconds (the episode's own time base).
    pub anchor: f64,
}

#[derive(Clone, Debug)]
struct EpisodeAnchors {
    episode: usize,
    first_sample: usize,
    count: usize,
    start: f64,
}

/// The samples of a dataset on one policy clock.
#[derive(Clone, Debug)]
pub struct TimeWindows {
    spec: TimeWindowSpec,
    streams: Vec<String>,
    episodes: Vec<EpisodeAnchors>,
    total: usize,
}

impl TimeWindows {
    /// Numbers the anchors of every episode for `streams` (empty: every
    /// stream of each episode). Reads explicit timestamps, not data.
    pub fn new(dataset: &DatasetReader, streams: &[&str], spec: &TimeWindowSpec) -> Result<Self> {
        spec.check()?;
        let mut episodes = Vec::with_capacity(dataset.len());
        let mut total = 0usize;
        for (index, episode) in dataset.info().episodes.iter().enumerate() {
            let names: Vec<&str> = if streams.is_empty() {
                episode.streams.iter().map(|s| s.name.as_str()).collect()
            } else {
                streams.to_vec()
            };
            let (mut start, mut end) = (f64::INFINITY, f64::NEG_INFINITY);
            // A stream without steps in this episode (a topic missing from a
            // bag) places no anchor; its windows are padding.
            for name in names {
                if let Some((first, last)) = dataset.times(index, name)?.span() {
                    start = start.min(first);
                    end = end.max(last);
                }
            }
            // Anchors start + j / hz ≤ end; the epsilon keeps an anchor that
            // lands on `end` up to rounding. No stream with steps: no anchor.
            let count = match start <= end {
                true => {
                    let steps = ((end - start) * spec.hz + 1e-9).floor();
                    if !steps.is_finite() || steps >= super::MAX_EPISODE_WINDOWS as f64 {
                        let episode = &dataset.info().episodes[index];
                        return Err(Error::Invalid(format!(
                            "episode {index} (`{}`): its streams span {start} s to {end} s, {steps} windows at {} Hz \
                             (at most {} an episode): a timestamp far from the others?",
                            episode.name,
                            spec.hz,
                            super::MAX_EPISODE_WINDOWS
                        )));
                    }
                    steps as usize + 1
                }
                false => 0,
            };
            episodes.push(EpisodeAnchors { episode: index, first_sample: total, count, start });
            total += count;
        }
        Ok(TimeWindows { spec: *spec, streams: streams.iter().map(|s| (*s).to_owned()).collect(), episodes, total })
    }

    /// The policy clock.
    pub fn spec(&self) -> &TimeWindowSpec {
        &self.spec
    }

    /// The streams the anchors were laid out for (empty: all).
    pub fn streams(&self) -> &[String] {
        &self.streams
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.total
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The samples of `episode` (consecutive; empty when it has none).
    pub fn episode_samples(&self, episode: usize) -> std::ops::Range<usize> {
        self.episodes.iter().find(|e| e.episode == episode).map_or(0..0, |e| e.first_sample..e.first_sample + e.count)
    }

    /// Sample `sample`: its episode and anchor time.
    pub fn window(&self, sample: usize) -> Result<TimeWindow> {
        if sample >= self.total {
            return Err(Error::Invalid(format!("sample {sample} is out of range: there are {} samples", self.total)));
        }
        let at = self.episodes.partition_point(|e| e.first_sample + e.count <= sample);
        let episode = &self.episodes[at];
        let j = sample - episode.first_sample;
        Ok(TimeWindow { sample, episode: episode.episode, anchor: episode.start + j as f64 / self.spec.hz })
    }

    /// The target times of a sample.
    pub fn targets(&self, window: &TimeWindow) -> Vec<f64> {
        self.spec.targets(window.anchor)
    }
}

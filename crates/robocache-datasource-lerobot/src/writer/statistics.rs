//! The statistics LeRobot keeps per feature (`meta/stats.json`, and per
//! episode in `meta/episodes/`): exact over the frames written, NaN left
//! out; camera frames by the histogram of each channel's 256 levels.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::ListArray;
use arrow_array::{ArrayRef, Float64Array};
use arrow_schema::Field;

use super::arrow_error;
use crate::Result;

/// Per-feature values of every frame, for exact statistics: each channel's
/// values (vectors), or each colour channel's histogram of its 256 levels
/// (camera frames: exact too, at 2 KiB a channel however many pixels).
#[derive(Clone, Default)]
pub(super) struct Values {
    pub(super) channels: Vec<Vec<f64>>,
    pub(super) levels: Vec<[u64; 256]>,
    /// Frames counted (LeRobot's `count`).
    pub(super) frames: usize,
}

/// The `q` quantile of `n` sorted values, `at(i)` the `i`-th: linear between
/// order statistics, as NumPy's default.
fn quantile(n: usize, q: f64, at: impl Fn(usize) -> f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let position = q * (n - 1) as f64;
    let (low, high) = (position.floor() as usize, position.ceil() as usize);
    at(low) + (position - low as f64) * (at(high) - at(low))
}

const QUANTILES: [(&str, f64); 5] = [("q01", 0.01), ("q10", 0.10), ("q50", 0.50), ("q90", 0.90), ("q99", 0.99)];

impl Values {
    /// Adds another part's values (channel by channel).
    pub(super) fn extend(&mut self, other: &Values) {
        if self.channels.is_empty() && self.levels.is_empty() {
            *self = other.clone();
            return;
        }
        self.frames += other.frames;
        for (a, b) in self.channels.iter_mut().zip(&other.channels) {
            a.extend_from_slice(b);
        }
        for (a, b) in self.levels.iter_mut().zip(&other.levels) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
    }

    pub(super) fn stats(&self) -> BTreeMap<&'static str, Vec<f64>> {
        let mut out: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
        let mut push = |name: &'static str, value: f64| out.entry(name).or_default().push(value);
        for values in &self.channels {
            // NaN is not a value (a joint before its first reading): the
            // statistics are over the rest; a channel of none has zeros
            // here, and a feature NaN throughout is refused at `finish`.
            let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
            sorted.sort_by(f64::total_cmp);
            let n = sorted.len().max(1) as f64;
            let mean = sorted.iter().sum::<f64>() / n;
            let variance = sorted.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            push("min", sorted.first().copied().unwrap_or(0.0));
            push("max", sorted.last().copied().unwrap_or(0.0));
            push("mean", mean);
            push("std", variance.sqrt());
            for (name, q) in QUANTILES {
                push(name, quantile(sorted.len(), q, |i| sorted[i]));
            }
        }
        for histogram in &self.levels {
            let n: u64 = histogram.iter().sum();
            let level = |k: usize| k as f64 / 255.0;
            let total = n.max(1) as f64;
            let mean = histogram.iter().enumerate().map(|(k, &c)| c as f64 * level(k)).sum::<f64>() / total;
            let variance = histogram
                .iter()
                .enumerate()
                .map(|(k, &c)| c as f64 * (level(k) - mean) * (level(k) - mean))
                .sum::<f64>()
                / total;
            // The i-th smallest value: the level whose cumulative count passes i.
            let at = |i: usize| {
                let mut seen = 0u64;
                for (k, &c) in histogram.iter().enumerate() {
                    seen += c;
                    if seen > i as u64 {
                        return level(k);
                    }
                }
                1.0
            };
            push("min", histogram.iter().position(|&c| c > 0).map_or(0.0, level));
            push("max", histogram.iter().rposition(|&c| c > 0).map_or(0.0, level));
            push("mean", mean);
            push("std", variance.sqrt());
            for (name, q) in QUANTILES {
                push(name, quantile(n as usize, q, at));
            }
        }
        out
    }

    pub(super) fn count(&self) -> usize {
        self.frames
    }

    /// The first channel that has frames but is NaN in every one.
    pub(super) fn channel_of_nan(&self) -> Option<usize> {
        self.channels.iter().position(|c| !c.is_empty() && c.iter().all(|v| v.is_nan()))
    }

    /// One channel of `values` (one value a frame).
    pub(super) fn of_column(values: impl Iterator<Item = f64>) -> Values {
        let channel: Vec<f64> = values.collect();
        Values { frames: channel.len(), channels: vec![channel], levels: Vec::new() }
    }
}

/// Each colour channel's histogram of its 256 levels over one RGB frame.
pub(super) fn frame_levels(frame: &[u8]) -> Vec<[u64; 256]> {
    let mut levels = vec![[0u64; 256]; 3];
    for pixel in frame.chunks_exact(3) {
        for (histogram, &level) in levels.iter_mut().zip(pixel) {
            histogram[usize::from(level)] += 1;
        }
    }
    levels
}

pub(super) fn add_levels(mut total: Vec<[u64; 256]>, more: &[[u64; 256]]) -> Vec<[u64; 256]> {
    for (t, m) in total.iter_mut().zip(more) {
        t.iter_mut().zip(m).for_each(|(a, b)| *a += b);
    }
    total
}

/// Per episode, per channel `c`: `[[v]]` (LeRobot's image statistics shape).
pub(super) fn nested_image_stats(rows: Vec<Vec<f64>>) -> Result<ListArray> {
    let wrap = |inner: ArrayRef, lengths: Vec<usize>| -> Result<ListArray> {
        let item = Arc::new(Field::new("element", inner.data_type().clone(), true));
        let mut offsets = arrow_array::builder::OffsetBufferBuilder::new(lengths.len());
        for length in lengths {
            offsets.push_length(length);
        }
        ListArray::try_new(item, offsets.finish(), inner, None).map_err(arrow_error)
    };
    let values: Vec<f64> = rows.iter().flatten().copied().collect();
    let count = values.len();
    let innermost = wrap(Arc::new(Float64Array::from(values)), vec![1; count])?;
    let middle = wrap(Arc::new(innermost), vec![1; count])?;
    wrap(Arc::new(middle), rows.iter().map(Vec::len).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_statistics_from_a_histogram_equal_those_of_the_values() {
        let mut state = 7u64;
        let pixels: Vec<u8> = (0..3 * 1001)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 56) as u8 / 3 + 20
            })
            .collect();
        let mut histogram = Values { levels: vec![[0u64; 256]; 3], frames: 1, ..Values::default() };
        let mut listed = Values { channels: vec![Vec::new(); 3], frames: 1, ..Values::default() };
        for pixel in pixels.chunks_exact(3) {
            for c in 0..3 {
                histogram.levels[c][usize::from(pixel[c])] += 1;
                listed.channels[c].push(f64::from(pixel[c]) / 255.0);
            }
        }
        let (a, b) = (histogram.stats(), listed.stats());
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (name, values) in &a {
            for (x, y) in values.iter().zip(&b[name]) {
                assert!((x - y).abs() < 1e-12, "{name}: {x} != {y}");
            }
        }
        assert_eq!(a["q50"], b["q50"], "quantiles are order statistics: exact");
    }
}

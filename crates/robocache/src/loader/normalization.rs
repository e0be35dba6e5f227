//! Normalization statistics per stream and channel — mean, standard
//! deviation, min, max, 1st and 99th percentile — computed in one pass over
//! a dataset, saved as JSON, and applied on request to the continuous
//! channels (quaternions, angles, discrete and image channels are left as
//! they are: scaling them would break their resampling).
//!
//! NaN and ±inf are not values: a joint before its first reading, a
//! non-dense point cloud's empty points, a sensor's overflow. Statistics are
//! over each channel's finite values, counted per channel (`counts`); a
//! channel with none, or whose statistics overflow, is an error naming the
//! stream and channel, never a NaN or infinite mean (which would make every
//! normalised value NaN) or a `null` in the saved JSON. Statistics read
//! back ([`Normalization::load`], a spec) are checked the same way
//! ([`StreamStatistics::check`]).

use std::collections::BTreeMap;
use std::path::Path;

use robocache_cpu::HostVec;
use robocache_datasets::{ChannelKind, Dataset, StreamKind};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// How statistics map values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NormalizationMode {
    /// `(x - mean) / std` (std floored at 1e-6).
    #[default]
    ZScore,
    /// `[min, max]` onto `[-1, 1]` (diffusion policies' convention).
    MinMax,
    /// `[p01, p99]` onto `[-1, 1]`, robust to outliers.
    Percentile,
}

/// The statistics of one stream, per channel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamStatistics {
    /// Rows (values per channel) that went in, NaN and ±inf included.
    pub count: u64,
    /// Per channel: its finite values, which its statistics are over
    /// (empty in files saved before it was kept: `count` each).
    #[serde(default)]
    pub counts: Vec<u64>,
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    pub min: Vec<f64>,
    pub max: Vec<f64>,
    pub p01: Vec<f64>,
    pub p99: Vec<f64>,
}

impl StreamStatistics {
    /// The statistics of `columns` (one `Vec` of values per channel, all of
    /// one length): population mean and standard deviation, exact extremes
    /// and percentiles (linear between order statistics, NumPy's default),
    /// each channel over its values that are not NaN. A channel with rows
    /// but no such value is an error naming the channel.
    pub fn of_columns(columns: Vec<Vec<f64>>) -> Result<Self> {
        Self::of_values(columns).map_err(invalid)
    }

    /// [`StreamStatistics::of_columns`], its error as text.
    fn of_values(columns: Vec<Vec<f64>>) -> std::result::Result<Self, String> {
        let mut stats = StreamStatistics {
            count: columns.first().map_or(0, |c| c.len() as u64),
            counts: Vec::new(),
            mean: Vec::new(),
            std: Vec::new(),
            min: Vec::new(),
            max: Vec::new(),
            p01: Vec::new(),
            p99: Vec::new(),
        };
        for (channel, mut column) in columns.into_iter().enumerate() {
            if column.is_empty() {
                continue;
            }
            column.retain(|v| v.is_finite());
            if column.is_empty() {
                return Err(format!("channel {channel} is NaN or ±inf in every row: it has no statistics"));
            }
            stats.counts.push(column.len() as u64);
            let n = column.len() as f64;
            let mean = column.iter().sum::<f64>() / n;
            let variance = column.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            column.sort_by(f64::total_cmp);
            stats.mean.push(mean);
            stats.std.push(variance.sqrt());
            stats.min.push(column[0]);
            stats.max.push(column[column.len() - 1]);
            stats.p01.push(percentile(&column, 0.01));
            stats.p99.push(percentile(&column, 0.99));
            let last = stats.mean.len() - 1;
            if !(mean.is_finite()
                && stats.std[last].is_finite()
                && stats.p01[last].is_finite()
                && stats.p99[last].is_finite())
            {
                return Err(format!(
                    "channel {channel}'s values (from {} to {}) are too large for statistics: its mean or spread overflows",
                    stats.min[last], stats.max[last]
                ));
            }
        }
        Ok(stats)
    }

    /// Checks statistics read back: one value per channel in every field
    /// (`counts` empty or one per channel), each finite, spreads not
    /// negative, each minimum at most its maximum. The error says which
    /// field and channel.
    pub fn check(&self) -> std::result::Result<(), String> {
        let channels = self.mean.len();
        let fields = [
            ("mean", &self.mean),
            ("std", &self.std),
            ("min", &self.min),
            ("max", &self.max),
            ("p01", &self.p01),
            ("p99", &self.p99),
        ];
        for (name, values) in fields {
            if values.len() != channels {
                return Err(format!("`{name}` has {} values, `mean` {channels}", values.len()));
            }
            if let Some(c) = values.iter().position(|v| !v.is_finite()) {
                return Err(format!("`{name}` of channel {c} is {}: not a finite number", values[c]));
            }
        }
        if !self.counts.is_empty() && self.counts.len() != channels {
            return Err(format!("`counts` has {} values, `mean` {channels}", self.counts.len()));
        }
        if let Some(c) = self.std.iter().position(|&v| v < 0.0) {
            return Err(format!("`std` of channel {c} is negative"));
        }
        if let Some(c) = (0..channels).find(|&c| self.min[c] > self.max[c]) {
            return Err(format!("channel {c}'s `min` {} is above its `max` {}", self.min[c], self.max[c]));
        }
        Ok(())
    }

    /// The values channel `c`'s statistics are over.
    pub fn channel_count(&self, c: usize) -> u64 {
        self.counts.get(c).copied().unwrap_or(self.count)
    }

    /// The statistics of streams side by side along their channels (a
    /// mixture key concatenating them): each channel keeps its own; the
    /// count is the first part's (the parts may have been recorded at
    /// different rates: a group merge weighs every channel by it).
    pub fn side_by_side(parts: &[&StreamStatistics]) -> StreamStatistics {
        let join = |field: fn(&StreamStatistics) -> &Vec<f64>| parts.iter().flat_map(|p| field(p).clone()).collect();
        let counts =
            parts.iter().flat_map(|p| (0..p.mean.len()).map(|c| p.channel_count(c)).collect::<Vec<_>>()).collect();
        StreamStatistics {
            count: parts.first().map_or(0, |p| p.count),
            counts,
            mean: join(|p| &p.mean),
            std: join(|p| &p.std),
            min: join(|p| &p.min),
            max: join(|p| &p.max),
            p01: join(|p| &p.p01),
            p99: join(|p| &p.p99),
        }
    }

    /// The statistics of a constant row over `count` steps: its values as
    /// mean, extremes and percentiles, no spread.
    pub fn constant(values: &[f64], count: u64) -> StreamStatistics {
        StreamStatistics {
            count,
            counts: vec![count; values.len()],
            mean: values.to_vec(),
            std: vec![0.0; values.len()],
            min: values.to_vec(),
            max: values.to_vec(),
            p01: values.to_vec(),
            p99: values.to_vec(),
        }
    }

    /// The statistics of several datasets' values of one stream together
    /// (a normalisation group of a mixture), from each one's own: counts
    /// added; means weighted by count; variances pooled (each part's
    /// variance plus its mean's squared distance to the merged mean,
    /// weighted by count), which equals the variance of the concatenated
    /// values; extremes of the extremes. Percentiles cannot be merged
    /// exactly from percentiles: each part's distribution is taken as
    /// linear between its min, p01, p99 and max, and the merged p01 and p99
    /// are where the count-weighted mixture of those reaches 1% and 99%
    /// (exact for one part; within the parts' own percentiles otherwise).
    /// Parts without values are left out; channel counts must agree.
    pub fn merge(parts: &[&StreamStatistics]) -> Result<StreamStatistics> {
        let parts: Vec<&StreamStatistics> = parts.iter().copied().filter(|p| p.count > 0).collect();
        let Some(first) = parts.first() else {
            return Err(invalid("no statistics to merge (every part is empty)".into()));
        };
        let channels = first.mean.len();
        for (i, part) in parts.iter().enumerate() {
            let lengths = [&part.mean, &part.std, &part.min, &part.max, &part.p01, &part.p99].map(|v| v.len());
            if lengths.iter().any(|&n| n != channels) {
                return Err(invalid(format!(
                    "statistics {i} have {lengths:?} values per field, the first have {channels} channels"
                )));
            }
        }
        let count: u64 = parts.iter().map(|p| p.count).sum();
        let mut merged = StreamStatistics {
            count,
            counts: Vec::with_capacity(channels),
            mean: Vec::with_capacity(channels),
            std: Vec::with_capacity(channels),
            min: Vec::with_capacity(channels),
            max: Vec::with_capacity(channels),
            p01: Vec::with_capacity(channels),
            p99: Vec::with_capacity(channels),
        };
        for c in 0..channels {
            // Each part weighs by its values of this channel (NaN left out).
            let weight = |p: &StreamStatistics| p.channel_count(c) as f64;
            let channel_count: u64 = parts.iter().map(|p| p.channel_count(c)).sum();
            let total = channel_count as f64;
            let mean = parts.iter().map(|p| weight(p) * p.mean[c]).sum::<f64>() / total;
            let variance = parts
                .iter()
                .map(|p| weight(p) * (p.std[c] * p.std[c] + (p.mean[c] - mean) * (p.mean[c] - mean)))
                .sum::<f64>()
                / total;
            merged.counts.push(channel_count);
            merged.mean.push(mean);
            merged.std.push(variance.max(0.0).sqrt());
            merged.min.push(parts.iter().map(|p| p.min[c]).fold(f64::INFINITY, f64::min));
            merged.max.push(parts.iter().map(|p| p.max[c]).fold(f64::NEG_INFINITY, f64::max));
            merged.p01.push(mixture_quantile(&parts, c, 0.01));
            merged.p99.push(mixture_quantile(&parts, c, 0.99));
        }
        Ok(merged)
    }
}

/// Where the count-weighted mixture of the parts' distributions of channel
/// `c` (each linear between its min, p01, p99 and max) reaches `q`.
fn mixture_quantile(parts: &[&StreamStatistics], c: usize, q: f64) -> f64 {
    if let [one] = parts {
        return if q == 0.01 { one.p01[c] } else { one.p99[c] };
    }
    let cdf = |p: &StreamStatistics, x: f64| -> f64 {
        let knots = [(p.min[c], 0.0), (p.p01[c], 0.01), (p.p99[c], 0.99), (p.max[c], 1.0)];
        if x < knots[0].0 {
            return 0.0;
        }
        for pair in knots.windows(2) {
            let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
            if x <= x1 {
                return if x1 > x0 { y0 + (x - x0) / (x1 - x0) * (y1 - y0) } else { y1 };
            }
        }
        1.0
    };
    let total = parts.iter().map(|p| p.channel_count(c) as f64).sum::<f64>();
    let mixture = |x: f64| parts.iter().map(|p| p.channel_count(c) as f64 * cdf(p, x)).sum::<f64>() / total;
    let (mut low, mut high) = (
        parts.iter().map(|p| p.min[c]).fold(f64::INFINITY, f64::min),
        parts.iter().map(|p| p.max[c]).fold(f64::NEG_INFINITY, f64::max),
    );
    for _ in 0..200 {
        let middle = low + (high - low) / 2.0;
        if middle <= low || middle >= high {
            break;
        }
        if mixture(middle) < q {
            low = middle;
        } else {
            high = middle;
        }
    }
    high
}

/// Statistics of several streams and the mode to apply them in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Normalization {
    pub mode: NormalizationMode,
    pub streams: BTreeMap<String, StreamStatistics>,
}

impl Normalization {
    /// Reads every episode of `streams` once and computes their statistics
    /// (exact percentiles, linear between order statistics as NumPy's default).
    pub fn compute(dataset: &Dataset, streams: &[&str], mode: NormalizationMode) -> Result<Self> {
        let mut out = BTreeMap::new();
        for &name in streams {
            let mut columns: Vec<Vec<f64>> = Vec::new();
            for episode in 0..dataset.len() {
                let (_, info) = dataset.stream(episode, name)?;
                if info.is_image() {
                    return Err(invalid(format!(
                        "stream `{name}` is an image stream: statistics are for low-dimensional streams"
                    )));
                }
                let channels = info.channels().max(1);
                if columns.is_empty() {
                    columns = vec![Vec::new(); channels];
                }
                if columns.len() != channels {
                    return Err(invalid(format!("stream `{name}` changes its channel count between episodes")));
                }
                let values = match dataset.read_stream(episode, name)? {
                    HostVec::F64(v) => v,
                    other => other.as_slice().to_f64_vec(),
                };
                for (i, v) in values.into_iter().enumerate() {
                    columns[i % channels].push(v);
                }
            }
            let stats = StreamStatistics::of_values(columns).map_err(|e| invalid(format!("stream `{name}`: {e}")))?;
            out.insert(name.to_owned(), stats);
        }
        Ok(Normalization { mode, streams: out })
    }

    /// [`Normalization::compute`] of the low-dimensional streams among
    /// `streams` (the ones a loader normalizes: camera streams are left as
    /// they are).
    pub fn compute_low_dimensional(dataset: &Dataset, streams: &[&str], mode: NormalizationMode) -> Result<Self> {
        let mut low = Vec::with_capacity(streams.len());
        for &name in streams {
            if !dataset.stream(0, name)?.1.is_image() {
                low.push(name);
            }
        }
        Self::compute(dataset, &low, mode)
    }

    /// The statistics of several datasets together (a normalisation group
    /// of a mixture: one embodiment's datasets), stream by stream, each
    /// merged as [`StreamStatistics::merge`] says; a stream some parts lack
    /// is merged over the parts that have it. The parts' modes must agree.
    pub fn merge(parts: &[&Normalization]) -> Result<Normalization> {
        let Some(first) = parts.first() else {
            return Err(invalid("no statistics to merge".into()));
        };
        if let Some(other) = parts.iter().find(|p| p.mode != first.mode) {
            return Err(invalid(format!(
                "statistics to merge are in modes {:?} and {:?}: one mode per group",
                first.mode, other.mode
            )));
        }
        let names: std::collections::BTreeSet<&String> = parts.iter().flat_map(|p| p.streams.keys()).collect();
        let mut streams = BTreeMap::new();
        for name in names {
            let of_stream: Vec<&StreamStatistics> = parts.iter().filter_map(|p| p.streams.get(name)).collect();
            let merged = StreamStatistics::merge(&of_stream).map_err(|e| invalid(format!("stream `{name}`: {e}")))?;
            streams.insert(name.clone(), merged);
        }
        Ok(Normalization { mode: first.mode, streams })
    }

    /// Writes the statistics as JSON.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(|e| invalid(e.to_string()))?;
        std::fs::write(path, text)
            .map_err(|error| Error::Dataset(robocache_datasets::Error::Io { file: path.to_path_buf(), error }))
    }

    /// Reads statistics written by [`Normalization::save`].
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| Error::Dataset(robocache_datasets::Error::Io { file: path.to_path_buf(), error }))?;
        let stats: Normalization = serde_json::from_str(&text)
            .map_err(|e| invalid(format!("{}: not normalization statistics: {e}", path.display())))?;
        for (name, statistics) in &stats.streams {
            statistics.check().map_err(|e| invalid(format!("{}: stream `{name}`: {e}", path.display())))?;
        }
        Ok(stats)
    }

    /// Normalizes the continuous channels of `rows` (`[N, channels]`) of stream `name` in place.
    pub fn apply(&self, name: &str, kind: &StreamKind, rows: &mut [f32], channels: usize) -> Result<()> {
        let Some(stats) = self.streams.get(name) else { return Ok(()) };
        if stats.mean.len() != channels {
            return Err(invalid(format!(
                "statistics of `{name}` have {} channels, the stream has {channels}",
                stats.mean.len()
            )));
        }
        let continuous = continuous_channels(kind, channels);
        let (scale, offset): (Vec<f64>, Vec<f64>) = (0..channels)
            .map(|c| {
                if !continuous[c] {
                    return (1.0, 0.0);
                }
                let (low, high) = match self.mode {
                    NormalizationMode::ZScore => return (1.0 / stats.std[c].max(1e-6), -stats.mean[c]),
                    NormalizationMode::MinMax => (stats.min[c], stats.max[c]),
                    NormalizationMode::Percentile => (stats.p01[c], stats.p99[c]),
                };
                let half = ((high - low) / 2.0).max(1e-6);
                (1.0 / half, -(low + high) / 2.0)
            })
            .unzip();
        for row in rows.chunks_exact_mut(channels) {
            for c in 0..channels {
                row[c] = ((f64::from(row[c]) + offset[c]) * scale[c]) as f32;
            }
        }
        Ok(())
    }
}

pub(crate) fn continuous_channels(kind: &StreamKind, channels: usize) -> Vec<bool> {
    match kind {
        StreamKind::All(k) => vec![*k == ChannelKind::Continuous; channels],
        StreamKind::Groups(groups) => {
            let mut out = vec![false; channels];
            for (range, k) in groups {
                for c in range.clone().filter(|&c| c < channels) {
                    out[c] = *k == ChannelKind::Continuous;
                }
            }
            out
        }
    }
}

/// The `q` quantile of sorted values, linear between order statistics.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let position = q * (sorted.len() - 1) as f64;
    let lower = position.floor() as usize;
    let upper = (lower + 1).min(sorted.len() - 1);
    sorted[lower] + (position - lower as f64) * (sorted[upper] - sorted[lower])
}

fn invalid(message: String) -> Error {
    Error::Dataset(robocache_datasets::Error::Invalid(message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use robocache_cpu::noise::XorShift;

    /// `channels` columns of `len` values around `offset` (spread `scale`).
    fn columns(seed: u64, channels: usize, len: usize, offset: f64, scale: f64) -> Vec<Vec<f64>> {
        let mut rng = XorShift::new(seed);
        (0..channels).map(|_| (0..len).map(|_| offset + scale * f64::from(rng.next_signed_unit())).collect()).collect()
    }

    #[test]
    fn merged_statistics_equal_those_of_the_concatenated_values() {
        let parts = [columns(1, 3, 500, 0.0, 1.0), columns(2, 3, 2_000, 5.0, 0.5), columns(3, 3, 37, -2.0, 4.0)];
        let each: Vec<StreamStatistics> =
            parts.iter().map(|c| StreamStatistics::of_columns(c.clone()).unwrap()).collect();
        let merged = StreamStatistics::merge(&each.iter().collect::<Vec<_>>()).unwrap();
        let concatenated: Vec<Vec<f64>> =
            (0..3).map(|c| parts.iter().flat_map(|p| p[c].iter().copied()).collect()).collect();
        let whole = StreamStatistics::of_columns(concatenated).unwrap();
        assert_eq!(merged.count, whole.count);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
        for c in 0..3 {
            assert!(close(merged.mean[c], whole.mean[c]), "mean {c}: {} vs {}", merged.mean[c], whole.mean[c]);
            assert!(close(merged.std[c], whole.std[c]), "std {c}: {} vs {}", merged.std[c], whole.std[c]);
            assert_eq!((merged.min[c], merged.max[c]), (whole.min[c], whole.max[c]));
            // Percentiles are approximated: inside the parts' own, and near the truth here.
            let (low, high) = (each.iter().map(|e| e.p01[c]).fold(f64::INFINITY, f64::min), whole.p99[c] + 1.0);
            assert!(merged.p01[c] >= low && merged.p01[c] <= high, "p01 {c}: {}", merged.p01[c]);
            assert!((merged.p99[c] - whole.p99[c]).abs() < 0.1, "p99 {c}: {} vs {}", merged.p99[c], whole.p99[c]);
        }
        // One part merges to itself, percentiles included.
        assert_eq!(StreamStatistics::merge(&[&each[1]]).unwrap(), each[1]);
    }

    #[test]
    fn normalizations_merge_stream_by_stream() {
        let stats = |seed| StreamStatistics::of_columns(columns(seed, 2, 100, 0.0, 1.0)).unwrap();
        let a = Normalization {
            mode: NormalizationMode::ZScore,
            streams: [("action".to_owned(), stats(1)), ("state".to_owned(), stats(2))].into(),
        };
        let b = Normalization { mode: NormalizationMode::ZScore, streams: [("action".to_owned(), stats(3))].into() };
        let merged = Normalization::merge(&[&a, &b]).unwrap();
        assert_eq!(merged.streams["action"].count, 200);
        assert_eq!(merged.streams["state"], a.streams["state"], "a stream one part has is that part's");
        let c = Normalization { mode: NormalizationMode::MinMax, ..b.clone() };
        assert!(Normalization::merge(&[&a, &c]).unwrap_err().to_string().contains("modes"));
        let wide = Normalization {
            mode: NormalizationMode::ZScore,
            streams: [("action".to_owned(), StreamStatistics::of_columns(columns(4, 3, 10, 0.0, 1.0)).unwrap())].into(),
        };
        assert!(Normalization::merge(&[&a, &wide]).unwrap_err().to_string().contains("action"));
        assert!(Normalization::merge(&[]).is_err());
    }

    #[test]
    fn nan_is_not_a_value_and_a_channel_of_nan_is_named() {
        // A joint NaN before its first reading: its statistics are over the rest.
        let stats =
            StreamStatistics::of_columns(vec![vec![1.0, 2.0, 3.0, 4.0], vec![f64::NAN, f64::NAN, 2.0, 4.0]]).unwrap();
        assert_eq!((stats.count, stats.counts.clone()), (4, vec![4, 2]));
        assert_eq!((stats.mean[1], stats.std[1], stats.min[1], stats.max[1]), (3.0, 1.0, 2.0, 4.0));
        let json = serde_json::to_string(&stats).unwrap();
        assert!(!json.contains("null"), "{json}");
        // Merged, each part weighs by its values of the channel.
        let other = StreamStatistics::of_columns(vec![vec![5.0, 5.0], vec![6.0, 6.0]]).unwrap();
        let merged = StreamStatistics::merge(&[&stats, &other]).unwrap();
        assert_eq!(merged.counts, [6, 4]);
        assert_eq!(merged.mean[1], (2.0 + 4.0 + 6.0 + 6.0) / 4.0);
        let error = StreamStatistics::of_columns(vec![vec![1.0], vec![f64::NAN]]).unwrap_err().to_string();
        assert!(error.contains("channel 1 is NaN or ±inf in every row"), "{error}");
    }

    #[test]
    fn infinities_are_left_out_as_nan_is_and_every_saved_statistic_loads() {
        // A sensor's overflow reading ±inf: left out of its channel, counted.
        let stats = StreamStatistics::of_columns(vec![
            vec![1.0, f64::INFINITY, 3.0, f64::NEG_INFINITY],
            vec![0.0, 1.0, 2.0, 3.0],
        ])
        .unwrap();
        assert_eq!((stats.count, stats.counts.clone()), (4, vec![2, 4]));
        assert_eq!((stats.mean[0], stats.min[0], stats.max[0]), (2.0, 1.0, 3.0));
        let json = serde_json::to_string(&stats).unwrap();
        assert!(!json.contains("null"), "{json}");
        let error = StreamStatistics::of_columns(vec![vec![f64::INFINITY, f64::NEG_INFINITY]]).unwrap_err();
        assert!(error.to_string().contains("channel 0 is NaN or ±inf"), "{error}");
        // Finite values whose spread overflows are refused, naming the channel.
        let error = StreamStatistics::of_columns(vec![vec![0.0], vec![-1.7e308, 1.7e308]]).unwrap_err();
        assert!(error.to_string().contains("channel 1") && error.to_string().contains("too large"), "{error}");
        // What is read back is checked: a `null` (NaN written by serde_json) or a short field.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats.json");
        let normalization =
            Normalization { mode: NormalizationMode::ZScore, streams: [("joint".to_owned(), stats)].into() };
        normalization.save(&path).unwrap();
        assert_eq!(Normalization::load(&path).unwrap(), normalization);
        let text = std::fs::read_to_string(&path).unwrap();
        let nulled = text.replacen("\"std\": [", "\"std\": [null, ", 1);
        std::fs::write(&path, &nulled).unwrap();
        assert!(Normalization::load(&path).is_err());
        let mut short = normalization.clone();
        short.streams.get_mut("joint").unwrap().p99.pop();
        assert!(short.streams["joint"].check().unwrap_err().contains("`p99` has 1 values"));
    }
}

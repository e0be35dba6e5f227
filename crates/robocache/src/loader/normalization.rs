//! Normalization statistics per stream and channel — mean, standard
//! deviation, min, max, 1st and 99th percentile — computed in one pass over
//! a dataset, saved as JSON, and applied on request to the continuous
//! channels (quaternions, angles, discrete and image channels are left as
//! they are: scaling them would break their resampling).

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
pub struct StreamStatistics {
    /// Values per channel that went in.
    pub count: u64,
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    pub min: Vec<f64>,
    pub max: Vec<f64>,
    pub p01: Vec<f64>,
    pub p99: Vec<f64>,
}

/// Statistics of several streams and the mode to apply them in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
            let mut stats = StreamStatistics {
                count: columns.first().map_or(0, |c| c.len() as u64),
                mean: Vec::new(),
                std: Vec::new(),
                min: Vec::new(),
                max: Vec::new(),
                p01: Vec::new(),
                p99: Vec::new(),
            };
            for mut column in columns {
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
            }
            out.insert(name.to_owned(), stats);
        }
        Ok(Normalization { mode, streams: out })
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
        serde_json::from_str(&text)
            .map_err(|e| invalid(format!("{}: not normalization statistics: {e}", path.display())))
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

fn continuous_channels(kind: &StreamKind, channels: usize) -> Vec<bool> {
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

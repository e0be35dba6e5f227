//! What every layout shares: turning the numeric datasets of an episode
//! group into [`StreamInfo`]s, with their own clock when the file gives one.
//!
//! A stream dataset `[N, ...]` is on the episode's step clock unless it
//! carries one of these attributes (any layout):
//! - `rate_hz` (and optionally `start_s`): its own uniform clock;
//! - `timestamps`: the path, relative to the episode group, of a 1-D dataset
//!   of its times in seconds.
//!
//! A `robocache_kind` attribute (`"continuous"`, `"0..3:continuous,3..6:angle"`)
//! overrides the kind the layout would infer.

use hdf5::Dataset;

use crate::hdf5_file::Hdf5File;
use robocache_datasource::model::{StreamInfo, StreamKind, Timeline};
use robocache_datasource::stream_shape::StreamShape;
use robocache_datasource::{Error, Result};

/// The step clock of an episode: its length and how its steps are timed.
#[derive(Clone, Debug)]
pub(crate) struct StepClock {
    pub len: usize,
    pub timeline: Timeline,
}

/// Describes the dataset at `group/key` as a stream named `name`, checking
/// its rank, dtype, kind and length against the step clock.
pub(crate) fn describe_stream(
    file: &Hdf5File,
    episode: &str,
    group: &str,
    key: &str,
    name: &str,
    clock: &StepClock,
    default_kind: impl Fn(&StreamShape<'_>) -> StreamKind,
) -> Result<StreamInfo> {
    let path = format!("{group}/{key}");
    let dataset = file.dataset(&path)?;
    let dtype = file.dtype(&dataset, &path)?;
    let shape = dataset.shape();
    let Some((&len, step_shape)) = shape.split_first() else {
        return Err(file.layout_error(&path, "is a scalar; a stream needs a leading step dimension [N, ...]"));
    };
    let step_shape = step_shape.to_vec();
    let channels: usize = step_shape.iter().product();
    let kind = match file.attr_string(&dataset, "robocache_kind")? {
        Some(text) => {
            text.parse::<StreamKind>().map_err(|e| file.layout_error(&format!("{path}@robocache_kind"), e))?
        }
        None => default_kind(&StreamShape { key, dtype, step_shape: &step_shape }),
    };
    kind.check(channels).map_err(|e| file.layout_error(&path, e))?;
    let timeline = own_timeline(file, &dataset, &path, group, len)?;
    if let Some(Timeline::Explicit { key }) = &timeline {
        read_timestamps(file, episode, key)?;
    }
    let timeline = match timeline {
        Some(timeline) => timeline,
        None => {
            if len != clock.len {
                return Err(file.layout_error(
                    &path,
                    format!(
                        "has {len} rows but episode `{episode}` has {} steps (lengths inside an episode must agree, or the stream needs its own `rate_hz` or `timestamps` attribute)",
                        clock.len
                    ),
                ));
            }
            clock.timeline.clone()
        }
    };
    if len == 0 {
        return Err(file.layout_error(&path, format!("has no rows (episode `{episode}`)")));
    }
    Ok(StreamInfo { name: name.to_owned(), dtype, step_shape, len, kind, timeline, source: path })
}

/// A stream's own clock from its `rate_hz`/`start_s` or `timestamps` attributes.
fn own_timeline(file: &Hdf5File, dataset: &Dataset, path: &str, group: &str, len: usize) -> Result<Option<Timeline>> {
    if let Some(hz) = file.attr_f64(dataset, "rate_hz")? {
        if !(hz.is_finite() && hz > 0.0) {
            return Err(file.layout_error(&format!("{path}@rate_hz"), format!("is {hz}, not a positive rate")));
        }
        let start = file.attr_f64(dataset, "start_s")?.unwrap_or(0.0);
        if !start.is_finite() {
            return Err(file.layout_error(&format!("{path}@start_s"), "is not finite"));
        }
        return Ok(Some(Timeline::Uniform { start, hz }));
    }
    if let Some(key) = file.attr_string(dataset, "timestamps")? {
        let times_path = format!("{group}/{key}");
        let times = file.dataset(&times_path)?;
        if times.shape() != [len] {
            return Err(file.layout_error(
                &times_path,
                format!("has shape {:?}; the timestamps of `{path}` must be [{len}]", times.shape()),
            ));
        }
        return Ok(Some(Timeline::Explicit { key: times_path }));
    }
    Ok(None)
}

/// Every numeric dataset below `group` (recursively), as keys relative to
/// it, sorted by name; string datasets and `skip` are left out.
pub(crate) fn numeric_datasets(file: &Hdf5File, group: &str, skip: &[&str]) -> Result<Vec<String>> {
    let mut keys = Vec::new();
    collect(file, group, "", skip, &mut keys)?;
    keys.sort();
    Ok(keys)
}

fn collect(file: &Hdf5File, root: &str, prefix: &str, skip: &[&str], keys: &mut Vec<String>) -> Result<()> {
    let below = |key: &str| match root.ends_with('/') {
        true => format!("{root}{key}"),
        false => format!("{root}/{key}"),
    };
    let path = if prefix.is_empty() { root.to_owned() } else { below(prefix) };
    let group = file.group(&path)?;
    for name in file.member_names(&group, &path)? {
        let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        if skip.contains(&key.as_str()) {
            continue;
        }
        let full = below(&key);
        if let Ok(dataset) = group.dataset(&name) {
            match file.dtype(&dataset, &full) {
                Ok(_) => keys.push(key),
                // Strings (instructions, names) are metadata, read by the layouts that use them.
                Err(e) => tracing::debug!("{e}: not a stream"),
            }
        } else if group.group(&name).is_ok() {
            collect(file, root, &key, skip, keys)?;
        }
    }
    Ok(())
}

/// The keys (relative to `group`) that a stream's `timestamps` attribute
/// names: they hold times, not streams.
pub(crate) fn referenced_timestamps(file: &Hdf5File, group: &str, keys: &[String]) -> Result<Vec<String>> {
    let mut referenced = Vec::new();
    for key in keys {
        let dataset = file.dataset(&format!("{group}/{key}"))?;
        if let Some(times) = file.attr_string(&dataset, "timestamps")? {
            referenced.push(times);
        }
    }
    Ok(referenced)
}

/// Reads and checks explicit timestamps: finite and strictly increasing.
pub(crate) fn read_timestamps(file: &Hdf5File, episode: &str, key: &str) -> Result<Vec<f64>> {
    let dataset = file.dataset(key)?;
    if dataset.ndim() != 1 {
        return Err(file.layout_error(key, format!("has shape {:?}; timestamps must be 1-D", dataset.shape())));
    }
    let times = file.read_f64(&dataset, key)?;
    let mut previous = f64::NEG_INFINITY;
    for (row, &value) in times.iter().enumerate() {
        if !value.is_finite() || value <= previous {
            return Err(Error::NonMonotonic {
                file: file.path().to_path_buf(),
                episode: episode.to_owned(),
                key: key.to_owned(),
                row,
                previous,
                value,
            });
        }
        previous = value;
    }
    Ok(times)
}

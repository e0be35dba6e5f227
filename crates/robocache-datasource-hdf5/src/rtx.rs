//! robocache's HDF5 layout mirroring RLDS for Open X-Embodiment (docs/datasets.md):
//!
//! ```text
//! /                      attrs: robocache_layout = "rtx", robocache_layout_version = 1,
//!                               dataset_name, control_frequency_hz
//!   episodes/episode_<n>/      attrs: control_frequency_hz (optional, overrides the file's)
//!     steps/
//!       observation/<key> [N, ...]    (images u8 [N, H, W, C])
//!       action [N, A]  or  action/<key> [N, ...]
//!       reward, discount [N] f32; is_first, is_last, is_terminal [N] bool
//!       language_instruction [N] strings (optional)
//!       timestamp [N] f64 seconds (optional; else step i is at i / rate)
//!     episode_metadata/       datasets or attributes, copied into the episode's metadata
//! ```

use serde_json::{json, Map, Value};

use crate::hdf5_file::Hdf5File;
use crate::streams::{describe_stream, numeric_datasets, read_timestamps, referenced_timestamps, StepClock};
use crate::Hdf5Options;
use robocache_datasource::model::{DatasetInfo, EpisodeInfo, Timeline};
use robocache_datasource::{Error, Result};

/// The per-step timestamp dataset of an episode's steps.
pub const TIMESTAMP_KEY: &str = "timestamp";

pub(crate) fn read_info(file: &Hdf5File, options: &Hdf5Options) -> Result<DatasetInfo> {
    let root = file.group("/")?;
    let metadata = file.attrs_json(&root);
    let file_rate = file.attr_f64(&root, "control_frequency_hz")?;
    let episodes_group = file.group("episodes")?;
    let mut names = file.member_names(&episodes_group, "episodes")?;
    names.sort_by_key(|n| (n.trim_start_matches("episode_").parse::<u64>().unwrap_or(u64::MAX), n.clone()));
    let mut episodes = Vec::with_capacity(names.len());
    let mut rates = Vec::new();
    for name in names {
        let path = format!("episodes/{name}");
        let group = file.group(&path)?;
        let rate_hz = match (options.rate_hz, file.attr_f64(&group, "control_frequency_hz")?, file_rate) {
            (Some(hz), _, _) | (None, Some(hz), _) | (None, None, Some(hz)) => hz,
            (None, None, None) => {
                return Err(
                    file.missing("attribute", &format!("/@control_frequency_hz (or {path}@control_frequency_hz)"))
                )
            }
        };
        if !(rate_hz.is_finite() && rate_hz > 0.0) {
            return Err(file.layout_error(&path, format!("control_frequency_hz {rate_hz} is not a positive rate")));
        }
        rates.push(rate_hz);
        episodes.push(read_episode(file, &name, &path, rate_hz)?);
    }
    let rate_hz = rates.first().copied().or(file_rate).unwrap_or(1.0);
    Ok(DatasetInfo {
        path: file.path().to_path_buf(),
        format: crate::RTX,
        rate_hz,
        episodes,
        splits: Vec::new(),
        metadata,
    })
}

fn read_episode(file: &Hdf5File, name: &str, path: &str, rate_hz: f64) -> Result<EpisodeInfo> {
    let steps = format!("{path}/steps");
    file.group(&steps)?;
    let keys = numeric_datasets(file, &steps, &[TIMESTAMP_KEY])?;
    // The step count: the timestamps if any, else the first stream on the step clock.
    let timestamp_path = format!("{steps}/{TIMESTAMP_KEY}");
    let (len, timeline, duration_s) = if file.exists(&timestamp_path) {
        let times = read_timestamps(file, name, &timestamp_path)?;
        let duration = times.last().zip(times.first()).map_or(0.0, |(l, f)| l - f);
        (times.len(), Timeline::Explicit { key: timestamp_path }, duration)
    } else {
        let first = keys.first().ok_or_else(|| file.layout_error(&steps, "holds no numeric datasets"))?;
        let dataset = file.dataset(&format!("{steps}/{first}"))?;
        let len = dataset.shape().first().copied().unwrap_or(0);
        (len, Timeline::Uniform { start: 0.0, hz: rate_hz }, len.saturating_sub(1) as f64 / rate_hz)
    };
    if len == 0 {
        return Err(Error::EmptyEpisode { file: file.path().to_path_buf(), episode: name.to_owned() });
    }
    let clock = StepClock { len, timeline };
    let times = referenced_timestamps(file, &steps, &keys)?;
    let mut streams = Vec::new();
    for key in keys.iter().filter(|k| !times.contains(k)) {
        streams.push(describe_stream(file, name, &steps, key, key, &clock, |shape| shape.common_kind())?);
    }
    let instruction_path = format!("{steps}/language_instruction");
    let instruction = if file.exists(&instruction_path) {
        let dataset = file.dataset(&instruction_path)?;
        file.read_strings(&dataset, &instruction_path)?.into_iter().find(|s| !s.is_empty())
    } else {
        None
    };
    let group = file.group(path)?;
    let mut metadata = file.attrs_json(&group);
    let metadata_path = format!("{path}/episode_metadata");
    if file.exists(&metadata_path) {
        let meta_group = file.group(&metadata_path)?;
        let mut episode_metadata: Map<String, Value> = file.attrs_json(&meta_group);
        for key in file.member_names(&meta_group, &metadata_path)? {
            let key_path = format!("{metadata_path}/{key}");
            if let Ok(dataset) = meta_group.dataset(&key) {
                let value =
                    match file.read_strings(&dataset, &key_path) {
                        Ok(strings) if strings.len() == 1 => json!(strings[0]),
                        Ok(strings) => json!(strings),
                        Err(_) => dataset.read_raw::<f64>().map_or(Value::Null, |v| {
                            if v.len() == 1 {
                                json!(v[0])
                            } else {
                                json!(v)
                            }
                        }),
                    };
                episode_metadata.insert(key, value);
            }
        }
        metadata.insert("episode_metadata".into(), Value::Object(episode_metadata));
    }
    Ok(EpisodeInfo { name: name.to_owned(), len, duration_s, streams, instruction, metadata })
}

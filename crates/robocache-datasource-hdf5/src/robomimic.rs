//! robomimic's native layout (docs/datasets.md):
//!
//! ```text
//! data/            attrs: total, env_args (JSON; env_kwargs.control_freq is the rate)
//!   demo_N/        attrs: num_samples
//!     actions [N, A], rewards [N], dones [N], states [N, S]
//!     obs/<key> [N, ...], next_obs/<key> [N, ...]   (images u8 [N, H, W, C])
//! mask/<filter_key> [M] bytes: demo names of a split (train, valid, ...)
//! ```
//!
//! Demos are ordered by the number after `demo_`, as robomimic sorts them
//! (numbers may skip: Isaac Lab's `demo_0, demo_1, demo_12`).
//!
//! Isaac Lab's recorder (`record_demos`, Isaac Lab Mimic) writes this layout
//! with `initial_state/*` in each demo: the simulator state the demo starts
//! from, one row, not a stream of the demo's steps. robomimic's reader does
//! not read it, and neither does robocache: those keys are left out of the
//! streams and listed under the dataset's `ignored` metadata (which
//! `robocache inspect` prints), with the reason.

use serde_json::Value;

use crate::hdf5_file::Hdf5File;
use crate::streams::{describe_stream, numeric_datasets, referenced_timestamps, StepClock};
use crate::Hdf5Options;
use robocache_datasource::model::{DatasetInfo, EpisodeInfo, Timeline};
use robocache_datasource::{Error, Result};

/// robomimic's rate when `env_args` names none (robosuite's default control_freq).
pub const DEFAULT_RATE_HZ: f64 = 20.0;

/// True when the file looks like robomimic's layout.
pub(crate) fn detect(file: &Hdf5File) -> bool {
    file.exists("data")
        && file
            .group("data")
            .and_then(|g| file.member_names(&g, "data"))
            .is_ok_and(|names| names.is_empty() || names.iter().any(|n| n.starts_with("demo_")))
}

pub(crate) fn read_info(file: &Hdf5File, options: &Hdf5Options) -> Result<DatasetInfo> {
    let data = file.group("data")?;
    let metadata = file.attrs_json(&data);
    let rate_hz = match options.rate_hz {
        Some(hz) => hz,
        None => metadata
            .get("env_args")
            .and_then(|args| args.get("env_kwargs"))
            .and_then(|kwargs| kwargs.get("control_freq"))
            .and_then(Value::as_f64)
            .unwrap_or(DEFAULT_RATE_HZ),
    };
    if !(rate_hz.is_finite() && rate_hz > 0.0) {
        return Err(file.layout_error("data@env_args", format!("control_freq {rate_hz} is not a positive rate")));
    }

    let mut splits = Vec::new();
    if file.exists("mask") {
        let mask = file.group("mask")?;
        splits = file.member_names(&mask, "mask")?;
    }
    let names = match &options.split {
        Some(split) => {
            let path = format!("mask/{split}");
            let dataset = file.dataset(&path)?;
            file.read_strings(&dataset, &path)?
        }
        None => file.member_names(&data, "data")?,
    };
    let mut numbered = Vec::with_capacity(names.len());
    for name in names {
        let number = name.strip_prefix("demo_").and_then(|n| n.parse::<u64>().ok()).ok_or_else(|| {
            file.layout_error(
                &format!("data/{name}"),
                "is not named demo_<number> (robomimic orders demos by that number)",
            )
        })?;
        numbered.push((number, name));
    }
    numbered.sort();

    let mut episodes = Vec::with_capacity(numbered.len());
    let mut ignored = serde_json::Map::new();
    for (_, name) in numbered {
        episodes.push(read_demo(file, &name, rate_hz, &mut ignored)?);
    }
    let mut metadata = metadata;
    if !ignored.is_empty() {
        metadata.insert("ignored".into(), Value::Object(ignored));
    }
    Ok(DatasetInfo { path: file.path().to_path_buf(), format: crate::ROBOMIMIC, rate_hz, episodes, splits, metadata })
}

/// Groups of a demo that are not streams of its steps, and why.
const NOT_STREAMS: [(&str, &str); 1] = [(
    "initial_state/",
    "the simulator state the demo starts from (Isaac Lab): one row, not a stream; robomimic does not read it either",
)];

fn read_demo(
    file: &Hdf5File,
    name: &str,
    rate_hz: f64,
    ignored: &mut serde_json::Map<String, Value>,
) -> Result<EpisodeInfo> {
    let path = format!("data/{name}");
    let group = file.group(&path)?;
    let len = file
        .attr_f64(&group, "num_samples")?
        .ok_or_else(|| file.missing("attribute", &format!("{path}@num_samples")))?;
    if len < 0.0 || len.fract() != 0.0 {
        return Err(file.layout_error(&format!("{path}@num_samples"), format!("is {len}, not a step count")));
    }
    let len = len as usize;
    if len == 0 {
        return Err(Error::EmptyEpisode { file: file.path().to_path_buf(), episode: name.to_owned() });
    }
    let clock = StepClock { len, timeline: Timeline::Uniform { start: 0.0, hz: rate_hz } };
    // robomimic's SequenceDataset always reads the actions.
    let actions_path = format!("{path}/actions");
    file.dtype(&file.dataset(&actions_path)?, &actions_path)?;
    let mut keys = numeric_datasets(file, &path, &[])?;
    keys.retain(|key| match NOT_STREAMS.iter().find(|(prefix, _)| key.starts_with(prefix)) {
        Some((_, why)) => {
            ignored.entry(key.clone()).or_insert_with(|| Value::from(*why));
            false
        }
        None => true,
    });
    let times = referenced_timestamps(file, &path, &keys)?;
    let mut streams = Vec::new();
    for key in keys.iter().filter(|k| !times.contains(k)) {
        streams.push(describe_stream(file, name, &path, key, key, &clock, |shape| shape.common_kind())?);
    }
    if streams.is_empty() {
        return Err(file.layout_error(&path, "holds no numeric datasets"));
    }
    let mut metadata = file.attrs_json(&group);
    metadata.remove("num_samples");
    Ok(EpisodeInfo {
        name: name.to_owned(),
        len,
        duration_s: (len - 1) as f64 / rate_hz,
        streams,
        instruction: None,
        metadata,
    })
}

//! robocache's HDF5 layout for CALVIN (docs/datasets.md), written by
//! `robocache convert calvin` from a native split:
//!
//! ```text
//! /                       attrs: robocache_layout = "calvin", robocache_layout_version = 1,
//!                                control_frequency_hz = 30
//!   segments/segment_<start, 7 digits>   one per (start, end) of ep_start_end_ids.npy
//!                         attrs: start_frame, end_frame (inclusive)
//!     frame_ids [N] i64   the native episode_XXXXXXX numbers
//!     actions, rel_actions [N, 7]      xyz, Euler xyz, gripper ±1
//!     robot_obs [N, 15], scene_obs [N, 24]
//!     rgb_static [N, 200, 200, 3] u8, rgb_gripper [N, 84, 84, 3] u8, rgb_tactile [N, 160, 120, 6] u8
//!     depth_static, depth_gripper, depth_tactile [N, H, W] f32
//!   language/             optional, from lang_annotations/auto_lang_ann.npy
//!     text [M], task [M]  strings; start_frame, end_frame [M] i64; embedding [M, E] f32
//! ```

use serde_json::{json, Map, Value};

use crate::hdf5_file::Hdf5File;
use crate::streams::{describe_stream, numeric_datasets, StepClock};
use crate::Hdf5Options;
use robocache_datasource::model::{DatasetInfo, EpisodeInfo, StreamKind, Timeline};
use robocache_datasource::stream_shape::StreamShape;
use robocache_datasource::{Error, Result};

/// CALVIN's control rate.
pub const RATE_HZ: f64 = 30.0;

/// The channel kinds of CALVIN's low-dimensional keys.
pub(crate) fn default_kind(shape: &StreamShape<'_>) -> StreamKind {
    let kind = match shape.key {
        // TCP xyz, TCP Euler xyz, gripper open (1) / closed (-1).
        "actions" | "rel_actions" => "0..3:continuous,3..6:angle,6..7:discrete",
        // TCP xyz, TCP Euler xyz, gripper width, 7 joints, gripper action.
        "robot_obs" => "0..3:continuous,3..6:angle,6..14:continuous,14..15:discrete",
        // door, drawer, button, switch, lightbulb, green light, then 3 blocks × (xyz, Euler xyz).
        "scene_obs" => "0..4:continuous,4..6:discrete,6..9:continuous,9..12:angle,12..15:continuous,15..18:angle,18..21:continuous,21..24:angle",
        _ => return shape.common_kind(),
    };
    match (kind.parse::<StreamKind>(), shape.step_shape) {
        (Ok(parsed), _) if parsed.check(shape.step_shape.iter().product()).is_ok() => parsed,
        _ => shape.common_kind(),
    }
}

/// One language annotation of the file.
#[derive(Clone, Debug)]
struct Annotation {
    text: String,
    task: String,
    start_frame: i64,
    end_frame: i64,
}

pub(crate) fn read_info(file: &Hdf5File, options: &Hdf5Options) -> Result<DatasetInfo> {
    let root = file.group("/")?;
    let mut metadata = file.attrs_json(&root);
    let rate_hz = match options.rate_hz {
        Some(hz) => hz,
        None => file.attr_f64(&root, "control_frequency_hz")?.unwrap_or(RATE_HZ),
    };
    let annotations = read_annotations(file)?;
    metadata.insert("annotations".into(), json!(annotations.len()));

    let segments = file.group("segments")?;
    let mut names = file.member_names(&segments, "segments")?;
    names.sort_by_key(|n| n.trim_start_matches("segment_").parse::<u64>().unwrap_or(u64::MAX));
    let mut episodes = Vec::with_capacity(names.len());
    for name in names {
        let path = format!("segments/{name}");
        let group = file.group(&path)?;
        let frames = |attr: &str| -> Result<i64> {
            let value =
                file.attr_f64(&group, attr)?.ok_or_else(|| file.missing("attribute", &format!("{path}@{attr}")))?;
            Ok(value as i64)
        };
        let (start_frame, end_frame) = (frames("start_frame")?, frames("end_frame")?);
        if end_frame < start_frame {
            return Err(Error::EmptyEpisode { file: file.path().to_path_buf(), episode: name });
        }
        let len = (end_frame - start_frame + 1) as usize;
        let clock = StepClock { len, timeline: Timeline::Uniform { start: 0.0, hz: rate_hz } };
        let mut streams = Vec::new();
        for key in numeric_datasets(file, &path, &["frame_ids"])? {
            streams.push(describe_stream(file, &name, &path, &key, &key, &clock, default_kind)?);
        }
        if streams.is_empty() {
            return Err(file.layout_error(&path, "holds no numeric datasets"));
        }
        let inside: Vec<&Annotation> =
            annotations.iter().filter(|a| a.start_frame >= start_frame && a.end_frame <= end_frame).collect();
        let mut episode_metadata = Map::new();
        episode_metadata.insert("start_frame".into(), json!(start_frame));
        episode_metadata.insert("end_frame".into(), json!(end_frame));
        episode_metadata.insert(
            "annotations".into(),
            Value::Array(
                inside
                    .iter()
                    .map(|a| {
                        json!({
                            "task": a.task, "text": a.text,
                            "start_step": a.start_frame - start_frame, "end_step": a.end_frame - start_frame,
                        })
                    })
                    .collect(),
            ),
        );
        episodes.push(EpisodeInfo {
            name,
            len,
            duration_s: (len - 1) as f64 / rate_hz,
            streams,
            instruction: inside.first().map(|a| a.text.clone()),
            metadata: episode_metadata,
        });
    }
    Ok(DatasetInfo {
        path: file.path().to_path_buf(),
        format: crate::CALVIN,
        rate_hz,
        episodes,
        splits: Vec::new(),
        metadata,
    })
}

fn read_annotations(file: &Hdf5File) -> Result<Vec<Annotation>> {
    if !file.exists("language") {
        return Ok(Vec::new());
    }
    let strings = |key: &str| -> Result<Vec<String>> {
        let path = format!("language/{key}");
        let dataset = file.dataset(&path)?;
        file.read_strings(&dataset, &path)
    };
    let frames = |key: &str| -> Result<Vec<i64>> {
        let path = format!("language/{key}");
        let dataset = file.dataset(&path)?;
        dataset.read_raw::<i64>().map_err(|e| file.hdf5_error(&path, e))
    };
    let (text, task, start, end) = (strings("text")?, strings("task")?, frames("start_frame")?, frames("end_frame")?);
    let n = text.len();
    for (key, len) in [("task", task.len()), ("start_frame", start.len()), ("end_frame", end.len())] {
        if len != n {
            return Err(
                file.layout_error(&format!("language/{key}"), format!("has {len} rows but language/text has {n}"))
            );
        }
    }
    Ok((0..n)
        .map(|i| Annotation { text: text[i].clone(), task: task[i].clone(), start_frame: start[i], end_frame: end[i] })
        .collect())
}

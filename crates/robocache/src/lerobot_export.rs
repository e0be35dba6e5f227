//! Any dataset robocache reads, written as a LeRobot v3.0 root
//! (`robocache convert lerobot SRC OUT`): each episode resampled onto one
//! clock at `fps` by time windows (every stream by its kind: linear,
//! slerp, hold), on the CPU backend, so the numbers are the reference's.
//!
//! An episode's frames are the ticks `start + k / fps` where every stream
//! has data (the span all streams cover): LeRobot has no pad masks, so no
//! value is invented at either end. Frame `k`'s `timestamp` is `k / fps`.
//! Camera streams (`u8 [H, W, 3]`) become `video` features (H.264 MP4,
//! [`CameraStorage::Video`]) or `image` features (PNG), as `cameras` says; float
//! streams keep their dtype (`float32`, `float64`), `i64` and `bool` stay,
//! other integer and half-precision streams become `float32`. The task of
//! an episode is its language instruction, else the one given.

use std::path::Path;

use robocache_cpu::{DType, HostVec};
use robocache_datasets::{
    CameraStorage, Dataset, LeRobotFeatureToWrite, LeRobotWriter, LeRobotWritten, TimeWindowSpec, TimeWindows,
};

use crate::{Device, Error, Result};

/// How to export.
#[derive(Clone, Debug, PartialEq)]
pub struct LeRobotExport {
    /// The clock of the written dataset.
    pub fps: f64,
    /// The streams to write (empty: every stream of the first episode).
    pub streams: Vec<String>,
    /// The task of episodes without a language instruction.
    pub task: String,
    /// `robot_type` in `info.json`.
    pub robot_type: Option<String>,
    /// How camera streams are stored: `video` (H.264, the default) or `image` (PNG).
    pub cameras: CameraStorage,
}

/// Windows resampled per batch, at most.
const BATCH: usize = 256;
/// The bytes a batch's rows of its widest stream may take: each window
/// reads about two rows of each stream (the samples around its tick), so
/// camera frames make a batch smaller (640×480: 36 windows), which keeps
/// its buffers in the allocator's reach instead of fresh pages each batch.
const BATCH_ROW_BYTES: usize = 64 << 20;

fn invalid(message: String) -> Error {
    Error::Dataset(robocache_datasets::Error::Invalid(message))
}

/// The dtype a stream is written as.
fn written_dtype(dtype: DType, shape: &[usize]) -> DType {
    match dtype {
        DType::U8 if shape.len() == 3 && shape[2] == 3 => DType::U8,
        DType::F32 | DType::F64 | DType::I64 | DType::Bool => dtype,
        _ => DType::F32,
    }
}

/// Writes `dataset` as a LeRobot root at `out`; `progress(episodes done,
/// episodes)` after each episode.
pub fn export_lerobot(
    dataset: &Dataset,
    out: &Path,
    options: &LeRobotExport,
    mut progress: impl FnMut(usize, usize),
) -> Result<LeRobotWritten> {
    let info = dataset.info();
    let first = info.episodes.first().ok_or_else(|| invalid(format!("{}: no episodes", info.path.display())))?;
    let names: Vec<String> = match options.streams.is_empty() {
        true => first.streams.iter().map(|s| s.name.clone()).collect(),
        false => options.streams.clone(),
    };
    let streams: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut features = Vec::with_capacity(streams.len());
    for name in &streams {
        let stream = first.stream(name).ok_or_else(|| invalid(format!("no stream `{name}` in the first episode")))?;
        let shape = match stream.step_shape.as_slice() {
            [] => vec![1],
            [h, w, 3] if stream.dtype == DType::U8 => vec![*h, *w, 3],
            other => vec![other.iter().product()],
        };
        features.push(LeRobotFeatureToWrite {
            name: (*name).to_owned(),
            dtype: written_dtype(stream.dtype, &shape),
            shape,
            names: None,
        });
    }
    let widest = streams.iter().filter_map(|name| first.stream(name)).map(|s| s.step_bytes()).max().unwrap_or(1);
    let batch = (BATCH_ROW_BYTES / (2 * widest.max(1))).clamp(8, BATCH);
    let spec = TimeWindowSpec { hz: options.fps, history: 0, horizon: 1, causal: false };
    let windows = TimeWindows::new(dataset, &streams, &spec)?;
    let device = Device::cpu();
    let mut writer =
        LeRobotWriter::create(out, options.fps, features.clone(), options.robot_type.clone(), options.cameras)?;
    for (episode, episode_info) in info.episodes.iter().enumerate() {
        let samples: Vec<usize> = windows.episode_samples(episode).collect();
        let mut columns: Vec<Vec<HostVec>> = features.iter().map(|_| Vec::new()).collect();
        let mut valid = Vec::with_capacity(samples.len());
        for chunk in samples.chunks(batch) {
            let batch = device.time_window_batch(dataset, &windows, chunk, &streams)?;
            let mut all_valid = vec![true; chunk.len()];
            for ((stream, column), feature) in batch.streams.into_iter().zip(&mut columns).zip(&features) {
                for (v, m) in all_valid.iter_mut().zip(stream.mask.to_vec::<bool>()?) {
                    *v &= m;
                }
                let data = stream.data.into_host()?;
                let data = match data.dtype() == feature.dtype {
                    true => data,
                    false => HostVec::F32(data.as_slice().to_f64_vec().into_iter().map(|v| v as f32).collect()),
                };
                column.push(data);
            }
            valid.extend(all_valid);
        }
        // The span every stream covers (each stream's valid ticks are one run).
        let (Some(from), Some(last)) = (valid.iter().position(|&v| v), valid.iter().rposition(|&v| v)) else {
            tracing::warn!(episode = %episode_info.name, "no tick where every stream has data: episode left out");
            continue;
        };
        let frames = last + 1 - from;
        let columns: Vec<HostVec> = columns
            .into_iter()
            .zip(&features)
            .map(|(parts, feature)| {
                let width: usize = feature.shape.iter().product();
                concat_range(parts, feature.dtype, from * width..(last + 1) * width)
            })
            .collect::<Result<_>>()?;
        let task = episode_info.instruction.clone().unwrap_or_else(|| options.task.clone());
        writer.add_episode(&task, frames, &columns)?;
        progress(episode + 1, info.episodes.len());
    }
    Ok(writer.finish()?)
}

/// Elements `range` of the concatenation of `parts` (all of `dtype`).
fn concat_range(parts: Vec<HostVec>, dtype: DType, range: std::ops::Range<usize>) -> Result<HostVec> {
    macro_rules! gather {
        ($variant:ident) => {{
            // Only the range, into one allocation of its size (a camera
            // column is hundreds of megabytes: no growth, no second copy).
            let mut out = Vec::with_capacity(range.len());
            let mut at = 0usize;
            for part in parts {
                let values = match part {
                    HostVec::$variant(values) => values,
                    other => return Err(invalid(format!("a {} part in a {dtype} column", other.dtype()))),
                };
                let (from, to) = (range.start.max(at), range.end.min(at + values.len()));
                if from < to {
                    out.extend_from_slice(&values[from - at..to - at]);
                }
                at += values.len();
            }
            if out.len() != range.len() {
                return Err(invalid(format!("rows {range:?} past the column of {at} values")));
            }
            HostVec::$variant(out)
        }};
    }
    Ok(match dtype {
        DType::F32 => gather!(F32),
        DType::F64 => gather!(F64),
        DType::I64 => gather!(I64),
        DType::Bool => gather!(Bool),
        DType::U8 => gather!(U8),
        other => return Err(invalid(format!("a {other} column"))),
    })
}

//! The GPU-resident mode: every episode of the low-dimensional streams on
//! the device once, concatenated per stream (`[rows, channels]` f32 with a
//! table of episodes); a batch is assembled from `(episode, anchor)` pairs
//! in one launch for all streams (CUDA) or by the reference (CPU).
//!
//! Resident streams are f32 (robomimic's in-memory cache casts the same
//! way); angle channels are unwrapped along each whole episode at upload,
//! and normalization, when asked for, is applied at upload too, so a batch
//! costs nothing beyond its windows.

use rayon::prelude::*;
use robocache_cpu::{Boundary, HostVec, ResampleSpec, Stream, Targets, Times};
use robocache_datasets::{Dataset, StreamTimes};

use super::normalization::Normalization;
use crate::assembly::{
    Assembled, AssemblyRequest, BatchStream, MaskKind, ResidentEpisode, ResidentStream, WindowShape,
};
use crate::backend::operations::CudaOperations;
use crate::windows::causal::apply_causal_rule;
use crate::{Device, Error, Result, Tensor};

/// Low-dimensional streams of every episode of a dataset, on one device.
#[derive(Debug)]
pub struct ResidentStreams {
    device: Device,
    streams: Vec<ResidentStream>,
    episode_count: usize,
    /// The episodes held (all but those [`ResidentStreams::upload_episodes`] left out).
    uploaded: Vec<bool>,
}

impl ResidentStreams {
    /// Reads `streams` of every episode of `dataset`, converts them to f32,
    /// unwraps angle channels, applies `normalization` when given, and puts
    /// them on `device`.
    pub fn upload(
        device: &Device,
        dataset: &Dataset,
        streams: &[&str],
        normalization: Option<&Normalization>,
    ) -> Result<Self> {
        Self::upload_episodes(device, dataset, streams, normalization, &vec![true; dataset.len()])
    }

    /// [`ResidentStreams::upload`] of the episodes `read` marks: the others
    /// are neither read nor held (no rows), for a loader whose shard never
    /// windows them (sharding by episode: a remote dataset's other episodes
    /// are not fetched).
    pub fn upload_episodes(
        device: &Device,
        dataset: &Dataset,
        streams: &[&str],
        normalization: Option<&Normalization>,
        read: &[bool],
    ) -> Result<Self> {
        if read.len() != dataset.len() {
            return Err(invalid(format!("{} episodes marked to upload of a dataset of {}", read.len(), dataset.len())));
        }
        let mut resident = Vec::with_capacity(streams.len());
        for &name in streams {
            let mut data = Vec::new();
            let mut times = Vec::new();
            let mut episodes = Vec::with_capacity(dataset.len());
            let mut explicit = false;
            let mut layout: Option<(Vec<usize>, robocache_datasets::StreamKind)> = None;
            for episode in 0..dataset.len() {
                let (_, info) = dataset.stream(episode, name)?;
                if info.is_image() {
                    return Err(invalid(format!(
                        "stream `{name}` is an image stream: the GPU-resident mode holds low-dimensional streams; stream it instead"
                    )));
                }
                match &layout {
                    Some((shape, kind)) if *shape != info.step_shape || *kind != info.kind => {
                        return Err(invalid(format!(
                            "stream `{name}` changes shape or kind between episodes ({shape:?} {kind} vs {:?} {})",
                            info.step_shape, info.kind
                        )))
                    }
                    Some(_) => {}
                    None => layout = Some((info.step_shape.clone(), info.kind.clone())),
                }
                let channels = info.channels().max(1);
                if !read[episode] {
                    // No rows; a uniform clock so that the device table needs no times.
                    let row_offset = data.len() / channels;
                    episodes.push(ResidentEpisode { row_offset, rows: 0, uniform: Some((0.0, 1.0)) });
                    continue;
                }
                let row_offset = data.len() / channels;
                if info.len == 0 {
                    // A stream without rows in this episode (a topic missing
                    // from a bag): one neutral row at the largest finite time,
                    // after every target, so every window of it is masked.
                    data.extend(crate::windows::neutral_row(info).into_iter().map(|v| v as f32));
                    times.push(f64::MAX);
                    explicit = true;
                    episodes.push(ResidentEpisode { row_offset, rows: 1, uniform: None });
                    continue;
                }
                let mut rows = host_f32(dataset.read_stream(episode, name)?);
                crate::windows::unwrap_angle_channels(&mut rows, channels, &info.kind.angle_channels(channels));
                if let Some(stats) = normalization {
                    stats.apply(name, &info.kind, &mut rows, channels)?;
                }
                let count = info.len;
                data.extend(rows);
                let uniform = match dataset.times(episode, name)? {
                    StreamTimes::Uniform { start, hz, .. } => {
                        times.extend(std::iter::repeat_n(0.0, count));
                        Some((start, hz))
                    }
                    StreamTimes::Explicit(t) => {
                        explicit = true;
                        times.extend(t.iter().copied());
                        None
                    }
                };
                episodes.push(ResidentEpisode { row_offset, rows: count, uniform });
            }
            let (step_shape, kind) = layout.unwrap_or((
                Vec::new(),
                robocache_datasets::StreamKind::All(robocache_datasets::ChannelKind::Continuous),
            ));
            let channels = step_shape.iter().product::<usize>().max(1);
            let rows_total = data.len() / channels;
            let data = Tensor::from_host_vec(device, HostVec::F32(data), &[rows_total, channels])?;
            let times =
                if explicit { Some(Tensor::from_host_vec(device, HostVec::F64(times), &[rows_total])?) } else { None };
            let mut stream = ResidentStream {
                name: name.to_owned(),
                step_shape,
                channels,
                channel_spec: kind.channel_spec(),
                episodes,
                data,
                times,
                table: None,
            };
            if let Device::Cuda(cuda) = device {
                stream.table = Some(cuda.resident_table(device, &stream)?);
            }
            resident.push(stream);
        }
        Ok(ResidentStreams {
            device: device.clone(),
            streams: resident,
            episode_count: dataset.len(),
            uploaded: read.to_vec(),
        })
    }

    /// The device the streams live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The streams' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.streams.iter().map(|s| s.name.as_str()).collect()
    }

    /// Bytes held on the device.
    pub fn size_in_bytes(&self) -> usize {
        self.streams.iter().map(|s| s.data.size_in_bytes() + s.times.as_ref().map_or(0, Tensor::size_in_bytes)).sum()
    }

    /// One window per `(episode, anchor)` of every stream: `[B, T, ...step_shape]`
    /// f32 and the mask `[B, T]` of the kind asked for, and the request's
    /// columns as an `i64 [3, B]` tensor on the device.
    pub(crate) fn assemble(&self, request: &AssemblyRequest<'_>) -> Result<Assembled> {
        let AssemblyRequest { shape, samples, columns, .. } = *request;
        if shape.is_empty() {
            return Err(invalid("windows of no steps".into()));
        }
        if let WindowShape::Times { hz, .. } = shape {
            if !(hz.is_finite() && hz > 0.0) {
                return Err(invalid(format!("policy rate {hz} Hz is not a positive rate")));
            }
        }
        if columns.len() != 3 * samples.len() {
            return Err(invalid(format!(
                "{} batch columns for {} windows (3 per window)",
                columns.len(),
                samples.len()
            )));
        }
        for &(episode, anchor) in samples {
            if episode >= self.episode_count || !anchor.is_finite() {
                return Err(invalid(format!(
                    "sample (episode {episode}, anchor {anchor}) is not in the {} resident episodes",
                    self.episode_count
                )));
            }
            if !self.uploaded[episode] {
                return Err(invalid(format!(
                    "episode {episode} is not resident on this loader: it belongs to another shard (sharded by episode)"
                )));
            }
        }
        match &self.device {
            Device::Cpu => Ok(Assembled {
                streams: self
                    .streams
                    .iter()
                    .map(|s| assemble_on_host(&self.device, s, request))
                    .collect::<Result<_>>()?,
                columns: Tensor::from_slice(&self.device, columns, &[3, samples.len()])?,
            }),
            Device::Cuda(cuda) => cuda.assemble(&self.device, &self.streams, request),
        }
    }
}

fn invalid(message: String) -> Error {
    Error::Dataset(robocache_datasets::Error::Invalid(message))
}

/// Any numeric host vector as f32 (bool as 0/1).
pub(crate) fn host_f32(data: HostVec) -> Vec<f32> {
    match data {
        HostVec::F32(v) => v,
        HostVec::Bool(v) => v.into_iter().map(|b| f32::from(u8::from(b))).collect(),
        other => other.as_slice().to_f64_vec().into_iter().map(|x| x as f32).collect(),
    }
}

/// The CPU reference of `assemble_windows`: the same search and arithmetic
/// as `resample` on one episode per window.
fn assemble_on_host(device: &Device, stream: &ResidentStream, request: &AssemblyRequest<'_>) -> Result<BatchStream> {
    let AssemblyRequest { shape, samples, masks, .. } = *request;
    let channels = stream.channels;
    let steps = shape.len();
    let history = shape.history();
    let data = match stream.data.to_host()? {
        HostVec::F32(v) => v,
        other => return Err(invalid(format!("resident data of `{}` is {}, not f32", stream.name, other.dtype()))),
    };
    let times = match stream.times.as_ref().map(Tensor::to_host).transpose()? {
        Some(HostVec::F64(v)) => v,
        _ => Vec::new(),
    };
    let mut out = vec![0f32; samples.len() * steps * channels];
    let mut valid = vec![false; samples.len() * steps];
    let spec =
        ResampleSpec { channels: shape.channel_spec(&stream.channel_spec), boundary: Boundary::Clamp, trusted: true };
    out.par_chunks_mut(steps * channels).zip(valid.par_chunks_mut(steps)).zip(samples.par_iter()).try_for_each(
        |((out, valid), &(episode, anchor))| -> Result<()> {
            let ep = &stream.episodes[episode];
            let rows = &data[ep.row_offset * channels..(ep.row_offset + ep.rows) * channels];
            match shape {
                WindowShape::Steps { .. } => {
                    for k in 0..steps {
                        let r = anchor as i64 + k as i64 - history as i64;
                        valid[k] = r >= 0 && r < ep.rows as i64;
                        let row = r.clamp(0, ep.rows as i64 - 1) as usize;
                        out[k * channels..(k + 1) * channels]
                            .copy_from_slice(&rows[row * channels..(row + 1) * channels]);
                    }
                }
                WindowShape::Times { hz, .. } => {
                    let targets: Vec<f64> = (0..steps).map(|k| anchor + (k as f64 - history as f64) / hz).collect();
                    // The episode's first sample (a stream without rows: a
                    // neutral row at the largest finite time).
                    let first = match ep.uniform {
                        Some((start, _)) => start,
                        None => times.get(ep.row_offset).copied().unwrap_or(f64::MAX),
                    };
                    let times = match ep.uniform {
                        Some((start, hz)) => Times::Uniform { start, hz },
                        None => Times::Shared(&times[ep.row_offset..ep.row_offset + ep.rows]),
                    };
                    let source = Stream { data: rows, shape: [1, ep.rows, channels], times, lengths: None };
                    robocache_cpu::resample_into(
                        &source,
                        &Targets { times: Times::Shared(&targets), len: steps },
                        &spec,
                        out,
                        valid,
                    )?;
                    if shape.is_causal() {
                        apply_causal_rule(&targets, Some(first), out, valid, channels);
                    }
                }
            }
            Ok(())
        },
    )?;
    if masks == MaskKind::Pad {
        valid.iter_mut().for_each(|v| *v = !*v);
    }
    let mut full = vec![samples.len(), steps];
    full.extend(&stream.step_shape);
    let data = Tensor::from_host_vec(device, HostVec::F32(out), &full)?;
    BatchStream::with_host_mask(device, &stream.name, data, valid, [samples.len(), steps], masks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use robocache_datasets::synthetic::{write_robomimic, SyntheticSpec};

    #[test]
    fn episodes_left_out_are_not_held_and_windows_of_them_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("resident.hdf5");
        write_robomimic(&path, &SyntheticSpec { episodes: 3, mean_steps: 20, seed: 2, ..Default::default() }).unwrap();
        let dataset = Dataset::open(&path).unwrap();
        let all = ResidentStreams::upload(&Device::Cpu, &dataset, &["actions"], None).unwrap();
        let part =
            ResidentStreams::upload_episodes(&Device::Cpu, &dataset, &["actions"], None, &[true, false, true]).unwrap();
        let (_, actions) = dataset.stream(1, "actions").unwrap();
        // Its f32 rows at least (and its times, where the stream has its own).
        assert!(all.size_in_bytes() - part.size_in_bytes() >= actions.len * actions.channels() * 4);
        let shape = WindowShape::Steps { history: 0, len: 4 };
        let request = |samples: &[(usize, f64)], columns: &[i64]| {
            let request = AssemblyRequest { shape, samples, masks: MaskKind::Valid, columns };
            (all.assemble(&request).map(|a| a.streams[0].data.to_host().unwrap()), part.assemble(&request))
        };
        let (want, got) = request(&[(2, 3.0)], &[0, 2, 3f64.to_bits() as i64]);
        assert_eq!(got.unwrap().streams[0].data.to_host().unwrap(), want.unwrap(), "a held episode reads the same");
        let (_, refused) = request(&[(1, 0.0)], &[0, 1, 0]);
        let error = refused.unwrap_err().to_string();
        assert!(error.contains("episode 1") && error.contains("another shard"), "{error}");
        let wrong = ResidentStreams::upload_episodes(&Device::Cpu, &dataset, &["actions"], None, &[true]).unwrap_err();
        assert!(wrong.to_string().contains("1 episodes marked"), "{wrong}");
    }
}

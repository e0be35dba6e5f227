//! One live window: each stream's rows (resampled from its ring by the
//! loader's rules) or frame picks (stacked on the device), made into a
//! mixture's streams for a member's spec (`mixed`), then placed on the live
//! device — every row, mask and `dim_is_pad` in one upload.

use robocache_cpu::{Boundary, DType, ResampleSpec, Stream, Targets, Times};

use super::entry::{Entry, Part};
use super::ring::{End, RingSnapshot, Value};
use super::{mixed, Clock, Form, Live, LiveStream, LiveWindow};
use crate::batch_buffer::BatchUpload;
use crate::loader::MaskKind;
use crate::windows::causal::apply_causal_rule;
use crate::{BatchStream, Error, Result, Tensor};

/// The window of `live` at `time`.
pub(super) fn compute(live: &Live, time: f64) -> Result<LiveWindow> {
    let mut own = Vec::with_capacity(live.streams.len());
    for stream in &live.streams {
        let (part, valid) = match live.clock {
            Clock::Times(spec) => {
                let targets: Vec<f64> = spec.targets(time).into_iter().take(spec.history + 1).collect();
                let end = match spec.causal {
                    true => End::AtOrBefore(time),
                    false => End::FirstAtOrAfter(time),
                };
                // From the last sample at or before the first target inside
                // the episode (earlier targets clamp to its first sample).
                let snapshot = stream.with_ring(|ring| {
                    ring.snapshot(first_inside(&targets, ring.first_time()).unwrap_or(targets[0]), end)
                });
                time_part(stream, &snapshot, &targets, spec.causal, time)?
            }
            Clock::Deltas { tolerance_s } => {
                let back = stream.offsets.iter().map(|d| d.unsigned_abs() as usize).max().unwrap_or(0);
                let snapshot = stream.with_ring(|ring| ring.snapshot_last(time + tolerance_s, back + 1));
                delta_part(stream, &snapshot, time)?
            }
        };
        let part = match part {
            Part::Frames(frames) => Part::Tensor(stack(live, stream, &frames)?),
            other => other,
        };
        own.push(Entry { name: stream.name.clone(), step_shape: stream.step_shape.clone(), part, valid, dims: None });
    }
    let entries = match live.mixture.is_empty() {
        true => own,
        false => mixed::compose(live, own)?,
    };
    place(live, time, entries)
}

/// `frames` stacked on the live device `[1, T, ...]` (the padding frame for `None`).
fn stack(live: &Live, stream: &LiveStream, frames: &[Option<Tensor>]) -> Result<Tensor> {
    let zero = match frames.iter().any(Option::is_none) {
        true => Some(stream.zero_frame(&live.device)?),
        false => None,
    };
    let mut picks: Vec<(&Tensor, usize)> = Vec::with_capacity(frames.len());
    for frame in frames {
        let Some(frame) = frame.as_ref().or(zero.as_ref()) else {
            return Err(stream.error("no padding frame".into()));
        };
        picks.push((frame, 0));
    }
    let mut stacked = live.device.stack_frames(&picks, live.frames.layout, live.frames.dtype)?;
    if let Some(evaluation) = &stream.evaluation {
        // As the loader in evaluation mode: the window's frames together.
        stacked =
            live.device.augment_frames(&stacked, live.frames.layout, frames.len(), std::slice::from_ref(evaluation))?;
    }
    let mut shape = vec![1];
    shape.extend(stacked.shape());
    stacked.reshape(&shape)
}

/// The first of `targets` at or after the episode's first sample (`first`),
/// if any: the earliest target a window resamples rather than pads or clamps.
fn first_inside(targets: &[f64], first: Option<f64>) -> Option<f64> {
    let first = first?;
    targets.iter().copied().find(|&t| t >= first)
}

impl LiveStream {
    fn with_ring<T>(&self, read: impl FnOnce(&super::ring::SampleRing) -> T) -> T {
        read(&self.lock().ring)
    }
}

/// A time window's steps `targets` of `stream` (module docs of `live`).
fn time_part(
    stream: &LiveStream,
    snapshot: &RingSnapshot,
    targets: &[f64],
    causal: bool,
    time: f64,
) -> Result<(Part, Vec<bool>)> {
    let steps = targets.len();
    if !causal && snapshot.times.last().is_none_or(|&last| last < time) {
        return Err(stream.error(format!(
            "no sample at or after {time} s yet: a non-causal window interpolates towards the next sample, so it \
             can be computed once every stream has one (ask for an earlier time, or train with causal windows)"
        )));
    }
    // The first target inside the episode needs the last sample at or
    // before it: a ring that dropped that sample cannot give the window.
    let first = snapshot.first.as_ref().map(|(t, _)| *t);
    if let (Some(from), Some(oldest)) = (first_inside(targets, first), snapshot.oldest_kept) {
        if from < oldest {
            return Err(stream.error(format!(
                "the window at {time} s reads the sample at or before {from} s, which is no longer kept: the \
                 stream keeps samples from {oldest} s on ({})",
                kept(snapshot)
            )));
        }
    }
    // The samples the window reads: the snapshot's, led by the episode's
    // first sample when a target lies before it (clamped to it, or padding).
    let (mut times, mut values): (Vec<f64>, Vec<&Value>) = (snapshot.times.clone(), snapshot.values.iter().collect());
    if let Some((first_time, first_value)) = &snapshot.first {
        if snapshot.first_number > 0 && targets[0] < *first_time {
            times.insert(0, *first_time);
            values.insert(0, first_value);
        }
    }
    if times.is_empty() {
        // Causal, nothing at or before the window yet: padding throughout.
        return Ok((padding(stream, steps), vec![false; steps]));
    }
    match stream.form {
        Form::Resident => {
            let channels = stream.channels;
            let mut data = Vec::with_capacity(times.len() * channels);
            for value in &values {
                let Value::Row(bytes) = value else { return Err(stream.error("a frame in a row stream".into())) };
                data.extend_from_slice(bytemuck::cast_slice::<u8, f32>(bytes));
            }
            let mut out = vec![0f32; steps * channels];
            let mut valid = vec![false; steps];
            resample(&data, &times, channels, targets, &stream.methods, &mut out, &mut valid)?;
            if causal {
                apply_causal_rule(targets, first, &mut out, &mut valid, channels);
            }
            Ok((Part::Rows { dtype: DType::F32, bytes: bytemuck::cast_slice(&out).to_vec() }, valid))
        }
        Form::Camera { .. } => {
            // Which sample each target takes: the same resample of the
            // samples' numbers (frames are held or taken nearest).
            let numbers: Vec<f64> = (0..times.len()).map(|i| i as f64).collect();
            let mut picked = vec![0f64; steps];
            let mut valid = vec![false; steps];
            resample(&numbers, &times, 1, targets, &stream.methods, &mut picked, &mut valid)?;
            if causal {
                apply_causal_rule(targets, first, &mut picked, &mut valid, 1);
            }
            let frames = picked
                .iter()
                .zip(&valid)
                .map(|(&at, &valid)| match (values.get(at as usize), causal && !valid) {
                    (Some(Value::Frame(frame)), false) => Ok(Some(frame.clone())),
                    (_, true) => Ok(None),
                    _ => Err(stream.error("a row in a camera stream".into())),
                })
                .collect::<Result<_>>()?;
            Ok((Part::Frames(frames), valid))
        }
        Form::Raw => Err(stream.error("streamed low-dimensional streams have no live time windows".into())),
    }
}

/// A `delta_timestamps` window of `stream`: the samples its offsets name
/// back from its latest at or before the window (module docs of `live`).
fn delta_part(stream: &LiveStream, snapshot: &RingSnapshot, time: f64) -> Result<(Part, Vec<bool>)> {
    if snapshot.times.is_empty() {
        return Err(stream.error(match snapshot.oldest_kept {
            None => format!("no sample at or before {time} s yet"),
            Some(oldest) => format!(
                "the samples at or before {time} s are no longer kept: the stream keeps samples from {oldest} s on ({})",
                kept(snapshot)
            ),
        }));
    }
    let current = snapshot.first_number + snapshot.times.len() as u64 - 1;
    let mut picks = Vec::with_capacity(stream.offsets.len());
    let mut valid = Vec::with_capacity(stream.offsets.len());
    for &offset in &stream.offsets {
        let number = current as i64 + offset;
        valid.push(number >= 0);
        let number = number.max(0) as u64;
        let value = match number.checked_sub(snapshot.first_number) {
            Some(at) => &snapshot.values[at as usize],
            None if number == 0 => &snapshot.first.as_ref().ok_or_else(|| stream.error("no first sample".into()))?.1,
            None => {
                return Err(stream.error(format!(
                "offset {offset} reaches sample {number} of the episode, older than the oldest kept ({}, at {} s; {})",
                snapshot.first_number,
                snapshot.times[0],
                kept(snapshot)
            )))
            }
        };
        picks.push(value);
    }
    let part = match stream.form {
        Form::Camera { .. } => Part::Frames(
            picks
                .into_iter()
                .map(|value| match value {
                    Value::Frame(frame) => Ok(Some(frame.clone())),
                    Value::Row(_) => Err(stream.error("a row in a camera stream".into())),
                })
                .collect::<Result<_>>()?,
        ),
        _ => {
            let mut bytes = Vec::new();
            for value in picks {
                let Value::Row(row) = value else { return Err(stream.error("a frame in a row stream".into())) };
                bytes.extend_from_slice(row);
            }
            Part::Rows { dtype: stream.dtype, bytes }
        }
    };
    Ok((part, valid))
}

/// What a stream keeps, for errors about what it no longer holds.
fn kept(snapshot: &RingSnapshot) -> String {
    let limits = snapshot.limits;
    match snapshot.dropped_for_bytes {
        true => format!(
            "it reached its bound of {} bytes (LiveOptions::ring_bytes) and dropped its oldest samples: they came \
             faster, or larger, than the bound holds over the window's span",
            limits.max_bytes
        ),
        false => format!(
            "it keeps {} s back from its latest sample: the window's history and LiveOptions::lookback_s",
            limits.span_s
        ),
    }
}

/// `data` `[S, channels]` at `times` resampled onto `targets` by the
/// loader's reference (`robocache_cpu::resample_into`, clamped edges).
fn resample<T: robocache_cpu::Element>(
    data: &[T],
    times: &[f64],
    channels: usize,
    targets: &[f64],
    methods: &robocache_cpu::ChannelSpec,
    out: &mut [T],
    valid: &mut [bool],
) -> Result<()> {
    let spec = ResampleSpec { channels: methods.clone(), boundary: Boundary::Clamp, trusted: true };
    let source = Stream { data, shape: [1, times.len(), channels], times: Times::Shared(times), lengths: None };
    robocache_cpu::resample_into(
        &source,
        &Targets { times: Times::Shared(targets), len: targets.len() },
        &spec,
        out,
        valid,
    )?;
    Ok(())
}

/// A window of padding: zeros (the padding frame for cameras).
fn padding(stream: &LiveStream, steps: usize) -> Part {
    match stream.form {
        Form::Camera { .. } => Part::Frames(vec![None; steps]),
        _ => Part::Rows { dtype: DType::F32, bytes: vec![0u8; steps * stream.channels * 4] },
    }
}

/// Every entry on the live device: the rows, masks (as the spec's mask
/// kind says) and `dim_is_pad` rows in one upload; stacked frames as they are.
fn place(live: &Live, time: f64, entries: Vec<Entry>) -> Result<LiveWindow> {
    let mut layout = Vec::new();
    let mut shapes = Vec::new();
    let mut names = Vec::new();
    for entry in &entries {
        let steps = entry.valid.len();
        if let Part::Rows { dtype, bytes } = &entry.part {
            layout.push((*dtype, bytes.len() / dtype.size_in_bytes()));
            let mut shape = vec![1, steps];
            shape.extend(&entry.step_shape);
            shapes.push(shape);
            names.push(entry.name.as_str());
        }
        layout.push((DType::Bool, steps));
        shapes.push(vec![1, steps]);
        names.push(entry.name.as_str());
        if let Some(dims) = &entry.dims {
            layout.push((DType::Bool, dims.len()));
            shapes.push(vec![1, dims.len()]);
            names.push(entry.name.as_str());
        }
    }
    let mut upload = BatchUpload::new(&live.device, &layout)?;
    let mut at = 0;
    for entry in &entries {
        if let Part::Rows { bytes, .. } = &entry.part {
            upload.part_mut(at).copy_from_slice(bytes);
            at += 1;
        }
        let mask = match live.masks {
            MaskKind::Valid => entry.valid.clone(),
            MaskKind::Pad => entry.valid.iter().map(|v| !v).collect(),
        };
        upload.set_flags(at, mask)?;
        at += 1;
        if let Some(dims) = &entry.dims {
            upload.set_flags(at, dims.clone())?;
            at += 1;
        }
    }
    let mut placed = upload.into_tensors(&live.device, &shapes, &names)?.into_iter();
    let mut streams = Vec::with_capacity(entries.len());
    let mut dim_is_pad = Vec::new();
    for entry in entries {
        let data = match entry.part {
            Part::Rows { .. } => placed.next(),
            Part::Tensor(tensor) => Some(tensor),
            Part::Frames(_) => None,
        };
        let (Some(data), Some(mask)) = (data, placed.next()) else {
            return Err(Error::Internal(format!("live stream `{}`: its upload has no part", entry.name)));
        };
        if entry.dims.is_some() {
            let dims =
                placed.next().ok_or_else(|| Error::Internal(format!("live stream `{}`: no dims", entry.name)))?;
            dim_is_pad.push(dims);
        }
        streams.push(BatchStream { name: entry.name, data, mask, mask_kind: live.masks });
    }
    Ok(LiveWindow { time, streams, dim_is_pad })
}

//! One live window: each stream's rows (resampled from its ring by the
//! loader's rules) or frame picks, then placed on the live device — every
//! row and mask in one upload, the frames stacked there.

use robocache_cpu::{Boundary, DType, ResampleSpec, Stream, Targets, Times};

use super::ring::{End, RingSnapshot, Value};
use super::{Clock, Form, Live, LiveStream, LiveWindow};
use crate::batch_buffer::BatchUpload;
use crate::loader::MaskKind;
use crate::windows::causal::apply_causal_rule;
use crate::{BatchStream, Error, Result, Tensor};

/// One stream's part of a window, before it is placed on the device.
enum Part {
    /// `T` rows of bytes in `dtype`.
    Rows { dtype: DType, bytes: Vec<u8> },
    /// `T` frames (`None`: the padding frame).
    Frames(Vec<Option<Tensor>>),
}

/// The window of `live` at `time`.
pub(super) fn compute(live: &Live, time: f64) -> Result<LiveWindow> {
    let mut parts = Vec::with_capacity(live.streams.len());
    for stream in &live.streams {
        let (part, valid) = match live.clock {
            Clock::Times(spec) => {
                let targets: Vec<f64> = spec.targets(time).into_iter().take(spec.history + 1).collect();
                let end = match spec.causal {
                    true => End::AtOrBefore(time),
                    false => End::FirstAtOrAfter(time),
                };
                let snapshot = stream.with_ring(|ring| ring.snapshot(targets[0], end))?;
                time_part(stream, &snapshot, &targets, spec.causal, time)?
            }
            Clock::Deltas { tolerance_s } => {
                let back = stream.offsets.iter().map(|d| d.unsigned_abs() as usize).max().unwrap_or(0);
                let snapshot = stream.with_ring(|ring| ring.snapshot_last(time + tolerance_s, back + 1))?;
                delta_part(stream, &snapshot, time)?
            }
        };
        let mask = match live.masks {
            MaskKind::Valid => valid,
            MaskKind::Pad => valid.into_iter().map(|v| !v).collect(),
        };
        parts.push((stream, part, mask));
    }
    place(live, time, parts)
}

impl LiveStream {
    fn with_ring<T>(&self, read: impl FnOnce(&super::ring::SampleRing) -> T) -> Result<T> {
        Ok(read(&self.lock()?.ring))
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
    // The samples the window reads: the ring's, led by the episode's first
    // sample when the window reaches before the ring and the ring dropped it.
    let (mut times, mut values): (Vec<f64>, Vec<&Value>) = (snapshot.times.clone(), snapshot.values.iter().collect());
    if let (Some(&oldest), Some((first_time, first_value))) = (times.first(), &snapshot.first) {
        if snapshot.first_number > 0 && targets[0] < oldest {
            if targets[0] >= *first_time {
                return Err(stream.error(format!(
                    "the window at {time} s reaches back to {} s, before the oldest sample kept ({oldest} s): \
                     samples came faster than in training",
                    targets[0]
                )));
            }
            times.insert(0, *first_time);
            values.insert(0, first_value);
        }
    }
    if times.is_empty() {
        // Causal, nothing at or before the window yet: padding throughout.
        return Ok((padding(stream, steps), vec![false; steps]));
    }
    let first = snapshot.first.as_ref().map(|(t, _)| *t);
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
        return Err(stream.error(match snapshot.first_number {
            0 => format!("no sample at or before {time} s yet"),
            _ => format!("the samples at or before {time} s are no longer kept: asked for a window too far back"),
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
                    "offset {offset} reaches sample {number} of the episode, older than the oldest kept ({})",
                    snapshot.first_number
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

/// Every part on the live device: the rows and masks in one upload, the
/// frames stacked from those kept there.
fn place(live: &Live, time: f64, parts: Vec<(&LiveStream, Part, Vec<bool>)>) -> Result<LiveWindow> {
    let mut layout = Vec::new();
    let mut shapes = Vec::new();
    let mut names = Vec::new();
    for (stream, part, mask) in &parts {
        let steps = mask.len();
        if let Part::Rows { dtype, bytes } = part {
            layout.push((*dtype, bytes.len() / dtype.size_in_bytes()));
            let mut shape = vec![1, steps];
            shape.extend(&stream.step_shape);
            shapes.push(shape);
            names.push(stream.name.as_str());
        }
        layout.push((DType::Bool, steps));
        shapes.push(vec![1, steps]);
        names.push(stream.name.as_str());
    }
    let mut upload = BatchUpload::new(&live.device, &layout)?;
    let mut at = 0;
    for (_, part, mask) in &parts {
        if let Part::Rows { bytes, .. } = part {
            upload.part_mut(at).copy_from_slice(bytes);
            at += 1;
        }
        upload.set_flags(at, mask.clone())?;
        at += 1;
    }
    let mut placed = upload.into_tensors(&live.device, &shapes, &names)?.into_iter();
    let mut streams = Vec::with_capacity(parts.len());
    for (stream, part, _) in parts {
        let data = match part {
            Part::Rows { .. } => placed.next(),
            Part::Frames(frames) => {
                let zero = stream.zero_frame.as_ref().ok_or_else(|| stream.error("no padding frame".into()))?;
                let picks: Vec<(&Tensor, usize)> = frames.iter().map(|f| (f.as_ref().unwrap_or(zero), 0)).collect();
                let stacked = live.device.stack_frames(&picks, live.frames.layout, live.frames.dtype)?;
                let mut shape = vec![1];
                shape.extend(stacked.shape());
                Some(stacked.reshape(&shape)?)
            }
        };
        let (Some(data), Some(mask)) = (data, placed.next()) else {
            return Err(Error::Internal(format!("live stream `{}`: its upload has no part", stream.name)));
        };
        streams.push(BatchStream { name: stream.name.clone(), data, mask, mask_kind: live.masks });
    }
    Ok(LiveWindow { time, streams })
}

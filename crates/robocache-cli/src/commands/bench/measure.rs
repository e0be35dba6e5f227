//! How a call is timed: warm-up calls, then for each repeat the device's
//! caches are evicted (a queued read of twice the L2 size, which also lets
//! the host queue the call before the device reaches it), a mark, the call, a
//! mark; the time is the span between the marks (CUDA events on a GPU, wall
//! time on the CPU). Inputs also rotate over several copies, so no call
//! reuses the previous call's inputs.

use anyhow::Result;
use robocache::timing::Mark;
use robocache::{Device, Tensor};

use super::workloads::{Inputs, Workload};

/// Summary of one workload's timed calls, in µs.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Times {
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub repeats: usize,
}

impl Times {
    pub fn from_samples(mut samples: Vec<f64>) -> Times {
        samples.sort_by(f64::total_cmp);
        let n = samples.len().max(1);
        let median_us = if samples.is_empty() {
            f64::NAN
        } else if n % 2 == 1 {
            samples[n / 2]
        } else {
            0.5 * (samples[n / 2 - 1] + samples[n / 2])
        };
        Times {
            median_us,
            min_us: samples.first().copied().unwrap_or(f64::NAN),
            max_us: samples.last().copied().unwrap_or(f64::NAN),
            repeats: samples.len(),
        }
    }
}

/// Copies of the inputs to rotate over: enough to pass `rotate_bytes`, at
/// most 8, at least 1.
pub fn rotated_inputs(device: &Device, workload: &Workload, rotate_bytes: u64) -> Result<Vec<Inputs>> {
    let first = (workload.make_inputs)(device)?;
    let bytes: u64 = first.iter().map(|(_, t)| t.size_in_bytes() as u64).sum();
    let copies = rotate_bytes.div_ceil(bytes.max(1)).clamp(1, 8) as usize;
    let mut sets = Vec::with_capacity(copies);
    for _ in 1..copies {
        sets.push(first.iter().map(|(name, t)| Ok((name.clone(), t.duplicate()?))).collect::<Result<Inputs>>()?);
    }
    sets.insert(0, first);
    Ok(sets)
}

/// Times `call` on `sets` in rotation: `warmup` untimed calls, then `repeats` timed ones.
pub fn time_calls(
    device: &Device,
    sets: &[Inputs],
    warmup: usize,
    repeats: usize,
    call: &dyn Fn(&Device, &Inputs) -> Result<Inputs>,
) -> Result<Times> {
    for i in 0..warmup {
        call(device, &sets[i % sets.len()])?;
    }
    device.synchronize()?;
    let mut marks: Vec<(Mark, Mark)> = Vec::with_capacity(repeats);
    for i in 0..repeats.max(1) {
        device.evict_caches()?;
        let start = device.mark()?;
        let outputs = call(device, &sets[i % sets.len()])?;
        let end = device.mark()?;
        // Outputs are freed in stream order, after the end mark.
        drop(outputs);
        marks.push((start, end));
    }
    device.synchronize()?;
    let samples = marks
        .iter()
        .map(|(start, end)| Ok(start.elapsed_until(end)?.as_secs_f64() * 1e6))
        .collect::<Result<Vec<_>>>()?;
    Ok(Times::from_samples(samples))
}

/// Device-to-device copy bandwidth (bytes read + written per second) of a
/// `bytes`-byte buffer, median of 10 copies.
pub fn copy_bandwidth(device: &Device, bytes: usize) -> Result<f64> {
    let source = Tensor::from_slice(device, &vec![1u8; bytes], &[bytes])?;
    let copy = |_: &Device, inputs: &Inputs| -> Result<Inputs> { Ok(vec![("copy".into(), inputs[0].1.duplicate()?)]) };
    let times = time_calls(device, &[vec![("source".into(), source)]], 2, 10, &copy)?;
    Ok(2.0 * bytes as f64 / (times.median_us * 1e-6))
}

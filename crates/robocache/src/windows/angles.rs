//! Angle channels unwrapped along each window before resampling, so that a
//! window's result is continuous and equals the angle modulo 2π.

use robocache_cpu::{DType, Element};
use robocache_datasets::StreamInfo;

use crate::{Error, Result};

/// Unwraps the angle channels of the `rows` samples in `data` (the bytes
/// of a float stream) in place: each step's jump is brought into [−π, π] by
/// whole turns.
pub(super) fn unwrap_angles(name: &str, data: &mut [u8], rows: usize, info: &StreamInfo) -> Result<()> {
    let channels = info.channels().max(1);
    let ranges = info.kind.angle_channels(channels);
    if ranges.is_empty() || rows < 2 {
        return Ok(());
    }
    fn typed<T: Element + bytemuck::Pod>(data: &mut [u8], channels: usize, ranges: &[std::ops::Range<usize>]) {
        match bytemuck::try_cast_slice_mut::<u8, T>(data) {
            Ok(values) => unwrap_angle_channels(values, channels, ranges),
            // Batch buffers are allocated for their dtype and every row
            // starts at a multiple of the element size.
            Err(_) => {
                let mut values = vec![T::zeroed(); data.len() / size_of::<T>()];
                bytemuck::cast_slice_mut::<T, u8>(&mut values).copy_from_slice(data);
                unwrap_angle_channels(&mut values, channels, ranges);
                data.copy_from_slice(bytemuck::cast_slice(&values));
            }
        }
    }
    match info.dtype {
        DType::F16 => typed::<robocache_cpu::half::f16>(data, channels, &ranges),
        DType::BF16 => typed::<robocache_cpu::half::bf16>(data, channels, &ranges),
        DType::F32 => typed::<f32>(data, channels, &ranges),
        DType::F64 => typed::<f64>(data, channels, &ranges),
        other => {
            return Err(Error::Dataset(robocache_datasets::Error::Invalid(format!(
                "stream `{name}` has angle channels but dtype {other}: angles need a float dtype"
            ))))
        }
    }
    Ok(())
}

/// Unwraps the angle channels `ranges` of row-major `[rows, channels]` data
/// in place: each row's jump from the previous row is brought into [−π, π]
/// by whole turns (integer data is left as it is).
pub(crate) fn unwrap_angle_channels<T: Element>(v: &mut [T], channels: usize, ranges: &[std::ops::Range<usize>]) {
    let mut unwrap = AngleUnwrap::new(ranges);
    for row in v.chunks_exact_mut(channels.max(1)) {
        unwrap.next_row(row);
    }
}

/// Angle unwrapping one row at a time, as rows arrive (live samples): the
/// same arithmetic as [`unwrap_angle_channels`] over the rows so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct AngleUnwrap {
    /// `(channel, previous original value, correction)`.
    channels: Vec<(usize, f64, f64)>,
    started: bool,
}

impl AngleUnwrap {
    /// An unwrapper of the channels `ranges`, before its first row.
    pub(crate) fn new(ranges: &[std::ops::Range<usize>]) -> Self {
        AngleUnwrap { channels: ranges.iter().flat_map(|r| r.clone()).map(|c| (c, 0.0, 0.0)).collect(), started: false }
    }

    /// Unwraps the next row in place.
    pub(crate) fn next_row<T: Element>(&mut self, row: &mut [T]) {
        const TURN: f64 = 2.0 * std::f64::consts::PI;
        for (c, previous, correction) in &mut self.channels {
            let Some(at) = row.get_mut(*c) else { continue };
            let original = at.to_f64();
            if self.started {
                *correction -= TURN * ((original - *previous) / TURN).round();
                if *correction != 0.0 {
                    *at = T::from_f64_rounded(original + *correction).unwrap_or(*at);
                }
            }
            *previous = original;
        }
        self.started = true;
    }
}

#[cfg(test)]
mod tests {
    use super::unwrap_angle_channels;

    #[test]
    fn angles_unwrap_by_whole_turns() {
        use std::f32::consts::PI;
        // [3 rows, 2 channels], channel 0 an angle crossing ±π twice.
        let mut v = vec![3.0f32, 0.0, -3.0, 1.0, 3.1, 2.0];
        let angles = std::iter::once(0..1).collect::<Vec<_>>();
        unwrap_angle_channels(&mut v, 2, &angles);
        assert!((v[2] - (-3.0 + 2.0 * PI)).abs() < 1e-6, "{v:?}");
        assert_eq!((v[0], v[4]), (3.0, 3.1));
        assert_eq!((v[1], v[3], v[5]), (0.0, 1.0, 2.0), "other channels are left alone");
    }
}

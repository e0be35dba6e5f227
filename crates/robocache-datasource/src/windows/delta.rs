//! Windows with the semantics of LeRobot's `delta_timestamps`
//! (`LeRobotDataset(delta_timestamps={key: [offsets in s]})`,
//! docs/datasets.md):
//!
//! - every frame of every episode is one sample, numbered episode by
//!   episode (LeRobot's dataset index, over the episodes opened);
//! - a key's offsets become frame offsets `round(offset * fps)` (Python's
//!   `round`: half to even), after checking that each offset lies within
//!   `tolerance_s` of a multiple of `1 / fps`
//!   (`|o·fps − round(o·fps)| / fps ≤ tolerance_s`);
//! - for the sample at frame `i` of an episode of length `L`, offset `d`
//!   reads row `clamp(i + d, 0, L − 1)`, and `<key>_is_pad` is true where
//!   `i + d` lies outside `0..L`.
//!
//! Any dataset with a step clock works (its rate is the fps); for LeRobot
//! datasets this is `LeRobotDataset.__getitem__`'s choice of rows exactly.

use robocache_video::FrameFormat;

use crate::dataset::DatasetReader;
use crate::model::DatasetInfo;
use crate::{Error, Result};

/// LeRobot's default `tolerance_s`.
pub const DEFAULT_TOLERANCE_S: f64 = 1e-4;

/// `delta_timestamps`: offsets in seconds per stream, and the tolerance.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaTimestamps {
    /// `(stream, offsets in seconds)`, in the order batches hold them.
    pub deltas: Vec<(String, Vec<f64>)>,
    /// How far an offset may lie from a multiple of `1 / fps`.
    pub tolerance_s: f64,
}

impl DeltaTimestamps {
    /// `deltas` with LeRobot's default tolerance (1e-4 s).
    pub fn new(deltas: Vec<(String, Vec<f64>)>) -> Self {
        DeltaTimestamps { deltas, tolerance_s: DEFAULT_TOLERANCE_S }
    }
}

/// One sample: an episode and a frame in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaWindow {
    pub sample: usize,
    pub episode: usize,
    /// The frame inside the episode (LeRobot's `frame_index`).
    pub frame: usize,
    /// The episode's length.
    pub len: usize,
}

impl DeltaWindow {
    /// The row read for frame offset `offset` and whether it is padding.
    pub fn row(&self, offset: i64) -> (usize, bool) {
        let target = self.frame as i64 + offset;
        let last = self.len as i64 - 1;
        (target.clamp(0, last) as usize, target < 0 || target > last)
    }
}

/// The samples of a dataset under `delta_timestamps`.
#[derive(Clone, Debug)]
pub struct DeltaWindows {
    spec: DeltaTimestamps,
    fps: f64,
    /// Frame offsets per stream, in the spec's order.
    offsets: Vec<Vec<i64>>,
    /// The first sample of each episode, and the total at the end.
    starts: Vec<usize>,
    lengths: Vec<usize>,
}

/// Python's `round(x)` for the floats an offset times fps gives: the
/// nearest integer, ties to even.
fn round_half_even(x: f64) -> f64 {
    x.round_ties_even()
}

impl DeltaWindows {
    /// Checks the offsets against the dataset's rate (`info.rate_hz`, a
    /// LeRobot dataset's fps) and numbers the samples.
    pub fn new(info: &DatasetInfo, spec: &DeltaTimestamps) -> Result<Self> {
        let fps = info.rate_hz;
        if !(spec.tolerance_s.is_finite() && spec.tolerance_s >= 0.0) {
            return Err(Error::Invalid(format!("tolerance_s {} is not a tolerance in seconds", spec.tolerance_s)));
        }
        let mut offsets = Vec::with_capacity(spec.deltas.len());
        for (stream, deltas) in &spec.deltas {
            if deltas.is_empty() {
                return Err(Error::Invalid(format!("delta_timestamps[`{stream}`] is empty")));
            }
            if let Some(first) = info.episodes.first() {
                if first.stream(stream).is_none() {
                    return Err(Error::UnknownStream {
                        stream: stream.clone(),
                        scope: format!("episode `{}` of {}", first.name, info.path.display()),
                        available: first.streams.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "),
                    });
                }
            }
            let mut frames = Vec::with_capacity(deltas.len());
            let mut outside = Vec::new();
            for &delta in deltas {
                let scaled = delta * fps;
                if !scaled.is_finite() || scaled.abs() > 1e15 {
                    return Err(Error::Invalid(format!("delta_timestamps[`{stream}`]: {delta} s is not an offset")));
                }
                let rounded = round_half_even(scaled);
                if (scaled - rounded).abs() / fps > spec.tolerance_s {
                    outside.push(delta);
                }
                frames.push(rounded as i64);
            }
            if !outside.is_empty() {
                return Err(Error::Invalid(format!(
                    "delta_timestamps[`{stream}`]: {outside:?} s are not multiples of 1/fps = 1/{fps} within tolerance_s = {} (as LeRobot's check_delta_timestamps)",
                    spec.tolerance_s
                )));
            }
            offsets.push(frames);
        }
        let lengths: Vec<usize> = info.episodes.iter().map(|e| e.len).collect();
        let mut starts = Vec::with_capacity(lengths.len() + 1);
        let mut total = 0usize;
        for &len in &lengths {
            starts.push(total);
            total += len;
        }
        starts.push(total);
        Ok(DeltaWindows { spec: spec.clone(), fps, offsets, starts, lengths })
    }

    /// Samples: every frame of every episode.
    pub fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    /// True when the dataset has no frames.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the windows were made from.
    pub fn spec(&self) -> &DeltaTimestamps {
        &self.spec
    }

    /// The rate the offsets were converted with.
    pub fn fps(&self) -> f64 {
        self.fps
    }

    /// The frame offsets of the `i`-th stream of the spec.
    pub fn offsets(&self, i: usize) -> &[i64] {
        &self.offsets[i]
    }

    /// The frame offsets of `stream`, when the spec names it.
    pub fn offsets_of(&self, stream: &str) -> Option<&[i64]> {
        self.spec.deltas.iter().position(|(s, _)| s == stream).map(|i| self.offsets[i].as_slice())
    }

    /// Sample `sample`.
    pub fn window(&self, sample: usize) -> Result<DeltaWindow> {
        if sample >= self.len() {
            return Err(Error::Invalid(format!("sample {sample} is out of range: there are {} samples", self.len())));
        }
        let episode = self.starts.partition_point(|&s| s <= sample) - 1;
        Ok(DeltaWindow { sample, episode, frame: sample - self.starts[episode], len: self.lengths[episode] })
    }

    /// The first sample of `episode`.
    pub fn first_sample(&self, episode: usize) -> Option<usize> {
        self.starts.get(episode).copied().filter(|_| episode < self.lengths.len())
    }
}

impl DatasetReader {
    /// The rows of `stream` that `window` reads at frame offsets `offsets`,
    /// as bytes into `out` (`offsets.len()` rows, see
    /// [`DatasetReader::read_rows_into`]), and the pad mask (true where the row
    /// was clamped into the episode). The rows between the first and the
    /// last are read once, in one request.
    pub fn read_delta_window_into(
        &self,
        window: &DeltaWindow,
        stream: &str,
        offsets: &[i64],
        out: &mut [u8],
    ) -> Result<Vec<bool>> {
        let rows: Vec<(usize, bool)> = offsets.iter().map(|&d| window.row(d)).collect();
        let (Some(low), Some(high)) = (rows.iter().map(|r| r.0).min(), rows.iter().map(|r| r.0).max()) else {
            return Ok(Vec::new());
        };
        let row_bytes = self.stream(window.episode, stream)?.1.step_bytes();
        if out.len() != rows.len() * row_bytes {
            return Err(Error::Invalid(format!(
                "a window of {} rows of `{stream}` is {} bytes, the buffer given has {}",
                rows.len(),
                rows.len() * row_bytes,
                out.len()
            )));
        }
        let mut span = vec![0u8; (high + 1 - low) * row_bytes];
        self.read_rows_into(window.episode, stream, low..high + 1, &mut span)?;
        for ((row, _), chunk) in rows.iter().zip(out.chunks_exact_mut(row_bytes.max(1))) {
            chunk.copy_from_slice(&span[(row - low) * row_bytes..(row + 1 - low) * row_bytes]);
        }
        Ok(rows.into_iter().map(|(_, pad)| pad).collect())
    }
}

impl DatasetReader {
    /// [`DatasetReader::read_delta_window_into`] for a batch of windows at once:
    /// `windows.len() × offsets.len()` rows of `stream` into `out`, window
    /// after window, and their pad masks. Camera video is read for the whole
    /// batch in one request ([`DatasetReader::read_rows_at_into`]: neighbouring
    /// windows share the decoding of their groups of pictures, only the
    /// frames the offsets name are decoded); other streams window by window.
    pub fn read_delta_windows_into(
        &self,
        windows: &[DeltaWindow],
        stream: &str,
        offsets: &[i64],
        out: &mut [u8],
    ) -> Result<Vec<bool>> {
        let Some(first) = windows.first() else {
            return Ok(Vec::new());
        };
        let info = self.stream(first.episode, stream)?.1;
        let window_bytes = offsets.len() * info.step_bytes();
        if out.len() != windows.len() * window_bytes {
            return Err(Error::Invalid(format!(
                "{} windows of {} rows of `{stream}` are {} bytes, the buffer given has {}",
                windows.len(),
                offsets.len(),
                windows.len() * window_bytes,
                out.len()
            )));
        }
        if !info.is_image() {
            let mut pads = Vec::with_capacity(windows.len() * offsets.len());
            for (window, chunk) in windows.iter().zip(out.chunks_exact_mut(window_bytes.max(1))) {
                pads.extend(self.read_delta_window_into(window, stream, offsets, chunk)?);
            }
            return Ok(pads);
        }
        self.read_rows_at_into(stream, &delta_rows(windows, offsets), out)?;
        Ok(delta_pads(windows, offsets))
    }

    /// [`DatasetReader::read_delta_windows_into`] for a video stream, its frames
    /// as `format` says ([`DatasetReader::read_video_frames_at_into`]): the whole
    /// batch in one request, window after window, and the pad masks.
    pub fn read_delta_frames_into(
        &self,
        windows: &[DeltaWindow],
        stream: &str,
        offsets: &[i64],
        format: FrameFormat,
        out: &mut [u8],
    ) -> Result<Vec<bool>> {
        self.read_video_frames_at_into(stream, &delta_rows(windows, offsets), format, out)?;
        Ok(delta_pads(windows, offsets))
    }
}

/// `(episode, row)` of every offset of every window, window after window.
fn delta_rows(windows: &[DeltaWindow], offsets: &[i64]) -> Vec<(usize, usize)> {
    windows.iter().flat_map(|w| offsets.iter().map(move |&d| (w.episode, w.row(d).0))).collect()
}

/// The pad flag of every offset of every window, window after window.
fn delta_pads(windows: &[DeltaWindow], offsets: &[i64]) -> Vec<bool> {
    windows.iter().flat_map(|w| offsets.iter().map(move |&d| w.row(d).1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::windows::test_info as info;

    #[test]
    fn offsets_round_as_python_and_rows_clamp_with_pad() {
        let info = info(&[3, 5], 10.0);
        let spec = DeltaTimestamps::new(vec![("action".into(), vec![-0.2, -0.1, 0.0, 0.1, 0.25 - 0.05])]);
        let windows = DeltaWindows::new(&info, &spec).unwrap();
        assert_eq!(windows.offsets(0), [-2, -1, 0, 1, 2]);
        assert_eq!(windows.len(), 8);
        let w = windows.window(4).unwrap();
        assert_eq!((w.episode, w.frame, w.len), (1, 1, 5));
        let rows: Vec<_> = windows.offsets(0).iter().map(|&d| w.row(d)).collect();
        assert_eq!(rows, [(0, true), (0, false), (1, false), (2, false), (3, false)]);
        assert!(windows.window(8).is_err());
        // 0.5 frames is a tie: Python rounds it to 0, and the tolerance rejects it.
        assert_eq!(round_half_even(0.5), 0.0);
        assert_eq!(round_half_even(2.5), 2.0);
        assert_eq!(round_half_even(-1.5), -2.0);
        let err = DeltaWindows::new(&info, &DeltaTimestamps::new(vec![("action".into(), vec![0.05])])).unwrap_err();
        assert!(err.to_string().contains("0.05"), "{err}");
        let err = DeltaWindows::new(&info, &DeltaTimestamps::new(vec![("nope".into(), vec![0.0])])).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }
}

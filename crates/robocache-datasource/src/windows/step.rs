//! Step windows with the semantics of robomimic's `SequenceDataset`
//! (docs/datasets.md). A sample anchored at step `i` of a demo of length `L` covers
//! steps `i - (frame_stack - 1)` to `i + seq_length - 1`. With
//! `pad_frame_stack` / `pad_seq_length`, steps before 0 or past `L - 1`
//! repeat the edge step and the pad mask is false there; without, anchors
//! are restricted so no padding is needed. Samples are numbered demo by
//! demo, anchors in step order.
//!
//! Diffusion policy's `SequenceSampler(sequence_length, pad_before,
//! pad_after)` windows are the same windows with a bound on the padding at
//! the end ([`StepWindowSpec::sequence`]): `frame_stack = pad_before + 1`,
//! `seq_length = sequence_length - pad_before`, and at most `pad_after`
//! padded steps past the end.

use robocache_cpu::{with_host_data, Element, HostVec};

use crate::dataset::DatasetReader;
use crate::model::DatasetInfo;
use crate::{Error, Result};

/// The options of robomimic's `SequenceDataset` that shape a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepWindowSpec {
    /// Steps from the anchor on (≥ 1).
    pub seq_length: usize,
    /// Steps up to and including the anchor (≥ 1); `frame_stack - 1` come before it.
    pub frame_stack: usize,
    /// Allow windows that run past the end, padded with the last step.
    pub pad_seq_length: bool,
    /// Allow windows that start before step 0, padded with the first step.
    pub pad_frame_stack: bool,
    /// With `pad_seq_length`, at most this many padded steps past the end
    /// (diffusion policy's `pad_after`); `None`: up to `seq_length - 1`, as
    /// robomimic pads. An episode too short for any window then has none,
    /// as `SequenceSampler` gives it none.
    pub max_pad_after: Option<usize>,
}

impl Default for StepWindowSpec {
    /// robomimic's defaults: one step, no stacking, padding allowed.
    fn default() -> Self {
        StepWindowSpec {
            seq_length: 1,
            frame_stack: 1,
            pad_seq_length: true,
            pad_frame_stack: true,
            max_pad_after: None,
        }
    }
}

impl StepWindowSpec {
    /// Diffusion policy's `SequenceSampler` windows: every run of
    /// `sequence_length` steps that starts at most `pad_before` steps
    /// before an episode and ends at most `pad_after` steps past it, the
    /// missing steps repeating the first or last, numbered episode by
    /// episode from the earliest start. As `SequenceSampler`, `pad_before`
    /// and `pad_after` are clamped to `sequence_length - 1`.
    ///
    /// ```
    /// use robocache_datasource::StepWindowSpec;
    ///
    /// // diffusion policy's PushT: horizon 16, 2 observation steps, 8 actions.
    /// let spec = StepWindowSpec::sequence(16, 1, 7);
    /// assert_eq!((spec.frame_stack, spec.seq_length, spec.max_pad_after), (2, 15, Some(7)));
    /// assert_eq!(spec.window_len(), 16);
    /// ```
    pub fn sequence(sequence_length: usize, pad_before: usize, pad_after: usize) -> Self {
        let most = sequence_length.saturating_sub(1);
        let pad_before = pad_before.min(most);
        StepWindowSpec {
            seq_length: sequence_length - pad_before,
            frame_stack: pad_before + 1,
            pad_seq_length: true,
            pad_frame_stack: true,
            max_pad_after: Some(pad_after.min(most)),
        }
    }

    /// Steps in one window: `frame_stack - 1 + seq_length`.
    pub fn window_len(&self) -> usize {
        self.frame_stack - 1 + self.seq_length
    }
}

/// One sample: which rows to read and how to pad them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepWindow {
    /// The sample number.
    pub sample: usize,
    /// The episode index in the dataset.
    pub episode: usize,
    /// The anchor step inside the episode (robomimic's `index_in_demo`).
    pub step: usize,
    /// The rows read from the file: `step - (frame_stack - 1)` to
    /// `step + seq_length`, clamped to the episode.
    pub rows: std::ops::Range<usize>,
    /// Copies of the first row before `rows`.
    pub pad_before: usize,
    /// Copies of the last row after `rows`.
    pub pad_after: usize,
}

impl StepWindow {
    /// Steps in the window.
    pub fn len(&self) -> usize {
        self.pad_before + self.rows.len() + self.pad_after
    }

    /// Never true: a window has at least one step.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True where the step is real, false where it is padding.
    pub fn pad_mask(&self) -> Vec<bool> {
        let mut mask = vec![false; self.pad_before];
        mask.extend(std::iter::repeat_n(true, self.rows.len()));
        mask.extend(std::iter::repeat_n(false, self.pad_after));
        mask
    }

    /// The episode row shown at each step of the window (edges repeated).
    pub fn source_rows(&self) -> Vec<usize> {
        let mut rows = vec![self.rows.start; self.pad_before];
        rows.extend(self.rows.clone());
        rows.extend(std::iter::repeat_n(self.rows.end - 1, self.pad_after));
        rows
    }
}

#[derive(Clone, Debug)]
struct EpisodeSamples {
    episode: usize,
    first_sample: usize,
    count: usize,
    len: usize,
}

/// The samples of a dataset for one [`StepWindowSpec`].
#[derive(Clone, Debug)]
pub struct StepWindows {
    spec: StepWindowSpec,
    episodes: Vec<EpisodeSamples>,
    total: usize,
}

impl StepWindows {
    /// Numbers the samples of every episode. Without `pad_seq_length`, an
    /// episode shorter than the window is an error naming it (robomimic
    /// asserts); with `pad_seq_length`, every episode has at least one sample.
    pub fn new(info: &DatasetInfo, spec: &StepWindowSpec) -> Result<Self> {
        if spec.seq_length == 0 || spec.frame_stack == 0 {
            return Err(Error::Invalid(format!(
                "seq_length ({}) and frame_stack ({}) must be at least 1",
                spec.seq_length, spec.frame_stack
            )));
        }
        let mut episodes = Vec::with_capacity(info.episodes.len());
        let mut total = 0usize;
        for (index, episode) in info.episodes.iter().enumerate() {
            let len = episode.len;
            let mut count = len as i64;
            if !spec.pad_frame_stack {
                count -= spec.frame_stack as i64 - 1;
            }
            if !spec.pad_seq_length {
                count -= spec.seq_length as i64 - 1;
            }
            let needed = if spec.pad_frame_stack { 1 } else { spec.frame_stack }
                + if spec.pad_seq_length { 0 } else { spec.seq_length - 1 };
            // With pad_seq_length robomimic keeps at least one sample, but the
            // anchor must still be a real step: frame_stack - 1 < len.
            if let (true, Some(pad_after)) = (spec.pad_seq_length, spec.max_pad_after) {
                // SequenceSampler's starts: anchors up to `len - seq_length +
                // pad_after`, the padding at most the window less one real step.
                let pad_after = pad_after.min(spec.window_len() - 1) as i64;
                let first = if spec.pad_frame_stack { 0 } else { spec.frame_stack as i64 - 1 };
                let last = len as i64 - spec.seq_length as i64 + pad_after;
                // An empty episode has no step to show: no window.
                let count = if len == 0 { 0 } else { (last - first + 1).max(0) as usize };
                episodes.push(EpisodeSamples { episode: index, first_sample: total, count, len });
                total += count;
                continue;
            }
            if spec.pad_seq_length {
                count = count.max(1);
            }
            if len < needed.max(1) {
                return Err(Error::EpisodeTooShort {
                    episode: episode.name.clone(),
                    length: len,
                    needed: needed.max(1),
                    frame_stack: spec.frame_stack,
                    seq_length: spec.seq_length,
                });
            }
            let count = count as usize;
            episodes.push(EpisodeSamples { episode: index, first_sample: total, count, len });
            total += count;
        }
        if let (0, Some(pad_after), Some(longest)) =
            (total, spec.max_pad_after, info.episodes.iter().max_by_key(|e| e.len))
        {
            return Err(Error::Invalid(format!(
                "no episode is long enough for a window of {} steps padded by at most {} before and {pad_after} after \
                 (the longest, `{}`, has {} steps)",
                spec.window_len(),
                spec.frame_stack - 1,
                longest.name,
                longest.len
            )));
        }
        Ok(StepWindows { spec: *spec, episodes, total })
    }

    /// The spec the samples were numbered for.
    pub fn spec(&self) -> &StepWindowSpec {
        &self.spec
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.total
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Sample `sample`: the episode, the anchor step and the rows to read.
    pub fn window(&self, sample: usize) -> Result<StepWindow> {
        if sample >= self.total {
            return Err(Error::Invalid(format!("sample {sample} is out of range: there are {} samples", self.total)));
        }
        let at = self.episodes.partition_point(|e| e.first_sample + e.count <= sample);
        let episode = &self.episodes[at];
        let spec = &self.spec;
        let offset = if spec.pad_frame_stack { 0 } else { spec.frame_stack - 1 };
        let step = sample - episode.first_sample + offset;
        let history = spec.frame_stack - 1;
        let begin = step.saturating_sub(history);
        let end = (step + spec.seq_length).min(episode.len);
        Ok(StepWindow {
            sample,
            episode: episode.episode,
            step,
            rows: begin..end,
            pad_before: history.saturating_sub(step),
            pad_after: (step + spec.seq_length).saturating_sub(episode.len),
        })
    }

    /// The number of samples of episode `episode` and the first one's number.
    pub fn episode_samples(&self, episode: usize) -> Option<(usize, usize)> {
        self.episodes.iter().find(|e| e.episode == episode).map(|e| (e.first_sample, e.count))
    }
}

impl DatasetReader {
    /// The data of one step window for `stream`: `[window.len(), ...step_shape]`
    /// in the file's dtype, edges repeated where the window is padded. The
    /// stream must be on the episode's step clock.
    pub fn read_step_window(&self, window: &StepWindow, stream: &str) -> Result<HostVec> {
        let episode = self.episode(window.episode)?;
        let (_, info) = self.stream(window.episode, stream)?;
        if info.len != episode.len {
            return Err(Error::Invalid(format!(
                "stream `{stream}` of episode `{}` has its own clock ({} rows for {} steps): step windows need streams on the step clock; use time windows",
                episode.name, info.len, episode.len
            )));
        }
        if window.rows.end > info.len || window.rows.is_empty() {
            return Err(Error::Invalid(format!(
                "window rows {}..{} do not fit episode `{}` of {} steps (a window from other step windows?)",
                window.rows.start, window.rows.end, episode.name, episode.len
            )));
        }
        let rows = self.read_rows(window.episode, stream, window.rows.clone())?;
        let channels = info.channels();
        let local: Vec<usize> = window.source_rows().into_iter().map(|r| r - window.rows.start).collect();
        Ok(with_host_data!(HostVec, &rows, |v: T| {
            let mut out = Vec::with_capacity(local.len() * channels);
            for &row in &local {
                out.extend_from_slice(&v[row * channels..(row + 1) * channels]);
            }
            <T as Element>::vec(out)
        }))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn info(lengths: &[usize]) -> DatasetInfo {
        crate::windows::test_info(lengths, 10.0)
    }

    /// Diffusion policy's `SequenceSampler` windows as its `create_indices`
    /// describes them, written out independently: for each episode, every
    /// start from `-pad_before` to `len - sequence_length + pad_after`
    /// (the pads clamped to `sequence_length - 1`), the rows inside the
    /// episode and the first/last row repeated outside. Each window as
    /// (episode, the row shown at each step, real or padding).
    fn sequence_sampler(
        lengths: &[usize],
        sequence_length: usize,
        pad_before: usize,
        pad_after: usize,
    ) -> Vec<(usize, Vec<usize>, Vec<bool>)> {
        let most = sequence_length as i64 - 1;
        let (before, after) = ((pad_before as i64).min(most), (pad_after as i64).min(most));
        let mut windows = Vec::new();
        for (episode, &len) in lengths.iter().enumerate() {
            // An empty episode: SequenceSampler would slice nothing and fail; none here.
            if len == 0 {
                continue;
            }
            let len = len as i64;
            for start in -before..=len - sequence_length as i64 + after {
                let (first, last) = (start.max(0), (start + sequence_length as i64).min(len) - 1);
                let rows = (start..start + sequence_length as i64).map(|t| t.clamp(first, last) as usize).collect();
                let real = (start..start + sequence_length as i64).map(|t| (0..len).contains(&t)).collect();
                windows.push((episode, rows, real));
            }
        }
        windows
    }

    proptest! {
        #[test]
        fn sequence_windows_are_sequence_samplers(
            lengths in proptest::collection::vec(0usize..40, 1..6),
            sequence_length in 1usize..20,
            pad_before in 0usize..24,
            pad_after in 0usize..24,
        ) {
            let spec = StepWindowSpec::sequence(sequence_length, pad_before, pad_after);
            let theirs = sequence_sampler(&lengths, sequence_length, pad_before, pad_after);
            let windows = StepWindows::new(&info(&lengths), &spec);
            if theirs.is_empty() {
                // SequenceSampler would be empty: an error that says why.
                prop_assert!(windows.unwrap_err().to_string().contains("no episode is long enough"));
                return Ok(());
            }
            let windows = windows.unwrap();
            prop_assert_eq!(windows.len(), theirs.len());
            for (sample, (episode, rows, real)) in theirs.into_iter().enumerate() {
                let ours = windows.window(sample).unwrap();
                prop_assert_eq!(ours.episode, episode, "sample {}", sample);
                prop_assert_eq!(ours.len(), sequence_length);
                prop_assert_eq!(ours.source_rows(), rows, "sample {}", sample);
                prop_assert_eq!(ours.pad_mask(), real, "sample {}", sample);
            }
        }
    }

    #[test]
    fn bounded_padding_leaves_a_short_episode_without_windows() {
        let error = StepWindows::new(&info(&[12, 15]), &StepWindowSpec::sequence(16, 0, 0)).unwrap_err();
        assert!(error.to_string().contains("the longest, `episode_1`, has 15 steps"), "{error}");
        // 3 steps, windows of 16 padded by at most 1 before and 7 after: none
        // fits (SequenceSampler gives none); the episodes around it do.
        let windows = StepWindows::new(&info(&[20, 3, 20]), &StepWindowSpec::sequence(16, 1, 7)).unwrap();
        assert_eq!(windows.episode_samples(1), Some((13, 0)));
        assert_eq!(windows.len(), 2 * 13);
        assert_eq!(windows.window(13).unwrap().episode, 2);
    }
}

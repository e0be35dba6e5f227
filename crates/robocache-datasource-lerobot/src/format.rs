//! LeRobot as a format of the format layer ([`robocache_datasource::format_reader`]): how
//! a root is recognised and opened, its reader, its video, and
//! [`LeRobotView`], what LeRobot adds to the episode model.

use std::any::Any;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use robocache_cpu::HostVec;
use robocache_storage::Storage;
use robocache_video::{DecodeCounts, DecoderChoice, FrameCacheUsage, FrameFormat};

use super::{video_size, FeatureStorage, LeRobotSource};
use robocache_datasource::format_reader::{read_rows_by_bytes, FormatKind, FormatReader, Opened, VideoFrames};
use robocache_datasource::model::{DatasetInfo, FormatName, StreamInfo};
use robocache_datasource::{DatasetReader, Error, Result};

/// LeRobot roots: a directory (or remote prefix) with `meta/info.json`.
/// They have their own rate and no splits: a kind built with either
/// refuses to open one.
#[derive(Clone, Debug, Default)]
pub struct LeRobotKind {
    /// What the caller asked for that LeRobot roots do not take (`rate`,
    /// `split`), for the error.
    refused: Vec<&'static str>,
}

impl LeRobotKind {
    /// LeRobot roots, opened as they are.
    pub fn new() -> Self {
        LeRobotKind::default()
    }

    /// LeRobot roots, where the caller also asked for a rate or a split:
    /// opening one is then an error naming what they asked for.
    pub fn refusing(split: bool, rate: bool) -> Self {
        let refused =
            [(split, "a split"), (rate, "a rate")].into_iter().filter(|(asked, _)| *asked).map(|(_, what)| what);
        LeRobotKind { refused: refused.collect() }
    }
}

impl FormatKind for LeRobotKind {
    fn name(&self) -> &'static str {
        "LeRobot"
    }

    fn formats(&self) -> &'static [FormatName] {
        &[crate::LEROBOT]
    }

    fn signs(&self) -> &'static [&'static str] {
        &["info.json", ".parquet", ".mp4", "episodes.jsonl", "tasks.jsonl"]
    }

    fn reads(&self) -> &'static str {
        "a directory with meta/info.json is read as a LeRobot dataset"
    }

    fn detect(&self, path: &Path, storage: &Storage) -> Result<bool> {
        if !robocache_storage::is_remote(path) && !path.is_dir() {
            return Ok(false);
        }
        LeRobotSource::detect(path, storage)
    }

    fn open(&self, path: &Path, storage: &Storage) -> Result<Opened> {
        if !self.refused.is_empty() {
            return Err(Error::Invalid(format!(
                "{}: a LeRobot dataset has its own rate (meta/info.json `fps`) and no splits to choose (asked for {})",
                path.display(),
                self.refused.join(" and ")
            )));
        }
        let (source, info) = LeRobotSource::open(path, storage)?;
        Ok((Box::new(source), info))
    }
}

impl FormatReader for LeRobotSource {
    fn read_rows_into(&self, episode: usize, stream: &StreamInfo, rows: Range<usize>, out: &mut [u8]) -> Result<()> {
        LeRobotSource::read_rows_into(self, episode, stream, rows, out)
    }

    /// The metadata's length is checked against the data file before room
    /// for its rows is allocated.
    fn read_rows(&self, episode: usize, stream: &StreamInfo, rows: Range<usize>) -> Result<HostVec> {
        self.check_rows(episode)?;
        read_rows_by_bytes(self, episode, stream, rows)
    }

    fn explicit_times(&self, _: &DatasetInfo, episode: usize, _: &StreamInfo, _: &str) -> Result<Arc<[f64]>> {
        self.episode_times(episode)
    }

    fn video(&self) -> Option<&dyn VideoFrames> {
        self.has_video().then_some(self as &dyn VideoFrames)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl VideoFrames for LeRobotSource {
    fn frame_size(&self, stream: &StreamInfo) -> Option<(usize, usize)> {
        let (height, width) = video_size(self.video_feature(stream)?).ok()?;
        Some((width, height))
    }

    fn read_frames_into(
        &self,
        stream: &StreamInfo,
        wanted: &[(usize, usize)],
        format: FrameFormat,
        out: &mut [u8],
    ) -> Result<()> {
        match self.video_feature(stream) {
            Some(feature) => self.read_video_frames_into(feature, wanted, format, out),
            None => Err(Error::Invalid(format!("stream `{}` is not camera video", stream.name))),
        }
    }

    fn set_frame_cache_budget(&self, bytes: usize) {
        LeRobotSource::set_frame_cache_budget(self, bytes);
    }

    fn set_decoders(&self, choice: DecoderChoice) {
        self.set_video_decoders(choice);
    }

    fn decode_counts(&self) -> DecodeCounts {
        LeRobotSource::decode_counts(self)
    }

    fn frame_cache_usage(&self) -> FrameCacheUsage {
        LeRobotSource::frame_cache_usage(self)
    }

    fn reset_counts(&self) {
        self.reset_decode_counts();
        self.reset_frame_cache_counts();
    }
}

/// What a LeRobot dataset adds to the episode model: LeRobot's own
/// numbering (dataset `index`, `episode_index`) and its task texts.
#[derive(Clone, Copy, Debug)]
pub struct LeRobotView<'a> {
    source: &'a LeRobotSource,
}

impl LeRobotView<'_> {
    /// `meta/info.json`'s `fps`.
    pub fn fps(&self) -> f64 {
        self.source.fps()
    }

    /// Task texts by `task_index`.
    pub fn tasks(&self) -> &[String] {
        self.source.tasks()
    }

    /// The dataset `index` of the first frame of episode `episode` (robocache's episode number).
    pub fn first_index(&self, episode: usize) -> usize {
        self.source.first_index(episode)
    }

    /// LeRobot's `episode_index` of robocache's episode `episode`.
    pub fn episode_index(&self, episode: usize) -> usize {
        self.source.episode_index(episode)
    }

    /// How feature `name` is stored (parquet values, images in parquet, MP4 video).
    pub fn storage(&self, name: &str) -> Option<FeatureStorage> {
        self.source.feature_named(name).map(|f| f.storage)
    }

    /// `v3.0` or `v2.1`.
    pub fn codebase_version(&self) -> &'static str {
        self.source.version_name()
    }
}

impl<'a> LeRobotView<'a> {
    /// The LeRobot dataset behind `dataset` (`None` for other formats): its
    /// fps, tasks, dataset indices, as `LeRobotDataset` numbers them.
    pub fn of(dataset: &'a DatasetReader) -> Option<Self> {
        dataset.reader().as_any().downcast_ref::<LeRobotSource>().map(|source| LeRobotView { source })
    }
}

//! The frame path of a LeRobot root: `video` features decoded from their
//! MP4 files (robocache-video), each row's frame chosen as LeRobot chooses
//! it, frames read together decoding each group of pictures once, through
//! the host frame cache (`robocache_datasource::frame_reads`).

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use robocache_video::{DecodeCounts, DecoderChoice, FrameCacheUsage, FrameFormat, FrameKey, VideoFile};

use super::{video_size, LeRobotFeature, LeRobotSource, VIDEO_TOLERANCE_S};
use crate::video_blob::VideoBlob;
use robocache_datasource::frame_reads::{read_frames, WantedFrame};
use robocache_datasource::{Error, Result};

impl LeRobotSource {
    /// An open video file and its number in the frame cache.
    fn video(&self, path: &Path, episode: usize, key: &str) -> Result<(usize, Arc<VideoFile>)> {
        if let Some(video) = self.videos.lock().unwrap_or_else(|p| p.into_inner()).get(path) {
            return Ok(video);
        }
        let video_error = |source| Error::Video {
            episode: format!("episode_{}", self.episodes[episode].index),
            key: key.to_owned(),
            source: Box::new(source),
        };
        let blob = self.storage.open(path).map_err(|error| {
            video_error(robocache_video::Error::Io { file: path.to_path_buf(), error: error.into() })
        })?;
        let video =
            Arc::new(VideoFile::from_source(path.to_path_buf(), Box::new(VideoBlob(blob))).map_err(video_error)?);
        Ok(self.videos.lock().unwrap_or_else(|p| p.into_inner()).insert(path, video))
    }

    /// Frames of a video feature for rows `rows` of `episode`, RGB `[H, W, 3]`
    /// each (see [`LeRobotSource::read_video_frames_into`]).
    pub(super) fn read_frames_into(
        &self,
        episode: usize,
        feature: &LeRobotFeature,
        rows: Range<usize>,
        out: &mut [u8],
    ) -> Result<()> {
        let wanted: Vec<(usize, usize)> = rows.map(|row| (episode, row)).collect();
        self.read_video_frames_into(feature, &wanted, FrameFormat::Rgb, out)
    }

    /// The frames of video feature `feature` at `(episode, row)` pairs, in
    /// that order, into `out`, each as `format` says: RGB `[H, W, 3]`, or
    /// YUV 4:2:0 planes as decoded ([`robocache_video::yuv420_len`] bytes).
    /// Each frame is chosen as LeRobot chooses it: the row's `timestamp`
    /// plus the episode's `from_timestamp` in its video file,
    /// `round(t · average_fps)`, the frame's time within
    /// [`VIDEO_TOLERANCE_S`] of `t`. Frames the cache holds (as YUV) are
    /// copied or converted; the others are decoded together, per file, each
    /// group of pictures once for all the frames asked of it, and offered
    /// to the cache.
    pub fn read_video_frames_into(
        &self,
        feature: &LeRobotFeature,
        wanted: &[(usize, usize)],
        format: FrameFormat,
        out: &mut [u8],
    ) -> Result<()> {
        let (height, width) = video_size(feature)?;
        // Each video file's cache number, the file, and the episode that
        // first named it (for errors).
        let mut files: HashMap<usize, (Arc<VideoFile>, usize)> = HashMap::new();
        let mut frames = Vec::with_capacity(wanted.len());
        for (slot, &(episode, row)) in wanted.iter().enumerate() {
            let (id, video, index) = self.frame_of(episode, feature, row)?;
            files.entry(id).or_insert((video, episode));
            frames.push(WantedFrame { slot, key: FrameKey { file: id, frame: index } });
        }
        let choice = self.video_decoders();
        let decode = |id: usize, indices: &[usize]| -> Result<Vec<Vec<u8>>> {
            let (video, episode) = files.get(&id).ok_or_else(|| Error::Invalid(format!("no video file {id}")))?;
            let (frames, counts) = video.decode_yuv_counted(indices, choice).map_err(|source| Error::Video {
                episode: format!("episode_{}", self.episodes[*episode].index),
                key: feature.name.clone(),
                source: Box::new(source),
            })?;
            *self.decoded.lock().unwrap_or_else(|p| p.into_inner()) += counts;
            Ok(frames.into_iter().map(|frame| frame.data).collect())
        };
        read_frames(&self.frames, &feature.name, (width, height), format, &frames, out, decode)
    }

    /// The video file of `feature` for `episode` (its cache number and the
    /// file) and the index of the frame LeRobot shows for `row`.
    fn frame_of(&self, episode: usize, feature: &LeRobotFeature, row: usize) -> Result<(usize, Arc<VideoFile>, usize)> {
        let meta = self.episodes.get(episode).ok_or_else(|| {
            Error::Invalid(format!("episode {episode} is out of range: the dataset has {}", self.episodes.len()))
        })?;
        let span = meta.videos.get(&feature.name).ok_or_else(|| Error::Layout {
            file: self.root.join("meta"),
            path: format!("videos/{}", feature.name),
            problem: format!("episode {} has no video file for this camera", meta.index),
        })?;
        let (id, video) = self.video(&span.file, episode, &feature.name)?;
        if [video.height(), video.width(), 3] != feature.shape[..] {
            return Err(Error::Layout {
                file: span.file.clone(),
                path: feature.name.clone(),
                problem: format!(
                    "the video is {}x{} (HxW), meta/info.json declares {:?}",
                    video.height(),
                    video.width(),
                    feature.shape
                ),
            });
        }
        let times = self.episode_times(episode)?;
        let name = || format!("episode_{}", meta.index);
        let time = *times.get(row).ok_or_else(|| {
            Error::Invalid(format!(
                "row {row} of `{}` in {}: the episode has {} rows",
                feature.name,
                name(),
                times.len()
            ))
        })?;
        let query = span.from_timestamp + time;
        let index = video.frame_at(query).map_err(|source| Error::Video {
            episode: name(),
            key: feature.name.clone(),
            source: Box::new(source),
        })?;
        let found = video.frame_time(index).unwrap_or(f64::NAN);
        let within = (query - found).abs() < VIDEO_TOLERANCE_S; // false for NaN too
        if !within {
            return Err(Error::FrameTime {
                file: span.file.clone(),
                episode: name(),
                key: feature.name.clone(),
                row,
                query,
                found,
                tolerance_s: VIDEO_TOLERANCE_S,
            });
        }
        Ok((id, video, index))
    }

    /// Where video frames are decoded from now on (the CPU unless set).
    pub fn set_video_decoders(&self, choice: DecoderChoice) {
        *self.decoders.lock().unwrap_or_else(|p| p.into_inner()) = choice;
    }

    /// Where video frames are decoded.
    pub fn video_decoders(&self) -> DecoderChoice {
        *self.decoders.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Samples decoded since the last [`LeRobotSource::reset_decode_counts`], by where.
    pub fn decode_counts(&self) -> DecodeCounts {
        *self.decoded.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn reset_decode_counts(&self) {
        *self.decoded.lock().unwrap_or_else(|p| p.into_inner()) = DecodeCounts::default();
    }

    /// Sets the byte budget of the decoded-frame cache (0: none kept).
    pub fn set_frame_cache_budget(&self, bytes: usize) {
        self.frames.set_budget(bytes);
    }

    /// What the decoded-frame cache holds, and its hits and misses.
    pub fn frame_cache_usage(&self) -> FrameCacheUsage {
        self.frames.usage()
    }

    /// Forgets the frame cache's hit and miss counts.
    pub fn reset_frame_cache_counts(&self) {
        self.frames.reset_counts();
    }
}

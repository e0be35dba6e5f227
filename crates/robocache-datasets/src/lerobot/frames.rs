//! The frame path of a LeRobot root: `video` features decoded from their
//! MP4 files (robocache-video), each row's frame chosen as LeRobot chooses
//! it, frames read together decoding each group of pictures once, and the
//! host frame cache's claims so that readers side by side decode a frame once.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use robocache_video::{
    Claim, DecodeCounts, DecoderChoice, FrameCacheUsage, FrameFormat, FrameKey, Lookup, PendingFrame, VideoFile,
};

use super::{video_size, LeRobotFeature, LeRobotSource, VIDEO_TOLERANCE_S};
use crate::video_blob::VideoBlob;
use crate::{Error, Result};

/// A slot of a read waiting for a frame another reader decodes for the
/// cache: where it goes, and what to decode if that reader gives it up.
struct WaitingSlot {
    slot: usize,
    episode: usize,
    /// The video file's cache number.
    file: usize,
    video: Arc<VideoFile>,
    index: usize,
    pending: Arc<PendingFrame>,
}

/// The frames of one video file a read needs decoded.
struct MissingFrames {
    video: Arc<VideoFile>,
    /// The first episode that asked for one (named in errors).
    episode: usize,
    /// (slot in the output, frame index) of each frame.
    slots: Vec<(usize, usize)>,
}

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
        let frame_bytes = match format {
            FrameFormat::Rgb => width * height * 3,
            FrameFormat::Yuv420 => robocache_video::yuv420_len(width, height),
        };
        if out.len() != wanted.len() * frame_bytes {
            return Err(Error::Invalid(format!(
                "{} frames of `{}` are {} bytes ({format:?}), the buffer given has {}",
                wanted.len(),
                feature.name,
                wanted.len() * frame_bytes,
                out.len()
            )));
        }
        // YUV planes into a slot, as `format` asks.
        let write = |planes: &[u8], slot: &mut [u8]| match format {
            FrameFormat::Rgb => robocache_video::yuv420_to_rgb_into(width, height, planes, slot),
            FrameFormat::Yuv420 => slot.copy_from_slice(planes),
        };
        // Per file: the video, the episode that first named it (for errors),
        // and (slot in `out`, frame index) of every frame the cache lacks.
        let mut missing: HashMap<usize, MissingFrames> = HashMap::new();
        // Frames this call claimed to decode for the cache, and the slots
        // waiting for frames another reader claimed.
        let mut claims: HashMap<FrameKey, Claim<'_>> = HashMap::new();
        let mut waiting: Vec<WaitingSlot> = Vec::new();
        let caching = self.frames.is_enabled();
        for (slot, &(episode, row)) in wanted.iter().enumerate() {
            let (id, video, index) = self.frame_of(episode, feature, row)?;
            let key = FrameKey { file: id, frame: index };
            if caching && !claims.contains_key(&key) {
                match self.frames.lookup(key) {
                    Lookup::Held(frame) => {
                        write(&frame, &mut out[slot * frame_bytes..(slot + 1) * frame_bytes]);
                        continue;
                    }
                    Lookup::Wait(pending) => {
                        waiting.push(WaitingSlot { slot, episode, file: id, video, index, pending });
                        continue;
                    }
                    Lookup::Decode(Some(claim)) => {
                        claims.insert(key, claim);
                    }
                    Lookup::Decode(None) => {}
                }
            }
            missing
                .entry(id)
                .or_insert_with(|| MissingFrames { video, episode, slots: Vec::new() })
                .slots
                .push((slot, index));
        }
        self.decode_missing(feature, missing, &mut claims, frame_bytes, out, write)?;
        // Every claim is settled before this call waits for anyone else's.
        drop(claims);
        let mut given_up: HashMap<usize, MissingFrames> = HashMap::new();
        for WaitingSlot { slot, episode, file, video, index, pending } in waiting {
            match self.frames.wait(&pending) {
                Some(frame) => write(&frame, &mut out[slot * frame_bytes..(slot + 1) * frame_bytes]),
                None => given_up
                    .entry(file)
                    .or_insert_with(|| MissingFrames { video, episode, slots: Vec::new() })
                    .slots
                    .push((slot, index)),
            }
        }
        self.decode_missing(feature, given_up, &mut HashMap::new(), frame_bytes, out, write)
    }

    /// Decodes the `missing` frames of each file (each group of pictures
    /// once) into their slots of `out`, keeping each in the cache (with its
    /// claim where this reader holds one).
    fn decode_missing(
        &self,
        feature: &LeRobotFeature,
        missing: HashMap<usize, MissingFrames>,
        claims: &mut HashMap<FrameKey, Claim<'_>>,
        frame_bytes: usize,
        out: &mut [u8],
        write: impl Fn(&[u8], &mut [u8]),
    ) -> Result<()> {
        let caching = self.frames.is_enabled();
        let choice = self.video_decoders();
        for (id, MissingFrames { video, episode, slots }) in missing {
            let mut indices: Vec<usize> = slots.iter().map(|&(_, index)| index).collect();
            indices.sort_unstable();
            indices.dedup();
            let (frames, counts) = video.decode_yuv_counted(&indices, choice).map_err(|source| Error::Video {
                episode: format!("episode_{}", self.episodes[episode].index),
                key: feature.name.clone(),
                source: Box::new(source),
            })?;
            *self.decoded.lock().unwrap_or_else(|p| p.into_inner()) += counts;
            for (&index, frame) in indices.iter().zip(frames) {
                // Written into the first slot that shows it, copied from
                // there into the others.
                let mut shown = slots.iter().filter(|&&(_, i)| i == index).map(|&(slot, _)| slot * frame_bytes);
                let Some(first) = shown.next() else { continue };
                let (head, tail) = out.split_at_mut(first + frame_bytes);
                let written = &mut head[first..];
                write(&frame.data, written);
                for at in shown {
                    let at = at - first - frame_bytes;
                    tail[at..at + frame_bytes].copy_from_slice(written);
                }
                let key = FrameKey { file: id, frame: index };
                match claims.remove(&key) {
                    Some(claim) => {
                        claim.keep(Arc::from(frame.data));
                    }
                    None if caching => {
                        self.frames.insert(key, Arc::from(frame.data));
                    }
                    None => {}
                }
            }
        }
        Ok(())
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

//! The camera `video` features' files: each episode's frames encoded as
//! H.264 (OpenH264) in runs side by side and appended to the camera's
//! current MP4 file, a new file past its size; consecutive IDR pictures of
//! two encoder runs given different `idr_pic_id`s (H.264 7.4.3).

use std::ops::Range;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use robocache_video::h264_idr_pic_id::{idr_pic_id, other_idr_pic_id, SliceLayout};
use robocache_video::{EncodedFrame, H264Encoder, Mp4Writer};

use super::{CameraStorage, LeRobotWriter, FILES_PER_CHUNK};
use robocache_datasource::{Error, Result};

/// Where an episode's frames are in its camera's video files.
#[derive(Clone, Copy, Debug)]
pub(super) struct VideoPlace {
    pub(super) file_index: usize,
    pub(super) from_timestamp: f64,
    pub(super) to_timestamp: f64,
}

/// One `video` feature's file being written.
pub(super) struct VideoTrack {
    /// The open file, its index (over all chunks) and its parameter sets.
    pub(super) writer: Option<(Mp4Writer, Vec<u8>, Vec<u8>)>,
    /// The index of the next file.
    pub(super) next_file: usize,
    /// The open file's slice layout (from its SPS), and the `idr_pic_id`
    /// of its last picture where that was an IDR (H.264 7.4.3: two
    /// consecutive IDRs differ in it; each encoder run numbers from 1).
    pub(super) slices: Option<SliceLayout>,
    pub(super) last_idr: Option<u32>,
}

/// The time scale of a video track at `fps` (ticks a second), and whether
/// a frame is exactly 1,000 of them: `1000 · fps` where that is a whole
/// number, else 90,000 (each frame's time rounded to a tick).
pub(super) fn video_timescale(fps: f64) -> (u32, bool) {
    let scale = fps * 1000.0;
    match scale.fract() == 0.0 && scale >= 1.0 && scale <= f64::from(u32::MAX) {
        true => (scale as u32, true),
        false => (90_000, false),
    }
}

/// `videos/<key>/chunk-CCC/file-FFF.mp4` of the `index`-th file of a camera.
pub(super) fn video_path(root: &Path, key: &str, index: usize) -> PathBuf {
    let (chunk, file) = (index / FILES_PER_CHUNK, index % FILES_PER_CHUNK);
    root.join(format!("videos/{key}/chunk-{chunk:03}/file-{file:03}.mp4"))
}

/// An error reading or setting an encoded picture's slice header.
pub(super) fn slice_error(camera: &str, e: robocache_video::CodecError) -> Error {
    Error::Invalid(format!("camera `{camera}`: the encoder's H.264 slice header: {e}"))
}

pub(super) fn video_error(e: robocache_video::Error) -> Error {
    Error::Invalid(format!("writing a video file: {e}"))
}

impl LeRobotWriter {
    /// Encodes each camera's frames of one episode (`frames` frames) and
    /// appends them to its video file; returns where they went, per
    /// feature. Every camera's frames are cut into runs of whole groups
    /// (a key frame and the frames after it), encoded side by side on the
    /// rayon pool, each run by its own encoder.
    pub(super) fn write_videos(
        &mut self,
        frames: usize,
        to_encode: &[(usize, &[u8])],
    ) -> Result<Vec<Option<VideoPlace>>> {
        let mut places = vec![None; self.features.len()];
        let CameraStorage::Video { key_frame_every } = self.cameras else { return Ok(places) };
        let group = key_frame_every as usize;
        // Runs of about frames / threads, whole groups each (one run
        // where every frame is a key frame: consecutive IDRs from two
        // encoders would share an `idr_pic_id`).
        let threads = rayon::current_num_threads().max(1);
        let run = match group {
            1 => frames,
            _ => frames.div_ceil(threads).div_ceil(group).max(1) * group,
        };
        let jobs: Vec<(usize, usize, Range<usize>)> = to_encode
            .iter()
            .enumerate()
            .flat_map(|(j, &(f, _))| {
                (0..frames).step_by(run).map(move |start| (j, f, start..(start + run).min(frames)))
            })
            .collect();
        let fps = self.fps;
        let encoded: Vec<Vec<EncodedFrame>> = jobs
            .par_iter()
            .map(|(j, f, range)| {
                let feature = &self.features[*f];
                let (h, w) = (feature.shape[0], feature.shape[1]);
                let frame_bytes = feature.width();
                let camera = |e: robocache_video::CodecError| {
                    Error::Invalid(format!("camera `{}`: H.264 encoding: {e}", feature.name))
                };
                let mut encoder = H264Encoder::new(w, h, fps, key_frame_every).map_err(camera)?;
                to_encode[*j].1[range.start * frame_bytes..range.end * frame_bytes]
                    .chunks_exact(frame_bytes)
                    .map(|frame| encoder.encode_rgb(frame).map_err(camera))
                    .collect()
            })
            .collect::<Result<_>>()?;
        let (timescale, exact) = video_timescale(fps);
        let tick = |k: u64| -> u64 {
            match exact {
                true => k * 1000,
                false => (k as f64 * f64::from(timescale) / fps).round() as u64,
            }
        };
        for ((_, f, _), run) in jobs.iter().zip(encoded) {
            let feature = self.features[*f].clone();
            let (h, w) = (feature.shape[0], feature.shape[1]);
            let root = self.root.clone();
            let Some(track) = self.videos[*f].as_mut() else { continue };
            for frame in run {
                if track.writer.is_none() {
                    let (Some(sps), Some(pps)) = (frame.sps.first(), frame.pps.first()) else {
                        return Err(Error::Invalid(format!(
                            "camera `{}`: the encoder's first frame holds no parameter sets",
                            feature.name
                        )));
                    };
                    let path = video_path(&root, &feature.name, track.next_file);
                    let writer = Mp4Writer::create_h264(&path, w, h, timescale, sps, pps).map_err(video_error)?;
                    track.slices = Some(SliceLayout::of_sps(sps).map_err(|e| slice_error(&feature.name, e))?);
                    track.last_idr = None;
                    track.writer = Some((writer, sps.clone(), pps.clone()));
                    track.next_file += 1;
                }
                let Some((writer, sps, pps)) = track.writer.as_mut() else { continue };
                if frame.sps.iter().any(|s| s != sps) || frame.pps.iter().any(|p| p != pps) {
                    return Err(Error::Invalid(format!(
                        "camera `{}`: the encoder changed its parameter sets within a file",
                        feature.name
                    )));
                }
                // An IDR after an IDR of the same id (the previous encoder
                // run's last picture): given the other id of its code's length.
                let mut sample = std::borrow::Cow::Borrowed(&frame.sample);
                track.last_idr = match (frame.key, &track.slices) {
                    (true, Some(slices)) => {
                        let id = idr_pic_id(&frame.sample, slices).map_err(|e| slice_error(&feature.name, e))?;
                        if id.is_some() && id == track.last_idr {
                            let (changed, other) =
                                other_idr_pic_id(&frame.sample, slices).map_err(|e| slice_error(&feature.name, e))?;
                            sample = std::borrow::Cow::Owned(changed);
                            Some(other)
                        } else {
                            id
                        }
                    }
                    _ => None,
                };
                let k = writer.frames() as u64;
                let duration = u32::try_from(tick(k + 1) - tick(k)).unwrap_or(u32::MAX);
                writer.push(&sample, duration, frame.key).map_err(video_error)?;
                let place = places[*f].get_or_insert(VideoPlace {
                    file_index: track.next_file - 1,
                    from_timestamp: tick(k) as f64 / f64::from(timescale),
                    to_timestamp: 0.0,
                });
                place.to_timestamp = tick(k + 1) as f64 / f64::from(timescale);
            }
        }
        // A file past its size is finished; the next episode starts the next one.
        for track in self.videos.iter_mut().flatten() {
            if track.writer.as_ref().is_some_and(|(w, _, _)| w.bytes() >= self.video_file_bytes) {
                if let Some((writer, _, _)) = track.writer.take() {
                    writer.finish().map_err(video_error)?;
                }
            }
        }
        Ok(places)
    }

    pub(super) fn close_video_files(&mut self) -> Result<()> {
        for track in self.videos.iter_mut().flatten() {
            if let Some((writer, _, _)) = track.writer.take() {
                writer.finish().map_err(video_error)?;
            }
        }
        Ok(())
    }
}

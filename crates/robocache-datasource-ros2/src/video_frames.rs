//! A bag's `foxglove_msgs/CompressedVideo` streams as camera video
//! ([`VideoFrames`]): the loader reads their frames as it reads a LeRobot
//! root's, through the host frame cache (each frame decoded once while the
//! cache holds it, frames read together decoding each group of pictures
//! once) and as RGB or as the decoder's YUV 4:2:0 planes (converted on the
//! loader's device). A stream's frames are one video per episode: cache
//! number `episode · 1024 + stream`. Frames decode where the dataset's
//! decoders say: on the CPU (OpenH264, libde265) or on NVDEC, whose parser
//! takes the units as they are (robocache-video's `AnnexBDecoder`).

use robocache_video::{DecodeCounts, DecoderChoice, FrameCacheUsage, FrameFormat, FrameKey};

use super::bag_error;
use super::episodes::EpisodeSource;
use super::extract::{self, Extract};
use super::reader::Ros2Reader;
use robocache_datasource::format_reader::VideoFrames;
use robocache_datasource::frame_reads::{read_frames, WantedFrame};
use robocache_datasource::model::StreamInfo;
use robocache_datasource::{Error, Result};

/// Streams of an episode the cache numbering has room for.
const STREAMS_PER_EPISODE: usize = 1024;

impl Ros2Reader {
    /// Whether any episode maps a `CompressedVideo` topic.
    pub(super) fn has_video(&self) -> bool {
        !self.video.streams.is_empty()
    }
}

impl VideoFrames for Ros2Reader {
    fn frame_size(&self, stream: &StreamInfo) -> Option<(usize, usize)> {
        match (self.video.streams.contains(&stream.name), stream.step_shape.as_slice()) {
            (true, &[height, width, 3]) => Some((width, height)),
            _ => None,
        }
    }

    fn read_frames_into(
        &self,
        stream: &StreamInfo,
        wanted: &[(usize, usize)],
        format: FrameFormat,
        out: &mut [u8],
    ) -> Result<()> {
        let (width, height) = self
            .frame_size(stream)
            .ok_or_else(|| Error::Invalid(format!("stream `{}` is not a CompressedVideo topic", stream.name)))?;
        let mut frames = Vec::with_capacity(wanted.len());
        for (slot, &(episode, row)) in wanted.iter().enumerate() {
            let (_, p) = self.plan_of(episode, stream)?;
            if p >= STREAMS_PER_EPISODE {
                return Err(Error::Invalid(format!("stream `{}` is stream {p} of its episode", stream.name)));
            }
            frames.push(WantedFrame { slot, key: FrameKey { file: episode * STREAMS_PER_EPISODE + p, frame: row } });
        }
        let choice = self.video_decoders();
        let decode = |file: usize, rows: &[usize]| -> Result<Vec<Vec<u8>>> {
            let (episode, p) = (file / STREAMS_PER_EPISODE, file % STREAMS_PER_EPISODE);
            let source = self.episodes.get(episode).ok_or_else(|| Error::Invalid(format!("no episode {episode}")))?;
            let plan = &source.plans[p];
            let decoded = self.decoded(episode)?;
            let frames = &decoded.streams[p].frames;
            let (pictures, counts) =
                extract::decode_video_yuv(frames, rows, &stream.step_shape, choice).map_err(|(row, problem)| {
                    bag_error(&source.file, Some(&plan.topic), Some(row), format!("stream `{}`: {problem}", plan.key))
                })?;
            *self.video.decoded.lock().unwrap_or_else(|p| p.into_inner()) += counts;
            Ok(pictures.into_iter().map(|picture| picture.data).collect())
        };
        read_frames(&self.video.frames, &stream.name, (width, height), format, &frames, out, decode)
    }

    fn set_frame_cache_budget(&self, bytes: usize) {
        self.video.frames.set_budget(bytes);
    }

    fn set_decoders(&self, choice: DecoderChoice) {
        *self.video.decoders.lock().unwrap_or_else(|p| p.into_inner()) = choice;
    }

    fn decode_counts(&self) -> DecodeCounts {
        *self.video.decoded.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn frame_cache_usage(&self) -> FrameCacheUsage {
        self.video.frames.usage()
    }

    fn reset_counts(&self) {
        *self.video.decoded.lock().unwrap_or_else(|p| p.into_inner()) = DecodeCounts::default();
        self.video.frames.reset_counts();
    }
}

impl Ros2Reader {
    fn video_decoders(&self) -> DecoderChoice {
        *self.video.decoders.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The reader's video state: its `CompressedVideo` streams, decoded frames
/// kept, where frames are decoded, and the units decoded since the counts
/// were reset.
#[derive(Debug, Default)]
pub(super) struct BagVideo {
    streams: std::collections::HashSet<String>,
    frames: robocache_video::FrameCache,
    decoders: std::sync::Mutex<DecoderChoice>,
    decoded: std::sync::Mutex<DecodeCounts>,
}

impl BagVideo {
    /// The video state of a reader of `episodes`: the keys of the streams
    /// any of them maps to a `CompressedVideo` topic.
    pub(super) fn of(episodes: &[EpisodeSource]) -> BagVideo {
        let streams = episodes
            .iter()
            .flat_map(|e| &e.plans)
            .filter(|p| p.what == Extract::CompressedVideo)
            .map(|p| p.key.clone())
            .collect();
        BagVideo { streams, ..BagVideo::default() }
    }
}

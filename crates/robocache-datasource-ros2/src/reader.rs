//! The reader of an opened bag dataset: one bag per episode, the last few
//! episodes kept decoded, rows and frames read from them.

use std::any::Any;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;
use robocache_cpu::DType;

use super::decode::{decode_episode, DecodeResult, Decoded};
use super::episodes::EpisodeSource;
use super::extract::{self, Extract};
use super::{bag_error, video_frames, DECODED_EPISODES};
use robocache_datasource::format_reader::FormatReader;
use robocache_datasource::model::{DatasetInfo, StreamInfo};
use robocache_datasource::{Error, Result};

/// The reader: one bag per episode, a few episodes decoded.
#[derive(Debug)]
pub(crate) struct Ros2Reader {
    pub(super) episodes: Vec<EpisodeSource>,
    pub(super) decoded: Mutex<VecDeque<(usize, Arc<OnceLock<DecodeResult>>)>>,
    /// `CompressedVideo` streams' frame cache and decode counts.
    pub(super) video: video_frames::BagVideo,
}

impl Ros2Reader {
    /// The episode's source and the index of `stream`'s plan in it.
    pub(super) fn plan_of(&self, episode: usize, stream: &StreamInfo) -> Result<(&EpisodeSource, usize)> {
        let source = self.episodes.get(episode).ok_or_else(|| Error::Invalid(format!("no episode {episode}")))?;
        let p = source
            .plans
            .iter()
            .position(|p| p.key == stream.name)
            .ok_or_else(|| Error::Invalid(format!("no stream `{}` in episode {episode}", stream.name)))?;
        Ok((source, p))
    }

    pub(super) fn decoded(&self, episode: usize) -> Result<Arc<Decoded>> {
        let source = self.episodes.get(episode).ok_or_else(|| Error::Invalid(format!("no episode {episode}")))?;
        let slot = {
            let mut decoded = self.decoded.lock().unwrap_or_else(|p| p.into_inner());
            let slot = match decoded.iter().position(|(e, _)| *e == episode) {
                Some(at) => decoded.remove(at).map(|(_, slot)| slot).unwrap_or_default(),
                None => Arc::default(),
            };
            decoded.push_back((episode, slot.clone()));
            while decoded.len() > DECODED_EPISODES {
                decoded.pop_front();
            }
            slot
        };
        slot.get_or_init(|| decode_episode(source).map(Arc::new))
            .clone()
            .map_err(|(topic, message, problem)| bag_error(&source.file, topic.as_deref(), message, problem))
    }
}

impl FormatReader for Ros2Reader {
    fn read_rows_into(&self, episode: usize, stream: &StreamInfo, rows: Range<usize>, out: &mut [u8]) -> Result<()> {
        let (source, p) = self.plan_of(episode, stream)?;
        let decoded = self.decoded(episode)?;
        let plan = &source.plans[p];
        let data = &decoded.streams[p];
        let row_bytes = stream.step_bytes();
        if plan.what == Extract::CompressedVideo {
            if rows.end > data.frames.len() || out.len() != rows.len() * row_bytes {
                return Err(Error::Invalid(format!(
                    "rows {rows:?} of `{}` ({} frames) into {} bytes",
                    stream.name,
                    data.frames.len(),
                    out.len()
                )));
            }
            // Through the frame cache, as the loader's frame reads go.
            let wanted: Vec<(usize, usize)> = rows.map(|row| (episode, row)).collect();
            return robocache_datasource::format_reader::VideoFrames::read_frames_into(
                self,
                stream,
                &wanted,
                robocache_video::FrameFormat::Rgb,
                out,
            );
        }
        if !data.frames.is_empty() || matches!(plan.what, Extract::CompressedImage | Extract::RawImage) {
            let frames = data.frames.get(rows.clone()).ok_or_else(|| {
                Error::Invalid(format!("rows {rows:?} of `{}` past its {} frames", stream.name, data.frames.len()))
            })?;
            // Frames decode side by side on the rayon pool (JPEG and PNG
            // decoding is most of a camera topic's cost).
            let held = out.len();
            let out = out
                .get_mut(..frames.len() * row_bytes)
                .ok_or_else(|| Error::Invalid(format!("a buffer of {held} bytes for {} frames", frames.len())))?;
            return out.par_chunks_mut(row_bytes.max(1)).zip(frames).enumerate().try_for_each(|(i, (at, frame))| {
                extract::decode_frame(frame, stream.dtype, &stream.step_shape, at).map_err(|problem| {
                    let row = rows.start + i;
                    bag_error(&source.file, Some(&plan.topic), Some(row), format!("stream `{}`: {problem}", plan.key))
                })
            });
        }
        let width = stream.channels();
        let values = data.values.get(rows.start * width..rows.end * width).ok_or_else(|| {
            Error::Invalid(format!("rows {rows:?} of `{}` past its {} rows", stream.name, data.times.len()))
        })?;
        match stream.dtype {
            DType::F32 => {
                for (chunk, v) in out.chunks_exact_mut(4).zip(values) {
                    chunk.copy_from_slice(&(*v as f32).to_le_bytes());
                }
            }
            DType::F64 => {
                for (chunk, v) in out.chunks_exact_mut(8).zip(values) {
                    chunk.copy_from_slice(&v.to_le_bytes());
                }
            }
            other => return Err(Error::Invalid(format!("a bag stream of {other}"))),
        }
        Ok(())
    }

    fn explicit_times(
        &self,
        _info: &DatasetInfo,
        episode: usize,
        stream: &StreamInfo,
        _key: &str,
    ) -> Result<Arc<[f64]>> {
        let (_, p) = self.plan_of(episode, stream)?;
        Ok(self.decoded(episode)?.streams[p].times.clone())
    }

    fn video(&self) -> Option<&dyn robocache_datasource::format_reader::VideoFrames> {
        self.has_video().then_some(self as &dyn robocache_datasource::format_reader::VideoFrames)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

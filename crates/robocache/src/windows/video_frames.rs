//! Video streams of a batch on a device: every camera read at once, each on
//! a thread of its own, and the frames a device frame cache holds stacked
//! instead of decoded again.

use robocache_datasets::{Dataset, DeltaWindow, DeltaWindows, FrameFormat};
use robocache_video::yuv420_len;

use crate::batch_buffer::BatchBuffer;
use crate::device_frame_cache::{EpisodeFrame, HeldFrame, Lookup};
use crate::{Device, DeviceFrameCache, Error, FrameDType, FrameLayout, FrameOutput, Result, Tensor};
use robocache_augment::FrameAugment;
use robocache_cpu::DType;

/// The device frame cache a batch's camera frames come from, and what the
/// frames it stacks get: `augment` gives each window's parameters for a
/// stream and its frames' size (width, height), or `None` for none.
/// Frames augmented as they are stacked are read once, where the cache
/// holds them ([`Device::stack_augmented_frames`]).
pub(crate) struct CachedFrames<'a> {
    pub(crate) cache: &'a DeviceFrameCache,
    #[allow(clippy::type_complexity)]
    pub(crate) augment: Box<dyn FnMut(&str, (usize, usize)) -> Option<Vec<FrameAugment>> + 'a>,
}

/// The YUV planes of one video stream of a batch, read before its turn
/// ([`Device::read_video_streams_at_once`]) and on the device, with its pad
/// flags; or the read's error.
pub(super) struct VideoRead<'a> {
    pub(super) stream: &'a str,
    pub(super) planes_and_pads: Result<(Tensor, Vec<bool>)>,
}

impl Device {
    /// The YUV planes of every video stream of `streams` that batch `cut`
    /// reads, decoded at once where there are two or more: each on a thread
    /// of its own, so that a batch keeps one decoder (an NVDEC session or a
    /// CPU decoder) busy per camera instead of one at a time. NVDEC decodes
    /// a request's pictures one after the other, so the requests in flight
    /// bound its throughput. A read's error is kept for its stream's turn,
    /// so a batch fails with the error of the first stream that fails, as
    /// when the streams are read in turn. The staging buffers are lent
    /// together and uploaded at once, so the batch holds none of them while
    /// it waits for another buffer (docs/loader.md, "Staging").
    pub(super) fn read_video_streams_at_once<'a>(
        &self,
        dataset: &Dataset,
        windows: &DeltaWindows,
        cut: &[DeltaWindow],
        streams: &[&'a str],
    ) -> Result<Vec<VideoRead<'a>>> {
        let video: Vec<(&str, &[i64], usize)> = streams
            .iter()
            .filter_map(|&name| {
                let (width, height) = dataset.video_frame_size(name)?;
                let offsets = windows.offsets_of(name).unwrap_or(&[0]);
                Some((name, offsets, yuv420_len(width, height)))
            })
            .collect();
        if video.len() < 2 || cut.is_empty() {
            return Ok(Vec::new());
        }
        let sizes: Vec<usize> =
            video.iter().map(|&(_, offsets, frame_bytes)| cut.len() * offsets.len() * frame_bytes).collect();
        let mut planes = BatchBuffer::new_together(self, DType::U8, &sizes)?;
        let mut pads: Vec<Result<Vec<bool>>> = std::thread::scope(|scope| {
            let mut reads = video.iter().zip(planes.iter_mut()).map(|(&(name, offsets, _), planes)| {
                let bytes = planes.as_mut_bytes();
                move || {
                    dataset.read_delta_frames_into(cut, name, offsets, FrameFormat::Yuv420, bytes).map_err(Error::from)
                }
            });
            // The first stream on this thread, the others each on its own.
            let first = reads.next();
            let others: Vec<_> = reads.map(|read| scope.spawn(read)).collect();
            let mut pads = Vec::with_capacity(video.len());
            pads.extend(first.map(|mut read| read()));
            for thread in others {
                pads.push(thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            }
            pads
        });
        let mut reads = Vec::with_capacity(video.len());
        for ((&(stream, _, frame_bytes), planes), pads) in video.iter().zip(planes).zip(pads.drain(..)) {
            // A buffer whose read failed goes back to the pool unused.
            let planes_and_pads = pads.and_then(|pads| {
                let count = pads.len();
                Ok((planes.into_tensor(self, &[count, frame_bytes], stream)?, pads))
            });
            reads.push(VideoRead { stream, planes_and_pads });
        }
        Ok(reads)
    }

    /// The frames of video stream `name` at `offsets` of each window of
    /// `cut`, `[windows × offsets, ...]` as `frames` says: those `cache`
    /// holds stacked from there, the others read as YUV (each once), put on
    /// this device, converted to 8-bit RGB and resized there, and kept in
    /// `cache` while it has room. A frame another batch is decoding for the
    /// cache is waited for once this batch's own frames are kept. Frames
    /// the cache's `augment` gives parameters for are augmented as they
    /// are stacked.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn cached_video_frames(
        &self,
        dataset: &Dataset,
        cached: &mut CachedFrames<'_>,
        name: &str,
        cut: &[DeltaWindow],
        offsets: &[i64],
        (width, height): (usize, usize),
        frames: FrameOutput,
    ) -> Result<Tensor> {
        let cache = cached.cache;
        // Each distinct frame once, in the order first asked for.
        let mut distinct: Vec<EpisodeFrame> = Vec::new();
        let mut position = std::collections::HashMap::new();
        let slots: Vec<usize> = cut
            .iter()
            .flat_map(|w| offsets.iter().map(move |&d| (w.episode, w.row(d).0)))
            .map(|frame| {
                *position.entry(frame).or_insert_with(|| {
                    distinct.push(frame);
                    distinct.len() - 1
                })
            })
            .collect();
        let (lookups, claims) = cache.find(name, &distinct)?;
        // Frames read as YUV (each group of pictures decoded once), put on
        // this device, converted to 8-bit RGB and resized there.
        let rgb = FrameOutput { layout: FrameLayout::Hwc, dtype: FrameDType::U8, resize: frames.resize };
        let decode = |wanted: &[EpisodeFrame]| -> Result<std::sync::Arc<Tensor>> {
            let frame_bytes = yuv420_len(width, height);
            let mut planes = BatchBuffer::new(self, DType::U8, wanted.len() * frame_bytes)?;
            dataset.read_video_frames_at_into(name, wanted, FrameFormat::Yuv420, planes.as_mut_bytes())?;
            let planes = planes.into_tensor(self, &[wanted.len(), frame_bytes], name)?;
            Ok(std::sync::Arc::new(self.yuv420_to_rgb(&planes, width, height, rgb)?))
        };
        // This batch's own frames first, kept (and handed to the batches
        // waiting for them) before it waits for anyone else's.
        let missing: Vec<EpisodeFrame> =
            distinct.iter().zip(&lookups).filter(|(_, l)| matches!(l, Lookup::Decode)).map(|(&f, _)| f).collect();
        let mut sources: Vec<Option<HeldFrame>> = vec![None; distinct.len()];
        if missing.is_empty() {
            drop(claims);
        } else {
            let decoded = decode(&missing)?;
            cache.keep(claims, &missing, &decoded)?;
            let mut next = 0..;
            for (source, lookup) in sources.iter_mut().zip(&lookups) {
                if matches!(lookup, Lookup::Decode) {
                    *source = Some((decoded.clone(), next.next().unwrap_or_default()));
                }
            }
        }
        let mut given_up = Vec::new();
        for (at, lookup) in lookups.into_iter().enumerate() {
            match lookup {
                Lookup::Held(frame) => sources[at] = Some(frame),
                Lookup::Wait(pending) => match cache.wait(&pending)? {
                    Some(frame) => sources[at] = Some(frame),
                    None => given_up.push(at),
                },
                Lookup::Decode => {}
            }
        }
        if !given_up.is_empty() {
            // Frames another batch claimed and then gave up: decoded here.
            let frames: Vec<EpisodeFrame> = given_up.iter().map(|&at| distinct[at]).collect();
            let decoded = decode(&frames)?;
            cache.keep(cache.no_claims(name), &frames, &decoded)?;
            for (index, &at) in given_up.iter().enumerate() {
                sources[at] = Some((decoded.clone(), index));
            }
        }
        let sources: Vec<HeldFrame> = sources
            .into_iter()
            .map(|source| source.ok_or_else(|| Error::Internal("a frame of the batch has no source".into())))
            .collect::<Result<_>>()?;
        let picks: Vec<(&Tensor, usize)> = slots.iter().map(|&s| (sources[s].0.as_ref(), sources[s].1)).collect();
        let held = picks.first().map(|(tensor, _)| (tensor.shape()[2], tensor.shape()[1]));
        match held.and_then(|size| (cached.augment)(name, size)) {
            Some(params) => self
                .stack_augmented_frames(&picks, frames.layout, frames.dtype, offsets.len(), &params)
                .map_err(|e| crate::ops::augment::in_stream(e, name)),
            None => self.stack_frames(&picks, frames.layout, frames.dtype),
        }
    }
}

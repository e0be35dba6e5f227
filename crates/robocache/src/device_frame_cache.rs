//! [`DeviceFrameCache`]: camera frames kept on a loader's device after their
//! first decode, as 8-bit RGB at the size the loader asks for (cropped and
//! resized once), so that a later batch stacks them instead of decoding,
//! uploading, converting and resizing them again.
//!
//! It holds the tensors that batches decoded into (`u8 [M, H, W, 3]` on the
//! device: GPU memory for a CUDA loader, host memory for a CPU one) and, for
//! each frame, which tensor and index hold it. A batch's frames are then one
//! [`Device::stack_frames`] pass over its hits and the frames it decoded.
//!
//! The first frames decoded are kept, up to the budget; none is evicted (a
//! shuffled epoch reads every frame equally, so any other choice costs the
//! same hit rate and a lock on every read). Kept tensors stay alive as long
//! as the cache does.
//!
//! Ordering on a GPU: a batch keeps its decoded tensor once the conversion
//! that writes it is queued on the device's stream, and every batch that
//! reads it queues its stacking on the same stream afterwards (the cache
//! refuses a device handle of another stream), so no reader sees a frame
//! before it is written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use robocache_datasets::FrameCacheUsage;

use crate::ops::{FrameDType, FrameLayout, FrameResize};
use crate::{Device, Error, Result, Tensor};

/// Where a held frame is: a kept tensor of frames and the frame's index in it.
pub(crate) type HeldFrame = (Arc<Tensor>, usize);

/// A frame of a video stream: `(episode, row)` (the row is the frame's index
/// in its episode).
pub(crate) type EpisodeFrame = (usize, usize);

/// Camera frames of video streams on one device, converted to 8-bit RGB and
/// cropped and resized as `resize` says, at most `budget_bytes` of them.
///
/// ```
/// use robocache::{Device, DeviceFrameCache, FrameResize};
///
/// let cache = DeviceFrameCache::new(&Device::cpu(), Some(FrameResize::to(224, 224)), 1 << 30);
/// assert_eq!(cache.usage().frames, 0);
/// assert_eq!(cache.usage().budget_bytes, 1 << 30);
/// ```
#[derive(Debug)]
pub struct DeviceFrameCache {
    device: Device,
    resize: Option<FrameResize>,
    budget_bytes: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    /// Per stream, each held frame.
    streams: HashMap<String, HashMap<EpisodeFrame, HeldFrame>>,
    bytes: usize,
    frames: usize,
    hits: u64,
    misses: u64,
}

impl DeviceFrameCache {
    /// An empty cache of frames on `device`, resized as `resize` says
    /// (`None`: the video's own size), that keeps at most `budget_bytes`.
    pub fn new(device: &Device, resize: Option<FrameResize>, budget_bytes: usize) -> Self {
        DeviceFrameCache { device: device.clone(), resize, budget_bytes, held: Mutex::default() }
    }

    /// The device its frames are on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The crop and resize its frames have.
    pub fn resize(&self) -> Option<FrameResize> {
        self.resize
    }

    /// What it holds, and its hits and misses (each distinct frame a batch
    /// asked for counts once) since it was made or its counts reset.
    pub fn usage(&self) -> FrameCacheUsage {
        match self.lock() {
            Ok(held) => FrameCacheUsage {
                budget_bytes: self.budget_bytes,
                bytes: held.bytes,
                frames: held.frames,
                hits: held.hits,
                misses: held.misses,
            },
            Err(_) => FrameCacheUsage { budget_bytes: self.budget_bytes, ..FrameCacheUsage::default() },
        }
    }

    /// Forgets the hits and misses so far (after a warm-up); keeps the frames.
    pub fn reset_counts(&self) {
        if let Ok(mut held) = self.lock() {
            held.hits = 0;
            held.misses = 0;
        }
    }

    /// Checks that a batch on `device` with frames resized as `resize` may
    /// use this cache: the same device, queuing on the same stream, and the
    /// same crop and resize.
    pub(crate) fn check_use(&self, device: &Device, resize: Option<FrameResize>) -> Result<()> {
        let same_stream = match (&self.device, device) {
            (Device::Cpu, Device::Cpu) => true,
            (Device::Cuda(held), Device::Cuda(asking)) => {
                held == asking && held.stream_handle() == asking.stream_handle()
            }
            _ => false,
        };
        if !same_stream {
            return Err(invalid(format!(
                "a frame cache of {:?} serves batches on that device and its stream, not on {device:?}",
                self.device
            )));
        }
        if resize != self.resize {
            return Err(invalid(format!(
                "a frame cache of frames resized as {:?} cannot serve frames resized as {resize:?}",
                self.resize
            )));
        }
        Ok(())
    }

    /// Where each of `frames` of `stream` is held (`None`: not held), each
    /// counted as a hit or a miss.
    pub(crate) fn find(&self, stream: &str, frames: &[EpisodeFrame]) -> Result<Vec<Option<HeldFrame>>> {
        let mut held = self.lock()?;
        let found: Vec<Option<HeldFrame>> = match held.streams.get(stream) {
            Some(kept) => frames.iter().map(|frame| kept.get(frame).cloned()).collect(),
            None => vec![None; frames.len()],
        };
        let hits = found.iter().filter(|f| f.is_some()).count() as u64;
        held.hits += hits;
        held.misses += frames.len() as u64 - hits;
        Ok(found)
    }

    /// Keeps the frames of `stream` that `decoded` holds (`u8 [M, H, W, 3]`,
    /// frame `i` being `frames[i]`, on the cache's device, converted and
    /// resized as the cache's frames are) where the budget has room: the
    /// whole tensor when every frame is new and fits, else a copy of the new
    /// frames that fit.
    pub(crate) fn keep(&self, stream: &str, frames: &[EpisodeFrame], decoded: &Arc<Tensor>) -> Result<()> {
        let shape = decoded.shape();
        if shape.len() != 4 || shape[0] != frames.len() || decoded.dtype() != robocache_cpu::DType::U8 {
            return Err(Error::Internal(format!(
                "frame cache: {} frames kept from a tensor of shape {shape:?} {}",
                frames.len(),
                decoded.dtype()
            )));
        }
        let frame_bytes = shape[1..].iter().product::<usize>().max(1);
        let mut held = self.lock()?;
        let room = self.budget_bytes.saturating_sub(held.bytes) / frame_bytes;
        if room == 0 {
            return Ok(());
        }
        let kept = held.streams.entry(stream.to_owned()).or_default();
        let mut new: Vec<usize> = Vec::with_capacity(frames.len());
        let mut seen = std::collections::HashSet::with_capacity(frames.len());
        for (i, frame) in frames.iter().enumerate() {
            if !kept.contains_key(frame) && seen.insert(*frame) {
                new.push(i);
            }
        }
        new.truncate(room);
        if new.is_empty() {
            return Ok(());
        }
        let tensor = if new.len() == frames.len() {
            decoded.clone()
        } else {
            // Another batch kept some of them first, or the budget ends here:
            // only what is new and fits.
            let picks: Vec<(&Tensor, usize)> = new.iter().map(|&i| (decoded.as_ref(), i)).collect();
            Arc::new(self.device.stack_frames(&picks, FrameLayout::Hwc, FrameDType::U8)?)
        };
        for (index, &i) in new.iter().enumerate() {
            kept.insert(frames[i], (tensor.clone(), index));
        }
        held.bytes += new.len() * frame_bytes;
        held.frames += new.len();
        Ok(())
    }

    fn lock(&self) -> Result<MutexGuard<'_, Held>> {
        self.held.lock().map_err(|_| Error::Internal("frame cache: poisoned by a panic on another thread".into()))
    }
}

fn invalid(message: String) -> Error {
    Error::Dataset(robocache_datasets::Error::Invalid(message))
}

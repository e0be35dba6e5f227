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
//! Batches assembled side by side (the loader's workers) would each decode a
//! frame neither has kept yet. So a batch claims the frames it decodes
//! while the budget has room; a batch that needs a claimed frame decodes
//! only its own, keeps them, then waits for the claimed frame. Nothing is
//! waited for while a claim is held, so no two batches wait for each other,
//! and a claim given up (its frame did not fit, or its batch failed) sends
//! the waiting batch to decode the frame itself.
//!
//! Ordering on a GPU: a batch keeps its decoded tensor once the conversion
//! that writes it is queued on the device's stream, and every batch that
//! reads it queues its stacking on the same stream afterwards (the cache
//! refuses a device handle of another stream), so no reader sees a frame
//! before it is written.

use std::sync::{Arc, Mutex};

use robocache_claims::{ClaimMap, Found};
use robocache_datasets::FrameCacheUsage;
use robocache_video::Pending;

use crate::ops::{FrameDType, FrameLayout, FrameResize};
use crate::{Device, Error, Result, Tensor};

/// Where a held frame is: a kept tensor of frames and the frame's index in it.
pub(crate) type HeldFrame = (Arc<Tensor>, usize);

/// A frame of a video stream: `(episode, row)` (the row is the frame's index
/// in its episode).
pub(crate) type EpisodeFrame = (usize, usize);

/// A frame's key in the cache: its stream (by number, see
/// [`DeviceFrameCache::stream_id`]) and the frame.
type FrameId = (usize, EpisodeFrame);

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
    /// Stream names by number.
    streams: Mutex<Vec<String>>,
    /// Each frame held or being decoded by a batch, and the counts.
    frames: ClaimMap<FrameId, HeldFrame, Held>,
}

/// What is held against the budget, and the reads (under the map's lock).
#[derive(Debug, Default)]
struct Held {
    bytes: usize,
    frames: usize,
    /// A batch had frames the budget had no room for: no frame is claimed
    /// any more (a claim would make other batches wait for a frame that
    /// will not be kept).
    full: bool,
    hits: u64,
    misses: u64,
}

/// A frame one batch decodes for the cache while others wait for it:
/// finished with the frame once kept, with `None` once the batch gave up
/// on it (not kept, or its decode failed).
pub(crate) type PendingFrame = Pending<HeldFrame>;

/// What a batch does for each frame it needs ([`DeviceFrameCache::find`]).
pub(crate) enum Lookup {
    /// Held: stack it from there.
    Held(HeldFrame),
    /// Not held: decode it. Claimed when `Claims` holds it (other batches
    /// then wait for this one to keep it).
    Decode,
    /// Another batch is decoding it: wait for it
    /// ([`DeviceFrameCache::wait`]) once this batch's own frames are kept.
    Wait(Arc<PendingFrame>),
}

/// The frames of one stream a batch claimed to decode for the cache.
/// [`DeviceFrameCache::keep`] settles them; dropped unsettled (the batch
/// failed), they are given up, and the batches waiting for them decode them
/// themselves.
pub(crate) struct Claims<'a> {
    stream: usize,
    claimed: robocache_claims::Claims<'a, FrameId, HeldFrame, Held>,
}

impl DeviceFrameCache {
    /// An empty cache of frames on `device`, resized as `resize` says
    /// (`None`: the video's own size), that keeps at most `budget_bytes`.
    pub fn new(device: &Device, resize: Option<FrameResize>, budget_bytes: usize) -> Self {
        DeviceFrameCache {
            device: device.clone(),
            resize,
            budget_bytes,
            streams: Mutex::default(),
            frames: ClaimMap::default(),
        }
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
        self.frames.with_state(|held| FrameCacheUsage {
            budget_bytes: self.budget_bytes,
            bytes: held.bytes,
            frames: held.frames,
            hits: held.hits,
            misses: held.misses,
        })
    }

    /// Forgets the hits and misses so far (after a warm-up); keeps the frames.
    pub fn reset_counts(&self) {
        self.frames.with_state(|held| {
            held.hits = 0;
            held.misses = 0;
        });
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

    /// The number of stream `name` in the cache's keys (a loader has a few streams).
    fn stream_id(&self, name: &str) -> usize {
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        match streams.iter().position(|s| s == name) {
            Some(id) => id,
            None => {
                streams.push(name.to_owned());
                streams.len() - 1
            }
        }
    }

    /// What a batch does for each of `frames` of `stream` (distinct
    /// frames): stack it from the cache, decode it, or wait for the batch
    /// decoding it. Frames to decode are claimed while the budget has room,
    /// so that a batch running beside this one waits for them instead of
    /// decoding them again. Held frames count as hits, the others as misses
    /// ([`DeviceFrameCache::wait`] counts the waits).
    pub(crate) fn find(&self, stream: &str, frames: &[EpisodeFrame]) -> Result<(Vec<Lookup>, Claims<'_>)> {
        let id = self.stream_id(stream);
        let keys: Vec<FrameId> = frames.iter().map(|&frame| (id, frame)).collect();
        let (found, claimed) = self.frames.find(&keys, |held| !held.full && self.budget_bytes > held.bytes);
        let lookups: Vec<Lookup> = found
            .into_iter()
            .map(|found| match found {
                Found::Held(frame) => Lookup::Held(frame),
                Found::Compute => Lookup::Decode,
                Found::Wait(waiter) => Lookup::Wait(waiter),
            })
            .collect();
        let hits = lookups.iter().filter(|l| matches!(l, Lookup::Held(_))).count() as u64;
        let misses = lookups.iter().filter(|l| matches!(l, Lookup::Decode)).count() as u64;
        self.frames.with_state(|held| {
            held.hits += hits;
            held.misses += misses;
        });
        Ok((lookups, Claims { stream: id, claimed }))
    }

    /// Claims of nothing, for [`DeviceFrameCache::keep`] of frames decoded
    /// without a claim.
    pub(crate) fn no_claims(&self, stream: &str) -> Claims<'_> {
        Claims { stream: self.stream_id(stream), claimed: self.frames.no_claims() }
    }

    /// The frame another batch was decoding, once it has kept it (a hit), or
    /// `None` where it did not (a miss: decode it).
    pub(crate) fn wait(&self, pending: &Arc<PendingFrame>) -> Result<Option<HeldFrame>> {
        let frame = self.frames.wait(pending);
        self.frames.with_state(|held| match frame {
            Some(_) => held.hits += 1,
            None => held.misses += 1,
        });
        Ok(frame)
    }

    /// Keeps the frames of `stream` that `decoded` holds (`u8 [M, H, W, 3]`,
    /// frame `i` being `frames[i]`, on the cache's device, converted and
    /// resized as the cache's frames are) where the budget has room: the
    /// whole tensor when every frame is new and fits, else a copy of the new
    /// frames that fit. Settles `claims`: the claimed frames kept are handed
    /// to the batches waiting for them, the others given up.
    pub(crate) fn keep(&self, claims: Claims<'_>, frames: &[EpisodeFrame], decoded: &Arc<Tensor>) -> Result<()> {
        let shape = decoded.shape();
        if shape.len() != 4 || shape[0] != frames.len() || decoded.dtype() != robocache_cpu::DType::U8 {
            return Err(Error::Internal(format!(
                "frame cache: {} frames kept from a tensor of shape {shape:?} {}",
                frames.len(),
                decoded.dtype()
            )));
        }
        let frame_bytes = shape[1..].iter().product::<usize>().max(1);
        let keys: Vec<FrameId> = frames.iter().map(|&frame| (claims.stream, frame)).collect();
        // New frames (not held, not being decoded by another batch), as
        // many as the budget has room for.
        self.frames.keep(claims.claimed, &keys, |held, free| {
            let room = self.budget_bytes.saturating_sub(held.bytes) / frame_bytes;
            let full = free.len() > room;
            let new = &free[..free.len().min(room)];
            held.full |= full;
            if new.is_empty() {
                return Ok(Vec::new());
            }
            let tensor = if new.len() == frames.len() {
                decoded.clone()
            } else {
                // Another batch kept some of them first, or the budget
                // ends here: only what is new and fits.
                let picks: Vec<(&Tensor, usize)> = new.iter().map(|&i| (decoded.as_ref(), i)).collect();
                Arc::new(self.device.stack_frames(&picks, FrameLayout::Hwc, FrameDType::U8)?)
            };
            held.bytes += new.len() * frame_bytes;
            held.frames += new.len();
            Ok(new.iter().enumerate().map(|(index, &i)| (i, (tensor.clone(), index))).collect())
        })
    }
}

fn invalid(message: String) -> Error {
    Error::Dataset(robocache_datasets::Error::Invalid(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(device: &Device, count: usize) -> Arc<Tensor> {
        let levels: Vec<u8> = (0..count * 2 * 2 * 3).map(|i| i as u8).collect();
        Arc::new(Tensor::from_slice(device, &levels, &[count, 2, 2, 3]).unwrap())
    }

    #[test]
    fn a_claimed_frame_is_handed_to_the_batch_waiting_for_it() {
        let device = Device::cpu();
        let cache = DeviceFrameCache::new(&device, None, 1 << 20);
        let (first, claims) = cache.find("cam", &[(0, 1), (0, 2)]).unwrap();
        assert!(first.iter().all(|l| matches!(l, Lookup::Decode)));
        let (second, _) = cache.find("cam", &[(0, 2), (0, 3)]).unwrap();
        let Lookup::Wait(pending) = &second[0] else { panic!("frame 2 is being decoded: a wait") };
        assert!(matches!(second[1], Lookup::Decode));
        let decoded = frames(&device, 2);
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| cache.wait(pending).unwrap());
            cache.keep(claims, &[(0, 1), (0, 2)], &decoded).unwrap();
            let (tensor, index) = waiter.join().unwrap().expect("kept, so handed over");
            assert!(Arc::ptr_eq(&tensor, &decoded) && index == 1);
        });
        let usage = cache.usage();
        assert_eq!((usage.frames, usage.bytes, usage.misses, usage.hits), (2, 24, 3, 1));
    }

    #[test]
    fn a_claim_given_up_sends_the_waiting_batch_to_decode() {
        let device = Device::cpu();
        let cache = DeviceFrameCache::new(&device, None, 1 << 20);
        let (_, claims) = cache.find("cam", &[(1, 0)]).unwrap();
        let (second, _) = cache.find("cam", &[(1, 0)]).unwrap();
        let Lookup::Wait(pending) = &second[0] else { panic!("a wait") };
        drop(claims); // the claiming batch failed
        assert!(cache.wait(pending).unwrap().is_none());
        // Not held, not claimed: the next batch decodes it and may claim it.
        let (third, _) = cache.find("cam", &[(1, 0)]).unwrap();
        assert!(matches!(third[0], Lookup::Decode));

        // A budget of one frame: the second claimed frame does not fit, is
        // given up, and no frame is claimed after that.
        let small = DeviceFrameCache::new(&device, None, 12);
        let (_, claims) = small.find("cam", &[(0, 0), (0, 1)]).unwrap();
        let (waiting, _) = small.find("cam", &[(0, 1)]).unwrap();
        let Lookup::Wait(pending) = &waiting[0] else { panic!("a wait") };
        small.keep(claims, &[(0, 0), (0, 1)], &frames(&device, 2)).unwrap();
        assert!(small.wait(pending).unwrap().is_none());
        assert_eq!((small.usage().frames, small.usage().bytes), (1, 12));
        let (_, claims) = small.find("cam", &[(0, 2)]).unwrap();
        assert!(claims.claimed.is_empty(), "a full cache claims nothing");
    }
}

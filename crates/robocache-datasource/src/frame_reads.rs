//! Reads of decoded video frames through the host [`FrameCache`], for any
//! format whose camera streams are video (a LeRobot root's MP4 files, a
//! ROS 2 bag's `CompressedVideo` topics): the frames the cache holds are
//! copied from it; a frame another reader is decoding is waited for; the
//! others are claimed, decoded together per video (each group of pictures
//! once, by the format's decoder) and offered to the cache. A reader
//! that gives up a claim (a failed decode) sends its waiters to decode the
//! frame themselves. The format says which video and frame a row shows;
//! this module never names a format.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use robocache_video::{Claim, FrameCache, FrameFormat, FrameKey, Lookup};

use crate::{Error, Result};

/// One frame a read asks for: its slot in the output and its cache key
/// (`file`: the format's number of the video, `frame`: its index there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WantedFrame {
    pub slot: usize,
    pub key: FrameKey,
}

/// Writes the `width × height` frames `wanted` of stream `stream` into
/// their slots of `out`, each as `format` says (RGB `[H, W, 3]`, or the
/// decoder's YUV 4:2:0 planes), through `cache` ([`read_through_cache`]).
/// `out` must hold exactly the frames asked for.
pub fn read_frames(
    cache: &FrameCache,
    stream: &str,
    (width, height): (usize, usize),
    format: FrameFormat,
    wanted: &[WantedFrame],
    out: &mut [u8],
    decode: impl Fn(usize, &[usize]) -> Result<Vec<Vec<u8>>>,
) -> Result<()> {
    let frame_bytes = frame_bytes(width, height, format);
    if out.len() != wanted.len() * frame_bytes {
        return Err(Error::Invalid(format!(
            "{} frames of `{stream}` are {} bytes ({format:?}), the buffer given has {}",
            wanted.len(),
            wanted.len() * frame_bytes,
            out.len()
        )));
    }
    // YUV planes into a slot, as `format` asks.
    let write = |planes: &[u8], slot: &mut [u8]| match format {
        FrameFormat::Rgb => robocache_video::yuv420_to_rgb_into(width, height, planes, slot),
        FrameFormat::Yuv420 => slot.copy_from_slice(planes),
    };
    read_through_cache(cache, wanted, frame_bytes, out, write, decode)
}

/// Bytes of one `width × height` frame as `format`.
pub fn frame_bytes(width: usize, height: usize, format: FrameFormat) -> usize {
    match format {
        FrameFormat::Rgb => width * height * 3,
        FrameFormat::Yuv420 => robocache_video::yuv420_len(width, height),
    }
}

/// Writes the frames `wanted` into their slots of `out` (`frame_bytes`
/// each) through `cache`. `write(planes, slot)` puts a frame's YUV 4:2:0
/// planes into a slot (as the read's format asks); `decode(file, frames)`
/// decodes frames `frames` (sorted, distinct) of video `file` into their
/// planes, in that order.
pub fn read_through_cache(
    cache: &FrameCache,
    wanted: &[WantedFrame],
    frame_bytes: usize,
    out: &mut [u8],
    write: impl Fn(&[u8], &mut [u8]),
    decode: impl Fn(usize, &[usize]) -> Result<Vec<Vec<u8>>>,
) -> Result<()> {
    // Per video: (slot, frame) of every frame the cache lacks.
    let mut missing: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
    // Frames this read claimed to decode for the cache, and the slots
    // waiting for frames another reader claimed.
    let mut claims: HashMap<FrameKey, Claim<'_>> = HashMap::new();
    let mut waiting = Vec::new();
    let caching = cache.is_enabled();
    for &WantedFrame { slot, key } in wanted {
        if caching && !claims.contains_key(&key) {
            match cache.lookup(key) {
                Lookup::Held(frame) => {
                    write(&frame, &mut out[slot * frame_bytes..(slot + 1) * frame_bytes]);
                    continue;
                }
                Lookup::Wait(pending) => {
                    waiting.push((slot, key, pending));
                    continue;
                }
                Lookup::Decode(Some(claim)) => {
                    claims.insert(key, claim);
                }
                Lookup::Decode(None) => {}
            }
        }
        missing.entry(key.file).or_default().push((slot, key.frame));
    }
    decode_missing(cache, missing, &mut claims, frame_bytes, out, &write, &decode)?;
    // Every claim is settled before this read waits for anyone else's.
    drop(claims);
    let mut given_up: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
    for (slot, key, pending) in waiting {
        match cache.wait(&pending) {
            Some(frame) => write(&frame, &mut out[slot * frame_bytes..(slot + 1) * frame_bytes]),
            None => given_up.entry(key.file).or_default().push((slot, key.frame)),
        }
    }
    decode_missing(cache, given_up, &mut HashMap::new(), frame_bytes, out, &write, &decode)
}

/// Decodes the `missing` frames of each video (each frame once however
/// many slots show it) into their slots, keeping each in the cache (with
/// its claim where this read holds one).
fn decode_missing(
    cache: &FrameCache,
    missing: BTreeMap<usize, Vec<(usize, usize)>>,
    claims: &mut HashMap<FrameKey, Claim<'_>>,
    frame_bytes: usize,
    out: &mut [u8],
    write: &impl Fn(&[u8], &mut [u8]),
    decode: &impl Fn(usize, &[usize]) -> Result<Vec<Vec<u8>>>,
) -> Result<()> {
    let caching = cache.is_enabled();
    for (file, slots) in missing {
        let mut frames: Vec<usize> = slots.iter().map(|&(_, frame)| frame).collect();
        frames.sort_unstable();
        frames.dedup();
        let decoded = decode(file, &frames)?;
        for (&frame, planes) in frames.iter().zip(decoded) {
            // Written into the first slot that shows it, copied from
            // there into the others.
            let mut shown = slots.iter().filter(|&&(_, f)| f == frame).map(|&(slot, _)| slot * frame_bytes);
            let Some(first) = shown.next() else { continue };
            let (head, tail) = out.split_at_mut(first + frame_bytes);
            let written = &mut head[first..];
            write(&planes, written);
            for at in shown {
                let at = at - first - frame_bytes;
                tail[at..at + frame_bytes].copy_from_slice(written);
            }
            let key = FrameKey { file, frame };
            match claims.remove(&key) {
                Some(claim) => {
                    claim.keep(Arc::from(planes));
                }
                None if caching => {
                    cache.insert(key, Arc::from(planes));
                }
                None => {}
            }
        }
    }
    Ok(())
}

//! Camera video for robocache: MP4 files demuxed in Rust ([`mp4`]), AV1
//! decoded on the CPU by rav1d (the Rust port of dav1d), H.264 by
//! OpenH264 and HEVC by libde265 (all compiled by cargo), frames converted
//! to RGB exactly as FFmpeg's swscale converts them ([`yuv`]), so that a
//! frame equals what PyAV, torchcodec and LeRobot return for it.
//!
//! [`VideoFile`] opens a file (reading its sample table only) and decodes
//! frames by their index in presentation order, each from the key frame
//! before it; frames asked for together share the decoding of their
//! group of pictures.
//!
//! ```no_run
//! use robocache_video::{DecoderChoice, VideoFile};
//!
//! let video = VideoFile::open("videos/observation.images.top/chunk-000/file-000.mp4")?;
//! let fps = video.average_fps();
//! let index = video.frame_at(2.5)?; // the frame LeRobot picks for t = 2.5 s
//! let frames = video.decode_rgb(&[index, index + 1])?; // [H, W, 3] each, decoded on the CPU
//! // On GPU 0's NVDEC where it decodes this codec, else on the CPU: the same planes.
//! let yuv = video.decode_yuv_on(&[index], DecoderChoice::auto(0))?;
//! assert_eq!(yuv[0].to_rgb(), frames[0]);
//! println!("{} frames at {fps} fps, {}x{}", video.frames(), video.width(), video.height());
//! # Ok::<(), robocache_video::Error>(())
//! ```
//!
//! [`H264Encoder`] and [`Mp4Writer`] write the other way: RGB frames
//! encoded by OpenH264 into an MP4 file as LeRobot's are laid out (what
//! `robocache convert lerobot` writes camera streams as).
//!
//! [`FrameCache`] keeps decoded frames within a byte budget for the
//! epochs after the first.
//!
//! [`DecoderChoice`] says where frames are decoded: on the CPU, or on a
//! GPU's video engines (NVDEC, through the driver's `libnvcuvid.so.1`,
//! found at run time) with the CPU beside and instead of them. H.264 and
//! HEVC decode on every NVDEC GPU, AV1 on Ada and later.

mod annex_b;
mod av1;
mod build_info;
mod byte_source;
mod error;
mod frame_cache;
mod h264;
mod h264_encoder;
pub mod h264_idr_pic_id;
mod hevc;
pub mod mp4;
mod mp4_writer;
mod nal;
mod nvdec;
pub mod resize;
#[cfg(feature = "testing")]
pub mod testing;
pub mod yuv;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use annex_b::{is_key_frame, AnnexBDecoder};
pub use build_info::{cpu_decoders_have_assembly, decoders, DecoderInfo};
pub use byte_source::{ByteSource, LocalFile};
pub use error::{CodecError, Error, Result};
pub use frame_cache::{Claim, FrameCache, FrameCacheUsage, FrameKey, Lookup, PendingFrame};
pub use h264_encoder::{EncodedFrame, H264Encoder};
pub use mp4::{Codec, Track};
pub use mp4_writer::Mp4Writer;
pub use resize::{CropBox, FrameResize, ResizePlan, ResizeTaps, MAX_RESIZE_TAPS};
pub use robocache_claims::Pending;
pub use yuv::{yuv420_len, yuv420_to_rgb_into, Yuv420};

use av1::Av1Decoder;
use h264::H264Decoder;
use hevc::HevcDecoder;
pub use nal::NalConfig;
pub use nvdec::DEFAULT_SESSIONS as DEFAULT_NVDEC_SESSIONS;
pub use nvdec::IDLE_SESSION_RELEASE as NVDEC_IDLE_SESSION_RELEASE;
use nvdec::{Gpu, Input, NvdecDecoder};

/// Where frames are decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DecoderChoice {
    /// On the CPU: AV1 by rav1d, H.264 by OpenH264, HEVC by libde265.
    #[default]
    Cpu,
    /// On GPU `device`'s video engines (NVDEC) where its driver is there
    /// and decodes the codec at the video's size (H.264 and HEVC on every
    /// NVDEC GPU, AV1 on Ada and later), with at most `nvdec_sessions`
    /// requests of the process decoding on that GPU at once; requests past
    /// that decode on the CPU beside them, and every request does where
    /// NVDEC cannot. [`DecoderChoice::auto`] takes
    /// [`DEFAULT_NVDEC_SESSIONS`].
    Auto { device: u32, nvdec_sessions: usize },
    /// On GPU `device`'s NVDEC only: where it cannot decode, an error.
    Nvdec { device: u32 },
}

impl DecoderChoice {
    /// [`DecoderChoice::Auto`] on GPU `device` with [`DEFAULT_NVDEC_SESSIONS`].
    pub fn auto(device: u32) -> DecoderChoice {
        DecoderChoice::Auto { device, nvdec_sessions: DEFAULT_NVDEC_SESSIONS }
    }
}

/// How decoded frames are handed out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FrameFormat {
    /// RGB, `[height, width, 3]` bytes ([`Yuv420::to_rgb`]).
    #[default]
    Rgb,
    /// The decoder's YUV 4:2:0 planes ([`Yuv420::data`], [`yuv420_len`]
    /// bytes): half the bytes of RGB, for a device that converts them.
    Yuv420,
}

/// Samples decoded, by where: the decoding work a request did (key frames
/// and the frames between included), summed over requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeCounts {
    /// Decoded on the CPU (rav1d, OpenH264, libde265).
    pub cpu_samples: u64,
    /// Decoded on NVDEC.
    pub nvdec_samples: u64,
}

impl std::ops::AddAssign for DecodeCounts {
    fn add_assign(&mut self, other: DecodeCounts) {
        self.cpu_samples += other.cpu_samples;
        self.nvdec_samples += other.nvdec_samples;
    }
}

/// The most idle CPU decoders the process keeps, all files together (a
/// decoder holds its reference frames: a few MB at 480×640). A decoder
/// given back past it is closed; a file's next request opens a new one.
pub const MAX_IDLE_CPU_DECODERS: usize = 128;

/// Idle CPU decoders held by every [`VideoFile`] of the process.
static IDLE_CPU_DECODERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The idle CPU decoders the process holds now (at most [`MAX_IDLE_CPU_DECODERS`]).
pub fn idle_cpu_decoders() -> usize {
    IDLE_CPU_DECODERS.load(std::sync::atomic::Ordering::Acquire)
}

/// An open video file: its track's sample table and the decoders that
/// reading threads share.
#[derive(Debug)]
pub struct VideoFile {
    path: PathBuf,
    file: Box<dyn ByteSource>,
    track: Track,
    /// Decode-order sample of each presentation-order frame.
    order: Vec<usize>,
    /// Idle decoders, taken by a reading thread and put back.
    decoders: Mutex<Vec<FrameDecoder>>,
}

/// The decoder of one track, by codec. Each sample goes in tagged with its
/// decode-order index; frames come out with the tag of the sample they show.
#[derive(Debug)]
enum FrameDecoder {
    Av1(Av1Decoder),
    /// Boxed: OpenH264's wrapper is a few hundred bytes of function pointers.
    H264(Box<H264Decoder>),
    Hevc(HevcDecoder),
    /// An NVDEC session of a GPU, lent to this file for one request.
    Nvdec(Box<NvdecDecoder>),
}

impl FrameDecoder {
    /// The next sample is a key frame: forget every reference.
    fn start_group(&mut self) {
        match self {
            FrameDecoder::Av1(decoder) => decoder.flush(),
            FrameDecoder::H264(_) | FrameDecoder::Hevc(_) => {}
            FrameDecoder::Nvdec(decoder) => decoder.start_group(),
        }
    }

    /// Decodes sample `tag`; returns the frames it lets out. A decoder
    /// may leave out the frames of samples not `wanted` (NVDEC and rav1d
    /// do: they are decoded as references, not copied out).
    fn decode(&mut self, tag: usize, wanted: bool, sample: &[u8]) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        match self {
            // An AV1 temporal unit in MP4 shows its own frame, if any.
            FrameDecoder::Av1(decoder) => {
                Ok(decoder.decode(sample, wanted)?.map(|frame| (tag, frame)).into_iter().collect())
            }
            FrameDecoder::H264(decoder) => decoder.decode(tag, sample),
            FrameDecoder::Hevc(decoder) => decoder.decode(tag, sample),
            FrameDecoder::Nvdec(decoder) => decoder.decode(tag, wanted, sample),
        }
    }

    /// The frames still held back (for reordering, or one sample late) at
    /// the end of a request.
    fn finish(&mut self) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        match self {
            FrameDecoder::Av1(_) => Ok(Vec::new()),
            FrameDecoder::H264(decoder) => decoder.finish(),
            FrameDecoder::Hevc(decoder) => decoder.finish(),
            FrameDecoder::Nvdec(decoder) => decoder.finish(),
        }
    }
}

impl Drop for VideoFile {
    fn drop(&mut self) {
        let idle = self.decoders.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).len();
        IDLE_CPU_DECODERS.fetch_sub(idle, std::sync::atomic::Ordering::AcqRel);
    }
}

impl VideoFile {
    /// Opens the local file `path` and reads its sample table.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = LocalFile::open(&path).map_err(|error| Error::Io { file: path.clone(), error })?;
        Self::from_source(path, Box::new(file))
    }

    /// Reads the sample table of `file` (a local file, a remote object read
    /// in ranges, bytes in memory: whatever implements [`ByteSource`]);
    /// `path` names it in errors.
    pub fn from_source(path: PathBuf, file: Box<dyn ByteSource>) -> Result<Self> {
        let track = mp4::read_track(&path, &*file)?;
        if track.samples.is_empty() {
            return Err(Error::Container { file: path, problem: "the video track has no frames".into() });
        }
        let order = track.presentation_order();
        Ok(VideoFile { path, file, track, order, decoders: Mutex::new(Vec::new()) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn codec(&self) -> Codec {
        self.track.codec
    }

    pub fn width(&self) -> usize {
        self.track.width as usize
    }

    pub fn height(&self) -> usize {
        self.track.height as usize
    }

    /// Frames in the file.
    pub fn frames(&self) -> usize {
        self.order.len()
    }

    /// Frames per second as torchcodec's `average_fps` gives it.
    pub fn average_fps(&self) -> f64 {
        self.track.average_fps()
    }

    /// The presentation time of frame `index` in seconds.
    pub fn frame_time(&self, index: usize) -> Option<f64> {
        let sample = self.track.samples.get(*self.order.get(index)?)?;
        Some(sample.pts as f64 / self.track.timescale as f64)
    }

    /// The frame LeRobot's decode picks for time `t` (seconds in the file):
    /// `round(t · average_fps)` (Python's round, half to even).
    pub fn frame_at(&self, t: f64) -> Result<usize> {
        let scaled = (t * self.average_fps()).round_ties_even();
        let inside = scaled >= 0.0 && scaled < self.frames() as f64; // false for NaN too
        if !inside {
            return Err(Error::FrameOutOfRange {
                file: self.path.clone(),
                frame: if scaled.is_finite() && scaled > 0.0 { scaled as usize } else { 0 },
                frames: self.frames(),
            });
        }
        Ok(scaled as usize)
    }

    /// Frames `indices` (presentation order) as YUV 4:2:0, in the order
    /// asked, decoded on the CPU (see [`VideoFile::decode_yuv_on`]).
    pub fn decode_yuv(&self, indices: &[usize]) -> Result<Vec<Yuv420>> {
        self.decode_yuv_on(indices, DecoderChoice::Cpu)
    }

    /// Frames `indices` (presentation order) as YUV 4:2:0, in the order
    /// asked, decoded where `choice` says. Each group of pictures is
    /// decoded once, from its key frame to the last frame asked for in it
    /// (in decode order).
    pub fn decode_yuv_on(&self, indices: &[usize], choice: DecoderChoice) -> Result<Vec<Yuv420>> {
        Ok(self.decode_yuv_counted(indices, choice)?.0)
    }

    /// [`VideoFile::decode_yuv_on`], with the samples it decoded and where.
    pub fn decode_yuv_counted(&self, indices: &[usize], choice: DecoderChoice) -> Result<(Vec<Yuv420>, DecodeCounts)> {
        // Decode-order samples wanted, grouped by the key frame they start from.
        let mut wanted: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &index in indices {
            let sample = *self.order.get(index).ok_or_else(|| Error::FrameOutOfRange {
                file: self.path.clone(),
                frame: index,
                frames: self.frames(),
            })?;
            wanted.entry(self.key_frame_of(sample)).or_default().push(sample);
        }
        // Decode ranges, in decode order: a group whose key frame falls in
        // the range before it (that range ends at a leading picture of this
        // key frame) joins that range.
        let mut ranges: Vec<(usize, usize)> = Vec::with_capacity(wanted.len());
        for (&key, samples) in &wanted {
            let last = samples.iter().copied().max().unwrap_or(key);
            match ranges.last_mut() {
                Some((_, end)) if key <= *end => *end = (*end).max(last),
                _ => ranges.push((key, last)),
            }
        }
        let mut decoder = self.take_decoder(choice)?;
        let on_nvdec = matches!(decoder, FrameDecoder::Nvdec(_));
        let mut samples_decoded = 0u64;
        let mut decoded: BTreeMap<usize, Yuv420> = BTreeMap::new();
        let result = (|| {
            // Frames of any wanted sample are kept whenever they come out: an
            // H.264 decoder lets a group's last picture out during the next.
            let wanted_samples: BTreeSet<usize> = wanted.values().flatten().copied().collect();
            let mut keep = |shown: Vec<(usize, Yuv420)>| -> Result<()> {
                for (sample, frame) in shown {
                    if !wanted_samples.contains(&sample) {
                        continue;
                    }
                    if (frame.width, frame.height) != (self.width(), self.height()) {
                        return Err(Error::Decode {
                            file: self.path.clone(),
                            frame: sample,
                            source: error::corrupt(format!(
                                "decodes to {}x{}, the track says {}x{}",
                                frame.width,
                                frame.height,
                                self.width(),
                                self.height()
                            )),
                        });
                    }
                    decoded.insert(sample, frame);
                }
                Ok(())
            };
            let mut last = 0;
            for &(key, end) in &ranges {
                last = end;
                decoder.start_group();
                for sample in key..=last {
                    samples_decoded += 1;
                    let bytes = mp4::read_sample(&self.path, &*self.file, &self.track.samples[sample])?;
                    let wanted = wanted_samples.contains(&sample);
                    let shown = decoder.decode(sample, wanted, &bytes).map_err(|source| Error::Decode {
                        file: self.path.clone(),
                        frame: sample,
                        source,
                    })?;
                    keep(shown)?;
                }
            }
            let shown =
                decoder.finish().map_err(|source| Error::Decode { file: self.path.clone(), frame: last, source })?;
            keep(shown)
        })();
        if result.is_ok() {
            self.put_decoder(decoder);
        }
        result?;
        // Moved out at its last request, copied for the ones before it.
        let mut frames = Vec::with_capacity(indices.len());
        for (at, &index) in indices.iter().enumerate() {
            let sample = self.order[index];
            let asked_again = indices[at + 1..].iter().any(|&later| self.order[later] == sample);
            let frame = if asked_again { decoded.get(&sample).cloned() } else { decoded.remove(&sample) };
            frames.push(frame.ok_or_else(|| Error::Decode {
                file: self.path.clone(),
                frame: sample,
                source: error::corrupt("the decoder showed no frame for this sample"),
            })?);
        }
        let counts = if on_nvdec {
            DecodeCounts { nvdec_samples: samples_decoded, ..Default::default() }
        } else {
            DecodeCounts { cpu_samples: samples_decoded, ..Default::default() }
        };
        Ok((frames, counts))
    }

    /// The decode-order sample that decoding sample `sample` starts from:
    /// the sync sample at or before it, or, for a leading picture of an
    /// open group of pictures (shown before its key frame, a CRA in HEVC,
    /// which may refer to frames before that key frame), the sync sample
    /// before that one, as a seek to the frame's time in FFmpeg does.
    fn key_frame_of(&self, sample: usize) -> usize {
        let samples = &self.track.samples;
        let sync_before = |end: usize| (0..=end).rev().find(|&s| samples[s].sync).unwrap_or(0);
        let mut key = sync_before(sample);
        while key > 0 && samples[sample].pts < samples[key].pts {
            key = sync_before(key - 1);
        }
        key
    }

    /// A decoder for one request: an NVDEC session where `choice` allows
    /// and one is free, else this file's idle CPU decoder or a new one.
    fn take_decoder(&self, choice: DecoderChoice) -> Result<FrameDecoder> {
        let (device, limit) = match choice {
            DecoderChoice::Cpu => return self.take_cpu_decoder(),
            DecoderChoice::Auto { device, nvdec_sessions } => (device, Some(nvdec_sessions)),
            DecoderChoice::Nvdec { device } => (device, None),
        };
        let required = limit.is_none();
        let gpu = match Gpu::get(device) {
            Ok(gpu) => gpu,
            Err(source) if required => return Err(Error::NvdecUnavailable { file: self.path.clone(), source }),
            Err(reason) => {
                tracing::debug!(file = %self.path.display(), %reason, "no NVDEC: decoding on the CPU");
                return self.take_cpu_decoder();
            }
        };
        match self.take_nvdec(&gpu, limit) {
            Ok(Some(decoder)) => Ok(decoder),
            Ok(None) => self.take_cpu_decoder(),
            Err(source) if required => Err(Error::Nvdec { file: self.path.clone(), source }),
            Err(problem) => {
                tracing::debug!(file = %self.path.display(), %problem, "decoding on the CPU");
                self.take_cpu_decoder()
            }
        }
    }

    /// An NVDEC session of `gpu` set to this track; `None` where `limit`
    /// sessions are in use already (no limit: NVDEC required).
    fn take_nvdec(&self, gpu: &std::sync::Arc<Gpu>, limit: Option<usize>) -> Result<Option<FrameDecoder>, CodecError> {
        gpu.supports(self.track.codec, self.track.width, self.track.height)?;
        let input = Input::new(self.track.codec, &self.track.config)?;
        let Some(session) = gpu.take_session(limit)? else { return Ok(None) };
        Ok(Some(FrameDecoder::Nvdec(Box::new(NvdecDecoder::new(session, self.track.codec, input)))))
    }

    fn take_cpu_decoder(&self) -> Result<FrameDecoder> {
        match self.decoders.lock().ok().and_then(|mut d| d.pop()) {
            Some(decoder) => {
                IDLE_CPU_DECODERS.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                Ok(decoder)
            }
            None => self.new_decoder(),
        }
    }

    /// A decoder back after a request that succeeded: an NVDEC session to
    /// its GPU, a CPU decoder to this file.
    fn put_decoder(&self, decoder: FrameDecoder) {
        match decoder {
            FrameDecoder::Nvdec(decoder) => decoder.give_back(),
            cpu => {
                // Kept for this file's next request while the process holds
                // fewer than MAX_IDLE_CPU_DECODERS idle ones; else closed.
                use std::sync::atomic::Ordering::AcqRel;
                if IDLE_CPU_DECODERS.fetch_add(1, AcqRel) >= MAX_IDLE_CPU_DECODERS {
                    IDLE_CPU_DECODERS.fetch_sub(1, AcqRel);
                    return;
                }
                match self.decoders.lock() {
                    Ok(mut idle) => idle.push(cpu),
                    // Not kept: neither is it counted.
                    Err(_) => {
                        IDLE_CPU_DECODERS.fetch_sub(1, AcqRel);
                    }
                }
            }
        }
    }

    /// A CPU decoder for this file's codec.
    fn new_decoder(&self) -> Result<FrameDecoder> {
        build_info::warn_once_if_slow();
        let decoder = match self.track.codec {
            Codec::Av1 => Av1Decoder::new().map(FrameDecoder::Av1),
            Codec::H264 => H264Decoder::new(&self.track.config).map(|d| FrameDecoder::H264(Box::new(d))),
            Codec::Hevc => HevcDecoder::new(&self.track.config).map(FrameDecoder::Hevc),
        };
        decoder.map_err(|source| Error::Decode { file: self.path.clone(), frame: 0, source })
    }

    /// Frames `indices` (presentation order) as RGB `[H, W, 3]`, in the order asked.
    pub fn decode_rgb(&self, indices: &[usize]) -> Result<Vec<Vec<u8>>> {
        Ok(self.decode_yuv(indices)?.iter().map(Yuv420::to_rgb).collect())
    }
}

/// NVDEC sessions idle in GPU `device`'s pool (0 where NVDEC is not there):
/// each holds a hardware decoder and its surfaces, and is released after
/// [`NVDEC_IDLE_SESSION_RELEASE`] unused.
pub fn idle_nvdec_sessions(device: u32) -> usize {
    Gpu::get(device).map(|gpu| gpu.idle_sessions()).unwrap_or(0)
}

/// Releases GPU `device`'s NVDEC sessions idle for at least `older_than`
/// now, rather than after [`NVDEC_IDLE_SESSION_RELEASE`]; returns how many.
pub fn release_idle_nvdec_sessions(device: u32, older_than: std::time::Duration) -> usize {
    Gpu::get(device).map(|gpu| gpu.release_idle(older_than)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_cpu_decoders_are_bounded_across_files() {
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/baseline_cropped.mp4");
        let files: Vec<VideoFile> = (0..4).map(|_| VideoFile::open(&fixture).unwrap()).collect();
        for file in &files {
            for _ in 0..MAX_IDLE_CPU_DECODERS {
                let decoder = file.new_decoder().unwrap();
                file.put_decoder(decoder);
                assert!(idle_cpu_decoders() <= MAX_IDLE_CPU_DECODERS);
            }
        }
        let held: usize = files.iter().map(|f| f.decoders.lock().unwrap().len()).sum();
        assert!(held <= MAX_IDLE_CPU_DECODERS, "{held} idle decoders held");
        assert!(held >= MAX_IDLE_CPU_DECODERS / 2, "the files kept decoders: {held}");
        // A file closed gives its idle decoders' count back.
        drop(files);
        assert!(idle_cpu_decoders() < MAX_IDLE_CPU_DECODERS);
    }
}

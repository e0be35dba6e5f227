//! H.264 encoding on the CPU: Cisco's OpenH264 encoder, the one the
//! decoder comes from (compiled by cargo, no system library, BSD-licensed,
//! so every build carries it; FFmpeg's x264 is GPL and SVT-AV1, LeRobot's
//! default, is not in any Rust crate a build can carry).
//!
//! What it writes, and why:
//! - Constrained Baseline profile (OpenH264's), YUV 4:2:0 8-bit, no
//!   B-frames: frames decode in the order they are stored, so a sample's
//!   presentation time is its decode time.
//! - A constant quantiser of 26 (OpenH264's own with its rate control
//!   off): the same quality for every frame of every episode, whatever
//!   the scene; no frame is skipped.
//! - An IDR every `key_frame_every` frames (LeRobot encodes with `g=2`):
//!   a frame decodes from the key frame at or before it, so the shorter
//!   the group, the cheaper a random read in training.
//! - Colours: [`Yuv420::from_rgb`] (BT.601, limited range), which is what a
//!   decoder assumes of a stream that signals no colour space, as
//!   LeRobot's own encodes signal none.

use openh264::encoder::{
    Complexity, Encoder, EncoderConfig, FrameType, IntraFramePeriod, Profile, RateControlMode, SpsPpsStrategy,
    UsageType,
};
use openh264::formats::YUVSlices;
use openh264::OpenH264API;

use crate::error::{corrupt, CodecError};
use crate::yuv::Yuv420;

/// One encoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedFrame {
    /// Whether it is an IDR picture (a decode may start here).
    pub key: bool,
    /// Its NAL units as an MP4 sample holds them: each after its length
    /// (4 bytes, big-endian), parameter sets left out.
    pub sample: Vec<u8>,
    /// The sequence and picture parameter sets the encoder put before it
    /// (a key frame's), without start codes.
    pub sps: Vec<Vec<u8>>,
    pub pps: Vec<Vec<u8>>,
}

/// Encodes RGB frames of one size as H.264 (see the module docs).
pub struct H264Encoder {
    encoder: Encoder,
    width: usize,
    height: usize,
}

impl std::fmt::Debug for H264Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H264Encoder").field("width", &self.width).field("height", &self.height).finish_non_exhaustive()
    }
}

/// The largest frame OpenH264 encodes (its level 5.2).
const MAX_SIDE: (usize, usize) = (3840, 2160);

impl H264Encoder {
    /// An encoder of `width × height` frames at `fps` frames a second,
    /// with a key frame every `key_frame_every` frames (at least 1).
    pub fn new(width: usize, height: usize, fps: f64, key_frame_every: u32) -> Result<Self, CodecError> {
        let (long, short) = (width.max(height), width.min(height));
        if width < 16 || height < 16 || width % 2 == 1 || height % 2 == 1 || long > MAX_SIDE.0 || short > MAX_SIDE.1 {
            return Err(CodecError::Unsupported(format!(
                "H.264 encoding takes frames of even width and height, from 16×16 to 3840×2160; these are {width}×{height}"
            )));
        }
        if !(fps.is_finite() && fps > 0.0) {
            return Err(CodecError::Unsupported(format!("an H.264 stream at {fps} frames a second")));
        }
        let config = EncoderConfig::new()
            .usage_type(UsageType::CameraVideoRealTime)
            .profile(Profile::Baseline)
            .rate_control_mode(RateControlMode::Off)
            .skip_frames(false)
            .scene_change_detect(false)
            .background_detection(false)
            .adaptive_quantization(false)
            .complexity(Complexity::Medium)
            .sps_pps_strategy(SpsPpsStrategy::ConstantId)
            .intra_frame_period(IntraFramePeriod::from_num_frames(key_frame_every.max(1)))
            .max_frame_rate(openh264::encoder::FrameRate::from_hz(fps as f32))
            .num_threads(1);
        let encoder = Encoder::with_api_config(OpenH264API::from_source(), config).map_err(library)?;
        Ok(H264Encoder { encoder, width, height })
    }

    /// Encodes the next frame, RGB `[height, width, 3]` row-major.
    pub fn encode_rgb(&mut self, rgb: &[u8]) -> Result<EncodedFrame, CodecError> {
        let yuv = Yuv420::from_rgb(self.width, self.height, rgb).ok_or_else(|| {
            corrupt(format!("{} bytes for an RGB frame of {}×{}", rgb.len(), self.width, self.height))
        })?;
        self.encode_yuv(&yuv)
    }

    /// Encodes the next frame, given as YUV 4:2:0 planes.
    pub fn encode_yuv(&mut self, frame: &Yuv420) -> Result<EncodedFrame, CodecError> {
        if (frame.width, frame.height) != (self.width, self.height) {
            return Err(corrupt(format!(
                "a {}×{} frame for an encoder of {}×{}",
                frame.width, frame.height, self.width, self.height
            )));
        }
        let (w, cw) = (self.width, self.width / 2);
        let source = YUVSlices::new((frame.plane(0), frame.plane(1), frame.plane(2)), (w, self.height), (w, cw, cw));
        let stream = self.encoder.encode(&source).map_err(library)?;
        let key = matches!(stream.frame_type(), FrameType::IDR);
        let mut out = EncodedFrame { key, sample: Vec::new(), sps: Vec::new(), pps: Vec::new() };
        for l in 0..stream.num_layers() {
            let Some(layer) = stream.layer(l) else { continue };
            for n in 0..layer.nal_count() {
                let Some(unit) = layer.nal_unit(n).map(without_start_code) else { continue };
                match unit.first().map(|b| b & 0x1f) {
                    Some(7) => out.sps.push(unit.to_vec()),
                    Some(8) => out.pps.push(unit.to_vec()),
                    Some(_) => {
                        let length = u32::try_from(unit.len()).map_err(|_| corrupt("a NAL unit of 4 GiB or more"))?;
                        out.sample.extend_from_slice(&length.to_be_bytes());
                        out.sample.extend_from_slice(unit);
                    }
                    None => {}
                }
            }
        }
        if out.sample.is_empty() {
            return Err(corrupt(format!("OpenH264 returned no picture for a frame ({:?})", stream.frame_type())));
        }
        Ok(out)
    }
}

/// A unit after its Annex B start code (OpenH264 writes `00 00 00 01`).
fn without_start_code(unit: &[u8]) -> &[u8] {
    let zeros = unit.iter().take_while(|&&b| b == 0).count();
    match unit.get(zeros) {
        Some(1) if zeros >= 2 => &unit[zeros + 1..],
        _ => unit,
    }
}

fn library(error: openh264::Error) -> CodecError {
    CodecError::Library { decoder: "OpenH264", code: 0, message: format!("encoding: {error}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_codes_are_taken_off() {
        assert_eq!(without_start_code(&[0, 0, 0, 1, 0x65, 7]), [0x65, 7]);
        assert_eq!(without_start_code(&[0, 0, 1, 0x41]), [0x41]);
        assert_eq!(without_start_code(&[0x41, 0]), [0x41, 0]);
    }

    #[test]
    fn odd_or_oversized_frames_are_refused_with_their_size() {
        for (w, h) in [(33, 32), (32, 1), (14, 16), (4000, 100), (0, 0)] {
            let error = H264Encoder::new(w, h, 30.0, 2).unwrap_err().to_string();
            assert!(error.contains(&format!("{w}×{h}")), "{error}");
        }
        assert!(H264Encoder::new(32, 32, 0.0, 2).is_err());
    }
}

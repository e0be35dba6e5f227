//! H.264 that arrives as Annex B access units, one picture each, with its
//! parameter sets in the stream (a ROS 2 `foxglove_msgs/CompressedVideo`
//! topic: each message one frame, key frames led by their SPS and PPS).
//! The units are handed to the same OpenH264 decoder MP4 samples go to, as
//! samples of a track whose `avcC` record holds no parameter sets (as an
//! `avc3` track's).

use crate::error::{corrupt, CodecError};
use crate::h264::H264Decoder;
use crate::yuv::Yuv420;

/// An `avcC` record: version 1, Baseline 3.0 (unused by OpenH264), 4-byte
/// NAL sizes, no SPS, no PPS.
const RECORD_WITHOUT_SETS: [u8; 7] = [1, 66, 0, 30, 0xff, 0xe0, 0];

/// NAL unit type 5: a slice of an IDR picture (a key frame).
const IDR_SLICE: u8 = 5;

/// Decodes H.264 access units given as Annex B.
#[derive(Debug)]
pub struct AnnexBH264 {
    decoder: H264Decoder,
    sample: Vec<u8>,
}

impl AnnexBH264 {
    pub fn new() -> Result<Self, CodecError> {
        Ok(AnnexBH264 { decoder: H264Decoder::new(&RECORD_WITHOUT_SETS)?, sample: Vec::new() })
    }

    /// Decodes access unit `tag` (its index in decode order; a decode
    /// starts at a key frame and goes on unit after unit); returns the
    /// pictures it let out, each with the tag of the unit it shows.
    pub fn decode(&mut self, tag: usize, access_unit: &[u8]) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        self.sample.clear();
        for unit in nal_units(access_unit)? {
            self.sample.extend_from_slice(&(unit.len() as u32).to_be_bytes());
            self.sample.extend_from_slice(unit);
        }
        self.decoder.decode(tag, &self.sample)
    }

    /// The pictures still held back, at the end of a run of units.
    pub fn finish(&mut self) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        self.decoder.finish()
    }
}

/// Whether an access unit holds an IDR slice (a decode may start there).
pub fn is_h264_key_frame(access_unit: &[u8]) -> bool {
    nal_units(access_unit).is_ok_and(|units| units.iter().any(|u| u.first().is_some_and(|b| b & 0x1f == IDR_SLICE)))
}

/// The NAL units of Annex B bytes (each after a 3- or 4-byte start code).
fn nal_units(annex_b: &[u8]) -> Result<Vec<&[u8]>, CodecError> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at + 3 <= annex_b.len() {
        if annex_b[at] == 0 && annex_b[at + 1] == 0 && annex_b[at + 2] == 1 {
            starts.push(at + 3);
            at += 3;
        } else {
            at += 1;
        }
    }
    if starts.first().is_none_or(|&first| annex_b[..first - 3].iter().any(|&b| b != 0)) {
        return Err(corrupt("an access unit that does not start with an Annex B start code"));
    }
    let mut units = Vec::with_capacity(starts.len());
    for (k, &start) in starts.iter().enumerate() {
        let mut end = starts.get(k + 1).map_or(annex_b.len(), |&next| next - 3);
        // A 4-byte start code's leading zero, and trailing zeros, belong to no unit.
        while end > start && annex_b[end - 1] == 0 {
            end -= 1;
        }
        if end > start {
            units.push(&annex_b[start..end]);
        }
    }
    if units.is_empty() {
        return Err(corrupt("an access unit without a NAL unit"));
    }
    Ok(units)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annex_b_splits_into_units_and_finds_key_frames() {
        let au = [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 9, 9];
        assert_eq!(nal_units(&au).unwrap(), [&[0x67, 1, 2][..], &[0x68, 3], &[0x65, 9, 9]]);
        assert!(is_h264_key_frame(&au));
        assert!(!is_h264_key_frame(&[0, 0, 1, 0x41, 5]));
        assert!(nal_units(&[9, 0, 0, 1, 0x41]).is_err());
        assert!(nal_units(&[1, 2, 3]).is_err());
        assert!(!is_h264_key_frame(&[]));
    }
}

//! H.264 and HEVC that arrive as Annex B access units, one picture each,
//! with their parameter sets in the stream (a ROS 2
//! `foxglove_msgs/CompressedVideo` topic: each message one frame, key frames
//! led by their parameter sets). The units are handed to the same decoders
//! MP4 samples go to (OpenH264, libde265), as samples of a track whose
//! configuration record holds no parameter sets (as an `avc3` or `hev1`
//! track's), or to a GPU's NVDEC, whose parser reads Annex B itself
//! ([`AnnexBDecoder::with_choice`]).

use crate::error::{corrupt, CodecError};
use crate::h264::H264Decoder;
use crate::hevc::HevcDecoder;
use crate::mp4::Codec;
use crate::nvdec::{Gpu, Input, NvdecDecoder};
use crate::yuv::Yuv420;
use crate::DecoderChoice;

/// An `avcC` record: version 1, Baseline 3.0 (unused by the decoder),
/// 4-byte NAL sizes, no SPS, no PPS.
const AVCC_WITHOUT_SETS: [u8; 7] = [1, 66, 0, 30, 0xff, 0xe0, 0];

/// An `hvcC` record: version 1, Main profile, 4:2:0, 8 bits (the decoder
/// reads the stream's own), 4-byte NAL sizes, no parameter set arrays.
const HVCC_WITHOUT_SETS: [u8; 23] =
    [1, 1, 0x60, 0, 0, 0, 0x90, 0, 0, 0, 0, 0, 93, 0xf0, 0, 0xfc, 0xfd, 0xf8, 0xf8, 0, 0, 0x0f, 0];

enum Decoder {
    H264(H264Decoder),
    Hevc(HevcDecoder),
    /// An NVDEC session of a GPU, for this decoder's run of units.
    Nvdec(Box<NvdecDecoder>),
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Decoder::H264(_) => "H264",
            Decoder::Hevc(_) => "Hevc",
            Decoder::Nvdec(_) => "Nvdec",
        })
    }
}

/// Decodes H.264 or HEVC access units given as Annex B, on the CPU or on
/// NVDEC.
#[derive(Debug)]
pub struct AnnexBDecoder {
    decoder: Decoder,
    sample: Vec<u8>,
}

impl AnnexBDecoder {
    /// A decoder of `codec` (H.264 or HEVC; AV1 has no Annex B).
    pub fn new(codec: Codec) -> Result<Self, CodecError> {
        let decoder = match codec {
            Codec::H264 => Decoder::H264(H264Decoder::new(&AVCC_WITHOUT_SETS)?),
            Codec::Hevc => Decoder::Hevc(HevcDecoder::new(&HVCC_WITHOUT_SETS)?),
            other => return Err(corrupt(format!("{other:?} does not come as Annex B"))),
        };
        Ok(AnnexBDecoder { decoder, sample: Vec::new() })
    }

    /// A decoder of `codec` pictures of `width × height` where `choice`
    /// says: on the CPU; on GPU `device`'s NVDEC where `Auto` finds a
    /// session free and the GPU decodes the codec at that size, else on the
    /// CPU; on NVDEC only (`Nvdec`: where it cannot, the error says why,
    /// [`CodecError::Unavailable`] where this machine has no NVDEC). The
    /// pictures are the same bits on either.
    pub fn with_choice(codec: Codec, width: usize, height: usize, choice: DecoderChoice) -> Result<Self, CodecError> {
        let (device, limit) = match choice {
            DecoderChoice::Cpu => return Self::new(codec),
            DecoderChoice::Auto { device, nvdec_sessions } => (device, Some(nvdec_sessions)),
            DecoderChoice::Nvdec { device } => (device, None),
        };
        let nvdec = || -> Result<Option<NvdecDecoder>, CodecError> {
            let record: &[u8] = match codec {
                Codec::H264 => &AVCC_WITHOUT_SETS,
                Codec::Hevc => &HVCC_WITHOUT_SETS,
                other => return Err(corrupt(format!("{other:?} does not come as Annex B"))),
            };
            let size = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            let gpu = Gpu::get(device)?;
            gpu.supports(codec, size(width), size(height))?;
            // No parameter sets from a record: the units carry their own.
            let input = Input::new(codec, record)?;
            Ok(gpu.take_session(limit)?.map(|session| NvdecDecoder::new(session, codec, input)))
        };
        match nvdec() {
            Ok(Some(decoder)) => Ok(AnnexBDecoder { decoder: Decoder::Nvdec(Box::new(decoder)), sample: Vec::new() }),
            Ok(None) => Self::new(codec),
            Err(problem) if limit.is_none() => Err(problem),
            Err(problem) => {
                tracing::debug!(%problem, "Annex B units decode on the CPU");
                Self::new(codec)
            }
        }
    }

    /// Whether the units decode on NVDEC.
    pub fn is_nvdec(&self) -> bool {
        matches!(self.decoder, Decoder::Nvdec(_))
    }

    /// Gives an NVDEC session back to its GPU for the next decoder (after
    /// a run that succeeded); a CPU decoder is closed.
    pub fn close(self) {
        if let Decoder::Nvdec(decoder) = self.decoder {
            decoder.give_back();
        }
    }

    /// Decodes access unit `tag` (its index in decode order; a decode
    /// starts at a key frame and goes on unit after unit); returns the
    /// pictures it let out, each with the tag of the unit it shows.
    pub fn decode(&mut self, tag: usize, access_unit: &[u8]) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        self.decode_wanted(tag, true, access_unit)
    }

    /// [`AnnexBDecoder::decode`], saying whether the unit's picture is
    /// `wanted`: NVDEC decodes one that is not as a reference only and
    /// never copies it out (the CPU decoders give it all the same).
    pub fn decode_wanted(
        &mut self,
        tag: usize,
        wanted: bool,
        access_unit: &[u8],
    ) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        self.sample.clear();
        for unit in nal_units(access_unit)? {
            self.sample.extend_from_slice(&(unit.len() as u32).to_be_bytes());
            self.sample.extend_from_slice(unit);
        }
        match &mut self.decoder {
            Decoder::H264(decoder) => decoder.decode(tag, &self.sample),
            Decoder::Hevc(decoder) => decoder.decode(tag, &self.sample),
            Decoder::Nvdec(decoder) => decoder.decode(tag, wanted, &self.sample),
        }
    }

    /// The pictures still held back, at the end of a run of units.
    pub fn finish(&mut self) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        match &mut self.decoder {
            Decoder::H264(decoder) => decoder.finish(),
            Decoder::Hevc(decoder) => decoder.finish(),
            Decoder::Nvdec(decoder) => decoder.finish(),
        }
    }
}

/// Whether an access unit of `codec` holds a picture a decode may start at:
/// an IDR slice (H.264 NAL type 5), an IRAP picture (HEVC types 16 to 21).
pub fn is_key_frame(codec: Codec, access_unit: &[u8]) -> bool {
    let Ok(units) = nal_units(access_unit) else { return false };
    units.iter().any(|unit| match (codec, unit.first()) {
        (Codec::H264, Some(&b)) => b & 0x1f == 5,
        (Codec::Hevc, Some(&b)) => (16..=21).contains(&((b >> 1) & 0x3f)),
        _ => false,
    })
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
        assert!(is_key_frame(Codec::H264, &au));
        assert!(!is_key_frame(Codec::H264, &[0, 0, 1, 0x41, 5]));
        // HEVC: an IDR_W_RADL slice (type 19) is a key frame, a TRAIL_R (1) is not.
        assert!(is_key_frame(Codec::Hevc, &[0, 0, 1, 0x26, 1, 7]));
        assert!(!is_key_frame(Codec::Hevc, &[0, 0, 1, 0x02, 1, 7]));
        assert!(nal_units(&[9, 0, 0, 1, 0x41]).is_err());
        assert!(nal_units(&[1, 2, 3]).is_err());
        assert!(!is_key_frame(Codec::H264, &[]));
    }
}

//! `idr_pic_id` of H.264 IDR pictures (H.264 7.4.3): "if two consecutive
//! access units in decoding order are both IDR access units, the value of
//! `idr_pic_id` in the slices of the first such IDR access unit shall
//! differ from the `idr_pic_id` in the second". Each run of OpenH264's
//! encoder numbers its IDRs from 1, so where one run's last picture is an
//! IDR and the next run (the next episode in the same file, or a file of
//! key frames only) starts with one, the two share an id: a decoder that
//! finds pictures by their slice headers (an Annex B parser, NVDEC's) may
//! take them for one picture. [`other_idr_pic_id`] gives such a sample
//! another id of the same coded length (its last bit flipped), so nothing
//! else in the slice moves.
//!
//! What is parsed: the sequence parameter set up to `frame_mbs_only_flag`
//! (scaling lists skipped), and each slice header up to `idr_pic_id`. The
//! slice is unescaped (emulation prevention bytes removed), the bit set,
//! and escaped again.

use crate::error::{corrupt, CodecError};

/// What a slice header's layout needs of the sequence parameter set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceLayout {
    separate_colour_plane: bool,
    log2_max_frame_num: u32,
    frame_mbs_only: bool,
}

/// An RBSP bit reader.
struct Bits<'a> {
    data: &'a [u8],
    at: usize,
}

impl Bits<'_> {
    fn bit(&mut self) -> Result<u32, CodecError> {
        let byte = self.data.get(self.at / 8).ok_or_else(|| corrupt("a header runs past its NAL unit"))?;
        let bit = (byte >> (7 - self.at % 8)) & 1;
        self.at += 1;
        Ok(u32::from(bit))
    }

    fn bits(&mut self, n: u32) -> Result<u32, CodecError> {
        (0..n).try_fold(0u32, |v, _| Ok((v << 1) | self.bit()?))
    }

    /// `ue(v)`: its value and its code's leading zeros.
    fn ue_with_zeros(&mut self) -> Result<(u32, u32), CodecError> {
        let mut zeros = 0;
        while self.bit()? == 0 {
            zeros += 1;
            if zeros > 31 {
                return Err(corrupt("an Exp-Golomb code of more than 31 leading zeros"));
            }
        }
        Ok(((1u64 << zeros) as u32 - 1 + self.bits(zeros)?, zeros))
    }

    fn ue(&mut self) -> Result<u32, CodecError> {
        Ok(self.ue_with_zeros()?.0)
    }

    fn se(&mut self) -> Result<i64, CodecError> {
        let k = i64::from(self.ue()?);
        Ok(if k % 2 == 1 { (k + 1) / 2 } else { -(k / 2) })
    }
}

/// A NAL unit's payload without its emulation prevention bytes.
fn unescape(nal: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(nal.len());
    let mut zeros = 0;
    for &b in nal {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out.push(b);
    }
    out
}

/// RBSP bytes with emulation prevention bytes inserted.
fn escape(rbsp: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(rbsp.len() + rbsp.len() / 64);
    let mut zeros = 0;
    for &b in rbsp {
        if zeros >= 2 && b <= 3 {
            out.push(3);
            zeros = 0;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out.push(b);
    }
    out
}

impl SliceLayout {
    /// From a sequence parameter set NAL unit (with its header byte).
    pub fn of_sps(sps: &[u8]) -> Result<SliceLayout, CodecError> {
        let rbsp = unescape(sps.get(1..).ok_or_else(|| corrupt("an empty SPS"))?);
        let mut b = Bits { data: &rbsp, at: 0 };
        let profile = b.bits(8)?;
        b.bits(16)?; // constraint flags, level
        b.ue()?; // seq_parameter_set_id
        let mut separate_colour_plane = false;
        if [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135].contains(&profile) {
            let chroma_format_idc = b.ue()?;
            if chroma_format_idc == 3 {
                separate_colour_plane = b.bit()? == 1;
            }
            b.ue()?; // bit_depth_luma_minus8
            b.ue()?; // bit_depth_chroma_minus8
            b.bit()?; // qpprime_y_zero_transform_bypass_flag
            if b.bit()? == 1 {
                let lists = if chroma_format_idc == 3 { 12 } else { 8 };
                for i in 0..lists {
                    if b.bit()? == 1 {
                        let size = if i < 6 { 16 } else { 64 };
                        let (mut last, mut next) = (8i64, 8i64);
                        for _ in 0..size {
                            if next != 0 {
                                next = (last + b.se()? + 256) % 256;
                            }
                            last = if next == 0 { last } else { next };
                        }
                    }
                }
            }
        }
        let log2_max_frame_num = b.ue()? + 4;
        match b.ue()? {
            0 => {
                b.ue()?; // log2_max_pic_order_cnt_lsb_minus4
            }
            1 => {
                b.bit()?;
                b.se()?;
                b.se()?;
                for _ in 0..b.ue()?.min(255) {
                    b.se()?;
                }
            }
            _ => {}
        }
        b.ue()?; // max_num_ref_frames
        b.bit()?; // gaps_in_frame_num_value_allowed_flag
        b.ue()?; // pic_width_in_mbs_minus1
        b.ue()?; // pic_height_in_map_units_minus1
        let frame_mbs_only = b.bit()? == 1;
        if log2_max_frame_num > 16 {
            return Err(corrupt(format!("log2_max_frame_num {log2_max_frame_num} (at most 16)")));
        }
        Ok(SliceLayout { separate_colour_plane, log2_max_frame_num, frame_mbs_only })
    }

    /// Where `idr_pic_id` is in an IDR slice's RBSP (its code's first bit,
    /// counted after the NAL header byte), its value and leading zeros.
    fn idr_pic_id_at(&self, rbsp: &[u8]) -> Result<(usize, u32, u32), CodecError> {
        let mut b = Bits { data: rbsp, at: 0 };
        b.ue()?; // first_mb_in_slice
        b.ue()?; // slice_type
        b.ue()?; // pic_parameter_set_id
        if self.separate_colour_plane {
            b.bits(2)?;
        }
        b.bits(self.log2_max_frame_num)?; // frame_num
        if !self.frame_mbs_only && b.bit()? == 1 {
            b.bit()?; // bottom_field_flag
        }
        let at = b.at;
        let (id, zeros) = b.ue_with_zeros()?;
        Ok((at, id, zeros))
    }
}

/// The NAL units of an MP4 sample (each after its 4-byte length).
fn units(sample: &[u8]) -> Result<Vec<&[u8]>, CodecError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < sample.len() {
        let length = sample.get(at..at + 4).ok_or_else(|| corrupt("a NAL unit length cut short"))?;
        let n = u32::from_be_bytes([length[0], length[1], length[2], length[3]]) as usize;
        let unit = sample.get(at + 4..at + 4 + n).ok_or_else(|| corrupt("a NAL unit past its sample"))?;
        out.push(unit);
        at += 4 + n;
    }
    Ok(out)
}

/// The `idr_pic_id` of an IDR sample (length-prefixed NAL units), from its
/// first IDR slice; `None` where it holds no IDR slice.
pub fn idr_pic_id(sample: &[u8], layout: &SliceLayout) -> Result<Option<u32>, CodecError> {
    for unit in units(sample)? {
        if unit.first().is_some_and(|h| h & 0x1f == 5) {
            let rbsp = unescape(&unit[1..]);
            return Ok(Some(layout.idr_pic_id_at(&rbsp)?.1));
        }
    }
    Ok(None)
}

/// The sample with every IDR slice's `idr_pic_id` changed to another of
/// the same coded length (its code's last bit flipped: 1 ↔ 2, 3 ↔ 4, ...),
/// and that id. An id of 0 (a one-bit code) has no such other: an error
/// (OpenH264 numbers its IDRs from 1).
pub fn other_idr_pic_id(sample: &[u8], layout: &SliceLayout) -> Result<(Vec<u8>, u32), CodecError> {
    let mut out = Vec::with_capacity(sample.len() + 8);
    let mut new_id = None;
    for unit in units(sample)? {
        let unit = match unit.first() {
            Some(&header) if header & 0x1f == 5 => {
                let mut rbsp = unescape(&unit[1..]);
                let (at, id, zeros) = layout.idr_pic_id_at(&rbsp)?;
                if zeros == 0 {
                    return Err(corrupt(format!("idr_pic_id {id} has no other id of its coded length")));
                }
                let last = at + 2 * zeros as usize;
                rbsp[last / 8] ^= 0x80 >> (last % 8);
                new_id = Some(layout.idr_pic_id_at(&rbsp)?.1);
                let mut escaped = vec![header];
                escaped.extend(escape(&rbsp));
                escaped
            }
            _ => unit.to_vec(),
        };
        let length = u32::try_from(unit.len()).map_err(|_| corrupt("a NAL unit of 4 GiB or more"))?;
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&unit);
    }
    let id = new_id.ok_or_else(|| corrupt("the sample holds no IDR slice"))?;
    Ok((out, id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AnnexBDecoder, Codec, H264Encoder};

    #[test]
    fn escaping_round_trips_and_inserts_where_h264_says() {
        assert_eq!(escape(&[0, 0, 1, 0, 0, 0, 5, 0, 0, 3]), [0, 0, 3, 1, 0, 0, 3, 0, 5, 0, 0, 3, 3]);
        for bytes in [vec![0u8, 0, 0, 0], vec![1, 0, 0, 2, 0, 0], vec![0, 0, 3, 0, 0, 4]] {
            assert_eq!(unescape(&escape(&bytes)), bytes);
        }
    }

    #[test]
    fn an_idr_given_another_id_decodes_to_the_same_picture() {
        let (w, h) = (64, 48);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i * 7 % 251) as u8).collect();
        let mut encoder = H264Encoder::new(w, h, 30.0, 1).unwrap();
        let first = encoder.encode_rgb(&rgb).unwrap();
        let second = encoder.encode_rgb(&rgb).unwrap();
        let layout = SliceLayout::of_sps(&first.sps[0]).unwrap();
        assert_eq!(idr_pic_id(&first.sample, &layout).unwrap(), Some(1));
        assert_eq!(idr_pic_id(&second.sample, &layout).unwrap(), Some(2));
        let (changed, id) = other_idr_pic_id(&first.sample, &layout).unwrap();
        assert_eq!((id, idr_pic_id(&changed, &layout).unwrap()), (2, Some(2)));
        assert_eq!(other_idr_pic_id(&changed, &layout).unwrap().1, 1, "flipped back");
        // Both decode to the same pixels (Annex B, as a parser sees them).
        let annex_b = |sample: &[u8]| {
            let mut out = Vec::new();
            for unit in first.sps.iter().chain(&first.pps).map(Vec::as_slice).chain(units(sample).unwrap()) {
                out.extend_from_slice(&[0, 0, 0, 1]);
                out.extend_from_slice(unit);
            }
            out
        };
        let picture = |sample: &[u8]| {
            let mut decoder = AnnexBDecoder::new(Codec::H264).unwrap();
            let mut pictures = decoder.decode(0, &annex_b(sample)).unwrap();
            pictures.extend(decoder.finish().unwrap());
            pictures.remove(0).1
        };
        assert!(picture(&first.sample) == picture(&changed));
    }
}

//! H.264 and HEVC in MP4: NAL units prefixed by their size, parameter
//! sets in the sample entry's configuration record (`avcC`, `hvcC`).
//! Decoders (OpenH264, NVDEC's parser) read Annex B: every NAL unit after
//! a start code, parameter sets in the stream. [`NalConfig`] converts.

use crate::error::{corrupt, CodecError};

const START_CODE: [u8; 4] = [0, 0, 0, 1];

/// A track's NAL unit size field and parameter sets (as Annex B).
#[derive(Clone, Debug)]
pub struct NalConfig {
    length_size: usize,
    parameter_sets: Vec<u8>,
}

/// A big-endian `u16` at `at`.
fn u16_at(record: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_be_bytes([*record.get(at)?, *record.get(at + 1)?]) as usize)
}

impl NalConfig {
    /// Parses an `avcC` record (ISO/IEC 14496-15 §5.3.3.1), without its box header.
    pub fn from_avcc(record: &[u8]) -> Result<Self, CodecError> {
        let truncated = Self::check_header(record, "avcC", 7)?;
        let length_size = Self::length_size(record[4] & 0x03, "avcC")?;
        let mut parameter_sets = Vec::new();
        let mut at = 5;
        // SPS count (5 bits), the SPSs, then PPS count (8 bits), the PPSs.
        for mask in [0x1f, 0xff] {
            let count = (*record.get(at).ok_or_else(truncated)? & mask) as usize;
            at += 1;
            for _ in 0..count {
                at = Self::push_unit(record, at, &mut parameter_sets).ok_or_else(truncated)?;
            }
        }
        // None here is fine for `avc3` tracks, which carry them in the samples.
        Ok(NalConfig { length_size, parameter_sets })
    }

    /// Parses an `hvcC` record (ISO/IEC 14496-15 §8.3.3.1), without its box
    /// header: 22 bytes of profile and format fields, then arrays of
    /// parameter sets (VPS, SPS, PPS, SEI), each NAL unit after its 16-bit size.
    pub fn from_hvcc(record: &[u8]) -> Result<Self, CodecError> {
        let truncated = Self::check_header(record, "hvcC", 23)?;
        let length_size = Self::length_size(record[21] & 0x03, "hvcC")?;
        let mut parameter_sets = Vec::new();
        let arrays = record[22] as usize;
        let mut at = 23;
        for _ in 0..arrays {
            let count = u16_at(record, at + 1).ok_or_else(truncated)?;
            at += 3;
            for _ in 0..count {
                at = Self::push_unit(record, at, &mut parameter_sets).ok_or_else(truncated)?;
            }
        }
        Ok(NalConfig { length_size, parameter_sets })
    }

    /// Checks that record `name` holds at least `fixed` bytes and is version
    /// 1; returns the error of a record that ends early.
    fn check_header(
        record: &[u8],
        name: &'static str,
        fixed: usize,
    ) -> Result<impl Fn() -> CodecError + Copy, CodecError> {
        let truncated = move || corrupt(format!("the {name} record is truncated"));
        if record.len() < fixed {
            return Err(truncated());
        }
        if record[0] != 1 {
            return Err(corrupt(format!("{name} version {} (robocache reads version 1)", record[0])));
        }
        Ok(truncated)
    }

    fn length_size(minus_one: u8, record: &str) -> Result<usize, CodecError> {
        match minus_one {
            2 => Err(corrupt(format!("{record} gives NAL units a 3-byte size field, which ISO/IEC 14496-15 forbids"))),
            m => Ok(m as usize + 1),
        }
    }

    /// Appends the NAL unit whose 16-bit size is at `at` as Annex B; the
    /// offset after it, `None` where the record ends first.
    fn push_unit(record: &[u8], at: usize, out: &mut Vec<u8>) -> Option<usize> {
        let size = u16_at(record, at)?;
        let unit = record.get(at + 2..at + 2 + size)?;
        out.extend_from_slice(&START_CODE);
        out.extend_from_slice(unit);
        Some(at + 2 + size)
    }

    /// The parameter sets as Annex B (empty where the samples carry them).
    pub fn parameter_sets(&self) -> &[u8] {
        &self.parameter_sets
    }

    /// Appends one MP4 sample (size-prefixed NAL units) as Annex B to `out`.
    pub fn append_annex_b(&self, sample: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        let mut at = 0;
        let before = out.len();
        while at < sample.len() {
            let field = sample
                .get(at..at + self.length_size)
                .ok_or_else(|| corrupt(format!("a NAL unit's size field is cut at byte {at} of {}", sample.len())))?;
            let size = field.iter().fold(0usize, |size, &byte| (size << 8) | byte as usize);
            let start = at + self.length_size;
            let unit = sample.get(start..start + size).ok_or_else(|| {
                corrupt(format!(
                    "a NAL unit of {size} bytes at byte {start} runs past the sample's {} bytes",
                    sample.len()
                ))
            })?;
            out.extend_from_slice(&START_CODE);
            out.extend_from_slice(unit);
            at = start + size;
        }
        if out.len() == before {
            return Err(corrupt("an empty sample"));
        }
        Ok(())
    }

    /// One MP4 sample as Annex B, into `out` (cleared first).
    pub fn to_annex_b(&self, sample: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        out.clear();
        self.append_annex_b(sample, out)
    }
}

/// What the CPU's H.264 and HEVC decoders share in front of their library:
/// each sample as Annex B, whether it follows a jump (not the next sample
/// in decode order since the decoder started: a new group of pictures
/// reached by a seek), and the parameter sets, sent once per decoder start.
#[derive(Debug)]
pub(crate) struct AnnexBFeed {
    config: NalConfig,
    /// The sample started last, if any since the decoder started.
    last_tag: Option<usize>,
    annex_b: Vec<u8>,
    /// Whether the parameter sets go in before the next sample.
    send_parameter_sets: bool,
}

impl AnnexBFeed {
    pub fn new(config: NalConfig) -> Self {
        AnnexBFeed { config, last_tag: None, annex_b: Vec::new(), send_parameter_sets: true }
    }

    /// Converts sample `tag` (its decode-order index) to Annex B
    /// ([`AnnexBFeed::annex_b`]); true when it follows a jump.
    pub fn start(&mut self, tag: usize, sample: &[u8]) -> Result<bool, CodecError> {
        self.config.to_annex_b(sample, &mut self.annex_b)?;
        let jumped = self.last_tag.is_some_and(|last| last + 1 != tag);
        self.last_tag = Some(tag);
        Ok(jumped)
    }

    /// The sample started last, as Annex B.
    pub fn annex_b(&self) -> &[u8] {
        &self.annex_b
    }

    /// The parameter sets to send before the sample started last: once
    /// after each decoder start (none where the samples carry them).
    pub fn parameter_sets_once(&mut self) -> Option<&[u8]> {
        let send = std::mem::take(&mut self.send_parameter_sets) && !self.config.parameter_sets().is_empty();
        send.then(|| self.config.parameter_sets())
    }

    /// The decoder started over before the sample started last: the
    /// parameter sets go in again.
    pub fn decoder_restarted(&mut self) {
        self.send_parameter_sets = true;
    }

    /// The decoder started over at the end of a request: the parameter
    /// sets go in again, and no sample came before the next.
    pub fn reset(&mut self) {
        self.send_parameter_sets = true;
        self.last_tag = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avcc_parameter_sets_and_samples_become_annex_b() {
        // version 1, High profile, 4-byte sizes, one SPS of 3 bytes, one PPS of 2.
        let record = [1, 100, 0, 30, 0xff, 0xe1, 0, 3, 0x67, 1, 2, 1, 0, 2, 0x68, 9];
        let config = NalConfig::from_avcc(&record).unwrap();
        assert_eq!(config.parameter_sets(), [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 9]);
        let mut out = Vec::new();
        config.to_annex_b(&[0, 0, 0, 2, 0x65, 7, 0, 0, 0, 1, 0x06], &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 1, 0x65, 7, 0, 0, 0, 1, 0x06]);
        let err = config.to_annex_b(&[0, 0, 0, 9, 0x65], &mut out).unwrap_err();
        assert!(matches!(&err, CodecError::Corrupt(m) if m.contains("runs past")), "{err}");
        assert!(config.to_annex_b(&[0, 0], &mut out).unwrap_err().to_string().contains("cut"));
        assert!(NalConfig::from_avcc(&record[..9]).unwrap_err().to_string().contains("truncated"));
        assert!(NalConfig::from_avcc(&[2, 100, 0, 30, 0xff, 0xe0, 0]).unwrap_err().to_string().contains("version 2"));
    }

    #[test]
    fn hvcc_parameter_set_arrays_become_annex_b() {
        // 22 bytes of header (2-byte sizes: lengthSizeMinusOne 1), two arrays:
        // a VPS of 2 bytes, then two SPSs of 1 byte each.
        let mut record = vec![1u8];
        record.extend([0; 20]);
        record.push(0xfc | 1);
        record.push(2);
        record.extend([0x20, 0, 1, 0, 2, 0x40, 1]);
        record.extend([0x21, 0, 2, 0, 1, 0x42, 0, 1, 0x43]);
        let config = NalConfig::from_hvcc(&record).unwrap();
        assert_eq!(config.parameter_sets(), [0, 0, 0, 1, 0x40, 1, 0, 0, 0, 1, 0x42, 0, 0, 0, 1, 0x43]);
        let mut out = Vec::new();
        config.to_annex_b(&[0, 2, 0x26, 1], &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 1, 0x26, 1]);
        for cut in 23..record.len() {
            assert!(
                NalConfig::from_hvcc(&record[..cut]).unwrap_err().to_string().contains("truncated"),
                "cut at {cut}"
            );
        }
        assert!(NalConfig::from_hvcc(&record[..10]).unwrap_err().to_string().contains("truncated"));
    }
}

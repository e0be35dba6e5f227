//! An MP4 (ISO BMFF) demuxer for the files camera datasets hold: the first
//! video track's codec, size, time scale and sample table (where each
//! sample's bytes are, its decode and presentation times, which samples
//! are sync samples). Only `moov` is read; sample bytes are read on request.
//!
//! Boxes read: `moov/mvhd`, `trak/{tkhd, edts/elst, mdia/{mdhd, hdlr,
//! minf/stbl/{stsd, stts, ctts, stss, stsz, stz2, stsc, stco, co64}}}`.
//! Fragmented files (`moof`) are not read (camera datasets are not
//! fragmented; a fragmented file is a clear error).
//!
//! Hostile files: a file of N bytes costs at most O(N) memory and time,
//! whatever its headers say. Box sizes and offsets are added with checked
//! arithmetic (64-bit sizes, `co64` offsets, `offset + size` of every
//! sample); no table is allocated for more entries than its box holds
//! bytes for, nor for more samples than the file has bytes (a sample is at
//! least one byte); the `stts`/`ctts` runs stop at the sample count, and
//! time sums that overflow are an error that names the box.

use std::path::Path;

pub use crate::byte_source::ByteSource;
use crate::{Error, Result};

/// The codecs robocache knows by their sample entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Codec {
    /// `av01`.
    Av1,
    /// `avc1` / `avc3`.
    H264,
    /// `hvc1` / `hev1`.
    Hevc,
}

impl Codec {
    pub const fn name(self) -> &'static str {
        match self {
            Codec::Av1 => "av1",
            Codec::H264 => "h264",
            Codec::Hevc => "hevc",
        }
    }
}

/// One sample (a coded frame) of the track, in decode order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub offset: u64,
    pub size: u32,
    /// Decode time in track ticks.
    pub dts: i64,
    /// Presentation time in track ticks, edit list applied.
    pub pts: i64,
    pub sync: bool,
}

/// The video track of an MP4 file.
#[derive(Clone, Debug)]
pub struct Track {
    pub codec: Codec,
    /// The sample entry's four-character code (`av01`, `avc1`, ...).
    pub fourcc: [u8; 4],
    pub width: u32,
    pub height: u32,
    /// Ticks per second.
    pub timescale: u32,
    /// Samples in decode order.
    pub samples: Vec<Sample>,
    /// The codec configuration record (`av1C`, `avcC`, `hvcC`), without its box header.
    pub config: Vec<u8>,
}

impl Track {
    /// Frames per second as FFmpeg (and torchcodec's `average_fps`) gives
    /// it: frames over the track's duration (the sum of the sample durations).
    pub fn average_fps(&self) -> f64 {
        let n = self.samples.len();
        if n < 2 {
            return 0.0;
        }
        // The last sample's duration is the stts delta of the last entry.
        let span = self.duration_ticks();
        if span <= 0 {
            return 0.0;
        }
        n as f64 * self.timescale as f64 / span as f64
    }

    /// The sum of the samples' durations in ticks.
    pub fn duration_ticks(&self) -> i64 {
        match (self.samples.first(), self.samples.last()) {
            (Some(first), Some(last)) if self.samples.len() >= 2 => {
                let previous = self.samples[self.samples.len() - 2];
                last.dts.saturating_sub(first.dts).saturating_add(last.dts.saturating_sub(previous.dts))
            }
            _ => 0,
        }
    }

    /// The decode-order sample of each frame in presentation order.
    pub fn presentation_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.samples.len()).collect();
        order.sort_by_key(|&i| (self.samples[i].pts, i));
        order
    }
}

struct Reader<'a> {
    path: &'a Path,
    data: &'a [u8],
    at: usize,
    what: &'a str,
}

impl<'a> Reader<'a> {
    fn new(path: &'a Path, data: &'a [u8], what: &'a str) -> Self {
        Reader { path, data, at: 0, what }
    }

    fn err(&self, problem: impl Into<String>) -> Error {
        Error::Container { file: self.path.to_path_buf(), problem: format!("`{}`: {}", self.what, problem.into()) }
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| {
            self.err(format!("{} bytes where {n} more were expected at byte {}", self.data.len(), self.at))
        })?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.bytes(2)?.try_into().unwrap_or_default()))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.bytes(4)?.try_into().unwrap_or_default()))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.bytes(8)?.try_into().unwrap_or_default()))
    }
    fn skip(&mut self, n: usize) -> Result<()> {
        self.bytes(n).map(|_| ())
    }
    fn full_box(&mut self) -> Result<(u8, u32)> {
        let v = self.u32()?;
        Ok(((v >> 24) as u8, v & 0xff_ffff))
    }
    /// The child boxes of this box's payload: `(type, payload)`.
    fn children(&mut self) -> Result<Vec<([u8; 4], &'a [u8])>> {
        let mut out = Vec::new();
        while self.at + 8 <= self.data.len() {
            let size = self.u32()? as u64;
            let kind: [u8; 4] = self.bytes(4)?.try_into().unwrap_or_default();
            let header = if size == 1 { 16 } else { 8 };
            let size = match size {
                0 => (self.data.len() - self.at) as u64 + 8,
                1 => self.u64()?,
                n => n,
            };
            if size < header {
                return Err(self.err(format!("box `{}` claims {size} bytes", String::from_utf8_lossy(&kind))));
            }
            let payload = usize::try_from(size - header).unwrap_or(usize::MAX);
            out.push((kind, self.bytes(payload)?));
        }
        Ok(out)
    }
}

fn find<'a>(boxes: &[([u8; 4], &'a [u8])], kind: &[u8; 4]) -> Option<&'a [u8]> {
    boxes.iter().find(|(k, _)| k == kind).map(|(_, b)| *b)
}

/// Reads the `moov` box of `file` (named `path` in errors) and the first
/// video track in it: box headers, then the `moov` payload, nothing else.
pub fn read_track<S: ByteSource + ?Sized>(path: &Path, file: &S) -> Result<Track> {
    let io = |error: std::io::Error| Error::Io { file: path.to_path_buf(), error };
    let len = file.byte_len();
    // Walk the top-level boxes to `moov` (reading headers only).
    let mut at = 0u64;
    let mut moov = None;
    let mut fragmented = false;
    while at + 8 <= len {
        let mut header = [0u8; 16];
        let n = (len - at).min(16) as usize;
        file.read_exact_at(&mut header[..n], at).map_err(io)?;
        let mut size = u32::from_be_bytes(header[..4].try_into().unwrap_or_default()) as u64;
        let kind: [u8; 4] = header[4..8].try_into().unwrap_or_default();
        let mut head = 8;
        if size == 1 {
            size = u64::from_be_bytes(header[8..16].try_into().unwrap_or_default());
            head = 16;
        } else if size == 0 {
            size = len - at;
        }
        if size < head || size > len - at {
            return Err(Error::Container {
                file: path.to_path_buf(),
                problem: format!(
                    "box `{}` at byte {at} claims {size} bytes, the file has {} after it (a truncated file)",
                    String::from_utf8_lossy(&kind),
                    len - at
                ),
            });
        }
        if &kind == b"moov" {
            let mut payload = vec![0u8; (size - head) as usize];
            file.read_exact_at(&mut payload, at + head).map_err(io)?;
            moov = Some(payload);
        } else if &kind == b"moof" {
            fragmented = true;
        }
        at += size;
    }
    let Some(moov) = moov else {
        return Err(Error::Container {
            file: path.to_path_buf(),
            problem: "has no `moov` box (not an MP4 file, or a truncated one)".into(),
        });
    };
    let track = parse_moov(path, &moov, len)?;
    if track.samples.is_empty() && fragmented {
        return Err(Error::Container {
            file: path.to_path_buf(),
            problem: "is a fragmented MP4 (`moof`); robocache reads unfragmented files".into(),
        });
    }
    for (i, sample) in track.samples.iter().enumerate() {
        let end = sample.offset.checked_add(sample.size as u64);
        if end.is_none_or(|end| end > len) {
            return Err(Error::Container {
                file: path.to_path_buf(),
                problem: format!(
                    "sample {i} lies at bytes {}..{}, past the end of the file ({len} bytes; a truncated file)",
                    sample.offset,
                    sample.offset as u128 + sample.size as u128
                ),
            });
        }
    }
    Ok(track)
}

fn parse_moov(path: &Path, moov: &[u8], file_len: u64) -> Result<Track> {
    let top = Reader::new(path, moov, "moov").children()?;
    let movie_timescale = match find(&top, b"mvhd") {
        Some(mvhd) => {
            let mut r = Reader::new(path, mvhd, "mvhd");
            let (version, _) = r.full_box()?;
            r.skip(if version == 1 { 16 } else { 8 })?;
            r.u32()?
        }
        None => 1000,
    };
    let mut unsupported = Vec::new();
    for (kind, trak) in &top {
        if kind != b"trak" {
            continue;
        }
        let trak_boxes = Reader::new(path, trak, "trak").children()?;
        let Some(mdia) = find(&trak_boxes, b"mdia") else { continue };
        let mdia = Reader::new(path, mdia, "mdia").children()?;
        let handler = find(&mdia, b"hdlr").map(|h| h.get(8..12).unwrap_or_default().to_vec()).unwrap_or_default();
        if handler != b"vide" {
            continue;
        }
        let mdhd = find(&mdia, b"mdhd").ok_or_else(|| missing(path, "mdia/mdhd"))?;
        let mut r = Reader::new(path, mdhd, "mdhd");
        let (version, _) = r.full_box()?;
        r.skip(if version == 1 { 16 } else { 8 })?;
        let timescale = r.u32()?;
        if timescale == 0 {
            return Err(Error::Container { file: path.to_path_buf(), problem: "`mdhd` time scale is 0".into() });
        }
        let minf =
            Reader::new(path, find(&mdia, b"minf").ok_or_else(|| missing(path, "mdia/minf"))?, "minf").children()?;
        let stbl =
            Reader::new(path, find(&minf, b"stbl").ok_or_else(|| missing(path, "minf/stbl"))?, "stbl").children()?;
        let (fourcc, width, height, config) =
            sample_entry(path, find(&stbl, b"stsd").ok_or_else(|| missing(path, "stbl/stsd"))?)?;
        let codec = match &fourcc {
            b"av01" => Codec::Av1,
            b"avc1" | b"avc3" => Codec::H264,
            b"hvc1" | b"hev1" => Codec::Hevc,
            other => {
                unsupported.push(String::from_utf8_lossy(other).into_owned());
                continue;
            }
        };
        let shift = edit_shift(path, find(&trak_boxes, b"edts"), movie_timescale, timescale)?;
        let samples = sample_table(path, &stbl, shift, file_len)?;
        return Ok(Track { codec, fourcc, width, height, timescale, samples, config });
    }
    Err(Error::Container {
        file: path.to_path_buf(),
        problem: match unsupported.is_empty() {
            true => "has no video track".into(),
            false => format!(
                "has a video track of codec `{}`, which robocache does not read (av01, avc1, hvc1)",
                unsupported.join(", ")
            ),
        },
    })
}

fn missing(path: &Path, what: &str) -> Error {
    Error::Container { file: path.to_path_buf(), problem: format!("has no `{what}` box") }
}

/// The first sample entry: four-character code, width, height, codec configuration.
fn sample_entry(path: &Path, stsd: &[u8]) -> Result<([u8; 4], u32, u32, Vec<u8>)> {
    let mut r = Reader::new(path, stsd, "stsd");
    r.full_box()?;
    if r.u32()? == 0 {
        return Err(Error::Container { file: path.to_path_buf(), problem: "`stsd` has no sample entry".into() });
    }
    let size = r.u32()? as usize;
    let fourcc: [u8; 4] = r.bytes(4)?.try_into().unwrap_or_default();
    let entry = r.bytes(size.saturating_sub(8))?;
    let mut e = Reader::new(path, entry, "visual sample entry");
    e.skip(6 + 2 + 16)?;
    let width = e.u16()? as u32;
    let height = e.u16()? as u32;
    e.skip(4 + 4 + 4 + 2 + 32 + 2 + 2)?;
    let children = e.children()?;
    let config = children
        .iter()
        .find(|(k, _)| matches!(k, b"av1C" | b"avcC" | b"hvcC"))
        .map(|(_, b)| b.to_vec())
        .unwrap_or_default();
    Ok((fourcc, width, height, config))
}

/// Ticks to add to every composition time so that presentation starts
/// where the edit list says (FFmpeg's mov demuxer does the same): an
/// empty edit delays, a media time skips.
fn edit_shift(path: &Path, edts: Option<&[u8]>, movie_timescale: u32, timescale: u32) -> Result<i64> {
    let Some(edts) = edts else { return Ok(0) };
    let boxes = Reader::new(path, edts, "edts").children()?;
    let Some(elst) = find(&boxes, b"elst") else { return Ok(0) };
    let mut r = Reader::new(path, elst, "elst");
    let (version, _) = r.full_box()?;
    let count = r.u32()? as usize;
    check_count(path, "elst", count, r.data.len() - r.at, if version == 1 { 20 } else { 12 })?;
    let overflow = || overflow(path, "elst");
    let mut delay = 0i64;
    for _ in 0..count {
        let (duration, media_time) = match version {
            1 => (r.u64()? as i64, r.u64()? as i64),
            _ => (r.u32()? as i64, r.u32()? as i32 as i64),
        };
        r.skip(4)?;
        if media_time == -1 {
            let ticks = (duration as i128 * timescale as i128 / movie_timescale.max(1) as i128).try_into();
            delay = delay.checked_add(ticks.map_err(|_| overflow())?).ok_or_else(overflow)?;
        } else {
            return delay.checked_sub(media_time).ok_or_else(overflow);
        }
    }
    Ok(delay)
}

fn overflow(path: &Path, what: &str) -> Error {
    Error::Container { file: path.to_path_buf(), problem: format!("`{what}`: times past the range of 64-bit ticks") }
}

/// The sample table: each sample's offset, size, times and sync flag.
/// `file_len` bounds the sample count (a sample is at least one byte).
fn sample_table(path: &Path, stbl: &[([u8; 4], &[u8])], shift: i64, file_len: u64) -> Result<Vec<Sample>> {
    let too_many = |what: &str, count: usize| Error::Container {
        file: path.to_path_buf(),
        problem: format!("`{what}` claims {count} samples, more than the file's {file_len} bytes can hold"),
    };
    // Sizes.
    let sizes: Vec<u32> = if let Some(stsz) = find(stbl, b"stsz") {
        let mut r = Reader::new(path, stsz, "stsz");
        r.full_box()?;
        let fixed = r.u32()?;
        let count = r.u32()? as usize;
        if fixed != 0 {
            if (count as u64).checked_mul(fixed as u64).is_none_or(|bytes| bytes > file_len) {
                return Err(too_many("stsz", count));
            }
            vec![fixed; count]
        } else {
            check_count(path, "stsz", count, r.data.len() - r.at, 4)?;
            (0..count).map(|_| r.u32()).collect::<Result<_>>()?
        }
    } else if let Some(stz2) = find(stbl, b"stz2") {
        let mut r = Reader::new(path, stz2, "stz2");
        r.full_box()?;
        r.skip(3)?;
        let field = r.u8()?;
        let count = r.u32()? as usize;
        match field {
            8 => {
                check_count(path, "stz2", count, r.data.len() - r.at, 1)?;
                (0..count).map(|_| r.u8().map(u32::from)).collect::<Result<_>>()?
            }
            16 => {
                check_count(path, "stz2", count, r.data.len() - r.at, 2)?;
                (0..count).map(|_| r.u16().map(u32::from)).collect::<Result<_>>()?
            }
            _ => {
                return Err(Error::Container {
                    file: path.to_path_buf(),
                    problem: format!("`stz2` field size {field}"),
                })
            }
        }
    } else {
        return Err(missing(path, "stbl/stsz"));
    };
    let n = sizes.len();
    if n as u64 > file_len {
        return Err(too_many("stsz", n));
    }
    // Chunk offsets.
    let offsets: Vec<u64> = if let Some(stco) = find(stbl, b"stco") {
        let mut r = Reader::new(path, stco, "stco");
        r.full_box()?;
        let count = r.u32()? as usize;
        check_count(path, "stco", count, r.data.len() - r.at, 4)?;
        (0..count).map(|_| r.u32().map(u64::from)).collect::<Result<_>>()?
    } else if let Some(co64) = find(stbl, b"co64") {
        let mut r = Reader::new(path, co64, "co64");
        r.full_box()?;
        let count = r.u32()? as usize;
        check_count(path, "co64", count, r.data.len() - r.at, 8)?;
        (0..count).map(|_| r.u64()).collect::<Result<_>>()?
    } else {
        return Err(missing(path, "stbl/stco"));
    };
    // Samples per chunk.
    let stsc = find(stbl, b"stsc").ok_or_else(|| missing(path, "stbl/stsc"))?;
    let mut r = Reader::new(path, stsc, "stsc");
    r.full_box()?;
    let count = r.u32()? as usize;
    check_count(path, "stsc", count, r.data.len() - r.at, 12)?;
    let runs: Vec<(u32, u32)> = (0..count)
        .map(|_| -> Result<(u32, u32)> {
            let first = r.u32()?;
            let per = r.u32()?;
            r.u32()?;
            Ok((first, per))
        })
        .collect::<Result<_>>()?;
    if let Some(pair) = runs.windows(2).find(|pair| pair[1].0 <= pair[0].0) {
        return Err(Error::Container {
            file: path.to_path_buf(),
            problem: format!("`stsc` runs out of order (first chunk {} after {})", pair[1].0, pair[0].0),
        });
    }
    let mut sample_offsets = Vec::with_capacity(n);
    // The run of the current chunk: runs are in order of their first chunk.
    let mut run = 0;
    'chunks: for (chunk, &offset) in offsets.iter().enumerate() {
        let number = (chunk as u64 + 1).min(u32::MAX as u64) as u32;
        while run + 1 < runs.len() && runs[run + 1].0 <= number {
            run += 1;
        }
        let per = runs.get(run).filter(|(first, _)| *first <= number).map_or(0, |r| r.1);
        let mut at = offset;
        for _ in 0..per {
            let i = sample_offsets.len();
            if i >= n {
                break 'chunks;
            }
            sample_offsets.push(at);
            at = at.checked_add(sizes[i] as u64).ok_or_else(|| Error::Container {
                file: path.to_path_buf(),
                problem: format!("sample {i} of chunk {number} ends past byte 2^64 (`stco`/`co64`)"),
            })?;
        }
    }
    if sample_offsets.len() != n {
        return Err(Error::Container {
            file: path.to_path_buf(),
            problem: format!("the chunk tables place {} of the {n} samples", sample_offsets.len()),
        });
    }
    // Decode times: each run stops at the sample count.
    let stts = find(stbl, b"stts").ok_or_else(|| missing(path, "stbl/stts"))?;
    let mut r = Reader::new(path, stts, "stts");
    r.full_box()?;
    let count = r.u32()? as usize;
    check_count(path, "stts", count, r.data.len() - r.at, 8)?;
    let mut dts = Vec::with_capacity(n);
    let mut t = 0i64;
    for _ in 0..count {
        let (k, delta) = (r.u32()?, r.u32()?);
        for _ in 0..(k as usize).min(n - dts.len()) {
            dts.push(t);
            t = t.checked_add(delta as i64).ok_or_else(|| overflow(path, "stts"))?;
        }
        if dts.len() == n {
            break;
        }
    }
    if dts.len() != n {
        return Err(Error::Container {
            file: path.to_path_buf(),
            problem: format!("`stts` times {} of the {n} samples", dts.len()),
        });
    }
    // Composition offsets: each run stops at the sample count.
    let mut cts = vec![0i64; n];
    if let Some(ctts) = find(stbl, b"ctts") {
        let mut r = Reader::new(path, ctts, "ctts");
        let (version, _) = r.full_box()?;
        let count = r.u32()? as usize;
        check_count(path, "ctts", count, r.data.len() - r.at, 8)?;
        let mut i = 0;
        for _ in 0..count {
            let k = r.u32()?;
            let raw = r.u32()?;
            let offset = if version == 1 { raw as i32 as i64 } else { raw as i64 };
            let run = (k as usize).min(n - i);
            cts[i..i + run].fill(offset);
            i += run;
            if i == n {
                break;
            }
        }
    }
    // Sync samples.
    let mut sync = vec![true; n];
    if let Some(stss) = find(stbl, b"stss") {
        sync = vec![false; n];
        let mut r = Reader::new(path, stss, "stss");
        r.full_box()?;
        let count = r.u32()? as usize;
        check_count(path, "stss", count, r.data.len() - r.at, 4)?;
        for _ in 0..count {
            let number = r.u32()? as usize;
            if (1..=n).contains(&number) {
                sync[number - 1] = true;
            }
        }
    }
    (0..n)
        .map(|i| {
            let pts = dts[i].checked_add(cts[i]).and_then(|t| t.checked_add(shift));
            Ok(Sample {
                offset: sample_offsets[i],
                size: sizes[i],
                dts: dts[i],
                pts: pts.ok_or_else(|| overflow(path, "ctts"))?,
                sync: sync[i],
            })
        })
        .collect()
}

fn check_count(path: &Path, what: &str, count: usize, left: usize, entry: usize) -> Result<()> {
    if count.checked_mul(entry).is_none_or(|need| need > left) {
        return Err(Error::Container {
            file: path.to_path_buf(),
            problem: format!("`{what}` claims {count} entries but holds {} bytes", left),
        });
    }
    Ok(())
}

/// Reads sample `sample`'s bytes from `file`.
pub fn read_sample<S: ByteSource + ?Sized>(path: &Path, file: &S, sample: &Sample) -> Result<Vec<u8>> {
    let mut out = vec![0u8; sample.size as usize];
    file.read_exact_at(&mut out, sample.offset).map_err(|error| Error::Io { file: path.to_path_buf(), error })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A box: size, type, payload.
    fn boxed(kind: &[u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut out = ((payload.len() + 8) as u32).to_be_bytes().to_vec();
        out.extend_from_slice(kind);
        out.extend_from_slice(payload);
        out
    }

    /// A full box's payload: version and flags, then `fields`.
    fn full(version: u8, fields: &[u32]) -> Vec<u8> {
        let mut out = vec![version, 0, 0, 0];
        fields.iter().for_each(|v| out.extend_from_slice(&v.to_be_bytes()));
        out
    }

    /// An `avc1` file of `samples` samples of 10 bytes in one chunk, its
    /// sample table's boxes replaced by `replace` where it names them.
    fn movie(samples: u32, replace: &[(&[u8; 4], Vec<u8>)]) -> Vec<u8> {
        let mut entry = vec![0u8; 24];
        entry.extend_from_slice(&64u16.to_be_bytes());
        entry.extend_from_slice(&48u16.to_be_bytes());
        entry.extend_from_slice(&[0u8; 50]);
        entry.extend(boxed(b"avcC", &[1, 66, 0, 30]));
        let mut stsd = full(0, &[1]);
        stsd.extend(boxed(b"avc1", &entry));
        let mdat_at = 24 + 8; // ftyp, then mdat's header
        let mut table = vec![
            (b"stsd", stsd),
            (b"stts", full(0, &[1, samples, 512])),
            (b"stsz", full(0, &[10, samples])),
            (b"stsc", full(0, &[1, 1, samples, 1])),
            (b"stco", full(0, &[1, mdat_at])),
        ];
        for (kind, payload) in replace {
            match table.iter_mut().find(|(k, _)| k == kind) {
                Some(slot) => slot.1 = payload.clone(),
                None => table.push((kind, payload.clone())),
            }
        }
        let stbl: Vec<u8> = table.iter().flat_map(|(k, p)| boxed(k, p)).collect();
        let mut hdlr = full(0, &[0]);
        hdlr.extend_from_slice(b"vide");
        hdlr.extend_from_slice(&[0u8; 13]);
        let mdia = [
            boxed(b"mdhd", &full(0, &[0, 0, 15360, 0, 0])),
            boxed(b"hdlr", &hdlr),
            boxed(b"minf", &boxed(b"stbl", &stbl)),
        ]
        .concat();
        let moov = [boxed(b"mvhd", &full(0, &[0, 0, 1000, 0])), boxed(b"trak", &boxed(b"mdia", &mdia))].concat();
        let mut file = boxed(b"ftyp", b"isom\0\0\0\0isomavc1");
        file.extend(boxed(b"mdat", &vec![0u8; 10 * samples as usize]));
        file.extend(boxed(b"moov", &moov));
        file
    }

    /// `bytes` with the first box type `from` renamed `to`.
    fn rename(mut bytes: Vec<u8>, from: &[u8; 4], to: &[u8; 4]) -> Vec<u8> {
        let at = bytes.windows(4).position(|w| w == from).unwrap();
        bytes[at..at + 4].copy_from_slice(to);
        bytes
    }

    /// Parses `bytes` on a thread; fails unless it answers within a second.
    fn parse_within_a_second(bytes: Vec<u8>) -> Result<Track> {
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || send.send(read_track(Path::new("crafted.mp4"), &bytes[..])));
        receive.recv_timeout(std::time::Duration::from_secs(1)).expect("the demuxer did not answer within a second")
    }

    fn problem(bytes: Vec<u8>) -> String {
        let error = parse_within_a_second(bytes).expect_err("a crafted file read as valid").to_string();
        assert!(error.contains("crafted.mp4"), "{error}");
        error
    }

    #[test]
    fn the_crafted_movie_reads() {
        let track = parse_within_a_second(movie(3, &[])).unwrap();
        assert_eq!((track.codec, track.width, track.height, track.samples.len()), (Codec::H264, 64, 48, 3));
        assert_eq!(track.samples[2], Sample { offset: 52, size: 10, dts: 1024, pts: 1024, sync: true });
    }

    #[test]
    fn a_64_bit_box_size_that_wraps_the_offset_is_an_error_not_a_hang() {
        // ftyp (32 bytes), then a box whose 64-bit size is 2^64 - 32: `at + size` wraps to 0.
        let mut bytes = boxed(b"ftyp", b"isom\0\0\0\0isomavc1mp41mp42");
        assert_eq!(bytes.len(), 32);
        bytes.extend_from_slice(&1u32.to_be_bytes());
        bytes.extend_from_slice(b"free");
        bytes.extend_from_slice(&(u64::MAX - 31).to_be_bytes());
        assert_eq!(bytes.len(), 48);
        assert!(problem(bytes).contains("claims"));
    }

    #[test]
    fn sample_counts_beyond_the_file_are_errors_before_any_allocation() {
        // A fixed sample size with 2^32 - 1 samples: 40 GB of sizes for a file of 200 bytes.
        let error = problem(movie(3, &[(b"stsz", full(0, &[10, u32::MAX]))]));
        assert!(error.contains("stsz"), "{error}");
        let error = problem(movie(3, &[(b"stsz", full(0, &[0, u32::MAX]))]));
        assert!(error.contains("stsz"), "{error}");
        let mut stz2 = full(0, &[]);
        stz2.extend_from_slice(&[0, 0, 0, 16]);
        stz2.extend_from_slice(&u32::MAX.to_be_bytes());
        let error = problem(rename(movie(3, &[(b"stsz", stz2)]), b"stsz", b"stz2"));
        assert!(error.contains("stz2"), "{error}");
    }

    #[test]
    fn time_runs_stop_at_the_sample_count_and_sums_are_checked() {
        // 2^32 - 1 runs of 2^32 - 1 samples each would loop 2^64 times.
        let mut stts = full(0, &[4096]);
        for _ in 0..4096 {
            stts.extend_from_slice(&u32::MAX.to_be_bytes());
            stts.extend_from_slice(&1u32.to_be_bytes());
        }
        let track = parse_within_a_second(movie(3, &[(b"stts", stts.clone())])).unwrap();
        assert_eq!(track.samples.iter().map(|s| s.dts).collect::<Vec<_>>(), [0, 1, 2]);
        let mut ctts = stts;
        ctts[0] = 1;
        // Composition offsets of 1 on the default 512-tick decode times.
        assert_eq!(parse_within_a_second(movie(3, &[(b"ctts", ctts)])).unwrap().samples[2].pts, 1025);
    }

    #[test]
    fn offsets_past_2_to_the_64_are_errors() {
        // co64: a chunk at 2^64 - 5 whose 10-byte samples end past 2^64.
        let mut co64 = full(0, &[1]);
        co64.extend_from_slice(&(u64::MAX - 4).to_be_bytes());
        let error = problem(rename(movie(3, &[(b"stco", co64)]), b"stco", b"co64"));
        assert!(error.contains("2^64"), "{error}");
    }

    #[test]
    fn an_edit_list_that_overflows_is_an_error() {
        let mut elst = full(1, &[2]);
        for _ in 0..2 {
            elst.extend_from_slice(&(i64::MAX as u64).to_be_bytes()); // duration, in movie ticks
            elst.extend_from_slice(&u64::MAX.to_be_bytes()); // media time -1: an empty edit
            elst.extend_from_slice(&[0, 1, 0, 0]);
        }
        let bytes = movie(3, &[]);
        // Put `edts/elst` into the track: rebuild with the edit list before `mdia`.
        let trak_at = bytes.windows(4).position(|w| w == b"trak").unwrap() - 4;
        let mut crafted = bytes[..trak_at].to_vec();
        let trak = &bytes[trak_at + 8..];
        let mut payload = boxed(b"edts", &boxed(b"elst", &elst));
        payload.extend_from_slice(trak);
        crafted.extend(boxed(b"trak", &payload));
        // The moov's size grows by the edit list.
        let moov_at = crafted.windows(4).position(|w| w == b"moov").unwrap() - 4;
        let moov_len = (crafted.len() - moov_at) as u32;
        crafted[moov_at..moov_at + 4].copy_from_slice(&moov_len.to_be_bytes());
        assert!(problem(crafted).contains("elst"));
    }
}

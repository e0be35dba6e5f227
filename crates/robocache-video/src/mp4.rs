//! An MP4 (ISO BMFF) demuxer for the files camera datasets hold: the first
//! video track's codec, size, time scale and sample table (where each
//! sample's bytes are, its decode and presentation times, which samples
//! are sync samples). Only `moov` is read; sample bytes are read on request.
//!
//! Boxes read: `moov/mvhd`, `trak/{tkhd, edts/elst, mdia/{mdhd, hdlr,
//! minf/stbl/{stsd, stts, ctts, stss, stsz, stz2, stsc, stco, co64}}}`.
//! Fragmented files (`moof`) are not read (camera datasets are not
//! fragmented; a fragmented file is a clear error).

use std::path::Path;

use robocache_storage::Blob;

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
                last.dts - first.dts + (last.dts - previous.dts)
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
                0 => (self.data.len() - self.at + 8) as u64,
                1 => self.u64()?,
                n => n,
            };
            if size < header {
                return Err(self.err(format!("box `{}` claims {size} bytes", String::from_utf8_lossy(&kind))));
            }
            out.push((kind, self.bytes((size - header) as usize)?));
        }
        Ok(out)
    }
}

fn find<'a>(boxes: &[([u8; 4], &'a [u8])], kind: &[u8; 4]) -> Option<&'a [u8]> {
    boxes.iter().find(|(k, _)| k == kind).map(|(_, b)| *b)
}

/// Reads the `moov` box of `file` (named `path` in errors) and the first
/// video track in it: box headers, then the `moov` payload, nothing else.
pub fn read_track(path: &Path, file: &Blob) -> Result<Track> {
    let io = |error: robocache_storage::Error| Error::Io { file: path.to_path_buf(), error: error.into() };
    let len = file.len();
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
        if size < head || at + size > len {
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
    let track = parse_moov(path, &moov)?;
    if track.samples.is_empty() && fragmented {
        return Err(Error::Container {
            file: path.to_path_buf(),
            problem: "is a fragmented MP4 (`moof`); robocache reads unfragmented files".into(),
        });
    }
    for (i, sample) in track.samples.iter().enumerate() {
        if sample.offset + sample.size as u64 > len {
            return Err(Error::Container {
                file: path.to_path_buf(),
                problem: format!(
                    "sample {i} lies at bytes {}..{}, past the end of the file ({len} bytes; a truncated file)",
                    sample.offset,
                    sample.offset + sample.size as u64
                ),
            });
        }
    }
    Ok(track)
}

fn parse_moov(path: &Path, moov: &[u8]) -> Result<Track> {
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
        let samples = sample_table(path, &stbl, shift)?;
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
    let count = r.u32()?;
    let mut delay = 0i64;
    for _ in 0..count {
        let (duration, media_time) = match version {
            1 => (r.u64()? as i64, r.u64()? as i64),
            _ => (r.u32()? as i64, r.u32()? as i32 as i64),
        };
        r.skip(4)?;
        if media_time == -1 {
            delay += duration * timescale as i64 / movie_timescale.max(1) as i64;
        } else {
            return Ok(delay - media_time);
        }
    }
    Ok(delay)
}

fn sample_table(path: &Path, stbl: &[([u8; 4], &[u8])], shift: i64) -> Result<Vec<Sample>> {
    // Sizes.
    let sizes: Vec<u32> = if let Some(stsz) = find(stbl, b"stsz") {
        let mut r = Reader::new(path, stsz, "stsz");
        r.full_box()?;
        let fixed = r.u32()?;
        let count = r.u32()? as usize;
        if fixed != 0 {
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
        let mut sizes = Vec::with_capacity(count);
        match field {
            8 => (0..count).try_for_each(|_| r.u8().map(|v| sizes.push(v as u32)))?,
            16 => (0..count).try_for_each(|_| r.u16().map(|v| sizes.push(v as u32)))?,
            _ => {
                return Err(Error::Container {
                    file: path.to_path_buf(),
                    problem: format!("`stz2` field size {field}"),
                })
            }
        }
        sizes
    } else {
        return Err(missing(path, "stbl/stsz"));
    };
    let n = sizes.len();
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
    let mut sample_offsets = Vec::with_capacity(n);
    'chunks: for (chunk, &offset) in offsets.iter().enumerate() {
        let number = chunk as u32 + 1;
        let per = runs.iter().rev().find(|(first, _)| *first <= number).map_or(0, |r| r.1);
        let mut at = offset;
        for _ in 0..per {
            let i = sample_offsets.len();
            if i >= n {
                break 'chunks;
            }
            sample_offsets.push(at);
            at += sizes[i] as u64;
        }
    }
    if sample_offsets.len() != n {
        return Err(Error::Container {
            file: path.to_path_buf(),
            problem: format!("the chunk tables place {} of the {n} samples", sample_offsets.len()),
        });
    }
    // Decode times.
    let stts = find(stbl, b"stts").ok_or_else(|| missing(path, "stbl/stts"))?;
    let mut r = Reader::new(path, stts, "stts");
    r.full_box()?;
    let count = r.u32()? as usize;
    check_count(path, "stts", count, r.data.len() - r.at, 8)?;
    let mut dts = Vec::with_capacity(n);
    let mut t = 0i64;
    for _ in 0..count {
        let (k, delta) = (r.u32()?, r.u32()?);
        for _ in 0..k {
            if dts.len() < n {
                dts.push(t);
            }
            t += delta as i64;
        }
    }
    if dts.len() != n {
        return Err(Error::Container {
            file: path.to_path_buf(),
            problem: format!("`stts` times {} of the {n} samples", dts.len()),
        });
    }
    // Composition offsets.
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
            for _ in 0..k {
                if i < n {
                    cts[i] = offset;
                    i += 1;
                }
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
    Ok((0..n)
        .map(|i| Sample {
            offset: sample_offsets[i],
            size: sizes[i],
            dts: dts[i],
            pts: dts[i] + cts[i] + shift,
            sync: sync[i],
        })
        .collect())
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
pub fn read_sample(path: &Path, file: &Blob, sample: &Sample) -> Result<Vec<u8>> {
    let mut out = vec![0u8; sample.size as usize];
    file.read_exact_at(&mut out, sample.offset)
        .map_err(|error| Error::Io { file: path.to_path_buf(), error: error.into() })?;
    Ok(out)
}

//! Writing an MP4 file of one H.264 video track, sample by sample, as
//! LeRobot's video files are laid out: `ftyp`, then `mdat` (samples
//! streamed to the file as they come), then `moov` with the sample table,
//! written when the file is finished.
//!
//! ```text
//! ftyp                                  isom, iso2, avc1, mp41
//! mdat                                  64-bit size, set at the end
//! moov/mvhd                             movie time scale 1000
//! moov/trak/tkhd                        track 1, width and height
//! moov/trak/mdia/{mdhd, hdlr}           the track's time scale; `vide`
//! moov/trak/mdia/minf/{vmhd, dinf}
//! moov/trak/mdia/minf/stbl/stsd/avc1    the size; `avcC` with one SPS and one PPS
//! moov/trak/mdia/minf/stbl/{stts, stss, stsz, stsc, stco | co64}
//! ```
//!
//! Every sample is its own chunk (`stsc` one entry, `stco` one offset a
//! sample, `co64` where a file passes 4 GiB); frames are stored in
//! presentation order (no `ctts`, no edit list): sample `k`'s time is the
//! sum of the durations before it.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Movie header time scale (`mvhd`, `tkhd` durations), as FFmpeg writes it.
const MOVIE_TIMESCALE: u32 = 1000;

/// An MP4 file of one H.264 track being written (see the module docs).
#[derive(Debug)]
pub struct Mp4Writer {
    path: PathBuf,
    file: BufWriter<File>,
    width: u16,
    height: u16,
    timescale: u32,
    avcc: Vec<u8>,
    /// Where the next sample goes (bytes from the start of the file).
    at: u64,
    /// Where `mdat`'s 64-bit size is.
    mdat_size_at: u64,
    sizes: Vec<u32>,
    offsets: Vec<u64>,
    durations: Vec<u32>,
    /// Sample numbers (1-based) of the key frames.
    sync: Vec<u32>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |error| Error::Io { file: path.to_path_buf(), error }
}

fn problem(path: &Path, problem: String) -> Error {
    Error::Container { file: path.to_path_buf(), problem }
}

/// A box: its size, its type, its payload.
fn boxed(kind: &[u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&((payload.len() + 8) as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(payload);
    out
}

/// A full box: version 0, `flags`, then `payload`.
fn full(kind: &[u8; 4], flags: u32, payload: &[u8]) -> Vec<u8> {
    let mut body = flags.to_be_bytes().to_vec();
    body[0] = 0;
    body.extend_from_slice(payload);
    boxed(kind, &body)
}

fn be32(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

/// The unity transformation matrix of `mvhd` and `tkhd`.
const MATRIX: [u32; 9] = [0x0001_0000, 0, 0, 0, 0x0001_0000, 0, 0, 0, 0x4000_0000];

impl Mp4Writer {
    /// Starts `path` (replaced if it exists): a `width × height` H.264
    /// track of time scale `timescale` (ticks a second), decoded with
    /// `sps` and `pps` (one of each, without start codes).
    pub fn create_h264(
        path: impl AsRef<Path>,
        width: usize,
        height: usize,
        timescale: u32,
        sps: &[u8],
        pps: &[u8],
    ) -> Result<Self> {
        let path = path.as_ref();
        let (Ok(width), Ok(height)) = (u16::try_from(width), u16::try_from(height)) else {
            return Err(problem(path, format!("a {width}×{height} track: MP4 sizes are 16-bit")));
        };
        if timescale == 0 || sps.len() < 4 || pps.is_empty() || sps.len() > 0xffff || pps.len() > 0xffff {
            return Err(problem(
                path,
                format!("time scale {timescale}, a {}-byte SPS and a {}-byte PPS", sps.len(), pps.len()),
            ));
        }
        // avcC: version 1, the SPS's profile, compatibility and level,
        // 4-byte NAL lengths, one SPS, one PPS.
        let mut avcc = vec![1, sps[1], sps[2], sps[3], 0xff, 0xe1];
        avcc.extend_from_slice(&(sps.len() as u16).to_be_bytes());
        avcc.extend_from_slice(sps);
        avcc.push(1);
        avcc.extend_from_slice(&(pps.len() as u16).to_be_bytes());
        avcc.extend_from_slice(pps);
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let mut file = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io(path))?);
        let ftyp = boxed(b"ftyp", &[b"isom".as_slice(), &0x200u32.to_be_bytes(), b"isomiso2avc1mp41"].concat());
        file.write_all(&ftyp).map_err(io(path))?;
        let mdat_size_at = ftyp.len() as u64 + 8;
        // `mdat` with a 64-bit size (size field 1), set when finished.
        file.write_all(&[&1u32.to_be_bytes()[..], b"mdat", &[0u8; 8]].concat()).map_err(io(path))?;
        Ok(Mp4Writer {
            path: path.to_path_buf(),
            file,
            width,
            height,
            timescale,
            avcc,
            at: mdat_size_at + 8,
            mdat_size_at,
            sizes: Vec::new(),
            offsets: Vec::new(),
            durations: Vec::new(),
            sync: Vec::new(),
        })
    }

    /// Appends a sample (length-prefixed NAL units) shown for `duration`
    /// ticks; `key` where a decode may start at it.
    pub fn push(&mut self, sample: &[u8], duration: u32, key: bool) -> Result<()> {
        let size = u32::try_from(sample.len())
            .map_err(|_| problem(&self.path, format!("a sample of {} bytes (4 GiB at most)", sample.len())))?;
        if self.sizes.is_empty() && !key {
            return Err(problem(&self.path, "the first sample of a track is not a key frame".into()));
        }
        self.file.write_all(sample).map_err(io(&self.path))?;
        self.offsets.push(self.at);
        self.sizes.push(size);
        self.durations.push(duration);
        if key {
            self.sync.push(self.sizes.len() as u32);
        }
        self.at += u64::from(size);
        Ok(())
    }

    /// Samples written.
    pub fn frames(&self) -> usize {
        self.sizes.len()
    }

    /// Bytes written so far (without the `moov` to come).
    pub fn bytes(&self) -> u64 {
        self.at
    }

    /// The track's duration so far, in its ticks.
    pub fn duration_ticks(&self) -> u64 {
        self.durations.iter().map(|&d| u64::from(d)).sum()
    }

    /// Writes the sample table and closes the file.
    pub fn finish(mut self) -> Result<()> {
        if self.sizes.is_empty() {
            return Err(problem(&self.path, "a video track of no frames".into()));
        }
        let moov = self.moov()?;
        self.file.write_all(&moov).map_err(io(&self.path))?;
        let mut file =
            self.file.into_inner().map_err(|e| Error::Io { file: self.path.clone(), error: e.into_error() })?;
        let mdat_size = self.at - (self.mdat_size_at - 8);
        file.seek(SeekFrom::Start(self.mdat_size_at)).map_err(io(&self.path))?;
        file.write_all(&mdat_size.to_be_bytes()).map_err(io(&self.path))?;
        file.sync_data().map_err(io(&self.path))
    }

    fn moov(&self) -> Result<Vec<u8>> {
        let too_long = || problem(&self.path, "a track longer than 2^32 ticks".into());
        let ticks = u32::try_from(self.duration_ticks()).map_err(|_| too_long())?;
        let movie_ticks = u32::try_from(self.duration_ticks() * u64::from(MOVIE_TIMESCALE) / u64::from(self.timescale))
            .map_err(|_| too_long())?;
        let count = self.sizes.len() as u32;

        let mut mvhd = be32(&[0, 0, MOVIE_TIMESCALE, movie_ticks, 0x0001_0000]);
        mvhd.extend_from_slice(&[1, 0, 0, 0]); // volume 1.0, reserved
        mvhd.extend_from_slice(&[0; 8]);
        mvhd.extend(be32(&MATRIX));
        mvhd.extend_from_slice(&[0; 24]); // pre_defined
        mvhd.extend(be32(&[2])); // next track id
        let mvhd = full(b"mvhd", 0, &mvhd);

        let mut tkhd = be32(&[0, 0, 1, 0, movie_ticks, 0, 0]);
        tkhd.extend_from_slice(&[0; 8]); // layer, alternate group, volume, reserved
        tkhd.extend(be32(&MATRIX));
        tkhd.extend(be32(&[u32::from(self.width) << 16, u32::from(self.height) << 16]));
        let tkhd = full(b"tkhd", 3, &tkhd); // enabled, in the movie

        let mut mdhd = be32(&[0, 0, self.timescale, ticks]);
        mdhd.extend_from_slice(&[0x55, 0xc4, 0, 0]); // language `und`
        let mdhd = full(b"mdhd", 0, &mdhd);
        let mut hdlr = be32(&[0]);
        hdlr.extend_from_slice(b"vide");
        hdlr.extend_from_slice(&[0; 12]);
        hdlr.extend_from_slice(b"VideoHandler\0");
        let hdlr = full(b"hdlr", 0, &hdlr);

        let vmhd = full(b"vmhd", 1, &[0; 8]);
        let dinf = boxed(b"dinf", &full(b"dref", 0, &[be32(&[1]), full(b"url ", 1, &[])].concat()));

        let mut avc1 = vec![0u8; 6];
        avc1.extend_from_slice(&1u16.to_be_bytes()); // data reference index
        avc1.extend_from_slice(&[0; 16]);
        avc1.extend_from_slice(&self.width.to_be_bytes());
        avc1.extend_from_slice(&self.height.to_be_bytes());
        avc1.extend(be32(&[0x0048_0000, 0x0048_0000, 0])); // 72 dpi, reserved
        avc1.extend_from_slice(&1u16.to_be_bytes()); // frames per sample
        avc1.extend_from_slice(&[0; 32]); // compressor name
        avc1.extend_from_slice(&[0x00, 0x18, 0xff, 0xff]); // depth 24, pre_defined -1
        avc1.extend(boxed(b"avcC", &self.avcc));
        let stsd = full(b"stsd", 0, &[be32(&[1]), boxed(b"avc1", &avc1)].concat());

        let mut runs: Vec<(u32, u32)> = Vec::new();
        for &d in &self.durations {
            match runs.last_mut() {
                Some((n, last)) if *last == d => *n += 1,
                _ => runs.push((1, d)),
            }
        }
        let mut stts = be32(&[runs.len() as u32]);
        runs.iter().for_each(|&(n, d)| stts.extend(be32(&[n, d])));
        let stts = full(b"stts", 0, &stts);
        let stss = full(b"stss", 0, &[be32(&[self.sync.len() as u32]), be32(&self.sync)].concat());
        let stsz = full(b"stsz", 0, &[be32(&[0, count]), be32(&self.sizes)].concat());
        let stsc = full(b"stsc", 0, &be32(&[1, 1, 1, 1]));
        let chunk_offsets = match self.at > u64::from(u32::MAX) {
            true => {
                let mut co64 = be32(&[count]);
                self.offsets.iter().for_each(|o| co64.extend_from_slice(&o.to_be_bytes()));
                full(b"co64", 0, &co64)
            }
            false => {
                let offsets: Vec<u32> = self.offsets.iter().map(|&o| o as u32).collect();
                full(b"stco", 0, &[be32(&[count]), be32(&offsets)].concat())
            }
        };
        let stbl = boxed(b"stbl", &[stsd, stts, stss, stsz, stsc, chunk_offsets].concat());
        let minf = boxed(b"minf", &[vmhd, dinf, stbl].concat());
        let mdia = boxed(b"mdia", &[mdhd, hdlr, minf].concat());
        let trak = boxed(b"trak", &[tkhd, mdia].concat());
        Ok(boxed(b"moov", &[mvhd, trak].concat()))
    }
}

//! The format layer: what a dataset format does, as two traits that each
//! format crate implements once, and how a path finds its format among a
//! list of them.
//!
//! - [`FormatKind`] recognises a path as the format ([`FormatKind::detect`])
//!   and opens it ([`FormatKind::open`]) into the episode model
//!   ([`DatasetInfo`]) and a [`FormatReader`]. A kind carries the options
//!   of its own format (a rate, a split, a topic mapping), given when the
//!   registry builds it.
//! - [`FormatReader`] reads what the model describes: rows of a stream as
//!   bytes, explicit timestamps, and the optional capabilities a format may
//!   have: camera video that robocache decodes ([`VideoFrames`]) and a
//!   sidecar index ([`FormatReader::index_file`]).
//!
//! [`crate::DatasetReader`] holds one reader behind `Box<dyn FormatReader>`
//! and never names a format; the `robocache-datasets` facade's registry is
//! the one list of formats (one crate each).

use std::any::Any;
use std::fmt::Debug;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use robocache_cpu::{DType, HostVec};
use robocache_storage::Storage;
pub use robocache_video::FrameCacheUsage;
use robocache_video::{DecodeCounts, DecoderChoice, FrameFormat};

use crate::model::{DatasetInfo, FormatName, StreamInfo};
use crate::{Error, Result};

/// A format as a whole: how a path is recognised as it, and opened.
pub trait FormatKind: Send + Sync {
    /// Its name in messages (`LeRobot`, `RLDS`, `HDF5`).
    fn name(&self) -> &'static str;

    /// The layouts it reads (several where one container holds several
    /// layouts: HDF5 holds robomimic, CALVIN and RT-X files).
    fn formats(&self) -> &'static [FormatName];

    /// What paths it reads, for the error when another format is asked for
    /// (`a directory with meta/info.json is read as a LeRobot dataset`) and
    /// when no format reads a path.
    fn reads(&self) -> &'static str;

    /// True when `path` (local or remote) holds this format.
    fn detect(&self, path: &Path, storage: &Storage) -> Result<bool>;

    /// Opens `path` with the kind's options: its episode model (metadata
    /// only) and its reader.
    fn open(&self, path: &Path, storage: &Storage) -> Result<Opened>;

    /// True when its datasets have a sidecar index ([`FormatReader::index_file`]).
    fn has_index(&self) -> bool {
        false
    }

    /// Parts of file names its datasets hold (`.parquet`, `dataset_info.json`):
    /// when no format reads a path, the kind whose signs most of the path's
    /// files show is named as the nearest.
    fn signs(&self) -> &'static [&'static str] {
        &[]
    }
}

/// What [`FormatKind::open`] returns.
pub type Opened = (Box<dyn FormatReader>, DatasetInfo);

/// The format of `path`: the first of `kinds` that detects it, checked
/// against the layout `asked` for. When none does, the error lists every
/// kind tried and what each reads.
pub fn kind_of<'k>(
    path: &Path,
    kinds: &'k [Box<dyn FormatKind>],
    asked: Option<FormatName>,
    storage: &Storage,
) -> Result<&'k dyn FormatKind> {
    for kind in kinds {
        if kind.detect(path, storage)? {
            if let Some(format) = asked.filter(|f| !kind.formats().contains(f)) {
                return Err(Error::Invalid(format!("{}: {}, not as {format}", path.display(), kind.reads())));
            }
            return Ok(&**kind);
        }
    }
    let tried = kinds.iter().map(|k| format!("{}: {}", k.name(), k.reads())).collect::<Vec<_>>().join("; ");
    let files = files_of(path, storage);
    let nearest =
        nearest(kinds, &files).map(|k| format!("; the nearest is {}: {}", k.name(), k.reads())).unwrap_or_default();
    Err(Error::UnknownFormat {
        file: path.to_path_buf(),
        reason: format!("no format reads it ({}); tried {tried}{nearest}", contents(path, storage, &files)),
    })
}

/// The files of `path`: itself, or every file below it (none where it
/// cannot be listed).
fn files_of(path: &Path, storage: &Storage) -> Option<Vec<PathBuf>> {
    match storage.is_dir(path) {
        Ok(true) => storage.list_files(path).ok(),
        _ => storage.is_file(path).ok().filter(|&is| is).map(|_| vec![path.to_path_buf()]),
    }
}

/// The kind whose signs the most of `files` show, where any does.
fn nearest<'k>(kinds: &'k [Box<dyn FormatKind>], files: &Option<Vec<PathBuf>>) -> Option<&'k dyn FormatKind> {
    let files = files.as_ref()?;
    let names: Vec<String> =
        files.iter().filter_map(|f| f.file_name()).map(|n| n.to_string_lossy().to_ascii_lowercase()).collect();
    let score =
        |kind: &dyn FormatKind| names.iter().filter(|n| kind.signs().iter().any(|sign| n.contains(sign))).count();
    let best = kinds.iter().map(|k| (score(&**k), &**k)).filter(|(n, _)| *n > 0).max_by_key(|(n, _)| *n)?;
    Some(best.1)
}

/// What `path` holds (its `files`), for the error when no format reads it:
/// a directory's files counted by extension (`3 .hdf5, 1 .json`).
fn contents(path: &Path, storage: &Storage, files: &Option<Vec<PathBuf>>) -> String {
    if !storage.is_dir(path).unwrap_or(false) {
        return match storage.is_file(path) {
            Ok(true) => "a file".into(),
            _ => "nothing is there".into(),
        };
    }
    let Some(files) = files else { return "a directory that cannot be listed".into() };
    if files.is_empty() {
        return "an empty directory".into();
    }
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for file in files {
        let extension =
            file.extension().map_or_else(|| "(no extension)".into(), |e| format!(".{}", e.to_string_lossy()));
        *counts.entry(extension).or_default() += 1;
    }
    let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let listed: Vec<String> = counts.iter().take(6).map(|(extension, n)| format!("{n} {extension}")).collect();
    format!("a directory of {} files: {}", files.len(), listed.join(", "))
}

/// The names of the kinds that have a sidecar index (`RLDS`).
pub fn kinds_with_index(kinds: &[Box<dyn FormatKind>]) -> String {
    kinds.iter().filter(|k| k.has_index()).map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// An open dataset of one format: reads the rows, times and frames its
/// [`DatasetInfo`] describes. Shared by reader threads.
pub trait FormatReader: Debug + Send + Sync + Any {
    /// Rows `rows` of `stream` of `episode` as bytes into `out`, which
    /// holds exactly those rows (elements little-endian as in memory, bool
    /// as one byte 0 or 1). The rows lie in the stream (checked by the
    /// caller).
    fn read_rows_into(&self, episode: usize, stream: &StreamInfo, rows: Range<usize>, out: &mut [u8]) -> Result<()>;

    /// The same rows into a new vector of the stream's dtype. Formats that
    /// read typed arrays (HDF5) override it; a format whose metadata could
    /// claim more rows than its data holds checks that before room for them
    /// is allocated.
    fn read_rows(&self, episode: usize, stream: &StreamInfo, rows: Range<usize>) -> Result<HostVec> {
        read_rows_by_bytes(self, episode, stream, rows)
    }

    /// The explicit timestamps of `stream` of `episode` (a
    /// [`crate::model::Timeline::Explicit`] stream, `key` naming them).
    fn explicit_times(&self, info: &DatasetInfo, episode: usize, stream: &StreamInfo, key: &str) -> Result<Arc<[f64]>>;

    /// Camera video that robocache decodes, where the format has it.
    fn video(&self) -> Option<&dyn VideoFrames> {
        None
    }

    /// The byte budget of the decoded frames a format keeps itself (not
    /// video: [`FormatReader::video`] has its own), such as a Zarr image
    /// array's decompressed chunks or ALOHA's decoded JPEG rows; 0 keeps
    /// none. Formats that keep none ignore it.
    fn set_decoded_frames_budget(&self, _bytes: usize) {}

    /// What those decoded frames hold and how often they served a read,
    /// where the format counts them (`None` otherwise).
    fn decoded_frames_usage(&self) -> Option<FrameCacheUsage> {
        None
    }

    /// Forgets those frames' hit and miss counts.
    fn reset_decoded_frames_counts(&self) {}

    /// The sidecar index of the dataset opened as `info` and where it goes
    /// by default; `None` for formats without one.
    fn index_file(&self, _info: &DatasetInfo) -> Option<(PathBuf, Vec<u8>)> {
        None
    }

    /// The reader as [`Any`], for format-specific views
    /// (the facade's `Dataset::lerobot`).
    fn as_any(&self) -> &dyn Any;
}

/// Rows of `reader` read by bytes ([`FormatReader::read_rows_into`]) into a
/// new vector of the stream's dtype.
pub fn read_rows_by_bytes<R: FormatReader + ?Sized>(
    reader: &R,
    episode: usize,
    stream: &StreamInfo,
    rows: Range<usize>,
) -> Result<HostVec> {
    let len = rows.len() * stream.channels();
    if stream.dtype == DType::Bool {
        let mut bytes = vec![0u8; len];
        reader.read_rows_into(episode, stream, rows, &mut bytes)?;
        return Ok(HostVec::Bool(bytes.into_iter().map(|b| b != 0).collect()));
    }
    let mut data = HostVec::zeros(stream.dtype, len);
    let Some(bytes) = data.as_bytes_mut() else {
        return Err(Error::Invalid(format!("{} rows have no byte view", stream.dtype)));
    };
    reader.read_rows_into(episode, stream, rows, bytes)?;
    Ok(data)
}

/// Camera streams stored as video, decoded by robocache (`robocache-video`)
/// through a host frame cache.
pub trait VideoFrames {
    /// `(width, height)` of `stream`'s frames when it is video; `None` otherwise.
    fn frame_size(&self, stream: &StreamInfo) -> Option<(usize, usize)>;

    /// Frames of the video stream `stream` at `(episode, row)` pairs, in
    /// that order, into `out`, each as `format` says.
    fn read_frames_into(
        &self,
        stream: &StreamInfo,
        wanted: &[(usize, usize)],
        format: FrameFormat,
        out: &mut [u8],
    ) -> Result<()>;

    /// Sets the host frame cache's byte budget.
    fn set_frame_cache_budget(&self, bytes: usize);

    /// Where frames are decoded.
    fn set_decoders(&self, choice: DecoderChoice);

    /// Samples decoded since the counts were reset, by where.
    fn decode_counts(&self) -> DecodeCounts;

    /// What the host frame cache holds and how often it served.
    fn frame_cache_usage(&self) -> FrameCacheUsage;

    /// Forgets the decode counts and the frame cache's hits and misses.
    fn reset_counts(&self);
}

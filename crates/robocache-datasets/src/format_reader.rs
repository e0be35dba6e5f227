//! The format layer: what a dataset format does, as two traits that each
//! format implements once in its own module, and the list of formats.
//!
//! - [`FormatKind`] recognises a path as the format ([`FormatKind::detect`])
//!   and opens it ([`FormatKind::open`]) into the episode model
//!   ([`DatasetInfo`]) and a [`FormatReader`].
//! - [`FormatReader`] reads what the model describes: rows of a stream as
//!   bytes, explicit timestamps, and the optional capabilities a format may
//!   have: camera video that robocache decodes ([`VideoFrames`]) and a
//!   sidecar index ([`FormatReader::index_file`]).
//!
//! [`crate::Dataset`] holds one reader behind `Box<dyn FormatReader>` and
//! never names a format. Adding a format: its module implements both
//! traits, [`KINDS`] lists it (one line), [`Format`] gets its name, and
//! docs/datasets.md describes its layout.

use std::any::Any;
use std::fmt::Debug;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use robocache_cpu::{DType, HostVec};
use robocache_storage::Storage;
use robocache_video::{DecodeCounts, DecoderChoice, FrameCacheUsage, FrameFormat};

use crate::formats::OpenOptions;
use crate::model::{DatasetInfo, Format, StreamInfo};
use crate::{Error, Result};

/// The formats robocache reads, in the order they are tried on a path: the
/// first whose [`FormatKind::detect`] says yes opens it.
pub(crate) static KINDS: [&dyn FormatKind; 4] =
    [&crate::lerobot::LeRobotKind, &crate::ros2::Ros2Kind, &crate::rlds::RldsKind, &crate::formats::Hdf5Kind];

/// A format as a whole: how a path is recognised as it, and opened.
pub(crate) trait FormatKind: Sync {
    /// Its name in messages (`LeRobot`, `RLDS`, `HDF5`).
    fn name(&self) -> &'static str;

    /// The [`Format`]s it reads (several where one container holds several
    /// layouts: HDF5 holds robomimic, CALVIN and RT-X files).
    fn formats(&self) -> &'static [Format];

    /// What paths it reads, for the error when another format is asked for
    /// (`a directory with meta/info.json is read as a LeRobot dataset`).
    fn reads(&self) -> &'static str;

    /// True when `path` (local or remote) holds this format.
    fn detect(&self, path: &Path, storage: &Storage) -> Result<bool>;

    /// Opens `path`: its episode model (metadata only) and its reader.
    fn open(&self, path: &Path, options: &OpenOptions, storage: &Storage) -> Result<Opened>;

    /// True when its datasets have a sidecar index ([`FormatReader::index_file`]).
    fn has_index(&self) -> bool {
        false
    }
}

/// What [`FormatKind::open`] returns.
pub(crate) type Opened = (Box<dyn FormatReader>, DatasetInfo);

/// The format of `path`: the first of [`KINDS`] that detects it, checked
/// against the format `options` asks for.
pub(crate) fn kind_of(path: &Path, options: &OpenOptions, storage: &Storage) -> Result<&'static dyn FormatKind> {
    for kind in KINDS {
        if kind.detect(path, storage)? {
            if let Some(format) = options.format.filter(|f| !kind.formats().contains(f)) {
                return Err(Error::Invalid(format!("{}: {}, not as {format}", path.display(), kind.reads())));
            }
            return Ok(kind);
        }
    }
    Err(Error::UnknownFormat {
        file: path.to_path_buf(),
        reason: format!("no format reads it (tried {})", KINDS.map(|k| k.name()).join(", ")),
    })
}

/// The names of the formats that have a sidecar index (`RLDS`).
pub(crate) fn kinds_with_index() -> String {
    KINDS.iter().filter(|k| k.has_index()).map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// An open dataset of one format: reads the rows, times and frames its
/// [`DatasetInfo`] describes. Shared by reader threads.
pub(crate) trait FormatReader: Debug + Send + Sync + Any {
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
    /// [`crate::Timeline::Explicit`] stream, `key` naming them).
    fn explicit_times(&self, info: &DatasetInfo, episode: usize, stream: &StreamInfo, key: &str) -> Result<Arc<[f64]>>;

    /// Camera video that robocache decodes, where the format has it.
    fn video(&self) -> Option<&dyn VideoFrames> {
        None
    }

    /// The sidecar index of the dataset opened as `info` and where it goes
    /// by default; `None` for formats without one.
    fn index_file(&self, _info: &DatasetInfo) -> Option<(PathBuf, Vec<u8>)> {
        None
    }

    /// The reader as [`Any`], for format-specific views
    /// ([`crate::Dataset::lerobot`]).
    fn as_any(&self) -> &dyn Any;
}

/// Rows of `reader` read by bytes ([`FormatReader::read_rows_into`]) into a
/// new vector of the stream's dtype.
pub(crate) fn read_rows_by_bytes<R: FormatReader + ?Sized>(
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
pub(crate) trait VideoFrames {
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

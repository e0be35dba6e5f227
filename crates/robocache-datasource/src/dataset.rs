//! [`DatasetReader`]: an open dataset of any format, read lazily through
//! its format's reader.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use robocache_cpu::{with_host_data, Element, HostVec};
use robocache_storage::{Storage, StorageOptions};
use robocache_video::{DecodeCounts, DecoderChoice, FrameCacheUsage, FrameFormat};

use crate::cache::{CacheUsage, StreamCache};
use crate::format_reader::{self, FormatKind, FormatReader, VideoFrames};
use crate::model::{DatasetInfo, EpisodeInfo, FormatName, StreamInfo, Timeline};
use crate::{Error, Result};

/// The times of one stream of one episode.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamTimes {
    /// Step `i` at `start + i / hz`.
    Uniform { start: f64, hz: f64, len: usize },
    /// Explicit times, finite and strictly increasing (checked at open).
    Explicit(Arc<[f64]>),
}

impl StreamTimes {
    /// Number of steps.
    pub fn len(&self) -> usize {
        match self {
            StreamTimes::Uniform { len, .. } => *len,
            StreamTimes::Explicit(times) => times.len(),
        }
    }

    /// True for a stream without steps in this episode (a ROS 2 topic
    /// missing from one bag): its windows are padding, masked throughout.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The time of step `i`, computed as the resample kernels do (`start + i / hz`).
    pub fn time(&self, i: usize) -> f64 {
        match self {
            StreamTimes::Uniform { start, hz, .. } => start + i as f64 / hz,
            StreamTimes::Explicit(times) => times[i],
        }
    }

    /// The first and last step times; `None` for a stream without steps.
    pub fn span(&self) -> Option<(f64, f64)> {
        let last = self.len().checked_sub(1)?;
        Some((self.time(0), self.time(last)))
    }

    /// The smallest row range whose samples bracket every time in `[from, to]`:
    /// the last step at or before `from` through the first step at or after
    /// `to`, clamped to the stream.
    pub fn rows_covering(&self, from: f64, to: f64) -> Range<usize> {
        let n = self.len();
        // Index of the first step with time > t.
        let upper = |t: f64| -> usize {
            match self {
                StreamTimes::Explicit(times) => times.partition_point(|&s| s <= t),
                StreamTimes::Uniform { .. } => {
                    let (mut lo, mut hi) = (0usize, n);
                    while lo < hi {
                        let mid = lo + (hi - lo) / 2;
                        if self.time(mid) <= t {
                            lo = mid + 1;
                        } else {
                            hi = mid;
                        }
                    }
                    lo
                }
            }
        };
        let start = upper(from).saturating_sub(1).min(n.saturating_sub(1));
        let end = (upper(to) + 1).min(n).max(start + 1);
        start..end
    }
}

/// A dataset in any format of the format layer, opened: its episode model
/// and its format's reader. Opening reads the metadata (and explicit
/// timestamps, to check them); stream data is read per window or per
/// stream on request, through the format's reader. Shareable between
/// threads: the formats read rows with positioned reads outside any global
/// lock where their files allow it, so reader threads read them in
/// parallel. The `robocache-datasets` facade's `Dataset` is this, opened
/// with the registry's formats.
#[derive(Debug)]
pub struct DatasetReader {
    /// The format's reader (see [`crate::format_reader`]).
    reader: Box<dyn FormatReader>,
    info: DatasetInfo,
    cache: StreamCache,
    storage: Storage,
    /// The formats with a sidecar index, for [`DatasetReader::write_index`]'s error.
    indexed_formats: String,
}

/// How [`DatasetReader::open`] opens a path, whatever its format.
#[derive(Clone, Debug, Default)]
pub struct ReaderOptions {
    /// Only this layout (an error when the path is another).
    pub format: Option<FormatName>,
    /// Bytes of low-dimensional streams kept in memory after their first read
    /// (0: no cache; every window reads from the file).
    pub cache_bytes: usize,
    /// Where remote datasets are cached and how their stores are reached.
    pub storage: StorageOptions,
}

impl DatasetReader {
    /// Opens `path` as the first of `kinds` that recognises it.
    pub fn open(path: &Path, kinds: &[Box<dyn FormatKind>], options: &ReaderOptions) -> Result<Self> {
        let storage = Storage::new(options.storage.clone());
        let kind = format_reader::kind_of(path, kinds, options.format, &storage)?;
        let (reader, mut info) = kind.open(path, &storage)?;
        if robocache_storage::is_remote(path) {
            info.path = path.to_path_buf();
        }
        tracing::debug!(path = %path.display(), format = %info.format, episodes = info.episodes.len(), "opened dataset");
        let indexed_formats = format_reader::kinds_with_index(kinds);
        Ok(DatasetReader { reader, info, cache: StreamCache::new(options.cache_bytes), storage, indexed_formats })
    }

    /// The format's reader.
    pub fn reader(&self) -> &dyn FormatReader {
        &*self.reader
    }

    /// The format's video, where it has some.
    fn video(&self) -> Option<&dyn VideoFrames> {
        self.reader.video()
    }

    /// Where the dataset's files are read from: its remote reads (requests,
    /// bytes fetched, bytes read from the node-local cache) are in
    /// [`Storage::usage`].
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// What the file holds.
    pub fn info(&self) -> &DatasetInfo {
        &self.info
    }

    /// The layout the file was read as.
    pub fn format(&self) -> FormatName {
        self.info.format
    }

    /// Number of episodes.
    pub fn len(&self) -> usize {
        self.info.episodes.len()
    }

    /// True when the dataset has no episodes.
    pub fn is_empty(&self) -> bool {
        self.info.episodes.is_empty()
    }

    /// Episode `index`.
    pub fn episode(&self, index: usize) -> Result<&EpisodeInfo> {
        self.info.episodes.get(index).ok_or_else(|| {
            Error::Invalid(format!("episode index {index} is out of range: the dataset has {} episodes", self.len()))
        })
    }

    /// Stream `name` of episode `episode`, with its index.
    pub fn stream(&self, episode: usize, name: &str) -> Result<(usize, &StreamInfo)> {
        let info = self.episode(episode)?;
        info.stream_index(name).map(|i| (i, &info.streams[i])).ok_or_else(|| Error::UnknownStream {
            stream: name.to_owned(),
            scope: format!("episode `{}` of {}", info.name, self.info.path.display()),
            available: info.streams.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// Rows `rows` of a stream, `[rows.len(), ...step_shape]` row-major, in
    /// the file's dtype. Low-dimensional streams come from the cache when
    /// one is configured; otherwise only these rows are read.
    pub fn read_rows(&self, episode: usize, stream: &str, rows: Range<usize>) -> Result<HostVec> {
        let (index, info) = self.checked_rows(episode, stream, &rows)?;
        if self.cacheable(info) {
            let whole = self.cached_stream(episode, index, info)?;
            let channels = info.channels();
            return Ok(with_host_data!(HostVec, &*whole, |v: T| {
                <T as Element>::vec(v[rows.start * channels..rows.end * channels].to_vec())
            }));
        }
        self.read_from_source(episode, info, rows)
    }

    /// [`DatasetReader::read_rows`] as bytes into `out`, which holds exactly
    /// `rows.len()` rows of the stream (elements little-endian as in memory,
    /// bool as one byte 0 or 1). Batches are assembled this way: every
    /// window's rows read straight into the batch's buffer, page-locked
    /// staging memory included.
    pub fn read_rows_into(&self, episode: usize, stream: &str, rows: Range<usize>, out: &mut [u8]) -> Result<()> {
        let (index, info) = self.checked_rows(episode, stream, &rows)?;
        let row_bytes = info.step_bytes();
        if out.len() != rows.len() * row_bytes {
            return Err(Error::Invalid(format!(
                "rows {}..{} of stream `{stream}` are {} bytes ({row_bytes} a row), not the {} bytes of the buffer given",
                rows.start,
                rows.end,
                rows.len() * row_bytes,
                out.len()
            )));
        }
        if self.cacheable(info) {
            let whole = self.cached_stream(episode, index, info)?;
            out.copy_from_slice(&whole.as_slice().as_bytes()[rows.start * row_bytes..rows.end * row_bytes]);
            return Ok(());
        }
        self.read_source_rows_into(episode, info, rows, out)
    }

    /// Rows of `stream` at `(episode, row)` pairs, in that order, as bytes
    /// into `out` (one row after the other, as [`DatasetReader::read_rows_into`]).
    /// Camera video is read for all pairs at once: each group of pictures
    /// decoded once for every frame asked of it, through the frame cache.
    /// Other streams are read row by row.
    pub fn read_rows_at_into(&self, stream: &str, wanted: &[(usize, usize)], out: &mut [u8]) -> Result<()> {
        let Some(&(first, _)) = wanted.first() else {
            return Ok(());
        };
        let row_bytes = self.stream(first, stream)?.1.step_bytes();
        if out.len() != wanted.len() * row_bytes {
            return Err(Error::Invalid(format!(
                "{} rows of stream `{stream}` are {} bytes ({row_bytes} a row), not the {} bytes of the buffer given",
                wanted.len(),
                wanted.len() * row_bytes,
                out.len()
            )));
        }
        for &(episode, row) in wanted {
            let (_, info) = self.checked_rows(episode, stream, &(row..row + 1))?;
            if info.step_bytes() != row_bytes {
                return Err(Error::Invalid(format!(
                    "stream `{stream}` has rows of {} bytes in episode `{}`, {row_bytes} in episode `{}`",
                    info.step_bytes(),
                    self.info.episodes[episode].name,
                    self.info.episodes[first].name
                )));
            }
        }
        if let Some(video) = self.video() {
            let info = self.stream(first, stream)?.1;
            if video.frame_size(info).is_some() {
                return video.read_frames_into(info, wanted, FrameFormat::Rgb, out);
            }
        }
        for (&(episode, row), chunk) in wanted.iter().zip(out.chunks_exact_mut(row_bytes.max(1))) {
            self.read_rows_into(episode, stream, row..row + 1, chunk)?;
        }
        Ok(())
    }

    /// `(width, height)` of the frames of `stream` when robocache decodes
    /// it from video (a format's camera video); `None` for every other
    /// stream (an unknown name included).
    pub fn video_frame_size(&self, stream: &str) -> Option<(usize, usize)> {
        let (_, info) = self.stream(0, stream).ok()?;
        self.video()?.frame_size(info)
    }

    /// Frames of the video stream `stream` at `(episode, row)` pairs, in
    /// that order, into `out`, each as `format` says: RGB `[H, W, 3]` (as
    /// [`DatasetReader::read_rows_at_into`] gives them) or the decoder's YUV 4:2:0
    /// planes ([`robocache_video::yuv420_len`] bytes a frame), for a device
    /// that converts them itself. A stream that is not video is an error.
    pub fn read_video_frames_at_into(
        &self,
        stream: &str,
        wanted: &[(usize, usize)],
        format: FrameFormat,
        out: &mut [u8],
    ) -> Result<()> {
        let Some(&(first, _)) = wanted.first() else {
            return Ok(());
        };
        for &(episode, row) in wanted {
            self.checked_rows(episode, stream, &(row..row + 1))?;
        }
        let info = self.stream(first, stream)?.1;
        match self.video() {
            Some(video) => video.read_frames_into(info, wanted, format, out),
            None => Err(Error::Invalid(format!(
                "stream `{stream}` is not camera video (the {} format has no video)",
                self.info.format
            ))),
        }
    }

    /// Sets the byte budget of the decoded-frame cache: camera frames
    /// decoded from a format's video are kept as the
    /// decoder's YUV 4:2:0 planes (1.5 bytes a pixel) in host memory up to this many bytes, the first ones decoded, and
    /// read from there afterwards (0, the default: none kept). Formats that
    /// decompress frames by blocks keep those instead (a Zarr image array's
    /// chunks, least recently used out first); the other datasets ignore it.
    pub fn set_frame_cache_budget(&self, bytes: usize) {
        if let Some(video) = self.video() {
            video.set_frame_cache_budget(bytes);
        }
        self.reader.set_decoded_frames_budget(bytes);
    }

    /// Where camera frames of video features are decoded: on the CPU (the
    /// default), or on a GPU's video engines (NVDEC) with the CPU beside
    /// and instead of them ([`DecoderChoice::Auto`]), or on NVDEC only.
    /// Datasets without video ignore it.
    pub fn set_video_decoders(&self, choice: DecoderChoice) {
        if let Some(video) = self.video() {
            video.set_decoders(choice);
        }
    }

    /// Video samples decoded since the counts were last reset, on the CPU
    /// and on NVDEC (`None` for datasets without video).
    pub fn video_decode_counts(&self) -> Option<DecodeCounts> {
        self.video().map(|video| video.decode_counts())
    }

    /// What the decoded-frame cache holds and how often it served a frame
    /// (`None` for datasets whose format keeps no decoded frames).
    pub fn frame_cache_usage(&self) -> Option<FrameCacheUsage> {
        self.video().map(|video| video.frame_cache_usage()).or_else(|| self.reader.decoded_frames_usage())
    }

    /// Forgets the frame cache's hit and miss counts and the video decode
    /// counts (after warm-up).
    pub fn reset_frame_cache_counts(&self) {
        if let Some(video) = self.video() {
            video.reset_counts();
        }
        self.reader.reset_decoded_frames_counts();
    }

    /// The stream's index and description, after checking that `rows` lie in it.
    fn checked_rows(&self, episode: usize, stream: &str, rows: &Range<usize>) -> Result<(usize, &StreamInfo)> {
        let (index, info) = self.stream(episode, stream)?;
        if rows.start > rows.end || rows.end > info.len {
            return Err(Error::Invalid(format!(
                "rows {}..{} of stream `{stream}` in episode `{}`: the stream has {} rows",
                rows.start, rows.end, self.info.episodes[episode].name, info.len
            )));
        }
        Ok((index, info))
    }

    fn cacheable(&self, info: &StreamInfo) -> bool {
        !info.is_image() && self.cache.admits(info.size_in_bytes())
    }

    /// A whole low-dimensional stream from the cache, read on a miss.
    fn cached_stream(&self, episode: usize, index: usize, info: &StreamInfo) -> Result<Arc<HostVec>> {
        if let Some(whole) = self.cache.get((episode, index)) {
            return Ok(whole);
        }
        let whole = Arc::new(self.read_from_source(episode, info, 0..info.len)?);
        self.cache.insert((episode, index), whole.clone(), info.size_in_bytes());
        Ok(whole)
    }

    /// A whole stream, `[len, ...step_shape]`.
    pub fn read_stream(&self, episode: usize, stream: &str) -> Result<HostVec> {
        let (_, info) = self.stream(episode, stream)?;
        let len = info.len;
        self.read_rows(episode, stream, 0..len)
    }

    /// The times of a stream (explicit timestamps are read once and kept).
    pub fn times(&self, episode: usize, stream: &str) -> Result<StreamTimes> {
        let (_, info) = self.stream(episode, stream)?;
        match &info.timeline {
            Timeline::Uniform { start, hz } => Ok(StreamTimes::Uniform { start: *start, hz: *hz, len: info.len }),
            Timeline::Explicit { key } => {
                self.reader.explicit_times(&self.info, episode, info, key).map(StreamTimes::Explicit)
            }
        }
    }

    /// What the low-dimensional cache holds.
    pub fn cache_usage(&self) -> CacheUsage {
        self.cache.usage()
    }

    fn read_from_source(&self, episode: usize, info: &StreamInfo, rows: Range<usize>) -> Result<HostVec> {
        self.reader.read_rows(episode, info, rows)
    }

    pub fn read_source_rows_into(
        &self,
        episode: usize,
        info: &StreamInfo,
        rows: Range<usize>,
        out: &mut [u8],
    ) -> Result<()> {
        self.reader.read_rows_into(episode, info, rows, out)
    }

    /// Writes the dataset's sidecar index (for the formats that have one:
    /// an RLDS split's `robocache-index.<split>.json`) to `to`, by default
    /// beside its files (local, or a remote store written with the same
    /// credentials), and returns where it went. Later opens, on any node,
    /// read that one file instead of every record (see docs/remote.md); an
    /// index that no longer matches the files is not used. Formats that open
    /// from their own metadata have no index: an error.
    pub fn write_index(&self, to: Option<&Path>) -> Result<PathBuf> {
        let Some((beside, bytes)) = self.reader.index_file(&self.info) else {
            return Err(Error::Invalid(format!(
                "{}: only {} datasets have a sidecar index ({} datasets open from their own metadata)",
                self.info.path.display(),
                self.indexed_formats,
                self.info.format
            )));
        };
        let path = to.map_or(beside, Path::to_path_buf);
        self.storage.write(&path, bytes)?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datasets_are_shared_between_reader_threads() {
        fn send_and_sync<T: Send + Sync>() {}
        send_and_sync::<DatasetReader>();
    }

    #[test]
    fn uniform_and_explicit_rows_covering_agree() {
        let uniform = StreamTimes::Uniform { start: 0.5, hz: 10.0, len: 20 };
        let explicit = StreamTimes::Explicit((0..20).map(|i| 0.5 + i as f64 / 10.0).collect::<Vec<_>>().into());
        for (from, to) in [(0.0, 0.2), (0.5, 0.5), (0.55, 0.95), (1.0, 3.0), (2.4, 2.4), (5.0, 6.0), (0.61, 0.61)] {
            assert_eq!(uniform.rows_covering(from, to), explicit.rows_covering(from, to), "{from}..{to}");
        }
        assert_eq!(uniform.rows_covering(0.55, 0.95), 0..6);
        assert_eq!(uniform.span(), Some((0.5, 0.5 + 19.0 / 10.0)));
    }
}

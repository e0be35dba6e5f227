//! [`Dataset`]: an open file in one of the layouts, read lazily.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use robocache_cpu::{with_host_data, DType, Element, HostVec};
use robocache_storage::Storage;
use robocache_video::{DecodeCounts, DecoderChoice, FrameCacheUsage, FrameFormat};

use crate::cache::{CacheUsage, StreamCache};
use crate::direct_read::RowLayout;
use crate::formats::{self, OpenOptions};
use crate::hdf5_file::Hdf5File;
use crate::lerobot::{video_size, FeatureStorage, LeRobotSource};
use crate::model::{DatasetInfo, EpisodeInfo, Format, StreamInfo, Timeline};
use crate::rlds::RldsSource;
use crate::streams::read_timestamps;
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

    /// True for a stream without steps (readers never produce one).
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

    /// The first and last step times.
    pub fn span(&self) -> (f64, f64) {
        (self.time(0), self.time(self.len().saturating_sub(1)))
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

/// What a LeRobot dataset adds to the episode model: LeRobot's own
/// numbering (dataset `index`, `episode_index`) and its task texts.
#[derive(Clone, Copy, Debug)]
pub struct LeRobotView<'a> {
    source: &'a LeRobotSource,
}

impl LeRobotView<'_> {
    /// `meta/info.json`'s `fps`.
    pub fn fps(&self) -> f64 {
        self.source.fps()
    }

    /// Task texts by `task_index`.
    pub fn tasks(&self) -> &[String] {
        self.source.tasks()
    }

    /// The dataset `index` of the first frame of episode `episode` (robocache's episode number).
    pub fn first_index(&self, episode: usize) -> usize {
        self.source.first_index(episode)
    }

    /// LeRobot's `episode_index` of robocache's episode `episode`.
    pub fn episode_index(&self, episode: usize) -> usize {
        self.source.episode_index(episode)
    }

    /// How feature `name` is stored (parquet values, images in parquet, MP4 video).
    pub fn storage(&self, name: &str) -> Option<FeatureStorage> {
        self.source.feature_named(name).map(|f| f.storage)
    }

    /// `v3.0` or `v2.1`.
    pub fn codebase_version(&self) -> &'static str {
        self.source.version_name()
    }
}

/// A dataset opened in one of the layouts: an HDF5 file (robomimic, CALVIN,
/// the RT-X mirror) or an RLDS builder directory. Opening reads the
/// metadata (and explicit timestamps, to check them); stream data is read
/// per window or per stream on request. Shareable between threads: rows of
/// uncompressed HDF5 datasets and of RLDS records are read with positioned
/// reads outside any global lock, so reader threads read them in parallel.
///
/// ```no_run
/// use robocache_datasets::Dataset;
///
/// let dataset = Dataset::open("lift_ph.hdf5")?;
/// let demo = &dataset.info().episodes[0];
/// let actions = dataset.read_rows(0, "actions", 0..10)?; // 10 rows, one HDF5 hyperslab
/// println!("{} steps, {} actions read", demo.len, actions.len());
/// # Ok::<(), robocache_datasets::Error>(())
/// ```
#[derive(Debug)]
pub struct Dataset {
    source: Source,
    info: DatasetInfo,
    cache: StreamCache,
    storage: Storage,
}

/// Where the stream data lives.
#[derive(Debug)]
enum Source {
    Hdf5(Hdf5Source),
    Rlds(RldsSource),
    LeRobot(Box<LeRobotSource>),
}

/// An HDF5 file, read through the library or with positioned reads.
#[derive(Debug)]
struct Hdf5Source {
    file: Hdf5File,
    times: Mutex<HashMap<String, Arc<[f64]>>>,
    /// The same file for positioned reads of rows (see `direct_read`);
    /// `None` with [`OpenOptions::hdf5_reads_only`].
    raw: Option<File>,
    /// Per dataset path: where its rows lie, or `None` when HDF5 reads it.
    layouts: Mutex<HashMap<String, Option<Arc<RowLayout>>>>,
}

impl Dataset {
    /// Opens `path`, detecting its layout, with default options (no cache).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, &OpenOptions::default())
    }

    /// Opens `path` with `options`: an HDF5 file, or a TFDS builder
    /// directory (its version folder or the folder above) read as RLDS.
    pub fn open_with(path: impl AsRef<Path>, options: &OpenOptions) -> Result<Self> {
        let path = path.as_ref();
        let storage = Storage::new(options.storage.clone());
        // What the path holds. Locally: a directory is LeRobot (with
        // meta/info.json) or RLDS, a file is HDF5. Remotely, where folders
        // are only key prefixes, by the files found: meta/info.json, then
        // dataset_info.json, then the object itself (HDF5), else an RLDS
        // folder of versions (listed).
        let (lerobot, is_dir) = match robocache_storage::is_remote(path) {
            false => (path.is_dir() && LeRobotSource::detect(path, &storage)?, path.is_dir()),
            true if LeRobotSource::detect(path, &storage)? => (true, true),
            true => {
                (false, storage.is_file(&path.join(crate::rlds::builder::DATASET_INFO))? || !storage.is_file(path)?)
            }
        };
        let (source, mut info) = if lerobot {
            if let Some(format) = options.format.filter(|f| *f != Format::LeRobot) {
                return Err(Error::Invalid(format!(
                    "{}: a directory with meta/info.json is read as a LeRobot dataset, not as {format}",
                    path.display()
                )));
            }
            if options.split.is_some() || options.rate_hz.is_some() {
                return Err(Error::Invalid(format!(
                    "{}: a LeRobot dataset has its own rate (meta/info.json `fps`) and no splits to choose",
                    path.display()
                )));
            }
            let (source, info) = LeRobotSource::open(path, &storage)?;
            (Source::LeRobot(Box::new(source)), info)
        } else if is_dir {
            if let Some(format) = options.format.filter(|f| *f != Format::Rlds) {
                return Err(Error::Invalid(format!(
                    "{}: a directory is read as an RLDS builder directory, not as {format}",
                    path.display()
                )));
            }
            let (source, info) = RldsSource::open(path, options, &storage)?;
            (Source::Rlds(source), info)
        } else {
            // The HDF5 library reads files: a remote one is fetched whole
            // into the node-local cache first (once per node).
            let local = storage.local_file(path)?;
            let file = Hdf5File::open(&local)?;
            let format = match options.format {
                Some(format) => format,
                None => formats::detect(&file)?,
            };
            let info = formats::read_info(&file, format, options)?;
            let raw = match options.hdf5_reads_only {
                true => None,
                false => Some(File::open(&local).map_err(|error| Error::Io { file: local.clone(), error })?),
            };
            let source =
                Hdf5Source { file, times: Mutex::new(HashMap::new()), raw, layouts: Mutex::new(HashMap::new()) };
            (Source::Hdf5(source), info)
        };
        if robocache_storage::is_remote(path) {
            info.path = path.to_path_buf();
        }
        tracing::debug!(path = %path.display(), format = %info.format, episodes = info.episodes.len(), "opened dataset");
        Ok(Dataset { source, info, cache: StreamCache::new(options.cache_bytes), storage })
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
    pub fn format(&self) -> Format {
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

    /// [`Dataset::read_rows`] as bytes into `out`, which holds exactly
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
    /// into `out` (one row after the other, as [`Dataset::read_rows_into`]).
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
        if let Source::LeRobot(lerobot) = &self.source {
            let info = self.stream(first, stream)?.1;
            if let Some(feature) = lerobot.video_feature(info) {
                return lerobot.read_video_frames_into(feature, wanted, FrameFormat::Rgb, out);
            }
        }
        for (&(episode, row), chunk) in wanted.iter().zip(out.chunks_exact_mut(row_bytes.max(1))) {
            self.read_rows_into(episode, stream, row..row + 1, chunk)?;
        }
        Ok(())
    }

    /// `(width, height)` of the frames of `stream` when robocache decodes
    /// it from video (LeRobot `video` features); `None` for every other
    /// stream (an unknown name included).
    pub fn video_frame_size(&self, stream: &str) -> Option<(usize, usize)> {
        let Source::LeRobot(lerobot) = &self.source else { return None };
        let (_, info) = self.stream(0, stream).ok()?;
        let (height, width) = video_size(lerobot.video_feature(info)?).ok()?;
        Some((width, height))
    }

    /// Frames of the video stream `stream` at `(episode, row)` pairs, in
    /// that order, into `out`, each as `format` says: RGB `[H, W, 3]` (as
    /// [`Dataset::read_rows_at_into`] gives them) or the decoder's YUV 4:2:0
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
        match &self.source {
            Source::LeRobot(lerobot) => match lerobot.video_feature(info) {
                Some(feature) => lerobot.read_video_frames_into(feature, wanted, format, out),
                None => Err(Error::Invalid(format!("stream `{stream}` is not camera video"))),
            },
            _ => Err(Error::Invalid(format!("stream `{stream}` is not camera video (only LeRobot roots have video)"))),
        }
    }

    /// Sets the byte budget of the decoded-frame cache: camera frames
    /// decoded from video (LeRobot `video` features) are kept as the
    /// decoder's YUV 4:2:0 planes (1.5 bytes a pixel) in host memory up to this many bytes, the first ones decoded, and
    /// read from there afterwards (0, the default: none kept). Datasets
    /// without video ignore it.
    pub fn set_frame_cache_budget(&self, bytes: usize) {
        if let Source::LeRobot(lerobot) = &self.source {
            lerobot.set_frame_cache_budget(bytes);
        }
    }

    /// Where camera frames of video features are decoded: on the CPU (the
    /// default), or on a GPU's video engines (NVDEC) with the CPU beside
    /// and instead of them ([`DecoderChoice::Auto`]), or on NVDEC only.
    /// Datasets without video ignore it.
    pub fn set_video_decoders(&self, choice: DecoderChoice) {
        if let Source::LeRobot(lerobot) = &self.source {
            lerobot.set_video_decoders(choice);
        }
    }

    /// Video samples decoded since the counts were last reset, on the CPU
    /// and on NVDEC (`None` for datasets without video).
    pub fn video_decode_counts(&self) -> Option<DecodeCounts> {
        match &self.source {
            Source::LeRobot(lerobot) if lerobot.has_video() => Some(lerobot.decode_counts()),
            _ => None,
        }
    }

    /// What the decoded-frame cache holds and how often it served a frame
    /// (`None` for datasets without video).
    pub fn frame_cache_usage(&self) -> Option<FrameCacheUsage> {
        match &self.source {
            Source::LeRobot(lerobot) if lerobot.has_video() => Some(lerobot.frame_cache_usage()),
            _ => None,
        }
    }

    /// Forgets the frame cache's hit and miss counts and the video decode
    /// counts (after warm-up).
    pub fn reset_frame_cache_counts(&self) {
        if let Source::LeRobot(lerobot) = &self.source {
            lerobot.reset_decode_counts();
            lerobot.reset_frame_cache_counts();
        }
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
            Timeline::Explicit { key } => match &self.source {
                Source::Hdf5(hdf5) => hdf5.times(&self.info.episodes[episode].name, key).map(StreamTimes::Explicit),
                Source::Rlds(_) => Err(Error::Invalid(format!(
                    "stream `{stream}`: RLDS streams are on the step clock and have no explicit timestamps"
                ))),
                Source::LeRobot(lerobot) => lerobot.episode_times(episode).map(StreamTimes::Explicit),
            },
        }
    }

    /// What the low-dimensional cache holds.
    pub fn cache_usage(&self) -> CacheUsage {
        self.cache.usage()
    }

    fn read_from_source(&self, episode: usize, info: &StreamInfo, rows: Range<usize>) -> Result<HostVec> {
        match &self.source {
            Source::Hdf5(hdf5) => hdf5.read(info, rows),
            Source::Rlds(_) => self.read_into_new(episode, info, rows),
            // The metadata's length is checked against the data file before
            // room for its rows is allocated.
            Source::LeRobot(lerobot) => {
                lerobot.check_rows(episode)?;
                self.read_into_new(episode, info, rows)
            }
        }
    }

    /// Rows of a source read by bytes, into a new vector of the stream's dtype.
    fn read_into_new(&self, episode: usize, info: &StreamInfo, rows: Range<usize>) -> Result<HostVec> {
        let len = rows.len() * info.channels();
        if info.dtype == DType::Bool {
            let mut bytes = vec![0u8; len];
            self.read_source_rows_into(episode, info, rows, &mut bytes)?;
            return Ok(HostVec::Bool(bytes.into_iter().map(|b| b != 0).collect()));
        }
        let mut data = HostVec::zeros(info.dtype, len);
        let Some(bytes) = data.as_bytes_mut() else {
            return Err(Error::Invalid(format!("{} rows have no byte view", info.dtype)));
        };
        self.read_source_rows_into(episode, info, rows, bytes)?;
        Ok(data)
    }

    pub(crate) fn read_source_rows_into(
        &self,
        episode: usize,
        info: &StreamInfo,
        rows: Range<usize>,
        out: &mut [u8],
    ) -> Result<()> {
        match &self.source {
            Source::Hdf5(hdf5) => hdf5.read_into(info, rows, out),
            Source::Rlds(rlds) => rlds.read_rows_into(episode, info, rows, out),
            Source::LeRobot(lerobot) => lerobot.read_rows_into(episode, info, rows, out),
        }
    }

    /// Writes the sidecar index of an RLDS split (`robocache-index.<split>.json`)
    /// to `to`, by default beside the shards (local, or a remote store
    /// written with the same credentials), and returns where it went. Later
    /// opens of the split, on any node, read that one file instead of every
    /// record (see docs/remote.md); an index that no longer matches the
    /// shards is not used. Other formats open from their own metadata and
    /// have no index: an error.
    pub fn write_index(&self, to: Option<&Path>) -> Result<PathBuf> {
        let Source::Rlds(rlds) = &self.source else {
            return Err(Error::Invalid(format!(
                "{}: only RLDS datasets have a sidecar index ({} datasets open from their own metadata)",
                self.info.path.display(),
                self.info.format
            )));
        };
        let (beside, bytes) = rlds.index_file(&self.info);
        let path = to.map_or(beside, Path::to_path_buf);
        self.storage.write(&path, bytes)?;
        Ok(path)
    }

    /// The LeRobot dataset behind this one (`None` for other formats): its
    /// fps, tasks, dataset indices, as `LeRobotDataset` numbers them.
    pub fn lerobot(&self) -> Option<LeRobotView<'_>> {
        match &self.source {
            Source::LeRobot(source) => Some(LeRobotView { source }),
            _ => None,
        }
    }
}

impl Hdf5Source {
    /// Explicit timestamps at `key` (read once and kept).
    fn times(&self, episode: &str, key: &str) -> Result<Arc<[f64]>> {
        let mut cached = self.times.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(times) = cached.get(key) {
            return Ok(times.clone());
        }
        let times: Arc<[f64]> = read_timestamps(&self.file, episode, key)?.into();
        cached.insert(key.to_owned(), times.clone());
        Ok(times)
    }

    fn read(&self, info: &StreamInfo, rows: Range<usize>) -> Result<HostVec> {
        if let Some((layout, raw)) = self.row_layout(info) {
            if rows.end <= layout.rows() {
                return layout.read(raw, info.dtype, rows.clone()).map_err(|e| self.io_error(info, &rows, e));
            }
        }
        self.read_rows_through_hdf5(info, rows)
    }

    fn read_into(&self, info: &StreamInfo, rows: Range<usize>, out: &mut [u8]) -> Result<()> {
        if let Some((layout, raw)) = self.row_layout(info) {
            if rows.end <= layout.rows() {
                return layout.read_into(raw, rows.clone(), out).map_err(|e| self.io_error(info, &rows, e));
            }
        }
        let read = self.read_rows_through_hdf5(info, rows)?;
        out.copy_from_slice(read.as_slice().as_bytes());
        Ok(())
    }

    fn io_error(&self, info: &StreamInfo, rows: &Range<usize>, error: std::io::Error) -> Error {
        let error =
            std::io::Error::new(error.kind(), format!("`{}` rows {}..{}: {error}", info.source, rows.start, rows.end));
        Error::Io { file: self.file.path().to_path_buf(), error }
    }

    fn read_rows_through_hdf5(&self, info: &StreamInfo, rows: Range<usize>) -> Result<HostVec> {
        let dataset = self.file.dataset(&info.source)?;
        let data = self.file.read_rows(&dataset, &info.source, info.dtype, rows.clone())?;
        let expected = rows.len() * info.channels();
        if data.len() != expected {
            return Err(self.file.layout_error(
                &info.source,
                format!("read {} elements for rows {}..{}, expected {expected}", data.len(), rows.start, rows.end),
            ));
        }
        Ok(data)
    }

    /// Where the rows of `info`'s dataset lie (found once per dataset) and
    /// the file to read them from; `None` when HDF5 must read it. A layout
    /// is used only after its first and last rows read directly equal what
    /// HDF5 reads.
    fn row_layout(&self, info: &StreamInfo) -> Option<(Arc<RowLayout>, &File)> {
        let raw = self.raw.as_ref()?;
        let mut layouts = self.layouts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(layout) = layouts.get(&info.source) {
            return layout.clone().map(|layout| (layout, raw));
        }
        let layout = self
            .file
            .dataset(&info.source)
            .ok()
            .and_then(|dataset| RowLayout::of(&dataset, info.dtype, info.step_bytes()))
            .filter(|layout| {
                let last = layout.rows().min(info.len).saturating_sub(1);
                [0..1, last..last + 1].into_iter().all(|rows| {
                    let direct = layout.read(raw, info.dtype, rows.clone());
                    let library = self.read_rows_through_hdf5(info, rows);
                    matches!((direct, library), (Ok(d), Ok(l)) if d.as_slice().as_bytes() == l.as_slice().as_bytes())
                })
            })
            .map(Arc::new);
        tracing::trace!(source = %info.source, direct = layout.is_some(), "row layout");
        layouts.insert(info.source.clone(), layout.clone());
        layout.map(|layout| (layout, raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datasets_are_shared_between_reader_threads() {
        fn send_and_sync<T: Send + Sync>() {}
        send_and_sync::<Dataset>();
    }

    #[test]
    fn uniform_and_explicit_rows_covering_agree() {
        let uniform = StreamTimes::Uniform { start: 0.5, hz: 10.0, len: 20 };
        let explicit = StreamTimes::Explicit((0..20).map(|i| 0.5 + i as f64 / 10.0).collect::<Vec<_>>().into());
        for (from, to) in [(0.0, 0.2), (0.5, 0.5), (0.55, 0.95), (1.0, 3.0), (2.4, 2.4), (5.0, 6.0), (0.61, 0.61)] {
            assert_eq!(uniform.rows_covering(from, to), explicit.rows_covering(from, to), "{from}..{to}");
        }
        assert_eq!(uniform.rows_covering(0.55, 0.95), 0..6);
        assert_eq!(uniform.span(), (0.5, 0.5 + 19.0 / 10.0));
    }
}

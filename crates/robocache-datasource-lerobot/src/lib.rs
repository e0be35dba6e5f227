//! LeRobot datasets as the Hugging Face Hub publishes them (codebase v3.0,
//! and v2.1), read without Python (docs/datasets.md):
//!
//! - opening reads `meta/` only: `info.json` (fps, features, path
//!   templates), the episodes (their rows, tasks and, per camera, the video
//!   file and the `from_timestamp` of their frames in it), the tasks;
//! - rows are read per data file and column, the first time a window needs
//!   them: low-dimensional columns are kept (they are small), image
//!   columns (PNG/JPEG bytes in the parquet) for the few files read last,
//!   decoded per row as PIL decodes them (PNG is lossless: the same pixels);
//! - every feature is a stream of the episode on the step clock of the
//!   `timestamp` column (explicit times), named as LeRobot names it
//!   (`observation.state`, `action`, `observation.images.top`), including
//!   LeRobot's own columns (`timestamp`, `frame_index`, `index`,
//!   `task_index`, `episode_index`; only `timestamp` and `episode_index`
//!   are required: GR00T's v2.0 roots have no `frame_index`);
//! - `video` features are streams of RGB frames (`u8 [H, W, 3]`), decoded
//!   from the MP4 files under `videos/` (robocache-video): the frame of a
//!   row is the one LeRobot's decode picks for the row's time; frames read
//!   together (a batch's windows) share the decoding of their groups of
//!   pictures, and decoded frames are kept in a [`FrameCache`] within its
//!   budget (`DatasetReader::set_frame_cache_budget`).
//!
//! A format family of the format layer (`robocache-datasource`), with
//! LeRobot's writer ([`LeRobotWriter`]):
//!
//! ```no_run
//! use robocache_datasource::format_reader::FormatKind;
//! use robocache_datasource::{DatasetReader, ReaderOptions};
//! use robocache_datasource_lerobot::{LeRobotKind, LeRobotView};
//!
//! let kinds: Vec<Box<dyn FormatKind>> = vec![Box::new(LeRobotKind::new())];
//! let aloha = DatasetReader::open("/data/lerobot/aloha_sim_insertion_human".as_ref(), &kinds, &ReaderOptions::default())?;
//! let fps = LeRobotView::of(&aloha).map(|view| view.fps());
//! let frame = aloha.read_rows(0, "observation.images.top", 0..1)?; // decoded from its MP4
//! # Ok::<(), robocache_datasource::Error>(())
//! ```

pub(crate) mod columns;
mod format;
mod frames;
pub(crate) mod meta;
mod modality;
pub use format::LeRobotKind;
pub use format::LeRobotView;
use open_videos::OpenVideos;
pub use open_videos::MAX_OPEN_VIDEOS;
mod open_videos;
mod parquet_blob;
mod parquet_thrift;
mod video_blob;
mod writer;
pub use writer::{CameraStorage, FeatureToWrite, LeRobotWriter, LeRobotWritten, DATA_FILE_BYTES, VIDEO_FILE_BYTES};

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use robocache_cpu::DType;
use robocache_storage::Storage;
use robocache_video::{DecodeCounts, DecoderChoice, FrameCache};
use serde_json::{json, Map, Value};

use self::columns::{read_column, read_f64, read_i64, ColumnData, Expect};
use self::meta::{EpisodeMeta, Feature, Info, Version, INFO};
use robocache_datasource::image_decode::decode_image;
use robocache_datasource::model::{
    ChannelKind, DatasetInfo, EpisodeInfo, FormatName, StreamInfo, StreamKind, Timeline,
};
use robocache_datasource::stream_shape::StreamShape;
use robocache_datasource::{Error, Result};

/// LeRobot dataset roots (codebase v3.0 or v2.1).
pub const LEROBOT: FormatName = FormatName::new("lerobot");

/// LeRobot's own per-frame columns (features of the datasets it writes).
pub const DEFAULT_COLUMNS: [&str; 5] = ["timestamp", "frame_index", "episode_index", "index", "task_index"];
/// Those a root must have: the rows' times, and their episode.
const REQUIRED_COLUMNS: [&str; 2] = ["timestamp", "episode_index"];

/// Image columns kept (as encoded bytes) for this many files at a time.
const ENCODED_FILES_KEPT: usize = 4;

/// How far a decoded frame's time may be from the time asked for:
/// `LeRobotDataset`'s default `tolerance_s`.
pub const VIDEO_TOLERANCE_S: f64 = 1e-4;

/// How a feature's values are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeatureStorage {
    /// A parquet column of numbers.
    Values,
    /// A parquet column of PNG/JPEG bytes (`image` features).
    Image,
    /// MP4 files under `videos/` (`video` features).
    Video,
}

/// One feature as LeRobot declares it.
#[derive(Clone, Debug)]
pub struct LeRobotFeature {
    pub name: String,
    pub dtype: DType,
    /// The shape of one frame as `info.json` gives it.
    pub shape: Vec<usize>,
    pub storage: FeatureStorage,
}

/// Where an episode's rows are in its data file.
#[derive(Debug)]
struct EpisodeRows {
    file: PathBuf,
    /// The data file's number ([`LeRobotSource::episode_file`]).
    file_index: usize,
    rows: Range<usize>,
}

/// Each episode's rows in one data file, by LeRobot `episode_index`.
type FileRows = HashMap<usize, Range<usize>>;
/// A whole column of a data file: (file, column).
type ColumnKey = (PathBuf, String);

/// `(height, width)` of a video feature's frames, from its `[H, W, 3]` shape.
pub(crate) fn video_size(feature: &LeRobotFeature) -> Result<(usize, usize)> {
    match feature.shape[..] {
        [height, width, 3] => Ok((height, width)),
        _ => Err(Error::Invalid(format!(
            "video feature `{}` has shape {:?}; RGB frames are [height, width, 3]",
            feature.name, feature.shape
        ))),
    }
}

/// An open LeRobot root.
#[derive(Debug)]
pub(crate) struct LeRobotSource {
    root: PathBuf,
    version: Version,
    fps: f64,
    /// Where the root's files are read from (local, or a remote store through the cache).
    storage: Storage,
    features: Vec<LeRobotFeature>,
    episodes: Vec<EpisodeMeta>,
    tasks: Vec<String>,
    /// Per data file: each episode's rows in it (from its `episode_index` column).
    file_rows: Mutex<HashMap<PathBuf, Arc<FileRows>>>,
    /// Each episode's data file, numbered in the order episodes first name them.
    episode_file: Vec<usize>,
    /// Each episode's rows, once found. Batches read them for every window
    /// from every loader thread: a set cell is read without a lock.
    located: Vec<OnceLock<EpisodeRows>>,
    /// Whole low-dimensional columns, per data file and feature
    /// (`file * features + feature`), once read; read without a lock.
    values: Vec<OnceLock<Arc<ColumnData>>>,
    /// The last image columns read, by (file, column).
    encoded: Mutex<VecDeque<(ColumnKey, Arc<ColumnData>)>>,
    /// Each episode's `timestamp` column, once read.
    times: Mutex<HashMap<usize, Arc<[f64]>>>,
    /// Open video files (sample tables read once), each with the number
    /// its frames have in `frames`.
    videos: Mutex<OpenVideos>,
    /// Decoded frames (YUV 4:2:0, as decoded) kept for later reads (empty
    /// budget by default).
    frames: FrameCache,
    /// Where frames the cache lacks are decoded.
    decoders: Mutex<DecoderChoice>,
    /// Samples decoded since the counts were last reset, by where.
    decoded: Mutex<DecodeCounts>,
}

fn dtype_of(name: &str, feature: &Feature, info_path: &Path) -> Result<Option<(DType, FeatureStorage)>> {
    Ok(Some(match feature.dtype.as_str() {
        "float32" => (DType::F32, FeatureStorage::Values),
        "float64" => (DType::F64, FeatureStorage::Values),
        "float16" => (DType::F16, FeatureStorage::Values),
        "int64" => (DType::I64, FeatureStorage::Values),
        "int32" => (DType::I32, FeatureStorage::Values),
        "int16" => (DType::I16, FeatureStorage::Values),
        "int8" => (DType::I8, FeatureStorage::Values),
        "uint8" => (DType::U8, FeatureStorage::Values),
        "uint16" => (DType::U16, FeatureStorage::Values),
        "uint32" => (DType::U32, FeatureStorage::Values),
        "uint64" => (DType::U64, FeatureStorage::Values),
        "bool" => (DType::Bool, FeatureStorage::Values),
        "image" => (DType::U8, FeatureStorage::Image),
        "video" => (DType::U8, FeatureStorage::Video),
        "string" | "language" => return Ok(None),
        other => {
            return Err(Error::Layout {
                file: info_path.to_path_buf(),
                path: format!("features/{name}/dtype"),
                problem: format!(
                    "`{other}` is not a dtype robocache reads (float32/64, int*, uint*, bool, image, video, string)"
                ),
            })
        }
    }))
}

impl LeRobotSource {
    /// True when `dir` looks like a LeRobot root (`meta/info.json`).
    pub fn detect(dir: &Path, storage: &Storage) -> Result<bool> {
        Ok(storage.is_file(&dir.join(INFO))?)
    }

    pub fn open(root: &Path, storage: &Storage) -> Result<(LeRobotSource, DatasetInfo)> {
        let (info, version, raw_features, raw) = Info::read(root, storage)?;
        let info_path = root.join(INFO);
        let mut features = Vec::new();
        for (name, feature) in &raw_features {
            let Some((dtype, storage)) = dtype_of(name, feature, &info_path)? else {
                tracing::debug!(feature = %name, "text feature left out of the streams");
                continue;
            };
            if storage != FeatureStorage::Values && feature.shape.len() != 3 {
                return Err(Error::Layout {
                    file: info_path.clone(),
                    path: format!("features/{name}/shape"),
                    problem: format!("is {:?}; a camera feature is [height, width, channels]", feature.shape),
                });
            }
            robocache_datasource::model::row_values(&feature.shape).map_err(|problem| Error::Layout {
                file: info_path.clone(),
                path: format!("features/{name}/shape"),
                problem,
            })?;
            features.push(LeRobotFeature { name: name.clone(), dtype, shape: feature.shape.clone(), storage });
        }
        // GR00T's flavour: video features its modality file does not name are left out.
        let mut ignored = Map::new();
        if let Some(named) = modality::named_videos(storage, root)? {
            features.retain(|f: &LeRobotFeature| {
                let keep = f.storage != FeatureStorage::Video || named.contains(&f.name);
                if !keep {
                    ignored.insert(f.name.clone(), json!(modality::NOT_NAMED));
                }
                keep
            });
        }
        // What the reader needs of LeRobot's own columns; the others are
        // streams where there (GR00T's v2.0 roots have no `frame_index`).
        for column in REQUIRED_COLUMNS {
            if !features.iter().any(|f| f.name == column) {
                return Err(Error::Missing {
                    file: info_path.clone(),
                    what: "feature",
                    path: format!("features/{column}"),
                });
            }
        }
        let video_keys: Vec<String> =
            features.iter().filter(|f| f.storage == FeatureStorage::Video).map(|f| f.name.clone()).collect();
        let episodes = match version {
            Version::V30 => meta::episodes_v30(storage, root, &info, &video_keys)?,
            Version::V21 => meta::episodes_v21(storage, root, &info, &video_keys)?,
        };
        if episodes.is_empty() {
            return Err(Error::Layout {
                file: root.join("meta"),
                path: "episodes".into(),
                problem: "lists no episodes".into(),
            });
        }
        for episode in &episodes {
            if episode.length == 0 {
                return Err(Error::EmptyEpisode {
                    file: root.join("meta"),
                    episode: format!("episode_{}", episode.index),
                });
            }
        }
        let tasks = meta::tasks(storage, root, version)?;
        let mut numbers: HashMap<&Path, usize> = HashMap::new();
        let episode_file: Vec<usize> = episodes
            .iter()
            .map(|episode| {
                let next = numbers.len();
                *numbers.entry(&episode.data_file).or_insert(next)
            })
            .collect();
        let values = std::iter::repeat_with(OnceLock::new).take(numbers.len() * features.len()).collect();
        let located = std::iter::repeat_with(OnceLock::new).take(episodes.len()).collect();
        let source = LeRobotSource {
            root: root.to_path_buf(),
            storage: storage.clone(),
            version,
            fps: info.fps,
            features,
            episodes,
            tasks,
            file_rows: Mutex::new(HashMap::new()),
            episode_file,
            located,
            values,
            encoded: Mutex::new(VecDeque::new()),
            videos: Mutex::new(OpenVideos::default()),
            frames: FrameCache::new(0),
            decoders: Mutex::new(DecoderChoice::Cpu),
            decoded: Mutex::new(DecodeCounts::default()),
            times: Mutex::new(HashMap::new()),
        };
        let mut dataset_info = source.dataset_info(&info, &raw);
        if !ignored.is_empty() {
            dataset_info.metadata.insert("ignored".into(), Value::Object(ignored));
        }
        Ok((source, dataset_info))
    }

    fn dataset_info(&self, info: &Info, raw: &Value) -> DatasetInfo {
        let mut episodes = Vec::with_capacity(self.episodes.len());
        for episode in &self.episodes {
            let streams = self
                .features
                .iter()
                .map(|feature| {
                    let kind = match feature.storage {
                        FeatureStorage::Image | FeatureStorage::Video => StreamKind::All(ChannelKind::Image),
                        FeatureStorage::Values if !feature.dtype.is_float() => StreamKind::All(ChannelKind::Discrete),
                        FeatureStorage::Values => {
                            StreamShape { key: &feature.name, dtype: feature.dtype, step_shape: &feature.shape }
                                .common_kind()
                        }
                    };
                    StreamInfo {
                        name: feature.name.clone(),
                        dtype: feature.dtype,
                        step_shape: feature.shape.clone(),
                        len: episode.length,
                        kind,
                        timeline: Timeline::Explicit { key: "timestamp".into() },
                        source: feature.name.clone(),
                    }
                })
                .collect();
            let mut metadata = Map::new();
            metadata.insert("episode_index".into(), json!(episode.index));
            metadata.insert("tasks".into(), json!(episode.tasks));
            metadata.insert("data_file".into(), json!(self.relative(&episode.data_file)));
            if let Some(from) = episode.dataset_from_index {
                metadata.insert("dataset_from_index".into(), json!(from));
            }
            for (key, span) in &episode.videos {
                metadata.insert(
                    format!("videos/{key}"),
                    json!({"file": self.relative(&span.file), "from_timestamp": span.from_timestamp, "to_timestamp": span.to_timestamp}),
                );
            }
            episodes.push(EpisodeInfo {
                name: format!("episode_{}", episode.index),
                len: episode.length,
                duration_s: episode.length.saturating_sub(1) as f64 / self.fps,
                streams,
                instruction: episode.tasks.first().cloned(),
                metadata,
            });
        }
        let mut metadata = Map::new();
        metadata.insert("codebase_version".into(), json!(info.codebase_version));
        metadata.insert("fps".into(), json!(self.fps));
        metadata.insert("robot_type".into(), json!(info.robot_type));
        metadata.insert("tasks".into(), json!(self.tasks));
        let keys = |storage| -> Vec<&str> {
            self.features.iter().filter(|f| f.storage == storage).map(|f| f.name.as_str()).collect()
        };
        metadata.insert("video_keys".into(), json!(keys(FeatureStorage::Video)));
        metadata.insert("image_keys".into(), json!(keys(FeatureStorage::Image)));
        if let Some(features) = raw.get("features") {
            let names: Map<String, Value> = features
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| v.get("names").map(|n| (k.clone(), n.clone())))
                .collect();
            metadata.insert("feature_names".into(), Value::Object(names));
        }
        for key in ["total_episodes", "total_frames"] {
            if let Some(value) = raw.get(key) {
                metadata.insert(key.into(), value.clone());
            }
        }
        DatasetInfo {
            path: self.root.clone(),
            format: LEROBOT,
            rate_hz: self.fps,
            episodes,
            splits: Vec::new(),
            metadata,
        }
    }

    fn relative(&self, path: &Path) -> String {
        path.strip_prefix(&self.root).unwrap_or(path).display().to_string()
    }

    /// The dataset's frame rate.
    pub fn fps(&self) -> f64 {
        self.fps
    }

    /// Task texts by `task_index`.
    pub fn tasks(&self) -> &[String] {
        &self.tasks
    }

    /// The feature called `name`.
    pub fn feature_named(&self, name: &str) -> Option<&LeRobotFeature> {
        self.features.iter().find(|f| f.name == name)
    }

    /// The dataset `index` of the first frame of `episode` (v2.1: the sum of
    /// the lengths before it, as LeRobot numbered them).
    pub fn first_index(&self, episode: usize) -> usize {
        let meta = &self.episodes[episode];
        meta.dataset_from_index.unwrap_or_else(|| self.episodes[..episode].iter().map(|e| e.length).sum())
    }

    /// The LeRobot `episode_index` of the episode at `episode`.
    pub fn episode_index(&self, episode: usize) -> usize {
        self.episodes[episode].index
    }

    /// Checks that `episode`'s data file holds the rows its metadata
    /// claims, before a reader allocates room for them: a length in the
    /// metadata is not trusted with memory (read once per file, then cached).
    pub(crate) fn check_rows(&self, episode: usize) -> Result<()> {
        self.episode_rows(episode).map(|_| ())
    }

    /// The rows of `episode` in its data file, found from the file's
    /// `episode_index` column (read once per file) and checked against the
    /// episode's length.
    fn episode_rows(&self, episode: usize) -> Result<&EpisodeRows> {
        let cell = self.located.get(episode).ok_or_else(|| Error::Invalid(format!("no episode {episode}")))?;
        if let Some(found) = cell.get() {
            return Ok(found);
        }
        let found = self.find_episode_rows(episode)?;
        Ok(cell.get_or_init(|| found))
    }

    fn find_episode_rows(&self, episode: usize) -> Result<EpisodeRows> {
        let meta = &self.episodes[episode];
        let file = meta.data_file.clone();
        let map = {
            let cached = self.file_rows.lock().unwrap_or_else(|p| p.into_inner()).get(&file).cloned();
            match cached {
                Some(map) => map,
                None => {
                    if !self.storage.is_file(&file)? {
                        return Err(Error::Missing {
                            file: self.root.clone(),
                            what: "data file",
                            path: format!("{} (episode {})", self.relative(&file), meta.index),
                        });
                    }
                    let indices = read_i64(&self.storage, &file, "episode_index")?;
                    let mut map = FileRows::new();
                    for (row, &index) in indices.iter().enumerate() {
                        // A negative index is an error, never episode 0's rows.
                        let index = usize::try_from(index).map_err(|_| Error::Layout {
                            file: file.clone(),
                            path: "episode_index".into(),
                            problem: format!("row {row} is {index}, not an episode index"),
                        })?;
                        let entry = map.entry(index).or_insert(row..row);
                        if entry.end != row {
                            return Err(Error::Layout {
                                file: file.clone(),
                                path: "episode_index".into(),
                                problem: format!("episode {index}'s rows are not contiguous (row {row})"),
                            });
                        }
                        entry.end = row + 1;
                    }
                    let map = Arc::new(map);
                    self.file_rows.lock().unwrap_or_else(|p| p.into_inner()).insert(file.clone(), map.clone());
                    map
                }
            }
        };
        let rows = map.get(&meta.index).cloned().ok_or_else(|| Error::Layout {
            file: file.clone(),
            path: "episode_index".into(),
            problem: format!("holds no rows of episode {} (meta/ says they are in this file)", meta.index),
        })?;
        if rows.len() != meta.length {
            return Err(Error::Layout {
                file,
                path: "episode_index".into(),
                problem: format!("holds {} rows of episode {}, meta/ says {}", rows.len(), meta.index, meta.length),
            });
        }
        Ok(EpisodeRows { file, file_index: self.episode_file[episode], rows })
    }

    /// The `video` feature behind `stream`, if it is one.
    pub fn video_feature(&self, stream: &StreamInfo) -> Option<&LeRobotFeature> {
        self.features.iter().find(|f| f.name == stream.source && f.storage == FeatureStorage::Video)
    }

    /// True when a feature is stored as video.
    pub fn has_video(&self) -> bool {
        self.features.iter().any(|f| f.storage == FeatureStorage::Video)
    }

    fn feature(&self, stream: &StreamInfo) -> Result<&LeRobotFeature> {
        self.features.iter().find(|f| f.name == stream.source).ok_or_else(|| Error::UnknownStream {
            stream: stream.source.clone(),
            scope: self.root.display().to_string(),
            available: self.features.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// A whole column of a data file, kept after its first read.
    fn column(&self, located: &EpisodeRows, feature: &LeRobotFeature) -> Result<Arc<ColumnData>> {
        let file = &located.file;
        match feature.storage {
            FeatureStorage::Values => {
                let at = self.features.iter().position(|f| f.name == feature.name).unwrap_or(0);
                let cell = self
                    .values
                    .get(located.file_index * self.features.len() + at)
                    .ok_or_else(|| Error::Invalid(format!("no column `{}` of {}", feature.name, file.display())))?;
                if let Some(column) = cell.get() {
                    return Ok(column.clone());
                }
                let channels = feature.shape.iter().product();
                let column = Arc::new(read_column(
                    &self.storage,
                    file,
                    &feature.name,
                    Expect::Values { dtype: feature.dtype, channels },
                )?);
                Ok(cell.get_or_init(|| column).clone())
            }
            FeatureStorage::Image => {
                let key = (file.to_path_buf(), feature.name.clone());
                {
                    let kept = self.encoded.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some((_, column)) = kept.iter().find(|(k, _)| *k == key) {
                        return Ok(column.clone());
                    }
                }
                let column = Arc::new(read_column(&self.storage, file, &feature.name, Expect::Encoded)?);
                let mut kept = self.encoded.lock().unwrap_or_else(|p| p.into_inner());
                kept.push_back((key, column.clone()));
                while kept.len() > ENCODED_FILES_KEPT {
                    kept.pop_front();
                }
                Ok(column)
            }
            FeatureStorage::Video => {
                Err(Error::Invalid(format!("`{}` is a video feature, not a column", feature.name)))
            }
        }
    }

    /// Rows `rows` of `stream` of `episode` into `out`.
    pub fn read_rows_into(
        &self,
        episode: usize,
        stream: &StreamInfo,
        rows: Range<usize>,
        out: &mut [u8],
    ) -> Result<()> {
        let feature = self.feature(stream)?;
        if feature.storage == FeatureStorage::Video {
            return self.read_frames_into(episode, feature, rows, out);
        }
        let located = self.episode_rows(episode)?;
        let column = self.column(located, feature)?;
        let first = located.rows.start + rows.start;
        let last = located.rows.start + rows.end;
        if last > column.rows() {
            return Err(Error::Layout {
                file: located.file.clone(),
                path: feature.name.clone(),
                problem: format!(
                    "has {} rows, episode {} needs rows up to {last}",
                    column.rows(),
                    self.episodes[episode].index
                ),
            });
        }
        match &*column {
            ColumnData::Values { bytes, .. } => {
                let row_bytes = stream.step_bytes();
                out.copy_from_slice(&bytes[first * row_bytes..last * row_bytes]);
            }
            ColumnData::Encoded(images) => {
                let row_bytes = stream.step_bytes();
                for (i, chunk) in out.chunks_exact_mut(row_bytes.max(1)).enumerate() {
                    let row = first + i;
                    decode_image(&images[row], DType::U8, &feature.shape, chunk).map_err(|problem| Error::Decode {
                        file: located.file.clone(),
                        episode: format!("episode_{}", self.episodes[episode].index),
                        key: feature.name.clone(),
                        step: rows.start + i,
                        problem,
                    })?;
                }
            }
        }
        Ok(())
    }

    /// The `timestamp` column of `episode`, as `f64`, checked to increase.
    /// Computed once per episode and kept.
    pub fn episode_times(&self, episode: usize) -> Result<Arc<[f64]>> {
        if let Some(times) = self.times.lock().unwrap_or_else(|p| p.into_inner()).get(&episode) {
            return Ok(times.clone());
        }
        let located = self.episode_rows(episode)?;
        let feature = self.feature_named("timestamp").ok_or_else(|| Error::Missing {
            file: self.root.join(INFO),
            what: "feature",
            path: "features/timestamp".into(),
        })?;
        let rows = located.rows.clone();
        let short = |have: usize| Error::Layout {
            file: located.file.clone(),
            path: "timestamp".into(),
            problem: format!("has {have} rows, fewer than episode {}'s", self.episodes[episode].index),
        };
        let times: Vec<f64> = match (&*self.column(located, feature)?, feature.dtype) {
            (ColumnData::Values { bytes, .. }, DType::F32) => bytes
                .get(rows.start * 4..rows.end * 4)
                .ok_or_else(|| short(bytes.len() / 4))?
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
                .collect(),
            (ColumnData::Values { bytes, .. }, DType::F64) => bytes
                .get(rows.start * 8..rows.end * 8)
                .ok_or_else(|| short(bytes.len() / 8))?
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect(),
            _ => {
                let all = read_f64(&self.storage, &located.file, "timestamp")?;
                all.get(rows.clone()).ok_or_else(|| short(all.len()))?.to_vec()
            }
        };
        let mut previous = f64::NEG_INFINITY;
        for (row, &value) in times.iter().enumerate() {
            if !value.is_finite() || value <= previous {
                return Err(Error::NonMonotonic {
                    file: located.file.clone(),
                    episode: format!("episode_{}", self.episodes[episode].index),
                    key: "timestamp".into(),
                    row,
                    previous,
                    value,
                });
            }
            previous = value;
        }
        let times: Arc<[f64]> = times.into();
        self.times.lock().unwrap_or_else(|p| p.into_inner()).insert(episode, times.clone());
        Ok(times)
    }

    /// The codebase version, as `info.json` spells it.
    pub fn version_name(&self) -> &'static str {
        match self.version {
            Version::V21 => "v2.1",
            Version::V30 => "v3.0",
        }
    }
}

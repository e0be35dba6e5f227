//! Writing a LeRobot dataset root (codebase v3.0), as LeRobot 0.6 writes
//! one: what `LeRobotDataset(repo_id, root=...)` loads.
//!
//! ```text
//! meta/info.json                              features, fps, counts, path templates
//! meta/stats.json                             per feature: min, max, mean, std, count, q01 q10 q50 q90 q99
//! meta/tasks.parquet                          task_index, task (pandas index `task`)
//! meta/episodes/chunk-000/file-000.parquet    per episode: tasks, length, its rows, stats/<feature>/<stat>
//! data/chunk-000/file-NNN.parquet             the frames: one column per feature, then timestamp,
//!                                             frame_index, episode_index, index, task_index
//! videos/<key>/chunk-CCC/file-FFF.mp4         `video` features: H.264, episodes one after another
//! ```
//!
//! Features are 1-D vectors (a `fixed_size_list` column), scalars (shape
//! `[1]`, a plain column) or camera frames (`u8 [H, W, 3]`), stored as
//! [`CameraStorage`] says:
//! - `video` features: MP4 files of H.264 (robocache-video's OpenH264
//!   encoder, constant quantiser 26, an IDR every `key_frame_every` frames,
//!   BT.601 limited range as LeRobot's own encodes). Each episode's frames
//!   follow the previous episode's in its camera's file (the episode's
//!   `videos/<key>/from_timestamp` and `to_timestamp` say where); a file
//!   rolls over once past [`VIDEO_FILE_BYTES`], to the next `file-FFF`
//!   (`chunk-CCC` after 1,000 files). Frame `k` of a file is shown at
//!   `k / fps` exactly where `1000 · fps` is a whole number (time scale
//!   `1000 · fps`), else within half a tick of 1/90,000 s.
//! - `image` features: each frame a PNG in the data files, a
//!   `struct<bytes, path>` column: lossless, several times larger.
//!
//! Data files roll over past [`DATA_FILE_BYTES`]. Statistics are exact over the frames written (images:
//! per channel, in [0, 1], as `[3][1][1]`, from a histogram of the 256
//! levels); quantiles interpolate linearly between order statistics, as
//! NumPy's default does; `count` is the frames, as LeRobot counts them.

use rayon::prelude::*;
use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, StringBuilder};
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{
    Array as _, ArrayRef, BooleanArray, FixedSizeListArray, Float32Array, Float64Array, Int64Array, ListArray,
    RecordBatch, StringArray, StructArray,
};
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use robocache_cpu::{DType, HostVec};
use robocache_video::H264Encoder;
use serde_json::{json, Value};

use robocache_datasource::{Error, Result};

mod statistics;
mod video;

use self::statistics::{add_levels, frame_levels, nested_image_stats, Values};
use self::video::{VideoPlace, VideoTrack};

/// Bytes of a data file before the next one starts (LeRobot's default, 100 MB).
pub const DATA_FILE_BYTES: usize = 100 * 1000 * 1000;
/// Bytes of a video file before the next one starts (LeRobot's default, 200 MB).
pub const VIDEO_FILE_BYTES: u64 = 200 * 1000 * 1000;
/// Files of a chunk directory (LeRobot's `chunks_size`).
const FILES_PER_CHUNK: usize = 1000;

/// How camera frames (`u8 [H, W, 3]` features) are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CameraStorage {
    /// `image` features: PNG frames in the data files (lossless).
    Image,
    /// `video` features: H.264 MP4 files, a key frame (IDR) every
    /// `key_frame_every` frames (LeRobot encodes with 2: a random read
    /// decodes at most one frame before the one it wants). Frames of odd
    /// width or height, or larger than 3840×2160, are an error that says so.
    Video { key_frame_every: u32 },
}

impl Default for CameraStorage {
    /// `video`, a key frame every 2 frames (LeRobot's default layout).
    fn default() -> Self {
        CameraStorage::Video { key_frame_every: 2 }
    }
}

/// One feature of the dataset to write.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureToWrite {
    /// The key (`observation.state`, `observation.images.wrist`).
    pub name: String,
    /// `f32`, `f64`, `i64`, `bool`; `u8` for camera frames.
    pub dtype: DType,
    /// `[n]` for vectors and scalars (`[1]`), `[H, W, 3]` for camera frames.
    pub shape: Vec<usize>,
    /// Names of a vector's entries (`["j1", "j2"]`), where known.
    pub names: Option<Vec<String>>,
}

impl FeatureToWrite {
    fn is_image(&self) -> bool {
        self.dtype == DType::U8 && self.shape.len() == 3 && self.shape[2] == 3
    }

    fn width(&self) -> usize {
        self.shape.iter().product()
    }

    fn dtype_name(&self) -> Result<&'static str> {
        if self.is_image() {
            return Ok("image");
        }
        Ok(match self.dtype {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I64 => "int64",
            DType::Bool => "bool",
            other => return Err(Error::Invalid(format!("feature `{}`: LeRobot stores no {other} feature", self.name))),
        })
    }
}

/// What [`LeRobotWriter::finish`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeRobotWritten {
    pub root: PathBuf,
    pub episodes: usize,
    pub frames: usize,
    pub data_files: usize,
}

struct EpisodeRecord {
    task_index: usize,
    length: usize,
    from: usize,
    file_index: usize,
    stats: Vec<Values>,
    /// Per feature, where a `video` feature's frames are.
    videos: Vec<Option<VideoPlace>>,
}

/// Writes a LeRobot v3.0 root episode by episode (see the module docs).
pub struct LeRobotWriter {
    root: PathBuf,
    fps: f64,
    features: Vec<FeatureToWrite>,
    robot_type: Option<String>,
    tasks: Vec<String>,
    episodes: Vec<EpisodeRecord>,
    all: Vec<Values>,
    data: Option<(ArrowWriter<File>, usize)>,
    data_files: usize,
    frames: usize,
    /// The data files' schema (the features', then LeRobot's own columns).
    schema: Arc<Schema>,
    cameras: CameraStorage,
    /// Per feature: its video files, for a `video` feature.
    videos: Vec<Option<VideoTrack>>,
    /// Bytes of a video file before the next one starts.
    video_file_bytes: u64,
}

impl std::fmt::Debug for LeRobotWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeRobotWriter")
            .field("root", &self.root)
            .field("fps", &self.fps)
            .field("features", &self.features)
            .field("episodes", &self.episodes.len())
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

fn io(file: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |error| Error::Io { file: file.to_path_buf(), error }
}

fn parquet_error(file: &Path) -> impl FnOnce(parquet::errors::ParquetError) -> Error + '_ {
    move |e| Error::Invalid(format!("{}: writing parquet: {e}", file.display()))
}

fn arrow_error(e: arrow_schema::ArrowError) -> Error {
    Error::Invalid(format!("building a LeRobot column: {e}"))
}

impl LeRobotWriter {
    /// Starts a root at `root` (a directory that does not exist or is
    /// empty), camera frames stored as `cameras` says.
    pub fn create(
        root: &Path,
        fps: f64,
        features: Vec<FeatureToWrite>,
        robot_type: Option<String>,
        cameras: CameraStorage,
    ) -> Result<Self> {
        if !(fps.is_finite() && fps > 0.0) {
            return Err(Error::Invalid(format!("fps {fps} is not a positive rate")));
        }
        if root.exists() && std::fs::read_dir(root).map_err(io(root))?.next().is_some() {
            return Err(Error::Invalid(format!(
                "{}: exists and is not empty; a LeRobot root is written into a new directory",
                root.display()
            )));
        }
        for feature in &features {
            check_feature_name(&feature.name)?;
            feature.dtype_name()?;
            if feature.width() == 0 {
                return Err(Error::Invalid(format!("feature `{}` has no values", feature.name)));
            }
        }
        if let CameraStorage::Video { key_frame_every } = cameras {
            if key_frame_every == 0 {
                return Err(Error::Invalid("a key frame every 0 frames".into()));
            }
            for feature in features.iter().filter(|f| f.is_image()) {
                // The encoder's own check, before any episode is read.
                H264Encoder::new(feature.shape[1], feature.shape[0], fps, key_frame_every).map_err(|e| {
                    Error::Invalid(format!(
                        "camera `{}` as a video feature: {e} (store it as an image feature instead)",
                        feature.name
                    ))
                })?;
            }
        }
        let all = features.iter().map(|_| Values::default()).collect();
        let videos = features
            .iter()
            .map(|f| {
                (f.is_image() && cameras != CameraStorage::Image).then_some(VideoTrack {
                    writer: None,
                    next_file: 0,
                    slices: None,
                    last_idr: None,
                })
            })
            .collect();
        let in_data: Vec<FeatureToWrite> =
            features.iter().filter(|f| !(f.is_image() && cameras != CameraStorage::Image)).cloned().collect();
        let schema = data_schema(&in_data);
        Ok(LeRobotWriter {
            root: root.to_path_buf(),
            fps,
            features,
            robot_type,
            tasks: Vec::new(),
            episodes: Vec::new(),
            all,
            data: None,
            data_files: 0,
            frames: 0,
            schema,
            cameras,
            videos,
            video_file_bytes: VIDEO_FILE_BYTES,
        })
    }

    /// Sets the bytes of a video file before the next one starts
    /// ([`VIDEO_FILE_BYTES`] unless set; LeRobot's `video_files_size_in_mb`).
    /// A file holds whole episodes: it is finished after the episode that
    /// takes it past this size.
    pub fn set_video_file_bytes(&mut self, bytes: u64) {
        self.video_file_bytes = bytes.max(1);
    }

    /// Whether feature `f` is stored as video.
    fn is_video(&self, f: usize) -> bool {
        self.videos.get(f).is_some_and(Option::is_some)
    }

    /// Adds one episode: `columns[i]` holds feature `i`'s values of every
    /// frame (`frames × width`), frame `k` at `k / fps` seconds.
    pub fn add_episode(&mut self, task: &str, frames: usize, columns: &[HostVec]) -> Result<()> {
        if columns.len() != self.features.len() {
            return Err(Error::Invalid(format!("{} columns for {} features", columns.len(), self.features.len())));
        }
        if frames == 0 {
            return Err(Error::Invalid(format!("episode {} has no frames", self.episodes.len())));
        }
        let task_index = match self.tasks.iter().position(|t| t == task) {
            Some(index) => index,
            None => {
                self.tasks.push(task.to_owned());
                self.tasks.len() - 1
            }
        };
        let episode = self.episodes.len();
        let mut arrays: Vec<Column> = Vec::new();
        let mut stats = Vec::with_capacity(self.features.len());
        let mut bytes = 0usize;
        // Camera frames to encode as video: (feature, frames).
        let mut to_encode: Vec<(usize, &[u8])> = Vec::new();
        for (f, (feature, column)) in self.features.iter().zip(columns).enumerate() {
            let width = feature.width();
            if column.len() != frames * width || column.dtype() != feature.dtype {
                return Err(Error::Invalid(format!(
                    "feature `{}`: {} {} values for {frames} frames of {width} {}",
                    feature.name,
                    column.len(),
                    column.dtype(),
                    feature.dtype
                )));
            }
            let mut values = Values { frames, ..Values::default() };
            if feature.is_image() {
                let HostVec::U8(pixels) = column else {
                    return Err(Error::Invalid(format!(
                        "feature `{}`: frames of {}, not u8",
                        feature.name,
                        column.dtype()
                    )));
                };
                let [h, w, _] = [feature.shape[0], feature.shape[1], 3];
                if self.is_video(f) {
                    values.levels = pixels
                        .par_chunks_exact(width)
                        .map(frame_levels)
                        .reduce(|| vec![[0u64; 256]; 3], |a, b| add_levels(a, &b));
                    to_encode.push((f, pixels));
                    stats.push(values);
                    continue;
                }
                values.levels = vec![[0u64; 256]; 3];
                // Each frame's PNG and level histogram on the rayon pool (the
                // encoding is most of a camera's cost), kept in frame order.
                let encoded: Vec<(Vec<u8>, Vec<[u64; 256]>)> = pixels
                    .par_chunks_exact(width)
                    .map(|frame| {
                        let mut encoded = Vec::new();
                        image::ImageEncoder::write_image(
                            image::codecs::png::PngEncoder::new(&mut encoded),
                            frame,
                            w as u32,
                            h as u32,
                            image::ExtendedColorType::Rgb8,
                        )
                        .map_err(|e| Error::Invalid(format!("feature `{}`: PNG encoding: {e}", feature.name)))?;
                        Ok((encoded, frame_levels(frame)))
                    })
                    .collect::<Result<_>>()?;
                let mut pngs = Vec::with_capacity(encoded.len());
                for (encoded, levels) in encoded {
                    bytes += encoded.len();
                    pngs.push(encoded);
                    for (total, frame) in values.levels.iter_mut().zip(&levels) {
                        for (t, n) in total.iter_mut().zip(frame) {
                            *t += n;
                        }
                    }
                }
                arrays.push(Column::Images(pngs));
            } else {
                let as_f64 = column.as_slice().to_f64_vec();
                values.channels = (0..width).map(|c| as_f64.iter().skip(c).step_by(width).copied().collect()).collect();
                bytes += column.len() * feature.dtype.size_in_bytes();
                let flat: ArrayRef = match column {
                    HostVec::F32(v) => Arc::new(Float32Array::from(v.clone())),
                    HostVec::F64(v) => Arc::new(Float64Array::from(v.clone())),
                    HostVec::I64(v) => Arc::new(Int64Array::from(v.clone())),
                    HostVec::Bool(v) => Arc::new(BooleanArray::from(v.clone())),
                    other => {
                        return Err(Error::Invalid(format!("feature `{}`: {} values", feature.name, other.dtype())))
                    }
                };
                if feature.shape == [1] {
                    arrays.push(Column::Array(flat));
                } else {
                    let item = Arc::new(Field::new("element", flat.data_type().clone(), true));
                    arrays.push(Column::Array(Arc::new(
                        FixedSizeListArray::try_new(item, width as i32, flat, None).map_err(arrow_error)?,
                    )));
                }
            }
            stats.push(values);
        }
        let videos = self.write_videos(frames, &to_encode)?;
        let from = self.frames;
        let timestamps: Vec<f32> = (0..frames).map(|k| (k as f64 / self.fps) as f32).collect();
        arrays.push(Column::Array(Arc::new(Float32Array::from(timestamps))));
        arrays.push(Column::Array(Arc::new(Int64Array::from_iter_values(0..frames as i64))));
        arrays.push(Column::Array(Arc::new(Int64Array::from(vec![episode as i64; frames]))));
        arrays.push(Column::Array(Arc::new(Int64Array::from_iter_values(from as i64..(from + frames) as i64))));
        arrays.push(Column::Array(Arc::new(Int64Array::from(vec![task_index as i64; frames]))));
        let schema = self.schema.clone();
        // Rows in record batches of at most BATCH_IMAGE_BYTES of images
        // each: an Arrow binary column holds at most 2 GiB, and a long
        // episode of PNG frames holds more.
        let mut batches = Vec::new();
        for rows in row_ranges(&arrays, frames, BATCH_IMAGE_BYTES) {
            let parts =
                arrays.iter().map(|column| column.rows(rows.clone(), from)).collect::<Result<Vec<ArrayRef>>>()?;
            batches.push(RecordBatch::try_new(schema.clone(), parts).map_err(arrow_error)?);
        }
        // The next data file once this one is past its size.
        if self.data.as_ref().is_some_and(|(_, written)| *written >= DATA_FILE_BYTES) {
            self.close_data_file()?;
        }
        if self.data.is_none() {
            let path = self.root.join(format!("data/chunk-000/file-{:03}.parquet", self.data_files));
            std::fs::create_dir_all(path.parent().unwrap_or(&self.root)).map_err(io(&path))?;
            let file = File::create(&path).map_err(io(&path))?;
            let writer = ArrowWriter::try_new(file, schema, None).map_err(parquet_error(&path))?;
            self.data = Some((writer, 0));
            self.data_files += 1;
        }
        let path = self.root.join("data");
        if let Some((writer, written)) = &mut self.data {
            for batch in &batches {
                writer.write(batch).map_err(parquet_error(&path))?;
                writer.flush().map_err(parquet_error(&path))?;
            }
            *written += bytes;
        }
        for (all, values) in self.all.iter_mut().zip(&stats) {
            all.extend(values);
        }
        self.episodes.push(EpisodeRecord {
            task_index,
            length: frames,
            from,
            file_index: self.data_files - 1,
            stats,
            videos,
        });
        self.frames += frames;
        Ok(())
    }

    fn close_data_file(&mut self) -> Result<()> {
        if let Some((writer, _)) = self.data.take() {
            let path = self.root.join("data");
            writer.close().map_err(parquet_error(&path))?;
        }
        Ok(())
    }

    /// The statistics of one feature as LeRobot's JSON (images `[3][1][1]`).
    fn stats_json(&self, feature: &FeatureToWrite, values: &Values) -> Value {
        let mut out = serde_json::Map::new();
        for (name, per_channel) in values.stats() {
            let value = match feature.is_image() {
                true => json!(per_channel.iter().map(|v| json!([[v]])).collect::<Vec<_>>()),
                false => json!(per_channel),
            };
            out.insert(name.into(), value);
        }
        out.insert("count".into(), json!([values.count()]));
        Value::Object(out)
    }

    /// Writes the metadata and closes the data files.
    pub fn finish(mut self) -> Result<LeRobotWritten> {
        if self.episodes.is_empty() {
            return Err(Error::Invalid(format!("{}: no episode to write", self.root.display())));
        }
        self.close_data_file()?;
        self.close_video_files()?;
        for (feature, values) in self.features.iter().zip(&self.all) {
            if let Some(channel) = values.channel_of_nan() {
                return Err(Error::Invalid(format!(
                    "feature `{}`: channel {channel} is NaN in every frame of every episode (a joint never \
                     reported?): it has no statistics; leave it out or map another field",
                    feature.name
                )));
            }
        }
        let meta = self.root.join("meta");
        std::fs::create_dir_all(meta.join("episodes/chunk-000")).map_err(io(&meta))?;
        self.write_tasks(&meta.join("tasks.parquet"))?;
        self.write_episodes(&meta.join("episodes/chunk-000/file-000.parquet"))?;
        let mut stats: serde_json::Map<String, Value> = self
            .features
            .iter()
            .zip(&self.all)
            .map(|(feature, values)| (feature.name.clone(), self.stats_json(feature, values)))
            .collect();
        // LeRobot's own columns, as it counts them too.
        let frames = || self.episodes.iter().flat_map(|e| (0..e.length).map(move |k| (e, k)));
        let episode_of: Vec<usize> =
            self.episodes.iter().enumerate().flat_map(|(i, e)| std::iter::repeat_n(i, e.length)).collect();
        let own = [
            ("timestamp", Values::of_column(frames().map(|(_, k)| f64::from((k as f64 / self.fps) as f32)))),
            ("frame_index", Values::of_column(frames().map(|(_, k)| k as f64))),
            ("episode_index", Values::of_column(episode_of.iter().map(|&i| i as f64))),
            ("index", Values::of_column((0..self.frames).map(|i| i as f64))),
            ("task_index", Values::of_column(frames().map(|(e, _)| e.task_index as f64))),
        ];
        let scalar = |name: &str| FeatureToWrite { name: name.into(), dtype: DType::F64, shape: vec![1], names: None };
        for (name, values) in own {
            stats.insert(name.into(), self.stats_json(&scalar(name), &values));
        }
        let stats_path = meta.join("stats.json");
        std::fs::write(&stats_path, serde_json::to_string_pretty(&stats).unwrap_or_default())
            .map_err(io(&stats_path))?;
        let info_path = meta.join("info.json");
        std::fs::write(&info_path, serde_json::to_string_pretty(&self.info()?).unwrap_or_default())
            .map_err(io(&info_path))?;
        Ok(LeRobotWritten {
            root: self.root.clone(),
            episodes: self.episodes.len(),
            frames: self.frames,
            data_files: self.data_files,
        })
    }

    fn info(&self) -> Result<Value> {
        let fps = if self.fps.fract() == 0.0 { json!(self.fps as i64) } else { json!(self.fps) };
        let mut features = serde_json::Map::new();
        for feature in &self.features {
            let names = match (&feature.names, feature.is_image()) {
                (_, true) => json!(["height", "width", "channels"]),
                (Some(names), false) => json!(names),
                (None, false) => Value::Null,
            };
            let mut entry = json!({"dtype": feature.dtype_name()?, "shape": feature.shape, "names": names});
            if let (true, CameraStorage::Video { key_frame_every }) = (feature.is_image(), self.cameras) {
                entry["dtype"] = json!("video");
                entry["info"] = json!({
                    "video.height": feature.shape[0],
                    "video.width": feature.shape[1],
                    "video.codec": "h264",
                    "video.pix_fmt": "yuv420p",
                    "video.fps": fps,
                    "video.channels": 3,
                    "has_audio": false,
                    "video.g": key_frame_every,
                    "video.encoder": "openh264",
                    "video.qp": 26,
                    "is_depth_map": false,
                });
            }
            features.insert(feature.name.clone(), entry);
        }
        for (name, dtype) in [
            ("timestamp", "float32"),
            ("frame_index", "int64"),
            ("episode_index", "int64"),
            ("index", "int64"),
            ("task_index", "int64"),
        ] {
            features.insert(name.into(), json!({"dtype": dtype, "shape": [1], "names": null}));
        }
        Ok(json!({
            "codebase_version": "v3.0",
            "robot_type": self.robot_type,
            "total_episodes": self.episodes.len(),
            "total_frames": self.frames,
            "total_tasks": self.tasks.len(),
            "chunks_size": 1000,
            "data_files_size_in_mb": DATA_FILE_BYTES / 1_000_000,
            "video_files_size_in_mb": megabytes(self.video_file_bytes),
            "fps": fps,
            "splits": {"train": format!("0:{}", self.episodes.len())},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "video_path": self.videos.iter().any(Option::is_some)
                .then_some("videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"),
            "features": features,
        }))
    }

    fn write_tasks(&self, path: &Path) -> Result<()> {
        let pandas = json!({
            "index_columns": ["task"],
            "column_indexes": [{"name": null, "field_name": null, "pandas_type": "unicode", "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
            "columns": [
                {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": null},
                {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": null}
            ],
            "creator": {"library": "robocache", "version": env!("CARGO_PKG_VERSION")},
            "pandas_version": "2.2.3"
        });
        let schema = Arc::new(Schema::new_with_metadata(
            vec![Field::new("task_index", DataType::Int64, true), Field::new("task", DataType::Utf8, true)],
            std::collections::HashMap::from([("pandas".to_owned(), pandas.to_string())]),
        ));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(0..self.tasks.len() as i64)),
            Arc::new(StringArray::from(self.tasks.clone())),
        ];
        write_parquet(path, schema, columns)
    }

    fn write_episodes(&self, path: &Path) -> Result<()> {
        let n = self.episodes.len();
        let int = |f: &dyn Fn(&EpisodeRecord) -> usize| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(self.episodes.iter().map(|e| f(e) as i64)))
        };
        let mut fields = vec![Field::new("episode_index", DataType::Int64, true)];
        let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(0..n as i64))];
        let task_lists = {
            let values =
                StringArray::from(self.episodes.iter().map(|e| self.tasks[e.task_index].clone()).collect::<Vec<_>>());
            let mut offsets = arrow_array::builder::OffsetBufferBuilder::new(n);
            for _ in 0..n {
                offsets.push_length(1);
            }
            let item = Arc::new(Field::new("element", DataType::Utf8, true));
            ListArray::try_new(item, offsets.finish(), Arc::new(values), None).map_err(arrow_error)?
        };
        fields.push(Field::new("tasks", task_lists.data_type().clone(), true));
        columns.push(Arc::new(task_lists));
        for (name, column) in [
            ("length", int(&|e| e.length)),
            ("data/chunk_index", int(&|_| 0)),
            ("data/file_index", int(&|e| e.file_index)),
            ("dataset_from_index", int(&|e| e.from)),
            ("dataset_to_index", int(&|e| e.from + e.length)),
        ] {
            fields.push(Field::new(name, DataType::Int64, true));
            columns.push(column);
        }
        for (f, feature) in self.features.iter().enumerate() {
            let per_episode: Vec<BTreeMap<&'static str, Vec<f64>>> =
                self.episodes.iter().map(|e| e.stats[f].stats()).collect();
            for stat in ["min", "max", "mean", "std", "q01", "q10", "q50", "q90", "q99"] {
                let rows = per_episode.iter().map(|s| s.get(stat).cloned().unwrap_or_default());
                let column: ArrayRef = if feature.is_image() {
                    Arc::new(nested_image_stats(rows.collect())?)
                } else {
                    Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(
                        rows.map(|r| Some(r.into_iter().map(Some))),
                    ))
                };
                fields.push(Field::new(format!("stats/{}/{stat}", feature.name), column.data_type().clone(), true));
                columns.push(column);
            }
            let counts = ListArray::from_iter_primitive::<Int64Type, _, _>(
                self.episodes.iter().map(|e| Some(vec![Some(e.stats[f].count() as i64)])),
            );
            fields.push(Field::new(format!("stats/{}/count", feature.name), counts.data_type().clone(), true));
            columns.push(Arc::new(counts));
        }
        for (f, feature) in self.features.iter().enumerate().filter(|(f, _)| self.is_video(*f)) {
            let places: Vec<VideoPlace> = self
                .episodes
                .iter()
                .map(|e| {
                    e.videos.get(f).copied().flatten().ok_or_else(|| {
                        Error::Invalid(format!("camera `{}`: an episode without its video frames", feature.name))
                    })
                })
                .collect::<Result<_>>()?;
            let key = &feature.name;
            let index = |of: fn(usize) -> usize| -> ArrayRef {
                Arc::new(Int64Array::from_iter_values(places.iter().map(|p| of(p.file_index) as i64)))
            };
            let time = |of: fn(&VideoPlace) -> f64| -> ArrayRef {
                Arc::new(Float64Array::from_iter_values(places.iter().map(of)))
            };
            for (name, column) in [
                ("chunk_index", index(|i| i / FILES_PER_CHUNK)),
                ("file_index", index(|i| i % FILES_PER_CHUNK)),
                ("from_timestamp", time(|p| p.from_timestamp)),
                ("to_timestamp", time(|p| p.to_timestamp)),
            ] {
                fields.push(Field::new(format!("videos/{key}/{name}"), column.data_type().clone(), true));
                columns.push(column);
            }
        }
        for name in ["meta/episodes/chunk_index", "meta/episodes/file_index"] {
            fields.push(Field::new(name, DataType::Int64, true));
            columns.push(int(&|_| 0));
        }
        write_parquet(path, Arc::new(Schema::new(fields)), columns)
    }
}

/// `bytes` in (decimal) megabytes, a whole number where it is one.
fn megabytes(bytes: u64) -> Value {
    match bytes % 1_000_000 {
        0 => json!(bytes / 1_000_000),
        _ => json!(bytes as f64 / 1e6),
    }
}

/// A feature name is a path part of the root (`videos/<key>/...`): one
/// that could leave the root, or name another place on some system, is
/// refused before anything is written. Refused: an empty name, a NUL, a
/// backslash, and any `/`-separated part that is empty (a leading or
/// doubled `/`), `.` or `..`.
pub(crate) fn check_feature_name(name: &str) -> Result<()> {
    let problem = if name.is_empty() {
        Some("is empty")
    } else if name.contains('\0') {
        Some("holds a NUL")
    } else if name.contains('\\') {
        Some("holds a backslash")
    } else if name.split('/').any(|part| part.is_empty() || part == "." || part == "..") {
        Some("has an empty, `.` or `..` part between its `/`s, so as a path it could leave the root")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(Error::Invalid(format!(
            "feature `{}` {problem}: a feature's name is a directory of the root (`videos/<name>/`); \
             give the stream another key (a bag mapping names keys)",
            name.escape_debug()
        ))),
        None => Ok(()),
    }
}

/// The schema of the data files: each feature's column (a `struct<bytes,
/// path>` for camera frames, a plain column for `[1]`, a fixed-size list
/// otherwise), then LeRobot's own columns, with the `huggingface` metadata
/// the `datasets` library reads.
fn data_schema(features: &[FeatureToWrite]) -> Arc<Schema> {
    let mut fields = Vec::new();
    let mut hf = serde_json::Map::new();
    for feature in features {
        let (field, info) = if feature.is_image() {
            let image = DataType::Struct(image_fields());
            (Field::new(&feature.name, image, true), json!({"_type": "Image"}))
        } else {
            let (kind, name) = match feature.dtype {
                DType::F32 => (DataType::Float32, "float32"),
                DType::F64 => (DataType::Float64, "float64"),
                DType::I64 => (DataType::Int64, "int64"),
                _ => (DataType::Boolean, "bool"),
            };
            if feature.shape == [1] {
                (Field::new(&feature.name, kind, true), json!({"dtype": name, "_type": "Value"}))
            } else {
                let list = DataType::FixedSizeList(Arc::new(Field::new("element", kind, true)), feature.width() as i32);
                let info =
                    json!({"feature": {"dtype": name, "_type": "Value"}, "length": feature.width(), "_type": "List"});
                (Field::new(&feature.name, list, true), info)
            }
        };
        fields.push(field);
        hf.insert(feature.name.clone(), info);
    }
    for (name, kind, dtype) in [
        ("timestamp", DataType::Float32, "float32"),
        ("frame_index", DataType::Int64, "int64"),
        ("episode_index", DataType::Int64, "int64"),
        ("index", DataType::Int64, "int64"),
        ("task_index", DataType::Int64, "int64"),
    ] {
        fields.push(Field::new(name, kind, true));
        hf.insert(name.into(), json!({"dtype": dtype, "_type": "Value"}));
    }
    let metadata: std::collections::HashMap<String, String> =
        [("huggingface".to_owned(), json!({"info": {"features": hf}}).to_string())].into();
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// A camera frame's column: its PNG bytes and a file name, as `datasets.Image` stores it.
fn image_fields() -> Fields {
    Fields::from(vec![Field::new("bytes", DataType::Binary, true), Field::new("path", DataType::Utf8, true)])
}

fn write_parquet(path: &Path, schema: Arc<Schema>, columns: Vec<ArrayRef>) -> Result<()> {
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(arrow_error)?;
    let file = File::create(path).map_err(io(path))?;
    let mut writer = ArrowWriter::try_new(file, schema, None).map_err(parquet_error(path))?;
    writer.write(&batch).map_err(parquet_error(path))?;
    writer.close().map_err(parquet_error(path))?;
    Ok(())
}

/// The most image bytes one record batch of a data file holds (an Arrow
/// binary column's offsets are `i32`: 2 GiB at most).
const BATCH_IMAGE_BYTES: usize = 1 << 30;

/// One column of an episode being written: an Arrow array, or one image
/// feature's PNG frames (made into arrays a record batch at a time).
enum Column {
    Array(ArrayRef),
    Images(Vec<Vec<u8>>),
}

impl Column {
    /// Rows `rows` of the column; image rows `k` are named
    /// `frame-{first + k}.png`.
    fn rows(&self, rows: Range<usize>, first: usize) -> Result<ArrayRef> {
        match self {
            Column::Array(array) => Ok(array.slice(rows.start, rows.len())),
            Column::Images(pngs) => {
                let frames = &pngs[rows.clone()];
                // Sized once: appending hundreds of megabytes of PNGs to a
                // growing buffer copied them again at every doubling.
                let total: usize = frames.iter().map(Vec::len).sum();
                let mut png = BinaryBuilder::with_capacity(frames.len(), total);
                let mut path = StringBuilder::new();
                for (k, frame) in rows.clone().zip(frames) {
                    png.append_value(frame);
                    path.append_value(format!("frame-{:06}.png", first + k));
                }
                let parts: Vec<ArrayRef> = vec![Arc::new(png.finish()), Arc::new(path.finish())];
                Ok(Arc::new(StructArray::try_new(image_fields(), parts, None).map_err(arrow_error)?))
            }
        }
    }
}

/// `frames` rows cut into ranges whose image bytes (every image column's)
/// stay within `limit` ([`BATCH_IMAGE_BYTES`]), each range at least one row.
fn row_ranges(columns: &[Column], frames: usize, limit: usize) -> Vec<Range<usize>> {
    let row_bytes = |k: usize| -> usize {
        columns
            .iter()
            .map(|c| match c {
                Column::Images(pngs) => pngs.get(k).map_or(0, Vec::len),
                Column::Array(_) => 0,
            })
            .sum()
    };
    let mut ranges = Vec::new();
    let (mut start, mut held) = (0, 0usize);
    for k in 0..frames {
        let bytes = row_bytes(k);
        if k > start && held + bytes > limit {
            ranges.push(start..k);
            (start, held) = (k, 0);
        }
        held += bytes;
    }
    ranges.push(start..frames);
    ranges
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    #[test]
    fn image_rows_are_cut_into_batches_within_the_limit() {
        let pngs = |sizes: &[usize]| Column::Images(sizes.iter().map(|&n| vec![0u8; n]).collect());
        let values: ArrayRef = Arc::new(Int64Array::from_iter_values(0..6));
        let columns = [pngs(&[4, 4, 4, 9, 1, 1]), Column::Array(values), pngs(&[1, 1, 1, 1, 1, 1])];
        // Rows of 5, 5, 5, 10, 2, 2 bytes, at most 10 a batch; a row over the limit alone.
        assert_eq!(row_ranges(&columns, 6, 10), [0..2, 2..3, 3..4, 4..6]);
        let whole = row_ranges(&columns, 6, 1000);
        assert_eq!((whole.len(), whole.first()), (1, Some(&(0..6))));
        let none = row_ranges(&columns, 0, 10);
        assert_eq!((none.len(), none.first()), (1, Some(&(0..0))));
        let sliced = columns[0].rows(2..4, 100).unwrap();
        let images = sliced.as_any().downcast_ref::<StructArray>().unwrap();
        let paths = images.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!((paths.value(0), paths.value(1)), ("frame-000102.png", "frame-000103.png"));
        assert_eq!(columns[1].rows(2..4, 0).unwrap().len(), 2);
    }
}

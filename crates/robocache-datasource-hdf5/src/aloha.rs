//! ALOHA / ACT HDF5: the recording layout of ACT, act-plus-plus, Mobile
//! ALOHA and the AgileX/ARX-style forks. One file per episode
//! (`episode_0.hdf5`, ...) in a directory, each holding
//!
//! - `/observations/qpos`, `/observations/qvel`, `/observations/effort`
//!   `[T, 14]` and `/action` `[T, 14]` (Mobile ALOHA adds `/base_action`
//!   `[T, 2]`); every numeric dataset of the file is a stream, named by its
//!   path (`observations/qpos`, `action`);
//! - cameras under `/observations/images/<cam>`: raw `u8 [T, H, W, 3]`
//!   (chunked per frame: read with positioned reads, as the other HDF5
//!   layouts), or, with the root attribute `compress` true (or, without the
//!   attribute, a `u8 [T, N]` camera dataset), JPEG bytes padded with zeros
//!   to `[T, N]`. Compressed frames are decoded as ACT's `EpisodicDataset`
//!   decodes them (`cv2.imdecode`): the same pixels, channels in the order
//!   the recorder encoded them; `/compress_len` is not needed to decode and
//!   is listed as ignored.
//!
//! Episodes are the directory's `.hdf5` files (recursively), sorted as ACT
//! numbers them: by the number in `episode_<N>`, then by name. The control
//! rate is ACT's `DT = 0.02` (50 Hz) unless the options give one.

use std::any::Any;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use robocache_cpu::DType;
use robocache_datasource::decoded_frames::DecodedFrames;
use robocache_datasource::format_reader::FrameCacheUsage;
use robocache_datasource::format_reader::{FormatKind, FormatReader, Opened};
use robocache_datasource::image_decode::{decode_jpeg_as_opencv, jpeg_size};
use robocache_datasource::model::{
    row_values, ChannelKind, DatasetInfo, EpisodeInfo, FormatName, StreamInfo, StreamKind, Timeline,
};
use robocache_datasource::{Error, Result};
use robocache_storage::Storage;
use serde_json::{Map, Value};

use crate::hdf5_file::Hdf5File;
use crate::hdf5_reader::Hdf5Source;
use crate::streams::{describe_stream, numeric_datasets, StepClock};

/// ALOHA / ACT HDF5 episodes (one file each).
pub const ALOHA: FormatName = FormatName::new("aloha");
/// ACT's control rate (`DT = 0.02`).
pub const DEFAULT_RATE_HZ: f64 = 50.0;
/// Where the cameras are.
const IMAGES: &str = "observations/images/";
/// What an episode file must hold.
const REQUIRED: [&str; 2] = ["observations/qpos", "action"];
/// Episode files kept open at once (a dataset of thousands of episodes
/// would otherwise hold two descriptors each).
const OPEN_FILES: usize = 64;

/// How ALOHA episodes are opened.
#[derive(Clone, Debug, Default)]
pub struct AlohaOptions {
    /// The control rate in Hz (default [`DEFAULT_RATE_HZ`]).
    pub rate_hz: Option<f64>,
    /// Read every dataset through the HDF5 library, never with positioned reads.
    pub reads_only: bool,
    /// A split asked for: ALOHA episodes have none, so opening is an error.
    pub split: Option<String>,
}

/// ALOHA / ACT episode files: a directory of `.hdf5` files of the layout,
/// or one such file.
#[derive(Clone, Debug, Default)]
pub struct AlohaKind {
    options: AlohaOptions,
}

impl AlohaKind {
    /// ALOHA episodes, opened with `options`.
    pub fn new(options: AlohaOptions) -> Self {
        AlohaKind { options }
    }
}

fn is_hdf5_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "hdf5" || e == "h5")
}

/// True when `file` looks like an ALOHA episode: its joint positions or
/// its actions where ACT writes them (the rest is checked when opened, with
/// an error naming what is missing).
fn has_layout(file: &Hdf5File) -> bool {
    REQUIRED.iter().any(|key| file.dataset(key).is_ok())
}

/// The episode number ACT names a file by (`episode_12.hdf5`: 12).
fn episode_number(path: &Path) -> Option<u64> {
    path.file_stem()?.to_str()?.strip_prefix("episode_")?.parse().ok()
}

/// The episode files of `path`: itself, or the `.hdf5` files below it in
/// ACT's order.
fn episode_files(path: &Path, storage: &Storage) -> Result<Vec<PathBuf>> {
    if is_hdf5_file(path) && storage.is_file(path)? {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = storage.list_files(path)?.into_iter().filter(|f| is_hdf5_file(f)).collect();
    files.sort_by(|a, b| {
        (a.parent(), episode_number(a).unwrap_or(u64::MAX), a).cmp(&(
            b.parent(),
            episode_number(b).unwrap_or(u64::MAX),
            b,
        ))
    });
    Ok(files)
}

impl FormatKind for AlohaKind {
    fn name(&self) -> &'static str {
        "ALOHA"
    }

    fn formats(&self) -> &'static [FormatName] {
        &[ALOHA]
    }

    fn signs(&self) -> &'static [&'static str] {
        &["episode_", ".hdf5", ".h5"]
    }

    fn reads(&self) -> &'static str {
        "a directory of episode_<N>.hdf5 files (or one such file) with /observations/qpos and /action is read as ALOHA/ACT episodes"
    }

    fn detect(&self, path: &Path, storage: &Storage) -> Result<bool> {
        // A directory is ALOHA when its first episode file is; a file, when it is.
        let candidate = match is_hdf5_file(path) {
            true => match storage.is_file(path) {
                Ok(true) => Some(path.to_path_buf()),
                _ => None,
            },
            false => match storage.is_dir(path) {
                Ok(true) => episode_files(path, storage).ok().and_then(|files| files.into_iter().next()),
                _ => None,
            },
        };
        let Some(candidate) = candidate else { return Ok(false) };
        let Ok(local) = storage.local_file(&candidate) else { return Ok(false) };
        Ok(Hdf5File::open(&local).is_ok_and(|file| has_layout(&file)))
    }

    fn open(&self, path: &Path, storage: &Storage) -> Result<Opened> {
        if let Some(split) = &self.options.split {
            return Err(Error::Invalid(format!(
                "{}: split `{split}`: ALOHA/ACT episodes have no splits (one file per episode)",
                path.display()
            )));
        }
        let rate_hz = self.options.rate_hz.unwrap_or(DEFAULT_RATE_HZ);
        if !(rate_hz.is_finite() && rate_hz > 0.0) {
            return Err(Error::Invalid(format!("rate {rate_hz} Hz is not a positive rate")));
        }
        let files = episode_files(path, storage)?;
        if files.is_empty() {
            return Err(Error::UnknownFormat { file: path.into(), reason: "no .hdf5 episode file in it".into() });
        }
        let mut episodes = Vec::with_capacity(files.len());
        let mut locals = Vec::with_capacity(files.len());
        let mut compressed = Vec::with_capacity(files.len());
        let mut ignored = Map::new();
        let mut names: HashMap<String, PathBuf> = HashMap::new();
        for file in &files {
            let local = storage.local_file(file)?;
            let hdf5 = Hdf5File::open(&local)?;
            let name = episode_name(path, file);
            if let Some(first) = names.insert(name.clone(), file.clone()) {
                return Err(Error::Invalid(format!(
                    "{}: episode `{name}` twice ({} and {})",
                    path.display(),
                    first.display(),
                    file.display()
                )));
            }
            let (episode, frames) = read_episode(&hdf5, &name, rate_hz, &mut ignored)?;
            episodes.push(episode);
            compressed.push(frames);
            locals.push(local);
        }
        let mut metadata = Map::new();
        if !ignored.is_empty() {
            metadata.insert("ignored".into(), Value::Object(ignored));
        }
        let info =
            DatasetInfo { path: path.to_path_buf(), format: ALOHA, rate_hz, episodes, splits: Vec::new(), metadata };
        let mut cameras: Vec<String> = compressed.iter().flat_map(|c| c.keys().cloned()).collect();
        cameras.sort();
        cameras.dedup();
        let source = AlohaSource {
            names: info.episodes.iter().map(|e| e.name.clone()).collect(),
            files: locals,
            compressed,
            reads_only: self.options.reads_only,
            open: Mutex::new(HashMap::new()),
            cameras,
            decoded: DecodedFrames::default(),
        };
        Ok((Box::new(source), info))
    }
}

/// An episode's name: its file's path below the dataset, without `.hdf5`
/// (`episode_3`, `task_a/episode_3`); a dataset of one file: its stem.
fn episode_name(root: &Path, file: &Path) -> String {
    match file.strip_prefix(root).ok().filter(|r| !r.as_os_str().is_empty()) {
        Some(relative) => relative.with_extension("").to_string_lossy().into_owned(),
        None => file.file_stem().map_or_else(|| "episode".into(), |n| n.to_string_lossy().into_owned()),
    }
}

/// The root attribute `name` as a flag (h5py writes Python bools as an
/// enum of 0 and 1; others write integers).
fn attr_flag(file: &Hdf5File, name: &str) -> Result<Option<bool>> {
    let root = file.group("/")?;
    let Ok(attr) = root.attr(name) else { return Ok(None) };
    if let Ok(value) = attr.read_scalar::<bool>() {
        return Ok(Some(value));
    }
    match file.attr_f64(&root, name)? {
        Some(value) => Ok(Some(value != 0.0)),
        None => Ok(None),
    }
}

/// Compressed camera datasets of an episode: source path to the bytes
/// each frame is padded to.
type CompressedFrames = HashMap<String, usize>;

fn read_episode(
    file: &Hdf5File,
    name: &str,
    rate_hz: f64,
    ignored: &mut Map<String, Value>,
) -> Result<(EpisodeInfo, CompressedFrames)> {
    for key in REQUIRED {
        file.dataset(key).map_err(|_| file.missing("dataset", &format!("/{key}")))?;
    }
    let action = file.dataset("action")?;
    let len = action.shape().first().copied().ok_or_else(|| file.layout_error("/action", "is a scalar"))?;
    if len == 0 {
        return Err(Error::EmptyEpisode { file: file.path().to_path_buf(), episode: name.to_owned() });
    }
    let flagged = attr_flag(file, "compress")?;
    let clock = StepClock { len, timeline: Timeline::Uniform { start: 0.0, hz: rate_hz } };
    let keys = numeric_datasets(file, "/", &["compress_len"])?;
    if file.exists("compress_len") {
        ignored.entry("compress_len".to_owned()).or_insert_with(|| {
            Value::from("the compressed frames' lengths: each padded frame decodes without them, as ACT reads it")
        });
    }
    let mut streams = Vec::with_capacity(keys.len());
    let mut compressed = CompressedFrames::new();
    for key in &keys {
        let source = format!("/{key}");
        let dataset = file.dataset(&source)?;
        let shape = dataset.shape();
        let is_camera = key.starts_with(IMAGES);
        let is_jpeg = is_camera
            && match flagged {
                Some(flag) => flag,
                None => shape.len() == 2 && file.dtype(&dataset, &source)? == DType::U8,
            };
        if !is_jpeg {
            let kind = |s: &robocache_datasource::stream_shape::StreamShape<'_>| match is_camera {
                true => StreamKind::All(ChannelKind::Image),
                false => s.common_kind(),
            };
            streams.push(describe_stream(file, name, "", key, key, &clock, kind)?);
            continue;
        }
        let (stream, padded) = describe_jpeg_camera(file, name, key, &clock)?;
        compressed.insert(stream.source.clone(), padded);
        streams.push(stream);
    }
    let root = file.group("/")?;
    let mut metadata = file.attrs_json(&root);
    metadata.insert("file".into(), Value::from(file.path().display().to_string()));
    let episode = EpisodeInfo {
        name: name.to_owned(),
        len,
        duration_s: (len - 1) as f64 / rate_hz,
        streams,
        instruction: None,
        metadata,
    };
    Ok((episode, compressed))
}

/// A camera of JPEG bytes padded to `[T, N]`: a stream of `u8 [H, W, 3]`
/// frames, their size from the first frame's header.
fn describe_jpeg_camera(file: &Hdf5File, episode: &str, key: &str, clock: &StepClock) -> Result<(StreamInfo, usize)> {
    let source = format!("/{key}");
    let dataset = file.dataset(&source)?;
    let dtype = file.dtype(&dataset, &source)?;
    let shape = dataset.shape();
    let &[len, padded] = shape.as_slice() else {
        return Err(file.layout_error(
            &source,
            format!("has shape {shape:?}; a compressed camera is [T, N] bytes (JPEG padded with zeros)"),
        ));
    };
    if dtype != DType::U8 {
        return Err(file.layout_error(&source, format!("is {}; a compressed camera is u8 JPEG bytes", dtype.name())));
    }
    if len != clock.len {
        return Err(file.layout_error(&source, format!("has {len} frames, the episode {} steps", clock.len)));
    }
    row_values(&[padded])
        .map_err(|problem| file.layout_error(&source, format!("a frame of {padded} bytes {problem}")))?;
    let first = file.read_rows(&dataset, &source, DType::U8, 0..1)?;
    let bytes = first.as_slice().as_bytes();
    let (height, width) = jpeg_size(bytes).map_err(|problem| Error::Decode {
        file: file.path().to_path_buf(),
        episode: episode.to_owned(),
        key: key.to_owned(),
        step: 0,
        problem,
    })?;
    let step_shape = vec![height, width, 3];
    row_values(&step_shape)
        .map_err(|problem| file.layout_error(&source, format!("the first frame's shape {problem}")))?;
    let stream = StreamInfo {
        name: key.to_owned(),
        dtype: DType::U8,
        step_shape,
        len,
        kind: StreamKind::All(ChannelKind::Image),
        timeline: clock.timeline.clone(),
        source,
    };
    Ok((stream, padded))
}

/// ALOHA episode files, each opened when first read (at most
/// [`OPEN_FILES`] at once).
#[derive(Debug)]
struct AlohaSource {
    /// Each episode's name.
    names: Vec<String>,
    /// Each episode's file (local, or a remote one's cache file).
    files: Vec<PathBuf>,
    /// Each episode's compressed cameras.
    compressed: Vec<CompressedFrames>,
    reads_only: bool,
    open: Mutex<HashMap<usize, Arc<Hdf5Source>>>,
    /// Every compressed camera's key (sorted), for its number in `decoded`.
    cameras: Vec<String>,
    /// Decoded JPEG rows within the frame cache's budget, by
    /// `episode * cameras + camera` and row.
    decoded: DecodedFrames,
}

impl AlohaSource {
    /// Episode `episode`'s file, opened.
    fn file(&self, episode: usize) -> Result<Arc<Hdf5Source>> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(source) = open.get(&episode) {
            return Ok(source.clone());
        }
        let path = self.files.get(episode).ok_or_else(|| Error::Invalid(format!("no episode {episode}")))?;
        let source = Arc::new(Hdf5Source::new(Hdf5File::open(path)?, self.reads_only)?);
        if open.len() >= OPEN_FILES {
            open.clear();
        }
        open.insert(episode, source.clone());
        Ok(source)
    }
}

impl FormatReader for AlohaSource {
    fn read_rows_into(&self, episode: usize, stream: &StreamInfo, rows: Range<usize>, out: &mut [u8]) -> Result<()> {
        let file = self.file(episode)?;
        let Some(&padded) = self.compressed[episode].get(&stream.source) else {
            return file.read_into(stream, rows, out);
        };
        let frame_bytes = stream.step_bytes().max(1);
        let camera = (self.cameras.binary_search(&stream.source).ok())
            .filter(|_| self.decoded.is_enabled())
            .map(|c| episode * self.cameras.len() + c);
        // Rows the cache holds are copied; the others are read (as one
        // run from the first to the last of them) and decoded.
        let mut missing = Vec::new();
        for (row, frame) in rows.clone().zip(out.chunks_exact_mut(frame_bytes)) {
            match camera.and_then(|c| self.decoded.get(c, row)) {
                Some(held) if held.len() == frame.len() => frame.copy_from_slice(&held),
                _ => missing.push(row),
            }
        }
        let (Some(&first), Some(&last)) = (missing.first(), missing.last()) else { return Ok(()) };
        let padded_stream = StreamInfo { dtype: DType::U8, step_shape: vec![padded], ..stream.clone() };
        let bytes = file.read(&padded_stream, first..last + 1)?;
        let jpegs: Vec<&[u8]> = bytes.as_slice().as_bytes().chunks(padded).collect();
        for row in missing {
            let frame = &mut out[(row - rows.start) * frame_bytes..][..frame_bytes];
            decode_jpeg_as_opencv(jpegs[row - first], &stream.step_shape, frame).map_err(|problem| Error::Decode {
                file: self.files[episode].clone(),
                episode: self.names[episode].clone(),
                key: stream.name.clone(),
                step: row,
                problem,
            })?;
            if let Some(camera) = camera {
                self.decoded.insert(camera, row, Arc::from(&*frame));
            }
        }
        Ok(())
    }

    fn explicit_times(&self, _: &DatasetInfo, _: usize, stream: &StreamInfo, _: &str) -> Result<Arc<[f64]>> {
        Err(Error::Invalid(format!(
            "stream `{}`: ALOHA streams are on the control clock and have no explicit timestamps",
            stream.name
        )))
    }

    fn set_decoded_frames_budget(&self, bytes: usize) {
        self.decoded.set_budget(bytes);
    }

    fn decoded_frames_usage(&self) -> Option<FrameCacheUsage> {
        (!self.cameras.is_empty()).then(|| self.decoded.usage())
    }

    fn reset_decoded_frames_counts(&self) {
        self.decoded.reset_counts();
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

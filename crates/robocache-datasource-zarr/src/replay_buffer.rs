//! A replay buffer opened: `meta/episode_ends` cut the arrays under `data/`
//! into episodes; each array a stream, read through zarrs (JPEG XL cameras
//! through [`JpegXlArray`]).

use std::any::Any;
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, RwLock};

use robocache_cpu::DType;
use robocache_datasource::format_reader::{FormatReader, Opened};
use robocache_datasource::model::{
    row_values, ChannelKind, DatasetInfo, EpisodeInfo, StreamInfo, StreamKind, Timeline,
};
use robocache_datasource::{Error, Result};
use robocache_storage::Storage;
use serde_json::{Map, Value};
use zarrs::array::codec::CodecOptions;
use zarrs::array::{Array, ArrayChunkCacheExt, ArrayCreateError, ChunkCacheDecodedLruSizeLimit, DataType};
use zarrs::array_subset::ArraySubset;

use crate::jpegxl::JpegXlArray;
use crate::store::{ZarrStore, MAX_VALUE_BYTES};
use crate::timestamps;
use crate::{rate_of, ZarrOptions, ZARR};

/// Where the episodes end (exclusive row numbers into `data/*`).
const EPISODE_ENDS: &str = "meta/episode_ends";

/// One array of `data/`.
#[derive(Debug)]
enum DataArray {
    Zarrs(Box<Array<ZarrStore>>),
    JpegXl(JpegXlArray),
}

/// An open replay buffer.
#[derive(Debug)]
struct ReplayBuffer {
    store: Arc<ZarrStore>,
    /// By stream name (the array's key below `data/`).
    arrays: HashMap<String, DataArray>,
    /// Each episode's first row.
    starts: Vec<u64>,
    /// Each episode's step times, where the buffer has `data/timestamp`.
    times: Option<Vec<Arc<[f64]>>>,
    /// The image arrays' decompressed chunks, by stream, while the frame
    /// cache has a budget (a window reads a few rows of chunks of many).
    chunk_caches: ChunkCaches,
    /// The streams whose kind is image.
    image_streams: Vec<String>,
}

/// Decompressed chunks of the image arrays, by stream.
#[derive(Default)]
struct ChunkCaches(RwLock<HashMap<String, Arc<ChunkCacheDecodedLruSizeLimit>>>);

impl std::fmt::Debug for ChunkCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.0.read().map(|c| c.keys().cloned().collect()).unwrap_or_default();
        f.debug_tuple("ChunkCaches").field(&names).finish()
    }
}

fn layout_error(store: &ZarrStore, path: &str, problem: impl Into<String>) -> Error {
    Error::Layout { file: store.path().to_path_buf(), path: path.into(), problem: problem.into() }
}

/// robocache's dtype of a zarr data type, where it has one.
fn dtype_of(data_type: &DataType) -> Option<DType> {
    Some(match data_type {
        DataType::Bool => DType::Bool,
        DataType::UInt8 => DType::U8,
        DataType::UInt16 => DType::U16,
        DataType::UInt32 => DType::U32,
        DataType::UInt64 => DType::U64,
        DataType::Int8 => DType::I8,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::Float16 => DType::F16,
        DataType::BFloat16 => DType::BF16,
        DataType::Float32 => DType::F32,
        DataType::Float64 => DType::F64,
        _ => return None,
    })
}

/// The kind of a replay buffer's array: frames (`[H, W, C]` bytes, or a
/// camera-like key) are images, bools discrete, the rest continuous.
fn kind_of(key: &str, dtype: DType, step_shape: &[usize]) -> StreamKind {
    let camera = ["rgb", "img", "image", "depth", "camera"].iter().any(|part| key.contains(part));
    StreamKind::All(if (step_shape.len() == 3 && dtype == DType::U8) || (camera && step_shape.len() >= 2) {
        ChannelKind::Image
    } else if dtype == DType::Bool {
        ChannelKind::Discrete
    } else {
        ChannelKind::Continuous
    })
}

/// Opens the replay buffer at `path`.
pub fn open(path: &Path, storage: &Storage, options: &ZarrOptions) -> Result<Opened> {
    let store = Arc::new(ZarrStore::open(path, storage)?);
    let ends_array = Array::open(store.clone(), &format!("/{EPISODE_ENDS}"))
        .map_err(|e| layout_error(&store, EPISODE_ENDS, format!("cannot be read: {e}")))?;
    let zarr_format = if store.read(&format!("{EPISODE_ENDS}/.zarray"))?.is_some() { 2 } else { 3 };
    let ends = read_episode_ends(&store, &ends_array)?;
    let total = ends.last().copied().unwrap_or(0);

    let mut arrays = HashMap::new();
    let mut ignored = Map::new();
    let mut described = Vec::new();
    for name in store.children("data")? {
        let key = format!("data/{name}");
        if let Some(frames) = JpegXlArray::open(&store, &key)? {
            if (frames.len as u64) < total {
                return Err(short(&store, &key, frames.len as u64, total));
            }
            described.push((name.clone(), frames.dtype(), frames.frame_shape.clone()));
            arrays.insert(name, DataArray::JpegXl(frames));
            continue;
        }
        let array = match Array::open(store.clone(), &format!("/{key}")) {
            Ok(array) => array,
            // Text and other element types are metadata here, not streams.
            Err(e @ ArrayCreateError::DataTypeCreateError(_)) => {
                ignored.insert(key, Value::from(format!("not a stream of numbers: {e}")));
                continue;
            }
            // A codec, chunk grid or metadata robocache cannot read is an error.
            Err(e) => return Err(layout_error(&store, &key, format!("cannot be read: {e}"))),
        };
        let Some(dtype) = dtype_of(array.data_type()) else {
            ignored.insert(key, Value::from(format!("its data type {} is not one robocache reads", array.data_type())));
            continue;
        };
        let shape = array.shape().to_vec();
        let Some((&rows, step)) = shape.split_first() else {
            ignored.insert(key, Value::from("a scalar, not a stream of steps"));
            continue;
        };
        if rows < total {
            return Err(short(&store, &key, rows, total));
        }
        let step_shape: Vec<usize> = step
            .iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| layout_error(&store, &key, format!("shape {shape:?} is too large")))
            })
            .collect::<Result<_>>()?;
        row_values(&step_shape).map_err(|problem| layout_error(&store, &key, format!("a row {problem}")))?;
        let chunk = array
            .chunk_shape(&vec![0; shape.len()])
            .map_err(|e| layout_error(&store, &key, format!("no chunk grid: {e}")))?;
        let chunk_bytes = chunk
            .iter()
            .try_fold(dtype.size_in_bytes() as u64, |n, d| n.checked_mul(d.get()))
            .filter(|&n| n <= MAX_VALUE_BYTES);
        if chunk_bytes.is_none() {
            return Err(layout_error(
                &store,
                &key,
                format!(
                    "chunks of {chunk:?} {} elements exceed the {MAX_VALUE_BYTES} bytes a chunk may hold",
                    dtype.name()
                ),
            ));
        }
        if rows > total {
            ignored.insert(format!("{key}[{total}..{rows}]"), Value::from("rows after the last episode's end"));
        }
        described.push((name.clone(), dtype, step_shape));
        arrays.insert(name, DataArray::Zarrs(Box::new(array)));
    }
    if described.is_empty() {
        return Err(layout_error(&store, "data", "holds no arrays robocache reads"));
    }
    let times = match arrays.get(timestamps::TIMESTAMP) {
        Some(DataArray::Zarrs(array)) => Some(timestamps::read(&store, array, &ends)?),
        _ => None,
    };
    let names: Vec<&str> = described.iter().map(|(name, _, _)| name.as_str()).collect();
    let (rate_hz, layout) = match (rate_of(&names, options.rate_hz), times.as_deref().and_then(timestamps::rate)) {
        (Ok(known), _) => known,
        // No rate named: the one the timestamps keep (for step windows'
        // anchors; time windows read the timestamps themselves).
        (Err(_), Some(hz)) if options.rate_hz.is_none() => (hz, "replay-buffer"),
        (Err(problem), _) => return Err(layout_error(&store, "data", problem)),
    };

    let mut starts = Vec::with_capacity(ends.len());
    let mut episodes = Vec::with_capacity(ends.len());
    let mut start = 0;
    for (index, &end) in ends.iter().enumerate() {
        let len = (end - start) as usize;
        let timeline = match &times {
            Some(_) => Timeline::Explicit { key: format!("data/{}", timestamps::TIMESTAMP) },
            None => Timeline::Uniform { start: 0.0, hz: rate_hz },
        };
        let duration_s = match &times {
            Some(times) => times[index].last().copied().unwrap_or(0.0) - times[index].first().copied().unwrap_or(0.0),
            None => len.saturating_sub(1) as f64 / rate_hz,
        };
        let streams = described
            .iter()
            .map(|(name, dtype, step_shape)| StreamInfo {
                name: name.clone(),
                dtype: *dtype,
                step_shape: step_shape.clone(),
                len,
                kind: kind_of(name, *dtype, step_shape),
                timeline: timeline.clone(),
                source: format!("data/{name}"),
            })
            .collect();
        let mut metadata = Map::new();
        metadata.insert("rows".into(), Value::from(vec![start, end]));
        episodes.push(EpisodeInfo {
            name: format!("episode_{index}"),
            len,
            duration_s,
            streams,
            instruction: None,
            metadata,
        });
        starts.push(start);
        start = end;
    }
    let mut metadata = Map::new();
    metadata.insert("layout".into(), Value::from(layout));
    metadata.insert("zarr_format".into(), Value::from(zarr_format));
    if times.is_some() {
        metadata.insert("clock".into(), Value::from(format!("data/{}", timestamps::TIMESTAMP)));
    }
    if !ignored.is_empty() {
        metadata.insert("ignored".into(), Value::Object(ignored));
    }
    let info = DatasetInfo { path: path.to_path_buf(), format: ZARR, rate_hz, episodes, splits: Vec::new(), metadata };
    let chunk_caches = ChunkCaches::default();
    let image_streams = described
        .iter()
        .filter(|(name, dtype, step_shape)| {
            matches!(kind_of(name, *dtype, step_shape), StreamKind::All(ChannelKind::Image))
        })
        .map(|(name, _, _)| name.clone())
        .collect();
    Ok((Box::new(ReplayBuffer { store, arrays, starts, times, chunk_caches, image_streams }), info))
}

fn short(store: &ZarrStore, key: &str, rows: u64, total: u64) -> Error {
    layout_error(store, key, format!("has {rows} rows; {EPISODE_ENDS} ends the last episode at row {total}"))
}

/// `meta/episode_ends`: strictly increasing positive row numbers.
fn read_episode_ends(store: &ZarrStore, array: &Array<ZarrStore>) -> Result<Vec<u64>> {
    let shape = array.shape();
    if shape.len() != 1 {
        return Err(layout_error(store, EPISODE_ENDS, format!("has shape {shape:?}; episode ends are 1-D")));
    }
    if shape[0] > (1 << 24) {
        return Err(layout_error(store, EPISODE_ENDS, format!("claims {} episodes", shape[0])));
    }
    let all_rows: Range<u64> = 0..shape[0];
    let subset = ArraySubset::new_with_ranges(std::slice::from_ref(&all_rows));
    let ends: Vec<i64> = match array.data_type() {
        DataType::Int64 => array.retrieve_array_subset_elements::<i64>(&subset),
        DataType::Int32 => {
            array.retrieve_array_subset_elements::<i32>(&subset).map(|v| v.into_iter().map(i64::from).collect())
        }
        DataType::UInt32 => {
            array.retrieve_array_subset_elements::<u32>(&subset).map(|v| v.into_iter().map(i64::from).collect())
        }
        other => return Err(layout_error(store, EPISODE_ENDS, format!("is {other}; episode ends are integers"))),
    }
    .map_err(|e| layout_error(store, EPISODE_ENDS, format!("cannot be read: {e}")))?;
    if ends.is_empty() {
        return Err(layout_error(store, EPISODE_ENDS, "is empty: the buffer holds no episode"));
    }
    let mut previous = 0i64;
    let mut out = Vec::with_capacity(ends.len());
    for (index, &end) in ends.iter().enumerate() {
        if end <= previous {
            return Err(layout_error(
                store,
                EPISODE_ENDS,
                format!("entry {index} is {end} after {previous}: each episode must end after the one before, with at least one step"),
            ));
        }
        out.push(end as u64);
        previous = end;
    }
    Ok(out)
}

impl FormatReader for ReplayBuffer {
    fn read_rows_into(&self, episode: usize, stream: &StreamInfo, rows: Range<usize>, out: &mut [u8]) -> Result<()> {
        let start = self.starts[episode] + rows.start as u64;
        let end = self.starts[episode] + rows.end as u64;
        let array = self
            .arrays
            .get(&stream.name)
            .ok_or_else(|| Error::Invalid(format!("no array for stream `{}`", stream.name)))?;
        match array {
            DataArray::JpegXl(frames) => {
                let frame_bytes = frames.frame_bytes();
                for (row, frame) in (start..end).zip(out.chunks_exact_mut(frame_bytes.max(1))) {
                    frames.read_frame(&self.store, row as usize, frame)?;
                }
                Ok(())
            }
            DataArray::Zarrs(array) => {
                let rows: Range<u64> = start..end;
                let ranges: Vec<Range<u64>> =
                    std::iter::once(rows).chain(array.shape()[1..].iter().map(|&d| 0..d)).collect();
                let subset = ArraySubset::new_with_ranges(&ranges);
                let cache = self.chunk_caches.0.read().ok().and_then(|caches| caches.get(&stream.name).cloned());
                let bytes = match cache {
                    Some(cache) => array.retrieve_array_subset_opt_cached(&*cache, &subset, &CodecOptions::default()),
                    None => array.retrieve_array_subset(&subset),
                }
                .and_then(|bytes| bytes.into_fixed().map_err(Into::into))
                .map_err(|e| layout_error(&self.store, &stream.source, format!("rows {start}..{end}: {e}")))?;
                if bytes.len() != out.len() {
                    return Err(layout_error(
                        &self.store,
                        &stream.source,
                        format!("rows {start}..{end} decoded to {} bytes, expected {}", bytes.len(), out.len()),
                    ));
                }
                out.copy_from_slice(&bytes);
                Ok(())
            }
        }
    }

    fn explicit_times(&self, _: &DatasetInfo, episode: usize, stream: &StreamInfo, _: &str) -> Result<Arc<[f64]>> {
        match self.times.as_ref().and_then(|times| times.get(episode)) {
            Some(times) => Ok(times.clone()),
            None => Err(Error::Invalid(format!(
                "stream `{}`: this replay buffer has no data/{} array; its streams are on the step clock",
                stream.name,
                timestamps::TIMESTAMP
            ))),
        }
    }

    fn set_decoded_frames_budget(&self, bytes: usize) {
        let images: Vec<&String> = self
            .arrays
            .iter()
            .filter(|(name, array)| matches!(array, DataArray::Zarrs(_)) && self.image_streams.contains(*name))
            .map(|(name, _)| name)
            .collect();
        let Ok(mut caches) = self.chunk_caches.0.write() else { return };
        caches.clear();
        if bytes == 0 || images.is_empty() {
            return;
        }
        // The budget shared evenly: each array's chunks are keyed by their
        // indices in that array, so each array has its own cache.
        let share = (bytes / images.len()) as u64;
        for name in images {
            caches.insert(name.clone(), Arc::new(ChunkCacheDecodedLruSizeLimit::new(share)));
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

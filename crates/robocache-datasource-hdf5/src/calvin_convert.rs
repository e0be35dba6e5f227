//! `robocache convert calvin`: a native CALVIN split (one `.npz` per frame,
//! `ep_start_end_ids.npy`, `lang_annotations/auto_lang_ann.npy`) into
//! robocache's CALVIN HDF5 layout (see [`crate::formats::calvin`]).
//!
//! Frames are read one at a time and written in blocks of rows, so memory
//! stays at one block per key whatever the split's size.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use half::f16;
use hdf5::types::VarLenUnicode;
use hdf5::{Dataset, Group, H5Type};
use ndarray::{ArrayView, IxDyn};
use robocache_cpu::{DType, HostVec};
use serde_pickle::{HashableValue, Value};

use crate::calvin::RATE_HZ;
use crate::hdf5_file::row_selection;
use crate::hdf5_writer::{create_file, write_integer_attr, write_number_attr, write_string_attr};
use crate::npy::{read_array, read_pickled_object, NpyArray};
use crate::{LAYOUT_ATTRIBUTE, LAYOUT_VERSION, LAYOUT_VERSION_ATTRIBUTE};
use robocache_datasource::{Error, Result};

/// Bytes of rows buffered per key before they are written.
const BLOCK_BYTES: usize = 32 << 20;

/// Where a conversion is, for progress bars.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvertProgress {
    pub frames_done: usize,
    pub frames_total: usize,
}

/// What a conversion wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertSummary {
    pub segments: usize,
    pub frames: usize,
    pub annotations: usize,
    pub keys: Vec<String>,
}

/// Converts the native CALVIN split in `dir` into `output` (created or replaced).
pub fn convert_calvin(dir: &Path, output: &Path, mut progress: impl FnMut(ConvertProgress)) -> Result<ConvertSummary> {
    let ids_path = dir.join("ep_start_end_ids.npy");
    let segments = read_segments(&ids_path)?;
    let frames_total = segments.iter().map(|(s, e)| (e - s + 1) as usize).sum();
    let annotations = read_annotations(&dir.join("lang_annotations").join("auto_lang_ann.npy"))?;

    let hdf5_error = |location: &str| {
        let location = location.to_owned();
        move |e: hdf5::Error| Error::Hdf5 { file: output.to_path_buf(), location, message: e.to_string() }
    };
    let file = create_file(output)?;
    write_string_attr(&file, LAYOUT_ATTRIBUTE, "calvin").map_err(hdf5_error("/"))?;
    write_number_attr(&file, LAYOUT_VERSION_ATTRIBUTE, LAYOUT_VERSION).map_err(hdf5_error("/"))?;
    write_number_attr(&file, "control_frequency_hz", RATE_HZ).map_err(hdf5_error("/"))?;
    write_string_attr(&file, "source", &dir.display().to_string()).map_err(hdf5_error("/"))?;
    let segments_group = file.create_group("segments").map_err(hdf5_error("segments"))?;

    let mut frames_done = 0;
    let mut keys = Vec::new();
    for &(start, end) in &segments {
        let name = format!("segment_{start:07}");
        let location = format!("segments/{name}");
        let group = segments_group.create_group(&name).map_err(hdf5_error(&location))?;
        write_integer_attr(&group, "start_frame", start).map_err(hdf5_error(&location))?;
        write_integer_attr(&group, "end_frame", end).map_err(hdf5_error(&location))?;
        let len = (end - start + 1) as usize;
        let frame_ids: Vec<i64> = (start..=end).collect();
        group
            .new_dataset_builder()
            .with_data(&frame_ids)
            .create("frame_ids")
            .map_err(hdf5_error(&format!("{location}/frame_ids")))?;
        let mut writers: BTreeMap<String, KeyWriter> = BTreeMap::new();
        for (row, frame) in (start..=end).enumerate() {
            let path = dir.join(format!("episode_{frame:07}.npz"));
            for (key, array) in read_frame(&path)? {
                let writer = match writers.get_mut(&key) {
                    Some(writer) => writer,
                    None => {
                        if row != 0 {
                            return Err(convert_error(
                                &path,
                                format!("key `{key}` is missing from the earlier frames of segment {start}..={end}"),
                            ));
                        }
                        let writer = KeyWriter::new(&group, &location, &key, &array, len)?;
                        writers.entry(key.clone()).or_insert(writer)
                    }
                };
                writer.push(&path, &key, array)?;
            }
            for (key, writer) in &mut writers {
                if writer.rows_pushed != row + 1 {
                    return Err(convert_error(
                        &path,
                        format!("key `{key}` is missing (the segment's first frame has it)"),
                    ));
                }
                writer.flush_if_full(output)?;
            }
            frames_done += 1;
            progress(ConvertProgress { frames_done, frames_total });
        }
        for writer in writers.values_mut() {
            writer.flush(output)?;
        }
        for key in writers.keys() {
            if !keys.contains(key) {
                keys.push(key.clone());
            }
        }
    }

    if !annotations.is_empty() {
        let language = file.create_group("language").map_err(hdf5_error("language"))?;
        let strings = |values: Vec<&str>| -> Vec<VarLenUnicode> {
            values.into_iter().map(|s| s.parse().unwrap_or_default()).collect()
        };
        let text = strings(annotations.iter().map(|a| a.text.as_str()).collect());
        let task = strings(annotations.iter().map(|a| a.task.as_str()).collect());
        language.new_dataset_builder().with_data(&text).create("text").map_err(hdf5_error("language/text"))?;
        language.new_dataset_builder().with_data(&task).create("task").map_err(hdf5_error("language/task"))?;
        let starts: Vec<i64> = annotations.iter().map(|a| a.start).collect();
        let ends: Vec<i64> = annotations.iter().map(|a| a.end).collect();
        language
            .new_dataset_builder()
            .with_data(&starts)
            .create("start_frame")
            .map_err(hdf5_error("language/start_frame"))?;
        language
            .new_dataset_builder()
            .with_data(&ends)
            .create("end_frame")
            .map_err(hdf5_error("language/end_frame"))?;
        let width = annotations[0].embedding.len();
        if width > 0 && annotations.iter().all(|a| a.embedding.len() == width) {
            let flat: Vec<f32> = annotations.iter().flat_map(|a| a.embedding.iter().copied()).collect();
            let view = ArrayView::from_shape(IxDyn(&[annotations.len(), width]), &flat)
                .map_err(|e| convert_error(output, e.to_string()))?;
            language
                .new_dataset_builder()
                .with_data(view)
                .create("embedding")
                .map_err(hdf5_error("language/embedding"))?;
        }
    }
    file.flush().map_err(hdf5_error("/"))?;
    drop(segments_group);
    file.close().map_err(hdf5_error("/"))?;
    Ok(ConvertSummary { segments: segments.len(), frames: frames_total, annotations: annotations.len(), keys })
}

fn convert_error(file: &Path, problem: impl Into<String>) -> Error {
    Error::Convert { file: file.to_path_buf(), problem: problem.into() }
}

/// `ep_start_end_ids.npy`: `[K, 2]` integer (start, end) pairs, end inclusive.
fn read_segments(path: &Path) -> Result<Vec<(i64, i64)>> {
    let array = read_npy(path)?;
    let values: Vec<i64> = match &array.data {
        HostVec::I64(v) => v.clone(),
        HostVec::I32(v) => v.iter().map(|&x| i64::from(x)).collect(),
        HostVec::U32(v) => v.iter().map(|&x| i64::from(x)).collect(),
        HostVec::U64(v) => v.iter().map(|&x| x as i64).collect(),
        other => return Err(convert_error(path, format!("holds {}, expected integer frame ids", other.dtype()))),
    };
    if array.shape.len() != 2 || array.shape[1] != 2 {
        return Err(convert_error(path, format!("has shape {:?}, expected [K, 2] (start, end) pairs", array.shape)));
    }
    let pairs: Vec<(i64, i64)> = values.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    for (row, &(start, end)) in pairs.iter().enumerate() {
        if start < 0 || end < start {
            return Err(convert_error(
                path,
                format!("row {row}: ({start}, {end}) is not a start ≤ end pair of frame ids"),
            ));
        }
    }
    if pairs.is_empty() {
        return Err(convert_error(path, "lists no segments"));
    }
    Ok(pairs)
}

fn read_npy(path: &Path) -> Result<NpyArray> {
    let file = std::fs::File::open(path).map_err(|error| Error::Io { file: path.to_path_buf(), error })?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    let npy = npyz::NpyFile::new(std::io::BufReader::new(file))
        .map_err(|e| convert_error(path, format!("not a valid .npy file: {e}")))?;
    read_array(npy, len).map_err(|e| convert_error(path, e))
}

/// Every array of one frame's `.npz`, in the archive's order.
fn read_frame(path: &Path) -> Result<Vec<(String, NpyArray)>> {
    let mut archive = npyz::npz::NpzArchive::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => convert_error(path, "frame file missing (ep_start_end_ids.npy lists it)"),
        _ => convert_error(path, format!("not a valid .npz archive: {e}")),
    })?;
    let names: Vec<String> = archive.array_names().map(str::to_owned).collect();
    let mut arrays = Vec::with_capacity(names.len());
    for name in names {
        let npy = archive
            .by_name(&name)
            .map_err(|e| convert_error(path, format!("array `{name}`: {e}")))?
            .ok_or_else(|| convert_error(path, format!("array `{name}` is listed but absent")))?;
        let array = read_array(npy, u64::MAX).map_err(|e| convert_error(path, format!("array `{name}`: {e}")))?;
        arrays.push((name, array));
    }
    Ok(arrays)
}

/// Rows of one key of one segment, buffered and written in blocks.
struct KeyWriter {
    dataset: Dataset,
    location: String,
    dtype: DType,
    step_shape: Vec<usize>,
    buffer: Option<HostVec>,
    buffered_rows: usize,
    rows_written: usize,
    rows_pushed: usize,
    block_rows: usize,
}

impl KeyWriter {
    fn new(group: &Group, segment: &str, key: &str, first: &NpyArray, len: usize) -> Result<Self> {
        let location = format!("{segment}/{key}");
        let step_shape = first.shape.clone();
        let step: usize = step_shape.iter().product::<usize>().max(1);
        let step_bytes = step * first.data.dtype().size_in_bytes();
        let block_rows = (BLOCK_BYTES / step_bytes).clamp(1, len.max(1));
        // Chunks of one row for images (a window reads a few rows), larger for low-dim keys.
        let chunk_rows = if step_shape.len() >= 2 { 1 } else { len.clamp(1, 1024) };
        let mut shape = vec![len];
        shape.extend(&step_shape);
        let mut chunk = vec![chunk_rows];
        chunk.extend(&step_shape);
        fn create<T: H5Type>(group: &Group, key: &str, shape: &[usize], chunk: &[usize]) -> hdf5::Result<Dataset> {
            group.new_dataset::<T>().chunk(chunk.to_vec()).shape(shape.to_vec()).create(key)
        }
        let created = match first.data.dtype() {
            DType::Bool => create::<bool>(group, key, &shape, &chunk),
            DType::U8 => create::<u8>(group, key, &shape, &chunk),
            DType::U16 => create::<u16>(group, key, &shape, &chunk),
            DType::U32 => create::<u32>(group, key, &shape, &chunk),
            DType::U64 => create::<u64>(group, key, &shape, &chunk),
            DType::I8 => create::<i8>(group, key, &shape, &chunk),
            DType::I16 => create::<i16>(group, key, &shape, &chunk),
            DType::I32 => create::<i32>(group, key, &shape, &chunk),
            DType::I64 => create::<i64>(group, key, &shape, &chunk),
            DType::F16 => create::<f16>(group, key, &shape, &chunk),
            DType::F32 => create::<f32>(group, key, &shape, &chunk),
            DType::F64 => create::<f64>(group, key, &shape, &chunk),
            DType::BF16 => Err(hdf5::Error::from("bf16 has no HDF5 type".to_owned())),
        };
        let dataset = created.map_err(|e| Error::Hdf5 {
            file: PathBuf::from(group.filename()),
            location: location.clone(),
            message: e.to_string(),
        })?;
        Ok(KeyWriter {
            dataset,
            location,
            dtype: first.data.dtype(),
            step_shape,
            buffer: None,
            buffered_rows: 0,
            rows_written: 0,
            rows_pushed: 0,
            block_rows,
        })
    }

    fn push(&mut self, path: &Path, key: &str, array: NpyArray) -> Result<()> {
        if array.shape != self.step_shape || array.data.dtype() != self.dtype {
            return Err(convert_error(
                path,
                format!(
                    "key `{key}` is {} {:?} here but {} {:?} in the segment's first frame",
                    array.data.dtype(),
                    array.shape,
                    self.dtype,
                    self.step_shape
                ),
            ));
        }
        match &mut self.buffer {
            None => self.buffer = Some(array.data),
            Some(buffer) => append(buffer, array.data),
        }
        self.buffered_rows += 1;
        self.rows_pushed += 1;
        Ok(())
    }

    fn flush_if_full(&mut self, output: &Path) -> Result<()> {
        if self.buffered_rows >= self.block_rows {
            self.flush(output)?;
        }
        Ok(())
    }

    fn flush(&mut self, output: &Path) -> Result<()> {
        let Some(buffer) = self.buffer.take() else { return Ok(()) };
        let rows = self.rows_written..self.rows_written + self.buffered_rows;
        let mut shape = vec![self.buffered_rows];
        shape.extend(&self.step_shape);
        fn write<T: H5Type>(
            dataset: &Dataset,
            data: &[T],
            shape: &[usize],
            rows: std::ops::Range<usize>,
        ) -> hdf5::Result<()> {
            let view = ArrayView::from_shape(IxDyn(shape), data).map_err(|e| hdf5::Error::from(e.to_string()))?;
            dataset.as_writer().write_slice(view, row_selection(rows, shape.len()))
        }
        let written = match &buffer {
            HostVec::Bool(v) => write(&self.dataset, v, &shape, rows),
            HostVec::U8(v) => write(&self.dataset, v, &shape, rows),
            HostVec::U16(v) => write(&self.dataset, v, &shape, rows),
            HostVec::U32(v) => write(&self.dataset, v, &shape, rows),
            HostVec::U64(v) => write(&self.dataset, v, &shape, rows),
            HostVec::I8(v) => write(&self.dataset, v, &shape, rows),
            HostVec::I16(v) => write(&self.dataset, v, &shape, rows),
            HostVec::I32(v) => write(&self.dataset, v, &shape, rows),
            HostVec::I64(v) => write(&self.dataset, v, &shape, rows),
            HostVec::F16(v) => write(&self.dataset, v, &shape, rows),
            HostVec::F32(v) => write(&self.dataset, v, &shape, rows),
            HostVec::F64(v) => write(&self.dataset, v, &shape, rows),
            HostVec::BF16(_) => Err(hdf5::Error::from("bf16 has no HDF5 type".to_owned())),
        };
        written.map_err(|e| Error::Hdf5 {
            file: output.to_path_buf(),
            location: self.location.clone(),
            message: e.to_string(),
        })?;
        self.rows_written += self.buffered_rows;
        self.buffered_rows = 0;
        Ok(())
    }
}

fn append(buffer: &mut HostVec, more: HostVec) {
    match (buffer, more) {
        (HostVec::Bool(a), HostVec::Bool(b)) => a.extend(b),
        (HostVec::U8(a), HostVec::U8(b)) => a.extend(b),
        (HostVec::U16(a), HostVec::U16(b)) => a.extend(b),
        (HostVec::U32(a), HostVec::U32(b)) => a.extend(b),
        (HostVec::U64(a), HostVec::U64(b)) => a.extend(b),
        (HostVec::I8(a), HostVec::I8(b)) => a.extend(b),
        (HostVec::I16(a), HostVec::I16(b)) => a.extend(b),
        (HostVec::I32(a), HostVec::I32(b)) => a.extend(b),
        (HostVec::I64(a), HostVec::I64(b)) => a.extend(b),
        (HostVec::F16(a), HostVec::F16(b)) => a.extend(b),
        (HostVec::F32(a), HostVec::F32(b)) => a.extend(b),
        (HostVec::F64(a), HostVec::F64(b)) => a.extend(b),
        // push() checked the dtype against the first frame's.
        _ => {}
    }
}

/// One annotation of `auto_lang_ann.npy`.
#[derive(Debug)]
struct Annotation {
    text: String,
    task: String,
    start: i64,
    end: i64,
    embedding: Vec<f32>,
}

/// `lang_annotations/auto_lang_ann.npy` (absent: no annotations): a pickled
/// dict `{"language": {"ann", "task", "emb"}, "info": {"indx"}}`.
fn read_annotations(path: &Path) -> Result<Vec<Annotation>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(Error::Io { file: path.to_path_buf(), error }),
    };
    let value = read_pickled_object(&bytes).map_err(|e| convert_error(path, e))?;
    let root =
        find_dict_with(&value, "language").ok_or_else(|| convert_error(path, "no dict with a `language` key"))?;
    let language = dict_get(root, "language").ok_or_else(|| convert_error(path, "no `language` entry"))?;
    let info = dict_get(root, "info").ok_or_else(|| convert_error(path, "no `info` entry"))?;
    let strings = |dict: &Value, key: &str| -> Result<Vec<String>> {
        let list = dict_get(dict, key).ok_or_else(|| convert_error(path, format!("no `{key}` list")))?;
        sequence(list)
            .ok_or_else(|| convert_error(path, format!("`{key}` is not a list")))?
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Bytes(b) => Ok(String::from_utf8_lossy(b).into_owned()),
                other => Err(convert_error(path, format!("`{key}` holds {other:?}, not strings"))),
            })
            .collect()
    };
    let text = strings(language, "ann")?;
    let task = strings(language, "task")?;
    let ranges = dict_get(info, "indx").and_then(sequence).ok_or_else(|| convert_error(path, "no `info.indx` list"))?;
    let ranges: Vec<(i64, i64)> = ranges
        .iter()
        .enumerate()
        .map(|(row, pair)| match sequence(pair).map(|p| p.iter().map(integer).collect::<Vec<_>>()) {
            Some(p) if p.len() == 2 && p[0].is_some() && p[1].is_some() => Ok((p[0].unwrap_or(0), p[1].unwrap_or(0))),
            _ => Err(convert_error(path, format!("info.indx[{row}] is not a (start, end) pair"))),
        })
        .collect::<Result<_>>()?;
    if task.len() != text.len() || ranges.len() != text.len() {
        return Err(convert_error(
            path,
            format!(
                "language.ann has {}, language.task {} and info.indx {} entries; they must agree",
                text.len(),
                task.len(),
                ranges.len()
            ),
        ));
    }
    let embeddings = dict_get(language, "emb").map(ndarray_f32).transpose().map_err(|e| convert_error(path, e))?;
    let width = match &embeddings {
        Some((values, _)) if !text.is_empty() && values.len() % text.len() == 0 => values.len() / text.len(),
        _ => 0,
    };
    Ok((0..text.len())
        .map(|i| Annotation {
            text: text[i].clone(),
            task: task[i].clone(),
            start: ranges[i].0,
            end: ranges[i].1,
            embedding: embeddings.as_ref().map_or(Vec::new(), |(v, _)| v[i * width..(i + 1) * width].to_vec()),
        })
        .collect())
}

fn find_dict_with<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    match value {
        Value::Dict(_) if dict_get(value, key).is_some() => Some(value),
        Value::Dict(map) => map.values().find_map(|v| find_dict_with(v, key)),
        Value::List(items) | Value::Tuple(items) => items.iter().find_map(|v| find_dict_with(v, key)),
        _ => None,
    }
}

fn dict_get<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    let Value::Dict(map) = value else { return None };
    map.get(&HashableValue::String(key.to_owned())).or_else(|| map.get(&HashableValue::Bytes(key.as_bytes().to_vec())))
}

fn sequence(value: &Value) -> Option<&[Value]> {
    match value {
        Value::List(items) | Value::Tuple(items) => Some(items),
        _ => None,
    }
}

fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::I64(v) => Some(*v),
        Value::Int(v) => i64::try_from(v).ok(),
        // A NumPy integer scalar is pickled as (dtype, bytes): take the bytes.
        Value::Tuple(items) => items.iter().find_map(|v| match v {
            Value::Bytes(b) if b.len() == 8 => Some(i64::from_le_bytes(b[..8].try_into().ok()?)),
            Value::Bytes(b) if b.len() == 4 => Some(i64::from(i32::from_le_bytes(b[..4].try_into().ok()?))),
            _ => None,
        }),
        _ => None,
    }
}

/// A pickled float `ndarray` (its state tuple `(1, shape, dtype, fortran, bytes)`) as `f32`s.
fn ndarray_f32(value: &Value) -> Result<(Vec<f32>, Vec<usize>), String> {
    let items = sequence(value).ok_or("language.emb is not a NumPy array")?;
    let shape: Vec<usize> = items
        .iter()
        .find_map(|v| sequence(v).filter(|s| s.iter().all(|d| integer(d).is_some())))
        .map(|s| s.iter().filter_map(integer).map(|d| d as usize).collect())
        .ok_or("language.emb has no shape")?;
    let bytes = items
        .iter()
        .rev()
        .find_map(|v| match v {
            Value::Bytes(b) => Some(b),
            _ => None,
        })
        .ok_or("language.emb has no data bytes")?;
    let count: usize = shape.iter().product();
    if count == 0 {
        return Ok((Vec::new(), shape));
    }
    match bytes.len() / count {
        4 => Ok((bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(), shape)),
        8 => Ok((
            bytes
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32)
                .collect(),
            shape,
        )),
        _ => Err(format!("language.emb holds {} bytes for shape {shape:?}: not float32 or float64", bytes.len())),
    }
}

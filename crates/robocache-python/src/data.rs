//! Datasets and the loader: [`robocache::datasets::Dataset`] and
//! [`robocache::Loader`] as Python classes. Batches come out as
//! [`Array`]s; the Python `robocache.Loader` turns them into tensors.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use robocache::datasets::{
    Dataset as RustDataset, DeltaTimestamps, OpenOptions, Shard, ShardBy, StepWindowSpec, StorageOptions,
    TimeWindowSpec,
};
use robocache::{
    nvdec_device, DType, DecoderChoice, Device, FrameCacheBudget, Loader as RustLoader, LoaderConfig, LoaderMode,
    MaskKind, Normalization, NormalizationMode, Tensor, WindowSpec,
};

use crate::arrays::{Array, Owned};
use crate::dlpack::{capsule_of, View};
use crate::errors::{invalid, IntoPy};
use robocache::datasets::ros2::BagMapping;

/// A dataset file opened by its layout (RoboMimic, CALVIN, RT-X).
#[derive(Debug)]
#[pyclass(module = "robocache._native", frozen)]
pub struct Dataset {
    inner: Arc<RustDataset>,
}

#[pymethods]
impl Dataset {
    #[new]
    #[pyo3(signature = (path, format=None, split=None, rate_hz=None, cache_bytes=0, storage_options=None, remote_cache_dir=None, remote_cache_bytes=None, mapping_json=None, mapping_file=None))]
    fn open(
        py: Python<'_>,
        path: std::path::PathBuf,
        format: Option<&str>,
        split: Option<String>,
        rate_hz: Option<f64>,
        cache_bytes: usize,
        storage_options: Option<Vec<(String, String)>>,
        remote_cache_dir: Option<std::path::PathBuf>,
        remote_cache_bytes: Option<u64>,
        mapping_json: Option<String>,
        mapping_file: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let format =
            format.map(|f| f.parse().map_err(|e: String| invalid(format!("format {f:?}: {e}")))).transpose()?;
        let storage = storage_of(storage_options, remote_cache_dir, remote_cache_bytes);
        let bag_mapping = match (mapping_json, mapping_file) {
            (Some(json), _) => Some(BagMapping::from_json(&json)),
            (None, Some(file)) => Some(BagMapping::from_file(file)),
            (None, None) => None,
        }
        .transpose()
        .map_err(robocache::Error::from)
        .py_err()?;
        let options =
            OpenOptions { format, rate_hz, split, cache_bytes, storage, bag_mapping, ..OpenOptions::default() };
        let dataset = py.detach(|| RustDataset::open_with(&path, &options)).map_err(robocache::Error::from).py_err()?;
        Ok(Dataset { inner: Arc::new(dataset) })
    }

    /// The episode model as JSON (what `robocache inspect --json` prints).
    fn info_json(&self) -> PyResult<String> {
        serde_json::to_string(self.inner.info()).map_err(|e| invalid(format!("dataset info: {e}")))
    }

    /// What remote reads did: (requests, bytes fetched, bytes read from
    /// the node-local cache, reads retried).
    fn storage_usage(&self) -> (u64, u64, u64, u64) {
        let usage = self.inner.storage().usage();
        (usage.requests, usage.bytes_fetched, usage.bytes_from_cache, usage.retries)
    }

    /// Writes an RLDS split's sidecar index (beside the shards, or at
    /// `path`) and returns where it went.
    #[pyo3(signature = (path=None))]
    fn write_index(&self, py: Python<'_>, path: Option<std::path::PathBuf>) -> PyResult<String> {
        let written = py.detach(|| self.inner.write_index(path.as_deref())).map_err(robocache::Error::from).py_err()?;
        Ok(written.to_string_lossy().into_owned())
    }

    /// Writes the dataset as a LeRobot v3.0 root at `out` (the facade's
    /// `export_lerobot`), camera streams as `cameras` (`"video"`, a key
    /// frame every `key_frame_every` frames, or `"image"`): (episodes,
    /// frames, data files) written.
    #[allow(clippy::too_many_arguments)] // the keyword arguments of `Dataset.to_lerobot`
    #[pyo3(signature = (out, fps, streams, task, robot_type=None, cameras="video", key_frame_every=2))]
    fn export_lerobot(
        &self,
        py: Python<'_>,
        out: std::path::PathBuf,
        fps: f64,
        streams: Vec<String>,
        task: String,
        robot_type: Option<String>,
        cameras: &str,
        key_frame_every: u32,
    ) -> PyResult<(usize, usize, usize)> {
        let cameras = match cameras {
            "video" => robocache::datasets::CameraStorage::Video { key_frame_every },
            "image" => robocache::datasets::CameraStorage::Image,
            other => return Err(invalid(format!("cameras={other:?}: \"video\" or \"image\""))),
        };
        let export = robocache::lerobot_export::LeRobotExport { fps, streams, task, robot_type, cameras };
        let written =
            py.detach(|| robocache::lerobot_export::export_lerobot(&self.inner, &out, &export, |_, _| {})).py_err()?;
        Ok((written.episodes, written.frames, written.data_files))
    }

    /// The layout: `robomimic`, `calvin`, `rtx`, `rlds`, `lerobot` or `ros2`.
    #[getter]
    fn format(&self) -> String {
        self.inner.format().to_string()
    }

    /// Every row of every stream read on `threads` threads (the GIL
    /// released); what was read and every problem found, as JSON.
    fn verify_json(&self, py: Python<'_>, threads: usize) -> PyResult<String> {
        let report = py.detach(|| self.inner.verify(threads));
        serde_json::to_string(&report).map_err(|e| invalid(format!("verify report: {e}")))
    }
}

/// The loader's worker threads and its epochs.
#[derive(Debug)]
#[pyclass(module = "robocache._native", frozen)]
pub struct Loader {
    pub(crate) inner: Arc<RustLoader>,
}

/// Windows: `("times", hz, history, horizon, causal)`,
/// `("steps", seq_length, frame_stack, pad_seq_length, pad_frame_stack)`,
/// `("sequence", sequence_length, pad_before, pad_after)` (diffusion
/// policy's `SequenceSampler`) or `("deltas", [(stream, [offset_s, ...]),
/// ...], tolerance_s)` (LeRobot's `delta_timestamps`).
#[derive(Debug, FromPyObject)]
enum WindowsArg {
    // Before `Times`, whose shape a steps tuple also fits (pyo3 tries the
    // variants in order; the hz is always a float).
    Steps(String, usize, usize, bool, bool),
    Times(String, f64, usize, usize, bool),
    Sequence(String, usize, usize, usize),
    Deltas(String, Vec<(String, Vec<f64>)>, f64),
}

fn window_spec(windows: WindowsArg) -> PyResult<WindowSpec> {
    match windows {
        WindowsArg::Times(tag, hz, history, horizon, causal) if tag == "times" => {
            Ok(WindowSpec::Times(TimeWindowSpec { hz, history, horizon, causal }))
        }
        WindowsArg::Steps(tag, seq_length, frame_stack, pad_seq_length, pad_frame_stack) if tag == "steps" => {
            Ok(WindowSpec::Steps(StepWindowSpec {
                seq_length,
                frame_stack,
                pad_seq_length,
                pad_frame_stack,
                max_pad_after: None,
            }))
        }
        WindowsArg::Sequence(tag, sequence_length, pad_before, pad_after) if tag == "sequence" => {
            Ok(WindowSpec::Steps(StepWindowSpec::sequence(sequence_length, pad_before, pad_after)))
        }
        WindowsArg::Deltas(tag, deltas, tolerance_s) if tag == "deltas" => {
            Ok(WindowSpec::Deltas(DeltaTimestamps { deltas, tolerance_s }))
        }
        other => Err(invalid(format!(
            "windows {other:?}: expected ('times', hz, history, horizon, causal), ('steps', ...), ('sequence', ...) or \
             ('deltas', ...)"
        ))),
    }
}

#[pymethods]
impl Loader {
    #[new]
    #[pyo3(signature = (dataset, streams, windows, batch_size, device, seed, shuffle, rank, world_size, drop_last, workers, prefetch, normalization, mode, frame_cache_bytes=None, shard_by="windows", video_decoder="auto", frame_layout="hwc", frame_dtype="uint8", frame_size=None, frame_crop=None, device_frame_cache_bytes=0, nvdec_sessions=None, processes_per_node=1, augment_json=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        dataset: &Dataset,
        streams: Vec<String>,
        windows: WindowsArg,
        batch_size: usize,
        device: &str,
        seed: u64,
        shuffle: bool,
        rank: usize,
        world_size: usize,
        drop_last: bool,
        workers: usize,
        prefetch: usize,
        normalization: Option<&str>,
        mode: &str,
        frame_cache_bytes: Option<usize>,
        shard_by: &str,
        video_decoder: &str,
        frame_layout: &str,
        frame_dtype: &str,
        frame_size: Option<(usize, usize)>,
        frame_crop: Option<(usize, usize, usize, usize)>,
        device_frame_cache_bytes: usize,
        nvdec_sessions: Option<usize>,
        processes_per_node: usize,
        augment_json: Option<&str>,
    ) -> PyResult<Self> {
        let device =
            Device::from_request(device.parse().map_err(|e: String| invalid(format!("device: {e}")))?).py_err()?;
        let names: Vec<&str> = streams.iter().map(String::as_str).collect();
        let shard = Shard::new(rank, world_size).map_err(robocache::Error::from).py_err()?;
        let shard_by = match shard_by {
            "windows" => ShardBy::Windows,
            "episodes" => ShardBy::Episodes,
            other => return Err(invalid(format!("shard_by {other:?}: expected windows or episodes"))),
        };
        let video_decoders = match (video_decoder, nvdec_sessions) {
            ("auto", None) => None,
            ("auto", Some(nvdec_sessions)) => {
                Some(DecoderChoice::Auto { device: nvdec_device(&device).py_err()?, nvdec_sessions })
            }
            ("cpu" | "nvdec", Some(_)) => {
                return Err(invalid(format!(
                    "nvdec_sessions is for video_decoder=\"auto\" (NVDEC beside the CPU), not {video_decoder:?}"
                )))
            }
            ("cpu", None) => Some(DecoderChoice::Cpu),
            ("nvdec", None) => Some(DecoderChoice::Nvdec { device: nvdec_device(&device).py_err()? }),
            (other, _) => return Err(invalid(format!("video_decoder {other:?}: expected auto, cpu or nvdec"))),
        };
        let frames = crate::ops::frame_output(frame_layout, frame_dtype, frame_size, frame_crop)?;
        let augment = match augment_json {
            None => None,
            Some(json) => {
                let value: serde_json::Value =
                    serde_json::from_str(json).map_err(|e| invalid(format!("augment: not JSON: {e}")))?;
                Some(
                    robocache::augment::AugmentConfig::from_json(&value, &names)
                        .map_err(robocache::Error::from)
                        .py_err()?,
                )
            }
        };
        let mode = match mode {
            "auto" => LoaderMode::Auto,
            "resident" => LoaderMode::Resident,
            "streaming" => LoaderMode::Streaming,
            other => return Err(invalid(format!("mode {other:?}: expected auto, resident or streaming"))),
        };
        let normalization = match normalization {
            None => None,
            Some(name) => {
                let mode = normalization_mode(name)?;
                Some(py.detach(|| Normalization::compute_low_dimensional(&dataset.inner, &names, mode)).py_err()?)
            }
        };
        let config = LoaderConfig {
            seed,
            shuffle,
            shard,
            shard_by,
            drop_last,
            workers,
            prefetch,
            mode,
            normalization,
            // LeRobot's `{stream}_is_pad`, written so by the assembly.
            masks: MaskKind::Pad,
            // `Epoch::next_batch` hands batches to torch without a stream wait.
            wait_until_ready: true,
            frame_cache_bytes: match frame_cache_bytes {
                Some(bytes) => FrameCacheBudget::Bytes(bytes),
                None => FrameCacheBudget::Auto { processes_per_node },
            },
            video_decoders,
            frames,
            device_frame_cache_bytes,
            augment,
            ..LoaderConfig::new(&names, window_spec(windows)?, batch_size)
        };
        let dataset = dataset.inner.clone();
        let loader = py.detach(|| RustLoader::new(&device, dataset, config)).py_err()?;
        Ok(Loader { inner: Arc::new(loader) })
    }

    /// Batches this shard yields per epoch.
    fn batches_per_epoch(&self) -> usize {
        self.inner.batches_per_epoch()
    }

    /// Windows this shard yields per epoch.
    fn samples_per_epoch(&self) -> usize {
        self.inner.samples_per_epoch()
    }

    /// Windows of the whole dataset (all shards).
    fn windows(&self) -> usize {
        self.inner.windows()
    }

    /// The batches of `epoch` from `first_batch` on.
    fn epoch(&self, epoch: u64, first_batch: usize) -> Epoch {
        Epoch { inner: Mutex::new(self.inner.epoch_from(epoch, first_batch)) }
    }

    /// What the loader delivered (waits, stall, throughput, GPU use) as JSON.
    fn telemetry_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner.telemetry()).map_err(|e| invalid(format!("telemetry: {e}")))
    }

    /// What defines the loader's windows, as the JSON of a loader spec
    /// (`robocache::LoaderSpec`).
    fn spec_json(&self) -> PyResult<String> {
        self.inner.spec().and_then(|spec| spec.to_json()).py_err()
    }

    /// Forgets the telemetry so far (after warm-up).
    fn reset_telemetry(&self) {
        self.inner.reset_telemetry();
    }

    /// Evaluation mode on or off (the augmentation's evaluation transform
    /// instead of random draws, from the next batch assembled).
    fn set_evaluation(&self, on: bool) {
        self.inner.set_evaluation(on);
    }

    /// Whether the loader is in evaluation mode.
    fn evaluation(&self) -> bool {
        self.inner.evaluation()
    }

    /// Seconds the Rust consumer loop of `robocache bench loader` (each
    /// batch dropped as it arrives) takes for `batches` batches after 3
    /// warm-up ones, on this loader: the baseline `benches/python_loader.py`
    /// runs in the same process as Python's iteration.
    fn time_rust_consumer(&self, py: Python<'_>, batches: usize) -> PyResult<f64> {
        py.detach(|| self.inner.time_batches(batches)).py_err().map(|d| d.as_secs_f64())
    }
}

/// The batches of one epoch, assembled ahead by the loader's threads.
#[derive(Debug)]
#[pyclass(module = "robocache._native", frozen)]
pub struct Epoch {
    inner: Mutex<robocache::loader::Epoch>,
}

#[pymethods]
impl Epoch {
    /// The next batch, or None at the end, as one flat tuple: per stream its
    /// data `[B, T, ...]` and padding mask `[B, T]`, then the sample ids,
    /// the episode ids (`i64 [B]`) and the anchors (`f64 [B]`). With
    /// `capsules` each is a DLPack capsule (for `torch.from_dlpack`); else
    /// each stream part is an `Array` and the three columns are one `i64
    /// [3, B]` `Array` (row 2: the anchors' bits). `stream`: the consumer's
    /// CUDA stream, after which the batch's memory is freed and reused.
    fn next_batch<'py>(
        &self,
        py: Python<'py>,
        stream: Option<u64>,
        capsules: bool,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let next = py.detach(|| match self.inner.lock() {
            Ok(mut epoch) => Ok(epoch.next()),
            Err(_) => Err(robocache::Error::Internal("loader epoch: poisoned by a panic on another thread".into())),
        });
        let Some(batch) = next.py_err()? else { return Ok(None) };
        if let Some(stream) = stream {
            crate::streams::note(stream);
        }
        let batch = batch.py_err()?;
        let internal = |what: &str| crate::errors::to_py(robocache::Error::Internal(what.into()));
        if batch.streams.iter().any(|s| s.mask_kind != MaskKind::Pad) {
            return Err(internal("a loader batch with valid masks where padding masks were asked for"));
        }
        let columns = batch.columns.ok_or_else(|| internal("a loader batch without its columns"))?;
        let rows = batch.samples.len();
        let device = columns.device().clone();
        let columns_address = columns.data_address();
        // The batch is ready when handed over (the loader waits for its
        // device, `wait_until_ready`), so the consumer's stream needs no wait
        // to read it; the stream is remembered so that the memory is freed
        // after the consumer's work with it. One group: the parts share
        // memory, and one wait orders the whole batch's free.
        let tensors: Vec<Tensor> =
            batch.streams.into_iter().flat_map(|s| [s.data, s.mask]).chain(std::iter::once(columns)).collect();
        if !capsules {
            let arrays = Array::group(tensors, stream);
            return PyTuple::new(py, arrays.into_iter().map(|a| Bound::new(py, a)).collect::<PyResult<Vec<_>>>()?)
                .map(Some);
        }
        let parts = tensors.len() - 1;
        let owner = Owned::new(tensors, stream);
        let mut items = Vec::with_capacity(parts + 3);
        for tensor in &owner.tensors()[..parts] {
            let view = View { address: tensor.data_address(), shape: tensor.shape(), dtype: tensor.dtype() };
            items.push(capsule_of(py, owner.clone(), &device, &view)?);
        }
        for (row, dtype) in [(0, DType::I64), (1, DType::I64), (2, DType::F64)] {
            let view = View { address: columns_address + (row * rows * 8) as u64, shape: &[rows], dtype };
            items.push(capsule_of(py, owner.clone(), &device, &view)?);
        }
        PyTuple::new(py, items).map(Some)
    }
}

/// A grid of `dataset`'s camera frames under sampled augmentations
/// (`robocache.augment_preview`): (height, width, RGB bytes, camera); also
/// written as a PNG to `out` when given.
#[pyfunction]
#[pyo3(signature = (dataset, augment_json, camera=None, samples=4, draws=5, seed=0, frame_size=None, out=None))]
#[allow(clippy::too_many_arguments)]
fn augment_preview<'py>(
    py: Python<'py>,
    dataset: &Dataset,
    augment_json: &str,
    camera: Option<String>,
    samples: usize,
    draws: usize,
    seed: u64,
    frame_size: Option<(usize, usize)>,
    out: Option<std::path::PathBuf>,
) -> PyResult<(usize, usize, Bound<'py, pyo3::types::PyBytes>, String)> {
    let value: serde_json::Value =
        serde_json::from_str(augment_json).map_err(|e| invalid(format!("augment: not JSON: {e}")))?;
    let names: Vec<String> = dataset
        .inner
        .info()
        .episodes
        .first()
        .map(|e| e.streams.iter().map(|s| s.name.clone()).collect())
        .unwrap_or_default();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let config =
        robocache::augment::AugmentConfig::from_json(&value, &names).map_err(robocache::Error::from).py_err()?;
    let frames = crate::ops::frame_output("hwc", "uint8", frame_size, None)?;
    let request = robocache::augment_preview::PreviewRequest { camera, samples, draws, seed, frames };
    let inner = dataset.inner.clone();
    let grid = py
        .detach(|| {
            let grid = robocache::augment_preview::preview_grid(inner, &config, &request)?;
            if let Some(out) = &out {
                grid.save_png(out)?;
            }
            Ok::<_, robocache::Error>(grid)
        })
        .py_err()?;
    Ok((grid.height, grid.width, pyo3::types::PyBytes::new(py, &grid.pixels), grid.camera))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(augment_preview, m)?)?;
    m.add_class::<Dataset>()?;
    m.add_class::<Loader>()?;
    m.add_class::<Epoch>()?;
    Ok(())
}

/// A normalisation mode by its Python name.
pub(crate) fn normalization_mode(name: &str) -> PyResult<NormalizationMode> {
    match name {
        "zscore" => Ok(NormalizationMode::ZScore),
        "minmax" => Ok(NormalizationMode::MinMax),
        "percentile" => Ok(NormalizationMode::Percentile),
        other => Err(invalid(format!("normalization {other:?}: expected zscore, minmax, percentile or None"))),
    }
}

/// The topics of every bag at `path` as JSON (what `robocache inspect`
/// lists): per bag file and topic, its type, messages, rate, largest gap,
/// time range, out-of-order count and why it cannot be decoded, if so.
#[pyfunction]
#[pyo3(signature = (path, storage_options=None, remote_cache_dir=None, remote_cache_bytes=None))]
pub(crate) fn bag_topics_json(
    py: Python<'_>,
    path: std::path::PathBuf,
    storage_options: Option<Vec<(String, String)>>,
    remote_cache_dir: Option<std::path::PathBuf>,
    remote_cache_bytes: Option<u64>,
) -> PyResult<String> {
    let storage = storage_of(storage_options, remote_cache_dir, remote_cache_bytes);
    let topics = py
        .detach(|| robocache::datasets::ros2::topic_stats(&path, &storage))
        .map_err(robocache::Error::from)
        .py_err()?;
    serde_json::to_string(&topics).map_err(|e| invalid(format!("bag topics: {e}")))
}

/// Every message of every topic of the bags at `path` decoded (what
/// `robocache inspect --decode` runs), as JSON: per bag file and topic, the
/// messages and bytes decoded and the first error, if any.
#[pyfunction]
#[pyo3(signature = (path, storage_options=None, remote_cache_dir=None, remote_cache_bytes=None, threads=0))]
pub(crate) fn bag_decode_json(
    py: Python<'_>,
    path: std::path::PathBuf,
    storage_options: Option<Vec<(String, String)>>,
    remote_cache_dir: Option<std::path::PathBuf>,
    remote_cache_bytes: Option<u64>,
    threads: usize,
) -> PyResult<String> {
    let storage = storage_of(storage_options, remote_cache_dir, remote_cache_bytes);
    let decoded = py
        .detach(|| robocache::datasets::ros2::decode_messages(&path, &storage, threads))
        .map_err(robocache::Error::from)
        .py_err()?;
    serde_json::to_string(&decoded).map_err(|e| invalid(format!("bag decode: {e}")))
}

/// Every message of `topic` in the bags at `path`, decoded
/// (`robocache_datasets::ros2::bag_messages`): per message a dict of
/// `file`, `index`, `log_time_ns`, `publish_time_ns` and `value`.
#[pyfunction]
#[pyo3(signature = (path, topic, storage_options=None, remote_cache_dir=None, remote_cache_bytes=None))]
pub(crate) fn bag_messages<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
    topic: String,
    storage_options: Option<Vec<(String, String)>>,
    remote_cache_dir: Option<std::path::PathBuf>,
    remote_cache_bytes: Option<u64>,
) -> PyResult<Vec<Bound<'py, pyo3::types::PyDict>>> {
    let storage = storage_of(storage_options, remote_cache_dir, remote_cache_bytes);
    let messages = py
        .detach(|| robocache::datasets::ros2::bag_messages(&path, &topic, &storage))
        .map_err(robocache::Error::from)
        .py_err()?;
    messages
        .into_iter()
        .map(|message| {
            let dict = pyo3::types::PyDict::new(py);
            dict.set_item("file", message.file.display().to_string())?;
            dict.set_item("index", message.index)?;
            dict.set_item("log_time_ns", message.log_time_ns)?;
            dict.set_item("publish_time_ns", message.publish_time_ns)?;
            dict.set_item("value", message_value(py, &message.value)?)?;
            Ok(dict)
        })
        .collect()
}

/// A decoded message value as Python objects: dicts, lists, bytes, numbers.
fn message_value<'py>(py: Python<'py>, value: &robocache::datasets::ros2::MessageValue) -> PyResult<Bound<'py, PyAny>> {
    use robocache::datasets::ros2::MessageValue;
    Ok(match value {
        MessageValue::Bool(b) => pyo3::types::PyBool::new(py, *b).to_owned().into_any(),
        MessageValue::Int(i) => i.into_pyobject(py)?.into_any(),
        MessageValue::UInt(u) => u.into_pyobject(py)?.into_any(),
        MessageValue::Float(f) => f.into_pyobject(py)?.into_any(),
        MessageValue::Str(s) => s.into_pyobject(py)?.into_any(),
        MessageValue::Bytes(b) => pyo3::types::PyBytes::new(py, b).into_any(),
        MessageValue::List(items) => {
            let list = pyo3::types::PyList::empty(py);
            for item in items {
                list.append(message_value(py, item)?)?;
            }
            list.into_any()
        }
        MessageValue::Struct(fields) => {
            let dict = pyo3::types::PyDict::new(py);
            for (name, field) in fields {
                dict.set_item(name, message_value(py, field)?)?;
            }
            dict.into_any()
        }
    })
}

/// One point cloud as `bag_point_clouds` passes it to Python: bag file,
/// log time, header stamp (ns), frame, positions and features (f32 bytes,
/// native order).
type CloudTuple<'py> = (String, u64, i128, String, Bound<'py, pyo3::types::PyBytes>, Bound<'py, pyo3::types::PyBytes>);

/// The `sensor_msgs/PointCloud2` messages of `topic` in every bag at
/// `path`: per message its positions and the fields named in `features`
/// as f32 (`robocache_datasets::ros2::point_clouds`).
#[pyfunction]
#[pyo3(signature = (path, topic, features, storage_options=None, remote_cache_dir=None, remote_cache_bytes=None))]
pub(crate) fn bag_point_clouds<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
    topic: String,
    features: Vec<String>,
    storage_options: Option<Vec<(String, String)>>,
    remote_cache_dir: Option<std::path::PathBuf>,
    remote_cache_bytes: Option<u64>,
) -> PyResult<Vec<CloudTuple<'py>>> {
    let storage = storage_of(storage_options, remote_cache_dir, remote_cache_bytes);
    let names: Vec<&str> = features.iter().map(String::as_str).collect();
    let clouds = py
        .detach(|| robocache::datasets::ros2::point_clouds(&path, &topic, &names, &storage))
        .map_err(robocache::Error::from)
        .py_err()?;
    let bytes = |values: &[f32]| {
        pyo3::types::PyBytes::new(py, &values.iter().flat_map(|v| v.to_ne_bytes()).collect::<Vec<u8>>())
    };
    Ok(clouds
        .into_iter()
        .map(|c| {
            let file = c.file.display().to_string();
            (file, c.log_time_ns, c.stamp_ns, c.frame_id.clone(), bytes(&c.positions), bytes(&c.features))
        })
        .collect())
}

/// The storage options a Python call passes (`storage_options`,
/// `remote_cache_dir`, `remote_cache_bytes`).
fn storage_of(
    options: Option<Vec<(String, String)>>,
    cache_dir: Option<std::path::PathBuf>,
    cache_bytes: Option<u64>,
) -> StorageOptions {
    StorageOptions { cache_dir, cache_bytes, options: options.unwrap_or_default() }
}

//! Datasets and the loader: [`robocache::datasets::Dataset`] and
//! [`robocache::Loader`] as Python classes. Batches come out as
//! [`Array`]s; the Python `robocache.Loader` turns them into tensors.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use robocache::datasets::{Dataset as RustDataset, OpenOptions, Shard, StepWindowSpec, TimeWindowSpec};
use robocache::{Device, Loader as RustLoader, LoaderConfig, LoaderMode, Normalization, NormalizationMode, WindowSpec};

use crate::arrays::Array;
use crate::errors::{invalid, IntoPy};

/// A dataset file opened by its layout (RoboMimic, CALVIN, RT-X).
#[derive(Debug)]
#[pyclass(module = "robocache._native", frozen)]
pub struct Dataset {
    inner: Arc<RustDataset>,
}

#[pymethods]
impl Dataset {
    #[new]
    #[pyo3(signature = (path, format=None, split=None, rate_hz=None, cache_bytes=0))]
    fn open(
        py: Python<'_>,
        path: std::path::PathBuf,
        format: Option<&str>,
        split: Option<String>,
        rate_hz: Option<f64>,
        cache_bytes: usize,
    ) -> PyResult<Self> {
        let format =
            format.map(|f| f.parse().map_err(|e: String| invalid(format!("format {f:?}: {e}")))).transpose()?;
        let options = OpenOptions { format, rate_hz, split, cache_bytes, ..OpenOptions::default() };
        let dataset = py.detach(|| RustDataset::open_with(&path, &options)).map_err(robocache::Error::from).py_err()?;
        Ok(Dataset { inner: Arc::new(dataset) })
    }

    /// The episode model as JSON (what `robocache inspect --json` prints).
    fn info_json(&self) -> PyResult<String> {
        serde_json::to_string(self.inner.info()).map_err(|e| invalid(format!("dataset info: {e}")))
    }

    /// The layout: `robomimic`, `calvin`, `rtx` or `rlds`.
    #[getter]
    fn format(&self) -> String {
        self.inner.format().to_string()
    }
}

/// The loader's worker threads and its epochs.
#[derive(Debug)]
#[pyclass(module = "robocache._native", frozen)]
pub struct Loader {
    inner: Arc<RustLoader>,
    device: Device,
}

/// Windows: `("times", hz, history, horizon)` or
/// `("steps", seq_length, frame_stack, pad_seq_length, pad_frame_stack)`.
#[derive(Debug, FromPyObject)]
enum WindowsArg {
    Times(String, f64, usize, usize),
    Steps(String, usize, usize, bool, bool),
}

fn window_spec(windows: WindowsArg) -> PyResult<WindowSpec> {
    match windows {
        WindowsArg::Times(tag, hz, history, horizon) if tag == "times" => {
            Ok(WindowSpec::Times(TimeWindowSpec { hz, history, horizon }))
        }
        WindowsArg::Steps(tag, seq_length, frame_stack, pad_seq_length, pad_frame_stack) if tag == "steps" => {
            Ok(WindowSpec::Steps(StepWindowSpec { seq_length, frame_stack, pad_seq_length, pad_frame_stack }))
        }
        other => Err(invalid(format!("windows {other:?}: expected ('times', hz, history, horizon) or ('steps', ...)"))),
    }
}

#[pymethods]
impl Loader {
    #[new]
    #[pyo3(signature = (dataset, streams, windows, batch_size, device, seed, shuffle, rank, world_size, drop_last, workers, prefetch, normalization, mode))]
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
    ) -> PyResult<Self> {
        let device =
            Device::from_request(device.parse().map_err(|e: String| invalid(format!("device: {e}")))?).py_err()?;
        let names: Vec<&str> = streams.iter().map(String::as_str).collect();
        let shard = Shard::new(rank, world_size).map_err(robocache::Error::from).py_err()?;
        let mode = match mode {
            "auto" => LoaderMode::Auto,
            "resident" => LoaderMode::Resident,
            "streaming" => LoaderMode::Streaming,
            other => return Err(invalid(format!("mode {other:?}: expected auto, resident or streaming"))),
        };
        let normalization = match normalization {
            None => None,
            Some(name) => {
                let mode = match name {
                    "zscore" => NormalizationMode::ZScore,
                    "minmax" => NormalizationMode::MinMax,
                    "percentile" => NormalizationMode::Percentile,
                    other => {
                        return Err(invalid(format!(
                            "normalization {other:?}: expected zscore, minmax, percentile or None"
                        )))
                    }
                };
                Some(py.detach(|| Normalization::compute(&dataset.inner, &names, mode)).py_err()?)
            }
        };
        let config = LoaderConfig {
            seed,
            shuffle,
            shard,
            drop_last,
            workers,
            prefetch,
            mode,
            normalization,
            ..LoaderConfig::new(&names, window_spec(windows)?, batch_size)
        };
        let dataset = dataset.inner.clone();
        let loader = py.detach(|| RustLoader::new(&device, dataset, config)).py_err()?;
        Ok(Loader { inner: Arc::new(loader), device })
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
        Epoch { inner: Mutex::new(self.inner.epoch_from(epoch, first_batch)), device: self.device.clone() }
    }

    /// What the loader delivered (waits, stall, throughput, GPU use) as JSON.
    fn telemetry_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner.telemetry()).map_err(|e| invalid(format!("telemetry: {e}")))
    }

    /// Forgets the telemetry so far (after warm-up).
    fn reset_telemetry(&self) {
        self.inner.reset_telemetry();
    }
}

/// One batch: per stream `(name, data, valid)`, then the per-row columns
/// as one `i64 [3, B]` array on the loader's device: sample ids, episode
/// ids, and the anchors' `f64` bits (one upload; Python views row 2 as f64).
type BatchParts = (Vec<(String, Array, Array)>, Array);

/// The batches of one epoch, assembled ahead by the loader's threads.
#[derive(Debug)]
#[pyclass(module = "robocache._native", frozen)]
pub struct Epoch {
    inner: Mutex<robocache::loader::Epoch>,
    device: Device,
}

#[pymethods]
impl Epoch {
    /// The next batch, or None at the end. `stream`: the consumer's CUDA
    /// stream, after which freed batch memory is reused.
    fn next_batch(&self, py: Python<'_>, stream: Option<u64>) -> PyResult<Option<BatchParts>> {
        let next = py.detach(|| match self.inner.lock() {
            Ok(mut epoch) => Ok(epoch.next()),
            Err(_) => Err(robocache::Error::Internal("loader epoch: poisoned by a panic on another thread".into())),
        });
        let Some(batch) = next.py_err()? else { return Ok(None) };
        let batch = batch.py_err()?;
        let rows = batch.samples.len();
        let columns: Vec<i64> = (batch.samples.iter().map(|&s| s as i64))
            .chain(batch.episodes.iter().map(|&e| e as i64))
            .chain(batch.anchors.iter().map(|a| a.to_bits() as i64))
            .collect();
        let columns = py
            .detach(|| {
                let columns = robocache::Tensor::from_slice(&self.device, &columns, &[3, rows])?;
                // The batch's streams are ready (the loader waits for them);
                // the columns' upload is ordered before the consumer's stream.
                if let Some(stream) = stream {
                    self.device.make_external_stream_wait(stream)?;
                }
                Ok::<_, robocache::Error>(columns)
            })
            .py_err()?;
        // One group: the batch's parts share memory, and one wait for the
        // consumer's stream orders its free.
        let names: Vec<String> = batch.streams.iter().map(|s| s.name.clone()).collect();
        let tensors = batch.streams.into_iter().flat_map(|s| [s.data, s.valid]).chain([columns]).collect();
        let mut arrays = Array::group(tensors, stream);
        let columns = arrays.pop();
        let mut parts = arrays.into_iter();
        let streams: Option<Vec<_>> =
            names.into_iter().map(|name| Some((name, parts.next()?, parts.next()?))).collect();
        match (streams, columns) {
            (Some(streams), Some(columns)) => Ok(Some((streams, columns))),
            _ => {
                Err(crate::errors::to_py(robocache::Error::Internal("a batch's parts do not match its streams".into())))
            }
        }
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Dataset>()?;
    m.add_class::<Loader>()?;
    m.add_class::<Epoch>()?;
    Ok(())
}

//! Mixtures for Python: `MixtureSampler` (the facade's weighted mixture
//! sampler: each epoch's `(dataset, window)` positions) and `MixtureLoader`
//! (the facade's batches of several datasets' loaders). Arguments and
//! results are converted here; sampling and batching are the facade's.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use robocache::datasets::{EpochLength, MixturePart, MixtureSampler, MixtureWeights, Shard, ShardBy};
use robocache::loader::mixture::{MemberKey, MixtureBatch, MixtureConfig, MixtureEpoch, MixtureLoader, MixtureMember};
use robocache::Tensor;

use crate::arrays::{Array, Owned};
use crate::data::Loader;
use crate::dlpack::{capsule_of, View};
use crate::errors::{invalid, IntoPy};

/// The weight convention and epoch length of Python's arguments.
fn weights_and_length(
    convention: &str,
    epoch_windows: Option<usize>,
    until_exhausted: Option<usize>,
    total: usize,
) -> PyResult<(MixtureWeights, EpochLength)> {
    let convention = match convention {
        "sample" => MixtureWeights::Sample,
        "balance" => MixtureWeights::Balance,
        other => return Err(invalid(format!("weights {other:?}: expected \"sample\" or \"balance\""))),
    };
    let length = match (epoch_windows, until_exhausted) {
        (Some(n), None) => EpochLength::Windows(n),
        (None, Some(index)) => EpochLength::UntilExhausted(index),
        (None, None) => EpochLength::Windows(total),
        (Some(_), Some(_)) => return Err(invalid("pass epoch_windows= or until_exhausted=, not both")),
    };
    Ok((convention, length))
}

/// Epoch orders of a weighted mixture of datasets for one rank.
#[pyclass(module = "robocache._native", frozen, name = "MixtureSampler")]
#[derive(Debug)]
pub struct PyMixtureSampler {
    inner: MixtureSampler,
}

#[pymethods]
impl PyMixtureSampler {
    #[new]
    #[pyo3(signature = (names, windows, weights, convention, epoch_windows, until_exhausted, seed, rank, world_size, episodes))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        names: Vec<String>,
        windows: Vec<usize>,
        weights: Vec<f64>,
        convention: &str,
        epoch_windows: Option<usize>,
        until_exhausted: Option<usize>,
        seed: u64,
        rank: usize,
        world_size: usize,
        episodes: Option<Vec<Vec<usize>>>,
    ) -> PyResult<Self> {
        if names.len() != windows.len() || weights.len() != windows.len() {
            return Err(invalid(format!(
                "{} names, {} window counts and {} weights: one of each per dataset",
                names.len(),
                windows.len(),
                weights.len()
            )));
        }
        let (convention, length) =
            weights_and_length(convention, epoch_windows, until_exhausted, windows.iter().sum())?;
        let shard_by = if episodes.is_some() { ShardBy::Episodes } else { ShardBy::Windows };
        if let Some(episodes) = &episodes {
            if episodes.len() != windows.len() {
                return Err(invalid(format!("{} episode lists for {} datasets", episodes.len(), windows.len())));
            }
        }
        let mut episodes = episodes.map(|e| e.into_iter().map(Some).collect::<Vec<_>>());
        let parts = names
            .into_iter()
            .zip(windows)
            .zip(weights)
            .enumerate()
            .map(|(i, ((name, windows), weight))| MixturePart {
                episode_of: episodes.as_mut().and_then(|e| e[i].take()),
                ..MixturePart::new(name, windows, weight)
            })
            .collect();
        let shard = Shard::new(rank, world_size).map_err(robocache::Error::from).py_err()?;
        let inner = MixtureSampler::new(parts, convention, length, seed, shard, shard_by)
            .map_err(robocache::Error::from)
            .py_err()?;
        Ok(PyMixtureSampler { inner })
    }

    /// This rank's positions of epoch `epoch` from its `start`-th on, as
    /// `(dataset index, window)` pairs.
    #[pyo3(signature = (epoch, start=0))]
    fn epoch(&self, py: Python<'_>, epoch: u64, start: usize) -> Vec<(usize, usize)> {
        py.detach(|| self.inner.epoch_from(epoch, start).into_iter().map(|s| (s.part, s.window)).collect())
    }

    /// Each dataset's share of an epoch (summing to 1).
    #[getter]
    fn shares(&self) -> Vec<f64> {
        self.inner.shares().to_vec()
    }

    /// Each dataset's positions per epoch, all ranks together.
    #[getter]
    fn counts(&self) -> Vec<usize> {
        self.inner.counts().to_vec()
    }

    /// Positions per epoch, all ranks together.
    #[getter]
    fn epoch_len(&self) -> usize {
        self.inner.epoch_len()
    }

    /// Positions per epoch on this rank.
    fn __len__(&self) -> usize {
        self.inner.shard_len()
    }
}

/// Batches of several datasets' loaders, weighted (the facade's `MixtureLoader`).
#[pyclass(module = "robocache._native", frozen, name = "MixtureLoader")]
#[derive(Debug)]
pub struct PyMixtureLoader {
    inner: Arc<MixtureLoader>,
}

/// The batches of one epoch of a mixture, assembled ahead by its workers.
#[pyclass(module = "robocache._native", frozen, name = "MixtureEpoch")]
#[derive(Debug)]
pub struct PyMixtureEpoch {
    inner: std::sync::Mutex<MixtureEpoch>,
}

#[pymethods]
impl PyMixtureLoader {
    #[new]
    #[pyo3(signature = (loaders, names, weights, keys, streams, batch_size, convention, epoch_windows, until_exhausted, seed, rank, world_size, drop_last, workers, prefetch, batches_together))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        loaders: Vec<PyRef<'_, Loader>>,
        names: Vec<String>,
        weights: Vec<f64>,
        keys: Vec<Vec<KeyEntry>>,
        streams: Vec<String>,
        batch_size: usize,
        convention: &str,
        epoch_windows: Option<usize>,
        until_exhausted: Option<usize>,
        seed: u64,
        rank: usize,
        world_size: usize,
        drop_last: bool,
        workers: usize,
        prefetch: usize,
        batches_together: Option<usize>,
    ) -> PyResult<Self> {
        if names.len() != loaders.len() || weights.len() != loaders.len() || keys.len() != loaders.len() {
            return Err(invalid(format!(
                "{} loaders, {} names, {} weights and {} key maps: one of each per dataset",
                loaders.len(),
                names.len(),
                weights.len(),
                keys.len()
            )));
        }
        let Some(first) = loaders.first() else {
            return Err(invalid("a mixture needs at least one loader"));
        };
        let device = first.inner.device().clone();
        let total = loaders.iter().map(|l| l.inner.windows()).sum();
        let (weights_convention, epoch) = weights_and_length(convention, epoch_windows, until_exhausted, total)?;
        let members = loaders
            .iter()
            .zip(names)
            .zip(weights)
            .zip(keys)
            .map(|(((loader, name), weight), keys)| {
                let keys = keys
                    .into_iter()
                    .map(|(mixed, kind, streams, values)| Ok((mixed, member_key(&kind, streams, values)?)))
                    .collect::<PyResult<_>>()?;
                Ok(MixtureMember { name, loader: Arc::clone(&loader.inner), weight, keys })
            })
            .collect::<PyResult<_>>()?;
        let shard = Shard::new(rank, world_size).map_err(robocache::Error::from).py_err()?;
        let config = MixtureConfig {
            streams,
            batch_size,
            weights: weights_convention,
            epoch,
            seed,
            shard,
            drop_last,
            workers,
            prefetch,
            batches_together,
        };
        Ok(PyMixtureLoader { inner: Arc::new(MixtureLoader::new(&device, members, config).py_err()?) })
    }

    fn batches_per_epoch(&self) -> usize {
        self.inner.batches_per_epoch()
    }

    /// Per dataset: windows delivered, share against the weights', seconds
    /// and the waits it caused, as JSON.
    fn telemetry_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner.telemetry()).map_err(|e| invalid(format!("telemetry: {e}")))
    }

    /// Each dataset's share of an epoch.
    #[getter]
    fn shares(&self) -> Vec<f64> {
        self.inner.sampler().shares().to_vec()
    }

    /// What a saved position is valid for (`MixtureSampler::fingerprint`).
    #[getter]
    fn fingerprint(&self) -> String {
        self.inner.sampler().fingerprint()
    }

    /// The normalisation statistics of each group `(name, member indices)`
    /// under the mixture's stream names, as JSON (the facade's
    /// `MixtureLoader::statistics`).
    fn statistics_json(&self, py: Python<'_>, groups: Vec<(String, Vec<usize>)>, mode: &str) -> PyResult<String> {
        let mode = crate::data::normalization_mode(mode)?;
        let statistics = py.detach(|| self.inner.statistics(&groups, mode)).py_err()?;
        serde_json::to_string(&statistics).map_err(|e| invalid(format!("statistics: {e}")))
    }

    /// The spec of member `member` as the mixture trained it, as JSON (the
    /// facade's `MixtureLoader::spec`); `statistics_json`: its group's
    /// merged statistics, recorded in it.
    #[pyo3(signature = (member, statistics_json=None))]
    fn spec_json(&self, py: Python<'_>, member: usize, statistics_json: Option<&str>) -> PyResult<String> {
        let statistics = statistics_json
            .map(serde_json::from_str::<robocache::loader::Normalization>)
            .transpose()
            .map_err(|e| invalid(format!("statistics: {e}")))?;
        let spec = py.detach(|| self.inner.spec(member, statistics)).py_err()?;
        spec.to_json().py_err()
    }

    /// The batches of epoch `epoch` from batch `first_batch` on, assembled
    /// by the mixture's workers ahead of the consumer.
    fn epoch(&self, epoch: u64, first_batch: usize) -> PyMixtureEpoch {
        PyMixtureEpoch { inner: std::sync::Mutex::new(self.inner.epoch(epoch, first_batch)) }
    }

    /// Batch `index` of epoch `epoch`, assembled now (see `batch_tuple`).
    fn batch<'py>(
        &self,
        py: Python<'py>,
        epoch: u64,
        index: usize,
        stream: Option<u64>,
        capsules: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let batch = py.detach(|| self.inner.batch_of_epoch(epoch, index)).py_err()?;
        batch_tuple(py, batch, stream, capsules)
    }
}

#[pymethods]
impl PyMixtureEpoch {
    /// The next batch (see `batch_tuple`), or None at the end.
    fn next_batch<'py>(
        &self,
        py: Python<'py>,
        stream: Option<u64>,
        capsules: bool,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let next = py.detach(|| match self.inner.lock() {
            Ok(mut epoch) => Ok(epoch.next()),
            Err(_) => Err(robocache::Error::Internal("mixture epoch: poisoned by a panic on another thread".into())),
        });
        let Some(batch) = next.py_err()? else { return Ok(None) };
        batch_tuple(py, batch.py_err()?, stream, capsules).map(Some)
    }
}

/// A mixture batch as one flat tuple: per stream its data, step padding
/// mask and `dim_is_pad`, then each row's dataset and window (`i64 [B]`
/// each). With `capsules` each is a DLPack capsule, else an `Array`.
/// `stream`: the consumer's CUDA stream.
fn batch_tuple<'py>(
    py: Python<'py>,
    batch: MixtureBatch,
    stream: Option<u64>,
    capsules: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    if let Some(stream) = stream {
        crate::streams::note(stream);
    }
    let device = batch
        .streams
        .first()
        .map(|s| s.data.device().clone())
        .ok_or_else(|| invalid("a mixture batch without streams"))?;
    let as_i64 = |values: &[usize]| -> PyResult<Tensor> {
        let values: Vec<i64> = values.iter().map(|&v| v as i64).collect();
        Tensor::from_slice(&device, &values, &[values.len()]).py_err()
    };
    let (datasets, windows) = (as_i64(&batch.datasets)?, as_i64(&batch.windows)?);
    let tensors: Vec<Tensor> =
        batch.streams.into_iter().flat_map(|s| [s.data, s.mask, s.dim_is_pad]).chain([datasets, windows]).collect();
    if !capsules {
        let arrays = Array::group(tensors, stream);
        return PyTuple::new(py, arrays.into_iter().map(|a| Bound::new(py, a)).collect::<PyResult<Vec<_>>>()?);
    }
    let count = tensors.len();
    let owner = Owned::new(tensors, stream);
    let mut items = Vec::with_capacity(count);
    for tensor in owner.tensors() {
        let view = View { address: tensor.data_address(), shape: tensor.shape(), dtype: tensor.dtype() };
        items.push(capsule_of(py, owner.clone(), &device, &view)?);
    }
    PyTuple::new(py, items)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMixtureSampler>()?;
    m.add_class::<PyMixtureLoader>()?;
    m.add_class::<PyMixtureEpoch>()
}

/// A key-map entry as `_mixture.py` passes it: `(mixture name, kind, streams, values)`.
type KeyEntry = (String, String, Vec<String>, Vec<f64>);

/// A key-map entry's source as `_mixture.py` passes it: `("stream", [name], [])`,
/// `("concat", names, [])` or `("constant", [], values)`.
fn member_key(kind: &str, streams: Vec<String>, values: Vec<f64>) -> PyResult<MemberKey> {
    match (kind, streams.as_slice()) {
        ("stream", [name]) => Ok(MemberKey::Stream(name.clone())),
        ("concat", _) => Ok(MemberKey::Concat(streams)),
        ("constant", []) => Ok(MemberKey::Constant(values)),
        _ => Err(invalid(format!("a key of kind `{kind}` with streams {streams:?}"))),
    }
}

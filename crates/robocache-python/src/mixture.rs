//! `MixtureSampler`: the facade's weighted mixture sampler
//! (`robocache_datasets::MixtureSampler`) for Python, which gives each
//! epoch's `(dataset, window)` positions. Arguments are converted here;
//! the sampling is the facade's.

use pyo3::prelude::*;
use robocache::datasets::{EpochLength, MixturePart, MixtureSampler, MixtureWeights, Shard, ShardBy};

use crate::errors::{invalid, IntoPy};

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
        let convention = match convention {
            "sample" => MixtureWeights::Sample,
            "balance" => MixtureWeights::Balance,
            other => return Err(invalid(format!("weights {other:?}: expected \"sample\" or \"balance\""))),
        };
        let length = match (epoch_windows, until_exhausted) {
            (Some(n), None) => EpochLength::Windows(n),
            (None, Some(index)) => EpochLength::UntilExhausted(index),
            (None, None) => EpochLength::Windows(windows.iter().sum()),
            (Some(_), Some(_)) => return Err(invalid("pass epoch_windows= or until_exhausted=, not both")),
        };
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

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMixtureSampler>()
}

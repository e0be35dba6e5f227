//! `robocache._native.Live`: live observation windows of a loader spec
//! (`robocache::live::Live`), for `robocache.Live`. Converts arrays and
//! errors; the windows are the facade's.

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use robocache::live::{Live as RustLive, LiveOptions};
use robocache::{Device, LoaderSpec, Tensor};

use crate::arrays::{Array, ArrayDesc, Owned};
use crate::dlpack::{capsule_of, View};
use crate::errors::{invalid, IntoPy};

/// Live windows of one spec on one device.
#[derive(Debug)]
#[pyclass(module = "robocache._native", frozen)]
pub struct Live {
    inner: RustLive,
}

#[pymethods]
impl Live {
    #[new]
    #[pyo3(signature = (spec_json, device, streams=None, message_origin_ns=0, lookback_s=robocache::live::DEFAULT_LOOKBACK_S, ring_bytes=robocache::live::DEFAULT_RING_BYTES))]
    fn new(
        spec_json: &str,
        device: &str,
        streams: Option<Vec<String>>,
        message_origin_ns: u64,
        lookback_s: f64,
        ring_bytes: usize,
    ) -> PyResult<Self> {
        let device =
            Device::from_request(device.parse().map_err(|e: String| invalid(format!("device: {e}")))?).py_err()?;
        let spec = LoaderSpec::from_json(spec_json).py_err()?;
        let options = LiveOptions { streams, message_origin_ns, lookback_s, ring_bytes };
        Ok(Live { inner: RustLive::new(&spec, &device, &options).py_err()? })
    }

    /// Adds the samples of one serialized ROS 2 message (CDR bytes).
    #[pyo3(signature = (topic, log_ns, message, publish_ns=None))]
    fn push_message(&self, topic: &str, log_ns: u64, message: &[u8], publish_ns: Option<u64>) -> PyResult<()> {
        self.inner.push_message(topic, log_ns, publish_ns, message).py_err()
    }

    /// The streams kept (pushed), in window order.
    fn stream_names(&self) -> Vec<String> {
        self.inner.stream_names().into_iter().map(str::to_owned).collect()
    }

    /// The streams a window holds (a mixture member's: the mixture's).
    fn window_names(&self) -> Vec<String> {
        self.inner.window_names().into_iter().map(str::to_owned).collect()
    }

    /// Adds one sample (`values` describes a contiguous array on the host
    /// or a GPU; a GPU's is copied to the host first). The GIL is released:
    /// pushes from several threads (each stream has its own lock) and the
    /// policy's own Python threads run while a sample is converted and kept.
    fn push(&self, py: Python<'_>, stream: &str, time: f64, values: ArrayDesc) -> PyResult<()> {
        let on = Device::from_request(values.device).py_err()?;
        // SAFETY: the caller holds the array for the length of this call
        // (`robocache.Live.push` keeps it referenced until this returns),
        // and the copy to the host below completes before it returns.
        let tensor = unsafe { values.tensor("value", &on) }?;
        py.detach(|| {
            let host = tensor.to_host()?;
            self.inner.push(stream, time, host.as_slice())
        })
        .py_err()
    }

    /// Adds a camera frame given as JPEG or PNG bytes.
    fn push_encoded(&self, py: Python<'_>, stream: &str, time: f64, encoded: &[u8]) -> PyResult<()> {
        py.detach(|| self.inner.push_encoded(stream, time, encoded)).py_err()
    }

    /// Forgets every sample (a new episode); `message_origin_ns`: the new
    /// episode's message origin (None keeps the current one).
    #[pyo3(signature = (message_origin_ns=None))]
    fn reset(&self, message_origin_ns: Option<u64>) -> PyResult<()> {
        self.inner.reset(message_origin_ns).py_err()
    }

    /// The window at `time` as a flat tuple, per stream its data `[1, T,
    /// ...]`, mask `[1, T]` and, for a mixture member's spec, `dim_is_pad`
    /// `[1, D]`: DLPack capsules with `capsules`, else `Array`s. `stream`:
    /// the consumer's CUDA stream.
    fn window<'py>(
        &self,
        py: Python<'py>,
        time: f64,
        stream: Option<u64>,
        capsules: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let window = py.detach(|| self.inner.window(time)).py_err()?;
        let mut dims = window.dim_is_pad.into_iter();
        let mut tensors: Vec<Tensor> = Vec::with_capacity(window.streams.len() * 3);
        for stream in window.streams {
            tensors.push(stream.data);
            tensors.push(stream.mask);
            tensors.extend(dims.next());
        }
        if let Some(stream) = stream {
            // The window's copies and stacking were queued on robocache's
            // stream: the consumer's waits for them (on the device, not the
            // host) before anything it queues next, as with `ops` results.
            self.inner.device().make_external_stream_wait(stream).py_err()?;
            crate::streams::note(stream);
        }
        if !capsules {
            let arrays = Array::group(tensors, stream);
            return PyTuple::new(py, arrays.into_iter().map(|a| Bound::new(py, a)).collect::<PyResult<Vec<_>>>()?);
        }
        let device = self.inner.device().clone();
        let owner = Owned::new(tensors, stream);
        let mut items = Vec::with_capacity(owner.tensors().len());
        for tensor in owner.tensors() {
            let view = View { address: tensor.data_address(), shape: tensor.shape(), dtype: tensor.dtype() };
            items.push(capsule_of(py, owner.clone(), &device, &view)?);
        }
        PyTuple::new(py, items)
    }
}

/// Checks a loader spec's JSON text (format, version, statistics).
#[pyfunction]
fn check_loader_spec(text: &str) -> PyResult<()> {
    LoaderSpec::from_json(text).map(drop).py_err()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_loader_spec, m)?)?;
    m.add_class::<Live>()
}

//! Arrays across the boundary, without copies.
//!
//! In: Python describes a contiguous NumPy array or torch tensor as an
//! [`ArrayDesc`] tuple `(address, shape, dtype, device)`; it becomes a
//! [`Tensor`] over that memory ([`Tensor::from_external`]) for the length
//! of one call. The Python caller holds the array for that long, and on a
//! GPU the caller's stream is made to wait for robocache's work before the
//! call returns, so the memory is neither freed nor reused under a kernel.
//!
//! Out: an [`Array`] holds a result [`Tensor`] and shows its memory as a
//! DLPack capsule (`to_dlpack`, `__dlpack__`; see the `dlpack` module),
//! `__array_interface__` (host) or `__cuda_array_interface__` (GPU), all
//! read in place; the consumer keeps the memory's owner alive. The last
//! owner gone frees the device memory in stream order after the
//! consumer's stream has reached that point, so work the caller queued on
//! its stream with the data completes first.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use robocache::{BackendRequest, DType, Device, Tensor};

use crate::errors::{invalid, IntoPy};

/// A parsed array descriptor.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayDesc {
    pub address: u64,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub device: BackendRequest,
}

impl ArrayDesc {
    /// A descriptor from its parts; the error names the bad part.
    pub fn parse_parts(address: u64, shape: Vec<usize>, dtype: &str, device: &str) -> Result<Self, String> {
        let dtype = DType::from_name(dtype)
            .ok_or_else(|| format!("dtype {dtype} is not supported (bool, u8-u64, i8-i64, f16, bf16, f32, f64)"))?;
        let device = match device.parse()? {
            BackendRequest::Auto => return Err("an array's device must be cpu or cuda:N".into()),
            device => device,
        };
        Ok(ArrayDesc { address, shape, dtype, device })
    }

    /// A borrowed tensor over the described memory on `device`.
    ///
    /// # Safety
    ///
    /// The memory must stay valid and unwritten while the tensor and the
    /// work queued with it live (the calling Python function holds the
    /// array and orders the caller's stream after robocache's).
    pub(crate) unsafe fn tensor(&self, what: &str, device: &Device) -> PyResult<Tensor> {
        let on = match device {
            Device::Cpu => BackendRequest::Cpu,
            Device::Cuda(cuda) => BackendRequest::Cuda(cuda.ordinal()),
        };
        if on != self.device {
            return Err(crate::errors::to_py(robocache::Error::DeviceMismatch {
                what: what.to_owned(),
                tensor_device: request_name(self.device),
                device: request_name(on),
            }));
        }
        // SAFETY: forwarded to the caller.
        unsafe { Tensor::from_external(device, self.address, self.dtype, &self.shape) }.py_err()
    }
}

fn request_name(request: BackendRequest) -> String {
    match request {
        BackendRequest::Cpu | BackendRequest::Auto => "cpu".into(),
        BackendRequest::Cuda(n) => format!("cuda:{n}"),
    }
}

impl<'py> FromPyObject<'_, 'py> for ArrayDesc {
    type Error = PyErr;

    fn extract(object: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let (address, shape, dtype, device): (u64, Vec<usize>, String, String) =
            object.extract().map_err(|_| invalid("expected an array descriptor (address, shape, dtype, device)"))?;
        ArrayDesc::parse_parts(address, shape, &dtype, &device).map_err(invalid)
    }
}

/// The device an operation runs on: the first array's.
pub(crate) fn device_of(desc: &ArrayDesc) -> PyResult<Device> {
    Device::from_request(desc.device).py_err()
}

/// Result tensors freed together and the CUDA streams of their consumers:
/// the memory is freed in stream order after the work each consumer queued
/// with it, on the one consumer's stream while the process has used only
/// that one (see `streams`), else on the stream the memory was made on (the
/// call's, or robocache's for a loader batch) after it has waited for each
/// consumer. An operation's results are one group (the data and its mask
/// share one allocation), as are a loader batch's parts: one wait orders
/// the whole group's free, once its last tensor is gone.
#[derive(Debug)]
pub(crate) struct Owned {
    tensors: Vec<Tensor>,
    consumers: Mutex<Vec<u64>>,
}

impl Owned {
    /// Tensors made on `consumer_stream` (the caller's CUDA stream) by a call,
    /// or finished before they were handed over (a loader batch).
    pub(crate) fn new(tensors: Vec<Tensor>, consumer_stream: Option<u64>) -> Arc<Self> {
        Arc::new(Owned { tensors, consumers: Mutex::new(consumer_stream.into_iter().collect()) })
    }

    /// The tensors, in the order they were given.
    pub(crate) fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    /// Makes `stream` (a consumer's, not yet ordered) wait for the work
    /// queued so far on the stream the tensors were made on, and remembers
    /// it for the free.
    fn add_consumer(&self, device: &Device, stream: u64) -> PyResult<()> {
        let mut consumers = self.consumers.lock().map_err(|_| invalid("a result's stream list is poisoned"))?;
        if !consumers.contains(&stream) {
            device.make_external_stream_wait(stream).py_err()?;
            crate::streams::note(stream);
            consumers.push(stream);
        }
        Ok(())
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        let Owned { tensors, consumers } = self;
        let (Some(first), Ok(consumers)) = (tensors.first(), consumers.get_mut()) else { return };
        if let [stream] = consumers[..] {
            if crate::streams::only(stream) {
                for tensor in tensors.iter() {
                    // SAFETY: every use of these tensors' memory is ordered
                    // before the work queued on `stream` now (`streams`:
                    // every call and batch of the process was ordered with
                    // it), the stream is the caller's live stream, and this
                    // group holds the memory's last handles.
                    unsafe { tensor.free_on_external_stream(stream) };
                }
                return; // the tensors drop after this: freed on the consumer's stream
            }
        }
        for &stream in consumers.iter() {
            // A failure leaves the free ordered on the making stream only;
            // there is no one to report it to from a destructor.
            let _ = first.device().wait_for_external_stream(stream);
        }
        // The tensors drop after this: their memory is freed behind the waits.
    }
}

/// A result of robocache: its memory, shape and dtype, readable in place
/// (DLPack, `__array_interface__`, `__cuda_array_interface__`). The memory
/// lives while the `Array`, any tensor made from it, or (in a loader batch)
/// another part of its batch does.
#[derive(Debug)]
#[pyclass(module = "robocache._native", frozen)]
pub struct Array {
    owned: Arc<Owned>,
    index: usize,
}

impl Array {
    /// A result whose producer already made `consumer_stream` (the caller's
    /// CUDA stream) wait for it.
    pub(crate) fn new(tensor: Tensor, consumer_stream: Option<u64>) -> Self {
        Array { owned: Owned::new(vec![tensor], consumer_stream), index: 0 }
    }

    /// An operation's two results (data and mask), freed together.
    pub(crate) fn pair(data: Tensor, mask: Tensor, consumer_stream: Option<u64>) -> (Self, Self) {
        let owned = Owned::new(vec![data, mask], consumer_stream);
        (Array { owned: owned.clone(), index: 0 }, Array { owned, index: 1 })
    }

    /// Each tensor of a group freed together.
    pub(crate) fn group(tensors: Vec<Tensor>, consumer_stream: Option<u64>) -> Vec<Self> {
        let owned = Owned::new(tensors, consumer_stream);
        (0..owned.tensors.len()).map(|index| Array { owned: owned.clone(), index }).collect()
    }

    pub(crate) fn tensor(&self) -> &Tensor {
        &self.owned.tensors[self.index]
    }

    /// What keeps the memory alive.
    pub(crate) fn owner(&self) -> &Arc<Owned> {
        &self.owned
    }
}

/// NumPy's type string of `dtype` (bf16, which NumPy lacks, as the
/// 2-byte integer the Python side views as `torch.bfloat16`).
fn typestr(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::I8 => "|i1",
        DType::I16 | DType::BF16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
    }
}

#[pymethods]
impl Array {
    /// The shape, outermost dimension first.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tensor().shape())
    }

    /// The element type's name (`f32`, `bf16`, `bool`, ...).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.tensor().dtype().name()
    }

    /// `cpu` or `cuda:N`.
    #[getter]
    fn device(&self) -> String {
        match self.tensor().device() {
            Device::Cpu => "cpu".into(),
            Device::Cuda(cuda) => format!("cuda:{}", cuda.ordinal()),
        }
    }

    /// The data's address (host or device memory).
    #[getter]
    fn address(&self) -> u64 {
        self.tensor().data_address()
    }

    /// NumPy's array interface (host results only).
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if !matches!(self.tensor().device(), Device::Cpu) {
            return Err(pyo3::exceptions::PyAttributeError::new_err(
                "a CUDA result has no __array_interface__ (use __cuda_array_interface__)",
            ));
        }
        self.interface(py, None)
    }

    /// The CUDA array interface, version 3 (GPU results only). `stream` is
    /// None: the producer already ordered the consumer's stream.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if matches!(self.tensor().device(), Device::Cpu) {
            return Err(pyo3::exceptions::PyAttributeError::new_err(
                "a host result has no __cuda_array_interface__ (use __array_interface__)",
            ));
        }
        self.interface(py, Some(py.None()))
    }

    /// A `dltensor` capsule over the memory (for `torch.from_dlpack`),
    /// for a consumer on the stream the call was ordered with.
    fn to_dlpack(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.capsule(py)
    }

    /// The DLPack protocol. `stream`: the consumer's CUDA stream (1 the
    /// legacy default stream, 2 per-thread default, -1 no ordering), made
    /// to wait for robocache's work on the device; `copy=True` is refused
    /// (robocache hands out its memory, never a copy).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let _ = max_version; // the unversioned capsule, which every consumer reads
        if copy == Some(true) {
            return Err(pyo3::exceptions::PyBufferError::new_err(
                "robocache results are shared, not copied (copy=True)",
            ));
        }
        let here = crate::dlpack::device_of(self.tensor().device());
        if dl_device.is_some_and(|d| d != here) {
            return Err(pyo3::exceptions::PyBufferError::new_err(format!(
                "the result is on DLPack device {here:?}, not {dl_device:?}"
            )));
        }
        if let (Device::Cuda(_), Some(stream)) = (self.tensor().device(), stream) {
            if stream != -1 {
                self.owned.add_consumer(self.tensor().device(), stream as u64)?;
            }
        }
        self.capsule(py)
    }

    /// `(device_type, device_id)`: `(1, 0)` host, `(2, N)` CUDA device N.
    fn __dlpack_device__(&self) -> (i32, i32) {
        crate::dlpack::device_of(self.tensor().device())
    }

    fn __repr__(&self) -> String {
        format!("Array(shape={:?}, dtype={}, device={})", self.tensor().shape(), self.tensor().dtype(), self.device())
    }
}

impl Array {
    /// A `dltensor` capsule over the memory, keeping it alive.
    fn capsule(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let tensor = self.tensor();
        let view = crate::dlpack::View { address: tensor.data_address(), shape: tensor.shape(), dtype: tensor.dtype() };
        crate::dlpack::capsule_of(py, self.owner().clone(), tensor.device(), &view)
    }

    fn interface<'py>(&self, py: Python<'py>, stream: Option<Py<PyAny>>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("shape", PyTuple::new(py, self.tensor().shape())?)?;
        dict.set_item("typestr", typestr(self.tensor().dtype()))?;
        // An empty array still needs a non-null pointer for some consumers.
        let address = self.tensor().data_address().max(if self.tensor().is_empty() { 1 } else { 0 });
        dict.set_item("data", (address, false))?;
        dict.set_item("strides", py.None())?;
        dict.set_item("version", 3)?;
        if let Some(stream) = stream {
            dict.set_item("stream", stream)?;
        }
        Ok(dict)
    }
}

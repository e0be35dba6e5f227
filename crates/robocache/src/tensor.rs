//! [`Tensor`]: an owned buffer on a device, with its shape and dtype. Not a
//! tensor library: it carries data in and out of operations, nothing more.

use robocache_cpu::{DType, Element, HostSlice, HostVec};

use crate::cuda::DeviceStorage;
use crate::{Device, Error, Result};

/// An owned, contiguous, row-major array on a [`Device`].
#[derive(Clone, Debug)]
pub struct Tensor {
    device: Device,
    shape: Vec<usize>,
    dtype: DType,
    storage: Storage,
}

#[derive(Clone, Debug)]
pub(crate) enum Storage {
    Host(HostVec),
    Device(DeviceStorage),
}

impl Tensor {
    /// Copies `data` with `shape` onto `device`.
    pub fn from_slice<T: Element>(device: &Device, data: &[T], shape: &[usize]) -> Result<Self> {
        Tensor::from_host(device, T::slice(data), shape)
    }

    /// Copies a type-erased slice with `shape` onto `device`.
    pub fn from_host(device: &Device, data: HostSlice<'_>, shape: &[usize]) -> Result<Self> {
        check_elements("tensor", shape, data.len())?;
        let storage = match device {
            Device::Cpu => Storage::Host(data.to_host_vec()),
            Device::Cuda(cuda) => Storage::Device(cuda.upload(data)?),
        };
        Ok(Tensor { device: device.clone(), shape: shape.to_vec(), dtype: data.dtype(), storage })
    }

    /// Moves a host vector onto `device` (no copy on the CPU).
    pub fn from_host_vec(device: &Device, data: HostVec, shape: &[usize]) -> Result<Self> {
        check_elements("tensor", shape, data.len())?;
        match device {
            Device::Cpu => Ok(Tensor::host(device, data, shape.to_vec())),
            Device::Cuda(_) => Tensor::from_host(device, data.as_slice(), shape),
        }
    }

    /// A tensor over device memory already filled (a staged upload).
    pub(crate) fn from_device_storage(device: &Device, storage: DeviceStorage, dtype: DType, shape: &[usize]) -> Self {
        Tensor { device: device.clone(), shape: shape.to_vec(), dtype, storage: Storage::Device(storage) }
    }

    pub(crate) fn host(device: &Device, data: HostVec, shape: Vec<usize>) -> Self {
        Tensor { device: device.clone(), shape, dtype: data.dtype(), storage: Storage::Host(data) }
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn on_device(device: &Device, storage: DeviceStorage, dtype: DType, shape: Vec<usize>) -> Self {
        Tensor { device: device.clone(), shape, dtype, storage: Storage::Device(storage) }
    }

    /// The device the data lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The shape, outermost dimension first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same data with another shape of the same number of elements (no copy).
    pub fn reshape(mut self, shape: &[usize]) -> Result<Tensor> {
        check_elements("Tensor::reshape", shape, self.len())?;
        self.shape = shape.to_vec();
        Ok(self)
    }

    /// The bytes the data takes.
    pub fn size_in_bytes(&self) -> usize {
        self.len() * self.dtype.size_in_bytes()
    }

    /// The raw device address of the data on a GPU (`None` on the CPU), for
    /// consumers that use results in place: the data is row-major, of
    /// [`Tensor::dtype`], ready once the device's stream
    /// ([`CudaDevice::stream_handle`](crate::CudaDevice::stream_handle)) has
    /// reached it.
    pub fn device_pointer(&self) -> Option<u64> {
        match &self.storage {
            Storage::Host(_) => None,
            Storage::Device(d) => Some(d.device_pointer()),
        }
    }

    /// Copies the data to the host (waits for queued work on a GPU).
    pub fn to_host(&self) -> Result<HostVec> {
        match (&self.storage, &self.device) {
            (Storage::Host(v), _) => Ok(v.clone()),
            (Storage::Device(d), Device::Cuda(cuda)) => cuda.download(d, self.dtype, self.len()),
            (Storage::Device(_), Device::Cpu) => unreachable!("device storage belongs to a CUDA device"),
        }
    }

    /// A copy of the tensor on the same device (queued on a GPU: a
    /// device-to-device copy that does not wait).
    pub fn duplicate(&self) -> Result<Tensor> {
        let storage = match (&self.storage, &self.device) {
            (Storage::Host(v), _) => Storage::Host(v.clone()),
            (Storage::Device(d), Device::Cuda(cuda)) => {
                Storage::Device(cuda.duplicate(d, self.len() * self.dtype.size_in_bytes())?)
            }
            (Storage::Device(_), Device::Cpu) => unreachable!("device storage belongs to a CUDA device"),
        };
        Ok(Tensor { device: self.device.clone(), shape: self.shape.clone(), dtype: self.dtype, storage })
    }

    /// Copies the data to a host `Vec<T>`; an error if the dtype is not `T`'s.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype != T::DTYPE {
            return Err(Error::Invalid(robocache_cpu::Error::DTypeMismatch {
                what: "Tensor::to_vec".into(),
                expected: T::DTYPE.to_string(),
                actual: self.dtype,
            }));
        }
        T::from_host_vec(self.to_host()?).map_err(|v| {
            Error::Invalid(robocache_cpu::Error::DTypeMismatch {
                what: "Tensor::to_vec".into(),
                expected: T::DTYPE.to_string(),
                actual: v.dtype(),
            })
        })
    }

    /// The data as a host slice, for the CPU backend (which only sees host tensors).
    pub(crate) fn host_slice(&self) -> HostSlice<'_> {
        match &self.storage {
            Storage::Host(v) => v.as_slice(),
            Storage::Device(_) => unreachable!("the CPU backend checks that its tensors are on the CPU"),
        }
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn device_storage(&self) -> Option<&DeviceStorage> {
        match &self.storage {
            Storage::Device(d) => Some(d),
            Storage::Host(_) => None,
        }
    }
}

fn check_elements(what: &str, shape: &[usize], actual: usize) -> Result<()> {
    let expected = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| robocache_cpu::Error::Overflow(what.to_owned()))?;
    if expected == actual {
        Ok(())
    } else {
        Err(robocache_cpu::Error::ShapeMismatch { what: what.to_owned(), shape: shape.to_vec(), expected, actual }
            .into())
    }
}

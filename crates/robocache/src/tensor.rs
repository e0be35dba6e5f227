//! [`Tensor`]: an owned buffer on a device, with its shape and dtype. Not a
//! tensor library: it carries data in and out of operations, nothing more.

use robocache_cpu::{DType, Element, HostSlice, HostVec};

use crate::{Device, Error, Result};

/// An owned, contiguous, row-major array on a [`Device`].
#[derive(Clone, Debug)]
pub struct Tensor {
    device: Device,
    shape: Vec<usize>,
    storage: Storage,
}

#[derive(Clone, Debug)]
pub(crate) enum Storage {
    Host(HostVec),
}

impl Tensor {
    /// Copies `data` with `shape` onto `device`.
    pub fn from_slice<T: Element>(device: &Device, data: &[T], shape: &[usize]) -> Result<Self> {
        Tensor::from_host(device, T::slice(data), shape)
    }

    /// Copies a type-erased slice with `shape` onto `device`.
    pub fn from_host(device: &Device, data: HostSlice<'_>, shape: &[usize]) -> Result<Self> {
        check_elements("tensor", shape, data.len())?;
        match device {
            Device::Cpu => {
                Ok(Tensor { device: Device::Cpu, shape: shape.to_vec(), storage: Storage::Host(data.to_host_vec()) })
            }
            Device::Cuda(cuda) => cuda.absent(),
        }
    }

    /// Moves a host vector onto `device` (no copy on the CPU).
    pub fn from_host_vec(device: &Device, data: HostVec, shape: &[usize]) -> Result<Self> {
        check_elements("tensor", shape, data.len())?;
        match device {
            Device::Cpu => Ok(Tensor { device: Device::Cpu, shape: shape.to_vec(), storage: Storage::Host(data) }),
            Device::Cuda(cuda) => cuda.absent(),
        }
    }

    pub(crate) fn host(device: &Device, data: HostVec, shape: Vec<usize>) -> Self {
        Tensor { device: device.clone(), shape, storage: Storage::Host(data) }
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
        match &self.storage {
            Storage::Host(v) => v.dtype(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the data takes.
    pub fn size_in_bytes(&self) -> usize {
        self.len() * self.dtype().size_in_bytes()
    }

    /// Copies the data to the host (waits for queued work on a GPU).
    pub fn to_host(&self) -> Result<HostVec> {
        match &self.storage {
            Storage::Host(v) => Ok(v.clone()),
        }
    }

    /// Copies the data to a host `Vec<T>`; an error if the dtype is not `T`'s.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        T::from_host_vec(self.to_host()?).map_err(|v| {
            Error::Invalid(robocache_cpu::Error::DTypeMismatch {
                what: "Tensor::to_vec".into(),
                expected: T::DTYPE.to_string(),
                actual: v.dtype(),
            })
        })
    }

    /// The data as a host slice, for the CPU backend.
    pub(crate) fn host_slice(&self) -> HostSlice<'_> {
        match &self.storage {
            Storage::Host(v) => v.as_slice(),
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

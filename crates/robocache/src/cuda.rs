//! The CUDA device handle. This build has no CUDA backend: the type exists so
//! that [`Device::Cuda`](crate::Device::Cuda) always does, but no value of it
//! can be made, and [`Device::cuda`](crate::Device::cuda) returns
//! [`Error::CudaNotCompiled`](crate::Error::CudaNotCompiled).

use std::convert::Infallible;
use std::fmt;

/// A CUDA device (one context, its streams and its kernel module cache).
#[derive(Clone)]
pub struct CudaDevice {
    never: Infallible,
}

impl CudaDevice {
    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        match self.never {}
    }

    /// The device's name, as the driver reports it.
    pub fn name(&self) -> String {
        match self.never {}
    }

    /// The compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        match self.never {}
    }

    /// Any value: no `CudaDevice` exists in this build, so this is never called.
    pub(crate) fn absent<T>(&self) -> T {
        match self.never {}
    }

    pub(crate) fn open(ordinal: usize) -> crate::Result<Self> {
        let _ = ordinal;
        Err(crate::Error::CudaNotCompiled)
    }
}

impl fmt::Debug for CudaDevice {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.never {}
    }
}

impl PartialEq for CudaDevice {
    fn eq(&self, _: &Self) -> bool {
        match self.never {}
    }
}

/// Whether this build has the CUDA backend.
pub const COMPILED: bool = false;

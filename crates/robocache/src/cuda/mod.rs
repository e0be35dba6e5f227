//! The CUDA backend: present with the `cuda` feature, an uninhabited
//! placeholder without it (so `Device::Cuda` always exists).

#[cfg(not(feature = "cuda"))]
mod absent;
#[cfg(feature = "cuda")]
mod assemble;
#[cfg(feature = "cuda")]
mod backend;
#[cfg(feature = "cuda")]
mod fusion;
#[cfg(feature = "cuda")]
mod resample;
#[cfg(feature = "cuda")]
mod staging;
#[cfg(feature = "cuda")]
mod timing;
#[cfg(feature = "cuda")]
mod voxelize;

#[cfg(not(feature = "cuda"))]
pub use absent::CudaDevice;
#[cfg(not(feature = "cuda"))]
pub(crate) use absent::{DeviceEvent, DeviceStorage, StagingBuffer};
#[cfg(feature = "cuda")]
pub use backend::CudaDevice;
#[cfg(feature = "cuda")]
pub(crate) use backend::DeviceStorage;
#[cfg(feature = "cuda")]
pub(crate) use staging::StagingBuffer;
#[cfg(feature = "cuda")]
pub(crate) use timing::DeviceEvent;

/// The default budget of page-locked memory a device stages uploads of
/// streamed batches in ([`crate::LoaderConfig::staging_bytes`]).
pub const DEFAULT_STAGING_BYTES: usize = 256 << 20;

/// Whether this build has the CUDA backend.
pub const COMPILED: bool = cfg!(feature = "cuda");

/// The PTX archs this build carries kernels for (none without the `cuda` feature).
pub fn ptx_archs() -> Vec<&'static str> {
    #[cfg(feature = "cuda")]
    return robocache_cuda::Arch::ALL.iter().map(|a| a.name()).collect();
    #[cfg(not(feature = "cuda"))]
    Vec::new()
}

//! The CUDA backend: present with the `cuda` feature, an uninhabited
//! placeholder without it (so `Device::Cuda` always exists).

#[cfg(not(feature = "cuda"))]
mod absent;
#[cfg(not(feature = "cuda"))]
mod absent_operations;
#[cfg(feature = "cuda")]
mod assemble;
#[cfg(feature = "cuda")]
mod augment;
#[cfg(feature = "cuda")]
mod backend;
#[cfg(feature = "cuda")]
mod contract;
#[cfg(feature = "cuda")]
mod error;
#[cfg(feature = "cuda")]
mod frames;
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
#[cfg(feature = "cuda")]
pub use backend::CudaDevice;

use crate::backend::CudaBackend;

/// Device memory of a tensor.
pub(crate) type DeviceStorage = <CudaDevice as CudaBackend>::Storage;
/// An event recorded on a device's stream.
pub(crate) type DeviceEvent = <CudaDevice as CudaBackend>::Event;
/// Page-locked memory an upload is assembled in.
pub(crate) type StagingBuffer = <CudaDevice as CudaBackend>::Staging;

/// The public face of the device handle, the same in every build (it
/// forwards to the `CudaBackend` of the build).
impl CudaDevice {
    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        CudaBackend::ordinal(self)
    }

    /// The device's name, as the driver reports it.
    pub fn name(&self) -> String {
        CudaBackend::name(self)
    }

    /// The compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        CudaBackend::compute_capability(self)
    }

    /// The PTX arch loaded for the device (`sm_90`).
    pub fn arch_name(&self) -> &'static str {
        CudaBackend::arch_name(self)
    }

    /// The raw `CUstream` this handle queues work on: robocache's own (a
    /// non-blocking stream of the device's primary context), or the stream a
    /// handle from [`crate::Device::on_external_stream`] was made for.
    pub fn stream_handle(&self) -> u64 {
        CudaBackend::stream_handle(self)
    }

    /// Waits until the work queued on the device's stream is done.
    pub fn synchronize(&self) -> crate::Result<()> {
        CudaBackend::synchronize(self)
    }

    /// Makes robocache's stream wait (on the device, the host goes on) for
    /// the work queued so far on `stream`, a raw `CUstream` of another
    /// library on this device (0: the legacy default stream).
    pub fn wait_for_external_stream(&self, stream: u64) -> crate::Result<()> {
        CudaBackend::wait_for_external_stream(self, stream)
    }

    /// Makes `stream`, a raw `CUstream` of another library on this device,
    /// wait (on the device) for the work queued so far on robocache's stream.
    pub fn make_external_stream_wait(&self, stream: u64) -> crate::Result<()> {
        CudaBackend::make_external_stream_wait(self, stream)
    }
}

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

//! The CUDA device handle of a build without the `cuda` feature: the type
//! exists so that [`Device::Cuda`](crate::Device::Cuda) always does, but no
//! value of it can be made, and [`Device::cuda`](crate::Device::cuda) returns
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

    /// The PTX arch loaded for the device (`sm_90`).
    pub fn arch_name(&self) -> &'static str {
        match self.never {}
    }

    /// The raw `CUstream` robocache queues work on.
    pub fn stream_handle(&self) -> u64 {
        match self.never {}
    }

    /// Waits until the work queued on the device's stream is done.
    pub fn synchronize(&self) -> crate::Result<()> {
        match self.never {}
    }

    /// Makes robocache's stream wait for the work queued on `stream`.
    pub fn wait_for_external_stream(&self, _stream: u64) -> crate::Result<()> {
        match self.never {}
    }

    /// Makes `stream` wait for the work queued on robocache's stream.
    pub fn make_external_stream_wait(&self, _stream: u64) -> crate::Result<()> {
        match self.never {}
    }

    /// Another owner's device memory.
    ///
    /// # Safety
    ///
    /// As the CUDA backend's: valid until the work queued with it completes.
    pub(crate) unsafe fn borrow(&self, _address: u64, _bytes: usize) -> crate::Result<DeviceStorage> {
        match self.never {}
    }

    pub(crate) fn upload(&self, _: robocache_cpu::HostSlice<'_>) -> crate::Result<DeviceStorage> {
        match self.never {}
    }

    pub(crate) fn lend_staging(&self, _: usize) -> crate::Result<StagingBuffer> {
        match self.never {}
    }

    pub(crate) fn upload_staging(&self, _: StagingBuffer) -> crate::Result<DeviceStorage> {
        match self.never {}
    }

    pub(crate) fn set_staging_budget(&self, _: usize) -> crate::Result<()> {
        match self.never {}
    }

    pub(crate) fn staging_usage(&self) -> crate::Result<(usize, usize)> {
        match self.never {}
    }

    pub(crate) fn download(
        &self,
        _: &DeviceStorage,
        _: robocache_cpu::DType,
        _: usize,
    ) -> crate::Result<robocache_cpu::HostVec> {
        match self.never {}
    }

    pub(crate) fn resample(
        &self,
        _: &crate::Device,
        _: &crate::StreamInput<'_>,
        _: &crate::TargetTimes<'_>,
        _: &robocache_cpu::ResampleSpec,
    ) -> crate::Result<crate::Resampled> {
        match self.never {}
    }

    pub(crate) fn fuse(
        &self,
        _: &crate::Device,
        _: &[crate::FusionStreamInput<'_>],
        _: &crate::TargetTimes<'_>,
        _: robocache_cpu::DType,
    ) -> crate::Result<crate::Fused> {
        match self.never {}
    }

    pub(crate) fn voxelize(
        &self,
        _: &crate::Device,
        _: &crate::VoxelInput<'_>,
        _: &robocache_cpu::VoxelGrid,
        _: robocache_cpu::VoxelMode,
        _: u64,
    ) -> crate::Result<crate::VoxelOutput> {
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

/// Device memory of a tensor (none exists in this build).
#[derive(Clone, Debug)]
pub(crate) enum DeviceStorage {}

impl DeviceStorage {
    pub(crate) fn device_pointer(&self) -> u64 {
        match *self {}
    }
}

impl CudaDevice {
    pub(crate) fn resident_table(
        &self,
        _: &crate::Device,
        _: &crate::loader::resident::ResidentStream,
    ) -> crate::Result<crate::Tensor> {
        match self.never {}
    }

    pub(crate) fn assemble(
        &self,
        _: &crate::Device,
        _: &[crate::loader::resident::ResidentStream],
        _: &crate::loader::WindowShape,
        _: &[(usize, f64)],
    ) -> crate::Result<Vec<crate::BatchStream>> {
        match self.never {}
    }
}

/// A CUDA event (none exists in this build).
#[derive(Debug)]
pub(crate) enum DeviceEvent {}

impl DeviceEvent {
    pub(crate) fn elapsed_since(&self, _: &DeviceEvent) -> crate::Result<std::time::Duration> {
        match *self {}
    }
}

impl CudaDevice {
    pub(crate) fn record_event(&self) -> crate::Result<DeviceEvent> {
        match self.never {}
    }

    pub(crate) fn evict_caches(&self) -> crate::Result<()> {
        match self.never {}
    }

    pub(crate) fn duplicate(&self, _: &DeviceStorage, _: usize) -> crate::Result<DeviceStorage> {
        match self.never {}
    }
}

/// Page-locked staging memory (none can be made without the `cuda` feature).
#[derive(Debug)]
pub(crate) enum StagingBuffer {}

impl StagingBuffer {
    pub(crate) fn as_mut_bytes(&mut self) -> &mut [u8] {
        match *self {}
    }
}

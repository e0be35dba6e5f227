//! The CUDA device handle of a build without the `cuda` feature: the type
//! exists so that [`Device::Cuda`](crate::Device::Cuda) always does, but no
//! value of it can be made ([`CudaBackend::open`] returns
//! [`Error::CudaNotCompiled`]), and every other method is unreachable. It
//! implements the same [`CudaBackend`] as the real one (and, in
//! `absent_operations`, the same `CudaOperations`), so the compiler checks
//! that it has every method.

use std::convert::Infallible;
use std::fmt;
use std::time::Duration;

use robocache_cpu::{DType, HostSlice, HostVec};

use crate::backend::{CudaBackend, RowBlock};
use crate::{Error, Result};

/// A CUDA device (one context, its streams and its kernel module cache).
#[derive(Clone)]
pub struct CudaDevice {
    never: Infallible,
}

impl CudaDevice {
    /// Never returns: no value of this type exists.
    pub(super) fn unreachable(&self) -> ! {
        match self.never {}
    }
}

/// Device memory of a tensor (none exists in this build).
#[derive(Clone, Debug)]
pub(crate) enum DeviceStorage {}

/// A CUDA event (none exists in this build).
#[derive(Debug)]
pub(crate) enum DeviceEvent {}

/// Page-locked staging memory (none exists in this build).
#[derive(Debug)]
pub(crate) enum StagingBuffer {}

impl CudaBackend for CudaDevice {
    type Storage = DeviceStorage;
    type Event = DeviceEvent;
    type Staging = StagingBuffer;

    fn open(_ordinal: usize) -> Result<Self> {
        Err(Error::CudaNotCompiled)
    }

    fn ordinal(&self) -> usize {
        match self.never {}
    }

    fn name(&self) -> String {
        match self.never {}
    }

    fn compute_capability(&self) -> (u32, u32) {
        match self.never {}
    }

    fn arch_name(&self) -> &'static str {
        match self.never {}
    }

    fn stream_handle(&self) -> u64 {
        match self.never {}
    }

    unsafe fn on_external_stream(&self, _stream: u64) -> Self {
        match self.never {}
    }

    fn synchronize(&self) -> Result<()> {
        match self.never {}
    }

    fn wait_for_external_stream(&self, _: u64) -> Result<()> {
        match self.never {}
    }

    fn make_external_stream_wait(&self, _: u64) -> Result<()> {
        match self.never {}
    }

    unsafe fn borrow(&self, _: u64, _: usize) -> Result<DeviceStorage> {
        match self.never {}
    }

    fn upload(&self, _: HostSlice<'_>) -> Result<DeviceStorage> {
        match self.never {}
    }

    fn download(&self, _: &DeviceStorage, _: DType, _: usize) -> Result<HostVec> {
        match self.never {}
    }

    fn duplicate(&self, _: &DeviceStorage, _: usize) -> Result<DeviceStorage> {
        match self.never {}
    }

    fn storage_pointer(storage: &DeviceStorage) -> u64 {
        match *storage {}
    }

    fn storage_parts(storage: DeviceStorage, _: &[usize]) -> Vec<DeviceStorage> {
        match storage {}
    }

    unsafe fn free_storage_on_stream(storage: &DeviceStorage, _: u64) {
        match *storage {}
    }

    fn zeros(&self, _: usize) -> Result<DeviceStorage> {
        match self.never {}
    }

    fn copy_rows(&self, _: &DeviceStorage, _: &DeviceStorage, _: &RowBlock) -> Result<()> {
        match self.never {}
    }

    fn keep_pool_memory(&self, _: usize) -> Result<()> {
        match self.never {}
    }

    fn lend_staging(&self, _: usize) -> Result<StagingBuffer> {
        match self.never {}
    }

    fn lend_staging_together(&self, _: &[usize]) -> Result<Vec<StagingBuffer>> {
        match self.never {}
    }

    fn staging_bytes(staging: &mut StagingBuffer) -> &mut [u8] {
        match *staging {}
    }

    fn upload_staging(&self, _: StagingBuffer) -> Result<DeviceStorage> {
        match self.never {}
    }

    fn set_staging_budget(&self, _: usize) -> Result<()> {
        match self.never {}
    }

    fn staging_usage(&self) -> Result<(usize, usize)> {
        match self.never {}
    }

    fn record_event(&self) -> Result<DeviceEvent> {
        match self.never {}
    }

    fn elapsed(start: &DeviceEvent, _: &DeviceEvent) -> Result<Duration> {
        match *start {}
    }

    fn evict_caches(&self) -> Result<()> {
        match self.never {}
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

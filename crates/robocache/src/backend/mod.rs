//! The contract between the facade and its CUDA backend: every call the
//! facade makes of a [`CudaDevice`](crate::CudaDevice), in two traits:
//! [`CudaBackend`] (memory, streams, staging, events: host data and dtypes
//! only) and [`operations::CudaOperations`] (the operations and the batch
//! assembly, on their descriptors). The backend of a build with the `cuda`
//! feature implements them with the driver; the placeholder of a build
//! without it implements them with an uninhabited type (no value exists,
//! so no method can run), and the compiler checks both against these lists.
//!
//! The backend sees what is defined below it: host data and dtypes
//! (`robocache_cpu`), the operations' descriptors (`ops::descriptors`) and
//! the batch assembly's (`assembly`), and tensors and devices to return
//! results in. It never sees the loader or the windows.

pub(crate) mod operations;

use std::time::Duration;

use robocache_cpu::{DType, HostSlice, HostVec};

use crate::Result;

/// A block of rows copied between two buffers, in bytes: `rows` rows of
/// `width`, each `from_pitch` after the last in the source from
/// `from_offset`, each `to_pitch` after the last in the destination from
/// `to_offset`. Rows padded into wider ones, or placed side by side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowBlock {
    pub rows: usize,
    pub width: usize,
    pub from_offset: usize,
    pub from_pitch: usize,
    pub to_offset: usize,
    pub to_pitch: usize,
}

/// What the facade asks of a CUDA device's memory, streams and events.
pub(crate) trait CudaBackend: Sized {
    /// Device memory of a tensor.
    type Storage;
    /// An event recorded on the device's stream.
    type Event;
    /// Page-locked memory an upload is assembled in.
    type Staging;

    /// Device `ordinal` (one handle per ordinal in the process).
    fn open(ordinal: usize) -> Result<Self>;
    /// The device ordinal.
    fn ordinal(&self) -> usize;
    /// The device's name, as the driver reports it.
    fn name(&self) -> String;
    /// The compute capability `(major, minor)`.
    fn compute_capability(&self) -> (u32, u32);
    /// The PTX arch loaded for the device (`sm_90`).
    fn arch_name(&self) -> &'static str;
    /// The raw `CUstream` robocache queues work on.
    fn stream_handle(&self) -> u64;
    /// Waits until the work queued on the device's stream is done.
    fn synchronize(&self) -> Result<()>;
    /// Makes robocache's stream wait for the work queued on `stream`.
    fn wait_for_external_stream(&self, stream: u64) -> Result<()>;
    /// Makes `stream` wait for the work queued on robocache's stream.
    fn make_external_stream_wait(&self, stream: u64) -> Result<()>;
    /// A handle of this device that queues its work on `stream`.
    ///
    /// # Safety
    ///
    /// As [`crate::Device::on_external_stream`].
    unsafe fn on_external_stream(&self, stream: u64) -> Self;

    /// `bytes` bytes of another owner's device memory at `address`, never
    /// freed by robocache.
    ///
    /// # Safety
    ///
    /// The memory must be on this device and stay valid until the work
    /// queued with it on robocache's stream has completed.
    unsafe fn borrow(&self, address: u64, bytes: usize) -> Result<Self::Storage>;
    /// Host data on the device.
    fn upload(&self, data: HostSlice<'_>) -> Result<Self::Storage>;
    /// `len` elements of `dtype` back on the host (waits for the queued work).
    fn download(&self, storage: &Self::Storage, dtype: DType, len: usize) -> Result<HostVec>;
    /// A device-to-device copy of `len` bytes, queued.
    fn duplicate(&self, storage: &Self::Storage, len: usize) -> Result<Self::Storage>;
    /// Where the storage's bytes start on the device.
    fn storage_pointer(storage: &Self::Storage) -> u64;
    /// The parts of `storage`'s allocation from each of `offsets` bytes on
    /// (the allocation lives while any part does).
    fn storage_parts(storage: Self::Storage, offsets: &[usize]) -> Vec<Self::Storage>;
    /// Frees `storage`'s allocation, once its last part is dropped, on the
    /// foreign `stream` instead of the device's own.
    ///
    /// # Safety
    ///
    /// As `robocache_cuda::DeviceBytes::free_on_stream`.
    unsafe fn free_storage_on_stream(storage: &Self::Storage, stream: u64);

    /// `len` zero bytes on the device (queued).
    fn zeros(&self, len: usize) -> Result<Self::Storage>;
    /// Queues the copy of `block`'s rows from `from` (its start) into `to`.
    fn copy_rows(&self, from: &Self::Storage, to: &Self::Storage, block: &RowBlock) -> Result<()>;
    /// Lets the device's memory pool keep up to `bytes` of freed memory
    /// between allocations (raised, never lowered).
    fn keep_pool_memory(&self, bytes: usize) -> Result<()>;
    /// `len` bytes of page-locked memory from the staging pool.
    fn lend_staging(&self, len: usize) -> Result<Self::Staging>;
    /// Buffers of `lens` bytes lent together: all at once, never some
    /// while the others are waited for.
    fn lend_staging_together(&self, lens: &[usize]) -> Result<Vec<Self::Staging>>;
    /// The bytes of lent staging memory, to fill.
    fn staging_bytes(staging: &mut Self::Staging) -> &mut [u8];
    /// The staged bytes on the device, copied on the copy stream.
    fn upload_staging(&self, staging: Self::Staging) -> Result<Self::Storage>;
    /// Sets the most page-locked memory the staging pool holds (idle
    /// buffers over it freed, the peak restarted).
    fn set_staging_budget(&self, bytes: usize) -> Result<()>;
    /// The staging budget and the most page-locked bytes held at once since
    /// the budget was last set.
    fn staging_usage(&self) -> Result<(usize, usize)>;

    /// An event recorded on the device's stream now.
    fn record_event(&self) -> Result<Self::Event>;
    /// Device time between two recorded events (waits for `end`).
    fn elapsed(start: &Self::Event, end: &Self::Event) -> Result<Duration>;
    /// Queues reads that evict the L2 cache (benchmark harnesses).
    fn evict_caches(&self) -> Result<()>;
}

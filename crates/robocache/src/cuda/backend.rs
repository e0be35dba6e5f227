//! The CUDA device: a `robocache_cuda::CudaContext` and the conversions
//! between tensors and device memory.

use std::fmt;

use robocache_cpu::{DType, HostSlice, HostVec};
use robocache_cuda::{CudaContext, DeviceBytes};

use super::staging::{StagingBuffer, StagingPool};
use crate::{Error, Result};

/// A CUDA device (its primary context, stream and kernel module cache).
#[derive(Clone)]
pub struct CudaDevice {
    pub(crate) context: CudaContext,
    /// The buffer `evict_caches` reads, made on first use.
    pub(crate) scratch: std::sync::Arc<std::sync::Mutex<Option<std::sync::Arc<DeviceBytes>>>>,
    /// Page-locked staging of streamed uploads (shared by clones).
    pub(crate) staging: std::sync::Arc<StagingPool>,
}

impl PartialEq for CudaDevice {
    /// The same handle (there is one per ordinal: see [`CudaDevice::open`]).
    fn eq(&self, other: &Self) -> bool {
        self.context == other.context
    }
}

impl fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CudaDevice({}, {})", self.context.ordinal(), self.context.name())
    }
}

/// Device memory of a tensor: an allocation shared between clones of the
/// tensor (and between tensors made from one allocation), and where the
/// tensor's bytes start in it.
#[derive(Clone, Debug)]
pub(crate) struct DeviceStorage {
    pub(crate) bytes: std::sync::Arc<DeviceBytes>,
    pub(crate) offset: usize,
}

impl DeviceStorage {
    /// A whole allocation.
    pub(crate) fn new(bytes: DeviceBytes) -> Self {
        DeviceStorage { bytes: std::sync::Arc::new(bytes), offset: 0 }
    }

    /// The part of a shared allocation from `offset` on.
    pub(crate) fn part(bytes: &std::sync::Arc<DeviceBytes>, offset: usize) -> Self {
        DeviceStorage { bytes: bytes.clone(), offset }
    }

    pub(crate) fn device_pointer(&self) -> u64 {
        self.bytes.device_pointer() + self.offset as u64
    }
}

/// A driver error as the facade's: out-of-memory as its own variant (a
/// caller retries smaller), the rest kept whole as the source.
pub(crate) fn cuda_error(error: robocache_cuda::Error) -> Error {
    match error {
        robocache_cuda::Error::OutOfMemory { bytes } => Error::OutOfMemory { bytes, source: error },
        other => Error::Cuda(other),
    }
}

impl CudaDevice {
    /// Device `ordinal`: one handle per ordinal in the process, made on
    /// first use and cached, so every `Device::cuda(n)` shares one context,
    /// one stream, one copy stream and one staging pool. Two handles with
    /// their own streams would let a tensor made on one be used (and freed
    /// in stream order) on the other without any ordering between them.
    pub(crate) fn open(ordinal: usize) -> Result<Self> {
        static OPENED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<usize, CudaDevice>>> =
            std::sync::OnceLock::new();
        let mut opened = OPENED
            .get_or_init(Default::default)
            .lock()
            .map_err(|_| Error::Internal("device cache: poisoned by a panic on another thread".into()))?;
        if let Some(device) = opened.get(&ordinal) {
            return Ok(device.clone());
        }
        let device = CudaContext::new(ordinal)
            .map(|context| CudaDevice {
                context,
                scratch: Default::default(),
                staging: std::sync::Arc::new(StagingPool::new(super::DEFAULT_STAGING_BYTES)),
            })
            .map_err(|e| Error::NoCudaDevice { ordinal, reason: e.to_string() })?;
        opened.insert(ordinal, device.clone());
        Ok(device)
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.context.ordinal()
    }

    /// The device's name, as the driver reports it.
    pub fn name(&self) -> String {
        self.context.name().to_owned()
    }

    /// The compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.context.compute_capability()
    }

    /// The PTX arch loaded for the device (`sm_90`).
    pub fn arch_name(&self) -> &'static str {
        self.context.arch().name()
    }

    /// The raw `CUstream` robocache queues work on.
    pub fn stream_handle(&self) -> u64 {
        self.context.stream_handle()
    }

    /// Waits until the work queued on the device's stream is done.
    pub fn synchronize(&self) -> Result<()> {
        self.context.synchronize().map_err(cuda_error)
    }

    /// Makes robocache's stream wait (on the device, the host goes on) for
    /// the work queued so far on `stream`, a raw `CUstream` of another
    /// library on this device (0: the legacy default stream).
    pub fn wait_for_external_stream(&self, stream: u64) -> Result<()> {
        self.context.wait_for_external_stream(stream).map_err(cuda_error)
    }

    /// Makes `stream`, a raw `CUstream` of another library on this device,
    /// wait (on the device) for the work queued so far on robocache's stream.
    pub fn make_external_stream_wait(&self, stream: u64) -> Result<()> {
        self.context.make_external_stream_wait(stream).map_err(cuda_error)
    }

    /// `bytes` bytes of another owner's device memory at `address`, never
    /// freed by robocache.
    ///
    /// # Safety
    ///
    /// The memory must be on this device and stay valid until the work
    /// queued with it on robocache's stream has completed.
    pub(crate) unsafe fn borrow(&self, address: u64, bytes: usize) -> Result<DeviceStorage> {
        // SAFETY: forwarded to the caller.
        Ok(DeviceStorage::new(unsafe { self.context.borrow(address, bytes) }))
    }

    /// `count` device words holding `u64::MAX`, where check kernels leave
    /// their verdicts (the smallest failing position, by `atomicMin`); read
    /// them with `read_words`. Queued: no host wait.
    pub(super) fn status_words(&self, count: usize) -> Result<DeviceBytes> {
        let mut words = self.context.alloc(8 * count).map_err(cuda_error)?;
        self.context.fill(&mut words, 0xFF).map_err(cuda_error)?;
        Ok(words)
    }

    /// `len` bytes of page-locked memory from the staging pool, to assemble
    /// an upload in (see `staging`).
    pub(crate) fn lend_staging(&self, len: usize) -> Result<StagingBuffer> {
        self.staging.lend(&self.context, len)
    }

    /// The bytes of `lent` on the device, copied on the copy stream; returns
    /// once the copy is queued.
    pub(crate) fn upload_staging(&self, lent: StagingBuffer) -> Result<DeviceStorage> {
        self.staging.upload_lent(&self.context, lent).map(DeviceStorage::new)
    }

    /// Sets the most page-locked memory the staging pool holds.
    pub(crate) fn set_staging_budget(&self, bytes: usize) -> Result<()> {
        self.staging.set_budget(bytes)
    }

    /// The staging budget and the most page-locked bytes held at once so far.
    pub(crate) fn staging_usage(&self) -> Result<(usize, usize)> {
        self.staging.usage()
    }

    pub(crate) fn upload(&self, data: HostSlice<'_>) -> Result<DeviceStorage> {
        let bytes = match data {
            // bool is one byte, 0 or 1.
            HostSlice::Bool(v) => self.context.upload(bytemuck::cast_slice(v)),
            other => self.context.upload(other.as_bytes()),
        };
        bytes.map(DeviceStorage::new).map_err(cuda_error)
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<DeviceBytes> {
        self.context.alloc(bytes).map_err(cuda_error)
    }

    pub(crate) fn download(&self, storage: &DeviceStorage, dtype: DType, len: usize) -> Result<HostVec> {
        let mut bytes = vec![0u8; len * dtype.size_in_bytes()];
        self.context.download_range(&storage.bytes, storage.offset, &mut bytes).map_err(cuda_error)?;
        Ok(host_vec_from_bytes(dtype, &bytes))
    }
}

/// Bytes as a host vector of `dtype` (any nonzero byte is `true` for bool).
fn host_vec_from_bytes(dtype: DType, bytes: &[u8]) -> HostVec {
    fn cast<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
        let mut out = vec![<T as bytemuck::Zeroable>::zeroed(); bytes.len() / size_of::<T>()];
        bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(bytes);
        out
    }
    match dtype {
        DType::Bool => HostVec::Bool(bytes.iter().map(|&b| b != 0).collect()),
        DType::U8 => HostVec::U8(bytes.to_vec()),
        DType::U16 => HostVec::U16(cast(bytes)),
        DType::U32 => HostVec::U32(cast(bytes)),
        DType::U64 => HostVec::U64(cast(bytes)),
        DType::I8 => HostVec::I8(cast(bytes)),
        DType::I16 => HostVec::I16(cast(bytes)),
        DType::I32 => HostVec::I32(cast(bytes)),
        DType::I64 => HostVec::I64(cast(bytes)),
        DType::F16 => HostVec::F16(cast(bytes)),
        DType::BF16 => HostVec::BF16(cast(bytes)),
        DType::F32 => HostVec::F32(cast(bytes)),
        DType::F64 => HostVec::F64(cast(bytes)),
    }
}

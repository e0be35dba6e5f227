//! The CUDA device: a `robocache_cuda::CudaContext` and the conversions
//! between tensors and device memory.

use std::fmt;

use robocache_cpu::{DType, HostVec};
use robocache_cuda::{CudaContext, DeviceBytes};

use super::error::cuda_error;
use super::staging::StagingPool;
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
    /// The same device context (there is one per ordinal: see
    /// `CudaDevice::open_cached`), whatever stream the handle queues on.
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

impl CudaDevice {
    /// Device `ordinal`: one handle per ordinal in the process, made on
    /// first use and cached, so every `Device::cuda(n)` shares one context,
    /// one stream, one copy stream and one staging pool. Two handles with
    /// their own streams would let a tensor made on one be used (and freed
    /// in stream order) on the other without any ordering between them.
    pub(super) fn open_cached(ordinal: usize) -> Result<Self> {
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

    /// `count` device words holding `u64::MAX`, where check kernels leave
    /// their verdicts (the smallest failing position, by `atomicMin`); read
    /// them with `read_words`. Queued: no host wait.
    pub(super) fn status_words(&self, count: usize) -> Result<DeviceBytes> {
        let mut words = self.context.alloc(8 * count).map_err(cuda_error)?;
        self.context.fill(&mut words, 0xFF).map_err(cuda_error)?;
        Ok(words)
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<DeviceBytes> {
        self.context.alloc(bytes).map_err(cuda_error)
    }
}

/// Bytes as a host vector of `dtype` (any nonzero byte is `true` for bool).
pub(super) fn host_vec_from_bytes(dtype: DType, bytes: &[u8]) -> HostVec {
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

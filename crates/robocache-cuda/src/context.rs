//! Contexts, buffers, launches and events.

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cust::context::{Context, CurrentContext};
use cust::device::{Device, DeviceAttribute};
use cust::function::Function;
use cust::memory::{CopyDestination, DeviceBuffer, DevicePointer, DeviceSlice, LockedBuffer};
use cust::module::Module as CustModule;
use cust::stream::{Stream, StreamFlags};
use cust::CudaFlags;
use robocache_kernels::{Arch, Entry, Kernel, Module, Params};

use crate::error::{driver, Error, Result};

struct Inner {
    ordinal: usize,
    name: String,
    compute_capability: (u32, u32),
    arch: Arch,
    multiprocessors: u32,
    // Field order is drop order: functions, modules and the stream before the context.
    /// Each launched kernel's function handle, looked up once (a launch
    /// then costs no name lookup in the driver).
    functions: Mutex<HashMap<Kernel, RawFunction>>,
    /// `resident_blocks` answers, per kernel, block size and shared bytes.
    occupancy: Mutex<HashMap<(Kernel, u32, u32), u32>>,
    /// The event that orders this context's stream with another library's
    /// (`order_streams`), reused: a wait is on the record made just before
    /// it, under the lock, and later records do not change queued waits.
    ordering_event: Mutex<Option<RawEvent>>,
    /// Page-locked host words that `read_words` copies into (made on first
    /// use, grown when a read needs more).
    host_words: Mutex<Option<LockedBuffer<u64>>>,
    modules: Mutex<HashMap<Module, CustModule>>,
    /// The context's own stream, owned here (destroyed with the context);
    /// handles queue work on its raw handle (`CudaContext::stream`).
    _stream: Stream,
    /// Host-to-device copies of staged data, overlapping the stream's kernels.
    copy_stream: Stream,
    context: Context,
}

/// A function of a module loaded in `Inner::modules`, valid while it is.
#[derive(Clone, Copy)]
struct RawFunction(cust::sys::CUfunction);

/// An event created by `order_streams`, destroyed with the context.
struct RawEvent(cust::sys::CUevent);

/// A raw `CUstream`: the context's own stream, or another library's that a
/// handle was made for ([`CudaContext::on_external_stream`]).
#[derive(Clone, Copy, PartialEq, Eq)]
struct RawStream(cust::sys::CUstream);

// SAFETY: a stream handle is an opaque driver token, usable from any thread.
unsafe impl Send for RawStream {}
unsafe impl Sync for RawStream {}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(Some(event)) = self.ordering_event.get_mut().map(Option::take) {
            if CurrentContext::set_current(&self.context).is_ok() {
                // SAFETY: the event was created in this context and is used by no one now.
                let _ = unsafe { cust::sys::cuEventDestroy_v2(event.0) };
            }
        }
    }
}

// SAFETY: the CUDA driver API is thread-safe; every call through this type
// first makes its context current on the calling thread, and the module cache
// is behind a mutex.
unsafe impl Send for Inner {}
unsafe impl Sync for Inner {}

/// A device's primary context, its stream and its loaded kernels. Cheap to
/// clone (shared); safe to use from several threads. Work is queued on the
/// handle's stream: the context's own, or another library's for a handle
/// from [`CudaContext::on_external_stream`].
#[derive(Clone)]
pub struct CudaContext {
    inner: Arc<Inner>,
    stream: RawStream,
}

impl fmt::Debug for CudaContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaContext")
            .field("ordinal", &self.inner.ordinal)
            .field("name", &self.inner.name)
            .field("arch", &self.inner.arch)
            .finish()
    }
}

impl PartialEq for CudaContext {
    /// The same context (made by one [`CudaContext::new`]), not merely the
    /// same ordinal: two contexts of one GPU have their own streams, with no
    /// ordering between them. A handle on an external stream is the same
    /// context as the one it was made from.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// Grid and block of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: u32,
    pub block: u32,
    pub shared_bytes: u32,
}

impl CudaContext {
    /// Initialises the driver and opens device `ordinal`.
    pub fn new(ordinal: usize) -> Result<Self> {
        cust::init(CudaFlags::empty()).map_err(|e| Error::DriverUnavailable(crate::error::describe(e)))?;
        let count = Device::num_devices().map_err(driver("cuDeviceGetCount"))? as usize;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let device = Device::get_device(ordinal as u32).map_err(driver("cuDeviceGet"))?;
        let attribute = |a| device.get_attribute(a).map(|v| v as u32).map_err(driver("cuDeviceGetAttribute"));
        let compute_capability =
            (attribute(DeviceAttribute::ComputeCapabilityMajor)?, attribute(DeviceAttribute::ComputeCapabilityMinor)?);
        let arch = Arch::for_compute_capability(compute_capability.0, compute_capability.1)
            .ok_or(Error::UnsupportedDevice { major: compute_capability.0, minor: compute_capability.1 })?;
        let multiprocessors = attribute(DeviceAttribute::MultiprocessorCount)?.max(1);
        let name = device.name().map_err(driver("cuDeviceGetName"))?;
        let context = Context::new(device).map_err(driver("cuDevicePrimaryCtxRetain"))?;
        CurrentContext::set_current(&context).map_err(driver("cuCtxSetCurrent"))?;
        let stream = Stream::new(StreamFlags::NON_BLOCKING, None).map_err(driver("cuStreamCreate"))?;
        let copy_stream = Stream::new(StreamFlags::NON_BLOCKING, None).map_err(driver("cuStreamCreate"))?;
        let own = RawStream(stream.as_inner());
        Ok(CudaContext {
            stream: own,
            inner: Arc::new(Inner {
                ordinal,
                name,
                compute_capability,
                arch,
                multiprocessors,
                functions: Mutex::new(HashMap::new()),
                occupancy: Mutex::new(HashMap::new()),
                ordering_event: Mutex::new(None),
                host_words: Mutex::new(None),
                modules: Mutex::new(HashMap::new()),
                _stream: stream,
                copy_stream,
                context,
            }),
        })
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.ordinal
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.inner.compute_capability
    }

    /// The PTX arch loaded for this device.
    pub fn arch(&self) -> Arch {
        self.inner.arch
    }

    /// The number of streaming multiprocessors (for grids that fill the chip).
    pub fn multiprocessors(&self) -> u32 {
        self.inner.multiprocessors
    }

    /// The size of the device's L2 cache in bytes.
    pub fn l2_cache_bytes(&self) -> Result<usize> {
        let device = Device::get_device(self.inner.ordinal as u32).map_err(driver("cuDeviceGet"))?;
        let bytes = device.get_attribute(DeviceAttribute::L2CacheSize).map_err(driver("cuDeviceGetAttribute"))?;
        Ok(bytes.max(0) as usize)
    }

    /// The raw `CUstream` this handle's work is queued on, for consumers
    /// that synchronise with it (as an integer handle).
    pub fn stream_handle(&self) -> u64 {
        self.stream.0 as u64
    }

    /// A handle of this context that queues all its work (launches,
    /// stream-ordered allocations and frees, copies, fills, waits) on
    /// `stream`, a raw `CUstream` of another library on this device (0: the
    /// legacy default stream), instead of the context's own stream. Memory it
    /// allocates is freed on `stream` unless told otherwise
    /// ([`DeviceBytes::free_on_stream`]).
    ///
    /// # Safety
    ///
    /// `stream` must be a live stream of this device for as long as the
    /// handle, its clones or memory allocated through them live.
    pub unsafe fn on_external_stream(&self, stream: u64) -> CudaContext {
        CudaContext { inner: self.inner.clone(), stream: RawStream(stream as cust::sys::CUstream) }
    }

    /// The stream this handle queues work on.
    fn stream(&self) -> cust::sys::CUstream {
        self.stream.0
    }

    fn make_current(&self) -> Result<()> {
        CurrentContext::set_current(&self.inner.context).map_err(driver("cuCtxSetCurrent"))
    }

    /// An uninitialised device allocation of `bytes` bytes (at least 1).
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBytes> {
        self.make_current()?;
        // Stream-ordered (cuMemAllocAsync from the device's pool): microseconds,
        // where cuMemAlloc synchronises the device. Every use of the memory is
        // queued on this stream (or follows a synchronisation of it), and it is
        // freed there (cuMemFreeAsync).
        // SAFETY: bytes are plain data; every byte is written before it is read
        // by the operations that allocate outputs.
        let mut pointer: cust::sys::CUdeviceptr = 0;
        // SAFETY: writes one device pointer; the stream belongs to this device.
        match unsafe { cust::sys::cuMemAllocAsync(&mut pointer, bytes.max(1), self.stream()) } {
            cust::sys::CUresult::CUDA_SUCCESS => {}
            cust::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => return Err(Error::OutOfMemory { bytes }),
            other => check(other, "cuMemAllocAsync")?,
        }
        // SAFETY: a fresh allocation of `bytes.max(1)` bytes, owned by the buffer
        // (freed by `DeviceBytes`'s drop, never by the buffer's own).
        let buffer = unsafe { DeviceBuffer::from_raw_parts(DevicePointer::from_raw(pointer), bytes.max(1)) };
        Ok(DeviceBytes {
            buffer: std::mem::ManuallyDrop::new(buffer),
            len: bytes,
            context: self.clone(),
            borrowed: false,
            free_stream: AtomicU64::new(OWN_STREAM),
        })
    }

    /// Lets the device's memory pool (the one [`CudaContext::alloc`] draws
    /// from) keep up to `bytes` of freed memory instead of handing it back to
    /// the driver at the next synchronisation (its release threshold, raised
    /// to `bytes` when lower, never lowered). A loader that allocates and
    /// frees the same large batches over and over would otherwise map the
    /// memory again for every batch.
    pub fn keep_pool_memory(&self, bytes: u64) -> Result<()> {
        let pool = self.memory_pool()?;
        if bytes > release_threshold(pool)? {
            let mut value = bytes;
            // SAFETY: reads one `cuuint64_t` of a valid pool.
            check(
                unsafe { cust::sys::cuMemPoolSetAttribute(pool, RELEASE_THRESHOLD, (&mut value as *mut u64).cast()) },
                "cuMemPoolSetAttribute",
            )?;
        }
        Ok(())
    }

    /// How much freed memory the device's pool keeps (its release threshold).
    pub fn pool_memory_kept(&self) -> Result<u64> {
        release_threshold(self.memory_pool()?)
    }

    /// The device memory the pool holds now, in use or kept for reuse
    /// (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`).
    pub fn pool_memory_reserved(&self) -> Result<u64> {
        pool_attribute(self.memory_pool()?, cust::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
    }

    /// The memory pool `cuMemAllocAsync` draws from on this device.
    fn memory_pool(&self) -> Result<cust::sys::CUmemoryPool> {
        self.make_current()?;
        let mut device: cust::sys::CUdevice = 0;
        // SAFETY: writes one device handle; the ordinal was checked by `new`.
        check(unsafe { cust::sys::cuDeviceGet(&mut device, self.inner.ordinal as i32) }, "cuDeviceGet")?;
        let mut pool: cust::sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: writes one pool handle of a valid device.
        check(unsafe { cust::sys::cuDeviceGetMemPool(&mut pool, device) }, "cuDeviceGetMemPool")?;
        Ok(pool)
    }

    /// A device copy of `data`.
    pub fn upload(&self, data: &[u8]) -> Result<DeviceBytes> {
        let out = self.alloc(data.len())?;
        if !data.is_empty() {
            // Queued on the stream after the allocation; from pageable memory the
            // call returns once `data` has been staged, so it may be dropped.
            // SAFETY: `out` holds exactly `data.len()` bytes and is freed in stream order.
            unsafe { self.copy_to_device(out.device_pointer(), data) }?;
        }
        Ok(out)
    }

    /// Queues a copy of `data` into `dest` at `offset` on the stream (from
    /// pageable memory the call returns once `data` has been staged, so it
    /// may be dropped).
    pub fn upload_into(&self, dest: &mut DeviceBytes, offset: usize, data: &[u8]) -> Result<()> {
        if offset.checked_add(data.len()).is_none_or(|end| end > dest.len) {
            return Err(Error::SizeMismatch { expected: offset.saturating_add(data.len()), actual: dest.len });
        }
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: the range is in bounds (checked above) and `dest` is freed
        // in stream order, after the copy.
        unsafe { self.copy_to_device(dest.device_pointer() + offset as u64, data) }
    }

    /// Queues a copy of `data` to `dest` on the stream (from pageable memory
    /// the call returns once `data` has been staged).
    ///
    /// # Safety
    ///
    /// `dest` must hold `data.len()` bytes of this context, alive until the
    /// copy is done in stream order.
    unsafe fn copy_to_device(&self, dest: cust::sys::CUdeviceptr, data: &[u8]) -> Result<()> {
        self.make_current()?;
        // SAFETY: forwarded to the caller; `data` is read during the call.
        check(
            unsafe { cust::sys::cuMemcpyHtoDAsync_v2(dest, data.as_ptr().cast(), data.len(), self.stream()) },
            "cuMemcpyHtoDAsync",
        )
    }

    /// Fills `buffer` with `value` bytes, queued on the stream.
    pub fn fill(&self, buffer: &mut DeviceBytes, value: u8) -> Result<()> {
        let len = buffer.len;
        self.fill_range(buffer, 0, len, value)
    }

    /// Fills `len` bytes of `buffer` from `offset` with `value`, queued on
    /// the stream.
    pub fn fill_range(&self, buffer: &mut DeviceBytes, offset: usize, len: usize, value: u8) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > buffer.len) {
            return Err(Error::SizeMismatch { expected: offset.saturating_add(len), actual: buffer.len });
        }
        if len == 0 {
            return Ok(());
        }
        self.make_current()?;
        // SAFETY: the range is in bounds (checked above) and the memset is
        // queued on the stream, which orders it with the kernels that use
        // the buffer.
        check(
            unsafe { cust::sys::cuMemsetD8Async(buffer.device_pointer() + offset as u64, value, len, self.stream()) },
            "cuMemsetD8Async",
        )
    }

    /// Waits for the stream, then copies `buffer` into `out` (same size).
    pub fn download(&self, buffer: &DeviceBytes, out: &mut [u8]) -> Result<()> {
        self.download_range(buffer, 0, out)
    }

    /// Waits for the stream, then copies `out.len()` bytes from `offset`.
    pub fn download_range(&self, buffer: &DeviceBytes, offset: usize, out: &mut [u8]) -> Result<()> {
        if offset.checked_add(out.len()).is_none_or(|end| end > buffer.len) {
            return Err(Error::SizeMismatch { expected: offset.saturating_add(out.len()), actual: buffer.len });
        }
        self.synchronize()?;
        if out.is_empty() {
            return Ok(());
        }
        let slice: DeviceSlice<u8> = buffer.buffer.index(offset..offset + out.len());
        slice.copy_to(out).map_err(driver("cuMemcpyDtoH"))
    }

    /// The first `out.len()` 64-bit words of `buffer` (little-endian) once
    /// the work queued so far is done: one asynchronous copy into page-locked
    /// memory and one wait for the stream (a pageable copy would add the
    /// driver's staging).
    pub fn read_words(&self, buffer: &DeviceBytes, out: &mut [u64]) -> Result<()> {
        let bytes = out.len() * 8;
        if buffer.len < bytes {
            return Err(Error::SizeMismatch { expected: bytes, actual: buffer.len });
        }
        if out.is_empty() {
            return Ok(());
        }
        self.make_current()?;
        let mut slot = lock(&self.inner.host_words, "host words")?;
        if slot.as_ref().is_none_or(|words| words.len() < out.len()) {
            *slot = None; // the smaller buffer goes before the larger one is made
            *slot = Some(LockedBuffer::new(&0u64, out.len().max(16)).map_err(driver("cuMemAllocHost"))?);
        }
        let Some(words) = slot.as_mut() else { unreachable!("the host words were just made") };
        // SAFETY: `bytes` page-locked bytes, held under the lock until the
        // stream has been waited for below; the source range is in bounds.
        unsafe {
            check(
                cust::sys::cuMemcpyDtoHAsync_v2(
                    words.as_mut_ptr().cast(),
                    buffer.device_pointer(),
                    bytes,
                    self.stream(),
                ),
                "cuMemcpyDtoHAsync",
            )?;
        }
        self.synchronize()?;
        out.copy_from_slice(&words[..out.len()]);
        Ok(())
    }

    /// Queues a copy of `len` bytes of `source` from `offset` to the start of
    /// `dest` (`cuMemcpyDtoDAsync` on the stream; does not wait).
    pub fn copy_range(&self, source: &DeviceBytes, offset: usize, dest: &DeviceBytes, len: usize) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > source.len) {
            return Err(Error::SizeMismatch { expected: offset.saturating_add(len), actual: source.len });
        }
        if len > dest.len {
            return Err(Error::SizeMismatch { expected: len, actual: dest.len });
        }
        if len == 0 {
            return Ok(());
        }
        // SAFETY: both ranges are in bounds (checked above); the buffers are
        // freed in stream order, after the copy.
        unsafe { self.copy_on_device(source.device_pointer() + offset as u64, dest.device_pointer(), len) }
    }

    /// Queues a copy of a block of rows (`cuMemcpy2DAsync` on the stream;
    /// does not wait): `rows` rows of `width` bytes, the first at byte
    /// `source_offset` of `source` and each `source_pitch` bytes after the
    /// last, to `dest` from `dest_offset`, each `dest_pitch` bytes apart.
    /// Pads rows into wider ones, or places them side by side.
    #[allow(clippy::too_many_arguments)]
    pub fn copy_rows(
        &self,
        source: &DeviceBytes,
        source_offset: usize,
        source_pitch: usize,
        dest: &DeviceBytes,
        dest_offset: usize,
        dest_pitch: usize,
        width: usize,
        rows: usize,
    ) -> Result<()> {
        if rows == 0 || width == 0 {
            return Ok(());
        }
        // The last byte each side touches, checked (and the pitches hold a row).
        let end = |offset: usize, pitch: usize| {
            (rows - 1).checked_mul(pitch).and_then(|v| v.checked_add(offset)).and_then(|v| v.checked_add(width))
        };
        for (offset, pitch, buffer) in [(source_offset, source_pitch, source), (dest_offset, dest_pitch, dest)] {
            match end(offset, pitch) {
                Some(end) if pitch >= width && end <= buffer.len => {}
                _ => {
                    return Err(Error::SizeMismatch {
                        expected: end(offset, pitch).unwrap_or(usize::MAX),
                        actual: buffer.len,
                    })
                }
            }
        }
        self.make_current()?;
        let copy = cust::sys::CUDA_MEMCPY2D_st {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: cust::sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: source.device_pointer() + source_offset as u64,
            srcArray: std::ptr::null_mut(),
            srcPitch: source_pitch,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: cust::sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: dest.device_pointer() + dest_offset as u64,
            dstArray: std::ptr::null_mut(),
            dstPitch: dest_pitch,
            WidthInBytes: width,
            Height: rows,
        };
        // SAFETY: both blocks are in bounds of their buffers (checked
        // above); the buffers are freed in stream order, after the copy; the
        // descriptor is read before the call returns.
        check(unsafe { cust::sys::cuMemcpy2DAsync_v2(&copy, self.stream()) }, "cuMemcpy2DAsync")
    }

    /// Queues a copy of `len` device bytes from `from` to `to` on the stream.
    ///
    /// # Safety
    ///
    /// Both ranges must be `len` bytes of this context, alive until the copy
    /// is done in stream order.
    unsafe fn copy_on_device(
        &self,
        from: cust::sys::CUdeviceptr,
        to: cust::sys::CUdeviceptr,
        len: usize,
    ) -> Result<()> {
        self.make_current()?;
        // SAFETY: forwarded to the caller.
        check(unsafe { cust::sys::cuMemcpyDtoDAsync_v2(to, from, len, self.stream()) }, "cuMemcpyDtoDAsync")
    }

    /// Page-locked host memory of `len` bytes (zeroed), which the GPU copies
    /// from and to asynchronously.
    pub fn pinned(&self, len: usize) -> Result<PinnedBuffer> {
        self.make_current()?;
        let buffer = LockedBuffer::new(&0u8, len.max(1)).map_err(driver("cuMemAllocHost"))?;
        Ok(PinnedBuffer { buffer, len, context: self.clone() })
    }

    /// Queues a copy of `source` into `dest` (same size) on the stream and
    /// returns at once.
    ///
    /// # Safety
    ///
    /// `source` must be neither written nor dropped until the stream has
    /// passed the copy (after [`CudaContext::synchronize`], or an [`Event`]
    /// recorded after it has completed).
    pub unsafe fn upload_async(&self, source: &PinnedBuffer, dest: &mut DeviceBytes) -> Result<()> {
        if source.len != dest.len {
            return Err(Error::SizeMismatch { expected: source.len, actual: dest.len });
        }
        // SAFETY: forwarded to the caller; both sides are `len` bytes.
        unsafe { self.copy_to_device(dest.device_pointer(), &source.buffer[..source.len]) }
    }

    /// Queues a copy of the first `dest.len()` bytes of `source` into `dest`
    /// on the copy stream, after the work queued on the stream so far (such
    /// as `dest`'s allocation), and makes the stream's later work wait for
    /// it; returns at once, with an event that completes with the copy. The
    /// copy overlaps kernels already queued on the stream.
    ///
    /// # Safety
    ///
    /// `source` must be neither written nor dropped until the returned event
    /// has completed.
    pub unsafe fn upload_on_copy_stream(&self, source: &PinnedBuffer, dest: &mut DeviceBytes) -> Result<Event> {
        if dest.len > source.len {
            return Err(Error::SizeMismatch { expected: dest.len, actual: source.len });
        }
        self.make_current()?;
        let copy_stream = self.inner.copy_stream.as_inner();
        let allocated = Event::recorded(self, self.stream(), false)?;
        allocated.wait_on(copy_stream)?;
        // SAFETY: forwarded to the caller; `dest` holds `dest.len` bytes and is
        // freed in stream order, after the stream has waited for the copy.
        check(
            unsafe {
                cust::sys::cuMemcpyHtoDAsync_v2(
                    dest.device_pointer(),
                    source.buffer.as_ptr().cast(),
                    dest.len,
                    copy_stream,
                )
            },
            "cuMemcpyHtoDAsync",
        )?;
        let copied = Event::recorded(self, copy_stream, false)?;
        copied.wait_on(self.stream())?;
        Ok(copied)
    }

    /// Queues a copy of `source` into `dest` (same size) on the stream and
    /// returns at once.
    ///
    /// # Safety
    ///
    /// `dest` must be neither read, written nor dropped until the stream has
    /// passed the copy.
    pub unsafe fn download_async(&self, source: &DeviceBytes, dest: &mut PinnedBuffer) -> Result<()> {
        if source.len != dest.len {
            return Err(Error::SizeMismatch { expected: source.len, actual: dest.len });
        }
        self.make_current()?;
        // SAFETY: forwarded to the caller; both sides are `len` bytes.
        check(
            unsafe {
                cust::sys::cuMemcpyDtoHAsync_v2(
                    dest.buffer.as_mut_ptr().cast(),
                    source.device_pointer(),
                    source.len,
                    self.stream(),
                )
            },
            "cuMemcpyDtoHAsync",
        )
    }

    /// Waits until all queued work is done; reports a kernel fault.
    pub fn synchronize(&self) -> Result<()> {
        self.make_current()?;
        // SAFETY: the stream belongs to this device.
        match unsafe { cust::sys::cuStreamSynchronize(self.stream()) } {
            cust::sys::CUresult::CUDA_SUCCESS => Ok(()),
            other => Err(Error::Kernel { kernel: "(queued work)", message: format!("{other:?}") }),
        }
    }

    /// How many blocks of `block` threads and `shared_bytes` of dynamic
    /// shared memory of `kernel` fit on one multiprocessor at once (at least 1).
    pub fn resident_blocks(&self, kernel: Kernel, block: u32, shared_bytes: u32) -> Result<u32> {
        let key = (kernel, block, shared_bytes);
        if let Some(&blocks) = lock(&self.inner.occupancy, "occupancy cache")?.get(&key) {
            return Ok(blocks);
        }
        let function = self.function(kernel)?;
        let mut blocks = 0i32;
        // SAFETY: `function` is a loaded kernel of this context (current).
        let result = unsafe {
            cust::sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut blocks,
                function.0,
                block as i32,
                shared_bytes as usize,
            )
        };
        check(result, "cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
        let blocks = (blocks.max(1)) as u32;
        lock(&self.inner.occupancy, "occupancy cache")?.insert(key, blocks);
        Ok(blocks)
    }

    /// `kernel`'s function, its module loaded on first use; makes the
    /// context current.
    fn function(&self, kernel: Kernel) -> Result<RawFunction> {
        self.make_current()?;
        if let Some(&function) = lock(&self.inner.functions, "function cache")?.get(&kernel) {
            return Ok(function);
        }
        let mut modules = lock(&self.inner.modules, "module cache")?;
        let module = match modules.entry(kernel.module()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(
                CustModule::from_ptx(kernel.module().ptx(self.inner.arch), &[]).map_err(driver("cuModuleLoadData"))?,
            ),
        };
        let function: Function<'_> = module.get_function(kernel.name()).map_err(driver("cuModuleGetFunction"))?;
        let function = RawFunction(function.to_raw());
        lock(&self.inner.functions, "function cache")?.insert(kernel, function);
        Ok(function)
    }

    /// Queues `entry` with `params`, its parameters in the kernel's order
    /// and types (checked against the PTX by robocache-kernels' tests).
    ///
    /// # Safety
    ///
    /// Every device pointer in `params` must be valid for what the kernel
    /// does with it until the launch completes (in stream order).
    pub unsafe fn launch<P: Params>(&self, entry: Entry<P>, config: LaunchConfig, mut params: P) -> Result<()> {
        let kernel = entry.kernel();
        let function = self.function(kernel)?;
        // SAFETY: the function is loaded in this (current) context; the
        // pointers are to `params`, which matches the kernel's parameter list
        // (the `Entry`'s type) and lives through the call; the device
        // pointers in it are the caller's contract.
        let result = params.with_pointers(|pointers| unsafe {
            cust::sys::cuLaunchKernel(
                function.0,
                config.grid,
                1,
                1,
                config.block,
                1,
                1,
                config.shared_bytes,
                self.stream(),
                pointers.as_ptr() as *mut *mut c_void,
                std::ptr::null_mut(),
            )
        });
        match result {
            cust::sys::CUresult::CUDA_SUCCESS => Ok(()),
            other => Err(Error::Kernel { kernel: kernel.name(), message: format!("{other:?}") }),
        }
    }

    /// Makes this context's stream wait, on the device, for the work queued
    /// so far on `stream`, a raw `CUstream` of another library on the same
    /// device (0 is the legacy default stream). The host does not wait.
    pub fn wait_for_external_stream(&self, stream: u64) -> Result<()> {
        self.order_streams(stream as cust::sys::CUstream, self.stream())
    }

    /// Makes `stream`, a raw `CUstream` of another library on the same
    /// device, wait on the device for the work queued so far on this
    /// context's stream. The host does not wait.
    pub fn make_external_stream_wait(&self, stream: u64) -> Result<()> {
        self.order_streams(self.stream(), stream as cust::sys::CUstream)
    }

    /// `waiter` waits for what `signaller` has queued: the context's
    /// ordering event recorded on one and waited for by the other, under its
    /// lock (created on first use, reused after: a queued wait is on the
    /// record made before it, whatever is recorded later).
    fn order_streams(&self, signaller: cust::sys::CUstream, waiter: cust::sys::CUstream) -> Result<()> {
        use cust::sys::{cuEventCreate, cuEventRecord, cuStreamWaitEvent};
        const DISABLE_TIMING: u32 = 2; // CU_EVENT_DISABLE_TIMING
        self.make_current()?;
        let mut slot = lock(&self.inner.ordering_event, "ordering event")?;
        let event = match &*slot {
            Some(event) => event.0,
            None => {
                let mut event = std::ptr::null_mut();
                // SAFETY: creates an event in the current context.
                check(unsafe { cuEventCreate(&mut event, DISABLE_TIMING) }, "cuEventCreate")?;
                slot.insert(RawEvent(event)).0
            }
        };
        // SAFETY: the event belongs to this context; both streams belong to
        // its device (the caller's contract for a foreign handle, which the
        // driver checks).
        unsafe {
            check(cuEventRecord(event, signaller), "cuEventRecord")?;
            check(cuStreamWaitEvent(waiter, event, 0), "cuStreamWaitEvent")
        }
    }

    /// Device memory owned by someone else (another library's tensor) as
    /// [`DeviceBytes`] that are never freed by robocache.
    ///
    /// # Safety
    ///
    /// `address..address + len` must be device memory of this context's
    /// device, valid until every use of the returned bytes queued on the
    /// stream has completed.
    pub unsafe fn borrow(&self, address: u64, len: usize) -> DeviceBytes {
        // SAFETY: forwarded to the caller; the buffer is never freed (see Drop).
        let buffer = unsafe { DeviceBuffer::from_raw_parts(DevicePointer::from_raw(address), len) };
        DeviceBytes {
            buffer: std::mem::ManuallyDrop::new(buffer),
            len,
            context: self.clone(),
            borrowed: true,
            free_stream: AtomicU64::new(OWN_STREAM),
        }
    }

    /// An event recorded on the stream now.
    pub fn record_event(&self) -> Result<Event> {
        self.make_current()?;
        Event::recorded(self, self.stream(), true)
    }
}

/// `DeviceBytes::free_stream` when the memory is freed on the stream of the
/// handle that made it.
const OWN_STREAM: u64 = u64::MAX;

/// An untyped device allocation of `len` bytes. Dropping it frees the memory
/// in stream order (`cuMemFreeAsync` on the stream of the handle that made
/// it, or the one [`DeviceBytes::free_on_stream`] names): after the work
/// already queued there, without waiting for it.
pub struct DeviceBytes {
    buffer: std::mem::ManuallyDrop<DeviceBuffer<u8>>,
    len: usize,
    context: CudaContext,
    /// Memory of another owner ([`CudaContext::borrow`]): never freed here.
    borrowed: bool,
    /// The raw stream the memory is freed on, `OWN_STREAM` for its handle's.
    free_stream: AtomicU64,
}

impl Drop for DeviceBytes {
    fn drop(&mut self) {
        if self.borrowed {
            return; // its owner frees it; the ManuallyDrop buffer is simply forgotten
        }
        // SAFETY: `drop` runs once and nothing uses the buffer after it.
        let buffer = unsafe { std::mem::ManuallyDrop::take(&mut self.buffer) };
        if self.context.make_current().is_err() {
            return std::mem::forget(buffer); // no context to free in: leaked, as a failed free would
        }
        let stream = match *self.free_stream.get_mut() {
            OWN_STREAM => self.context.stream(),
            stream => stream as cust::sys::CUstream,
        };
        // A failure here can only leak the allocation; there is no one to report it to.
        // SAFETY: the allocation is this buffer's, freed once (the buffer is
        // forgotten below); the handle's stream, or the one `free_on_stream`'s
        // caller vouched for, is live and ordered after every use.
        let _ = unsafe { cust::sys::cuMemFreeAsync(buffer.as_device_ptr().as_raw(), stream) };
        std::mem::forget(buffer);
    }
}

// SAFETY: a device allocation is an address in the context's memory; the
// driver calls that use it make the context current first.
unsafe impl Send for DeviceBytes {}
unsafe impl Sync for DeviceBytes {}

impl fmt::Debug for DeviceBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceBytes({} bytes at {:#x} on cuda:{})", self.len, self.device_pointer(), self.context.ordinal())
    }
}

impl DeviceBytes {
    /// Frees the memory, once it is dropped, in stream order on `stream` (a
    /// raw `CUstream` of another library on this device; 0 the legacy
    /// default stream) instead of its handle's stream, so that the free
    /// follows the work queued there and the handle's stream never waits
    /// for it. Stream-ordered pools let memory freed on one stream serve
    /// allocations on another, with the dependencies that takes.
    ///
    /// # Safety
    ///
    /// When the memory is dropped, `stream` must be a live stream of this
    /// device, and every use of the memory queued on any stream must be
    /// ordered before the work queued on `stream` by then.
    pub unsafe fn free_on_stream(&self, stream: u64) {
        self.free_stream.store(stream, Ordering::Relaxed);
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The raw device address, for kernels and for consumers of results.
    pub fn device_pointer(&self) -> u64 {
        self.buffer.as_device_ptr().as_raw()
    }

    /// The context the allocation belongs to.
    pub fn context(&self) -> &CudaContext {
        &self.context
    }

    /// A device copy, queued on the stream of the handle that made this
    /// memory, after the work already there (`cuMemcpyDtoDAsync`); it does
    /// not wait.
    pub fn duplicate(&self) -> Result<DeviceBytes> {
        let out = self.context.alloc(self.len)?;
        if self.len > 0 {
            // SAFETY: both buffers hold `len` bytes and are freed in stream order,
            // after the copy.
            unsafe { self.context.copy_on_device(self.device_pointer(), out.device_pointer(), self.len) }?;
        }
        Ok(out)
    }
}

/// A point in a stream's work (for timing, or to know when a copy is done).
pub struct Event {
    event: cust::sys::CUevent,
    context: CudaContext,
}

// SAFETY: an event handle is an opaque driver token; every call through it
// makes its context current first.
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Event(cuda:{})", self.context.ordinal())
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.context.make_current().is_ok() {
            // SAFETY: the event is this value's; waits already queued on it
            // keep it until they are done (the driver releases it then).
            let _ = unsafe { cust::sys::cuEventDestroy_v2(self.event) };
        }
    }
}

impl Event {
    /// A new event recorded on `stream` now (`timed`: it can measure elapsed
    /// time); `context` is current.
    fn recorded(context: &CudaContext, stream: cust::sys::CUstream, timed: bool) -> Result<Event> {
        const DISABLE_TIMING: u32 = 2; // CU_EVENT_DISABLE_TIMING
        let mut event = std::ptr::null_mut();
        // SAFETY: creates an event in the current context.
        check(
            unsafe { cust::sys::cuEventCreate(&mut event, if timed { 0 } else { DISABLE_TIMING }) },
            "cuEventCreate",
        )?;
        let event = Event { event, context: context.clone() };
        // SAFETY: the event and the stream belong to this device.
        check(unsafe { cust::sys::cuEventRecord(event.event, stream) }, "cuEventRecord")?;
        Ok(event)
    }

    /// Makes `stream` wait, on the device, for the work before the event.
    fn wait_on(&self, stream: cust::sys::CUstream) -> Result<()> {
        // SAFETY: the event and the stream belong to this (current) device.
        check(unsafe { cust::sys::cuStreamWaitEvent(stream, self.event, 0) }, "cuStreamWaitEvent")
    }

    /// Whether the work before the event has completed (does not wait).
    pub fn is_complete(&self) -> Result<bool> {
        self.context.make_current()?;
        // SAFETY: the event is live.
        match unsafe { cust::sys::cuEventQuery(self.event) } {
            cust::sys::CUresult::CUDA_SUCCESS => Ok(true),
            cust::sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => check(other, "cuEventQuery").map(|()| false),
        }
    }

    /// Waits until the work before the event has completed.
    pub fn wait(&self) -> Result<()> {
        self.context.make_current()?;
        // SAFETY: the event is live.
        check(unsafe { cust::sys::cuEventSynchronize(self.event) }, "cuEventSynchronize")
    }

    /// Milliseconds from `start` to this event (waits for this event).
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f32> {
        self.wait()?;
        let mut ms = 0f32;
        // SAFETY: both events are live, timed, and of this device.
        check(unsafe { cust::sys::cuEventElapsedTime(&mut ms, start.event, self.event) }, "cuEventElapsedTime")?;
        Ok(ms)
    }
}

/// Page-locked host memory, for asynchronous copies.
pub struct PinnedBuffer {
    buffer: LockedBuffer<u8>,
    len: usize,
    context: CudaContext,
}

// SAFETY: page-locked host memory is ordinary memory to the CPU.
unsafe impl Send for PinnedBuffer {}
unsafe impl Sync for PinnedBuffer {}

impl fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PinnedBuffer({} bytes, cuda:{})", self.len, self.context.ordinal())
    }
}

impl PinnedBuffer {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buffer[..self.len]
    }

    /// The bytes, to fill before an upload.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buffer[..self.len]
    }
}

/// `mutex`'s guard; a lock poisoned by a panic elsewhere is an error naming `what`.
fn lock<'a, T>(mutex: &'a Mutex<T>, what: &'static str) -> Result<std::sync::MutexGuard<'a, T>> {
    mutex.lock().map_err(|_| Error::Driver { call: what, message: "poisoned by a panic on another thread".into() })
}

/// A raw driver result as this crate's error, naming the call (as `driver`
/// maps cust's: no initialised driver, or a function the loaded libcuda
/// lacks, is `DriverUnavailable`).
const RELEASE_THRESHOLD: cust::sys::CUmemPool_attribute =
    cust::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;

/// The release threshold of `pool`, a valid pool of a device.
fn release_threshold(pool: cust::sys::CUmemoryPool) -> Result<u64> {
    pool_attribute(pool, RELEASE_THRESHOLD)
}

/// A `cuuint64_t` attribute of `pool`, a valid pool of a device.
fn pool_attribute(pool: cust::sys::CUmemoryPool, attribute: cust::sys::CUmemPool_attribute) -> Result<u64> {
    let mut current: u64 = 0;
    // SAFETY: the attributes read here are `cuuint64_t`s, written into `current`.
    check(
        unsafe { cust::sys::cuMemPoolGetAttribute(pool, attribute, (&mut current as *mut u64).cast()) },
        "cuMemPoolGetAttribute",
    )?;
    Ok(current)
}

fn check(result: cust::sys::CUresult, call: &'static str) -> Result<()> {
    use cust::sys::CUresult::{CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_UNKNOWN, CUDA_SUCCESS};
    match result {
        CUDA_SUCCESS => Ok(()),
        CUDA_ERROR_NOT_INITIALIZED | CUDA_ERROR_UNKNOWN => Err(Error::DriverUnavailable(format!("{call}: {result:?}"))),
        other => Err(Error::Driver { call, message: format!("{other:?}") }),
    }
}

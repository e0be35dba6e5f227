//! The CUDA device as the facade's [`CudaBackend`] and [`CudaOperations`]: the memory, stream and
//! staging calls here, the operations in their own modules (`resample`,
//! `fusion`, `voxelize`, `frames`, `assemble`, `timing`), which this file is the only
//! one to call from outside the backend.

use std::time::Duration;

use robocache_augment::FrameAugment;
use robocache_cpu::{DType, HostSlice, HostVec, ResampleSpec, VoxelGrid, VoxelMode};
use robocache_video::ResizePlan;

use super::augment::AugmentSource;
use super::backend::{host_vec_from_bytes, CudaDevice, DeviceStorage};
use super::error::cuda_error;
use super::staging::StagingBuffer;
use super::timing::DeviceEvent;
use crate::assembly::{Assembled, AssemblyRequest, ResidentStream};
use crate::backend::operations::CudaOperations;
use crate::backend::{CudaBackend, RowBlock};
use crate::ops::descriptors::{
    FrameDType, FrameLayout, FrameOutput, Fused, FusionStreamInput, Resampled, StreamInput, TargetTimes, VoxelInput,
    VoxelOutput,
};
use crate::{Device, Result, Tensor};

impl CudaBackend for CudaDevice {
    type Storage = DeviceStorage;
    type Event = DeviceEvent;
    type Staging = StagingBuffer;

    fn open(ordinal: usize) -> Result<Self> {
        CudaDevice::open_cached(ordinal)
    }

    /// The device ordinal.
    fn ordinal(&self) -> usize {
        self.context.ordinal()
    }

    /// The device's name, as the driver reports it.
    fn name(&self) -> String {
        self.context.name().to_owned()
    }

    /// The compute capability `(major, minor)`.
    fn compute_capability(&self) -> (u32, u32) {
        self.context.compute_capability()
    }

    /// The PTX arch loaded for the device (`sm_90`).
    fn arch_name(&self) -> &'static str {
        self.context.arch().name()
    }

    /// The raw `CUstream` robocache queues work on.
    fn stream_handle(&self) -> u64 {
        self.context.stream_handle()
    }

    unsafe fn on_external_stream(&self, stream: u64) -> Self {
        // SAFETY: forwarded to the caller (`Device::on_external_stream`).
        let context = unsafe { self.context.on_external_stream(stream) };
        CudaDevice { context, scratch: self.scratch.clone(), staging: self.staging.clone() }
    }

    /// Waits until the work queued on the device's stream is done.
    fn synchronize(&self) -> Result<()> {
        self.context.synchronize().map_err(cuda_error)
    }

    /// Makes robocache's stream wait (on the device, the host goes on) for
    /// the work queued so far on `stream`, a raw `CUstream` of another
    /// library on this device (0: the legacy default stream).
    fn wait_for_external_stream(&self, stream: u64) -> Result<()> {
        self.context.wait_for_external_stream(stream).map_err(cuda_error)
    }

    /// Makes `stream`, a raw `CUstream` of another library on this device,
    /// wait (on the device) for the work queued so far on robocache's stream.
    fn make_external_stream_wait(&self, stream: u64) -> Result<()> {
        self.context.make_external_stream_wait(stream).map_err(cuda_error)
    }

    /// `bytes` bytes of another owner's device memory at `address`, never
    /// freed by robocache.
    ///
    /// # Safety
    ///
    /// The memory must be on this device and stay valid until the work
    /// queued with it on robocache's stream has completed.
    unsafe fn borrow(&self, address: u64, bytes: usize) -> Result<DeviceStorage> {
        // SAFETY: forwarded to the caller.
        Ok(DeviceStorage::new(unsafe { self.context.borrow(address, bytes) }))
    }

    /// `len` bytes of page-locked memory from the staging pool, to assemble
    /// an upload in (see `staging`).
    fn zeros(&self, len: usize) -> Result<DeviceStorage> {
        let mut bytes = self.alloc(len)?;
        self.context.fill_range(&mut bytes, 0, len, 0).map_err(cuda_error)?;
        Ok(DeviceStorage::new(bytes))
    }

    fn copy_rows(&self, from: &DeviceStorage, to: &DeviceStorage, block: &RowBlock) -> Result<()> {
        self.context
            .copy_rows(
                &from.bytes,
                from.offset + block.from_offset,
                block.from_pitch,
                &to.bytes,
                to.offset + block.to_offset,
                block.to_pitch,
                block.width,
                block.rows,
            )
            .map_err(cuda_error)
    }

    fn keep_pool_memory(&self, bytes: usize) -> Result<()> {
        self.context.keep_pool_memory(bytes as u64).map_err(cuda_error)
    }

    fn lend_staging(&self, len: usize) -> Result<StagingBuffer> {
        self.staging.lend(&self.context, len)
    }

    fn lend_staging_together(&self, lens: &[usize]) -> Result<Vec<StagingBuffer>> {
        self.staging.lend_together(&self.context, lens)
    }

    /// The bytes of `lent` on the device, copied on the copy stream; returns
    /// once the copy is queued.
    fn upload_staging(&self, lent: StagingBuffer) -> Result<DeviceStorage> {
        self.staging.upload_lent(&self.context, lent).map(DeviceStorage::new)
    }

    /// Sets the most page-locked memory the staging pool holds (idle
    /// buffers over it freed, the peak restarted).
    fn set_staging_budget(&self, bytes: usize) -> Result<()> {
        self.staging.set_budget(bytes)
    }

    /// The staging budget and the most page-locked bytes held at once since
    /// the budget was last set.
    fn staging_usage(&self) -> Result<(usize, usize)> {
        self.staging.usage()
    }

    fn upload(&self, data: HostSlice<'_>) -> Result<DeviceStorage> {
        let bytes = match data {
            // bool is one byte, 0 or 1.
            HostSlice::Bool(v) => self.context.upload(bytemuck::cast_slice(v)),
            other => self.context.upload(other.as_bytes()),
        };
        bytes.map(DeviceStorage::new).map_err(cuda_error)
    }

    fn download(&self, storage: &DeviceStorage, dtype: DType, len: usize) -> Result<HostVec> {
        let mut bytes = vec![0u8; len * dtype.size_in_bytes()];
        self.context.download_range(&storage.bytes, storage.offset, &mut bytes).map_err(cuda_error)?;
        Ok(host_vec_from_bytes(dtype, &bytes))
    }

    fn duplicate(&self, storage: &DeviceStorage, len: usize) -> Result<DeviceStorage> {
        self.copy_storage(storage, len)
    }

    fn storage_pointer(storage: &DeviceStorage) -> u64 {
        storage.device_pointer()
    }

    fn storage_parts(storage: DeviceStorage, offsets: &[usize]) -> Vec<DeviceStorage> {
        offsets.iter().map(|&offset| DeviceStorage::part(&storage.bytes, storage.offset + offset)).collect()
    }

    unsafe fn free_storage_on_stream(storage: &DeviceStorage, stream: u64) {
        // SAFETY: forwarded to the caller.
        unsafe { storage.bytes.free_on_stream(stream) }
    }

    fn staging_bytes(staging: &mut StagingBuffer) -> &mut [u8] {
        staging.as_mut_bytes()
    }

    fn record_event(&self) -> Result<DeviceEvent> {
        self.record()
    }

    fn elapsed(start: &DeviceEvent, end: &DeviceEvent) -> Result<Duration> {
        end.elapsed_since(start)
    }

    fn evict_caches(&self) -> Result<()> {
        self.queue_cache_eviction()
    }
}

impl CudaOperations for CudaDevice {
    fn resample(
        &self,
        device: &Device,
        stream: &StreamInput<'_>,
        targets: &TargetTimes<'_>,
        spec: &ResampleSpec,
    ) -> Result<Resampled> {
        self.run_resample(device, stream, targets, spec)
    }

    fn fuse(
        &self,
        device: &Device,
        streams: &[FusionStreamInput<'_>],
        targets: &TargetTimes<'_>,
        dtype: DType,
    ) -> Result<Fused> {
        self.run_fusion(device, streams, targets, dtype)
    }

    fn voxelize(
        &self,
        device: &Device,
        input: &VoxelInput<'_>,
        grid: &VoxelGrid,
        mode: VoxelMode,
        budget_bytes: u64,
    ) -> Result<VoxelOutput> {
        self.run_voxelize(device, input, grid, mode, budget_bytes)
    }

    fn yuv420_to_rgb(
        &self,
        device: &Device,
        planes: &Tensor,
        width: usize,
        height: usize,
        output: FrameOutput,
    ) -> Result<Tensor> {
        self.run_yuv420_to_rgb(device, planes, width, height, output)
    }

    fn convert_frames(
        &self,
        device: &Device,
        frames: &Tensor,
        resize: Option<&ResizePlan>,
        output: FrameOutput,
    ) -> Result<Tensor> {
        self.run_convert_frames(device, frames, resize, output)
    }

    fn stack_frames(
        &self,
        device: &Device,
        picks: &[(&Tensor, usize)],
        width: usize,
        height: usize,
        output: FrameOutput,
    ) -> Result<Tensor> {
        self.run_stack_frames(device, picks, width, height, output)
    }

    fn augment_frames(
        &self,
        device: &Device,
        frames: &Tensor,
        layout: FrameLayout,
        dtype: FrameDType,
        steps: usize,
        params: &[FrameAugment],
        output: (usize, usize),
    ) -> Result<Tensor> {
        let shape = frames.shape();
        let in_size = match layout {
            FrameLayout::Hwc => (shape[2], shape[1]),
            FrameLayout::Chw => (shape[3], shape[2]),
        };
        let source = AugmentSource::Batch(frames);
        self.run_augment_frames(device, source, (shape[0], in_size), layout, dtype, steps, params, output)
    }

    fn stack_augmented_frames(
        &self,
        device: &Device,
        picks: &[(&Tensor, usize)],
        size: (usize, usize),
        layout: FrameLayout,
        dtype: FrameDType,
        steps: usize,
        params: &[FrameAugment],
        output: (usize, usize),
    ) -> Result<Tensor> {
        let source = AugmentSource::Picks(picks);
        self.run_augment_frames(device, source, (picks.len(), size), layout, dtype, steps, params, output)
    }

    fn resident_table(&self, device: &Device, stream: &ResidentStream) -> Result<Tensor> {
        self.upload_resident_table(device, stream)
    }

    fn assemble(
        &self,
        device: &Device,
        streams: &[ResidentStream],
        request: &AssemblyRequest<'_>,
    ) -> Result<Assembled> {
        self.run_assembly(device, streams, request)
    }

    fn copy_row_blocks(&self, device: &Device, blocks: &[(&Tensor, &Tensor, RowBlock)]) -> Result<()> {
        self.run_copy_row_blocks(device, blocks)
    }

    fn flip_mask(&self, mask: &mut Tensor) -> Result<()> {
        CudaDevice::flip_mask(self, mask)
    }
}

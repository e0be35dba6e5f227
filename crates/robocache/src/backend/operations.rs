//! The operations the facade asks of a CUDA device (see the parent module).

use robocache_augment::FrameAugment;
use robocache_cpu::{DType, ResampleSpec, VoxelGrid, VoxelMode};
use robocache_video::ResizePlan;

use crate::assembly::{Assembled, AssemblyRequest, ResidentStream};
use crate::backend::RowBlock;
use crate::ops::descriptors::{
    FrameDType, FrameLayout, FrameOutput, Fused, FusionStreamInput, Resampled, StreamInput, TargetTimes, VoxelInput,
    VoxelOutput,
};
use crate::{Device, Result, Tensor};

/// The operations and the batch assembly on a CUDA device; `device` is the
/// device's own handle, for the tensors of the results.
pub(crate) trait CudaOperations {
    /// [`Device::resample`] on this device (`device` is its handle, for the results).
    fn resample(
        &self,
        device: &Device,
        stream: &StreamInput<'_>,
        targets: &TargetTimes<'_>,
        spec: &ResampleSpec,
    ) -> Result<Resampled>;
    /// [`Device::fuse`] on this device.
    fn fuse(
        &self,
        device: &Device,
        streams: &[FusionStreamInput<'_>],
        targets: &TargetTimes<'_>,
        dtype: DType,
    ) -> Result<Fused>;
    /// [`Device::voxelize`] on this device.
    fn voxelize(
        &self,
        device: &Device,
        input: &VoxelInput<'_>,
        grid: &VoxelGrid,
        mode: VoxelMode,
        budget_bytes: u64,
    ) -> Result<VoxelOutput>;
    /// [`Device::yuv420_to_rgb`] on this device (the input checked).
    fn yuv420_to_rgb(
        &self,
        device: &Device,
        planes: &Tensor,
        width: usize,
        height: usize,
        output: FrameOutput,
    ) -> Result<Tensor>;
    /// [`Device::convert_frames`] on this device (the input checked, the
    /// resize planned).
    fn convert_frames(
        &self,
        device: &Device,
        frames: &Tensor,
        resize: Option<&ResizePlan>,
        output: FrameOutput,
    ) -> Result<Tensor>;
    /// [`Device::stack_frames`] on this device (the picks checked: u8
    /// `[height, width, 3]` frames of tensors on this device).
    fn stack_frames(
        &self,
        device: &Device,
        picks: &[(&Tensor, usize)],
        width: usize,
        height: usize,
        output: FrameOutput,
    ) -> Result<Tensor>;
    /// [`Device::augment_frames`] on this device (the frames checked:
    /// `steps * params.len()` of them, u8 or f32 in `layout`; every crop
    /// within the frame and every window's output `output`).
    fn augment_frames(
        &self,
        device: &Device,
        frames: &Tensor,
        layout: FrameLayout,
        dtype: FrameDType,
        steps: usize,
        params: &[FrameAugment],
        output: (usize, usize),
    ) -> Result<Tensor>;
    /// [`Device::stack_augmented_frames`] on this device (the picks checked:
    /// u8 `[height, width, 3]` frames of tensors on this device,
    /// `steps * params.len()` of them; every crop within the frame and every
    /// window's output `output`).
    #[allow(clippy::too_many_arguments)]
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
    ) -> Result<Tensor>;
    /// A resident stream's episode table in the assembly kernel's layout.
    fn resident_table(&self, device: &Device, stream: &ResidentStream) -> Result<Tensor>;
    /// One batch of windows of resident streams, with its columns.
    fn assemble(&self, device: &Device, streams: &[ResidentStream], request: &AssemblyRequest<'_>)
        -> Result<Assembled>;
    /// Flips a bool mask in place (valid to padding), queued on the device.
    fn flip_mask(&self, mask: &mut Tensor) -> Result<()>;
    /// Copies every block of rows `(from, to, block)` (`from`'s rows, each
    /// `block.width` bytes `block.from_pitch` apart, into `to` from byte
    /// `block.to_offset`, `block.to_pitch` apart) in one launch, queued on
    /// the device. The blocks are checked by the caller to lie inside both
    /// tensors, and no two write the same bytes.
    fn copy_row_blocks(&self, device: &Device, blocks: &[(&Tensor, &Tensor, RowBlock)]) -> Result<()>;
}

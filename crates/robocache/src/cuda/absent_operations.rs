//! The operations of the placeholder CUDA device (see `absent`): none can
//! run, since no device exists.

use robocache_augment::FrameAugment;
use robocache_cpu::{DType, ResampleSpec, VoxelGrid, VoxelMode};
use robocache_video::ResizePlan;

use super::absent::CudaDevice;
use crate::assembly::{Assembled, AssemblyRequest, ResidentStream};
use crate::backend::operations::CudaOperations;
use crate::backend::RowBlock;
use crate::ops::descriptors::{
    FrameDType, FrameLayout, FrameOutput, Fused, FusionStreamInput, Resampled, StreamInput, TargetTimes, VoxelInput,
    VoxelOutput,
};
use crate::{Device, Result, Tensor};

impl CudaOperations for CudaDevice {
    fn resample(&self, _: &Device, _: &StreamInput<'_>, _: &TargetTimes<'_>, _: &ResampleSpec) -> Result<Resampled> {
        self.unreachable()
    }

    fn fuse(&self, _: &Device, _: &[FusionStreamInput<'_>], _: &TargetTimes<'_>, _: DType) -> Result<Fused> {
        self.unreachable()
    }

    fn voxelize(&self, _: &Device, _: &VoxelInput<'_>, _: &VoxelGrid, _: VoxelMode, _: u64) -> Result<VoxelOutput> {
        self.unreachable()
    }

    fn yuv420_to_rgb(&self, _: &Device, _: &Tensor, _: usize, _: usize, _: FrameOutput) -> Result<Tensor> {
        self.unreachable()
    }

    fn convert_frames(&self, _: &Device, _: &Tensor, _: Option<&ResizePlan>, _: FrameOutput) -> Result<Tensor> {
        self.unreachable()
    }

    fn stack_frames(&self, _: &Device, _: &[(&Tensor, usize)], _: usize, _: usize, _: FrameOutput) -> Result<Tensor> {
        self.unreachable()
    }

    fn augment_frames(
        &self,
        _: &Device,
        _: &Tensor,
        _: FrameLayout,
        _: FrameDType,
        _: usize,
        _: &[FrameAugment],
        _: (usize, usize),
    ) -> Result<Tensor> {
        self.unreachable()
    }

    fn stack_augmented_frames(
        &self,
        _: &Device,
        _: &[(&Tensor, usize)],
        _: (usize, usize),
        _: FrameLayout,
        _: FrameDType,
        _: usize,
        _: &[FrameAugment],
        _: (usize, usize),
    ) -> Result<Tensor> {
        self.unreachable()
    }

    fn resident_table(&self, _: &Device, _: &ResidentStream) -> Result<Tensor> {
        self.unreachable()
    }

    fn assemble(&self, _: &Device, _: &[ResidentStream], _: &AssemblyRequest<'_>) -> Result<Assembled> {
        self.unreachable()
    }

    fn copy_row_blocks(&self, _: &Device, _: &[(&Tensor, &Tensor, RowBlock)]) -> Result<()> {
        self.unreachable()
    }

    fn flip_mask(&self, _: &mut Tensor) -> Result<()> {
        self.unreachable()
    }
}

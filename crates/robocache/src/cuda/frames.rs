//! Decoded camera frames to RGB: one `yuv420_to_rgb` launch for a batch of
//! frames (see `kernels/video.cu`).

use robocache_cuda::abi::{DTypeCode, FrameArgs, FrameLayout as LayoutCode};
use robocache_cuda::{entry, LaunchConfig};

use super::backend::{CudaDevice, DeviceStorage};
use super::error::cuda_error;
use super::resample::device_pointer;
use crate::ops::descriptors::{FrameDType, FrameLayout, FrameOutput};
use crate::{Device, Error, Result, Tensor};

/// Threads of a block: a pixel each.
const THREADS: u32 = 256;

impl CudaDevice {
    /// [`Device::yuv420_to_rgb`] on this device; the input is checked by the
    /// caller (`u8 [N, yuv420_len]`, fewer than 2³² pixels a frame).
    pub(super) fn run_yuv420_to_rgb(
        &self,
        device: &Device,
        planes: &Tensor,
        width: usize,
        height: usize,
        output: FrameOutput,
    ) -> Result<Tensor> {
        let frames = planes.shape()[0];
        let dtype = output.dtype.dtype();
        let shape = output.shape(frames, width, height);
        let out_bytes = frames * width * height * 3 * dtype.size_in_bytes();
        let out = self.alloc(out_bytes)?;
        if frames > 0 {
            let pixels = (width * height) as u64;
            let blocks_per_frame = pixels.div_ceil(THREADS as u64);
            // Slots of frames the grid covers at once (each strides over the rest).
            let slots = (frames as u64).min((i32::MAX as u64 / blocks_per_frame).max(1));
            let grid = u32::try_from(slots * blocks_per_frame).map_err(|_| Error::Limit {
                what: format!("{width}x{height} frames"),
                limit: "too many pixels for one launch".into(),
            })?;
            let args = FrameArgs {
                planes: device_pointer(planes),
                out: out.device_pointer(),
                frames: frames as u64,
                frame_bytes: planes.shape()[1] as u64,
                width: width as u32,
                height: height as u32,
                layout: match output.layout {
                    FrameLayout::Hwc => LayoutCode::Hwc,
                    FrameLayout::Chw => LayoutCode::Chw,
                },
                dtype: match output.dtype {
                    FrameDType::U8 => DTypeCode::U8,
                    FrameDType::F32 => DTypeCode::F32,
                },
            };
            let config = LaunchConfig { grid, block: THREADS, shared_bytes: 0 };
            // SAFETY: `planes` is a live device tensor of `frames × frame_bytes`
            // bytes (checked by the caller), `out` a new allocation of every
            // output element; the grid is a whole number of frames' blocks, as
            // the kernel assumes. Both stay alive through the launch in stream
            // order (a dropped buffer is freed in stream order).
            unsafe { self.context.launch(entry::Yuv420ToRgb, config, (args,)) }.map_err(cuda_error)?;
        }
        Ok(Tensor::on_device(device, DeviceStorage::new(out), dtype, shape))
    }
}

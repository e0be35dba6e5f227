use rayon::prelude::*;
use robocache_cpu::{HostSlice, HostVec};

use super::descriptors::{check_yuv_frames, FrameDType, FrameLayout, FrameOutput};
use crate::backend::operations::CudaOperations;
use crate::{Device, Result, Tensor};

impl Device {
    /// Decoded camera frames, YUV 4:2:0 planes `u8 [N, yuv420_len(width,
    /// height)]` (each frame's Y plane, then U and V at half resolution,
    /// rounded up), as RGB `[N, H, W, 3]` or `[N, 3, H, W]` in u8 or f32
    /// (`output`). The conversion is FFmpeg swscale's `yuv420p` to `rgb24`
    /// bit for bit (BT.601 limited range, what PyAV, torchcodec and LeRobot
    /// return; docs/semantics.md); f32 is each level divided by 255.
    ///
    /// The loader uploads camera frames this way (1.5 bytes a pixel, where
    /// RGB takes 3 and float RGB 12) and converts them on the batch's device.
    ///
    /// ```
    /// use robocache::{Device, FrameDType, FrameLayout, FrameOutput, Tensor};
    ///
    /// let device = Device::cpu();
    /// // One 2x2 frame: Y black, white, mid grey, grey; neutral chroma.
    /// let planes = Tensor::from_slice(&device, &[16u8, 235, 126, 128, 128, 128], &[1, 6])?;
    /// let rgb = device.yuv420_to_rgb(&planes, 2, 2, FrameOutput::default())?;
    /// assert_eq!(rgb.shape(), [1, 2, 2, 3]);
    /// assert_eq!(rgb.to_vec::<u8>()?, [0, 0, 0, 255, 255, 255, 128, 128, 128, 130, 130, 130]);
    /// let chw = FrameOutput { layout: FrameLayout::Chw, dtype: FrameDType::F32 };
    /// let float = device.yuv420_to_rgb(&planes, 2, 2, chw)?;
    /// assert_eq!(float.shape(), [1, 3, 2, 2]);
    /// assert_eq!(float.to_vec::<f32>()?[..4], [0.0, 1.0, 128.0 / 255.0, 130.0 / 255.0]);
    /// # Ok::<(), robocache::Error>(())
    /// ```
    pub fn yuv420_to_rgb(&self, planes: &Tensor, width: usize, height: usize, output: FrameOutput) -> Result<Tensor> {
        check_yuv_frames(self, planes, width, height)?;
        let frames = planes.shape()[0];
        let shape = output.shape(frames, width, height);
        match self {
            Device::Cpu => {
                let HostSlice::U8(bytes) = planes.host_slice() else { unreachable!("dtype checked") };
                let frame_bytes = planes.shape()[1];
                let rgb_bytes = width * height * 3;
                let mut rgb = vec![0u8; frames * rgb_bytes];
                rgb.par_chunks_mut(rgb_bytes.max(1)).zip(bytes.par_chunks(frame_bytes.max(1))).for_each(
                    |(rgb, planes)| {
                        robocache_video::yuv420_to_rgb_into(width, height, planes, rgb);
                    },
                );
                let rgb = match output.layout {
                    FrameLayout::Hwc => rgb,
                    FrameLayout::Chw => channels_first(&rgb, width * height),
                };
                let values = match output.dtype {
                    FrameDType::U8 => HostVec::U8(rgb),
                    FrameDType::F32 => HostVec::F32(rgb.into_par_iter().map(|level| level as f32 / 255.0).collect()),
                };
                Ok(Tensor::host(self, values, shape))
            }
            Device::Cuda(cuda) => cuda.yuv420_to_rgb(self, planes, width, height, output),
        }
    }
}

/// Frames of `[pixels, 3]` as `[3, pixels]`.
fn channels_first(rgb: &[u8], pixels: usize) -> Vec<u8> {
    let mut out = vec![0u8; rgb.len()];
    out.par_chunks_mut((3 * pixels).max(1)).zip(rgb.par_chunks((3 * pixels).max(1))).for_each(|(out, frame)| {
        let (red, rest) = out.split_at_mut(pixels);
        let (green, blue) = rest.split_at_mut(pixels);
        for (p, pixel) in frame.chunks_exact(3).enumerate() {
            (red[p], green[p], blue[p]) = (pixel[0], pixel[1], pixel[2]);
        }
    });
    out
}

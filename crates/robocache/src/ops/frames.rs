use rayon::prelude::*;
use robocache_cpu::{HostSlice, HostVec};

use robocache_video::ResizePlan;

use super::descriptors::{
    check_frame_picks, check_rgb_frames, check_yuv_frames, resize_plan, FrameDType, FrameLayout, FrameOutput,
};
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
    /// With `output.resize`, the 8-bit RGB frames are then cropped and
    /// resized as [`Device::convert_frames`] does.
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
    /// let chw = FrameOutput { layout: FrameLayout::Chw, dtype: FrameDType::F32, resize: None };
    /// let float = device.yuv420_to_rgb(&planes, 2, 2, chw)?;
    /// assert_eq!(float.shape(), [1, 3, 2, 2]);
    /// assert_eq!(float.to_vec::<f32>()?[..4], [0.0, 1.0, 128.0 / 255.0, 130.0 / 255.0]);
    /// # Ok::<(), robocache::Error>(())
    /// ```
    pub fn yuv420_to_rgb(&self, planes: &Tensor, width: usize, height: usize, output: FrameOutput) -> Result<Tensor> {
        check_yuv_frames(self, planes, width, height)?;
        if let Some(resize) = output.resize {
            // Planned before converting, so that a bad resize costs nothing.
            let plan = resize_plan(&resize, width, height)?;
            let rgb = self.yuv420_to_rgb(planes, width, height, FrameOutput::default())?;
            return self.convert_checked_frames(&rgb, Some(&plan), output);
        }
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
                Ok(Tensor::host(self, laid_out(rgb, width * height, output), shape))
            }
            Device::Cuda(cuda) => cuda.yuv420_to_rgb(self, planes, width, height, output),
        }
    }

    /// 8-bit RGB frames `u8 [N, H, W, 3]` as `output` says: cropped and
    /// resized when `output.resize` asks (the crop cut out, then resized bit
    /// for bit as Pillow 10–12 resize an RGB image with `Image.BILINEAR`:
    /// an antialiasing triangle filter, rows then columns, each pass rounded
    /// to 8 bits; docs/semantics.md), then laid out as `[N, H', W', 3]` or
    /// `[N, 3, H', W']` in u8 or f32 (levels divided by 255).
    ///
    /// The loader applies it to camera frames stored as images; decoded
    /// video goes through [`Device::yuv420_to_rgb`], which ends here too.
    ///
    /// ```
    /// use robocache::{CropBox, Device, FrameOutput, FrameResize, Tensor};
    ///
    /// let device = Device::cpu();
    /// // One 4x1 frame of greys 0, 80, 160, 240, halved to 2x1.
    /// let levels: Vec<u8> = [0u8, 80, 160, 240].iter().flat_map(|&l| [l; 3]).collect();
    /// let frames = Tensor::from_slice(&device, &levels, &[1, 1, 4, 3])?;
    /// let half = FrameOutput { resize: Some(FrameResize::to(2, 1)), ..FrameOutput::default() };
    /// let out = device.convert_frames(&frames, half)?;
    /// assert_eq!(out.shape(), [1, 1, 2, 3]);
    /// assert_eq!(out.to_vec::<u8>()?, [57, 57, 57, 183, 183, 183]); // weights 3/7, 3/7, 1/7 at the edges
    /// // A crop of the output's size is a plain crop.
    /// let crop = CropBox { left: 1, top: 0, width: 2, height: 1 };
    /// let middle = FrameOutput { resize: Some(FrameResize { width: 2, height: 1, crop: Some(crop) }), ..half };
    /// assert_eq!(device.convert_frames(&frames, middle)?.to_vec::<u8>()?, [80, 80, 80, 160, 160, 160]);
    /// # Ok::<(), robocache::Error>(())
    /// ```
    pub fn convert_frames(&self, frames: &Tensor, output: FrameOutput) -> Result<Tensor> {
        let plan = check_rgb_frames(self, frames, &output)?;
        self.convert_checked_frames(frames, plan.as_ref(), output)
    }

    /// [`Device::convert_frames`] of checked frames, with `output.resize`
    /// planned for them.
    fn convert_checked_frames(
        &self,
        frames: &Tensor,
        plan: Option<&ResizePlan>,
        output: FrameOutput,
    ) -> Result<Tensor> {
        let shape = frames.shape();
        let (count, width, height) = (shape[0], shape[2], shape[1]);
        match self {
            Device::Cpu => {
                let HostSlice::U8(levels) = frames.host_slice() else { unreachable!("dtype checked") };
                let rgb = match plan {
                    Some(plan) => resize_on_host(plan, levels, count),
                    None => levels.to_vec(),
                };
                let out_shape = output.shape(count, width, height);
                let pixels = out_shape[1..].iter().product::<usize>() / 3;
                Ok(Tensor::host(self, laid_out(rgb, pixels, output), out_shape))
            }
            Device::Cuda(cuda) => cuda.convert_frames(self, frames, plan, output),
        }
    }
}

impl Device {
    /// Frames picked from several tensors of 8-bit RGB frames, stacked into
    /// one batch: pick `(tensor, i)` is frame `i` of a `u8 [N, H, W, 3]`
    /// tensor on this device, and every pick has the first one's `H` and
    /// `W`. The batch comes as `[picks, H, W, 3]` or `[picks, 3, H, W]`, u8
    /// or f32 (levels / 255), as `layout` and `dtype` say; one pass, whatever
    /// the number of tensors.
    ///
    /// The loader's frame cache on its device ([`crate::DeviceFrameCache`]) serves a
    /// batch this way: frames it holds, from the batches that first decoded
    /// them, beside the frames the batch decodes itself.
    ///
    /// ```
    /// use robocache::{Device, FrameDType, FrameLayout, Tensor};
    ///
    /// let device = Device::cpu();
    /// // Two tensors of 1x1 frames: [10], [20] and [30].
    /// let first = Tensor::from_slice(&device, &[10u8, 10, 10, 20, 20, 20], &[2, 1, 1, 3])?;
    /// let second = Tensor::from_slice(&device, &[30u8, 30, 30], &[1, 1, 1, 3])?;
    /// let batch = device.stack_frames(&[(&second, 0), (&first, 1), (&first, 1)], FrameLayout::Hwc, FrameDType::U8)?;
    /// assert_eq!(batch.shape(), [3, 1, 1, 3]);
    /// assert_eq!(batch.to_vec::<u8>()?, [30, 30, 30, 20, 20, 20, 20, 20, 20]);
    /// assert!(device.stack_frames(&[(&second, 1)], FrameLayout::Hwc, FrameDType::U8).is_err()); // no frame 1
    /// # Ok::<(), robocache::Error>(())
    /// ```
    pub fn stack_frames(&self, picks: &[(&Tensor, usize)], layout: FrameLayout, dtype: FrameDType) -> Result<Tensor> {
        let (width, height) = check_frame_picks(self, picks)?;
        let output = FrameOutput { layout, dtype, resize: None };
        match self {
            Device::Cpu => {
                let frame_bytes = width * height * 3;
                let mut rgb = vec![0u8; picks.len() * frame_bytes];
                for (out, &(tensor, index)) in rgb.chunks_exact_mut(frame_bytes.max(1)).zip(picks) {
                    let HostSlice::U8(levels) = tensor.host_slice() else { unreachable!("dtype checked") };
                    out.copy_from_slice(&levels[index * frame_bytes..(index + 1) * frame_bytes]);
                }
                let shape = output.shape(picks.len(), width, height);
                Ok(Tensor::host(self, laid_out(rgb, width * height, output), shape))
            }
            Device::Cuda(cuda) => cuda.stack_frames(self, picks, width, height, output),
        }
    }
}

/// `count` frames cropped and resized by `plan`, one frame per task.
fn resize_on_host(plan: &ResizePlan, levels: &[u8], count: usize) -> Vec<u8> {
    let (width, height) = plan.source;
    let (out_width, out_height) = plan.output;
    let (in_bytes, out_bytes) = (width * height * 3, out_width * out_height * 3);
    let mut out = vec![0u8; count * out_bytes];
    out.par_chunks_mut(out_bytes.max(1)).zip(levels.par_chunks(in_bytes.max(1))).for_each_init(
        || vec![0u8; plan.intermediate_len()],
        |rows, (out, frame)| plan.resize_rgb_into(frame, rows, out),
    );
    out
}

/// 8-bit RGB frames `[N, pixels, 3]` in `output`'s layout and dtype.
fn laid_out(rgb: Vec<u8>, pixels: usize, output: FrameOutput) -> HostVec {
    let rgb = match output.layout {
        FrameLayout::Hwc => rgb,
        FrameLayout::Chw => channels_first(&rgb, pixels),
    };
    match output.dtype {
        FrameDType::U8 => HostVec::U8(rgb),
        FrameDType::F32 => HostVec::F32(rgb.into_par_iter().map(|level| level as f32 / 255.0).collect()),
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

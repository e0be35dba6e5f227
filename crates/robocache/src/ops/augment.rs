use rayon::prelude::*;
use robocache_augment::{reference, FrameAugment};
use robocache_cpu::{HostSlice, HostVec};

use super::descriptors::{check_frame_picks, FrameDType, FrameLayout};
use crate::backend::operations::CudaOperations;
use crate::{Device, Error, Result, Tensor};

impl Device {
    /// Camera frames `[N, H, W, 3]` or `[N, 3, H, W]` (`layout`), u8 or f32
    /// (levels / 255), in windows of `steps` frames: window `w`'s frames
    /// augmented by `params[w]` (a crop resized to its output, then each
    /// operation in order: torchvision v2's functional operations on float
    /// frames, docs/semantics.md), returned in the same layout and dtype at
    /// the crops' output size. u8 frames are augmented as `level / 255` and
    /// come back as torchvision's `to_dtype(uint8, scale=True)` gives them.
    ///
    /// The loader applies it to its camera streams when asked to augment
    /// ([`crate::LoaderConfig::augment`]), with parameters drawn per window
    /// and camera from (seed, epoch, sample).
    ///
    /// ```
    /// use robocache::augment::{FrameAugment, Op};
    /// use robocache::{Device, FrameLayout, Tensor};
    ///
    /// let device = Device::cpu();
    /// // Two windows of one 2x1 frame each: the first darkened by half.
    /// let frames = Tensor::from_slice(&device, &[200u8, 100, 50, 0, 0, 0, 200, 100, 50, 0, 0, 0], &[2, 1, 2, 3])?;
    /// let params = [FrameAugment { crop: None, ops: vec![Op::Brightness(0.5)] }, FrameAugment::default()];
    /// let out = device.augment_frames(&frames, FrameLayout::Hwc, 1, &params)?;
    /// assert_eq!(out.to_vec::<u8>()?, [100, 50, 25, 0, 0, 0, 200, 100, 50, 0, 0, 0]);
    /// # Ok::<(), robocache::Error>(())
    /// ```
    pub fn augment_frames(
        &self,
        frames: &Tensor,
        layout: FrameLayout,
        steps: usize,
        params: &[FrameAugment],
    ) -> Result<Tensor> {
        let (count, width, height) = check_augment_frames(self, frames, layout, steps, params)?;
        let output = reference::check_outputs(params, (width, height))?;
        if params.iter().all(FrameAugment::is_identity) {
            return Ok(frames.clone());
        }
        let dtype = match frames.dtype() {
            robocache_cpu::DType::U8 => FrameDType::U8,
            _ => FrameDType::F32,
        };
        match self {
            Device::Cpu => {
                let levels = hwc_levels(frames, layout, width * height);
                let (out, (out_w, out_h)) = reference::augment_windows(&levels, steps, (width, height), params)?;
                let pixels = out_w * out_h;
                let laid = match layout {
                    FrameLayout::Hwc => out,
                    FrameLayout::Chw => transpose(&out, pixels, true),
                };
                let data = match dtype {
                    FrameDType::U8 => HostVec::U8(laid.par_iter().map(|&x| reference::level_to_u8(x)).collect()),
                    FrameDType::F32 => HostVec::F32(laid),
                };
                let shape = match layout {
                    FrameLayout::Hwc => vec![count, out_h, out_w, 3],
                    FrameLayout::Chw => vec![count, 3, out_h, out_w],
                };
                Ok(Tensor::host(self, data, shape))
            }
            Device::Cuda(cuda) => cuda.augment_frames(self, frames, layout, dtype, steps, params, output),
        }
    }
}

impl Device {
    /// [`Device::stack_frames`] then [`Device::augment_frames`], in one: the
    /// frames at `picks` (each frame `index` of a u8 `[N, H, W, 3]` tensor
    /// on this device) as a batch in `layout` and `dtype`, in windows of
    /// `steps` frames, window `w` augmented by `params[w]`. Equal to the two
    /// calls, bit for bit; on CUDA the augmentation's first pass reads each
    /// frame where it lies, so the batch the stack would write is never
    /// written nor read (the loader's frame cache serves augmented batches
    /// this way).
    ///
    /// ```
    /// use robocache::augment::{FrameAugment, Op};
    /// use robocache::{Device, FrameDType, FrameLayout, Tensor};
    ///
    /// let device = Device::cpu();
    /// let held = Tensor::from_slice(&device, &[200u8, 100, 50, 10, 20, 30], &[2, 1, 1, 3])?;
    /// let picks = [(&held, 1), (&held, 0)];
    /// let params = [FrameAugment { crop: None, ops: vec![Op::Brightness(0.5)] }];
    /// let out = device.stack_augmented_frames(&picks, FrameLayout::Hwc, FrameDType::U8, 2, &params)?;
    /// let stacked = device.stack_frames(&picks, FrameLayout::Hwc, FrameDType::U8)?;
    /// let apart = device.augment_frames(&stacked, FrameLayout::Hwc, 2, &params)?;
    /// assert_eq!(out.to_vec::<u8>()?, apart.to_vec::<u8>()?);
    /// assert_eq!(out.to_vec::<u8>()?, [5, 10, 15, 100, 50, 25]);
    /// # Ok::<(), robocache::Error>(())
    /// ```
    pub fn stack_augmented_frames(
        &self,
        picks: &[(&Tensor, usize)],
        layout: FrameLayout,
        dtype: FrameDType,
        steps: usize,
        params: &[FrameAugment],
    ) -> Result<Tensor> {
        let Device::Cuda(cuda) = self else {
            let stacked = self.stack_frames(picks, layout, dtype)?;
            return self.augment_frames(&stacked, layout, steps, params);
        };
        let size = check_frame_picks(self, picks)?;
        check_windows(picks.len(), steps, params)?;
        let output = reference::check_outputs(params, size)?;
        if params.iter().all(FrameAugment::is_identity) {
            return self.stack_frames(picks, layout, dtype);
        }
        cuda.stack_augmented_frames(self, picks, size, layout, dtype, steps, params, output)
    }
}

/// The checks of an [`Device::augment_frames`] call: frames on this device,
/// u8 or f32, of the layout's rank and 3 channels, a whole number of
/// windows, one parameter set per window; returns (frames, width, height).
pub(crate) fn check_augment_frames(
    device: &Device,
    frames: &Tensor,
    layout: FrameLayout,
    steps: usize,
    params: &[FrameAugment],
) -> Result<(usize, usize, usize)> {
    device.expect_same("frames to augment", frames.device())?;
    let shape = frames.shape();
    let (count, width, height) = match (layout, shape) {
        (FrameLayout::Hwc, &[n, h, w, 3]) => (n, w, h),
        (FrameLayout::Chw, &[n, 3, h, w]) => (n, w, h),
        _ => {
            let expected = match layout {
                FrameLayout::Hwc => "frames [N, H, W, 3]",
                FrameLayout::Chw => "frames [N, 3, H, W]",
            };
            return Err(Error::Rank {
                what: "frames to augment".into(),
                expected: expected.into(),
                shape: shape.to_vec(),
            });
        }
    };
    if !matches!(frames.dtype(), robocache_cpu::DType::U8 | robocache_cpu::DType::F32) {
        return Err(robocache_cpu::Error::DTypeMismatch {
            what: "frames to augment".into(),
            expected: "u8 or f32".into(),
            actual: frames.dtype(),
        }
        .into());
    }
    check_windows(count, steps, params)?;
    Ok((count, width, height))
}

/// An augmentation error of camera stream `stream`, naming it.
pub(crate) fn in_stream(error: Error, stream: &str) -> Error {
    match error {
        Error::Augment(e) => Error::Augment(robocache_augment::Error::Frames(format!("stream `{stream}`: {e}"))),
        other => other,
    }
}

/// `count` frames are windows of `steps`, one parameter set each.
fn check_windows(count: usize, steps: usize, params: &[FrameAugment]) -> Result<()> {
    if steps == 0 || Some(count) != steps.checked_mul(params.len()) {
        return Err(robocache_augment::Error::Frames(format!(
            "{count} frames are not {} windows of {steps} frames (one parameter set per window)",
            params.len()
        ))
        .into());
    }
    Ok(())
}

/// Frames as float levels `[N, H, W, 3]` (u8 as `level / 255`).
fn hwc_levels(frames: &Tensor, layout: FrameLayout, pixels: usize) -> Vec<f32> {
    let levels: Vec<f32> = match frames.host_slice() {
        HostSlice::U8(v) => v.par_iter().map(|&l| l as f32 / 255.0).collect(),
        HostSlice::F32(v) => v.to_vec(),
        _ => unreachable!("dtype checked"),
    };
    match layout {
        FrameLayout::Hwc => levels,
        FrameLayout::Chw => transpose(&levels, pixels, false),
    }
}

/// Frames of `[pixels, 3]` as `[3, pixels]` (`to_channels_first`) or back.
fn transpose(values: &[f32], pixels: usize, to_channels_first: bool) -> Vec<f32> {
    let mut out = vec![0f32; values.len()];
    let frame = (3 * pixels).max(1);
    out.par_chunks_mut(frame).zip(values.par_chunks(frame)).for_each(|(out, source)| {
        for p in 0..pixels {
            for c in 0..3 {
                if to_channels_first {
                    out[c * pixels + p] = source[p * 3 + c];
                } else {
                    out[p * 3 + c] = source[c * pixels + p];
                }
            }
        }
    });
    out
}

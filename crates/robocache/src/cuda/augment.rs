//! Per-sample augmentation on the device (see `kernels/augment.cu`): the
//! windows' parameters as tables (an operation per window and slot, a crop
//! per window with its resize taps, Gaussian kernels), then `augment_load`,
//! one `augment_op` per slot (after an `augment_mean` where a slot holds a
//! contrast) and `augment_store`, all queued on the device's stream.

use std::collections::BTreeMap;

use robocache_augment::reference::{gaussian_kernel, inverse_affine_matrix, resize_taps};
use robocache_augment::{FrameAugment, Interpolation, Op};
use robocache_cpu::HostVec;
use robocache_cuda::abi::{AugmentArgs, AugmentCrop, AugmentKind, AugmentOp, DTypeCode};
use robocache_cuda::entry;

use super::backend::{CudaDevice, DeviceStorage};
use super::error::cuda_error;
use super::frames::{dtype_code, frame_slots, layout_code};
use super::resample::device_pointer;
use crate::ops::descriptors::{FrameDType, FrameLayout};
use crate::{Device, Error, Result, Tensor};

/// The tables the kernels read.
#[derive(Default)]
struct Tables {
    /// `[windows, slots]`.
    ops: Vec<AugmentOp>,
    slots: usize,
    /// `[windows]`, empty without crops.
    crops: Vec<AugmentCrop>,
    /// `(first, count)` pairs of the crops' resize positions.
    firsts: Vec<u32>,
    /// Resize weights and Gaussian kernels.
    weights: Vec<f32>,
    /// Slots with a contrast somewhere.
    contrast_slots: Vec<bool>,
}

impl Tables {
    fn new(params: &[FrameAugment], frame: (usize, usize)) -> Result<Self> {
        let mut tables = Tables::default();
        let lists: Vec<Vec<AugmentOp>> = params.iter().map(|p| tables.device_ops(p, frame)).collect::<Result<_>>()?;
        tables.slots = lists.iter().map(Vec::len).max().unwrap_or(0);
        tables.contrast_slots = vec![false; tables.slots];
        for list in &lists {
            for (slot, op) in list.iter().enumerate() {
                tables.contrast_slots[slot] |= op.kind == AugmentKind::Contrast;
            }
            tables.ops.extend(list.iter().copied());
            tables.ops.extend(std::iter::repeat_n(AugmentOp::default(), tables.slots - list.len()));
        }
        if params.iter().any(|p| p.crop.is_some()) {
            let mut shared = BTreeMap::new();
            for p in params {
                let crop = match p.crop {
                    None => AugmentCrop::default(),
                    Some(c) => {
                        let (x_table, x_taps, x_weights) = tables.resize_table(&mut shared, c.width, c.output.0)?;
                        let (y_table, y_taps, y_weights) = tables.resize_table(&mut shared, c.height, c.output.1)?;
                        AugmentCrop {
                            left: c.left as u32,
                            top: c.top as u32,
                            width: c.width as u32,
                            height: c.height as u32,
                            x_table,
                            y_table,
                            x_taps,
                            y_taps,
                            x_weights,
                            y_weights,
                        }
                    }
                };
                tables.crops.push(crop);
            }
        }
        Ok(tables)
    }

    /// One axis's resize from `input` to `output` positions, shared by the
    /// windows whose crops have those sizes: (first position's index in
    /// `firsts` pairs, weights a position, first weight's index).
    fn resize_table(
        &mut self,
        shared: &mut BTreeMap<(usize, usize), (u32, u32, u32)>,
        input: usize,
        output: usize,
    ) -> Result<(u32, u32, u32)> {
        if let Some(&table) = shared.get(&(input, output)) {
            return Ok(table);
        }
        let taps = resize_taps(input, output);
        let stride = taps.iter().map(|(_, w)| w.len()).max().unwrap_or(0);
        let table = (
            index_u32(self.firsts.len() / 2, "resize positions")?,
            index_u32(stride, "resize taps")?,
            index_u32(self.weights.len(), "resize weights")?,
        );
        for (first, weights) in &taps {
            self.firsts.extend([*first as u32, weights.len() as u32]);
            self.weights.extend(weights);
            self.weights.extend(std::iter::repeat_n(0.0, stride - weights.len()));
        }
        shared.insert((input, output), table);
        Ok(table)
    }

    /// A window's operations as the kernel's (a blur is two: rows, columns).
    fn device_ops(&mut self, params: &FrameAugment, frame: (usize, usize)) -> Result<Vec<AugmentOp>> {
        let (width, height) = params.output_size(frame);
        let mut out = Vec::with_capacity(params.ops.len());
        let op = |kind, values: &[f32]| {
            let mut op = AugmentOp { kind, ..AugmentOp::default() };
            op.values[..values.len()].copy_from_slice(values);
            op
        };
        for o in &params.ops {
            match *o {
                Op::Brightness(f) => out.push(op(AugmentKind::Brightness, &[f as f32])),
                Op::Contrast(f) => out.push(op(AugmentKind::Contrast, &[f as f32, (1.0 - f) as f32])),
                Op::Saturation(f) => out.push(op(AugmentKind::Saturation, &[f as f32, (1.0 - f) as f32])),
                Op::Hue(f) => out.push(op(AugmentKind::Hue, &[f as f32])),
                Op::Sharpness(f) => out.push(op(AugmentKind::Sharpness, &[(1.0 - f) as f32])),
                Op::Gamma(g) => out.push(op(AugmentKind::Gamma, &[g as f32])),
                Op::Affine(affine) => {
                    // The reference's theta: the f64 matrix in f32, over half the sides.
                    let m = inverse_affine_matrix(&affine).map(|v| v as f32);
                    let (half_w, half_h) = (0.5 * width as f32, 0.5 * height as f32);
                    let theta =
                        [m[0] / half_w, m[1] / half_w, m[2] / half_w, m[3] / half_h, m[4] / half_h, m[5] / half_h];
                    let kind = match affine.interpolation {
                        Interpolation::Nearest => AugmentKind::AffineNearest,
                        Interpolation::Bilinear => AugmentKind::AffineBilinear,
                    };
                    out.push(op(kind, &theta));
                }
                Op::Noise { mean, sigma, key } => {
                    let mut noise = op(AugmentKind::Noise, &[mean as f32, sigma as f32]);
                    noise.key = key;
                    out.push(noise);
                }
                Op::Blur { kernel, sigma } => {
                    for (kind, size, sigma) in
                        [(AugmentKind::BlurRows, kernel.0, sigma.0), (AugmentKind::BlurColumns, kernel.1, sigma.1)]
                    {
                        let mut blur = op(kind, &[]);
                        blur.taps = index_u32(size, "blur taps")?;
                        blur.key = self.weights.len() as u64;
                        self.weights.extend(gaussian_kernel(size, sigma));
                        out.push(blur);
                    }
                }
            }
        }
        Ok(out)
    }
}

fn index_u32(value: usize, what: &str) -> Result<u32> {
    u32::try_from(value).map_err(|_| Error::Limit {
        what: format!("augmentation {what} ({value})"),
        limit: "a table index of the device's augmentation fits 32 bits".into(),
    })
}

impl CudaDevice {
    /// [`Device::augment_frames`] on this device; the frames and parameters
    /// are checked by the caller (every crop within the frame, every
    /// window's output `output`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_augment_frames(
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
        let (count, (in_width, in_height)) = match layout {
            FrameLayout::Hwc => (shape[0], (shape[2], shape[1])),
            FrameLayout::Chw => (shape[0], (shape[3], shape[2])),
        };
        let (width, height) = output;
        let pixels = width * height;
        if pixels > u32::MAX as usize || in_width * in_height > u32::MAX as usize {
            return Err(Error::Limit {
                what: format!("{in_width}x{in_height} frames augmented to {width}x{height}"),
                limit: "a frame augments on a device when it has fewer than 2^32 pixels".into(),
            });
        }
        let out_shape = match layout {
            FrameLayout::Hwc => vec![count, height, width, 3],
            FrameLayout::Chw => vec![count, 3, height, width],
        };
        let out_bytes = count * pixels * 3 * dtype.dtype().size_in_bytes();
        let work_bytes = count * pixels * 3 * 4;
        // The pool keeps what a batch's augmentation allocates (as the
        // frame conversion's): freed and mapped again at every
        // synchronisation, it cost more than the kernels (docs/architecture.md).
        self.keep_frames_memory(out_bytes + 2 * work_bytes + count * 8)?;
        let out = self.alloc(out_bytes)?;
        if count == 0 || pixels == 0 {
            return Ok(Tensor::on_device(device, DeviceStorage::new(out), dtype.dtype(), out_shape));
        }
        let tables = Tables::new(params, (in_width, in_height))?;
        let upload = |bytes: &[u8]| -> Result<Option<Tensor>> {
            if bytes.is_empty() {
                return Ok(None);
            }
            Tensor::from_host_vec(device, HostVec::U8(bytes.to_vec()), &[bytes.len()]).map(Some)
        };
        let pointer = |t: &Option<Tensor>| t.as_ref().map_or(0, device_pointer);
        let ops = upload(bytemuck::cast_slice(&tables.ops))?;
        let crops = upload(bytemuck::cast_slice(&tables.crops))?;
        let firsts = upload(bytemuck::cast_slice(&tables.firsts))?;
        let weights = upload(bytemuck::cast_slice(&tables.weights))?;
        let (mut front, mut back) = (self.alloc(work_bytes)?, self.alloc(work_bytes)?);
        let mut sums = if tables.contrast_slots.iter().any(|&c| c) { Some(self.alloc(count * 8)?) } else { None };
        let config = frame_slots(count, pixels)?;
        let mut args = AugmentArgs {
            src: device_pointer(frames),
            out: front.device_pointer(),
            ops: pointer(&ops),
            crops: pointer(&crops),
            firsts: pointer(&firsts),
            weights: pointer(&weights),
            sums: sums.as_ref().map_or(0, |s| s.device_pointer()),
            frames: count as u64,
            steps: steps as u32,
            slots: tables.slots as u32,
            slot: 0,
            in_width: in_width as u32,
            in_height: in_height as u32,
            width: width as u32,
            height: height as u32,
            layout: layout_code(layout),
            dtype: dtype_code(dtype),
            pad: 0,
        };
        // SAFETY (every launch below): `frames` is a live tensor of `count`
        // frames of `in_width x in_height` in `layout` and `dtype` (checked by
        // the caller); the crops lie inside those frames and their tables
        // index `firsts` and `weights` as built above; `front` and `back` hold
        // `count x pixels x 3` floats, `sums` `count` words, `out` every output
        // element; `ops` holds `count / steps x slots` entries. All stay alive
        // through the launches in stream order (a dropped buffer is freed in
        // stream order).
        unsafe { self.context.launch(entry::AugmentLoad, config, (args,)) }.map_err(cuda_error)?;
        for slot in 0..tables.slots {
            args.slot = slot as u32;
            args.src = front.device_pointer();
            args.out = back.device_pointer();
            if let (true, Some(sums)) = (tables.contrast_slots[slot], sums.as_mut()) {
                self.context.fill(sums, 0).map_err(cuda_error)?;
                // SAFETY: as above.
                unsafe { self.context.launch(entry::AugmentMean, config, (args,)) }.map_err(cuda_error)?;
            }
            // SAFETY: as above.
            unsafe { self.context.launch(entry::AugmentOp, config, (args,)) }.map_err(cuda_error)?;
            std::mem::swap(&mut front, &mut back);
        }
        args.src = front.device_pointer();
        args.out = out.device_pointer();
        args.dtype = match dtype {
            FrameDType::U8 => DTypeCode::U8,
            FrameDType::F32 => DTypeCode::F32,
        };
        // SAFETY: as above.
        unsafe { self.context.launch(entry::AugmentStore, config, (args,)) }.map_err(cuda_error)?;
        drop((front, back, sums, ops, crops, firsts, weights));
        Ok(Tensor::on_device(device, DeviceStorage::new(out), dtype.dtype(), out_shape))
    }
}

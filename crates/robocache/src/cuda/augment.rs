//! Per-sample augmentation on the device (see `kernels/augment.cu`): the
//! windows' parameters as tables (an operation per window and slot, a crop
//! per window with its resize taps, Gaussian kernels, and each window's
//! operations cut into passes), then one `augment_pass` launch per pass,
//! all queued on the device's stream.

use std::collections::BTreeMap;

use robocache_augment::reference::{gaussian_kernel, inverse_affine_matrix, resize_taps};
use robocache_augment::{FrameAugment, Interpolation, Op};
use robocache_cpu::HostVec;
use robocache_cuda::abi::{
    AugmentArgs, AugmentCrop, AugmentKind, AugmentOp, AugmentStage, DTypeCode, AUGMENT_PIXELS_PER_THREAD,
};
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
    /// `[windows, passes]`.
    stages: Vec<AugmentStage>,
    passes: usize,
    /// Each pass's frames (those of the windows that have it), one list
    /// after another, and where each pass's list starts and ends.
    frame_lists: Vec<u32>,
    pass_lists: Vec<std::ops::Range<usize>>,
}

impl Tables {
    fn new(params: &[FrameAugment], frame: (usize, usize), steps: usize) -> Result<Self> {
        let mut tables = Tables::default();
        let lists: Vec<Vec<AugmentOp>> = params.iter().map(|p| tables.device_ops(p, frame)).collect::<Result<_>>()?;
        tables.slots = lists.iter().map(Vec::len).max().unwrap_or(0);
        let stages: Vec<Vec<AugmentStage>> = lists.iter().map(|list| stages(list)).collect();
        tables.passes = stages.iter().map(Vec::len).max().unwrap_or(1);
        for pass in 0..tables.passes {
            let start = tables.frame_lists.len();
            for (window, stages) in stages.iter().enumerate() {
                if pass < stages.len() {
                    let first = index_u32(window * steps, "frames")?;
                    let end = index_u32((window + 1) * steps, "frames")?;
                    tables.frame_lists.extend(first..end);
                }
            }
            tables.pass_lists.push(start..tables.frame_lists.len());
        }
        for (list, window) in lists.iter().zip(&stages) {
            tables.stages.extend(window.iter().copied());
            tables.stages.extend(std::iter::repeat_n(AugmentStage::default(), tables.passes - window.len()));
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

/// Whether `kind` needs more of its input than the pixel it writes: its
/// neighbours (sharpness, affine, blur) or the frame's mean (contrast). Such
/// an operation starts a pass.
fn starts_a_pass(kind: AugmentKind) -> bool {
    matches!(
        kind,
        AugmentKind::Contrast
            | AugmentKind::Sharpness
            | AugmentKind::AffineNearest
            | AugmentKind::AffineBilinear
            | AugmentKind::BlurRows
            | AugmentKind::BlurColumns
    )
}

/// A window's operations cut into passes: the first reads the frames and
/// applies the per-pixel operations before the first that
/// [`starts_a_pass`]; each later pass starts with one of those and runs the
/// per-pixel operations after it.
fn stages(ops: &[AugmentOp]) -> Vec<AugmentStage> {
    let mut starts = vec![0];
    starts.extend((0..ops.len()).filter(|&k| starts_a_pass(ops[k].kind)));
    let passes = starts.len();
    (0..passes)
        .map(|pass| {
            let first = starts[pass];
            let end = starts.get(pass + 1).copied().unwrap_or(ops.len());
            let sums_next = starts.get(pass + 1).is_some_and(|&next| ops[next].kind == AugmentKind::Contrast);
            AugmentStage {
                first: first as u32,
                count: (end - first) as u32,
                active: 1,
                last: u32::from(pass + 1 == passes),
                sums_next: u32::from(sums_next),
            }
        })
        .collect()
}

impl Tables {
    /// The tables' bytes with room for their alignment.
    fn bytes(&self) -> usize {
        size_of_val(&self.ops[..])
            + size_of_val(&self.stages[..])
            + size_of_val(&self.crops[..])
            + size_of_val(&self.firsts[..])
            + size_of_val(&self.weights[..])
            + size_of_val(&self.frame_lists[..])
            + 6 * 16
    }
}

fn index_u32(value: usize, what: &str) -> Result<u32> {
    u32::try_from(value).map_err(|_| Error::Limit {
        what: format!("augmentation {what} ({value})"),
        limit: "a table index of the device's augmentation fits 32 bits".into(),
    })
}

/// The frames an augmentation reads.
pub(super) enum AugmentSource<'a> {
    /// A batch `[N, H, W, 3]` or `[N, 3, H, W]` in the call's layout and dtype.
    Batch(&'a Tensor),
    /// Each frame where it lies: frame `index` of a u8 `[M, H, W, 3]`
    /// tensor ([`Device::stack_frames`]' picks), read as the batch stacking
    /// them would hold it.
    Picks(&'a [(&'a Tensor, usize)]),
}

impl CudaDevice {
    /// [`Device::augment_frames`] (a [`AugmentSource::Batch`]) and
    /// [`Device::stack_augmented_frames`] (its picks) on this device; the
    /// frames and parameters are checked by the caller: `count` frames of
    /// `in_size`, every crop within the frame, every window's output
    /// `output`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_augment_frames(
        &self,
        device: &Device,
        source: AugmentSource<'_>,
        (count, in_size): (usize, (usize, usize)),
        layout: FrameLayout,
        dtype: FrameDType,
        steps: usize,
        params: &[FrameAugment],
        output: (usize, usize),
    ) -> Result<Tensor> {
        let (in_width, in_height) = in_size;
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
        let tables = Tables::new(params, (in_width, in_height), steps)?;
        let work_buffers = tables.passes.saturating_sub(1).min(2);
        let sums_bytes = tables.passes * count * 8;
        // Each picked frame's address (the first pass reads them there).
        let (frames_in, sources): (u64, Vec<u64>) = match source {
            AugmentSource::Batch(frames) => (device_pointer(frames), Vec::new()),
            AugmentSource::Picks(picks) => {
                let frame_bytes = (in_width * in_height * 3) as u64;
                (0, picks.iter().map(|&(tensor, index)| device_pointer(tensor) + index as u64 * frame_bytes).collect())
            }
        };
        let sources_bytes = sources.len() * size_of::<u64>();
        // The pool keeps what a batch's augmentation allocates (as the
        // frame conversion's): freed and mapped again at every
        // synchronisation, it cost more than the kernels (docs/architecture.md).
        self.keep_frames_memory(out_bytes + work_buffers * work_bytes + sums_bytes + tables.bytes() + sources_bytes)?;
        let out = self.alloc(out_bytes)?;
        if count == 0 || pixels == 0 {
            return Ok(Tensor::on_device(device, DeviceStorage::new(out), dtype.dtype(), out_shape));
        }
        // Every table in one upload, each at a 16-byte boundary.
        let mut packed = Vec::with_capacity(tables.bytes());
        let mut place = |bytes: &[u8]| -> Option<usize> {
            if bytes.is_empty() {
                return None;
            }
            packed.resize(packed.len().next_multiple_of(16), 0);
            packed.extend_from_slice(bytes);
            Some(packed.len() - bytes.len())
        };
        let at = [
            place(bytemuck::cast_slice(&tables.ops)),
            place(bytemuck::cast_slice(&tables.stages)),
            place(bytemuck::cast_slice(&tables.crops)),
            place(bytemuck::cast_slice(&tables.firsts)),
            place(bytemuck::cast_slice(&tables.weights)),
            place(bytemuck::cast_slice(&tables.frame_lists)),
            place(bytemuck::cast_slice(&sources)),
        ];
        let len = packed.len();
        let table = Tensor::from_host_vec(device, HostVec::U8(packed), &[len])?;
        let base = device_pointer(&table);
        let [ops, stages, crops, firsts, weights, frame_list, sources] =
            at.map(|offset| offset.map_or(0, |o| base + o as u64));
        let mut work = Vec::new();
        for _ in 0..work_buffers {
            work.push(self.alloc(work_bytes)?);
        }
        let mut sums = None;
        if tables.stages.iter().any(|s| s.sums_next == 1) {
            let mut bank = self.alloc(sums_bytes)?;
            self.context.fill(&mut bank, 0).map_err(cuda_error)?;
            sums = Some(bank);
        }
        let work_pointer = |pass: usize| work.get(pass % 2).map_or(0, |w| w.device_pointer());
        let mut args = AugmentArgs {
            frames_in,
            sources,
            src: 0,
            work: 0,
            out: out.device_pointer(),
            ops,
            stages,
            crops,
            firsts,
            weights,
            sums: sums.as_ref().map_or(0, |s| s.device_pointer()),
            frame_list,
            frames: count as u64,
            listed: 0,
            steps: steps as u32,
            slots: tables.slots as u32,
            pass: 0,
            passes: tables.passes as u32,
            in_width: in_width as u32,
            in_height: in_height as u32,
            width: width as u32,
            height: height as u32,
            layout: layout_code(layout),
            in_dtype: dtype_code(dtype),
            out_dtype: match dtype {
                FrameDType::U8 => DTypeCode::U8,
                FrameDType::F32 => DTypeCode::F32,
            },
            pad: 0,
        };
        for (pass, list) in tables.pass_lists.iter().enumerate() {
            args.pass = pass as u32;
            args.frame_list = frame_list + (list.start * size_of::<u32>()) as u64;
            args.listed = list.len() as u64;
            let config = frame_slots(list.len(), pixels.div_ceil(AUGMENT_PIXELS_PER_THREAD))?;
            args.src = if pass == 0 { 0 } else { work_pointer(pass - 1) };
            args.work = if pass + 1 == tables.passes { 0 } else { work_pointer(pass) };
            // SAFETY: the frames are a live tensor of `count` frames of
            // `in_width x in_height` in `layout` and `dtype`, or `count`
            // addresses of u8 frames of that size inside live tensors
            // (checked by the caller, the picks borrowed through the
            // launches); `frame_list` holds the pass's `listed` frames, each
            // below `count`, of windows with that pass; the crops lie inside those frames and their tables
            // index `firsts` and `weights` as built above; `stages` holds
            // `count / steps x passes` entries whose operations lie in the
            // windows' rows of `ops` (`count / steps x slots`); each work
            // buffer holds `count x pixels x 3` floats (a pass reads the one
            // the previous wrote, and only a window that is not in its last
            // pass writes), `sums` `passes x count` words, `out` every
            // output element. All stay alive through the launches in stream
            // order (a dropped buffer is freed in stream order).
            unsafe { self.context.launch(entry::AugmentPass, config, (args,)) }.map_err(cuda_error)?;
        }
        drop((work, sums, table));
        Ok(Tensor::on_device(device, DeviceStorage::new(out), dtype.dtype(), out_shape))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(kinds: &[AugmentKind]) -> Vec<AugmentOp> {
        kinds.iter().map(|&kind| AugmentOp { kind, ..AugmentOp::default() }).collect()
    }

    /// (first, count, last, sums_next) of each pass.
    fn cut(list: &[AugmentKind]) -> Vec<(u32, u32, u32, u32)> {
        stages(&kinds(list)).iter().map(|s| (s.first, s.count, s.last, s.sums_next)).collect()
    }

    #[test]
    fn passes_start_where_an_operation_reads_neighbours_or_the_mean() {
        use AugmentKind::*;
        // Nothing: one pass that reads and writes.
        assert_eq!(cut(&[]), [(0, 0, 1, 0)]);
        // Per-pixel operations share the first pass with the read.
        assert_eq!(cut(&[Brightness, Hue, Gamma, Noise, Saturation]), [(0, 5, 1, 0)]);
        // A contrast first: the read alone sums the grey, then the contrast.
        assert_eq!(cut(&[Contrast]), [(0, 0, 0, 1), (0, 1, 1, 0)]);
        assert_eq!(
            cut(&[Brightness, Contrast, Hue, Sharpness, Saturation]),
            [(0, 1, 0, 1), (1, 2, 0, 0), (3, 2, 1, 0)]
        );
        // A blur is two passes (rows, columns); an affine after it a third.
        assert_eq!(
            cut(&[BlurRows, BlurColumns, AffineBilinear, Contrast]),
            [(0, 0, 0, 0), (0, 1, 0, 0), (1, 1, 0, 0), (2, 1, 0, 1), (3, 1, 1, 0)]
        );
        assert!(stages(&kinds(&[Sharpness, AffineNearest])).iter().all(|s| s.active == 1));
    }

    #[test]
    fn each_pass_lists_the_frames_of_the_windows_that_have_it() {
        use robocache_augment::{FrameAugment, Op};
        let params = [
            FrameAugment { crop: None, ops: vec![Op::Brightness(1.1)] },
            FrameAugment { crop: None, ops: vec![Op::Contrast(0.9), Op::Sharpness(1.2)] },
            FrameAugment::default(),
        ];
        let tables = Tables::new(&params, (8, 6), 2).unwrap();
        assert_eq!(tables.passes, 3);
        let lists: Vec<&[u32]> = tables.pass_lists.iter().map(|r| &tables.frame_lists[r.clone()]).collect();
        assert_eq!(lists, [&[0, 1, 2, 3, 4, 5][..], &[2, 3], &[2, 3]]);
        // Windows with fewer passes fill their rows with inactive stages.
        let active: Vec<u32> = tables.stages.iter().map(|s| s.active).collect();
        assert_eq!(active, [1, 0, 0, 1, 1, 1, 1, 0, 0]);
    }
}

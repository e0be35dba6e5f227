//! Resample on a CUDA device: the shared plan validates shapes and specs on
//! the host, `resample_check` validates the data on the device (unless
//! `trusted`; reading its verdict back is the one synchronisation, and it is
//! documented), then one launch computes every row.

use robocache_cpu::{
    fill_bits, Boundary, ChannelGroup, ChannelSpec, DType, Error as Invalid, Method, ResamplePlan, ResampleSpec,
    TimeShape,
};
use robocache_cuda::abi::{self, BoundaryRule, IndexType, ResampleArgs, Timeline, TimesMode, MAX_GROUPS, MAX_TILE};
use robocache_cuda::{entry, Entry, LaunchConfig, ResampleParams, ResampleTiledParams};

use super::backend::{CudaDevice, DeviceStorage};
use super::error::cuda_error;
use crate::ops::descriptors::{expect_rank, expect_time_tensor, Resampled, StreamInput, TargetTimes, TimeAxis};
use crate::{Device, Error, Result, Tensor};

pub(super) fn device_pointer(tensor: &Tensor) -> u64 {
    tensor.device_storage().map_or(0, DeviceStorage::device_pointer)
}

/// A time tensor (`f64`, `[L]` or `[B, L]`) as a kernel timeline and its shape.
fn timeline(what: &str, tensor: &Tensor, len: usize) -> Result<(Timeline, TimeShape)> {
    expect_time_tensor(what, tensor)?;
    let (mode, shape) = if tensor.shape().len() == 1 {
        (TimesMode::Shared, TimeShape::Shared(tensor.len()))
    } else {
        (TimesMode::PerRow, TimeShape::PerRow(tensor.len()))
    };
    Ok((Timeline { times: device_pointer(tensor), mode, len: len as u64, ..Default::default() }, shape))
}

fn uniform(start: f64, hz: f64, len: usize) -> (Timeline, TimeShape) {
    (
        Timeline { mode: TimesMode::Uniform, start, hz, len: len as u64, ..Default::default() },
        TimeShape::Uniform { start, hz },
    )
}

/// The kernels' code for an integer index tensor (valid lengths, cloud
/// index); other dtypes are refused on CUDA.
pub(super) fn index_type(what: &str, tensor: &Tensor) -> Result<IndexType> {
    Ok(match tensor.dtype() {
        DType::U32 => IndexType::U32,
        DType::U64 => IndexType::U64,
        DType::I32 => IndexType::I32,
        DType::I64 => IndexType::I64,
        other => {
            return Err(Invalid::DTypeMismatch {
                what: what.to_owned(),
                expected: "u32, u64, i32 or i64 on CUDA".into(),
                actual: other,
            }
            .into())
        }
    })
}

/// The kernel for `dtype`; for floats, the variant without slerp when the
/// groups have none (integer and bool data only copy bits).
pub(super) fn kernel_for(dtype: DType, slerp: bool) -> Entry<ResampleParams> {
    match (dtype, slerp) {
        (DType::F16, true) => entry::ResampleF16,
        (DType::BF16, true) => entry::ResampleBF16,
        (DType::F32, true) => entry::ResampleF32,
        (DType::F64, true) => entry::ResampleF64,
        (DType::F16, false) => entry::ResampleF16NoSlerp,
        (DType::BF16, false) => entry::ResampleBF16NoSlerp,
        (DType::F32, false) => entry::ResampleF32NoSlerp,
        (DType::F64, false) => entry::ResampleF64NoSlerp,
        (DType::Bool | DType::U8 | DType::I8, _) => entry::ResampleBits8,
        (DType::U16 | DType::I16, _) => entry::ResampleBits16,
        (DType::U32 | DType::I32, _) => entry::ResampleBits32,
        (DType::U64 | DType::I64, _) => entry::ResampleBits64,
    }
}

/// A stream's kernel-side description, checked.
pub(super) struct DeviceStream {
    pub source: Timeline,
    pub source_shape: TimeShape,
    pub lengths: u64,
    pub length_type: IndexType,
    pub shape: [usize; 3],
}

/// The targets' kernel-side description: timeline, shape and `T`.
pub(super) struct DeviceTargets {
    pub timeline: Timeline,
    pub shape: TimeShape,
    pub len: usize,
}

pub(super) fn describe_stream(what: &str, device: &Device, stream: &StreamInput<'_>) -> Result<DeviceStream> {
    device.expect_same(&format!("{what} data"), stream.data.device())?;
    expect_rank(&format!("{what} data"), stream.data, &[3], "[B, S, D]")?;
    let shape = [stream.data.shape()[0], stream.data.shape()[1], stream.data.shape()[2]];
    let (source, source_shape) = match stream.times {
        TimeAxis::Tensor(t) => {
            device.expect_same(&format!("{what} source times"), t.device())?;
            timeline(&format!("{what} source times"), t, shape[1])?
        }
        TimeAxis::Uniform { start, hz } => uniform(start, hz, shape[1]),
    };
    let (lengths, length_type) = match stream.lengths {
        Some(l) => {
            device.expect_same(&format!("{what} valid lengths"), l.device())?;
            expect_rank(&format!("{what} valid lengths"), l, &[1], "[B]")?;
            (device_pointer(l), index_type(&format!("{what} valid lengths"), l)?)
        }
        None => (0, IndexType::None),
    };
    Ok(DeviceStream { source, source_shape, lengths, length_type, shape })
}

pub(super) fn describe_targets(device: &Device, targets: &TargetTimes<'_>) -> Result<DeviceTargets> {
    Ok(match *targets {
        TargetTimes::Tensor(t) => {
            device.expect_same("target times", t.device())?;
            let len = *t.shape().last().unwrap_or(&0);
            let (timeline, shape) = timeline("target times", t, len)?;
            DeviceTargets { timeline, shape, len }
        }
        TargetTimes::Uniform { start, hz, len } => {
            let (timeline, shape) = uniform(start, hz, len);
            DeviceTargets { timeline, shape, len }
        }
    })
}

/// The plan's channel groups as the kernel's `(start, end, method)` table.
pub(super) fn encode_groups(what: &str, plan: &ResamplePlan) -> Result<[i32; 3 * MAX_GROUPS]> {
    encode_group_list(what, &plan.groups)
}

/// A channel spec resolved for `channels` channels: the group count and table.
pub(super) fn group_table(what: &str, spec: &ChannelSpec, channels: usize) -> Result<(i32, [i32; 3 * MAX_GROUPS])> {
    let groups = spec.resolve(channels).map_err(|reason| Invalid::ChannelSpec { what: what.into(), reason })?;
    Ok((groups.len() as i32, encode_group_list(what, &groups)?))
}

fn encode_group_list(what: &str, list: &[ChannelGroup]) -> Result<[i32; 3 * MAX_GROUPS]> {
    if list.len() > MAX_GROUPS {
        return Err(Invalid::ChannelSpec {
            what: what.into(),
            reason: format!("has {} groups; the CUDA backend takes at most {MAX_GROUPS}", list.len()),
        }
        .into());
    }
    let mut groups = [0i32; 3 * MAX_GROUPS];
    for (slot, g) in groups.chunks_exact_mut(3).zip(list) {
        let method = match g.method {
            Method::Linear => abi::Method::Linear,
            Method::Nearest => abi::Method::Nearest,
            Method::Previous => abi::Method::Previous,
            Method::Slerp { .. } => abi::Method::Slerp,
        };
        // Channel indices fit i32: the kernel indexes with 64-bit arithmetic, and a
        // row of 2^31 channels is far beyond any allocation.
        slot.copy_from_slice(&[g.range.start as i32, g.range.end as i32, method as i32]);
    }
    Ok(groups)
}

/// Bytes of one placed target (`struct Placed` in kernels/resample.cu).
pub(super) const PLACED_BYTES: usize = 48;

/// The widest rows the tiled kernels take: they index a tile's words in 32
/// bits, and their chunk counters run past the last word by up to a chunk
/// per warp.
pub(super) const MAX_TILE_CHANNELS: usize = (1 << 30) / MAX_TILE;

/// The tiled kernel for a plan, when it applies: a float dtype, no slerp, and
/// rows, groups and the data pointer aligned to 16-byte words.
fn tiled_kernel(plan: &ResamplePlan, data_pointer: u64) -> Option<Entry<ResampleTiledParams>> {
    let kernel = match plan.dtype {
        DType::F16 => entry::ResampleTiledF16,
        DType::BF16 => entry::ResampleTiledBF16,
        DType::F32 => entry::ResampleTiledF32,
        DType::F64 => entry::ResampleTiledF64,
        _ => return None,
    };
    let per_word = 16 / plan.dtype.size_in_bytes();
    let fits = plan.channels <= MAX_TILE_CHANNELS;
    let aligned = fits
        && plan.channels.is_multiple_of(per_word)
        && data_pointer.is_multiple_of(16)
        && plan.groups.iter().all(|g| g.range.start.is_multiple_of(per_word) && g.range.end.is_multiple_of(per_word));
    (aligned && !has_slerp(&plan.groups)).then_some(kernel)
}

/// Threads in a block of the tiled kernels.
const TILE_THREADS: u32 = 32 * abi::TILE_WARPS as u32;

/// A launch of `blocks` blocks of 8 warps (the tiled kernels).
pub(super) fn tile_launch(blocks: usize, shared_bytes: usize) -> LaunchConfig {
    LaunchConfig { grid: blocks.clamp(1, 1 << 20) as u32, block: TILE_THREADS, shared_bytes: shared_bytes as u32 }
}

/// Whether any group slerps (needs the kernels with slerp).
pub(super) fn has_slerp(groups: &[ChannelGroup]) -> bool {
    groups.iter().any(|g| matches!(g.method, Method::Slerp { .. }))
}

pub(super) fn boundary_code(boundary: Boundary) -> BoundaryRule {
    match boundary {
        Boundary::Clamp => BoundaryRule::Clamp,
        Boundary::Extrapolate => BoundaryRule::Extrapolate,
        Boundary::Fill(_) => BoundaryRule::Fill,
    }
}

impl CudaDevice {
    /// The grid of a tiled kernel for `tiles` tiles: as many blocks as are
    /// resident on the device at once (each takes every grid-th tile, and
    /// places its next tile while it moves the current one), at most one a tile.
    pub(super) fn resident_grid<P>(&self, kernel: Entry<P>, tiles: usize, shared_bytes: usize) -> Result<usize> {
        let per_multiprocessor =
            self.context.resident_blocks(kernel.kernel(), TILE_THREADS, shared_bytes as u32).map_err(cuda_error)?;
        Ok(tiles.min(per_multiprocessor as usize * self.context.multiprocessors() as usize).max(1))
    }

    /// The kernel arguments of one stream's resample, with the host-side checks
    /// a uniform timeline needs; unless trusted, the device-side data check
    /// follows (`check_streams`).
    pub(super) fn resample_args(
        &self,
        what: &str,
        plan: &ResamplePlan,
        described: &DeviceStream,
        targets: &DeviceTargets,
        spec: &ResampleSpec,
    ) -> Result<ResampleArgs> {
        if let (TimeShape::Uniform { start, hz }, false) = (described.source_shape, spec.trusted) {
            robocache_cpu::check_uniform_increasing(&format!("{what} source times"), start, hz, plan.source_len)?;
        }
        let args = ResampleArgs {
            batch: plan.batch as u64,
            samples: plan.source_len as u64,
            targets: plan.target_len as u64,
            channels: plan.channels as u64,
            source: described.source,
            target: targets.timeline,
            lengths: described.lengths,
            length_type: described.length_type,
            group_count: plan.groups.len() as i32,
            groups: encode_groups(what, plan)?,
            boundary: boundary_code(spec.boundary),
            targets_per_warp: targets_per_warp(plan.batch * plan.target_len) as i32,
            fill_bits: fill_bits(what, plan.dtype, spec.boundary)?.unwrap_or(0),
        };
        Ok(args)
    }

    pub(super) fn run_resample(
        &self,
        device: &Device,
        stream: &StreamInput<'_>,
        targets: &TargetTimes<'_>,
        spec: &ResampleSpec,
    ) -> Result<Resampled> {
        let what = "resample";
        let described = describe_stream(what, device, stream)?;
        let target = describe_targets(device, targets)?;
        let plan = ResamplePlan::from_shapes(
            what,
            stream.data.dtype(),
            described.shape,
            stream.data.len(),
            described.source_shape,
            stream.lengths.map(Tensor::len),
            target.shape,
            target.len,
            spec,
        )?;
        let args = self.resample_args(what, &plan, &described, &target, spec)?;
        if !spec.trusted {
            self.check_streams(&[Checked { what: what.into(), args, stream }], targets)?;
        }
        let rows = plan.batch * plan.target_len;
        // One allocation for both results (the mask 256-byte aligned after
        // the data): one stream-ordered alloc and free per call.
        let valid_at = (rows * plan.channels * plan.dtype.size_in_bytes()).next_multiple_of(256);
        let results = std::sync::Arc::new(self.alloc(valid_at + rows)?);
        let data_pointer = device_pointer(stream.data);
        let out_pointer = results.device_pointer();
        let valid_pointer = out_pointer + valid_at as u64;
        if let Some(kernel) = tiled_kernel(&plan, data_pointer) {
            let blocks = self.resident_grid(kernel, plan.batch * plan.target_len.div_ceil(MAX_TILE), 0)?;
            let params = (data_pointer, out_pointer, valid_pointer, MAX_TILE as i32, args);
            // SAFETY: what the warp kernels need (below) holds, and the plan is
            // aligned to 16-byte words (tiled_kernel).
            unsafe { self.context.launch(kernel, tile_launch(blocks, 0), params) }.map_err(cuda_error)?;
        } else if !self.resample_as_fusion(&plan, &args, data_pointer, out_pointer, valid_pointer)? {
            // Neither kind of tile applies: a warp per targets.
            let warps = plan.batch * plan.target_len.div_ceil(args.targets_per_warp as usize);
            let kernel = kernel_for(plan.dtype, has_slerp(&plan.groups));
            // SAFETY: the plan checked every size the kernel indexes with,
            // lengths are clamped into 1..=S in the kernel, and the buffers outlive
            // the launch (a dropped buffer is freed in stream order).
            unsafe {
                self.context.launch(kernel, warp_launch(warps), (data_pointer, out_pointer, valid_pointer, args))
            }
            .map_err(cuda_error)?;
        }
        Ok(Resampled {
            data: Tensor::on_device(device, DeviceStorage::part(&results, 0), plan.dtype, plan.output_shape().to_vec()),
            valid: Tensor::on_device(
                device,
                DeviceStorage::part(&results, valid_at),
                DType::Bool,
                vec![plan.batch, plan.target_len],
            ),
        })
    }

    /// Runs `resample_check` for each stream (its own status word), reads
    /// every verdict after one wait, and turns the first failure, in stream
    /// order, into the CPU reference's error.
    pub(super) fn check_streams(&self, checked: &[Checked<'_, '_>], targets: &TargetTimes<'_>) -> Result<()> {
        if checked.is_empty() {
            return Ok(());
        }
        let status = self.status_words(checked.len())?;
        for (k, c) in checked.iter().enumerate() {
            let status_pointer = status.device_pointer() + 8 * k as u64;
            let config = LaunchConfig { grid: 256, block: 256, shared_bytes: 0 };
            // SAFETY: word k of `status` is in bounds; the arguments' arrays are
            // the caller's live tensors, of the sizes the plan checked.
            unsafe { self.context.launch(entry::ResampleCheck, config, (c.args, status_pointer)) }
                .map_err(cuda_error)?;
        }
        let mut verdicts = vec![0u64; checked.len()];
        self.context.read_words(&status, &mut verdicts).map_err(cuda_error)?;
        match checked.iter().zip(verdicts).find(|(_, verdict)| *verdict != u64::MAX) {
            None => Ok(()),
            // Reading the failing value back can fail too; either error is reported.
            Some((c, verdict)) => match self.describe_failure(&c.what, &c.args, c.stream, targets, verdict) {
                Ok(error) | Err(error) => Err(error),
            },
        }
    }

    /// The error of a failed check's `verdict` (kind, position, subtype), in
    /// the CPU reference's words.
    fn describe_failure(
        &self,
        what: &str,
        args: &ResampleArgs,
        stream: &StreamInput<'_>,
        targets: &TargetTimes<'_>,
        verdict: u64,
    ) -> Result<Error> {
        let (kind, position, subtype) = (verdict >> 60, (verdict & ((1 << 60) - 1)) >> 1, verdict & 1);
        let read_f64 = |tensor: &Tensor, index: u64| -> Result<f64> {
            let mut bytes = [0u8; 8];
            let storage =
                tensor.device_storage().ok_or_else(|| Error::Internal("time tensor is not on the device".into()))?;
            self.context
                .download_range(&storage.bytes, storage.offset + index as usize * 8, &mut bytes)
                .map_err(cuda_error)?;
            Ok(f64::from_le_bytes(bytes))
        };
        Ok(match kind {
            1 => {
                let row = position as usize;
                let length = match stream.lengths {
                    Some(l) => l.to_host()?.as_slice().to_f64_vec().get(row).copied().unwrap_or(0.0),
                    None => 0.0,
                };
                Invalid::BadLength {
                    what: format!("{what} valid lengths"),
                    row,
                    length: length.max(0.0) as u64,
                    samples: args.samples as usize,
                }
            }
            2 => {
                let TargetTimes::Tensor(t) = targets else { return Err(Error::Internal("bad check verdict".into())) };
                Invalid::NonFiniteTime {
                    what: format!("{what} target times"),
                    row: (position / args.targets) as usize,
                    index: (position % args.targets) as usize,
                    value: read_f64(t, position)?,
                }
            }
            _ => {
                let TimeAxis::Tensor(t) = stream.times else { return Err(Error::Internal("bad check verdict".into())) };
                let (row, index) = ((position / args.samples) as usize, (position % args.samples) as usize);
                let value = read_f64(t, position)?;
                if subtype == 0 {
                    Invalid::NonFiniteTime { what: format!("{what} source times"), row, index, value }
                } else {
                    Invalid::TimesNotIncreasing {
                        what: format!("{what} source times"),
                        row,
                        index,
                        previous: read_f64(t, position - 1)?,
                        value,
                    }
                }
            }
        }
        .into())
    }
}

/// One stream's arguments, awaiting its device-side check.
pub(super) struct Checked<'s, 'a> {
    pub what: String,
    pub args: ResampleArgs,
    pub stream: &'s StreamInput<'a>,
}

/// Consecutive targets of one row a warp computes: one while there are few
/// targets in all (more warps share the latency of the search and the
/// loads), four beyond (their searches load together). Measured on an H100
/// (docs/performance.md): one is faster up to about 10^4 targets.
pub(super) fn targets_per_warp(targets: usize) -> usize {
    if targets <= 12_000 {
        1
    } else {
        4
    }
}

/// A launch of `warps` warps, 4 per block.
pub(super) fn warp_launch(warps: usize) -> LaunchConfig {
    let warps_per_block = 4usize;
    LaunchConfig {
        grid: warps.div_ceil(warps_per_block).clamp(1, 1 << 20) as u32,
        block: (32 * warps_per_block) as u32,
        shared_bytes: 0,
    }
}

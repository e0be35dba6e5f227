//! Fusion on a CUDA device: one launch for all streams, their descriptors in
//! the launch's parameters (a device table beyond 16 streams). Float streams
//! without slerp take the tiled kernel, the rest `fuse`.

use robocache_cpu::{plan_fusion_shapes, DType, ResamplePlan, StreamShape};
use robocache_cuda::abi::{DTypeCode, FusionArgs, FusionStream, ResampleArgs, FUSION_INLINE, MAX_TILE};
use robocache_cuda::{entry, Entry, FuseTiledParams};

use super::backend::{CudaDevice, DeviceStorage};
use super::error::cuda_error;
use super::resample::{
    describe_stream, describe_targets, device_pointer, has_slerp, targets_per_warp, tile_launch, warp_launch, Checked,
    MAX_TILE_CHANNELS, PLACED_BYTES,
};
use crate::ops::descriptors::{Fused, FusionStreamInput, TargetTimes};
use crate::{Device, Result, Tensor};

/// The kernels' code for a dtype.
fn dtype_code(dtype: DType) -> DTypeCode {
    match dtype {
        DType::Bool => DTypeCode::Bool,
        DType::U8 => DTypeCode::U8,
        DType::U16 => DTypeCode::U16,
        DType::U32 => DTypeCode::U32,
        DType::U64 => DTypeCode::U64,
        DType::I8 => DTypeCode::I8,
        DType::I16 => DTypeCode::I16,
        DType::I32 => DTypeCode::I32,
        DType::I64 => DTypeCode::I64,
        DType::F16 => DTypeCode::F16,
        DType::BF16 => DTypeCode::BF16,
        DType::F32 => DTypeCode::F32,
        DType::F64 => DTypeCode::F64,
    }
}

/// Targets from which the tiled fusion beats a warp per target.
const TILED_FUSION_TARGETS: usize = 4096;

/// Shared memory a block may take without opting in.
const SHARED_LIMIT: usize = 48 << 10;

/// A tiled fusion launch.
struct TiledFusion {
    kernel: Entry<FuseTiledParams>,
    tile: usize,
    shared_bytes: usize,
}

/// The tiled fusion for these streams, when it applies: float streams and
/// output, no slerp, rows a tile can index in 32 bits, and a tile's placements
/// (and staged output) within the shared memory of a block. Straight into
/// the output (`fuse_tiled_<dtype>`) when every word lands aligned: every
/// stream of the output dtype, 16-byte rows and stream offsets; else
/// through shared memory (`fuse_staged_<dtype>`).
fn tiled_fusion(
    plans: &[ResamplePlan],
    offsets: &[usize],
    dtype: DType,
    batch: usize,
    targets: usize,
) -> Option<TiledFusion> {
    // Small fusions are latency-bound, and a tile's barrier lengthens the
    // chain: a warp per target is faster there (docs/performance.md).
    if batch * targets < TILED_FUSION_TARGETS {
        return None;
    }
    let is_float = |d: DType| matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64);
    if plans.iter().any(|p| !is_float(p.dtype) || has_slerp(&p.groups) || p.channels > MAX_TILE_CHANNELS) {
        return None;
    }
    let size = dtype.size_in_bytes();
    let width = *offsets.last()?;
    let direct = plans.iter().all(|p| p.dtype == dtype)
        && (width * size).is_multiple_of(16)
        && offsets.iter().all(|o| (o * size).is_multiple_of(16));
    let kernel = match (dtype, direct) {
        (DType::F16, true) => entry::FuseTiledF16,
        (DType::BF16, true) => entry::FuseTiledBF16,
        (DType::F32, true) => entry::FuseTiledF32,
        (DType::F64, true) => entry::FuseTiledF64,
        (DType::F16, false) => entry::FuseStagedF16,
        (DType::BF16, false) => entry::FuseStagedBF16,
        (DType::F32, false) => entry::FuseStagedF32,
        (DType::F64, false) => entry::FuseStagedF64,
        _ => return None,
    };
    // Two buffers of placements, two chunk counters a stream (in 16-byte
    // words), and the stage.
    let counters = (2 * plans.len() * 4).next_multiple_of(16);
    let shared = |tile: usize| {
        2 * plans.len() * tile * PLACED_BYTES + counters + if direct { 0 } else { tile * width * size + 16 }
    };
    let tile = (0..=MAX_TILE.trailing_zeros()).rev().map(|k| 1usize << k).find(|&t| shared(t) <= SHARED_LIMIT)?;
    Some(TiledFusion { kernel, tile, shared_bytes: shared(tile) })
}

impl CudaDevice {
    pub(super) fn run_fusion(
        &self,
        device: &Device,
        streams: &[FusionStreamInput<'_>],
        targets: &TargetTimes<'_>,
        dtype: DType,
    ) -> Result<Fused> {
        let target = describe_targets(device, targets)?;
        let described = streams
            .iter()
            .enumerate()
            .map(|(k, s)| describe_stream(&format!("stream {k}"), device, &s.stream))
            .collect::<Result<Vec<_>>>()?;
        let shapes: Vec<StreamShape<'_>> = streams
            .iter()
            .zip(&described)
            .map(|(s, d)| StreamShape {
                dtype: s.stream.data.dtype(),
                shape: d.shape,
                data_len: s.stream.data.len(),
                times: d.source_shape,
                lengths_len: s.stream.lengths.map(Tensor::len),
                spec: &s.spec,
            })
            .collect();
        let (plans, offsets) = plan_fusion_shapes(&shapes, target.shape, target.len, dtype)?;
        let mut table = Vec::with_capacity(streams.len());
        let mut checked = Vec::new();
        for (k, ((input, d), plan)) in streams.iter().zip(&described).zip(&plans).enumerate() {
            let what = format!("stream {k}");
            let args = self.resample_args(&what, plan, d, &target, &input.spec)?;
            if !input.spec.trusted {
                checked.push(Checked { what, args, stream: &input.stream });
            }
            table.push(FusionStream {
                data: device_pointer(input.stream.data),
                samples: args.samples,
                channels: args.channels,
                out_offset: offsets[k] as u64,
                source: args.source,
                lengths: args.lengths,
                length_type: args.length_type,
                dtype: dtype_code(plan.dtype),
                group_count: args.group_count,
                groups: args.groups,
                boundary: args.boundary,
                fill_bits: args.fill_bits,
            });
        }
        self.check_streams(&checked, targets)?;
        let batch = plans[0].batch;
        let width = *offsets.last().unwrap_or(&0);
        let rows = batch * target.len;
        let mut inline_streams = [FusionStream::default(); FUSION_INLINE];
        let device_table = if table.len() <= FUSION_INLINE {
            inline_streams[..table.len()].copy_from_slice(&table);
            None
        } else {
            Some(self.context.upload(bytemuck::cast_slice(&table)).map_err(cuda_error)?)
        };
        // One allocation for both results (the masks 256-byte aligned after
        // the data): one stream-ordered alloc and free per call.
        let valid_at = (rows * width * dtype.size_in_bytes()).next_multiple_of(256);
        let results = std::sync::Arc::new(self.alloc(valid_at + streams.len() * rows)?);
        let args = FusionArgs {
            batch: batch as u64,
            targets: target.len as u64,
            width: width as u64,
            stream_count: streams.len() as u64,
            target: target.timeline,
            out_dtype: dtype_code(dtype),
            targets_per_warp: targets_per_warp(streams.len() * rows) as i32,
            table: device_table.as_ref().map_or(0, |t| t.device_pointer()),
            inline_streams,
        };
        let out_pointer = results.device_pointer();
        let valid_pointer = out_pointer + valid_at as u64;
        if let Some(tiled) = tiled_fusion(&plans, &offsets, dtype, batch, target.len) {
            self.launch_tiled_fusion(&tiled, args, out_pointer, valid_pointer)?;
        } else {
            let warps = streams.len() * batch * target.len.div_ceil(args.targets_per_warp as usize);
            let kernel = if plans.iter().any(|p| has_slerp(&p.groups)) { entry::Fuse } else { entry::FuseNoSlerp };
            // SAFETY: every stream was planned like a resample; a device table
            // is freed in stream order after the kernel when it drops here.
            unsafe { self.context.launch(kernel, warp_launch(warps), (out_pointer, valid_pointer, args)) }
                .map_err(cuda_error)?;
        }
        Ok(Fused {
            data: Tensor::on_device(device, DeviceStorage::part(&results, 0), dtype, vec![batch, target.len, width]),
            valid: Tensor::on_device(
                device,
                DeviceStorage::part(&results, valid_at),
                DType::Bool,
                vec![streams.len(), batch, target.len],
            ),
            offsets,
        })
    }
}

impl CudaDevice {
    /// Launches a tiled fusion (`fuse_tiled_<dtype>` or `fuse_staged_<dtype>`)
    /// on as many blocks as are resident at once.
    fn launch_tiled_fusion(
        &self,
        tiled: &TiledFusion,
        args: FusionArgs,
        out_pointer: u64,
        valid_pointer: u64,
    ) -> Result<()> {
        let tiles = args.batch as usize * (args.targets as usize).div_ceil(tiled.tile);
        let config = tile_launch(self.resident_grid(tiled.kernel, tiles, tiled.shared_bytes)?, tiled.shared_bytes);
        // SAFETY: every stream was planned like a resample, and tiled_fusion
        // checked the dtypes, the absence of slerp, the alignment a direct
        // write needs and the shared memory the tile takes.
        let params = (out_pointer, valid_pointer, tiled.tile as i32, args);
        unsafe { self.context.launch(tiled.kernel, config, params) }.map_err(cuda_error)
    }

    /// A resample the tiled resample kernel cannot take because its rows are
    /// not whole 16-byte words (seven bf16 joint angles, say) or its data
    /// does not start on one, run as a fusion of that one stream: the tiled
    /// fusion moves such rows element by element and, when the output rows
    /// are not aligned either, assembles a tile's rows in shared memory and
    /// writes them out in aligned words, where the alternative is a warp per
    /// targets. Returns whether it applied (float data without slerp, from
    /// `TILED_FUSION_TARGETS` targets); `resample` holds the call's arguments
    /// as the resample kernels take them.
    pub(super) fn resample_as_fusion(
        &self,
        plan: &ResamplePlan,
        resample: &ResampleArgs,
        data_pointer: u64,
        out_pointer: u64,
        valid_pointer: u64,
    ) -> Result<bool> {
        let offsets = [0, plan.channels];
        let Some(tiled) = tiled_fusion(std::slice::from_ref(plan), &offsets, plan.dtype, plan.batch, plan.target_len)
        else {
            return Ok(false);
        };
        let mut inline_streams = [FusionStream::default(); FUSION_INLINE];
        inline_streams[0] = FusionStream {
            data: data_pointer,
            samples: resample.samples,
            channels: resample.channels,
            out_offset: 0,
            source: resample.source,
            lengths: resample.lengths,
            length_type: resample.length_type,
            dtype: dtype_code(plan.dtype),
            group_count: resample.group_count,
            groups: resample.groups,
            boundary: resample.boundary,
            fill_bits: resample.fill_bits,
        };
        let args = FusionArgs {
            batch: resample.batch,
            targets: resample.targets,
            width: resample.channels,
            stream_count: 1,
            target: resample.target,
            out_dtype: dtype_code(plan.dtype),
            targets_per_warp: resample.targets_per_warp,
            table: 0,
            inline_streams,
        };
        self.launch_tiled_fusion(&tiled, args, out_pointer, valid_pointer)?;
        Ok(true)
    }
}

//! Voxelization on a CUDA device (kernels/voxelize.cu). Deterministic in
//! every mode, and queued without waiting: the dropped-point count stays on
//! the device until the caller reads it.

use std::sync::Arc;

use robocache_cpu::{plan_voxelize_shapes, DType, Error as Invalid, PointShapes, VoxelGrid, VoxelMode};
use robocache_cuda::abi::{self, IndexType, MeanLists, SlotPoints, VoxelArgs};
use robocache_cuda::{entry, DeviceBytes, Entry, LaunchConfig, Params};

use super::backend::{CudaDevice, DeviceStorage};
use super::error::cuda_error;
use super::resample::{device_pointer, index_type};
use crate::ops::descriptors::{VoxelInput, VoxelOutput};
use crate::{Device, Error, Result, Tensor};

/// A grid-stride launch over `n` items, in blocks of 256 threads.
fn over(n: usize) -> LaunchConfig {
    LaunchConfig { grid: n.div_ceil(256).clamp(1, 1 << 16) as u32, block: 256, shared_bytes: 0 }
}

/// An output that is an allocation of its own: its storage and device
/// pointer (and no allocation shared with the dropped count).
fn whole(buffer: DeviceBytes) -> (DeviceStorage, u64, Option<Arc<DeviceBytes>>) {
    let pointer = buffer.device_pointer();
    (DeviceStorage::new(buffer), pointer, None)
}

/// Voxels per thread of the mean kernels for F = 1 to 4 (`GROUP` in
/// kernels/voxelize.cu).
const MEAN_GROUP: usize = 4;

/// Threads per block of the means kernels for F = 1 to 4 (`MEAN_THREADS` in
/// kernels/voxelize.cu, which sizes their shared memory by it).
const MEAN_THREADS: u32 = 256;

/// Points of a voxel found without its overflow (`SLOTS`): the first from
/// its tally, the others from the slot arrays.
const SLOTS: usize = 4;

/// Heavier voxels up to this many points are a warp's (`WARP_POINTS`).
const WARP_POINTS: usize = 32;

/// Points of a voxel the heavy kernel sorts in shared memory (`SHARED_POINTS`).
const SHARED_POINTS: u32 = 8192;

/// Words of `MeanLists::counters` (`COUNTERS` in kernels/voxelize.cu): the
/// lists' lengths and the segment words handed out, then the dropped
/// points (`u64`, words 4 and 5).
const COUNTERS: usize = 6;

/// Byte offset of the dropped points in `MeanLists::counters`.
const DROPPED_COUNTER: usize = 16;

/// Bytes before an occupancy or count grid in its allocation: the dropped
/// count's (`u64`), rounded to keep the grid on a 256-byte boundary.
const DROPPED_BYTES: usize = 256;

/// Bytes of the kernels' `OverflowPoint` (`{u64, u32, u32}`).
const OVERFLOW_POINT_BYTES: usize = 16;

/// Bytes of the kernels' `HeavyVoxel` (`{u64, u32, u32, u32, u32}`).
const HEAVY_VOXEL_BYTES: usize = 24;

/// Scratch of the mean, written by the scatter and read by the later passes
/// (see kernels/voxelize.cu): one allocation of about 24 bytes per voxel and
/// 20 per point, of which the tallies and counters are zeroed by one fill
/// (each allocation and launch is a driver call the GPU may wait for).
struct MeanScratch {
    /// Counts per voxel (an output, written by the means kernel).
    counts: DeviceBytes,
    buffer: DeviceBytes,
    /// Points 1 to `SLOTS - 1` of every voxel: `SLOTS - 1` arrays of
    /// `slot_stride` words.
    slot_stride: usize,
    /// Byte offsets in `buffer`.
    layout: MeanLayout,
}

/// Where each part of the mean's scratch starts, in bytes, each on a
/// 256-byte boundary.
#[derive(Clone, Copy, Debug)]
struct MeanLayout {
    /// Per voxel its count and index sum (`u64`), zeroed.
    tallies: usize,
    /// The lists' lengths, the segment words handed out and the dropped
    /// points (`u32 x COUNTERS`), zeroed with the tallies.
    counters: usize,
    slots: usize,
    /// The points past their voxel's slots, as the scatter met them.
    overflow: usize,
    /// Voxels of `SLOTS + 1` to `WARP_POINTS` points, and heavier ones.
    warp_voxels: usize,
    block_voxels: usize,
    /// Per voxel its segment's start (written for heavy voxels only).
    voxel_segments: usize,
    /// The overflow points, placed by voxel.
    segments: usize,
    /// Bytes in all.
    end: usize,
}

impl MeanLayout {
    fn new(points: usize, voxels: usize, slot_stride: usize) -> Self {
        // Every list at its worst case: a voxel of more than k points takes
        // k + 1 of them.
        let warp_voxels = voxels.min(points / (SLOTS + 1));
        let block_voxels = voxels.min(points / (WARP_POINTS + 1));
        let mut end = 0;
        let mut part = |bytes: usize| {
            let start = end;
            end = (start + bytes).next_multiple_of(256);
            start
        };
        MeanLayout {
            tallies: part(8 * voxels),
            counters: part(4 * COUNTERS),
            slots: part(4 * (SLOTS - 1) * slot_stride),
            overflow: part(OVERFLOW_POINT_BYTES * points),
            warp_voxels: part(HEAVY_VOXEL_BYTES * warp_voxels),
            block_voxels: part(HEAVY_VOXEL_BYTES * block_voxels),
            voxel_segments: part(4 * voxels),
            segments: part(4 * points),
            end,
        }
    }
}

impl MeanScratch {
    fn new(device: &CudaDevice, points: usize, voxels: usize) -> Result<Self> {
        let slot_stride = voxels.next_multiple_of(4);
        let layout = MeanLayout::new(points, voxels, slot_stride);
        let counts = device.alloc(4 * voxels)?;
        let buffer = device.alloc(layout.end)?;
        // Zeroed by a kernel that keeps the tallies in L2 for the scatter's
        // atomics (a memset's lines go out to memory and come back).
        device.fill_words(buffer.device_pointer(), 0, (layout.counters + 4 * COUNTERS) / 4)?;
        Ok(MeanScratch { counts, buffer, slot_stride, layout })
    }

    fn at(&self, offset: usize) -> u64 {
        self.buffer.device_pointer() + offset as u64
    }

    fn tallies(&self) -> u64 {
        self.at(self.layout.tallies)
    }

    /// The scatter's count of dropped points (`u64`).
    fn dropped(&self) -> u64 {
        self.at(self.layout.counters + DROPPED_COUNTER)
    }

    fn slot_points(&self) -> SlotPoints {
        SlotPoints { words: self.at(self.layout.slots), stride: self.slot_stride as u64 }
    }

    fn lists(&self) -> MeanLists {
        MeanLists {
            overflow: self.at(self.layout.overflow),
            counters: self.at(self.layout.counters),
            warp_voxels: self.at(self.layout.warp_voxels),
            block_voxels: self.at(self.layout.block_voxels),
            voxel_segments: self.at(self.layout.voxel_segments),
            segments: self.at(self.layout.segments),
        }
    }
}

impl CudaDevice {
    /// Queues `kernel` with `params` on the device's stream.
    ///
    /// # Safety
    ///
    /// Every device pointer in `params` must be valid for what the kernel
    /// reads and writes.
    unsafe fn launch_voxel<P: Params>(&self, kernel: Entry<P>, config: LaunchConfig, params: P) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.context.launch(kernel, config, params) }.map_err(cuda_error)
    }

    /// Fills `count` 32-bit words from `words` (16-byte aligned) with
    /// `value`, keeping them in L2 for the atomics that follow.
    fn fill_words(&self, words: u64, value: u32, count: usize) -> Result<()> {
        // SAFETY: `words` holds `count` words (the caller's allocation).
        unsafe { self.launch_voxel(entry::VoxelFill, over(count.div_ceil(4)), (words, value, count as u64)) }
    }

    fn zeroed(&self, bytes: usize) -> Result<DeviceBytes> {
        let mut buffer = self.alloc(bytes)?;
        self.context.fill(&mut buffer, 0).map_err(cuda_error)?;
        Ok(buffer)
    }

    pub(super) fn run_voxelize(
        &self,
        device: &Device,
        input: &VoxelInput<'_>,
        grid: &VoxelGrid,
        mode: VoxelMode,
        budget_bytes: u64,
    ) -> Result<VoxelOutput> {
        let feature_len = input.checked_feature_len(device)?;
        let (cloud_index, cloud_type, clouds) = match input.clouds {
            Some((c, count)) => (device_pointer(c), index_type("cloud index", c)?, count),
            None => (0, IndexType::None, 1),
        };
        let shapes = PointShapes {
            positions_len: input.points.len(),
            features_len: input.features.map(Tensor::len),
            feature_len,
            clouds_len: input.clouds.map(|(c, _)| c.len()),
            clouds,
        };
        let voxels = plan_voxelize_shapes(&shapes, grid, mode, budget_bytes)?;
        let n = input.points.len() / 3;
        let args = VoxelArgs {
            origin: grid.origin,
            size: grid.voxel_size,
            dims: grid.dims.map(|d| d as u64),
            points: n as u64,
            per_cloud: (voxels / clouds) as u64,
            clouds: clouds as u64,
            cloud_index,
            cloud_type,
            mode: match mode {
                VoxelMode::Occupancy => abi::VoxelMode::Occupancy,
                VoxelMode::Count => abi::VoxelMode::Count,
                VoxelMode::Mean => abi::VoxelMode::Mean,
                VoxelMode::Max => abi::VoxelMode::Max,
            },
            feature_len: feature_len as u64,
        };
        if cloud_type != IndexType::None && n > 0 {
            self.check_clouds(&args, input)?;
        }
        let grid_shape = vec![clouds, grid.dims[0], grid.dims[1], grid.dims[2]];
        let values = voxels * feature_len.max(1);
        // Occupancy and count zero the grid and the dropped count together:
        // one allocation, one memset (the dropped count at its start).
        let (grid_storage, grid_pointer, counted) = match mode {
            VoxelMode::Occupancy | VoxelMode::Count => {
                let bytes = if mode == VoxelMode::Count { 4 * voxels } else { voxels };
                let shared = Arc::new(self.zeroed(DROPPED_BYTES + bytes)?);
                let pointer = shared.device_pointer() + DROPPED_BYTES as u64;
                (DeviceStorage::part(&shared, DROPPED_BYTES), pointer, Some(shared))
            }
            // Every voxel's mean is written by the kernels, unless no point is.
            VoxelMode::Mean if n > 0 => whole(self.alloc(4 * values)?),
            VoxelMode::Mean => whole(self.zeroed(4 * values)?),
            VoxelMode::Max => {
                let buffer = self.alloc(4 * values)?;
                // The encoding of -inf: empty voxels decode to -inf.
                self.fill_words(buffer.device_pointer(), !0xFF80_0000u32, values)?;
                whole(buffer)
            }
        };
        // The mean of an empty cloud is the zero grid: nothing to place.
        let mean_of_points = mode == VoxelMode::Mean && n > 0;
        let scratch = if mean_of_points {
            if n > u32::MAX as usize {
                return Err(Error::Limit {
                    what: "voxelize".into(),
                    limit: format!("the mean on CUDA takes at most {} points, not {n}", u32::MAX),
                });
            }
            Some(MeanScratch::new(self, n, voxels)?)
        } else {
            None
        };
        let empty_counts = if mode == VoxelMode::Mean && n == 0 { Some(self.zeroed(4 * voxels)?) } else { None };
        // The mean counts its dropped points among its scratch's counters (no
        // memset of its own), and the heavy-voxel kernel copies the count out.
        let (dropped, dropped_pointer) = match (&counted, &scratch) {
            (Some(shared), _) => (DeviceStorage::part(shared, 0), shared.device_pointer()),
            (None, Some(scratch)) => (DeviceStorage::new(self.alloc(8)?), scratch.dropped()),
            (None, None) => {
                let buffer = self.zeroed(8)?;
                let pointer = buffer.device_pointer();
                (DeviceStorage::new(buffer), pointer)
            }
        };
        let dropped_out = dropped.device_pointer();

        if n > 0 {
            let points = device_pointer(input.points);
            let features = input.features.map_or(0, device_pointer);
            let counts_pointer = if mode == VoxelMode::Count { grid_pointer } else { 0 };
            let tallies = scratch.as_ref().map_or(0, MeanScratch::tallies);
            let slots = scratch.as_ref().map_or(SlotPoints::default(), MeanScratch::slot_points);
            let lists = scratch.as_ref().map_or(MeanLists::default(), MeanScratch::lists);
            let params = (points, features, grid_pointer, counts_pointer, tallies, slots, lists, dropped_pointer, args);
            // SAFETY: points and features were checked against the plan's
            // shapes; the grid, counts, tallies, slots and lists are this
            // call's allocations, sized by the plan.
            unsafe { self.launch_voxel(entry::VoxelScatter, over(n), params) }?;
        }
        match mode {
            VoxelMode::Max => {
                // SAFETY: the grid allocated above holds `values` words.
                unsafe { self.launch_voxel(entry::VoxelMaxDecode, over(values), (grid_pointer, values as u64)) }?;
            }
            VoxelMode::Mean => {
                if let Some(scratch) = &scratch {
                    self.voxel_means(grid_pointer, dropped_out, scratch, input, args, voxels)?
                }
            }
            VoxelMode::Occupancy | VoxelMode::Count => {}
        }
        let counts = scratch.map(|s| s.counts).or(empty_counts);

        let (dtype, shape) = match mode {
            VoxelMode::Occupancy => (DType::U8, grid_shape.clone()),
            VoxelMode::Count => (DType::U32, grid_shape.clone()),
            VoxelMode::Mean | VoxelMode::Max => (DType::F32, [grid_shape.as_slice(), &[feature_len]].concat()),
        };
        Ok(VoxelOutput {
            grid: Tensor::on_device(device, grid_storage, dtype, shape),
            counts: counts.map(|c| Tensor::on_device(device, DeviceStorage::new(c), DType::U32, grid_shape)),
            dropped: Tensor::on_device(device, dropped, DType::U64, vec![1]),
        })
    }

    /// The per-voxel means, the placement of the overflow into segments and
    /// the heavy voxels' means (see kernels/voxelize.cu).
    fn voxel_means(
        &self,
        mean: u64,
        dropped: u64,
        scratch: &MeanScratch,
        input: &VoxelInput<'_>,
        args: VoxelArgs,
        voxels: usize,
    ) -> Result<()> {
        let feature_len = args.feature_len as usize;
        let features = input.features.map_or(0, device_pointer);
        let (tallies, counts) = (scratch.tallies(), scratch.counts.device_pointer());
        let slots = scratch.slot_points();
        let lists = scratch.lists();
        let grouped = match feature_len {
            1 => Some(entry::VoxelMeanF1),
            2 => Some(entry::VoxelMeanF2),
            3 => Some(entry::VoxelMeanF3),
            4 if features.is_multiple_of(16) => Some(entry::VoxelMeanF4),
            _ => None,
        };
        match grouped {
            // As many blocks as fit at once (or fewer for a small grid): each
            // thread walks several groups, prefetching the next one's tallies.
            Some(kernel) => {
                let config = LaunchConfig {
                    grid: (voxels.div_ceil(MEAN_GROUP).div_ceil(MEAN_THREADS as usize) as u32).clamp(
                        1,
                        self.context.resident_blocks(kernel.kernel(), MEAN_THREADS, 0).map_err(cuda_error)?
                            * self.context.multiprocessors(),
                    ),
                    block: MEAN_THREADS,
                    shared_bytes: 0,
                };
                let params = (features, tallies, counts, slots, mean, voxels as u64, lists);
                // SAFETY: the scratch and the mean grid were sized by the plan
                // for `voxels` voxels of `feature_len` features.
                unsafe { self.launch_voxel(kernel, config, params) }?
            }
            None => {
                let params = (features, tallies, counts, slots, mean, voxels as u64, args.feature_len, lists);
                // SAFETY: the scratch and the mean grid were sized by the plan
                // for `voxels` voxels of `feature_len` features.
                unsafe { self.launch_voxel(entry::VoxelMean, over(voxels), params) }?
            }
        }
        // How many points overflowed and how many voxels are heavy is known
        // only on the device: fixed grids walk the lists, and threads past
        // their ends return at once.
        let multiprocessors = self.context.multiprocessors();
        let config = LaunchConfig { grid: 2 * multiprocessors, block: 256, shared_bytes: 0 };
        // SAFETY: the scratch's lists, allocated with it.
        unsafe { self.launch_voxel(entry::VoxelPlaceOverflow, config, (lists,)) }?;
        let config = LaunchConfig { grid: 4 * multiprocessors, block: 256, shared_bytes: 4 * SHARED_POINTS };
        let params = (features, slots, lists, mean, device_pointer(input.points), args, dropped);
        // SAFETY: the scratch, the mean grid and the dropped word as above; its
        // dynamic shared memory is the SHARED_POINTS words it declares.
        unsafe { self.launch_voxel(entry::VoxelMeanHeavy, config, params) }?;
        // The scratch drops with the caller: freed in stream order, after the kernels.
        Ok(())
    }

    /// Rejects an out-of-range cloud index, naming the first such point.
    fn check_clouds(&self, args: &VoxelArgs, input: &VoxelInput<'_>) -> Result<()> {
        let status = self.status_words(1)?;
        // SAFETY: it reads the points' cloud indices (checked against the plan)
        // and writes one word of `status`.
        unsafe {
            self.launch_voxel(entry::VoxelCheckClouds, over(args.points as usize), (*args, status.device_pointer()))
        }?;
        let mut point = [0u64];
        self.context.read_words(&status, &mut point).map_err(cuda_error)?;
        let [point] = point;
        if point == u64::MAX {
            return Ok(());
        }
        let cloud = match input.clouds {
            Some((c, _)) => c.to_host()?.as_slice().to_f64_vec().get(point as usize).copied().unwrap_or(-1.0),
            None => -1.0,
        };
        Err(Invalid::CloudIndex {
            point: point as usize,
            cloud: if cloud < 0.0 { u64::MAX } else { cloud as u64 },
            clouds: args.clouds as usize,
        }
        .into())
    }
}

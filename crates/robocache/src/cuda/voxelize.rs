//! Voxelization on a CUDA device (kernels/voxelize.cu). Deterministic in
//! every mode, and queued without waiting: the dropped-point count stays on
//! the device until the caller reads it.

use std::ffi::c_void;

use robocache_cpu::{plan_voxelize_shapes, DType, Error as Invalid, PointShapes, VoxelGrid, VoxelMode};
use robocache_cuda::{DeviceBytes, Kernel, LaunchConfig};

use super::backend::{cuda_error, CudaDevice, DeviceStorage};
use super::resample::{device_pointer, index_type};
use crate::ops::{VoxelInput, VoxelOutput};
use crate::{Device, Error, Result, Tensor};

/// Mirrors `struct VoxelArgs` in kernels/voxelize.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct VoxelArgs {
    origin: [f32; 3],
    size: [f32; 3],
    dims: [u64; 3],
    points: u64,
    per_cloud: u64,
    clouds: u64,
    cloud_index: u64,
    cloud_type: i32,
    mode: i32,
    key_bytes: i32,
    feature_len: u64,
}

/// A grid-stride launch over `n` items.
fn over(n: usize) -> LaunchConfig {
    LaunchConfig { grid: n.div_ceil(256).clamp(1, 1 << 16) as u32, block: 256, shared_bytes: 0 }
}

/// Counts per tile of the one-pass scan (`SCAN_TILE` in kernels/voxelize.cu).
const SCAN_TILE: usize = 16384;

/// Voxels per thread of the mean kernels for F = 1 to 4 (`GROUP`).
const MEAN_GROUP: usize = 4;

/// Mirrors `struct VoxelPoints` in kernels/voxelize.cu: where a voxel's
/// points are.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct VoxelPoints {
    starts: u64,
    order: u64,
}

/// Mirrors `struct PointKeys` in kernels/voxelize.cu: the mean's per-point
/// voxel keys, `bytes` (4 or 8) each.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct PointKeys {
    words: u64,
    bytes: i32,
}

// The kernel's parameter is `{void*, int}`: 16 bytes with its tail padding.
const _: () = assert!(size_of::<PointKeys>() == 16);

/// Bytes of a point's key for a grid of `voxels`: 4 while every voxel and
/// the "outside" marker (all ones) fit in 32 bits.
fn key_bytes(voxels: usize) -> i32 {
    if voxels < u32::MAX as usize {
        4
    } else {
        8
    }
}

/// Scratch of the mean, written by the scatter and read by the later passes.
struct MeanScratch {
    /// Zeroed counts per voxel (an output).
    counts: DeviceBytes,
    /// Each point's voxel (or all ones when it is dropped), `key_bytes` each.
    keys: DeviceBytes,
    key_bytes: i32,
    /// Each point's rank among its voxel's points, as the atomics ran.
    slots: DeviceBytes,
    /// The scan's tile counter and one status word per tile, cleared by the
    /// scatter.
    scan_status: DeviceBytes,
    /// Tiles of the scan over `voxels + 1` starts.
    scan_tiles: usize,
}

/// Points of a voxel the heavy kernel sorts in shared memory (`SHARED_POINTS`).
const SHARED_POINTS: u32 = 8192;

impl CudaDevice {
    fn launch_with(&self, kernel: Kernel, config: LaunchConfig, params: &[*mut c_void]) -> Result<()> {
        // SAFETY: every caller below passes the parameters of `kernel` as
        // declared in kernels/voxelize.cu, with buffers sized by the plan.
        unsafe { self.context.launch(kernel, config, params) }.map_err(cuda_error)
    }

    fn zeroed(&self, bytes: usize) -> Result<DeviceBytes> {
        let mut buffer = self.alloc(bytes)?;
        self.context.fill(&mut buffer, 0).map_err(cuda_error)?;
        Ok(buffer)
    }

    pub(crate) fn voxelize(
        &self,
        device: &Device,
        input: &VoxelInput<'_>,
        grid: &VoxelGrid,
        mode: VoxelMode,
        budget_bytes: u64,
    ) -> Result<VoxelOutput> {
        let feature_len = device.check_voxel_input(input)?;
        let (cloud_index, cloud_type, clouds) = match input.clouds {
            Some((c, count)) => (device_pointer(c), index_type("cloud index", c)?, count),
            None => (0, 0, 1),
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
        let mut args = VoxelArgs {
            origin: grid.origin,
            size: grid.voxel_size,
            dims: grid.dims.map(|d| d as u64),
            points: n as u64,
            per_cloud: (voxels / clouds) as u64,
            clouds: clouds as u64,
            cloud_index,
            cloud_type,
            mode: match mode {
                VoxelMode::Occupancy => 0,
                VoxelMode::Count => 1,
                VoxelMode::Mean => 2,
                VoxelMode::Max => 3,
            },
            key_bytes: key_bytes(voxels),
            feature_len: feature_len as u64,
        };
        if cloud_type != 0 && n > 0 {
            self.check_clouds(&mut args, input)?;
        }

        let values = voxels * feature_len.max(1);
        let grid_buffer = match mode {
            VoxelMode::Occupancy => self.zeroed(voxels)?,
            VoxelMode::Count => self.zeroed(4 * voxels)?,
            // Every voxel's mean is written by the kernels, unless no point is.
            VoxelMode::Mean if n > 0 => self.alloc(4 * values)?,
            VoxelMode::Mean => self.zeroed(4 * values)?,
            VoxelMode::Max => {
                let buffer = self.alloc(4 * values)?;
                // The encoding of -inf: empty voxels decode to -inf.
                let (mut words, mut value, mut count) = (buffer.device_pointer(), !0xFF80_0000u32, values as u64);
                self.launch_with(
                    Kernel::VoxelFill,
                    over(values),
                    &[
                        (&mut words as *mut u64).cast(),
                        (&mut value as *mut u32).cast(),
                        (&mut count as *mut u64).cast(),
                    ],
                )?;
                buffer
            }
        };
        // The mean of an empty cloud is the zero grid: nothing to scan.
        let mean_of_points = mode == VoxelMode::Mean && n > 0;
        let scratch = if mean_of_points {
            if n > u32::MAX as usize {
                return Err(Error::Cuda(format!("mean on CUDA takes at most {} points, not {n}", u32::MAX)));
            }
            let scan_tiles = (voxels + 1).div_ceil(SCAN_TILE);
            Some(MeanScratch {
                counts: self.zeroed(4 * voxels)?,
                keys: self.alloc(args.key_bytes as usize * n)?,
                key_bytes: args.key_bytes,
                slots: self.alloc(4 * n)?,
                scan_status: self.alloc(8 * (1 + scan_tiles))?,
                scan_tiles,
            })
        } else {
            None
        };
        let empty_counts = if mode == VoxelMode::Mean && n == 0 { Some(self.zeroed(4 * voxels)?) } else { None };
        let dropped = self.zeroed(8)?;

        if n > 0 {
            let mut points = device_pointer(input.points);
            let mut features = input.features.map_or(0, device_pointer);
            let mut grid_pointer = grid_buffer.device_pointer();
            let pointer = |f: fn(&MeanScratch) -> &DeviceBytes| scratch.as_ref().map_or(0, |s| f(s).device_pointer());
            let mut counts_pointer =
                if mode == VoxelMode::Count { grid_buffer.device_pointer() } else { pointer(|s| &s.counts) };
            let mut keys_pointer = pointer(|s| &s.keys);
            let mut slots_pointer = pointer(|s| &s.slots);
            let mut status_pointer = pointer(|s| &s.scan_status);
            let mut status_words = scratch.as_ref().map_or(0, |s| 1 + s.scan_tiles as u64);
            let mut dropped_pointer = dropped.device_pointer();
            self.launch_with(
                Kernel::VoxelScatter,
                over(n),
                &[
                    (&mut points as *mut u64).cast(),
                    (&mut features as *mut u64).cast(),
                    (&mut grid_pointer as *mut u64).cast(),
                    (&mut counts_pointer as *mut u64).cast(),
                    (&mut keys_pointer as *mut u64).cast(),
                    (&mut slots_pointer as *mut u64).cast(),
                    (&mut status_pointer as *mut u64).cast(),
                    (&mut status_words as *mut u64).cast(),
                    (&mut dropped_pointer as *mut u64).cast(),
                    (&mut args as *mut VoxelArgs).cast(),
                ],
            )?;
        }
        match mode {
            VoxelMode::Max => {
                let (mut words, mut count) = (grid_buffer.device_pointer(), values as u64);
                self.launch_with(
                    Kernel::VoxelMaxDecode,
                    over(values),
                    &[(&mut words as *mut u64).cast(), (&mut count as *mut u64).cast()],
                )?;
            }
            VoxelMode::Mean => {
                if let Some(scratch) = &scratch {
                    self.voxel_means(&grid_buffer, scratch, input, n, voxels, feature_len)?
                }
            }
            VoxelMode::Occupancy | VoxelMode::Count => {}
        }
        let counts = scratch.map(|s| s.counts).or(empty_counts);

        let grid_shape = vec![clouds, grid.dims[0], grid.dims[1], grid.dims[2]];
        let (dtype, shape) = match mode {
            VoxelMode::Occupancy => (DType::U8, grid_shape.clone()),
            VoxelMode::Count => (DType::U32, grid_shape.clone()),
            VoxelMode::Mean | VoxelMode::Max => (DType::F32, [grid_shape.as_slice(), &[feature_len]].concat()),
        };
        Ok(VoxelOutput {
            grid: Tensor::on_device(device, DeviceStorage::new(grid_buffer), dtype, shape),
            counts: counts.map(|c| Tensor::on_device(device, DeviceStorage::new(c), DType::U32, grid_shape)),
            dropped: Tensor::on_device(device, DeviceStorage::new(dropped), DType::U64, vec![1]),
        })
    }

    /// Scan of the counts into segment starts, placement of the points into
    /// their segments, and the per-voxel means (see kernels/voxelize.cu).
    fn voxel_means(
        &self,
        mean: &DeviceBytes,
        scratch: &MeanScratch,
        input: &VoxelInput<'_>,
        n: usize,
        voxels: usize,
        feature_len: usize,
    ) -> Result<()> {
        let starts = self.alloc(4 * (voxels + 1))?;
        let order = self.alloc(4 * n)?;
        let heavy = self.alloc(8 * voxels)?;
        let heavy_count = self.zeroed(4)?;
        let (mut counts_pointer, mut starts_pointer, mut voxel_count) =
            (scratch.counts.device_pointer(), starts.device_pointer(), voxels as u64);
        let mut status_pointer = scratch.scan_status.device_pointer();
        self.launch_with(
            Kernel::VoxelScan,
            LaunchConfig { grid: scratch.scan_tiles as u32, block: 512, shared_bytes: 0 },
            &[
                (&mut counts_pointer as *mut u64).cast(),
                (&mut starts_pointer as *mut u64).cast(),
                (&mut status_pointer as *mut u64).cast(),
                (&mut voxel_count as *mut u64).cast(),
            ],
        )?;
        let mut keys = PointKeys { words: scratch.keys.device_pointer(), bytes: scratch.key_bytes };
        let (mut slots_pointer, mut order_pointer, mut point_count) =
            (scratch.slots.device_pointer(), order.device_pointer(), n as u64);
        self.launch_with(
            Kernel::VoxelPlace,
            over(n),
            &[
                (&mut keys as *mut PointKeys).cast(),
                (&mut slots_pointer as *mut u64).cast(),
                (&mut starts_pointer as *mut u64).cast(),
                (&mut order_pointer as *mut u64).cast(),
                (&mut point_count as *mut u64).cast(),
            ],
        )?;
        let mut features = input.features.map_or(0, device_pointer);
        let mut points = VoxelPoints { starts: starts.device_pointer(), order: order.device_pointer() };
        let (mut mean_pointer, mut f) = (mean.device_pointer(), feature_len as u64);
        let (mut heavy_pointer, mut heavy_count_pointer) = (heavy.device_pointer(), heavy_count.device_pointer());
        let grouped = match feature_len {
            1 => Some(Kernel::VoxelMeanF1),
            2 => Some(Kernel::VoxelMeanF2),
            3 => Some(Kernel::VoxelMeanF3),
            4 if features.is_multiple_of(16) => Some(Kernel::VoxelMeanF4),
            _ => None,
        };
        match grouped {
            Some(kernel) => self.launch_with(
                kernel,
                over(voxels.div_ceil(MEAN_GROUP)),
                &[
                    (&mut features as *mut u64).cast(),
                    (&mut points as *mut VoxelPoints).cast(),
                    (&mut mean_pointer as *mut u64).cast(),
                    (&mut voxel_count as *mut u64).cast(),
                    (&mut heavy_pointer as *mut u64).cast(),
                    (&mut heavy_count_pointer as *mut u64).cast(),
                ],
            )?,
            None => self.launch_with(
                Kernel::VoxelMean,
                over(voxels),
                &[
                    (&mut features as *mut u64).cast(),
                    (&mut counts_pointer as *mut u64).cast(),
                    (&mut points as *mut VoxelPoints).cast(),
                    (&mut mean_pointer as *mut u64).cast(),
                    (&mut voxel_count as *mut u64).cast(),
                    (&mut f as *mut u64).cast(),
                    (&mut heavy_pointer as *mut u64).cast(),
                    (&mut heavy_count_pointer as *mut u64).cast(),
                ],
            )?,
        }
        // How many voxels are heavy is known only on the device: a fixed grid
        // walks the list, and blocks past its end return at once.
        let heavy_blocks =
            LaunchConfig { grid: 2 * self.context.multiprocessors(), block: 256, shared_bytes: 4 * SHARED_POINTS };
        self.launch_with(
            Kernel::VoxelMeanHeavy,
            heavy_blocks,
            &[
                (&mut features as *mut u64).cast(),
                (&mut keys as *mut PointKeys).cast(),
                (&mut counts_pointer as *mut u64).cast(),
                (&mut points as *mut VoxelPoints).cast(),
                (&mut mean_pointer as *mut u64).cast(),
                (&mut point_count as *mut u64).cast(),
                (&mut f as *mut u64).cast(),
                (&mut heavy_pointer as *mut u64).cast(),
                (&mut heavy_count_pointer as *mut u64).cast(),
            ],
        )?;
        // The scratch buffers drop here: freed in stream order, after the kernels.
        Ok(())
    }

    /// Rejects an out-of-range cloud index, naming the first such point.
    fn check_clouds(&self, args: &mut VoxelArgs, input: &VoxelInput<'_>) -> Result<()> {
        let status = self.context.upload(&u64::MAX.to_le_bytes()).map_err(cuda_error)?;
        let mut status_pointer = status.device_pointer();
        self.launch_with(
            Kernel::VoxelCheckClouds,
            over(args.points as usize),
            &[(args as *mut VoxelArgs).cast(), (&mut status_pointer as *mut u64).cast()],
        )?;
        let mut word = [0u8; 8];
        self.context.download(&status, &mut word).map_err(cuda_error)?;
        let point = u64::from_le_bytes(word);
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

//! The voxel mean's bucketed pipeline (kernels/voxelize.cu, "Mean,
//! bucketed"): the points grouped by bucket of voxels in three passes, then
//! a block per bucket sorts them by voxel and sums. Experimental: chosen by
//! `ROBOCACHE_VOXEL_MEAN=buckets` until it has run on a GPU (it was written
//! in a session that had none; docs/performance.md, v27). The default is
//! the tallies pipeline in `voxelize.rs`.

use robocache_cuda::{DeviceBytes, Kernel, LaunchConfig};

use super::backend::CudaDevice;
use super::resample::device_pointer;
use super::voxelize::VoxelArgs;
use crate::ops::VoxelInput;
use crate::{Error, Result};

/// The environment variable that chooses the mean's pipeline.
pub(super) const MEAN_PIPELINE_VARIABLE: &str = "ROBOCACHE_VOXEL_MEAN";

/// How the CUDA backend computes a voxel mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MeanPipeline {
    /// Per-voxel tallies, slot arrays and overflow segments (the default).
    Tallies,
    /// Points grouped by bucket of voxels, sorted by a block per bucket.
    Buckets,
}

impl MeanPipeline {
    /// The pipeline `ROBOCACHE_VOXEL_MEAN` names (`tallies` when unset).
    pub(super) fn from_environment() -> Result<Self> {
        Self::parse(std::env::var(MEAN_PIPELINE_VARIABLE).ok().as_deref())
    }

    fn parse(value: Option<&str>) -> Result<Self> {
        match value {
            None | Some("" | "tallies") => Ok(MeanPipeline::Tallies),
            Some("buckets") => Ok(MeanPipeline::Buckets),
            Some(other) => Err(Error::Cuda(format!(
                "{MEAN_PIPELINE_VARIABLE} is `{other}`: expected `tallies` (the default) or `buckets`"
            ))),
        }
    }
}

/// Voxels per bucket (`BUCKET_VOXELS`): a block of the means kernel each.
const BUCKET_VOXELS: usize = 2048;

/// Points per block of the key and placement kernels
/// (`CHUNK_THREADS * CHUNK_ITEMS`).
const CHUNK_POINTS: usize = 256 * 16;

/// Threads per block of the key and placement kernels (`CHUNK_THREADS`), the
/// scan (`SCAN_THREADS`) and the means kernels (`BUCKET_THREADS`).
const CHUNK_THREADS: u32 = 256;
const SCAN_THREADS: u32 = 1024;
const BUCKET_THREADS: u32 = 256;

/// The voxel of a dropped point among the keys (`NO_VOXEL`): a grid of the
/// bucketed mean has fewer voxels.
const NO_VOXEL: usize = u32::MAX as usize;

/// Mirrors `struct BucketScratch` in kernels/voxelize.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct BucketPointers {
    keys: u64,
    dropped: u64,
    bucket_counts: u64,
    bucket_starts: u64,
    cursors: u64,
    entries: u64,
    sorted: u64,
    buckets: u64,
}

/// The scratch of one call: 16 bytes per point and 12 per bucket in one
/// allocation, whose first words (the dropped count and the bucket counts)
/// one fill zeroes.
struct BucketScratch {
    /// What `pointers` point into, held until the scratch drops (freed in
    /// stream order, after the kernels).
    _buffer: DeviceBytes,
    pointers: BucketPointers,
}

impl BucketScratch {
    fn new(device: &CudaDevice, points: usize, voxels: usize) -> Result<Self> {
        let buckets = voxels.div_ceil(BUCKET_VOXELS);
        let mut end = 0;
        let mut part = |bytes: usize| {
            let start = end;
            end = (start + bytes).next_multiple_of(256);
            start
        };
        // The zeroed words first: the dropped count (u64), then the bucket counts.
        let dropped = part(8 + 4 * buckets);
        let bucket_starts = part(4 * (buckets + 1));
        let cursors = part(4 * buckets);
        let keys = part(4 * points);
        let entries = part(8 * points);
        let sorted = part(4 * points);
        let buffer = device.alloc(end)?;
        let base = buffer.device_pointer();
        device.fill_words(base, 0, 2 + buckets)?;
        let at = |offset: usize| base + offset as u64;
        let pointers = BucketPointers {
            keys: at(keys),
            dropped: at(dropped),
            bucket_counts: at(dropped + 8),
            bucket_starts: at(bucket_starts),
            cursors: at(cursors),
            entries: at(entries),
            sorted: at(sorted),
            buckets: buckets as u64,
        };
        Ok(BucketScratch { _buffer: buffer, pointers })
    }
}

impl CudaDevice {
    /// Queues the bucketed mean of `args.points` (at least one) points into
    /// `mean` (every voxel written) and `dropped` (`u64`); returns the
    /// counts per voxel. Nothing waits for the host.
    pub(super) fn voxel_bucket_means(
        &self,
        input: &VoxelInput<'_>,
        args: &mut VoxelArgs,
        voxels: usize,
        mean: u64,
        dropped: u64,
    ) -> Result<DeviceBytes> {
        let n = args.points as usize;
        if n > u32::MAX as usize {
            return Err(Error::Cuda(format!("mean on CUDA takes at most {} points, not {n}", u32::MAX)));
        }
        if voxels >= NO_VOXEL {
            return Err(Error::Cuda(format!(
                "the bucketed mean on CUDA takes grids of fewer than {NO_VOXEL} voxels, not {voxels}"
            )));
        }
        let counts = self.alloc(4 * voxels)?;
        let scratch = BucketScratch::new(self, n, voxels)?;
        let mut pointers = scratch.pointers;
        let mut points = device_pointer(input.points);
        let chunks = LaunchConfig { grid: n.div_ceil(CHUNK_POINTS) as u32, block: CHUNK_THREADS, shared_bytes: 0 };
        self.launch_with(
            Kernel::VoxelBucketKeys,
            chunks,
            &[
                (&mut points as *mut u64).cast(),
                (args as *mut VoxelArgs).cast(),
                (&mut pointers as *mut BucketPointers).cast(),
            ],
        )?;
        self.launch_with(
            Kernel::VoxelBucketScan,
            LaunchConfig { grid: 1, block: SCAN_THREADS, shared_bytes: 0 },
            &[(&mut pointers as *mut BucketPointers).cast()],
        )?;
        let mut point_count = args.points;
        self.launch_with(
            Kernel::VoxelBucketPlace,
            chunks,
            &[(&mut point_count as *mut u64).cast(), (&mut pointers as *mut BucketPointers).cast()],
        )?;
        let mut features = input.features.map_or(0, device_pointer);
        let kernel = match args.feature_len {
            1 => Kernel::VoxelBucketMeanF1,
            2 => Kernel::VoxelBucketMeanF2,
            3 => Kernel::VoxelBucketMeanF3,
            4 if features.is_multiple_of(16) => Kernel::VoxelBucketMeanF4,
            _ => Kernel::VoxelBucketMean,
        };
        let (mut feature_len, mut counts_pointer) = (args.feature_len, counts.device_pointer());
        let (mut mean_pointer, mut voxel_count, mut dropped_pointer) = (mean, voxels as u64, dropped);
        self.launch_with(
            kernel,
            // A block per bucket (blocks past the grid's limit walk several).
            LaunchConfig {
                grid: voxels.div_ceil(BUCKET_VOXELS).min(i32::MAX as usize) as u32,
                block: BUCKET_THREADS,
                shared_bytes: 0,
            },
            &[
                (&mut features as *mut u64).cast(),
                (&mut feature_len as *mut u64).cast(),
                (&mut pointers as *mut BucketPointers).cast(),
                (&mut counts_pointer as *mut u64).cast(),
                (&mut mean_pointer as *mut u64).cast(),
                (&mut voxel_count as *mut u64).cast(),
                (&mut points as *mut u64).cast(),
                (args as *mut VoxelArgs).cast(),
                (&mut dropped_pointer as *mut u64).cast(),
            ],
        )?;
        // The scratch drops here: freed in stream order, after the kernels.
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_pipeline_is_named_by_the_environment_variable() {
        assert_eq!(MeanPipeline::parse(None).unwrap(), MeanPipeline::Tallies);
        assert_eq!(MeanPipeline::parse(Some("")).unwrap(), MeanPipeline::Tallies);
        assert_eq!(MeanPipeline::parse(Some("tallies")).unwrap(), MeanPipeline::Tallies);
        assert_eq!(MeanPipeline::parse(Some("buckets")).unwrap(), MeanPipeline::Buckets);
        let message = MeanPipeline::parse(Some("bucket")).unwrap_err().to_string();
        assert!(message.contains("ROBOCACHE_VOXEL_MEAN") && message.contains("`bucket`"), "{message}");
    }
}

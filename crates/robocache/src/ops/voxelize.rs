use robocache_cpu::{HostSlice, HostVec, Points, VoxelGrid, VoxelMode, Voxels};

use super::descriptors::{VoxelInput, VoxelOutput};
use crate::backend::operations::CudaOperations;
use crate::{Device, Result, Tensor};

impl Device {
    /// Voxelizes point clouds (docs/semantics.md); the output may take at most
    /// `budget_bytes`, checked before anything is allocated.
    ///
    /// ```
    /// use robocache::{Device, Tensor, VoxelGrid, VoxelInput, VoxelMode};
    ///
    /// let device = Device::cpu();
    /// let points = Tensor::from_slice(&device, &[0.1f32, 0.2, 0.3, 9.0, 9.0, 9.0], &[2, 3])?;
    /// let grid = VoxelGrid { origin: [0.0; 3], voxel_size: [0.5; 3], dims: [2, 2, 2] };
    /// let input = VoxelInput { points: &points, features: None, clouds: None };
    /// let out = device.voxelize(&input, &grid, VoxelMode::Occupancy, 1 << 20)?;
    /// assert_eq!(out.grid.to_vec::<u8>()?, [1, 0, 0, 0, 0, 0, 0, 0]);
    /// assert_eq!(out.dropped_count()?, 1);
    /// # Ok::<(), robocache::Error>(())
    /// ```
    pub fn voxelize(
        &self,
        input: &VoxelInput<'_>,
        grid: &VoxelGrid,
        mode: VoxelMode,
        budget_bytes: u64,
    ) -> Result<VoxelOutput> {
        match self {
            Device::Cpu => {
                let feature_len = input.checked_feature_len(self)?;
                let HostSlice::F32(positions) = input.points.host_slice() else { unreachable!("dtype checked") };
                let mut points = Points::new(positions);
                if let Some(features) = input.features {
                    let HostSlice::F32(values) = features.host_slice() else { unreachable!("dtype checked") };
                    points = points.with_features(values, feature_len);
                }
                let cloud_index;
                if let Some((clouds, count)) = input.clouds {
                    cloud_index = cloud_indices(clouds, count)?;
                    points = points.with_clouds(&cloud_index, count);
                }
                let out = robocache_cpu::voxelize(&points, grid, mode, budget_bytes)?;
                let counts_shape = out.shape[..4].to_vec();
                let (values, counts) = match out.voxels {
                    Voxels::Occupancy(v) => (HostVec::U8(v), None),
                    Voxels::Count(v) => (HostVec::U32(v), None),
                    Voxels::Mean { mean, counts } => {
                        (HostVec::F32(mean), Some(Tensor::host(self, HostVec::U32(counts), counts_shape)))
                    }
                    Voxels::Max(v) => (HostVec::F32(v), None),
                };
                Ok(VoxelOutput {
                    grid: Tensor::host(self, values, out.shape),
                    counts,
                    dropped: Tensor::host(self, HostVec::U64(vec![out.dropped]), vec![1]),
                })
            }
            Device::Cuda(cuda) => cuda.voxelize(self, input, grid, mode, budget_bytes),
        }
    }
}

/// A cloud index of any integer dtype as `u32`; values that do not fit are
/// reported as out of range for `clouds`.
fn cloud_indices(tensor: &Tensor, clouds: usize) -> Result<Vec<u32>> {
    let indices = super::integer_values("cloud index", tensor)?
        .into_iter()
        .enumerate()
        .map(|(point, c)| {
            u32::try_from(c).map_err(|_| robocache_cpu::Error::CloudIndex {
                point,
                cloud: u64::try_from(c).unwrap_or(u64::MAX),
                clouds,
            })
        })
        .collect::<Result<Vec<u32>, _>>()?;
    Ok(indices)
}

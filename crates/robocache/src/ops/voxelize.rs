use robocache_cpu::{DType, HostSlice, HostVec, Points, VoxelGrid, VoxelMode, Voxels};

use super::{expect_dtype, expect_rank};
use crate::{Device, Error, Result, Tensor};

/// Points `[N, 3]` f32, optional features `[N, F]` f32, optional cloud index
/// `[N]` (any integer dtype) with the number of clouds.
#[derive(Clone, Copy, Debug)]
pub struct VoxelInput<'a> {
    pub points: &'a Tensor,
    pub features: Option<&'a Tensor>,
    pub clouds: Option<(&'a Tensor, usize)>,
}

/// The grid (`[B, X, Y, Z]`: u8 occupancy or u32 counts; `[B, X, Y, Z, F]`
/// f32 for mean and max), the counts for mean, and the number of dropped
/// points (`[1]` u64, on the device like the grid: reading it with
/// [`VoxelOutput::dropped_count`] is a wait on a GPU, so the call itself never
/// waits).
#[derive(Clone, Debug)]
pub struct VoxelOutput {
    pub grid: Tensor,
    pub counts: Option<Tensor>,
    pub dropped: Tensor,
}

impl VoxelOutput {
    /// The number of points outside the grid or with a non-finite coordinate
    /// (waits for the voxelization on a GPU).
    pub fn dropped_count(&self) -> Result<u64> {
        Ok(self.dropped.to_vec::<u64>()?.first().copied().unwrap_or(0))
    }
}

impl Device {
    /// Voxelizes point clouds (SPEC §3.4); the output may take at most
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
                let feature_len = self.check_voxel_input(input)?;
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

impl Device {
    /// The checks every backend makes of a voxelization's tensors: all on this
    /// device, points `[N, 3]` f32, features `[N, F]` f32, cloud index `[N]`.
    /// Returns `F` (0 without features).
    pub(crate) fn check_voxel_input(&self, input: &VoxelInput<'_>) -> Result<usize> {
        self.expect_same("points", input.points.device())?;
        expect_rank("points", input.points, &[2], "[N, 3]")?;
        if input.points.shape()[1] != 3 {
            return Err(Error::Rank {
                what: "points".into(),
                expected: "[N, 3]".into(),
                shape: input.points.shape().to_vec(),
            });
        }
        expect_dtype("points", input.points, DType::F32)?;
        let feature_len = match input.features {
            Some(features) => {
                self.expect_same("features", features.device())?;
                expect_rank("features", features, &[2], "[N, F]")?;
                expect_dtype("features", features, DType::F32)?;
                features.shape()[1]
            }
            None => 0,
        };
        if let Some((clouds, _)) = input.clouds {
            self.expect_same("cloud index", clouds.device())?;
            expect_rank("cloud index", clouds, &[1], "[N]")?;
        }
        Ok(feature_len)
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

//! Point clouds into dense voxel grids (docs/semantics.md): occupancy, count, mean or
//! max of per-point features, for several clouds in one call, bitwise
//! deterministic.

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;

use crate::{Error, Result};

/// The default limit on the bytes a voxel grid output may take: 1 GiB.
pub const DEFAULT_GRID_BUDGET_BYTES: u64 = 1 << 30;

/// An axis-aligned grid: voxel `(x, y, z)` covers
/// `origin + [x, y, z] · voxel_size` to `origin + [x + 1, y + 1, z + 1] · voxel_size`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VoxelGrid {
    pub origin: [f32; 3],
    /// Edge length per axis, each finite and > 0.
    pub voxel_size: [f32; 3],
    /// `[X, Y, Z]`, each ≥ 1.
    pub dims: [usize; 3],
}

impl VoxelGrid {
    /// Number of voxels of one cloud, `X·Y·Z`, or `None` on overflow.
    pub fn voxel_count(&self) -> Option<usize> {
        self.dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// Checks origin, voxel size and dims.
    pub fn check(&self) -> Result<()> {
        if let Some(axis) = (0..3).find(|&a| !self.origin[a].is_finite()) {
            return Err(Error::BadGrid(format!("origin[{axis}] = {} is not finite", self.origin[axis])));
        }
        if let Some(axis) = (0..3).find(|&a| !(self.voxel_size[a].is_finite() && self.voxel_size[a] > 0.0)) {
            return Err(Error::BadGrid(format!(
                "voxel_size[{axis}] = {} must be finite and > 0",
                self.voxel_size[axis]
            )));
        }
        if let Some(axis) = (0..3).find(|&a| self.dims[a] == 0) {
            return Err(Error::BadGrid(format!("dims[{axis}] is 0; every axis needs at least one voxel")));
        }
        self.voxel_count().map(|_| ()).ok_or_else(|| Error::Overflow("voxel grid dims".into()))
    }

    /// The voxel of a point as `x·Y·Z + y·Z + z`, or `None` when the point is
    /// outside the grid or has a non-finite coordinate.
    ///
    /// Per axis `v = floor((p − origin) / size)` in `f32` with IEEE division,
    /// inside when `0 ≤ v < dim`.
    #[inline]
    pub fn voxel_of(&self, point: [f32; 3]) -> Option<usize> {
        let mut linear = 0usize;
        for axis in 0..3 {
            let v = ((point[axis] - self.origin[axis]) / self.voxel_size[axis]).floor();
            // Compared in f64, exact for every integral f32 and every dim below 2^53;
            // NaN fails both comparisons.
            if !(v >= 0.0 && (v as f64) < self.dims[axis] as f64) {
                return None;
            }
            linear = linear * self.dims[axis] + v as usize;
        }
        Some(linear)
    }
}

/// What each voxel holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VoxelMode {
    /// `u8`: 1 where at least one point fell, else 0.
    Occupancy,
    /// `u32`: the number of points.
    Count,
    /// `f32` per feature: the mean of the points' features (0 when empty), with the counts.
    Mean,
    /// `f32` per feature: the maximum of the points' features (−∞ when empty;
    /// NaN features are ignored, as `fmaxf` does; +0 counts as above −0).
    Max,
}

impl fmt::Display for VoxelMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VoxelMode::Occupancy => "occupancy",
            VoxelMode::Count => "count",
            VoxelMode::Mean => "mean",
            VoxelMode::Max => "max",
        })
    }
}

impl FromStr for VoxelMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "occupancy" => Ok(VoxelMode::Occupancy),
            "count" => Ok(VoxelMode::Count),
            "mean" => Ok(VoxelMode::Mean),
            "max" => Ok(VoxelMode::Max),
            other => Err(format!("unknown voxel mode '{other}' (expected occupancy, count, mean or max)")),
        }
    }
}

/// Points `[N, 3]`, optional features `[N, F]`, and optionally the cloud of
/// each point (for `B` clouds in one call).
#[derive(Clone, Copy, Debug)]
pub struct Points<'a> {
    /// `[N, 3]` row-major.
    pub positions: &'a [f32],
    /// `[N, F]` row-major.
    pub features: Option<&'a [f32]>,
    /// `F`.
    pub feature_len: usize,
    /// `[N]`: the cloud of each point, each `< clouds`.
    pub cloud_of_point: Option<&'a [u32]>,
    /// `B`, the number of clouds (1 when there is no cloud index).
    pub clouds: usize,
}

impl<'a> Points<'a> {
    /// One cloud of `positions.len() / 3` points without features.
    pub fn new(positions: &'a [f32]) -> Self {
        Points { positions, features: None, feature_len: 0, cloud_of_point: None, clouds: 1 }
    }

    /// Attaches `[N, feature_len]` features.
    pub fn with_features(mut self, features: &'a [f32], feature_len: usize) -> Self {
        self.features = Some(features);
        self.feature_len = feature_len;
        self
    }

    /// Attaches the cloud of each point, for `clouds` clouds.
    pub fn with_clouds(mut self, cloud_of_point: &'a [u32], clouds: usize) -> Self {
        self.cloud_of_point = Some(cloud_of_point);
        self.clouds = clouds;
        self
    }

    /// `N`.
    pub fn len(&self) -> usize {
        self.positions.len() / 3
    }

    /// True when there are no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The grid contents by mode.
#[derive(Clone, Debug, PartialEq)]
pub enum Voxels {
    Occupancy(Vec<u8>),
    Count(Vec<u32>),
    Mean { mean: Vec<f32>, counts: Vec<u32> },
    Max(Vec<f32>),
}

/// The output of [`voxelize`].
#[derive(Clone, Debug, PartialEq)]
pub struct Voxelized {
    pub voxels: Voxels,
    /// `[B, X, Y, Z]`, or `[B, X, Y, Z, F]` for mean and max (their counts are `[B, X, Y, Z]`).
    pub shape: Vec<usize>,
    /// Points outside the grid or with a non-finite coordinate.
    pub dropped: u64,
}

/// What a voxelization plan needs of the points: sizes only, no data.
#[derive(Clone, Copy, Debug)]
pub struct PointShapes {
    /// Elements of the positions array (`3 N`).
    pub positions_len: usize,
    /// Elements of the features array (`N F`), if any.
    pub features_len: Option<usize>,
    /// `F`.
    pub feature_len: usize,
    /// Elements of the cloud index (`N`), if any.
    pub clouds_len: Option<usize>,
    /// `B`.
    pub clouds: usize,
}

/// Checks the inputs and returns the number of voxels of all clouds.
pub fn plan_voxelize(points: &Points<'_>, grid: &VoxelGrid, mode: VoxelMode, budget_bytes: u64) -> Result<usize> {
    let shapes = PointShapes {
        positions_len: points.positions.len(),
        features_len: points.features.map(<[f32]>::len),
        feature_len: points.feature_len,
        clouds_len: points.cloud_of_point.map(<[u32]>::len),
        clouds: points.clouds,
    };
    let voxels = plan_voxelize_shapes(&shapes, grid, mode, budget_bytes)?;
    if let Some(clouds) = points.cloud_of_point {
        if let Some((point, &cloud)) = clouds.iter().enumerate().find(|(_, &c)| c as usize >= points.clouds) {
            return Err(Error::CloudIndex { point, cloud: cloud.into(), clouds: points.clouds });
        }
    }
    Ok(voxels)
}

/// [`plan_voxelize`] from sizes alone (the cloud indices' range is a data
/// check, left to the caller), for points that live on a device.
pub fn plan_voxelize_shapes(
    points: &PointShapes,
    grid: &VoxelGrid,
    mode: VoxelMode,
    budget_bytes: u64,
) -> Result<usize> {
    grid.check()?;
    if !points.positions_len.is_multiple_of(3) {
        return Err(Error::ShapeMismatch {
            what: "points".into(),
            shape: vec![points.positions_len / 3, 3],
            expected: points.positions_len / 3 * 3,
            actual: points.positions_len,
        });
    }
    let n = points.positions_len / 3;
    if u32::try_from(n).is_err() {
        return Err(Error::Overflow(format!("{n} points (at most 2^32 - 1, as counts are u32)")));
    }
    if points.clouds == 0 {
        return Err(Error::Empty { what: "clouds (B)".into(), reason: "at least one cloud is needed".into() });
    }
    let needs_features = matches!(mode, VoxelMode::Mean | VoxelMode::Max);
    match (points.features_len, needs_features) {
        (None, true) => {
            return Err(Error::Features { mode: mode.to_string(), reason: "needs per-point features [N, F]".into() })
        }
        (Some(_), false) => {
            return Err(Error::Features {
                mode: mode.to_string(),
                reason: "takes no features (use mean or max to reduce features)".into(),
            })
        }
        (Some(features_len), true) => {
            if points.feature_len == 0 {
                return Err(Error::Empty { what: "features (F)".into(), reason: "F must be at least 1".into() });
            }
            let expected = n.checked_mul(points.feature_len).ok_or_else(|| Error::Overflow("features".into()))?;
            if features_len != expected {
                return Err(Error::ShapeMismatch {
                    what: "features".into(),
                    shape: vec![n, points.feature_len],
                    expected,
                    actual: features_len,
                });
            }
        }
        (None, false) => {}
    }
    if let Some(len) = points.clouds_len {
        if len != n {
            return Err(Error::ShapeMismatch { what: "cloud index".into(), shape: vec![n], expected: n, actual: len });
        }
    }
    let per_cloud = grid.voxel_count().ok_or_else(|| Error::Overflow("voxel grid dims".into()))?;
    let voxels = (points.clouds as u128) * per_cloud as u128;
    let f = points.feature_len as u128;
    let bytes_per_voxel = match mode {
        VoxelMode::Occupancy => 1,
        VoxelMode::Count => 4,
        VoxelMode::Mean => 4 * f + 4,
        VoxelMode::Max => 4 * f,
    };
    let bytes = voxels * bytes_per_voxel;
    if bytes > budget_bytes as u128 {
        return Err(Error::GridTooLarge { bytes, budget: budget_bytes });
    }
    usize::try_from(voxels * f.max(1)).map_err(|_| Error::Overflow("voxel grid".into()))?;
    Ok(voxels as usize)
}

/// Voxelizes `points` into `grid` (docs/semantics.md). The output takes at most
/// `budget_bytes`, checked before anything is allocated.
///
/// ```
/// use robocache_cpu::{voxelize, Points, VoxelGrid, VoxelMode, Voxels, DEFAULT_GRID_BUDGET_BYTES};
///
/// let grid = VoxelGrid { origin: [0.0; 3], voxel_size: [0.5; 3], dims: [2, 2, 2] };
/// let points = [0.1, 0.1, 0.1, 0.2, 0.3, 0.4, 0.9, 0.1, 0.6, 5.0, 0.0, 0.0];
/// let out = voxelize(&Points::new(&points), &grid, VoxelMode::Count, DEFAULT_GRID_BUDGET_BYTES)?;
/// assert_eq!(out.voxels, Voxels::Count(vec![2, 0, 0, 0, 0, 1, 0, 0]));
/// assert_eq!(out.dropped, 1);
/// # Ok::<(), robocache_cpu::Error>(())
/// ```
pub fn voxelize(points: &Points<'_>, grid: &VoxelGrid, mode: VoxelMode, budget_bytes: u64) -> Result<Voxelized> {
    let voxel_total = plan_voxelize(points, grid, mode, budget_bytes)?;
    let per_cloud = voxel_total / points.clouds;
    let mut grid_shape = vec![points.clouds, grid.dims[0], grid.dims[1], grid.dims[2]];

    // The voxel of every point across all clouds, or `usize::MAX` when dropped.
    let keys: Vec<usize> = points
        .positions
        .par_chunks_exact(3)
        .enumerate()
        .map(|(i, p)| {
            let cloud = points.cloud_of_point.map_or(0, |c| c[i] as usize);
            grid.voxel_of([p[0], p[1], p[2]]).map_or(usize::MAX, |v| cloud * per_cloud + v)
        })
        .collect();
    let dropped = keys.iter().filter(|&&k| k == usize::MAX).count() as u64;

    // Counts: integer increments in point order, deterministic.
    let count = || {
        let mut counts = vec![0u32; voxel_total];
        for &key in keys.iter().filter(|&&k| k != usize::MAX) {
            counts[key] += 1;
        }
        counts
    };

    let voxels = match mode {
        VoxelMode::Occupancy => {
            let mut occupancy = vec![0u8; voxel_total];
            for &key in keys.iter().filter(|&&k| k != usize::MAX) {
                occupancy[key] = 1;
            }
            Voxels::Occupancy(occupancy)
        }
        VoxelMode::Count => Voxels::Count(count()),
        VoxelMode::Mean | VoxelMode::Max => {
            let f = points.feature_len;
            let features = points.features.unwrap_or(&[]);
            // Counting sort of the kept points by voxel, stable: each voxel's
            // points end up together in ascending point order, so the
            // reduction order, and with it every bit of the result, is fixed.
            let counts = count();
            let mut ends: Vec<usize> = counts
                .iter()
                .scan(0usize, |total, &c| {
                    *total += c as usize;
                    Some(*total - c as usize)
                })
                .collect();
            let mut order = vec![0u32; keys.len() - dropped as usize];
            for (point, &key) in keys.iter().enumerate().filter(|(_, &k)| k != usize::MAX) {
                order[ends[key]] = point as u32;
                ends[key] += 1;
            }
            let empty = if mode == VoxelMode::Mean { 0.0 } else { f32::NEG_INFINITY };
            let mut values = vec![empty; voxel_total * f];
            values.par_chunks_mut(f).zip(counts.par_iter().zip(ends.par_iter())).with_min_len(1024).for_each(
                |(value, (&count, &end))| {
                    if count > 0 {
                        let members =
                            order[end - count as usize..end].iter().map(|&p| &features[p as usize * f..][..f]);
                        reduce_voxel(mode, members, value);
                    }
                },
            );
            grid_shape.push(f);
            if mode == VoxelMode::Mean {
                Voxels::Mean { mean: values, counts }
            } else {
                Voxels::Max(values)
            }
        }
    };
    Ok(Voxelized { voxels, shape: grid_shape, dropped })
}

/// Writes the mean (summed in `f64` in point order, divided in `f64`, rounded
/// to `f32`) or the max (`fmaxf` semantics) of the features of one voxel's
/// points into `value`.
fn reduce_voxel<'a>(mode: VoxelMode, members: impl Iterator<Item = &'a [f32]>, value: &mut [f32]) {
    if mode == VoxelMode::Mean {
        let mut sum = [0.0f64; 16];
        let mut wide = vec![];
        let sum: &mut [f64] = if value.len() <= 16 {
            &mut sum[..value.len()]
        } else {
            wide.resize(value.len(), 0.0);
            &mut wide
        };
        let mut count = 0u64;
        for feature in members {
            count += 1;
            for (s, &v) in sum.iter_mut().zip(feature) {
                *s += v as f64;
            }
        }
        for (o, &s) in value.iter_mut().zip(sum.iter()) {
            *o = (s / count as f64) as f32;
        }
    } else {
        for feature in members {
            for (m, &v) in value.iter_mut().zip(feature) {
                *m = max_ignoring_nan(*m, v);
            }
        }
    }
}

/// The larger of `m` and `v`, ignoring a NaN `v`, with +0 above −0: the total
/// order of the floats' sign-magnitude bits, which is what an integer
/// `atomicMax` on the order-preserving encoding computes on a GPU.
fn max_ignoring_nan(m: f32, v: f32) -> f32 {
    if v > m || (v == m && v.is_sign_positive() && m.is_sign_negative()) {
        v
    } else {
        m
    }
}

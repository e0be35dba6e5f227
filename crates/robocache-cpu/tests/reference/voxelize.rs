use proptest::prelude::*;
use robocache_cpu::strategies::{voxel_case, VoxelCase};
use robocache_cpu::{voxelize, Points, VoxelGrid, VoxelMode, Voxels, DEFAULT_GRID_BUDGET_BYTES};

/// Per point, in order: the voxel by docs/semantics.md's formula, then count, f64 sum
/// and max per voxel.
struct Oracle {
    counts: Vec<u64>,
    sums: Vec<f64>,
    maxima: Vec<f32>,
    dropped: u64,
}

fn oracle(case: &VoxelCase) -> Oracle {
    let g = &case.grid;
    let per_cloud = g.dims[0] * g.dims[1] * g.dims[2];
    let f = case.feature_len.max(1);
    let total = per_cloud * case.clouds;
    let mut o = Oracle {
        counts: vec![0; total],
        sums: vec![0.0; total * f],
        maxima: vec![f32::NEG_INFINITY; total * f],
        dropped: 0,
    };
    for (i, p) in case.positions.chunks_exact(3).enumerate() {
        let mut v = [0usize; 3];
        let mut inside = true;
        for a in 0..3 {
            let x: f32 = ((p[a] - g.origin[a]) / g.voxel_size[a]).floor();
            if x.is_nan() || x < 0.0 || x >= g.dims[a] as f32 {
                inside = false;
            } else {
                v[a] = x as usize;
            }
        }
        if !inside {
            o.dropped += 1;
            continue;
        }
        let cloud = case.cloud_of_point.as_ref().map_or(0, |c| c[i] as usize);
        let key = cloud * per_cloud + (v[0] * g.dims[1] + v[1]) * g.dims[2] + v[2];
        o.counts[key] += 1;
        if let Some(features) = &case.features {
            for c in 0..case.feature_len {
                let x = features[i * case.feature_len + c];
                o.sums[key * f + c] += x as f64;
                let m = o.maxima[key * f + c];
                if x > m || (x == 0.0 && m == 0.0 && m.is_sign_negative() && x.is_sign_positive()) {
                    o.maxima[key * f + c] = x;
                }
            }
        }
    }
    o
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matches_oracle(case in voxel_case()) {
        let out = voxelize(&case.points(), &case.grid, case.mode, DEFAULT_GRID_BUDGET_BYTES).unwrap();
        let o = oracle(&case);
        prop_assert_eq!(out.dropped, o.dropped);
        let kept: u64 = o.counts.iter().sum();
        prop_assert_eq!(kept + o.dropped, (case.positions.len() / 3) as u64, "counts sum to the points kept");
        match &out.voxels {
            Voxels::Occupancy(v) => {
                let want: Vec<u8> = o.counts.iter().map(|&c| (c > 0) as u8).collect();
                prop_assert_eq!(v, &want);
            }
            Voxels::Count(v) => {
                let want: Vec<u32> = o.counts.iter().map(|&c| c as u32).collect();
                prop_assert_eq!(v, &want);
            }
            Voxels::Mean { mean, counts } => {
                let f = case.feature_len;
                for (i, &m) in mean.iter().enumerate() {
                    let c = o.counts[i / f];
                    let want = if c == 0 { 0.0 } else { (o.sums[i] / c as f64) as f32 };
                    let close = (m.is_nan() && want.is_nan()) || (m - want).abs() <= 1e-6 * want.abs().max(1e-30);
                    prop_assert!(close, "voxel value {i}: {m} vs {want}");
                }
                let want: Vec<u32> = o.counts.iter().map(|&c| c as u32).collect();
                prop_assert_eq!(counts, &want);
            }
            Voxels::Max(v) => {
                // Bitwise, so that +0 and -0 are told apart.
                let bits = |x: &Vec<f32>| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(bits(v), bits(&o.maxima));
            }
        }
        let f = if matches!(case.mode, VoxelMode::Mean | VoxelMode::Max) { vec![case.feature_len] } else { vec![] };
        let mut shape = vec![case.clouds, case.grid.dims[0], case.grid.dims[1], case.grid.dims[2]];
        shape.extend(f);
        prop_assert_eq!(out.shape, shape);
        // Bitwise deterministic.
        let again = voxelize(&case.points(), &case.grid, case.mode, DEFAULT_GRID_BUDGET_BYTES).unwrap();
        prop_assert_eq!(format!("{:?}", again.voxels), format!("{:?}", out.voxels));
    }
}

#[test]
fn per_axis_sizes_and_faces() {
    let grid = VoxelGrid { origin: [-1.0, 0.0, 0.0], voxel_size: [0.5, 1.0, 0.25], dims: [4, 2, 4] };
    // On the lower face of voxel (2, 1, 3); on the upper face of the grid (dropped).
    let points = [0.0, 1.0, 0.75, 1.0, 0.0, 0.0];
    let out = voxelize(&Points::new(&points), &grid, VoxelMode::Occupancy, 1 << 20).unwrap();
    let Voxels::Occupancy(v) = out.voxels else { unreachable!() };
    assert_eq!(v.iter().position(|&x| x == 1), Some((2 * 2 + 1) * 4 + 3));
    assert_eq!(out.dropped, 1);
}

#[test]
fn several_clouds_and_mean_with_counts() {
    let grid = VoxelGrid { origin: [0.0; 3], voxel_size: [1.0; 3], dims: [1, 1, 2] };
    let points = [0.5, 0.5, 0.5, 0.5, 0.5, 0.6, 0.5, 0.5, 1.5];
    let features = [1.0, 10.0, 3.0, 30.0, 5.0, 50.0];
    let clouds = [1, 1, 0];
    let p = Points::new(&points).with_features(&features, 2).with_clouds(&clouds, 2);
    let out = voxelize(&p, &grid, VoxelMode::Mean, 1 << 20).unwrap();
    assert_eq!(out.shape, [2, 1, 1, 2, 2]);
    let Voxels::Mean { mean, counts } = out.voxels else { unreachable!() };
    assert_eq!(counts, [0, 1, 2, 0]);
    assert_eq!(mean, [0.0, 0.0, 5.0, 50.0, 2.0, 20.0, 0.0, 0.0]);
    let out = voxelize(&p, &grid, VoxelMode::Max, 1 << 20).unwrap();
    let ninf = f32::NEG_INFINITY;
    assert_eq!(out.voxels, Voxels::Max(vec![ninf, ninf, 5.0, 50.0, 3.0, 30.0, ninf, ninf]));
}

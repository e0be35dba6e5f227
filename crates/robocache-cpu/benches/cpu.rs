//! Criterion benchmarks of the CPU reference: one module per operation,
//! throughput in bytes moved (inputs read once, outputs written once).

use criterion::{criterion_group, criterion_main, Criterion};

/// Deterministic pseudo-random values in [-1, 1) (xorshift).
fn values(len: usize, seed: u64) -> Vec<f32> {
    robocache_cpu::noise::signed_units(seed, len)
}

/// `len` epoch timestamps at `hz`.
fn times(len: usize, hz: f64) -> Vec<f64> {
    (0..len).map(|i| 1.7e9 + i as f64 / hz).collect()
}

mod resample {
    use criterion::{BenchmarkId, Criterion, Throughput};
    use robocache_cpu::half::bf16;
    use robocache_cpu::{resample, Method, ResampleSpec, Stream, Targets, Times};

    pub fn bench(c: &mut Criterion) {
        let mut group = c.benchmark_group("resample");
        group.sample_size(20);
        for (batch, source, target, channels) in [(32, 500, 250, 256), (256, 500, 250, 256), (256, 500, 250, 14)] {
            let data = super::values(batch * source * channels, 1);
            let data_bf16: Vec<bf16> = data.iter().map(|&v| bf16::from_f32(v)).collect();
            let source_times = super::times(source, 100.0);
            let target_times = super::times(target, 100.0 * (target - 1) as f64 / (source - 1) as f64);
            let label = format!("{batch}x{source}->{target} D={channels}");
            for method in [Method::Linear, Method::Previous] {
                let spec = ResampleSpec::new(method);
                let bytes = (batch * source * channels + batch * target * channels) * 4 + batch * target;
                group.throughput(Throughput::Bytes(bytes as u64));
                let stream = Stream::new(&data[..], [batch, source, channels], Times::Shared(&source_times));
                group.bench_function(BenchmarkId::new(format!("f32 {method}"), &label), |b| {
                    b.iter(|| resample(&stream, &Targets::shared(&target_times), &spec).unwrap())
                });
                group.throughput(Throughput::Bytes(bytes as u64 / 2));
                let stream = Stream::new(&data_bf16[..], [batch, source, channels], Times::Shared(&source_times));
                group.bench_function(BenchmarkId::new(format!("bf16 {method}"), &label), |b| {
                    b.iter(|| resample(&stream, &Targets::shared(&target_times), &spec).unwrap())
                });
            }
        }
        group.finish();
    }
}

mod fusion {
    use criterion::{Criterion, Throughput};
    use robocache_cpu::{fuse, DType, FusionInput, FusionStream, HostSlice, Method, ResampleSpec, Targets, Times};

    pub fn bench(c: &mut Criterion) {
        let mut group = c.benchmark_group("fusion");
        group.sample_size(20);
        let batch = 32;
        let shapes = [(150, 512, 30.0), (500, 14, 100.0), (50, 7, 10.0)];
        let data: Vec<Vec<f32>> =
            shapes.iter().enumerate().map(|(k, (s, d, _))| super::values(batch * s * d, k as u64)).collect();
        let times: Vec<Vec<f64>> = shapes.iter().map(|(s, _, hz)| super::times(*s, *hz)).collect();
        let targets = super::times(250, 50.0);
        let bytes: usize = shapes.iter().map(|(s, d, _)| batch * (s * d + 250 * d) * 4).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function("f32 B=32: 150x512, 500x14, 50x7 -> 250", |b| {
            b.iter(|| {
                let streams = shapes
                    .iter()
                    .zip(&data)
                    .zip(&times)
                    .map(|(((s, d, _), data), times)| FusionStream {
                        data: HostSlice::F32(data),
                        shape: [batch, *s, *d],
                        times: Times::Shared(times),
                        lengths: None,
                        spec: ResampleSpec::new(Method::Linear),
                    })
                    .collect();
                fuse(&FusionInput { streams, targets: Targets::shared(&targets), dtype: DType::F32 }).unwrap()
            })
        });
        group.finish();
    }
}

mod voxelize {
    use criterion::{BenchmarkId, Criterion, Throughput};
    use robocache_cpu::{voxelize, Points, VoxelGrid, VoxelMode};

    pub fn bench(c: &mut Criterion) {
        let mut group = c.benchmark_group("voxelize");
        group.sample_size(10);
        let n = 1_000_000;
        let positions: Vec<f32> = super::values(n * 3, 3).iter().map(|v| (v + 1.0) * 3.2).collect();
        let features = super::values(n * 4, 4);
        let grid = VoxelGrid { origin: [0.0; 3], voxel_size: [0.05; 3], dims: [128; 3] };
        for mode in [VoxelMode::Occupancy, VoxelMode::Count, VoxelMode::Mean, VoxelMode::Max] {
            let points = match mode {
                VoxelMode::Mean | VoxelMode::Max => Points::new(&positions).with_features(&features, 4),
                _ => Points::new(&positions),
            };
            group.throughput(Throughput::Bytes((n * (3 + points.feature_len) * 4) as u64));
            group.bench_function(BenchmarkId::new(mode.to_string(), "1M points 128^3"), |b| {
                b.iter(|| voxelize(&points, &grid, mode, 1 << 30).unwrap())
            });
        }
        group.finish();
    }
}

fn all(c: &mut Criterion) {
    resample::bench(c);
    fusion::bench(c);
    voxelize::bench(c);
}

criterion_group!(benches, all);
criterion_main!(benches);

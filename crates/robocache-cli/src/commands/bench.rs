//! Fixed workloads timed on one backend: median wall time of repeated calls
//! after warm-up, and the bytes each call must move (inputs read once,
//! outputs written once). `benches/cpu_vs_numpy.py` runs the same workloads
//! in NumPy and reports the ratios.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use robocache::{
    DType, Device, FusionStreamInput, Method, ResampleSpec, StreamInput, TargetTimes, Tensor, TimeAxis, VoxelGrid,
    VoxelInput, VoxelMode,
};
use serde::Serialize;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to time instead of the operations.
    #[command(subcommand)]
    target: Option<Target>,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Timed calls per workload (after 2 warm-up calls).
    #[arg(long, default_value_t = 10)]
    repeats: usize,
    /// Only workloads whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, clap::Subcommand)]
enum Target {
    /// The loader: batches per second, resident and streaming modes, every backend.
    Loader(super::bench_loader::Args),
}

/// One workload's result.
#[derive(Debug, Serialize)]
pub struct Measurement {
    pub name: String,
    pub backend: String,
    pub median_us: f64,
    pub min_us: f64,
    pub bytes: u64,
    pub gbytes_per_s: f64,
}

/// Deterministic pseudo-random f32 values in [-1, 1) (xorshift).
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// `len` source times at `hz` starting at an epoch timestamp.
fn times(len: usize, hz: f64) -> Vec<f64> {
    (0..len).map(|i| 1.7e9 + i as f64 / hz).collect()
}

struct Workload {
    name: String,
    bytes: u64,
    run: Box<dyn Fn() -> Result<()>>,
}

fn resample_workload(device: &Device, batch: usize, source: usize, target: usize, channels: usize) -> Result<Workload> {
    let data = Tensor::from_slice(device, &values(batch * source * channels, 1), &[batch, source, channels])?;
    let source_times = Tensor::from_slice(device, &times(source, 100.0), &[source])?;
    // Targets span the source range at the rate that fits T in it.
    let duration = (source - 1) as f64 / 100.0;
    let target_times = Tensor::from_slice(device, &times(target, (target - 1) as f64 / duration), &[target])?;
    let bytes = (batch * source * channels * 4 + source * 8 + target * 8 + batch * target * (channels * 4 + 1)) as u64;
    let device = device.clone();
    Ok(Workload {
        name: format!("resample f32 {batch}x{source}->{target} D={channels}"),
        bytes,
        run: Box::new(move || {
            let stream = StreamInput::new(&data, TimeAxis::Tensor(&source_times));
            let out =
                device.resample(&stream, &TargetTimes::Tensor(&target_times), &ResampleSpec::new(Method::Linear))?;
            std::hint::black_box(out);
            Ok(())
        }),
    })
}

fn fusion_workload(device: &Device, batch: usize, streams: &[(usize, usize, f64)], target: usize) -> Result<Workload> {
    let mut tensors = Vec::new();
    let mut bytes = (target * 8) as u64;
    let mut width = 0;
    for (k, &(source, channels, hz)) in streams.iter().enumerate() {
        let data =
            Tensor::from_slice(device, &values(batch * source * channels, k as u64 + 7), &[batch, source, channels])?;
        let t = Tensor::from_slice(device, &times(source, hz), &[source])?;
        bytes += (batch * source * channels * 4 + source * 8 + batch * target) as u64;
        width += channels;
        tensors.push((data, t));
    }
    bytes += (batch * target * width * 4) as u64;
    let target_times = Tensor::from_slice(device, &times(target, 50.0), &[target])?;
    let shapes: Vec<String> = streams.iter().map(|(s, d, _)| format!("{s}x{d}")).collect();
    let device = device.clone();
    Ok(Workload {
        name: format!("fusion f32 B={batch}: {} -> {target}", shapes.join(", ")),
        bytes,
        run: Box::new(move || {
            let inputs: Vec<_> = tensors
                .iter()
                .map(|(data, t)| FusionStreamInput {
                    stream: StreamInput::new(data, TimeAxis::Tensor(t)),
                    spec: ResampleSpec::new(Method::Linear),
                })
                .collect();
            std::hint::black_box(device.fuse(&inputs, &TargetTimes::Tensor(&target_times), DType::F32)?);
            Ok(())
        }),
    })
}

fn voxel_workload(device: &Device, points: usize, features: usize, mode: VoxelMode) -> Result<Workload> {
    let positions: Vec<f32> = values(points * 3, 3).iter().map(|v| (v + 1.0) * 0.5 * 6.4).collect();
    let position_tensor = Tensor::from_slice(device, &positions, &[points, 3])?;
    let feature_tensor = match features {
        0 => None,
        f => Some(Tensor::from_slice(device, &values(points * f, 5), &[points, f])?),
    };
    let grid = VoxelGrid { origin: [0.0; 3], voxel_size: [0.05; 3], dims: [128; 3] };
    let voxels = 128u64.pow(3);
    let out_bytes = match mode {
        VoxelMode::Occupancy => voxels,
        VoxelMode::Count => 4 * voxels,
        VoxelMode::Mean => (4 * features as u64 + 4) * voxels,
        VoxelMode::Max => 4 * features as u64 * voxels,
    };
    let bytes = (points * (3 + features) * 4) as u64 + out_bytes;
    let device = device.clone();
    Ok(Workload {
        name: format!("voxelize {mode} {points} points 128^3 F={features}"),
        bytes,
        run: Box::new(move || {
            let input = VoxelInput { points: &position_tensor, features: feature_tensor.as_ref(), clouds: None };
            std::hint::black_box(device.voxelize(&input, &grid, mode, 1 << 30)?);
            Ok(())
        }),
    })
}

/// The workloads: SPEC §7's shapes that fit a CPU, in f32 (NumPy has no bf16).
fn workloads(device: &Device, filter: Option<&str>) -> Result<Vec<Workload>> {
    type Make<'a> = Box<dyn Fn() -> Result<Workload> + 'a>;
    let all: Vec<(&str, Make<'_>)> = vec![
        ("resample f32 32x500->250 D=256", Box::new(|| resample_workload(device, 32, 500, 250, 256))),
        ("resample f32 256x500->250 D=256", Box::new(|| resample_workload(device, 256, 500, 250, 256))),
        ("resample f32 256x500->250 D=14", Box::new(|| resample_workload(device, 256, 500, 250, 14))),
        (
            "fusion f32 B=32: 150x512, 500x14, 50x7 -> 250",
            Box::new(|| fusion_workload(device, 32, &[(150, 512, 30.0), (500, 14, 100.0), (50, 7, 10.0)], 250)),
        ),
        (
            "voxelize count 1000000 points 128^3 F=0",
            Box::new(|| voxel_workload(device, 1_000_000, 0, VoxelMode::Count)),
        ),
        ("voxelize mean 1000000 points 128^3 F=4", Box::new(|| voxel_workload(device, 1_000_000, 4, VoxelMode::Mean))),
    ];
    all.into_iter().filter(|(name, _)| filter.is_none_or(|f| name.contains(f))).map(|(_, make)| make()).collect()
}

pub fn run(args: Args) -> Result<()> {
    if let Some(Target::Loader(loader)) = args.target {
        return super::bench_loader::run(loader);
    }
    let device = super::open_device(&args.backend)?;
    let backend = device.to_string();
    println!("backend: {backend}");
    println!("{:<48} {:>12} {:>12} {:>10}", "workload", "median µs", "min µs", "GB/s");
    let mut results = Vec::new();
    for workload in workloads(&device, args.filter.as_deref())? {
        for _ in 0..2 {
            (workload.run)()?;
        }
        let mut samples: Vec<f64> = (0..args.repeats.max(1))
            .map(|_| {
                let start = Instant::now();
                (workload.run)().map(|()| start.elapsed().as_secs_f64() * 1e6)
            })
            .collect::<Result<_>>()?;
        samples.sort_by(f64::total_cmp);
        let median_us = samples[samples.len() / 2];
        let gbytes_per_s = workload.bytes as f64 / median_us / 1e3;
        println!("{:<48} {median_us:>12.1} {:>12.1} {gbytes_per_s:>10.2}", workload.name, samples[0]);
        results.push(Measurement {
            name: workload.name,
            backend: backend.clone(),
            median_us,
            min_us: samples[0],
            bytes: workload.bytes,
            gbytes_per_s,
        });
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&results)?)?;
    }
    Ok(())
}

//! The workloads: docs/performance.md's shapes and the sweeps over batch size and
//! channel count (bf16 on a GPU), or the CPU set (f32, the shapes NumPy is
//! compared on). Inputs are deterministic (a seeded xorshift), so every run
//! times the same numbers, and each workload knows the bytes it must move at
//! least: every input it has to read once and every output written once.

use anyhow::Result;
use robocache::half::bf16;
use robocache::{
    DType, Device, FusionStreamInput, HostVec, Method, ResampleSpec, StreamInput, TargetTimes, Tensor, TimeAxis,
    VoxelGrid, VoxelInput, VoxelMode,
};
use serde::Serialize;

/// Which table and plot a workload belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// A docs/performance.md workload, with its target.
    Spec,
    /// Resample 500→250 at D=256 over the batch size.
    BatchSweep,
    /// Resample 500→250 at B=64 over the channel count.
    ChannelSweep,
    /// The least a call can take on a cold cache: a 16-byte device copy and
    /// the smallest resample.
    Latency,
}

/// One set of inputs, by name (the names the baseline script reads).
pub type Inputs = Vec<(String, Tensor)>;

/// Makes a workload's inputs on a device.
pub type MakeInputs = Box<dyn Fn(&Device) -> Result<Inputs>>;

/// Runs a workload once on a set of inputs, returning its outputs.
pub type Call = Box<dyn Fn(&Device, &Inputs) -> Result<Inputs>>;

/// A workload: how to make its inputs, how to run it, what it must move.
pub struct Workload {
    /// Unique, stable, file-name safe.
    pub id: String,
    pub name: String,
    pub group: Group,
    /// `resample`, `fusion`, `voxel_count`, `voxel_mean` or `copy`.
    pub kind: &'static str,
    /// The docs/performance.md target, in µs.
    pub target_us: Option<f64>,
    /// The x value of the sweep it belongs to (B or D).
    pub sweep_x: Option<usize>,
    /// Minimum bytes read and written by one call.
    pub bytes: u64,
    /// The parameters the baseline needs beyond the arrays (JSON).
    pub params: serde_json::Value,
    pub make_inputs: MakeInputs,
    pub call: Call,
}

/// Deterministic pseudo-random values in [-1, 1) (xorshift).
pub fn values(len: usize, seed: u64) -> Vec<f32> {
    robocache::noise::signed_units(seed, len)
}

fn tensor_of(device: &Device, dtype: DType, values: Vec<f32>, shape: &[usize]) -> Result<Tensor> {
    let host = match dtype {
        DType::BF16 => HostVec::BF16(values.into_iter().map(bf16::from_f32).collect()),
        _ => HostVec::F32(values),
    };
    Ok(Tensor::from_host_vec(device, host, shape)?)
}

/// Per-row irregular times: row `b` starts at an epoch timestamp plus `b`
/// seconds, sample `i` at `(i + jitter) / hz` with jitter in [0, 0.5), so
/// every row is strictly increasing and different.
fn row_times(batch: usize, len: usize, hz: f64, seed: u64) -> Vec<f64> {
    let jitter = values(batch * len, seed);
    (0..batch * len)
        .map(|k| {
            let (b, i) = (k / len, k % len);
            1.7e9 + b as f64 + (i as f64 + 0.25 * (f64::from(jitter[k]) + 1.0)) / hz
        })
        .collect()
}

/// Targets per row: `len` times at `hz` from slightly before the row's first
/// sample (so a few targets fall outside and take the boundary rule).
fn row_targets(batch: usize, len: usize, hz: f64) -> Vec<f64> {
    (0..batch * len).map(|k| 1.7e9 + (k / len) as f64 - 0.01 + (k % len) as f64 / hz).collect()
}

fn trusted_linear() -> ResampleSpec {
    // Inputs are generated increasing; the harness times the kernels, not the
    // data check (which `robocache resample` and untrusted calls run first).
    let mut spec = ResampleSpec::new(Method::Linear);
    spec.trusted = true;
    spec
}

/// Resample `batch × source → target` of `channels` channels; the source
/// spans `source / 100` seconds at 100 Hz and the targets the same span.
pub fn resample(dtype: DType, batch: usize, source: usize, target: usize, channels: usize) -> Workload {
    let size = dtype.size_in_bytes() as u64;
    let (b, s, t, d) = (batch as u64, source as u64, target as u64, channels as u64);
    // Every source row neighbours some target when T ≥ S/2; else about 2T rows.
    let rows_read = s.min(2 * t);
    let bytes = b * rows_read * d * size + b * s * 8 + b * t * 8 + b * t * d * size + b * t;
    let target_hz = 100.0 * (target as f64) / (source as f64);
    Workload {
        id: format!("resample_{dtype}_{batch}x{source}to{target}_d{channels}"),
        name: format!("resample {dtype} {batch}×{source}→{target}, D={channels}"),
        group: Group::Spec,
        kind: "resample",
        target_us: None,
        sweep_x: None,
        bytes,
        params: serde_json::json!({"batch": batch, "source": source, "target": target, "channels": channels}),
        make_inputs: Box::new(move |device| {
            Ok(vec![
                (
                    "x".into(),
                    tensor_of(device, dtype, values(batch * source * channels, 1), &[batch, source, channels])?,
                ),
                (
                    "source_times".into(),
                    Tensor::from_slice(device, &row_times(batch, source, 100.0, 2), &[batch, source])?,
                ),
                (
                    "target_times".into(),
                    Tensor::from_slice(device, &row_targets(batch, target, target_hz), &[batch, target])?,
                ),
            ])
        }),
        call: Box::new(|device, inputs| {
            let stream = StreamInput::new(&inputs[0].1, TimeAxis::Tensor(&inputs[1].1));
            let out = device.resample(&stream, &TargetTimes::Tensor(&inputs[2].1), &trusted_linear())?;
            Ok(vec![("out".into(), out.data), ("valid".into(), out.valid)])
        }),
    }
}

/// Fusion of streams `(samples, channels, hz)` onto `target` times at 50 Hz
/// (the streams span about the same seconds).
pub fn fusion(dtype: DType, batch: usize, streams: &[(usize, usize, f64)], target: usize) -> Workload {
    let size = dtype.size_in_bytes() as u64;
    let (b, t) = (batch as u64, target as u64);
    let mut bytes = b * t * 8;
    let mut width = 0;
    for &(s, d, _) in streams {
        let (s, d) = (s as u64, d as u64);
        bytes += b * s.min(2 * t) * d * size + b * s * 8 + b * t;
        width += d;
    }
    bytes += b * t * width * size;
    let shapes: Vec<String> = streams.iter().map(|(s, d, _)| format!("{s}×{d}")).collect();
    let id_shapes: Vec<String> = streams.iter().map(|(s, d, _)| format!("{s}x{d}")).collect();
    let streams = streams.to_vec();
    let stream_params: Vec<_> =
        streams.iter().map(|&(s, d, hz)| serde_json::json!({"samples": s, "channels": d, "hz": hz})).collect();
    let target_hz = 50.0;
    Workload {
        id: format!("fusion_{dtype}_b{batch}_{}_to{target}", id_shapes.join("_")),
        name: format!("fusion {dtype} B={batch}: {} → {target}", shapes.join(", ")),
        group: Group::Spec,
        kind: "fusion",
        target_us: None,
        sweep_x: None,
        bytes,
        params: serde_json::json!({"batch": batch, "target": target, "streams": stream_params}),
        make_inputs: Box::new(move |device| {
            let mut inputs = Vec::new();
            for (k, &(s, d, hz)) in streams.iter().enumerate() {
                inputs.push((
                    format!("x{k}"),
                    tensor_of(device, dtype, values(batch * s * d, 10 + k as u64), &[batch, s, d])?,
                ));
                inputs.push((
                    format!("times{k}"),
                    Tensor::from_slice(device, &row_times(batch, s, hz, 20 + k as u64), &[batch, s])?,
                ));
            }
            inputs.push((
                "target_times".into(),
                Tensor::from_slice(device, &row_targets(batch, target, target_hz), &[batch, target])?,
            ));
            Ok(inputs)
        }),
        call: Box::new(move |device, inputs| {
            let count = (inputs.len() - 1) / 2;
            let streams: Vec<_> = (0..count)
                .map(|k| FusionStreamInput {
                    stream: StreamInput::new(&inputs[2 * k].1, TimeAxis::Tensor(&inputs[2 * k + 1].1)),
                    spec: trusted_linear(),
                })
                .collect();
            let out = device.fuse(&streams, &TargetTimes::Tensor(&inputs[2 * count].1), dtype)?;
            Ok(vec![("out".into(), out.data), ("valid".into(), out.valid)])
        }),
    }
}

/// The voxel grid of the voxel workloads: 128³ voxels of 5 cm from the origin.
pub const GRID: VoxelGrid = VoxelGrid { origin: [0.0; 3], voxel_size: [0.05; 3], dims: [128; 3] };

/// `points` points uniform inside the grid (none dropped), with `features`
/// features each (mean) or none (count).
pub fn voxel(points: usize, features: usize, mode: VoxelMode) -> Workload {
    let voxels = 128u64.pow(3);
    let n = points as u64;
    let bytes = match mode {
        VoxelMode::Mean => n * 12 + n * 4 * features as u64 + 4 * voxels * (features as u64 + 1),
        VoxelMode::Occupancy => n * 12 + voxels,
        _ => n * 12 + 4 * voxels * features.max(1) as u64,
    };
    let kind = if mode == VoxelMode::Mean { "voxel_mean" } else { "voxel_count" };
    Workload {
        id: format!("voxel_{mode}_{points}_f{features}"),
        name: format!("voxelize {mode} {points} points 128³ F={features}"),
        group: Group::Spec,
        kind,
        target_us: None,
        sweep_x: None,
        bytes,
        params: serde_json::json!({
            "points": points, "features": features, "origin": GRID.origin, "voxel_size": GRID.voxel_size,
            "dims": GRID.dims,
        }),
        make_inputs: Box::new(move |device| {
            let span = 128.0 * 0.05;
            let positions: Vec<f32> = values(points * 3, 3).iter().map(|v| (v + 1.0) * 0.5 * span).collect();
            let mut inputs = vec![("points".to_string(), Tensor::from_slice(device, &positions, &[points, 3])?)];
            if features > 0 {
                inputs.push((
                    "features".into(),
                    Tensor::from_slice(device, &values(points * features, 5), &[points, features])?,
                ));
            }
            Ok(inputs)
        }),
        call: Box::new(move |device, inputs| {
            let input = VoxelInput { points: &inputs[0].1, features: inputs.get(1).map(|(_, t)| t), clouds: None };
            let out = device.voxelize(&input, &GRID, mode, 1 << 32)?;
            let mut outputs = vec![("grid".to_string(), out.grid)];
            if let Some(counts) = out.counts {
                outputs.push(("counts".into(), counts));
            }
            Ok(outputs)
        }),
    }
}

fn spec(mut workload: Workload, target_us: f64) -> Workload {
    workload.target_us = Some(target_us);
    workload
}

fn sweep(mut workload: Workload, group: Group, x: usize) -> Workload {
    workload.group = group;
    workload.sweep_x = Some(x);
    workload
}

/// docs/performance.md's workloads with their targets, then the sweeps (GPU set).
pub fn gpu_workloads() -> Vec<Workload> {
    let bf = DType::BF16;
    let mut all = vec![
        spec(resample(bf, 32, 500, 250, 256), 6.0),
        spec(resample(bf, 256, 500, 250, 256), 40.0),
        spec(resample(bf, 1024, 1000, 500, 512), 520.0),
        spec(fusion(bf, 4, &[(30, 512, 30.0), (100, 64, 100.0), (200, 12, 200.0)], 50), 6.0),
        spec(fusion(bf, 32, &[(150, 512, 30.0), (500, 14, 100.0), (50, 7, 10.0)], 250), 12.0),
        spec(fusion(bf, 256, &[(100, 512, 20.0), (200, 128, 40.0), (300, 64, 60.0)], 128), 40.0),
        spec(voxel(1_000_000, 0, VoxelMode::Count), 25.0),
        spec(voxel(1_000_000, 4, VoxelMode::Mean), 80.0),
    ];
    for batch in [1, 4, 16, 64, 256, 1024] {
        all.push(sweep(resample(bf, batch, 500, 250, 256), Group::BatchSweep, batch));
    }
    for channels in [7, 32, 128, 512, 2048] {
        all.push(sweep(resample(bf, 64, 500, 250, channels), Group::ChannelSweep, channels));
    }
    all.push(copy(16));
    all.push(Workload { group: Group::Latency, ..resample(bf, 1, 2, 1, 8) });
    all
}

/// A device-to-device copy of `bytes` bytes (one allocation, one copy):
/// with a tiny size, what any call costs on a cold cache.
fn copy(bytes: usize) -> Workload {
    Workload {
        id: format!("copy_{bytes}b"),
        name: format!("device copy of {bytes} bytes"),
        group: Group::Latency,
        kind: "copy",
        target_us: None,
        sweep_x: None,
        bytes: 2 * bytes as u64,
        params: serde_json::json!({"bytes": bytes}),
        make_inputs: Box::new(move |device| {
            let data: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
            Ok(vec![("x".into(), Tensor::from_slice(device, &data, &[bytes])?)])
        }),
        call: Box::new(|_, inputs| Ok(vec![("out".into(), inputs[0].1.duplicate()?)])),
    }
}

/// The CPU set: the shapes `benches/cpu_vs_numpy.py` times in NumPy (f32).
pub fn cpu_workloads() -> Vec<Workload> {
    let f = DType::F32;
    let mut all = vec![
        resample(f, 32, 500, 250, 256),
        resample(f, 256, 500, 250, 256),
        resample(f, 256, 500, 250, 14),
        fusion(f, 32, &[(150, 512, 30.0), (500, 14, 100.0), (50, 7, 10.0)], 250),
        voxel(1_000_000, 0, VoxelMode::Count),
        voxel(1_000_000, 4, VoxelMode::Mean),
    ];
    for w in &mut all {
        // The names benches/cpu_vs_numpy.py matches on.
        w.name = w.name.replace('×', "x").replace('→', "->").replace(", D=", " D=").replace('³', "^3");
    }
    all
}

//! `robocache demo`: the loader end to end. Makes a small multi-rate
//! dataset in the RoboMimic layout (or takes a file), loads batches of time
//! windows on the best backend available with a simulated training step,
//! and prints throughput, the data-stall fraction and a sample batch.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use robocache::datasets::synthetic::{write_robomimic, SyntheticSpec};
use robocache::datasets::{Dataset, OpenOptions, TimeWindowSpec};
use robocache::{Loader, LoaderConfig, WindowSpec};

use super::{open_device, print_out};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A dataset file (RoboMimic, CALVIN or RT-X layout) or an RLDS builder
    /// directory; default: a synthetic multi-rate RoboMimic file written to a
    /// temporary folder.
    #[arg(long)]
    file: Option<PathBuf>,
    #[command(flatten)]
    open: super::remote::OpenArgs,
    /// Streams to load, comma-separated (default: every low-dimensional
    /// stream; add `obs/agentview_image` to stream the synthetic camera too).
    #[arg(long, value_delimiter = ',')]
    streams: Vec<String>,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Windows per batch.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Policy clock in Hz.
    #[arg(long, default_value_t = 50.0)]
    hz: f64,
    /// Targets before the anchor.
    #[arg(long, default_value_t = 2)]
    history: usize,
    /// Targets from the anchor on.
    #[arg(long, default_value_t = 14)]
    horizon: usize,
    /// Batches to time.
    #[arg(long, default_value_t = 100)]
    batches: usize,
    /// Simulated training step per batch, in milliseconds (the consumer's time).
    #[arg(long, default_value_t = 2.0)]
    step_ms: f64,
    /// Demos in the synthetic dataset.
    #[arg(long, default_value_t = 64)]
    episodes: usize,
    /// Threads assembling batches (more help when images are streamed:
    /// reads of uncompressed datasets run in parallel).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Read every dataset through the HDF5 library (one thread at a time)
    /// rather than with parallel positioned reads (for comparison).
    #[arg(long)]
    hdf5_reads_only: bool,
    /// Batches assembled ahead of the consumer.
    #[arg(long, default_value_t = 4)]
    prefetch: usize,
    /// Seed of the synthetic dataset and the shuffles.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let device = open_device(&args.backend)?;
    let scratch = tempfile::tempdir().context("cannot make a temporary folder")?;
    let path = match &args.file {
        Some(path) => path.clone(),
        None => {
            let path = scratch.path().join("robocache-demo.hdf5");
            let spec = SyntheticSpec { episodes: args.episodes, seed: args.seed, ..Default::default() };
            let started = Instant::now();
            write_robomimic(&path, &spec)?;
            tracing::info!(
                "wrote a synthetic dataset: {} demos at 20 Hz (actions, pose, gripper), joints at 100 Hz, a 64x64 camera at 30 Hz ({:.1} MB, {:.2} s)",
                spec.episodes,
                std::fs::metadata(&path).map(|m| m.len() as f64 / 1e6).unwrap_or(0.0),
                started.elapsed().as_secs_f64()
            );
            path
        }
    };
    let dataset = Arc::new(Dataset::open_with(
        &path,
        &OpenOptions { cache_bytes: 256 << 20, hdf5_reads_only: args.hdf5_reads_only, ..args.open.options()? },
    )?);
    let streams: Vec<String> = if args.streams.is_empty() {
        dataset.episode(0)?.streams.iter().filter(|s| !s.is_image()).map(|s| s.name.clone()).collect()
    } else {
        args.streams.clone()
    };
    let names: Vec<&str> = streams.iter().map(String::as_str).collect();
    let windows =
        WindowSpec::Times(TimeWindowSpec { hz: args.hz, history: args.history, horizon: args.horizon, causal: false });
    let config = LoaderConfig {
        seed: args.seed,
        workers: args.workers.max(1),
        prefetch: args.prefetch.max(1),
        ..LoaderConfig::new(&names, windows, args.batch)
    };
    let setup = Instant::now();
    let loader = Loader::new(&device, dataset.clone(), config)?;
    let setup_s = setup.elapsed().as_secs_f64();

    // Warm up (module load, first reads), then time `batches` batches with a
    // simulated training step between them.
    let step = Duration::from_secs_f64(args.step_ms.max(0.0) / 1e3);
    let mut sample = None;
    let mut delivered = 0;
    let mut epoch = 0;
    let mut warm = false;
    'outer: loop {
        for batch in loader.epoch(epoch) {
            let batch = batch?;
            if !warm {
                warm = true;
                sample = Some(batch);
                loader.reset_telemetry();
                continue;
            }
            std::thread::sleep(step);
            delivered += 1;
            if delivered >= args.batches {
                break 'outer;
            }
        }
        epoch += 1;
        if loader.samples_per_epoch() == 0 {
            break;
        }
    }
    let report = loader.telemetry();
    if args.json {
        let json = serde_json::json!({
            "device": device.to_string(),
            "file": path.display().to_string(),
            "streams": streams,
            "batch": args.batch,
            "window_steps": args.history + args.horizon,
            "windows_per_epoch": loader.windows(),
            "resident_bytes": loader.resident_bytes(),
            "setup_s": setup_s,
            "step_ms": args.step_ms,
            "workers": args.workers.max(1),
            "prefetch": args.prefetch.max(1),
            "telemetry": report,
        });
        return print_out(&format!("{}\n", serde_json::to_string_pretty(&json)?));
    }
    let info = dataset.info();
    let mut out = String::new();
    use std::fmt::Write;
    let _ = writeln!(out, "robocache demo on {device}");
    let _ = writeln!(
        out,
        "dataset: {} ({} layout, {} episodes, {} steps at {} Hz)",
        // RLDS: the dataset's name, not its version folder.
        info.metadata
            .get("dataset_name")
            .and_then(|n| n.as_str())
            .map(str::to_owned)
            .or_else(|| path.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default(),
        info.format,
        info.episodes.len(),
        info.total_steps(),
        info.rate_hz
    );
    let _ = writeln!(
        out,
        "loader: {} windows of {} targets at {} Hz, batches of {}, {} streams, {} workers ({:.1} MB resident on the device, set up in {:.2} s)",
        loader.windows(),
        args.history + args.horizon,
        args.hz,
        args.batch,
        streams.len(),
        args.workers.max(1),
        loader.resident_bytes() as f64 / 1e6,
        setup_s
    );
    let _ = writeln!(
        out,
        "timed {} batches with a {:.1} ms training step: {:.0} batches/s, {:.0} windows/s; waited {:.3} ms per batch (p99 {:.3} ms); data stall {:.2}% of the loop",
        report.batches,
        args.step_ms,
        report.batches_per_s,
        report.samples_per_s,
        report.wait_mean_ms,
        report.wait_p99_ms,
        report.stall_fraction * 100.0
    );
    let _ = match (report.gpu_utilization_percent, &report.gpu_utilization_note) {
        (Some(percent), _) => writeln!(out, "GPU utilization (NVML) while loading: {percent:.1}%"),
        (None, Some(note)) => writeln!(out, "GPU utilization: not sampled ({note})"),
        (None, None) => Ok(()),
    };
    if let Some(batch) = sample {
        let _ = writeln!(
            out,
            "\nsample batch (episodes {:?}..., anchors {:.3?} s...):",
            &batch.episodes[..batch.episodes.len().min(4)],
            &batch.anchors[..batch.anchors.len().min(4)]
        );
        for stream in &batch.streams {
            let valid = stream.mask.to_vec::<bool>()?; // the loader's default: MaskKind::Valid
            let inside = valid.iter().filter(|&&v| v).count();
            let _ = writeln!(
                out,
                "  {:<28} {:<5} {:<22} {:>5.1}% of targets inside the stream",
                stream.name,
                stream.data.dtype().name(),
                format!("{:?}", stream.data.shape()),
                100.0 * inside as f64 / valid.len().max(1) as f64
            );
        }
        if let Some(first) = batch.streams.iter().find(|s| s.data.dtype() == robocache::DType::F32) {
            let values = first.data.to_vec::<f32>()?;
            let width: usize = first.data.shape()[2..].iter().product();
            for (k, row) in values.chunks(width.max(1)).take(3).enumerate() {
                let _ = writeln!(out, "  {}[0, {k}] = {row:.4?}", first.name);
            }
        }
    }
    print_out(&out)
}

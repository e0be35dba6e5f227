//! `robocache bench loader`: batches per second of the loader, GPU-resident
//! and streaming modes, on every backend available, with no training step
//! (the loader alone). `benches/robomimic_loader.py` times robomimic's
//! `SequenceDataset` + PyTorch `DataLoader` on the same file and options and
//! prints the ratio.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use robocache::datasets::synthetic::{write_robomimic, SyntheticSpec};
use robocache::datasets::{Dataset, OpenOptions, StepWindowSpec};
use robocache::{Device, Loader, LoaderConfig, LoaderMode, WindowSpec};
use serde::Serialize;

use super::super::print_out;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A RoboMimic-layout file (default: a synthetic one, written here as `--keep` says).
    #[arg(long)]
    file: Option<PathBuf>,
    /// Write the synthetic file here and keep it (for the robomimic script).
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Streams (default: the low-dimensional streams robomimic's SequenceDataset reads).
    #[arg(long, value_delimiter = ',')]
    streams: Vec<String>,
    /// Windows per batch.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// robomimic seq_length (step windows, padded at the end as robomimic does).
    #[arg(long, default_value_t = 16)]
    seq_length: usize,
    /// Timed batches per configuration (after 3 warm-up batches).
    #[arg(long, default_value_t = 200)]
    batches: usize,
    /// Backends: auto (every one available), cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Demos in the synthetic dataset.
    #[arg(long, default_value_t = 200)]
    episodes: usize,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The streams robomimic's SequenceDataset reads in `benches/robomimic_loader.py`.
pub const ROBOMIMIC_STREAMS: [&str; 6] =
    ["actions", "rewards", "dones", "obs/robot0_eef_pos", "obs/robot0_eef_quat", "obs/gripper_closed"];

#[derive(Debug, Serialize)]
struct Measurement {
    backend: String,
    mode: &'static str,
    batches: usize,
    batch: usize,
    seconds: f64,
    batches_per_s: f64,
    windows_per_s: f64,
    ms_per_batch: f64,
}

pub fn run(args: Args) -> Result<()> {
    let scratch = tempfile::tempdir().context("cannot make a temporary folder")?;
    let path = match (&args.file, &args.keep) {
        (Some(path), _) => path.clone(),
        (None, keep) => {
            let path = keep.clone().unwrap_or_else(|| scratch.path().join("bench-loader.hdf5"));
            write_robomimic(&path, &SyntheticSpec { episodes: args.episodes, image: None, ..Default::default() })?;
            path
        }
    };
    let dataset = Arc::new(Dataset::open_with(&path, &OpenOptions { cache_bytes: 1 << 30, ..Default::default() })?);
    let streams: Vec<String> = if args.streams.is_empty() {
        ROBOMIMIC_STREAMS.iter().map(|s| (*s).to_owned()).collect()
    } else {
        args.streams.clone()
    };
    let names: Vec<&str> = streams.iter().map(String::as_str).collect();
    let devices: Vec<Device> = match args.backend.as_str() {
        "auto" => std::iter::once(Device::Cpu).chain(Device::cuda(0).ok()).collect(),
        other => vec![super::super::open_device(other)?],
    };
    let windows = WindowSpec::Steps(StepWindowSpec { seq_length: args.seq_length, ..Default::default() });
    let mut results = Vec::new();
    for device in &devices {
        for (mode, label) in [(LoaderMode::Auto, "resident"), (LoaderMode::Streaming, "streaming")] {
            let config = LoaderConfig { mode, ..LoaderConfig::new(&names, windows.clone(), args.batch) };
            let loader = Loader::new(device, dataset.clone(), config)?;
            let seconds = loader.time_batches(args.batches)?.as_secs_f64();
            let timed = args.batches;
            results.push(Measurement {
                backend: device.to_string(),
                mode: label,
                batches: timed,
                batch: args.batch,
                seconds,
                batches_per_s: timed as f64 / seconds,
                windows_per_s: (timed * args.batch) as f64 / seconds,
                ms_per_batch: seconds * 1e3 / timed as f64,
            });
        }
    }
    let mut out = format!(
        "loader on {} ({} demos, {} step windows of seq_length {}, batch {}; streams {})\n{:<60} {:<10} {:>12} {:>14} {:>10}\n",
        path.display(),
        dataset.len(),
        Loader::new(&Device::Cpu, dataset.clone(), LoaderConfig::new(&names, windows, args.batch))?.windows(),
        args.seq_length,
        args.batch,
        names.join(","),
        "backend",
        "mode",
        "batches/s",
        "windows/s",
        "ms/batch"
    );
    for r in &results {
        out.push_str(&format!(
            "{:<60} {:<10} {:>12.1} {:>14.0} {:>10.3}\n",
            r.backend, r.mode, r.batches_per_s, r.windows_per_s, r.ms_per_batch
        ));
    }
    if let Some(json) = &args.json {
        std::fs::write(json, serde_json::to_string_pretty(&results)?)
            .with_context(|| format!("cannot write {}", json.display()))?;
    }
    print_out(&out)
}

//! `robocache augment-preview DATASET --preset act --out grid.png`: a grid
//! of a few camera frames under their sampled augmentations (columns: the
//! frame, its evaluation transform, then draws), to look at before a long
//! run.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use robocache::augment::AugmentConfig;
use robocache::augment_preview::{preview_grid, PreviewRequest};
use robocache::datasets::Dataset;
use robocache::{FrameOutput, FrameResize};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The dataset (any format `inspect` reads; local or a URL).
    dataset: PathBuf,
    /// A preset: lerobot, act, openpi, groot, diffusion_policy.
    #[arg(long, conflicts_with = "config")]
    preset: Option<String>,
    /// A JSON file with the config as Python's `augment=` takes it (LeRobot's
    /// ImageTransformsConfig as a dict, with an optional "crop"; or
    /// {"default": ..., "cameras": {...}}).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The camera stream (default: the dataset's first).
    #[arg(long)]
    camera: Option<String>,
    /// Frames (rows), spread over the dataset.
    #[arg(long, default_value_t = 4)]
    samples: usize,
    /// Augmentations drawn per frame (columns after the frame and its evaluation transform).
    #[arg(long, default_value_t = 5)]
    draws: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Resize frames to HEIGHTxWIDTH first, as a loader's frame_size does.
    #[arg(long, value_parser = size)]
    frame_size: Option<(usize, usize)>,
    /// The PNG to write.
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    open: super::remote::OpenArgs,
}

fn size(text: &str) -> Result<(usize, usize), String> {
    let (h, w) = text.split_once('x').ok_or_else(|| format!("'{text}' is not HEIGHTxWIDTH"))?;
    match (h.trim().parse(), w.trim().parse()) {
        (Ok(h), Ok(w)) if h > 0 && w > 0 => Ok((h, w)),
        _ => Err(format!("'{text}' is not HEIGHTxWIDTH in pixels")),
    }
}

pub fn run(args: Args) -> Result<()> {
    let options = args.open.options()?;
    let dataset = Arc::new(Dataset::open_with(&args.dataset, &options)?);
    let cameras: Vec<String> =
        dataset.info().episodes.first().map(|e| e.streams.iter().map(|s| s.name.clone()).collect()).unwrap_or_default();
    let names: Vec<&str> = cameras.iter().map(String::as_str).collect();
    let value = match (&args.preset, &args.config) {
        (Some(preset), None) => serde_json::Value::String(preset.clone()),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?
        }
        _ => anyhow::bail!("give --preset NAME or --config FILE.json"),
    };
    let config = AugmentConfig::from_json(&value, &names).map_err(robocache::Error::from)?;
    let frames = FrameOutput { resize: args.frame_size.map(|(h, w)| FrameResize::to(w, h)), ..FrameOutput::default() };
    let request = PreviewRequest {
        camera: args.camera.clone(),
        samples: args.samples,
        draws: args.draws,
        seed: args.seed,
        frames,
    };
    let grid = preview_grid(dataset, &config, &request)?;
    grid.save_png(&args.out)?;
    super::print_out(&format!(
        "{}: camera `{}`, {} frames x (frame, evaluation, {} draws), {}x{} pixels\n",
        args.out.display(),
        grid.camera,
        args.samples,
        args.draws,
        grid.width,
        grid.height
    ))
}

//! `robocache bench write-rlds DIR`: a synthetic RLDS builder directory in
//! TFDS's format (JPEG camera, 8-D state, 7-D action, language), of the
//! size a benchmark asks for, without TensorFlow (`benches/remote_read.py`
//! serves it from an S3-compatible server).

use std::path::PathBuf;

use anyhow::{Context, Result};
use robocache::datasets::synthetic::{write_rlds, RldsSpec};

use super::super::print_out;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where `<name>/1.0.0/` is written.
    dir: PathBuf,
    /// Episodes (one TFRecord record each).
    #[arg(long, default_value_t = 64)]
    episodes: usize,
    /// Mean steps per episode (each varies by up to ±25%).
    #[arg(long, default_value_t = 100)]
    steps: usize,
    /// Shards of the `train` split.
    #[arg(long, default_value_t = 4)]
    shards: usize,
    /// The camera's size, `HxW` (`0` for no camera).
    #[arg(long, default_value = "64x64")]
    image: String,
    /// The dataset's name.
    #[arg(long, default_value = "robocache_synthetic_rlds")]
    name: String,
}

pub fn run(args: Args) -> Result<()> {
    let image = match args.image.as_str() {
        "0" => None,
        text => {
            let (h, w) = text.split_once('x').context("--image: write HxW, e.g. 128x128, or 0")?;
            Some([h.trim().parse().context("--image height")?, w.trim().parse().context("--image width")?])
        }
    };
    let spec = RldsSpec {
        name: args.name,
        episodes: args.episodes,
        mean_steps: args.steps,
        shards: args.shards,
        image,
        ..RldsSpec::default()
    };
    let version = write_rlds(&args.dir, &spec)?;
    print_out(&format!("{}\n", version.display()))
}

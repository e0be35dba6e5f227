//! `robocache index DATASET [--out PATH]`: writes the sidecar index of an
//! RLDS split (`robocache-index.<split>.json`, beside the shards by default,
//! local or in the bucket), so that every later open, on every node, reads
//! that one file instead of every record of every shard.

use std::path::PathBuf;

use anyhow::Result;
use robocache::datasets::Dataset;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The RLDS builder directory (a version folder or the folder above),
    /// local or a URL (`s3://bucket/oxe/bridge/0.1.0`, `gs://...`).
    dataset: PathBuf,
    /// Where the index goes (default: beside the shards, which needs write
    /// access there; a Hub dataset: write it locally, then upload it).
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
    #[command(flatten)]
    open: super::remote::OpenArgs,
}

pub fn run(args: Args) -> Result<()> {
    let dataset = Dataset::open_with(&args.dataset, &args.open.options()?)?;
    let written = dataset.write_index(args.out.as_deref())?;
    super::print_out(&format!("{} ({} episodes)\n", written.display(), dataset.len()))
}

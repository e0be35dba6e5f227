//! `robocache bench storage URL`: what a remote store gives on its own —
//! every object at or below `URL` read in 4 MiB ranged GETs, `--in-flight`
//! at a time, through the client and retries dataset reads use but past
//! the node-local cache. The ceiling a remote dataset's cold epoch is
//! compared with (`benches/remote_read.py`).

use std::path::PathBuf;

use anyhow::{ensure, Result};
use robocache::datasets::Storage;
use serde::Serialize;

use super::super::print_out;
use super::super::remote::RemoteArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A remote object or prefix (`s3://bucket/prefix`, `https://...`, `hf://datasets/<org>/<name>`).
    url: PathBuf,
    /// Ranged requests in flight (robocache's dataset reads keep 8 per read).
    #[arg(long, default_value_t = 8)]
    in_flight: usize,
    /// Read at most this many bytes (default: everything below the URL).
    #[arg(long)]
    max_bytes: Option<u64>,
    /// Print JSON instead of a line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    remote: RemoteArgs,
}

#[derive(Serialize)]
struct Output {
    url: String,
    in_flight: usize,
    objects: usize,
    bytes: u64,
    requests: u64,
    seconds: f64,
    bytes_per_second: f64,
}

pub fn run(args: Args) -> Result<()> {
    ensure!(args.in_flight >= 1, "--in-flight must be 1 or more");
    let storage = Storage::new(args.remote.storage()?);
    let measured = storage.fetch_throughput(&args.url, args.in_flight, args.max_bytes)?;
    let output = Output {
        url: args.url.display().to_string(),
        in_flight: args.in_flight,
        objects: measured.objects,
        bytes: measured.bytes,
        requests: measured.requests,
        seconds: measured.seconds,
        bytes_per_second: measured.bytes_per_second(),
    };
    if args.json {
        return print_out(&format!("{}\n", serde_json::to_string_pretty(&output)?));
    }
    print_out(&format!(
        "{}: {} objects, {:.1} MB in {:.3} s with {} requests in flight ({} requests): {:.1} MB/s\n",
        output.url,
        output.objects,
        output.bytes as f64 / 1e6,
        output.seconds,
        output.in_flight,
        output.requests,
        output.bytes_per_second / 1e6
    ))
}

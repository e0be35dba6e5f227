//! `robocache`: resample, align and voxelize robot data from the command line.
//!
//! ```text
//! robocache demo
//! robocache info
//! robocache resample --data joints.npy --times t.npy --target-hz 50 --target-count 100 --output out.npy
//! robocache voxelize --points cloud.npy --origin -1,-1,0 --voxel-size 0.05 --dims 40,40,20 --output grid.npy
//! robocache inspect lift_ph.hdf5 [--json]
//! robocache convert calvin task_D_D/training calvin_d.h5
//! robocache bench --backend cpu
//! ```

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod commands;
mod npy;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// robocache: multi-rate robot data onto one policy clock, on the GPU or the CPU.
#[derive(Debug, Parser)]
#[command(name = "robocache", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The loader end to end on a synthetic multi-rate dataset (or --file): throughput, data stall, a sample batch.
    Demo(commands::demo::Args),
    /// Version, backends, devices and kernel architectures of this build.
    Info(commands::info::Args),
    /// Resample a `.npy` stream onto target times; writes OUT.npy and OUT.valid.npy.
    Resample(commands::resample::Args),
    /// Voxelize a `.npy` point cloud into a grid; writes OUT.npy (and OUT.counts.npy for mean).
    Voxelize(commands::voxelize::Args),
    /// The layout, episodes, streams (shapes, dtypes, kinds, rates) and durations of a dataset file.
    Inspect(commands::inspect::Args),
    /// Write an RLDS split's sidecar index beside its shards: later opens, on every node, read it instead of every record.
    Index(commands::index::Args),
    /// Convert a dataset into one of robocache's HDF5 layouts (`convert calvin DIR OUT.h5`).
    Convert(commands::convert::Args),
    /// Time the operations on a backend on fixed workloads (docs/performance.md shapes).
    Bench(commands::bench::Args),
    /// A PNG grid of a dataset's camera frames under sampled augmentations (a preset or a config).
    AugmentPreview(commands::augment_preview::Args),
}

/// The program's allocator: mimalloc keeps freed pages for the next
/// allocation of its thread, where glibc's per-thread heaps hand the pages
/// of the loader's decoded frames back and fault them in again
/// (docs/architecture.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ROBOCACHE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => commands::demo::run(args),
        Command::Info(args) => commands::info::run(args),
        Command::Resample(args) => commands::resample::run(args),
        Command::Voxelize(args) => commands::voxelize::run(args),
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Index(args) => commands::index::run(args),
        Command::Convert(args) => commands::convert::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::AugmentPreview(args) => commands::augment_preview::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line: the error and its causes.
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

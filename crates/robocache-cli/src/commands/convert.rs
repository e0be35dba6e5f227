//! `robocache convert calvin DIR OUT.h5`: a native CALVIN split into
//! robocache's CALVIN HDF5 layout (docs/datasets.md), with a progress bar.
//! `robocache convert lerobot SRC OUT`: any dataset robocache reads (ROS 2
//! bags with `--map`, RLDS, HDF5 layouts, LeRobot) resampled onto one
//! clock and written as a LeRobot v3.0 root.

use std::path::PathBuf;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    source: Source,
}

#[derive(Debug, clap::Subcommand)]
enum Source {
    /// A native CALVIN split (episode_XXXXXXX.npz frames, ep_start_end_ids.npy,
    /// lang_annotations/auto_lang_ann.npy) into one HDF5 file.
    Calvin {
        /// The split folder (e.g. task_D_D/training).
        dir: PathBuf,
        /// The HDF5 file to write (replaced if it exists).
        output: PathBuf,
    },
    /// Any dataset robocache reads (ROS 2 bags: `--map MAP.toml`) resampled
    /// onto `--fps` and written as a LeRobot v3.0 root (camera streams as
    /// `video` features, H.264 MP4, or `--cameras image`, PNG) that
    /// `LeRobotDataset(repo_id, root=OUT)` loads.
    Lerobot(Box<LerobotArgs>),
}

/// How camera streams are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Cameras {
    Video,
    Image,
}

/// `convert lerobot`'s arguments.
#[derive(Debug, clap::Args)]
struct LerobotArgs {
    /// The dataset: bags, an RLDS directory, an HDF5 file, a LeRobot root (local or a URL).
    source: PathBuf,
    /// The root to write (a new or empty directory).
    output: PathBuf,
    /// The clock of the written dataset (default: the source's rate).
    #[arg(long)]
    fps: Option<f64>,
    /// The streams to write, comma-separated (default: every stream).
    #[arg(long, value_delimiter = ',')]
    streams: Vec<String>,
    /// The task of episodes without a language instruction.
    #[arg(long, default_value = "")]
    task: String,
    /// `robot_type` in `meta/info.json`.
    #[arg(long)]
    robot_type: Option<String>,
    /// Camera streams as `video` features (H.264 by OpenH264, lossy, in MP4
    /// files) or `image` features (PNG in the data files, lossless, several
    /// times larger).
    #[arg(long, value_enum, default_value_t = Cameras::Video)]
    cameras: Cameras,
    /// `video` cameras: a key frame every this many frames (LeRobot's
    /// `g`; smaller is faster to read at random, larger is smaller).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    key_frame_every: u32,
    #[command(flatten)]
    open: super::remote::OpenArgs,
}

pub fn run(args: Args) -> Result<()> {
    match args.source {
        Source::Lerobot(args) => {
            let LerobotArgs { source, output, fps, streams, task, robot_type, cameras, key_frame_every, open } = *args;
            let cameras = match cameras {
                Cameras::Video => robocache::datasets::CameraStorage::Video { key_frame_every },
                Cameras::Image => robocache::datasets::CameraStorage::Image,
            };
            let dataset = robocache::datasets::Dataset::open_with(&source, &open.options()?)?;
            let fps = fps.unwrap_or(dataset.info().rate_hz);
            let export = robocache::lerobot_export::LeRobotExport { fps, streams, task, robot_type, cameras };
            let bar = ProgressBar::new(dataset.len() as u64);
            bar.set_style(
                ProgressStyle::with_template("{spinner} writing episodes {pos}/{len} [{bar:40}] eta {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            let written = robocache::lerobot_export::export_lerobot(&dataset, &output, &export, |done, _| {
                bar.set_position(done as u64)
            });
            bar.finish_and_clear();
            let written = written?;
            println!(
                "{}: LeRobot v3.0, {} episodes, {} frames at {fps} fps, {} data file(s)",
                written.root.display(),
                written.episodes,
                written.frames,
                written.data_files
            );
            Ok(())
        }
        Source::Calvin { dir, output } => {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template("{spinner} converting frames {pos}/{len} [{bar:40}] {per_sec} eta {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            let summary = robocache::datasets::convert_calvin(&dir, &output, |progress| {
                bar.set_length(progress.frames_total as u64);
                bar.set_position(progress.frames_done as u64);
            });
            bar.finish_and_clear();
            let summary = summary?;
            println!(
                "{}: {} segments, {} frames, {} language annotations; keys {}",
                output.display(),
                summary.segments,
                summary.frames,
                summary.annotations,
                summary.keys.join(", ")
            );
            Ok(())
        }
    }
}

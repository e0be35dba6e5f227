//! `robocache convert calvin DIR OUT.h5`: a native CALVIN split into
//! robocache's CALVIN HDF5 layout (docs/datasets.md), with a progress bar.

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
}

pub fn run(args: Args) -> Result<()> {
    match args.source {
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

//! The options of commands that open a dataset where it lives
//! (`s3://`, `gs://`, `az://`, `http(s)://`, `hf://datasets/...`).

use std::path::PathBuf;

use anyhow::{bail, Result};
use robocache::datasets::ros2::BagMapping;
use robocache::datasets::{OpenOptions, StorageOptions};

/// How a command opens its dataset: the split, the step clock and where
/// remote datasets are read from.
#[derive(Debug, Clone, clap::Args)]
pub struct OpenArgs {
    /// Only the episodes of this split (robomimic `mask/<split>`; RLDS: the
    /// TFDS split, default `train`).
    #[arg(long)]
    split: Option<String>,
    /// The step clock in Hz instead of the file's (RLDS datasets not in the
    /// Open X-Embodiment rate table need it).
    #[arg(long)]
    rate_hz: Option<f64>,
    /// ROS 2 bags: the mapping file (TOML) from topics and fields to dataset
    /// keys (default: every numeric field and camera of the first bag).
    #[arg(long = "map", value_name = "MAP.toml")]
    bag_mapping: Option<PathBuf>,
    #[command(flatten)]
    remote: RemoteArgs,
}

impl OpenArgs {
    /// The open options these arguments give (the others at their defaults).
    pub fn options(&self) -> Result<OpenOptions> {
        Ok(OpenOptions {
            split: self.split.clone(),
            rate_hz: self.rate_hz,
            bag_mapping: self.bag_mapping.as_ref().map(BagMapping::from_file).transpose()?,
            storage: self.remote.storage()?,
            ..Default::default()
        })
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct RemoteArgs {
    /// A store option `KEY=VALUE`, repeatable: object_store's configuration
    /// keys (`aws_endpoint`, `aws_region`, `allow_http`, `timeout`, ...),
    /// `hf_token`, `hf_endpoint`, `max_retries`, `retry_timeout` (seconds).
    /// Credentials are otherwise found as each store's own tools find them.
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    storage_options: Vec<String>,
    /// The node-local cache of remote datasets (default: ~/.cache/robocache/remote).
    #[arg(long, value_name = "DIR")]
    remote_cache_dir: Option<PathBuf>,
    /// The byte budget of that cache (default 64 GiB; 0 turns it off).
    #[arg(long, value_name = "BYTES")]
    remote_cache_bytes: Option<u64>,
}

impl RemoteArgs {
    pub fn storage(&self) -> Result<StorageOptions> {
        let mut options = Vec::new();
        for option in &self.storage_options {
            let Some((key, value)) = option.split_once('=') else {
                bail!("--storage-option `{option}`: write KEY=VALUE");
            };
            options.push((key.trim().to_owned(), value.to_owned()));
        }
        Ok(StorageOptions { cache_dir: self.remote_cache_dir.clone(), cache_bytes: self.remote_cache_bytes, options })
    }
}

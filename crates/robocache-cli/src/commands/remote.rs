//! The options of commands that open a dataset where it lives
//! (`s3://`, `gs://`, `az://`, `http(s)://`, `hf://datasets/...`).

use std::path::PathBuf;

use anyhow::{bail, Result};
use robocache::datasets::StorageOptions;

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

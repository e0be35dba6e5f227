//! Where robocache's datasets live. [`Storage`] opens a local path or a URL
//! of a remote store alike, as a [`Blob`] read with positioned reads:
//!
//! - `s3://bucket/key` (S3 and S3-compatible stores), `gs://bucket/key`,
//!   `az://container/key`, `abfs[s]://container@account.dfs.core.windows.net/key`,
//!   through `object_store` (arrow-rs), configured from the environment as
//!   each store's own tools are (`AWS_*`, `GOOGLE_*`, `AZURE_*`, instance
//!   and workload credentials; for S3 also the profile of the AWS shared
//!   files, `~/.aws/credentials` and `~/.aws/config`) and then from
//!   [`StorageOptions::options`];
//! - `http(s)://host/path`: any server that answers ranged GETs;
//! - `hf://datasets/<org>/<name>[@revision]/<path>`: the Hugging Face Hub's
//!   `resolve/` URLs, with `HF_ENDPOINT` and the token from `HF_TOKEN` or
//!   the Hub's token file, as `huggingface_hub` finds them.
//!
//! Remote reads go through a node-local block cache (`block_cache`): each
//! 4 MiB block of an object is fetched once per node, by ranged GETs,
//! several in flight, retried with backoff on dropped connections, 5xx
//! answers, timeouts and short bodies; a read never returns partial data.
//! Nothing is stored or logged of any credential.
//!
//! ```
//! use std::path::Path;
//! use robocache_storage::{Storage, StorageOptions};
//!
//! let dir = std::env::temp_dir().join("robocache-storage-doc");
//! std::fs::create_dir_all(&dir)?;
//! std::fs::write(dir.join("x.bin"), [1u8, 2, 3, 4])?;
//! let storage = Storage::new(StorageOptions::default());
//! let blob = storage.open(&dir.join("x.bin"))?;
//! let mut two = [0u8; 2];
//! blob.read_exact_at(&mut two, 1)?;
//! assert_eq!(two, [2, 3]);
//! assert!(robocache_storage::is_remote(Path::new("hf://datasets/lerobot/pusht")));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod aws_profile;
mod blob;
mod block_cache;
mod error;
mod fetch_throughput;
mod hub;
mod location;
mod remote;
mod storage;
mod stores;

pub use blob::Blob;
pub use block_cache::BLOCK_BYTES;
pub use error::{Error, Result};
pub use fetch_throughput::FetchThroughput;
pub use location::{is_remote, join_inside, Location, RemoteUrl, StoreKind};
pub use storage::{is_credential, Storage, StorageOptions, StorageUsage, DEFAULT_CACHE_BYTES};
pub use stores::HUB_ENDPOINT;

/// What `Debug` prints in place of a credential.
pub const REDACTED: &str = "<redacted>";

//! [`Storage::fetch_throughput`]: what a remote store gives on its own,
//! past the cache. It sends the same ranged GETs as dataset reads, through
//! the same client and retries (crate internals); `robocache bench storage`
//! presents it.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::StreamExt;

use crate::block_cache::BLOCK_BYTES;
use crate::location::Location;
use crate::remote::RemoteObject;
use crate::{Error, Result, Storage};

/// What [`Storage::fetch_throughput`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FetchThroughput {
    /// Objects read.
    pub objects: usize,
    /// Bytes received.
    pub bytes: u64,
    /// Ranged requests sent (retries included).
    pub requests: u64,
    /// Wall time of the reads, from the first request to the last byte.
    pub seconds: f64,
}

impl FetchThroughput {
    /// Bytes received per second.
    pub fn bytes_per_second(&self) -> f64 {
        self.bytes as f64 / self.seconds.max(1e-9)
    }
}

impl Storage {
    /// What the store alone gives: every object at or below the remote
    /// `path` (or its first `max_bytes`) read in ranged GETs of one cache
    /// block ([`BLOCK_BYTES`]), `in_flight` at a time, through the same
    /// client and retries as dataset reads but past the cache (nothing is
    /// stored). The ceiling a remote dataset's cold reads compare with.
    pub fn fetch_throughput(&self, path: &Path, in_flight: usize, max_bytes: Option<u64>) -> Result<FetchThroughput> {
        let Location::Remote(url) = Location::parse(path)? else {
            return Err(Error::InvalidUrl {
                url: path.display().to_string(),
                reason: "is a local path: the throughput of a remote store is measured on a URL".into(),
            });
        };
        let objects: Vec<Arc<RemoteObject>> = match self.shared.object(&url) {
            Ok(object) => vec![object],
            Err(e) if e.is_not_found() => self
                .list_files(path)?
                .iter()
                .map(|file| match Location::parse(file)? {
                    Location::Remote(url) => self.shared.object(&url),
                    Location::Local(path) => {
                        Err(Error::InvalidUrl { url: path.display().to_string(), reason: "listed as local".into() })
                    }
                })
                .collect::<Result<_>>()?,
            Err(e) => return Err(e),
        };
        let mut ranges = Vec::new();
        let mut left = max_bytes.unwrap_or(u64::MAX);
        'objects: for object in &objects {
            let mut start = 0;
            while start < object.size {
                if left == 0 {
                    break 'objects;
                }
                let len = BLOCK_BYTES.min(object.size - start).min(left);
                ranges.push((object.clone(), start..start + len));
                left -= len;
                start += len;
            }
        }
        let shared = &self.shared;
        let requests_before = shared.requests.load(Ordering::Relaxed);
        let started = std::time::Instant::now();
        let bytes = shared.runtime()?.block_on(async {
            let mut fetches = futures::stream::iter(
                ranges.iter().map(|(object, range)| async move { shared.fetch(object, range.clone()).await }),
            )
            .buffer_unordered(in_flight.max(1));
            let mut bytes = 0u64;
            while let Some(fetched) = fetches.next().await {
                bytes += fetched?.len() as u64;
            }
            Ok::<u64, Error>(bytes)
        })?;
        Ok(FetchThroughput {
            objects: objects.len(),
            bytes,
            requests: shared.requests.load(Ordering::Relaxed) - requests_before,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

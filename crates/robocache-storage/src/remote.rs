//! The remote half of [`crate::Storage`]: one client per store, the objects
//! opened (size and ETag read once), ranged GETs with their retries, and
//! the filling of the node-local block cache.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::{GetOptions, ObjectStore, ObjectStoreExt};

use crate::block_cache::{BlockCache, BlockClaim, CachedObject, Claim, BLOCK_BYTES};
use crate::location::{RemoteUrl, StoreKind};
use crate::storage::StorageOptions;
use crate::stores::{self, HubAccess};
use crate::{Error, Result};

/// Tries of one ranged read whose body is shorter than asked (a server
/// that ends a response early but cleanly). Errors are retried by the
/// client itself (`stores::retry_config`).
const READ_TRIES: usize = 4;
/// Ranged requests in flight per read.
const REQUESTS_IN_FLIGHT: usize = 8;

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) options: StorageOptions,
    pub(crate) runtime: OnceLock<std::result::Result<tokio::runtime::Runtime, String>>,
    pub(crate) stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
    pub(crate) objects: Mutex<HashMap<String, Arc<RemoteObject>>>,
    pub(crate) cache: Option<BlockCache>,
    pub(crate) requests: AtomicU64,
    pub(crate) bytes_fetched: AtomicU64,
    pub(crate) bytes_from_cache: AtomicU64,
    pub(crate) retries: AtomicU64,
}

/// A remote object: its store, size and ETag (read once per process), and its cache files.
#[derive(Debug)]
pub(crate) struct RemoteObject {
    pub(crate) url: RemoteUrl,
    pub(crate) text: String,
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) key: object_store::path::Path,
    pub(crate) size: u64,
    /// The ETag read when the object was opened, sent as `If-Match` with
    /// every ranged read (strong ETags only: `If-Match` compares strongly,
    /// so a weak one would fail every read; none for the Hub).
    pub(crate) e_tag: Option<String>,
    pub(crate) cached: Option<CachedObject>,
}

impl Shared {
    pub(crate) fn runtime(&self) -> Result<&tokio::runtime::Runtime> {
        let runtime = self.runtime.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("robocache-storage")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        });
        runtime.as_ref().map_err(|e| Error::Runtime(std::io::Error::other(e.clone())))
    }

    pub(crate) fn store(&self, url: &RemoteUrl) -> Result<Arc<dyn ObjectStore>> {
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = stores.get(&url.store) {
            return Ok(store.clone());
        }
        let store = stores::build(url, &self.options.options)?;
        stores.insert(url.store.clone(), store.clone());
        Ok(store)
    }

    pub(crate) fn object(&self, url: &RemoteUrl) -> Result<Arc<RemoteObject>> {
        let text = url.url();
        if let Some(object) = self.objects.lock().unwrap_or_else(|e| e.into_inner()).get(&text) {
            return Ok(object.clone());
        }
        if url.key.is_empty() {
            return Err(Error::NotFound { url: text });
        }
        let store = self.store(url)?;
        let key = object_store::path::Path::from(url.key.as_str());
        self.requests.fetch_add(1, Ordering::Relaxed);
        let meta = self.runtime()?.block_on(store.head(&key)).map_err(|source| match source {
            object_store::Error::NotFound { .. } => Error::NotFound { url: text.clone() },
            source => Error::Request { url: text.clone(), range: None, source: Box::new(source) },
        })?;
        let cached = match &self.cache {
            Some(cache) => Some(cache.object(url, meta.size, meta.e_tag.as_deref())?),
            None => None,
        };
        // Not on the Hub: its `resolve` URLs answer with a redirect to a CDN,
        // and the Hub's own ETag (the file's hash) is not the CDN's, so an
        // `If-Match` checked at either end could refuse every read. Its
        // revisions are immutable when pinned (`@<commit>`).
        let e_tag = meta.e_tag.filter(|tag| !tag.starts_with("W/") && url.kind != StoreKind::Hub);
        let object =
            Arc::new(RemoteObject { url: url.clone(), text: text.clone(), store, key, size: meta.size, e_tag, cached });
        self.objects.lock().unwrap_or_else(|e| e.into_inner()).insert(text, object.clone());
        Ok(object)
    }

    pub(crate) fn list(&self, url: &RemoteUrl) -> Result<Vec<String>> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if let Some((repo, revision)) = &url.hub_repo {
            let access = HubAccess::find(&self.options.options);
            return match self.runtime()?.block_on(crate::hub::list_files(&access, repo, revision, &url.key)) {
                Err(e) if e.is_not_found() => Ok(Vec::new()),
                other => other,
            };
        }
        let store = self.store(url)?;
        let prefix = object_store::path::Path::from(url.key.as_str());
        let listed = self.runtime()?.block_on(async {
            store.list(Some(&prefix)).map_ok(|meta| meta.location.to_string()).try_collect::<Vec<_>>().await
        });
        listed.map_err(|source| {
            // The first line only: servers put whole HTML pages in errors.
            let text = source.to_string();
            let first = text.lines().next().unwrap_or_default().trim_end_matches([':', ' ']);
            let reason = match url.kind {
                StoreKind::Http => format!(
                    "{first} (a plain HTTP server lists directories only through WebDAV PROPFIND: give the path of the dataset itself — an RLDS version folder, a LeRobot root, an HDF5 file — or serve it from an S3-compatible store, or use hf://)"
                ),
                _ => first.to_owned(),
            };
            Error::List { url: url.url(), reason }
        })
    }

    /// One ranged GET of exactly `range`, retried on errors and short bodies.
    pub(crate) async fn fetch(&self, object: &RemoteObject, range: Range<u64>) -> Result<Bytes> {
        let want = range.end - range.start;
        let mut tries = 0;
        loop {
            tries += 1;
            self.requests.fetch_add(1, Ordering::Relaxed);
            let options = GetOptions {
                range: Some(range.clone().into()),
                if_match: object.e_tag.clone(),
                ..GetOptions::default()
            };
            let got = match object.store.get_opts(&object.key, options).await {
                Ok(result) => result.bytes().await,
                Err(error) => Err(error),
            };
            match got {
                Ok(bytes) if bytes.len() as u64 == want => {
                    self.bytes_fetched.fetch_add(want, Ordering::Relaxed);
                    return Ok(bytes);
                }
                Ok(bytes) if tries >= READ_TRIES => {
                    return Err(Error::Truncated { url: object.text.clone(), range, got: bytes.len() as u64, tries })
                }
                Ok(bytes) => {
                    tracing::warn!(url = %object.text, start = range.start, end = range.end, got = bytes.len(), "short body, retrying");
                }
                Err(object_store::Error::NotFound { .. }) => return Err(Error::NotFound { url: object.text.clone() }),
                Err(object_store::Error::Precondition { .. }) => {
                    let etag = object.e_tag.clone().unwrap_or_default();
                    return Err(Error::Changed { url: object.text.clone(), etag });
                }
                // The client has retried it already (5xx, dropped
                // connections, bodies cut short: resumed where they broke).
                Err(source) => {
                    return Err(Error::Request {
                        url: object.text.clone(),
                        range: Some(range),
                        source: Box::new(source),
                    })
                }
            };
            self.retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100 << tries)).await;
        }
    }

    /// Fetches the missing blocks of `blocks` into the cache, several
    /// requests in flight, each block once per node: blocks another thread
    /// or process is fetching are waited for after this reader's own
    /// (`block_cache`'s claims), and fetched here only if that fetch failed.
    pub(crate) fn fill(&self, object: &RemoteObject, blocks: Range<u64>) -> Result<()> {
        let Some(cached) = &object.cached else { return Ok(()) };
        let missing = cached.missing(blocks)?;
        if missing.is_empty() {
            return Ok(());
        }
        let mut mine = Vec::new();
        let mut busy = Vec::new();
        for block in missing {
            match cached.try_claim(block)? {
                Claim::Present => {}
                Claim::Mine(claim) => mine.push(claim),
                Claim::Busy => busy.push(block),
            }
        }
        self.fetch_claimed(object, cached, mine)?;
        if busy.is_empty() {
            return Ok(());
        }
        // Ascending, holding only what was claimed after waiting: readers
        // never wait on each other in a cycle.
        let mut left = Vec::new();
        for block in busy {
            if let Some(claim) = cached.claim_waiting(block)? {
                left.push(claim);
            }
        }
        self.fetch_claimed(object, cached, left)
    }

    /// Fetches the claimed blocks into the cache, several requests in flight.
    pub(crate) fn fetch_claimed(
        &self,
        object: &RemoteObject,
        cached: &CachedObject,
        claims: Vec<BlockClaim<'_>>,
    ) -> Result<()> {
        if claims.is_empty() {
            return Ok(());
        }
        let written = self.runtime()?.block_on(async {
            let mut written = 0u64;
            let mut fetches = futures::stream::iter(claims.into_iter().map(|claim| async move {
                let start = claim.block * BLOCK_BYTES;
                let range = start..(start + BLOCK_BYTES).min(object.size);
                self.fetch(object, range).await.map(|bytes| (claim, bytes))
            }))
            .buffer_unordered(REQUESTS_IN_FLIGHT);
            while let Some(result) = fetches.next().await {
                let (claim, bytes) = result?;
                cached.store(claim.block, &bytes)?;
                written += bytes.len() as u64;
                drop(claim);
            }
            Ok::<u64, Error>(written)
        });
        if let Some(cache) = &self.cache {
            cache.added(*written.as_ref().unwrap_or(&0));
        }
        written.map(|_| ())
    }
}

impl Drop for RemoteObject {
    fn drop(&mut self) {
        tracing::trace!(url = %self.url.url(), "remote object closed");
    }
}

//! [`Storage`]: opens local files and remote objects alike, as [`Blob`]s.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, ObjectStoreExt};

use crate::block_cache::{BlockCache, BlockClaim, CachedObject, Claim, BLOCK_BYTES};
use crate::location::{Location, RemoteUrl, StoreKind};
use crate::stores::{self, HubAccess};
use crate::{Error, Result};

/// The cache's byte budget when none is given: 64 GiB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 30;
/// Tries of one ranged read whose body is shorter than asked (a server
/// that ends a response early but cleanly). Errors are retried by the
/// client itself (`stores::retry_config`).
const READ_TRIES: usize = 4;
/// Ranged requests in flight per read.
const REQUESTS_IN_FLIGHT: usize = 8;

/// How remote datasets are read. Local paths ignore it. `Debug` prints
/// the values of credential options (keys naming a secret, token, key,
/// password, SAS or session) as `<redacted>`.
#[derive(Clone, Default, PartialEq)]
pub struct StorageOptions {
    /// The node-local cache directory, shared by the processes of a node;
    /// `None`: `$XDG_CACHE_HOME/robocache/remote`, else `~/.cache/robocache/remote`.
    pub cache_dir: Option<PathBuf>,
    /// The cache's byte budget; `None`: [`DEFAULT_CACHE_BYTES`]. `Some(0)`
    /// turns the cache off: every read goes to the network, for exactly its
    /// bytes (and HDF5 files cannot be read remotely).
    pub cache_bytes: Option<u64>,
    /// Store options, applied after what the environment gives:
    /// `object_store`'s configuration keys (`aws_endpoint`, `aws_region`,
    /// `aws_access_key_id`, `google_service_account`, `azure_storage_account_name`,
    /// `allow_http`, `timeout`, `connect_timeout`, ...) and, for the Hub,
    /// `hf_endpoint` and `hf_token`.
    pub options: Vec<(String, String)>,
}

impl std::fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let options: Vec<(&str, &str)> = self
            .options
            .iter()
            .map(|(key, value)| (key.as_str(), if is_credential(key) { crate::REDACTED } else { value.as_str() }))
            .collect();
        f.debug_struct("StorageOptions")
            .field("cache_dir", &self.cache_dir)
            .field("cache_bytes", &self.cache_bytes)
            .field("options", &options)
            .finish()
    }
}

/// True for an option whose value is a credential.
pub fn is_credential(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["secret", "token", "key", "password", "sas", "session", "credential", "signature"]
        .iter()
        .any(|word| key.contains(word))
}

impl StorageOptions {
    fn cache_dir(&self) -> PathBuf {
        if let Some(dir) = &self.cache_dir {
            return dir.clone();
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("robocache").join("remote")
    }
}

/// What the remote reads of a [`Storage`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StorageUsage {
    /// Requests sent (HEADs, ranged GETs, listings), retries included.
    pub requests: u64,
    /// Bytes received in ranged GETs.
    pub bytes_fetched: u64,
    /// Bytes read from the node-local cache without a request.
    pub bytes_from_cache: u64,
    /// Ranged reads retried after an error or a short body.
    pub retries: u64,
}

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

/// Opens the files of datasets: local paths directly, URLs of remote stores
/// (`s3://`, `gs://`, `az://`, `http(s)://`, `hf://datasets/...`) through one
/// client per store and the node-local block cache. Cheap to clone (shared).
///
/// ```no_run
/// use std::path::Path;
/// use robocache_storage::{Storage, StorageOptions};
///
/// let storage = Storage::new(StorageOptions::default());
/// let info = storage.read(Path::new("hf://datasets/lerobot/pusht/meta/info.json"))?;
/// let video = storage.open(Path::new("s3://bucket/pusht/videos/chunk-000/file-000.mp4"))?;
/// let mut head = [0u8; 8];
/// video.read_exact_at(&mut head, 0)?; // one 4 MiB block fetched, cached on disk
/// # Ok::<(), robocache_storage::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Storage {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    options: StorageOptions,
    runtime: OnceLock<std::result::Result<tokio::runtime::Runtime, String>>,
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
    objects: Mutex<HashMap<String, Arc<RemoteObject>>>,
    cache: Option<BlockCache>,
    requests: AtomicU64,
    bytes_fetched: AtomicU64,
    bytes_from_cache: AtomicU64,
    retries: AtomicU64,
}

/// A remote object: its store, size and ETag (read once per process), and its cache files.
#[derive(Debug)]
struct RemoteObject {
    url: RemoteUrl,
    text: String,
    store: Arc<dyn ObjectStore>,
    key: object_store::path::Path,
    size: u64,
    cached: Option<CachedObject>,
}

/// An open file: local, or a remote object read in ranges. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Blob {
    inner: Arc<BlobInner>,
}

#[derive(Debug)]
enum BlobInner {
    Local { path: PathBuf, file: File, len: u64 },
    Remote { object: Arc<RemoteObject>, shared: Arc<Shared> },
}

impl Storage {
    /// A storage with `options`; nothing is opened until a remote path is.
    pub fn new(options: StorageOptions) -> Storage {
        let cache = match options.cache_bytes {
            Some(0) => None,
            budget => Some(BlockCache::new(options.cache_dir(), budget.unwrap_or(DEFAULT_CACHE_BYTES))),
        };
        Storage {
            shared: Arc::new(Shared {
                options,
                runtime: OnceLock::new(),
                stores: Mutex::new(HashMap::new()),
                objects: Mutex::new(HashMap::new()),
                cache,
                requests: AtomicU64::new(0),
                bytes_fetched: AtomicU64::new(0),
                bytes_from_cache: AtomicU64::new(0),
                retries: AtomicU64::new(0),
            }),
        }
    }

    /// The options this storage was made with.
    pub fn options(&self) -> &StorageOptions {
        &self.shared.options
    }

    /// The cache directory, `None` with the cache off.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.shared.cache.as_ref().map(|c| c.dir())
    }

    /// What remote reads did so far.
    pub fn usage(&self) -> StorageUsage {
        let s = &self.shared;
        StorageUsage {
            requests: s.requests.load(Ordering::Relaxed),
            bytes_fetched: s.bytes_fetched.load(Ordering::Relaxed),
            bytes_from_cache: s.bytes_from_cache.load(Ordering::Relaxed),
            retries: s.retries.load(Ordering::Relaxed),
        }
    }

    /// Opens `path` (local, or a remote object: one HEAD request per process).
    pub fn open(&self, path: &Path) -> Result<Blob> {
        match Location::parse(path)? {
            Location::Local(path) => {
                let file = File::open(&path).map_err(|source| Error::Io { file: path.clone(), source })?;
                let len = file.metadata().map_err(|source| Error::Io { file: path.clone(), source })?.len();
                Ok(Blob { inner: Arc::new(BlobInner::Local { path, file, len }) })
            }
            Location::Remote(url) => {
                let object = self.shared.object(&url)?;
                Ok(Blob { inner: Arc::new(BlobInner::Remote { object, shared: self.shared.clone() }) })
            }
        }
    }

    /// The whole of `path`.
    pub fn read(&self, path: &Path) -> Result<Vec<u8>> {
        if let Location::Local(path) = Location::parse(path)? {
            return std::fs::read(&path).map_err(|source| Error::Io { file: path, source });
        }
        let blob = self.open(path)?;
        let mut bytes = vec![0u8; blob.len() as usize];
        blob.read_exact_at(&mut bytes, 0)?;
        Ok(bytes)
    }

    /// The whole of `path` as UTF-8 text.
    pub fn read_to_string(&self, path: &Path) -> Result<String> {
        let bytes = self.read(path)?;
        String::from_utf8(bytes).map_err(|_| Error::Io {
            file: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
        })
    }

    /// Writes `bytes` to `path`: a local file (replaced atomically: written
    /// beside it, then renamed), or a remote object (one PUT, which object
    /// stores apply whole or not at all). The Hugging Face Hub takes commits,
    /// not PUTs: writing there is an error that says so.
    pub fn write(&self, path: &Path, bytes: Vec<u8>) -> Result<()> {
        match Location::parse(path)? {
            Location::Local(path) => {
                let io = |source| Error::Io { file: path.clone(), source };
                let mut partial = path.clone().into_os_string();
                partial.push(format!(".partial-{}", std::process::id()));
                let partial = PathBuf::from(partial);
                std::fs::write(&partial, &bytes).map_err(io)?;
                std::fs::rename(&partial, &path).map_err(|source| {
                    let _ = std::fs::remove_file(&partial);
                    io(source)
                })
            }
            Location::Remote(url) if url.hub_repo.is_some() => Err(Error::InvalidUrl {
                url: url.url(),
                reason: "the Hugging Face Hub is written by commits, not by robocache: write the file locally and \
                         upload it with `huggingface-cli upload`"
                    .into(),
            }),
            Location::Remote(url) => {
                let store = self.shared.store(&url)?;
                let key = object_store::path::Path::from(url.key.as_str());
                self.shared.requests.fetch_add(1, Ordering::Relaxed);
                let runtime = self.shared.runtime()?;
                runtime.block_on(store.put(&key, bytes.into())).map_err(|source| Error::Request {
                    url: url.url(),
                    range: None,
                    source: Box::new(source),
                })?;
                // A later open in this process sees the new object, not a remembered HEAD.
                self.shared.objects.lock().unwrap_or_else(|e| e.into_inner()).remove(&url.url());
                Ok(())
            }
        }
    }

    /// True when `path` is a file (a remote object that exists). Errors
    /// other than "not found" (denied, unreachable) are returned.
    pub fn is_file(&self, path: &Path) -> Result<bool> {
        match Location::parse(path)? {
            Location::Local(path) => Ok(path.is_file()),
            Location::Remote(url) => match self.shared.object(&url) {
                Ok(_) => Ok(true),
                Err(e) if e.is_not_found() => Ok(false),
                Err(e) => Err(e),
            },
        }
    }

    /// True when `path` is a local directory, or a remote prefix (a remote
    /// path is a directory when it is not an object).
    pub fn is_dir(&self, path: &Path) -> Result<bool> {
        match Location::parse(path)? {
            Location::Local(path) => Ok(path.is_dir()),
            Location::Remote(url) if url.key.is_empty() => Ok(true),
            Location::Remote(_) => Ok(!self.is_file(path)?),
        }
    }

    /// Every file below `dir`, recursively, as paths joined onto `dir`. A
    /// directory that does not exist has no files.
    pub fn list_files(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        match Location::parse(dir)? {
            Location::Local(dir) => list_local(&dir),
            Location::Remote(url) => {
                let keys = self.shared.list(&url)?;
                let prefix = match url.key.is_empty() {
                    true => String::new(),
                    false => format!("{}/", url.key),
                };
                let mut out: Vec<PathBuf> = keys
                    .iter()
                    .filter_map(|key| key.strip_prefix(&prefix))
                    .map(|relative| {
                        crate::join_inside(dir, relative)
                            .map_err(|problem| Error::OutsideRoot { url: url.url(), problem })
                    })
                    .collect::<Result<_>>()?;
                out.sort();
                Ok(out)
            }
        }
    }

    /// A local file with the bytes of `path`: `path` itself, or for a remote
    /// object its cache file, every block fetched first (for readers that
    /// need a file, as the HDF5 library does).
    pub fn local_file(&self, path: &Path) -> Result<PathBuf> {
        match Location::parse(path)? {
            Location::Local(path) => Ok(path),
            Location::Remote(url) => {
                let object = self.shared.object(&url)?;
                let Some(cached) = &object.cached else {
                    return Err(Error::InvalidUrl {
                        url: url.url(),
                        reason: "is read as a whole local file (HDF5), which needs the node-local cache: give it a byte budget above 0".into(),
                    });
                };
                self.shared.fill(&object, 0..object.size.div_ceil(BLOCK_BYTES))?;
                Ok(cached.data_path.clone())
            }
        }
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

fn list_local(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(Error::Io { file: dir, source }),
        };
        for entry in entries {
            let entry = entry.map_err(|source| Error::Io { file: dir.clone(), source })?;
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

impl Shared {
    fn runtime(&self) -> Result<&tokio::runtime::Runtime> {
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

    fn store(&self, url: &RemoteUrl) -> Result<Arc<dyn ObjectStore>> {
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = stores.get(&url.store) {
            return Ok(store.clone());
        }
        let store = stores::build(url, &self.options.options)?;
        stores.insert(url.store.clone(), store.clone());
        Ok(store)
    }

    fn object(&self, url: &RemoteUrl) -> Result<Arc<RemoteObject>> {
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
        let object =
            Arc::new(RemoteObject { url: url.clone(), text: text.clone(), store, key, size: meta.size, cached });
        self.objects.lock().unwrap_or_else(|e| e.into_inner()).insert(text, object.clone());
        Ok(object)
    }

    fn list(&self, url: &RemoteUrl) -> Result<Vec<String>> {
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
    async fn fetch(&self, object: &RemoteObject, range: Range<u64>) -> Result<Bytes> {
        let want = range.end - range.start;
        let mut tries = 0;
        loop {
            tries += 1;
            self.requests.fetch_add(1, Ordering::Relaxed);
            match object.store.get_range(&object.key, range.clone()).await {
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
    fn fill(&self, object: &RemoteObject, blocks: Range<u64>) -> Result<()> {
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
    fn fetch_claimed(&self, object: &RemoteObject, cached: &CachedObject, claims: Vec<BlockClaim<'_>>) -> Result<()> {
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

impl Blob {
    /// Bytes in the file.
    pub fn len(&self) -> u64 {
        match &*self.inner {
            BlobInner::Local { len, .. } => *len,
            BlobInner::Remote { object, .. } => object.size,
        }
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The path or URL, for messages.
    pub fn name(&self) -> String {
        match &*self.inner {
            BlobInner::Local { path, .. } => path.display().to_string(),
            BlobInner::Remote { object, .. } => object.text.clone(),
        }
    }

    /// True for a remote object.
    pub fn is_remote(&self) -> bool {
        matches!(&*self.inner, BlobInner::Remote { .. })
    }

    /// Fills `buffer` with the bytes at `offset` (positioned: many threads
    /// read one blob at once). A remote read fetches the 4 MiB blocks it
    /// covers that the cache lacks, several at a time, then reads the cache;
    /// without a cache it fetches exactly the range. Never returns partial data.
    pub fn read_exact_at(&self, buffer: &mut [u8], offset: u64) -> Result<()> {
        let end = offset.saturating_add(buffer.len() as u64);
        match &*self.inner {
            BlobInner::Local { path, file, len } => {
                if end > *len {
                    return Err(Error::OutOfRange { url: path.display().to_string(), range: offset..end, size: *len });
                }
                file.read_exact_at(buffer, offset).map_err(|source| Error::Io { file: path.clone(), source })
            }
            BlobInner::Remote { object, shared } => {
                if end > object.size {
                    return Err(Error::OutOfRange { url: object.text.clone(), range: offset..end, size: object.size });
                }
                if buffer.is_empty() {
                    return Ok(());
                }
                match &object.cached {
                    Some(cached) => {
                        let blocks = offset / BLOCK_BYTES..(end - 1) / BLOCK_BYTES + 1;
                        let missing = cached.missing(blocks.clone())?;
                        if missing.is_empty() {
                            shared.bytes_from_cache.fetch_add(buffer.len() as u64, Ordering::Relaxed);
                        } else {
                            shared.fill(object, blocks)?;
                        }
                        cached.read_exact_at(buffer, offset)
                    }
                    None => {
                        let bytes = shared.runtime()?.block_on(shared.fetch(object, offset..end))?;
                        buffer.copy_from_slice(&bytes);
                        Ok(())
                    }
                }
            }
        }
    }

    /// Fetches every block of a remote object the node-local cache lacks,
    /// several requests in flight, before a reader walks it whole (indexing
    /// an RLDS shard's records touches every block, one after the other: a
    /// chain of dependent reads otherwise). Nothing for a local file, or
    /// with the cache off.
    pub fn prefetch(&self) -> Result<()> {
        match &*self.inner {
            BlobInner::Remote { object, shared } if object.cached.is_some() => {
                shared.fill(object, 0..object.size.div_ceil(BLOCK_BYTES))
            }
            _ => Ok(()),
        }
    }

    /// `len` bytes at `offset`.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; len];
        self.read_exact_at(&mut bytes, offset)?;
        Ok(bytes)
    }
}

impl Drop for RemoteObject {
    fn drop(&mut self) {
        tracing::trace!(url = %self.url.url(), "remote object closed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_print_redacted() {
        let options = StorageOptions {
            options: vec![
                ("aws_secret_access_key".into(), "s3cr3t-value".into()),
                ("hf_token".into(), "hf_abcdef".into()),
                ("azure_storage_sas_key".into(), "sv=2024&sig=xyz".into()),
                ("aws_endpoint".into(), "http://127.0.0.1:9000".into()),
            ],
            ..Default::default()
        };
        let text = format!("{options:?}");
        for secret in ["s3cr3t-value", "hf_abcdef", "sig=xyz"] {
            assert!(!text.contains(secret), "{secret} printed: {text}");
        }
        assert!(text.contains("http://127.0.0.1:9000") && text.contains("<redacted>"), "{text}");
    }

    #[test]
    fn writes_replace_local_files_whole_and_the_hub_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::new(StorageOptions { cache_bytes: Some(0), ..Default::default() });
        let path = dir.path().join("index.json");
        storage.write(&path, b"first, longer".to_vec()).unwrap();
        storage.write(&path, b"second".to_vec()).unwrap();
        assert_eq!(storage.read(&path).unwrap(), b"second");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no partial file left behind");
        let err = storage.write(&dir.path().join("missing/index.json"), vec![1]).unwrap_err().to_string();
        assert!(err.contains("missing"), "{err}");
        let err = storage.write(Path::new("hf://datasets/org/name/index.json"), vec![1]).unwrap_err().to_string();
        assert!(err.contains("hf://datasets/org/name") && err.contains("huggingface-cli"), "{err}");
    }
}

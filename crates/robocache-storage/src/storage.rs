//! [`Storage`]: opens local files and remote objects alike, as [`Blob`]s.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use object_store::ObjectStoreExt;

use crate::blob::{Blob, BlobInner};
use crate::block_cache::{BlockCache, BLOCK_BYTES};
use crate::location::Location;
use crate::remote::Shared;
use crate::{Error, Result};

/// The cache's byte budget when none is given: 64 GiB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 30;
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
    pub(crate) shared: Arc<Shared>,
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
                let blocks = 0..object.size.div_ceil(BLOCK_BYTES);
                self.shared.fill(&object, blocks.clone())?;
                // The library reads the file itself: every block is checked first.
                if !cached.check(blocks.clone())?.is_empty() {
                    self.shared.fill(&object, blocks)?;
                }
                Ok(cached.data_path.clone())
            }
        }
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

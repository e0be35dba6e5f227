//! Where a Zarr hierarchy's keys are read from, as the zarrs crate reads
//! stores: a directory (local, or a remote prefix through
//! robocache-storage, each key one object read with positioned reads) or a
//! `.zarr.zip` (the archive's entries, stored or deflated, as zarr-python's
//! `ZipStore` writes them).

use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use robocache_datasource::{Error, Result};
use robocache_storage::{Blob, Storage};
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{Bytes, ReadableStorageTraits, StorageError, StoreKey};

/// The most bytes one key may hold: a chunk claiming more (a zip entry, a
/// chunk shape in metadata) is refused before anything is allocated.
pub const MAX_VALUE_BYTES: u64 = 1 << 30;

/// A Zarr store, read only.
pub enum ZarrStore {
    /// Keys are files below `root` (local or remote).
    Directory { storage: Storage, root: PathBuf },
    /// Keys are entries of a zip archive.
    Zip { path: PathBuf, archive: Mutex<zip::ZipArchive<BlobReader>>, entries: BTreeSet<String> },
}

impl std::fmt::Debug for ZarrStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ZarrStore::Directory { root, .. } => write!(f, "ZarrStore::Directory({})", root.display()),
            ZarrStore::Zip { path, entries, .. } => {
                write!(f, "ZarrStore::Zip({}, {} entries)", path.display(), entries.len())
            }
        }
    }
}

impl ZarrStore {
    /// The store at `path`: a zip archive when it is a file, else a directory.
    pub fn open(path: &Path, storage: &Storage) -> Result<Self> {
        if storage.is_dir(path)? {
            return Ok(ZarrStore::Directory { storage: storage.clone(), root: path.to_path_buf() });
        }
        let blob = storage.open(path)?;
        let reader = BlobReader { blob, at: 0 };
        let archive = zip::ZipArchive::new(reader).map_err(|e| Error::Layout {
            file: path.to_path_buf(),
            path: "/".into(),
            problem: format!("not a zip archive a `.zarr.zip` store can be: {e}"),
        })?;
        let entries = archive.file_names().map(str::to_owned).collect();
        Ok(ZarrStore::Zip { path: path.to_path_buf(), archive: Mutex::new(archive), entries })
    }

    /// Where the store is (for messages).
    pub fn path(&self) -> &Path {
        match self {
            ZarrStore::Directory { root, .. } => root,
            ZarrStore::Zip { path, .. } => path,
        }
    }

    /// The object of `key` in a directory store, `None` where absent: one
    /// open (a remote one's HEAD request), no separate existence check.
    fn blob(storage: &Storage, root: &Path, key: &str) -> Result<Option<Blob>> {
        match storage.open(&root.join(key)) {
            Ok(blob) => Ok(Some(blob)),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// The whole value of `key`, `None` where absent.
    pub fn read(&self, key: &str) -> Result<Option<Vec<u8>>> {
        match self {
            ZarrStore::Directory { storage, root } => {
                let Some(blob) = Self::blob(storage, root, key)? else { return Ok(None) };
                if blob.len() > MAX_VALUE_BYTES {
                    return Err(self.too_big(key, blob.len()));
                }
                Ok(Some(blob.read_at(0, blob.len() as usize)?))
            }
            ZarrStore::Zip { archive, entries, .. } => {
                if !entries.contains(key) {
                    return Ok(None);
                }
                let mut archive = archive.lock().unwrap_or_else(|p| p.into_inner());
                let entry = archive.by_name(key).map_err(|e| self.zip_error(key, &e.to_string()))?;
                if entry.size() > MAX_VALUE_BYTES {
                    return Err(self.too_big(key, entry.size()));
                }
                let expected = entry.size();
                let mut bytes = Vec::with_capacity(expected as usize);
                // Never more than the entry says it holds (a zip bomb's
                // stream would go on).
                entry.take(expected + 1).read_to_end(&mut bytes).map_err(|e| self.zip_error(key, &e.to_string()))?;
                if bytes.len() as u64 != expected {
                    return Err(
                        self.zip_error(key, &format!("holds {} bytes, its header says {expected}", bytes.len()))
                    );
                }
                Ok(Some(bytes))
            }
        }
    }

    /// The names of the child nodes of group `group` (`data`): directories
    /// or entries `group/<name>/...`, sorted.
    pub fn children(&self, group: &str) -> Result<Vec<String>> {
        let prefix = format!("{group}/");
        let keys: Vec<String> = match self {
            ZarrStore::Directory { storage, root } => storage
                .list_files(&root.join(group))?
                .into_iter()
                .filter_map(|file| file.strip_prefix(root).ok().map(|p| p.to_string_lossy().replace('\\', "/")))
                .collect(),
            ZarrStore::Zip { entries, .. } => entries.iter().cloned().collect(),
        };
        let names: BTreeSet<String> = keys
            .iter()
            .filter_map(|key| key.strip_prefix(&prefix))
            .filter_map(|rest| rest.split_once('/').map(|(name, _)| name.to_owned()))
            .collect();
        Ok(names.into_iter().collect())
    }

    fn too_big(&self, key: &str, bytes: u64) -> Error {
        Error::Layout {
            file: self.path().to_path_buf(),
            path: key.into(),
            problem: format!("holds {bytes} bytes, more than the {MAX_VALUE_BYTES} a chunk or metadata file may"),
        }
    }

    fn zip_error(&self, key: &str, problem: &str) -> Error {
        Error::Layout { file: self.path().to_path_buf(), path: key.into(), problem: format!("zip entry: {problem}") }
    }
}

impl ReadableStorageTraits for ZarrStore {
    fn get_partial_values_key(
        &self,
        key: &StoreKey,
        byte_ranges: &[ByteRange],
    ) -> std::result::Result<Option<Vec<Bytes>>, StorageError> {
        let Some(value) = self.read(key.as_str()).map_err(|e| StorageError::Other(e.to_string()))? else {
            return Ok(None);
        };
        let value = Bytes::from(value);
        let size = value.len() as u64;
        let parts = byte_ranges
            .iter()
            .map(|range| {
                if range.end(size) > size || range.start(size) > range.end(size) {
                    return Err(StorageError::Other(format!(
                        "{}: byte range {range:?} past its {size} bytes",
                        key.as_str()
                    )));
                }
                Ok(value.slice(range.to_range_usize(size)))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Some(parts))
    }

    fn size_key(&self, key: &StoreKey) -> std::result::Result<Option<u64>, StorageError> {
        let value = self.read(key.as_str()).map_err(|e| StorageError::Other(e.to_string()))?;
        Ok(value.map(|v| v.len() as u64))
    }
}

/// A storage blob as the zip reader reads files: `Read + Seek` by
/// positioned reads.
#[derive(Debug)]
pub struct BlobReader {
    blob: Blob,
    at: u64,
}

impl Read for BlobReader {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let left = self.blob.len().saturating_sub(self.at);
        let n = (buffer.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        self.blob.read_exact_at(&mut buffer[..n], self.at).map_err(std::io::Error::other)?;
        self.at += n as u64;
        Ok(n)
    }
}

impl Seek for BlobReader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            SeekFrom::Start(offset) => Some(offset),
            SeekFrom::End(delta) => self.blob.len().checked_add_signed(delta),
            SeekFrom::Current(delta) => self.at.checked_add_signed(delta),
        };
        self.at =
            target.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start"))?;
        Ok(self.at)
    }
}

//! [`Blob`]: an open file, local or a remote object read in ranges through
//! the node-local block cache.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::block_cache::BLOCK_BYTES;
use crate::remote::{RemoteObject, Shared};
use crate::{Error, Result};

/// An open file: local, or a remote object read in ranges. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Blob {
    pub(crate) inner: Arc<BlobInner>,
}

#[derive(Debug)]
pub(crate) enum BlobInner {
    Local { path: PathBuf, file: File, len: u64 },
    Remote { object: Arc<RemoteObject>, shared: Arc<Shared> },
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
                            shared.fill(object, blocks.clone())?;
                        }
                        // Blocks this process reads from the cache for the
                        // first time are checked; damaged ones are fetched again.
                        if !cached.check(blocks.clone())?.is_empty() {
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

//! A [`Blob`] as the `parquet` crate reads files: the footer and each
//! column chunk as one positioned read, so a remote parquet file is read as
//! ranges (footer, then the row groups of the columns asked for), never whole.

use std::io::Read;

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};
use robocache_storage::Blob;

/// A parquet file opened by a [`robocache_storage::Storage`].
#[derive(Debug)]
pub(crate) struct ParquetBlob(pub Blob);

impl Length for ParquetBlob {
    fn len(&self) -> u64 {
        self.0.len()
    }
}

impl ChunkReader for ParquetBlob {
    type T = BlobReader;

    fn get_read(&self, start: u64) -> parquet::errors::Result<BlobReader> {
        if start > self.0.len() {
            return Err(ParquetError::EOF(format!("offset {start} past the end of {} bytes", self.0.len())));
        }
        Ok(BlobReader { blob: self.0.clone(), at: start })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let bytes = self.0.read_at(start, length).map_err(|e| ParquetError::External(Box::new(e)))?;
        Ok(Bytes::from(bytes))
    }
}

/// Sequential reads from an offset of a blob to its end.
#[derive(Debug)]
pub(crate) struct BlobReader {
    blob: Blob,
    at: u64,
}

impl Read for BlobReader {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.blob.len().saturating_sub(self.at)).min(buffer.len() as u64) as usize;
        if n > 0 {
            self.blob.read_exact_at(&mut buffer[..n], self.at)?;
            self.at += n as u64;
        }
        Ok(n)
    }
}

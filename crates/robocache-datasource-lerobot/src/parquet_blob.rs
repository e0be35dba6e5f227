//! A [`Blob`] as the `parquet` crate reads files: the footer and each
//! column chunk as one positioned read, so a remote parquet file is read as
//! ranges (footer, then the row groups of the columns asked for), never
//! whole. Each page header and the file metadata are checked
//! ([`super::parquet_thrift`]) before the crate decodes them.

use std::io::Read;

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};
use robocache_storage::Blob;

use super::parquet_thrift::{check_file_metadata, page_header_len, Incomplete};

/// The footer's tail: the metadata's length (4 bytes) and `PAR1`.
const FOOTER_TAIL: u64 = 8;

/// Bytes first read for a page header (most are under 100 bytes; page
/// statistics can make them longer, and the read grows to fit).
const PAGE_HEADER_WINDOW: u64 = 1024;

/// The longest page header read (writers cap page statistics at a few KB).
const MAX_PAGE_HEADER: u64 = 16 << 20;

/// A parquet file opened by a [`robocache_storage::Storage`].
#[derive(Debug)]
pub(crate) struct ParquetBlob(pub Blob);

impl Length for ParquetBlob {
    fn len(&self) -> u64 {
        self.0.len()
    }
}

fn external(error: robocache_storage::Error) -> ParquetError {
    ParquetError::External(Box::new(error))
}

impl ParquetBlob {
    /// The checked page header at `start`: read in one range that grows
    /// until it holds the whole header.
    fn page_header(&self, start: u64) -> parquet::errors::Result<Vec<u8>> {
        let left = self.0.len() - start;
        let mut window = PAGE_HEADER_WINDOW.min(left);
        loop {
            let mut bytes = self.0.read_at(start, window as usize).map_err(external)?;
            match page_header_len(&bytes) {
                Ok(len) => {
                    bytes.truncate(len);
                    return Ok(bytes);
                }
                Err(Incomplete::NeedMore) if window < left.min(MAX_PAGE_HEADER) => {
                    window = (window * 4).min(left).min(MAX_PAGE_HEADER);
                }
                Err(Incomplete::NeedMore) => {
                    let problem = if window == left {
                        "runs past the end of the file".to_owned()
                    } else {
                        format!("is longer than {MAX_PAGE_HEADER} bytes")
                    };
                    return Err(ParquetError::General(format!("the page header at byte {start} {problem}")));
                }
                Err(Incomplete::Malformed(problem)) => {
                    return Err(ParquetError::General(format!("the page header at byte {start}: {problem}")));
                }
            }
        }
    }
}

impl ChunkReader for ParquetBlob {
    type T = BlobReader;

    /// The crate reads the footer's tail and page headers this way: a page
    /// header is checked and handed over from memory.
    fn get_read(&self, start: u64) -> parquet::errors::Result<BlobReader> {
        let len = self.0.len();
        if start > len {
            return Err(ParquetError::EOF(format!("offset {start} past the end of {len} bytes")));
        }
        let checked = if start + FOOTER_TAIL == len { Vec::new() } else { self.page_header(start)? };
        Ok(BlobReader { blob: self.0.clone(), at: start, checked: std::io::Cursor::new(checked) })
    }

    /// The crate reads the file metadata and page contents this way: the
    /// metadata (the range ending at the footer's tail) is checked.
    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let bytes = self.0.read_at(start, length).map_err(external)?;
        let is_metadata = length > 0 && start.checked_add(length as u64 + FOOTER_TAIL) == Some(self.0.len());
        if is_metadata {
            check_file_metadata(&bytes)
                .map_err(|problem| ParquetError::General(format!("the file metadata: {problem}")))?;
        }
        Ok(Bytes::from(bytes))
    }
}

/// Sequential reads from an offset of a blob: the checked page header from
/// memory first, then the blob. Reading at its end is an error, not an
/// empty read: the crate skips bytes by copying until it has read them
/// all or none comes, and an empty read per element of a damaged header
/// is a spin, not progress.
#[derive(Debug)]
pub(crate) struct BlobReader {
    blob: Blob,
    at: u64,
    checked: std::io::Cursor<Vec<u8>>,
}

impl Read for BlobReader {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        if buffer.is_empty() {
            return Ok(0);
        }
        let from_memory = self.checked.read(buffer)?;
        if from_memory > 0 {
            self.at += from_memory as u64;
            return Ok(from_memory);
        }
        let n = (self.blob.len().saturating_sub(self.at)).min(buffer.len() as u64) as usize;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("read at byte {} of a file of {} bytes", self.at, self.blob.len()),
            ));
        }
        self.blob.read_exact_at(&mut buffer[..n], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

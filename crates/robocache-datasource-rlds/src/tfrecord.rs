//! TFRecord framing. A shard is a sequence of records, each
//!
//! ```text
//! u64 length (little-endian) | u32 masked CRC32C of those 8 bytes
//! length bytes of payload    | u32 masked CRC32C of the payload
//! ```
//!
//! where `masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8` (wrapping).
//! Indexing a shard reads only the 12-byte headers (checking the length's
//! CRC) and seeks over the payloads; a payload's CRC is checked when the
//! whole record is first read ([`verify_payload`]).

use robocache_storage::Blob;
use std::path::Path;

use robocache_datasource::direct_read::read_exact_at;
use robocache_datasource::{Error, Result};

/// Bytes of a record's header (length + its CRC).
pub const HEADER_BYTES: u64 = 12;
/// Bytes of a record's footer (the payload's CRC).
pub const FOOTER_BYTES: u64 = 4;

const MASK_DELTA: u32 = 0xa282_ead8;

/// The masked CRC32C that TFRecord stores.
pub fn masked_crc(bytes: &[u8]) -> u32 {
    mask(crc32c::crc32c(bytes))
}

fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Where one record's payload lies in its shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordSpan {
    /// File offset of the payload (after the header).
    pub offset: u64,
    /// Payload bytes.
    pub len: u64,
}

impl RecordSpan {
    /// One past the payload's last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// The records of a shard, from their headers only.
pub fn index_shard(path: &Path, file: &Blob) -> Result<Vec<RecordSpan>> {
    let size = file.len();
    let mut records = Vec::new();
    let mut at = 0u64;
    while at < size {
        let record = records.len();
        if size - at < HEADER_BYTES {
            return Err(framing(
                path,
                record,
                at,
                format!("the shard ends {} bytes into the record's 12-byte header (truncated file)", size - at),
            ));
        }
        let mut header = [0u8; HEADER_BYTES as usize];
        read_exact_at(file, &mut header, at).map_err(|error| Error::Io { file: path.to_path_buf(), error })?;
        let len = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
        let stored = u32::from_le_bytes(header[8..].try_into().expect("4 bytes"));
        if masked_crc(&header[..8]) != stored {
            return Err(framing(
                path,
                record,
                at,
                format!("the CRC32C of the length field does not match (stored {stored:#010x}, computed {:#010x}): not a TFRecord file, or corrupted", masked_crc(&header[..8])),
            ));
        }
        let offset = at + HEADER_BYTES;
        let end = offset.checked_add(len).and_then(|e| e.checked_add(FOOTER_BYTES));
        match end {
            Some(end) if end <= size => {
                records.push(RecordSpan { offset, len });
                at = end;
            }
            _ => {
                return Err(framing(
                    path,
                    record,
                    at,
                    format!(
                        "the record's {len} payload bytes and 4-byte CRC run past the end of the {size}-byte shard (truncated file)"
                    ),
                ))
            }
        }
    }
    Ok(records)
}

/// Reads the whole payload of `span` in chunks and checks its CRC32C.
pub fn verify_payload(path: &Path, file: &Blob, record: usize, span: RecordSpan) -> Result<()> {
    const CHUNK: u64 = 1 << 20;
    let io = |error| Error::Io { file: path.to_path_buf(), error };
    let mut buffer = vec![0u8; CHUNK.min(span.len) as usize];
    let mut crc = 0u32;
    let mut at = span.offset;
    while at < span.end() {
        let n = (span.end() - at).min(CHUNK) as usize;
        read_exact_at(file, &mut buffer[..n], at).map_err(io)?;
        crc = crc32c::crc32c_append(crc, &buffer[..n]);
        at += n as u64;
    }
    let mut footer = [0u8; FOOTER_BYTES as usize];
    read_exact_at(file, &mut footer, span.end()).map_err(io)?;
    let stored = u32::from_le_bytes(footer);
    if mask(crc) != stored {
        return Err(framing(
            path,
            record,
            span.offset.saturating_sub(HEADER_BYTES),
            format!(
                "the CRC32C of the {}-byte payload does not match (stored {stored:#010x}, computed {:#010x}): the record is corrupted",
                span.len,
                mask(crc)
            ),
        ));
    }
    Ok(())
}

fn framing(path: &Path, record: usize, at: u64, problem: String) -> Error {
    Error::Record { file: path.to_path_buf(), record, problem: format!("at byte {at}: {problem}") }
}

/// Frames `payload` as one TFRecord record (for writers and tests).
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + (HEADER_BYTES + FOOTER_BYTES) as usize);
    let len = (payload.len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&masked_crc(payload).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_crc_matches_tensorflow() {
        // CRC32C("123456789") = 0xe3069283 (the Castagnoli check value).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        // TensorFlow's masked CRC of the length field of an empty record.
        let zero = 0u64.to_le_bytes();
        assert_eq!(masked_crc(&zero), mask(crc32c::crc32c(&zero)));
        assert_eq!(mask(0), MASK_DELTA);
    }

    #[test]
    fn framed_records_index_and_verify() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shard.tfrecord");
        let mut bytes = frame(b"first record");
        bytes.extend(frame(b""));
        bytes.extend(frame(&[7u8; 3000]));
        std::fs::write(&path, &bytes).unwrap();
        let file = robocache_storage::Storage::new(Default::default()).open(&path).unwrap();
        let records = index_shard(&path, &file).unwrap();
        assert_eq!(records.iter().map(|r| r.len).collect::<Vec<_>>(), vec![12, 0, 3000]);
        for (i, r) in records.iter().enumerate() {
            verify_payload(&path, &file, i, *r).unwrap();
        }
        // A flipped payload byte fails its CRC; a truncated shard fails indexing.
        let mut flipped = bytes.clone();
        flipped[12 + 3] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        let file = robocache_storage::Storage::new(Default::default()).open(&path).unwrap();
        let err = verify_payload(&path, &file, 0, records[0]).unwrap_err().to_string();
        assert!(err.contains("record 0") && err.contains("CRC32C of the 12-byte payload"), "{err}");
        std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
        let file = robocache_storage::Storage::new(Default::default()).open(&path).unwrap();
        let err = index_shard(&path, &file).unwrap_err().to_string();
        assert!(err.contains("record 2") && err.contains("truncated"), "{err}");
    }
}

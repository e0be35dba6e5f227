//! [`ByteSource`]: what the demuxer and the decoders read a video file
//! through — a length and the bytes at an offset. This crate implements it
//! for bytes in memory and for a local file ([`LocalFile`]); a store of
//! remote objects implements it for its own handles (the dataset readers
//! wrap `robocache_storage::Blob`), so this crate needs no storage layer.

use std::fmt::Debug;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// A length and the bytes at an offset: a local file, a remote object read
/// in ranges, or bytes in memory. Shared by the threads reading a video.
pub trait ByteSource: Debug + Send + Sync {
    /// The length in bytes.
    fn byte_len(&self) -> u64;
    /// Fills `buffer` with the bytes at `offset`; past the end is an error.
    fn read_exact_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<()>;
}

impl ByteSource for [u8] {
    fn byte_len(&self) -> u64 {
        self.len() as u64
    }
    fn read_exact_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
        let bytes = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(buffer.len())?))
            .and_then(|range| self.get(range))
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "read past the end"))?;
        buffer.copy_from_slice(bytes);
        Ok(())
    }
}

impl ByteSource for Vec<u8> {
    fn byte_len(&self) -> u64 {
        self.as_slice().byte_len()
    }
    fn read_exact_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.as_slice().read_exact_at(buffer, offset)
    }
}

/// A local file read with positioned reads (`pread`), from any number of
/// threads at once. Its length is taken when it is opened.
#[derive(Debug)]
pub struct LocalFile {
    file: File,
    len: u64,
}

impl LocalFile {
    /// Opens `path` for reading.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(LocalFile { file, len })
    }
}

impl ByteSource for LocalFile {
    fn byte_len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
        if offset.checked_add(buffer.len() as u64).is_none_or(|end| end > self.len) {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "read past the end"));
        }
        self.file.read_exact_at(buffer, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_end_are_errors() {
        let bytes = vec![1u8, 2, 3, 4];
        let mut two = [0u8; 2];
        bytes.read_exact_at(&mut two, 2).unwrap();
        assert_eq!(two, [3, 4]);
        assert!(bytes.read_exact_at(&mut two, 3).is_err());
        assert!(bytes.read_exact_at(&mut two, u64::MAX).is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("four");
        std::fs::write(&path, &bytes).unwrap();
        let file = LocalFile::open(&path).unwrap();
        assert_eq!(file.byte_len(), 4);
        file.read_exact_at(&mut two, 1).unwrap();
        assert_eq!(two, [2, 3]);
        assert!(file.read_exact_at(&mut two, 3).is_err());
        assert!(file.read_exact_at(&mut two, u64::MAX - 1).is_err());
    }
}

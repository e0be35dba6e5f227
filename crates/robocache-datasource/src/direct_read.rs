//! Positioned reads (`pread`) of local files and storage blobs, from any
//! number of threads at once: what the formats read raw rows and records
//! with, outside any library lock.

use std::fs::File;

/// Files read with positioned reads: local files and
/// [`robocache_storage::Blob`]s (local or remote objects).
pub trait ReadAt {
    /// Fills `buffer` from `offset`.
    fn read_exact_at_offset(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<()>;
}

impl ReadAt for File {
    fn read_exact_at_offset(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
        read_file_at(self, buffer, offset)
    }
}

impl ReadAt for robocache_storage::Blob {
    fn read_exact_at_offset(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.read_exact_at(buffer, offset).map_err(Into::into)
    }
}

/// Fills `buffer` from `offset` of `file`.
pub fn read_exact_at(file: &impl ReadAt, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
    file.read_exact_at_offset(buffer, offset)
}

#[cfg(unix)]
fn read_file_at(file: &File, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset)
}

#[cfg(windows)]
fn read_file_at(file: &File, mut buffer: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buffer.is_empty() {
        match file.seek_read(buffer, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buffer = &mut buffer[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

//! A [`Blob`] as the video crate reads files ([`robocache_video::ByteSource`]):
//! the sample table and each sample as positioned reads, so a remote video
//! is read as ranges through the node-local block cache, never whole.

use robocache_storage::Blob;
use robocache_video::ByteSource;

/// A video file opened by a [`robocache_storage::Storage`].
#[derive(Debug)]
pub(crate) struct VideoBlob(pub Blob);

impl ByteSource for VideoBlob {
    fn byte_len(&self) -> u64 {
        self.0.len()
    }

    fn read_exact_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_exact_at(buffer, offset).map_err(Into::into)
    }
}

//! Driver errors as the facade's.

use crate::Error;

/// A driver error as the facade's: out-of-memory as its own variant (a
/// caller retries smaller), the rest kept whole as the source.
pub(crate) fn cuda_error(error: robocache_cuda::Error) -> Error {
    match error {
        robocache_cuda::Error::OutOfMemory { bytes } => Error::OutOfMemory { bytes, source: error },
        other => Error::Cuda(other),
    }
}

//! The facade's error type: the same enum whatever features are enabled.

/// Everything a robocache call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Invalid input (shapes, times, methods, dtypes, grids), as checked by
    /// the shared validation of the CPU reference.
    #[error(transparent)]
    Invalid(#[from] robocache_cpu::Error),

    /// CUDA was asked for, but this build has no CUDA backend.
    #[error("CUDA was requested, but this build of robocache has no CUDA backend (build with the `cuda` feature)")]
    CudaNotCompiled,

    /// CUDA was asked for, but no usable device answered.
    #[error("CUDA device {ordinal} is not available: {reason}")]
    NoCudaDevice { ordinal: usize, reason: String },

    /// A CUDA driver or kernel failure (out of memory, launch failure, fault).
    #[error("CUDA: {0}")]
    Cuda(String),

    /// The operation has no implementation on this backend yet.
    #[error("{operation} is not implemented on the {backend} backend yet; use the CPU backend")]
    Unsupported { operation: &'static str, backend: &'static str },

    /// A tensor has the wrong number of dimensions.
    #[error("{what}: expected {expected}, got shape {shape:?}")]
    Rank { what: String, expected: String, shape: Vec<usize> },

    /// A dataset could not be read or cut into windows (names the file,
    /// episode and key).
    #[error(transparent)]
    Dataset(#[from] robocache_datasets::Error),

    /// A tensor lives on another device than the one running the operation.
    #[error("{what} is on {tensor_device}, but the operation runs on {device}")]
    DeviceMismatch { what: String, tensor_device: String, device: String },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

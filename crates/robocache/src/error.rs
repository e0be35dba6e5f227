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

    /// The device ran out of memory: retry with a smaller batch or grid.
    #[error("CUDA: out of device memory allocating {bytes} bytes (retry with a smaller batch or grid)")]
    OutOfMemory {
        bytes: usize,
        #[source]
        source: robocache_cuda::Error,
    },

    /// Any other CUDA driver or kernel failure (launch failure, fault), the
    /// driver's error kept as the source.
    #[error("CUDA: {0}")]
    Cuda(#[source] robocache_cuda::Error),

    /// The input is valid but beyond what this backend handles (the CUDA
    /// voxel mean's point count, for one): says the limit.
    #[error("{what}: {limit}")]
    Limit { what: String, limit: String },

    /// A crop or resize of camera frames that cannot apply to them (an
    /// empty size, a crop past the frame): says which frames and why.
    #[error("{what}: {problem}")]
    Resize { what: String, problem: String },

    /// A frame picked by index from a tensor of fewer frames
    /// ([`crate::Device::stack_frames`]).
    #[error("{what}: frame {index} of a tensor of {frames} frames")]
    FrameIndex { what: String, index: usize, frames: usize },

    /// Memory handed in from outside (another library's array) cannot be
    /// used as it is laid out.
    #[error("{what}: {reason}")]
    Layout { what: String, reason: String },

    /// An internal invariant failed (a lock poisoned by a panic on another
    /// thread, a buffer handed back twice): a robocache bug, please report it.
    #[error("internal error: {0}")]
    Internal(String),

    /// A tensor has the wrong number of dimensions.
    #[error("{what}: expected {expected}, got shape {shape:?}")]
    Rank { what: String, expected: String, shape: Vec<usize> },

    /// An augmentation config out of bounds, or parameters that do not fit
    /// the frames (names the field or the window).
    #[error(transparent)]
    Augment(#[from] robocache_augment::Error),

    /// A dataset could not be read or cut into windows (names the file,
    /// episode and key).
    #[error(transparent)]
    Dataset(#[from] robocache_datasets::Error),

    /// A loader spec that cannot be read or used (not JSON, a newer format
    /// version, statistics missing for a stream it normalizes): says which
    /// part and why.
    #[error("loader spec {what}: {problem}")]
    Spec { what: String, problem: String },

    /// A live sample or window that does not fit the spec (a stream it
    /// lacks, a wrong shape or dtype, a NaN or backward time, a window
    /// before a stream's samples can give it): names the stream.
    #[error("live stream `{stream}`: {problem}")]
    Live { stream: String, problem: String },

    /// A tensor lives on another device than the one running the operation.
    #[error("{what} is on {tensor_device}, but the operation runs on {device}")]
    DeviceMismatch { what: String, tensor_device: String, device: String },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! The error type of the CPU reference, which is also the error type of input
//! validation shared by every backend.

use crate::{DType, Method};

/// Everything that can be wrong with the inputs of an operation.
///
/// Each variant names what is wrong (the argument, the row, the index) so that
/// a user can find it in their data.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// An array's length does not match the shape it was given with.
    #[error("{what}: shape {shape:?} needs {expected} elements, but {actual} were given")]
    ShapeMismatch { what: String, shape: Vec<usize>, expected: usize, actual: usize },

    /// An array or dimension is empty where that is meaningless.
    #[error("{what} is empty: {reason}")]
    Empty { what: String, reason: String },

    /// A time is NaN or infinite.
    #[error("{what} row {row}, index {index}: time {value} is not finite")]
    NonFiniteTime { what: String, row: usize, index: usize, value: f64 },

    /// Source times do not strictly increase.
    #[error("{what} row {row}, index {index}: time {value} does not come after {previous}; source times must be strictly increasing")]
    TimesNotIncreasing { what: String, row: usize, index: usize, previous: f64, value: f64 },

    /// A uniform timeline has a bad start or rate.
    #[error(
        "{what}: uniform timeline start {start} s, rate {hz} Hz; the start must be finite and the rate finite and > 0"
    )]
    BadUniformTimeline { what: String, start: f64, hz: f64 },

    /// A valid length outside `1..=S`.
    #[error("{what} row {row}: valid length {length} is outside 1..={samples}")]
    BadLength { what: String, row: usize, length: u64, samples: usize },

    /// The method cannot be applied to the dtype.
    #[error("{what}: method {method} is not defined for dtype {dtype} (integer and bool data support only nearest and previous)")]
    UnsupportedMethod { what: String, method: Method, dtype: DType },

    /// The channel spec is malformed or does not cover the channels.
    #[error("{what}: channel spec {reason}")]
    ChannelSpec { what: String, reason: String },

    /// The fill value does not fit the dtype.
    #[error("{what}: fill value {value} cannot be represented exactly as {dtype}")]
    FillValue { what: String, value: f64, dtype: DType },

    /// An array has the wrong dtype.
    #[error("{what}: expected dtype {expected}, got {actual}")]
    DTypeMismatch { what: String, expected: String, actual: DType },

    /// A voxel grid parameter is invalid.
    #[error("voxel grid: {0}")]
    BadGrid(String),

    /// The voxel grid would exceed the byte budget.
    #[error("voxel grid output needs {bytes} bytes, more than the budget of {budget} bytes (raise the budget or shrink the grid)")]
    GridTooLarge { bytes: u128, budget: u64 },

    /// A point names a cloud that does not exist.
    #[error("point {point}: cloud index {cloud} is out of range for {clouds} clouds")]
    CloudIndex { point: usize, cloud: u64, clouds: usize },

    /// The voxelization mode and the features disagree.
    #[error("voxelize mode {mode}: {reason}")]
    Features { mode: String, reason: String },

    /// A size computation overflows.
    #[error("{0}: size overflows the address space")]
    Overflow(String),
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

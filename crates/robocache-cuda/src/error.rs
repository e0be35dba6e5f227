//! Errors of the CUDA wrapper, mapped from driver results in one place.

/// What can go wrong talking to the CUDA driver.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// No usable driver: libcuda.so.1 not found by the loader, or a driver
    /// that failed to initialise.
    #[error("the CUDA driver is not available ({0})")]
    DriverUnavailable(String),

    /// No device with this ordinal.
    #[error("no CUDA device {ordinal} ({count} present)")]
    NoDevice { ordinal: usize, count: usize },

    /// The device is older than every arch with PTX in the catalog.
    #[error("the device has compute capability {major}.{minor}; robocache's PTX needs 8.0 (sm_80) or newer")]
    UnsupportedDevice { major: u32, minor: u32 },

    /// An allocation failed.
    #[error("out of device memory allocating {bytes} bytes")]
    OutOfMemory { bytes: usize },

    /// A kernel failed to launch or faulted.
    #[error("kernel {kernel} failed: {message}")]
    Kernel { kernel: &'static str, message: String },

    /// Any other driver call failed.
    #[error("CUDA driver call {call} failed: {message}")]
    Driver { call: &'static str, message: String },

    /// A copy between buffers of different sizes.
    #[error("copy of {expected} bytes into a buffer of {actual} bytes")]
    SizeMismatch { expected: usize, actual: usize },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A driver error as text. cust's `Display` asks the driver for the message
/// (`cuGetErrorString`), which fails without a driver and makes formatting
/// panic; the variant name needs no driver.
#[cfg(feature = "driver")]
pub(crate) fn describe(e: cust::error::CudaError) -> String {
    match e {
        cust::error::CudaError::UnknownError => {
            "no driver: libcuda.so.1 could not be loaded, or lacks the function".into()
        }
        other => format!("{other:?}"),
    }
}

/// Maps a failed driver call.
#[cfg(feature = "driver")]
pub(crate) fn driver(call: &'static str) -> impl FnOnce(cust::error::CudaError) -> Error {
    move |e| match e {
        cust::error::CudaError::NotInitialized | cust::error::CudaError::UnknownError => {
            Error::DriverUnavailable(format!("{call}: {}", describe(e)))
        }
        other => Error::Driver { call, message: describe(other) },
    }
}

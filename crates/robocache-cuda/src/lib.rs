//! The CUDA driver wrapper of robocache, over `cust` 0.3.2.
//!
//! One [`CudaContext`] per device: the device's primary context, one
//! non-blocking stream on which all work is queued, and a cache of the PTX
//! modules of `robocache-kernels`, loaded once for the arch the device
//! selects. [`DeviceBytes`] are untyped device allocations (the facade tracks
//! dtypes); [`Event`]s time work on the stream. No `cust` type appears in
//! this API, and every driver call goes through here, so the mapping of
//! driver results (cust's result enum predates CUDA 12) is fixed in one place.
//!
//! Linking needs `libcuda.so`: the real driver, or the stub made by
//! `cargo xtask stub-libcuda`, against which every call fails with
//! [`Error::DriverUnavailable`].
//!
//! ```no_run
//! use robocache_cuda::CudaContext;
//!
//! let context = CudaContext::new(0)?;
//! let buffer = context.upload(&[1u8, 2, 3])?;
//! let mut back = [0u8; 3];
//! context.download(&buffer, &mut back)?;
//! assert_eq!(back, [1, 2, 3]);
//! # Ok::<(), robocache_cuda::Error>(())
//! ```

mod context;
mod error;

pub use context::{CudaContext, DeviceBytes, Event, LaunchConfig};
pub use error::{Error, Result};
pub use robocache_kernels::{Arch, Kernel, Module};

//! The CUDA driver wrapper of robocache, over `cust` 0.3.2.
//!
//! One [`CudaContext`] per device: the device's primary context, one
//! non-blocking stream on which all work is queued (or another library's
//! stream, for a handle made by [`CudaContext::on_external_stream`]), and a
//! cache of the PTX modules of `robocache-kernels`, loaded once for the arch
//! the device selects. [`DeviceBytes`] are untyped device allocations (the facade tracks
//! dtypes); [`Event`]s time work on the stream. No `cust` type appears in
//! this API, and every driver call goes through here, so the mapping of
//! driver results (cust's result enum predates CUDA 12) is fixed in one place.
//!
//! Linking needs `libcuda.so`: the real driver, or the stub made by
//! `cargo xtask stub-libcuda`, against which every call fails with
//! `Error::DriverUnavailable`. So the wrapper is behind this crate's `driver`
//! feature (turned on by the facade's `cuda` feature); without it the crate
//! holds only its [`Error`] type (which the facade's errors wrap in every
//! build) and re-exports the kernel catalog.
//!
//! With `driver`: `CudaContext::new(0)?` opens device 0; `context.upload(bytes)`
//! and `context.download(&buffer, &mut out)` move data; `unsafe
//! context.launch(entry::ResampleF32, config, (data, out, valid, args))` queues a
//! kernel with its typed parameters.
//! Always available, the catalog's arch choice:
//!
//! ```
//! use robocache_cuda::Arch;
//!
//! assert_eq!(Arch::for_compute_capability(9, 0), Some(Arch::Sm90)); // H100, H200
//! ```

#[cfg(feature = "driver")]
mod context;
mod error;

#[cfg(feature = "driver")]
pub use context::{CudaContext, DeviceBytes, Event, LaunchConfig, PinnedBuffer};
pub use error::{Error, Result};
pub use robocache_kernels::{
    abi, entry, Arch, Entry, FuseParams, FuseTiledParams, Kernel, Module, Params, ResampleParams, ResampleTiledParams,
    VoxelMeanGroupedParams,
};

//! The `robocache._native` extension module: the thin layer between Python
//! and the [`robocache`] facade. It turns array descriptors into borrowed
//! [`robocache::Tensor`]s (no copy), calls the facade, wraps results as
//! [`arrays::Array`] objects that PyTorch reads in place through DLPack
//! capsules and NumPy through `__array_interface__` (CuPy and others also
//! through `__dlpack__` / `__cuda_array_interface__`), queues CUDA work
//! on the caller's stream itself, and maps errors to the `robocache` exception
//! classes. No operation is computed here; the Python package
//! (`python/robocache`) gives it its API.
//!
//! The descriptors Python passes are `(address, shape, dtype, device)`
//! tuples, made by `robocache._arrays` from contiguous NumPy arrays and
//! torch tensors. Parsing one needs no interpreter:
//!
//! ```
//! use robocache_python::arrays::ArrayDesc;
//!
//! let desc = ArrayDesc::parse_parts(0x1000, vec![2, 3], "f32", "cpu")?;
//! assert_eq!(desc.shape, [2, 3]);
//! assert_eq!(desc.device, robocache::BackendRequest::Cpu);
//! assert!(ArrayDesc::parse_parts(0x1000, vec![2], "complex64", "cpu").is_err());
//! # Ok::<(), String>(())
//! ```

pub mod arrays;
mod data;
mod dlpack;
mod errors;
mod live;
mod mixture;
mod ops;
mod streams;
mod warnings;

use pyo3::prelude::*;

/// The module's allocator: mimalloc keeps freed pages for the next
/// allocation of its thread. With glibc's, the loader's threads, each
/// allocating and freeing decoded frames (460 KB at 480x640), fault the
/// pages of every frame in again (docs/architecture.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Whether a CUDA device answers (the driver is loaded on first use; a
/// machine without one answers false).
#[pyfunction]
fn cuda_available() -> bool {
    robocache::Device::cuda(0).is_ok()
}

/// What robocache was built with and sees, as JSON: version, backends,
/// devices, PTX archs.
#[pyfunction]
fn info() -> String {
    let cuda = match robocache::Device::cuda(0) {
        Ok(device) => serde_json::json!({"available": true, "device": device.to_string()}),
        Err(reason) => serde_json::json!({"available": false, "reason": reason.to_string()}),
    };
    serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "cuda_compiled": robocache::Device::cuda_compiled(),
        "cuda": cuda,
        "ptx_archs": robocache::ptx_archs(),
        "cpu_threads": std::thread::available_parallelism().map(usize::from).unwrap_or(1),
        "build": robocache::build_info(),
    })
    .to_string()
}

/// What this build has, as JSON: version, CUDA backend and PTX archs, and
/// per video codec its decoders and whether each has its SIMD code.
#[pyfunction]
fn build_info() -> String {
    serde_json::to_string(&robocache::build_info()).unwrap_or_default()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    warnings::install();
    m.add_function(wrap_pyfunction!(warnings::take_warnings, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_available, m)?)?;
    m.add_function(wrap_pyfunction!(info, m)?)?;
    m.add_function(wrap_pyfunction!(build_info, m)?)?;
    m.add_function(wrap_pyfunction!(data::bag_topics_json, m)?)?;
    m.add_function(wrap_pyfunction!(data::bag_decode_json, m)?)?;
    m.add_function(wrap_pyfunction!(data::bag_messages, m)?)?;
    m.add_function(wrap_pyfunction!(data::bag_point_clouds, m)?)?;
    m.add_class::<arrays::Array>()?;
    ops::register(m)?;
    data::register(m)?;
    mixture::register(m)?;
    live::register(m)?;
    Ok(())
}

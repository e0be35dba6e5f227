//! The PTX kernel catalog of robocache: PTX for sm_80, sm_90 and sm_120
//! generated from `kernels/*.cu` by `cargo xtask build-ptx`, committed and
//! embedded with `include_str!`, a kernel id enum, and arch selection.
//!
//! Not built yet: the CUDA backend work fills it. No kernels exist in this
//! build, so the catalog is empty.
//!
//! ```
//! // Nothing to call yet; the crate compiles so the workspace layout is complete.
//! ```

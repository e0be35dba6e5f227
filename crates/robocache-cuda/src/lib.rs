//! The CUDA driver wrapper of robocache (over `cust`): contexts, streams,
//! device and pinned buffers, events, the module cache, launch helpers and
//! error mapping, with no `cust` type in its API.
//!
//! Not built yet: this crate is filled by the CUDA backend work (SPEC §2,
//! issue "CUDA backend"). Until then the facade's
//! [`Device::cuda`](https://docs.rs/robocache) returns "not compiled with CUDA".
//!
//! ```
//! // Nothing to call yet; the crate compiles so the workspace layout is complete.
//! ```

//! Readers for RoboMimic, CALVIN and RT-X HDF5 files into one episode model,
//! with step and time windows (SPEC §5).
//!
//! Not built yet: the datasets work fills it.
//!
//! ```
//! // Nothing to call yet; the crate compiles so the workspace layout is complete.
//! ```

//! Synthetic datasets: multi-rate files in the RoboMimic layout
//! ([`write_robomimic`]; what `robocache demo` runs on when given no file,
//! and what tests and benchmarks use when they need a file of a given size
//! without Python) and RLDS builder directories in TFDS's format
//! ([`write_rlds`]) without TensorFlow.

pub use robocache_datasource_hdf5::synthetic::*;
pub use robocache_datasource_rlds::{write_rlds, RldsSpec};

//! The CPU reference implementation of every robocache operation.
//!
//! This crate defines what each operation computes (docs/semantics.md): the CUDA
//! backend is tested against it, and the facade crate `robocache` dispatches
//! to it when no GPU is used. Rows, targets and voxels run in parallel on
//! rayon's thread pool.
//!
//! - [`resample`]: a batch of rows `[B, S, D]` with their own sample times
//!   onto target times, by channel group ([`Method::Linear`],
//!   [`Method::Nearest`], [`Method::Previous`], [`Method::Slerp`]), with a
//!   boundary rule and a valid mask.
//! - [`fuse`]: several streams at different rates onto one timeline,
//!   concatenated along channels.
//! - [`voxelize`]: point clouds into occupancy, count, mean or max grids,
//!   bitwise deterministic.
//!
//! ```
//! use robocache_cpu::{resample, ChannelSpec, Method, ResampleSpec, Stream, Targets, Times};
//!
//! // Two rows of a 100 Hz stream: 3 position channels and a gripper flag.
//! let times: Vec<f64> = (0..5).map(|i| i as f64 * 0.01).collect();
//! let mut data = Vec::new();
//! for row in 0..2 {
//!     for i in 0..5 {
//!         data.extend([i as f32, 2.0 * i as f32, row as f32, (i >= 3) as u8 as f32]);
//!     }
//! }
//! let stream = Stream::new(&data, [2, 5, 4], Times::Shared(&times));
//! // A 50 Hz policy clock starting 5 ms after the first sample.
//! let targets = Targets::uniform(0.005, 50.0, 3);
//! let spec = ResampleSpec::new(Method::Linear)
//!     .with_channels("0..3:linear,3..4:previous".parse::<ChannelSpec>()?);
//! let out = resample(&stream, &targets, &spec)?;
//! assert_eq!(out.shape, [2, 3, 4]);
//! assert_eq!(&out.data[..4], &[0.5, 1.0, 0.0, 0.0]);
//! assert_eq!(out.valid, [true, true, false, true, true, false]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod dtype;
mod error;
mod fusion;
pub mod noise;
mod resample;
mod times;
mod voxelize;

#[cfg(feature = "testing")]
pub mod strategies;

pub use half;

pub use dtype::{bf16_from_f64, f16_from_f64, DType, Element, HostSlice, HostVec};
pub use error::{Error, Result};
pub use fusion::{fuse, plan_fusion, plan_fusion_shapes, Fused, FusionInput, FusionStream, StreamShape};
pub use resample::{
    fill_bits, resample, resample_into, slerp, Boundary, ChannelGroup, ChannelSpec, Method, QuaternionOrder,
    ResamplePlan, ResampleSpec, Resampled, Stream, Targets,
};
pub use times::{check_uniform_increasing, uniform_time, Position, RowTimes, TimeShape, Times};
pub use voxelize::{
    plan_voxelize, plan_voxelize_shapes, voxelize, PointShapes, Points, VoxelGrid, VoxelMode, Voxelized, Voxels,
    DEFAULT_GRID_BUDGET_BYTES,
};

//! The data-source core of robocache: the episode model every format reads
//! into, the format layer's traits, the open dataset, windows, sampling and
//! mixture sampling. It names no format: each format family is a crate of
//! its own (`robocache-datasource-hdf5`, `-rlds`, `-lerobot`, `-ros2`, `-zarr`)
//! implementing [`format_reader::FormatKind`] and
//! [`format_reader::FormatReader`], and the `robocache-datasets` facade's
//! registry lists them (docs/architecture.md).
//!
//! - [`model`]: episodes of named streams, each with a dtype, a per-step
//!   shape, its own timeline and the kind of its channels.
//! - [`DatasetReader`]: a path opened by the first of a list of
//!   [`format_reader::FormatKind`]s that recognises it, read lazily, with a
//!   byte-budgeted cache of low-dimensional streams.
//! - [`StepWindows`], [`TimeWindows`], [`DeltaWindows`]: robomimic's step
//!   windows, windows on a policy clock, LeRobot's `delta_timestamps`.
//! - [`Sampler`] and [`MixtureSampler`]: seeded permutations per epoch,
//!   sharded by rank, and weighted mixtures of datasets.
//!
//! A format in a dozen lines (a real one reads a file; this one makes up its
//! rows), opened and windowed:
//!
//! ```
//! use std::any::Any;
//! use std::ops::Range;
//! use std::path::{Path, PathBuf};
//! use std::sync::Arc;
//!
//! use robocache_datasource::format_reader::{FormatKind, FormatReader, Opened};
//! use robocache_datasource::{
//!     ChannelKind, DatasetInfo, DatasetReader, EpisodeInfo, FormatName, ReaderOptions, Result, StepWindowSpec,
//!     StepWindows, StreamInfo, StreamKind, Timeline,
//! };
//! use robocache_storage::Storage;
//!
//! const RAMP: FormatName = FormatName::new("ramp");
//!
//! #[derive(Debug)]
//! struct Ramp;
//!
//! impl FormatReader for Ramp {
//!     fn read_rows_into(&self, _: usize, _: &StreamInfo, rows: Range<usize>, out: &mut [u8]) -> Result<()> {
//!         for (row, bytes) in rows.zip(out.chunks_exact_mut(4)) {
//!             bytes.copy_from_slice(&(row as f32).to_le_bytes());
//!         }
//!         Ok(())
//!     }
//!     fn explicit_times(&self, _: &DatasetInfo, _: usize, _: &StreamInfo, _: &str) -> Result<Arc<[f64]>> {
//!         unreachable!("the ramp's streams are uniform")
//!     }
//!     fn as_any(&self) -> &dyn Any {
//!         self
//!     }
//! }
//!
//! struct RampKind;
//!
//! impl FormatKind for RampKind {
//!     fn name(&self) -> &'static str {
//!         "ramp"
//!     }
//!     fn formats(&self) -> &'static [FormatName] {
//!         &[RAMP]
//!     }
//!     fn reads(&self) -> &'static str {
//!         "a path ending in .ramp"
//!     }
//!     fn detect(&self, path: &Path, _: &Storage) -> Result<bool> {
//!         Ok(path.extension().is_some_and(|e| e == "ramp"))
//!     }
//!     fn open(&self, path: &Path, _: &Storage) -> Result<Opened> {
//!         let stream = StreamInfo {
//!             name: "actions".into(),
//!             dtype: robocache_cpu::DType::F32,
//!             step_shape: vec![],
//!             len: 100,
//!             kind: StreamKind::All(ChannelKind::Continuous),
//!             timeline: Timeline::Uniform { start: 0.0, hz: 10.0 },
//!             source: "actions".into(),
//!         };
//!         let episode = EpisodeInfo {
//!             name: "ramp_0".into(),
//!             len: 100,
//!             duration_s: 9.9,
//!             streams: vec![stream],
//!             instruction: None,
//!             metadata: Default::default(),
//!         };
//!         let info = DatasetInfo {
//!             path: PathBuf::from(path),
//!             format: RAMP,
//!             rate_hz: 10.0,
//!             episodes: vec![episode],
//!             splits: vec![],
//!             metadata: Default::default(),
//!         };
//!         Ok((Box::new(Ramp), info))
//!     }
//! }
//!
//! let kinds: Vec<Box<dyn FormatKind>> = vec![Box::new(RampKind)];
//! let dataset = DatasetReader::open(Path::new("x.ramp"), &kinds, &ReaderOptions::default())?;
//! let windows = StepWindows::new(dataset.info(), &StepWindowSpec { seq_length: 4, ..Default::default() })?;
//! let window = windows.window(0)?;
//! assert_eq!(dataset.read_step_window(&window, "actions")?, robocache_cpu::HostVec::F32(vec![0.0, 1.0, 2.0, 3.0]));
//! # Ok::<(), robocache_datasource::Error>(())
//! ```

mod cache;
mod dataset;
pub mod decoded_frames;
pub mod direct_read;
mod error;
pub mod format_reader;
pub mod frame_reads;
pub mod image_decode;
mod mixture;
pub mod model;
mod sampler;
pub mod split_mix;
pub mod stream_shape;
#[cfg(feature = "testing")]
pub mod testing;
pub mod verify;
mod windows;

pub use cache::CacheUsage;
pub use dataset::{DatasetReader, ReaderOptions, StreamTimes};
pub use error::{Error, Result};
pub use image_decode::decode_image;
pub use mixture::{EpochLength, MixturePart, MixtureSample, MixtureSampler, MixtureWeights};
pub use model::{
    row_values, ChannelKind, DatasetInfo, EpisodeInfo, FormatName, StreamInfo, StreamKind, Timeline, MAX_ROW_VALUES,
};
pub use sampler::{Sampler, Shard, ShardBy};
pub use verify::{VerifyProblem, VerifyReport};
pub use windows::delta::{DeltaTimestamps, DeltaWindow, DeltaWindows, DEFAULT_TOLERANCE_S};
pub use windows::step::{StepWindow, StepWindowSpec, StepWindows};
pub use windows::time::{TimeWindow, TimeWindowSpec, TimeWindows};
pub use windows::MAX_EPISODE_WINDOWS;

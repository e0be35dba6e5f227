//! Readers for RoboMimic, CALVIN and RT-X HDF5 files, for RLDS builder
//! directories as TFDS publishes them (Open X-Embodiment, read without
//! TensorFlow), for LeRobot dataset roots (codebase v3.0 and v2.1:
//! parquet and MP4, read without Python), for ROS 2 bags, for ALOHA/ACT
//! episode files (HDF5) and for Zarr replay buffers (diffusion policy,
//! UMI) into one episode model, with step windows, time windows, LeRobot's
//! `delta_timestamps` windows and a sampler (docs/datasets.md).
//!
//! This crate is the registry: each format family is a crate of its own
//! (`robocache-datasource-hdf5`, `-rlds`, `-lerobot`, `-ros2`, `-zarr`) behind the
//! format layer of `robocache-datasource`, which holds the episode model,
//! windows and sampling and names no format. [`Dataset::open`] tries the
//! formats in the registry's order; everything else here is re-exported.
//!
//! - [`Dataset::open`] detects the layout ([`Format`]; a directory is RLDS)
//!   and reads metadata only: episodes, streams (dtype, per-step shape,
//!   timeline, channel kind), language instructions. RLDS: record headers
//!   and feature positions, the rate from [`OXE_RATES_HZ`] or
//!   [`OpenOptions::rate_hz`]; images decoded per window as TensorFlow
//!   decodes them. Data is read per window: rows of uncompressed
//!   datasets with positioned reads from any number of threads at once,
//!   others as HDF5 hyperslabs; an optional byte-budgeted cache keeps
//!   low-dimensional streams.
//! - [`StepWindows`]: robomimic's `SequenceDataset` windows (`seq_length`,
//!   `frame_stack`, padding by repeating the edge step, pad masks).
//! - [`TimeWindows`]: anchors on a policy clock and their target times; the
//!   `robocache` facade resamples every stream onto them by its kind, on the
//!   CPU or the GPU.
//! - [`DeltaWindows`]: LeRobot's `delta_timestamps` (every frame a sample,
//!   per-stream frame offsets, rows clamped into the episode, pad masks).
//! - [`Sampler`]: a seeded permutation per epoch, sharded by rank.
//! - [`convert_calvin`]: a native CALVIN split into robocache's CALVIN layout.
//! - [`synthetic::write_robomimic`]: a multi-rate RoboMimic-layout file for demos and tests;
//!   [`synthetic::write_rlds`]: an RLDS directory in TFDS's format.
//!
//! ```no_run
//! use robocache_datasets::{Dataset, Sampler, Shard, StepWindowSpec, StepWindows};
//!
//! let dataset = Dataset::open("lift_ph.hdf5")?;
//! let spec = StepWindowSpec { seq_length: 16, frame_stack: 2, ..Default::default() };
//! let windows = StepWindows::new(dataset.info(), &spec)?;
//! let sampler = Sampler::new(windows.len(), 0, Shard::from_env()?)?;
//! for sample in sampler.epoch(0).into_iter().take(4) {
//!     let window = windows.window(sample)?;
//!     let actions = dataset.read_step_window(&window, "actions")?; // [16 + 1, A]
//!     println!("episode {} step {}: {} values, pad mask {:?}", window.episode, window.step, actions.len(), window.pad_mask());
//! }
//! # Ok::<(), robocache_datasets::Error>(())
//! ```
//!
//! An Open X-Embodiment download, as it sits on disk:
//!
//! ```no_run
//! use robocache_datasets::{Dataset, OpenOptions};
//!
//! let bridge = Dataset::open("/data/oxe/bridge/0.1.0")?; // 5 Hz, from the rate table
//! let frames = bridge.read_rows(0, "observation/image", 0..4)?; // u8 [4, 256, 256, 3], 4 JPEGs decoded
//! let mine = Dataset::open_with("/data/my_robot/1.0.0", &OpenOptions { rate_hz: Some(15.0), ..Default::default() })?;
//! # Ok::<(), robocache_datasets::Error>(())
//! ```
//!
//! A LeRobot root, windows as `LeRobotDataset(delta_timestamps=...)` cuts them:
//!
//! ```no_run
//! use robocache_datasets::{Dataset, DeltaTimestamps, DeltaWindows};
//!
//! let aloha = Dataset::open("/data/lerobot/aloha_sim_insertion_human")?; // meta/info.json: v3.0
//! let spec = DeltaTimestamps::new(vec![("action".into(), (0..16).map(|k| k as f64 / 50.0).collect())]);
//! let windows = DeltaWindows::new(aloha.info(), &spec)?;
//! let window = windows.window(1000)?;
//! let mut actions = vec![0u8; 16 * aloha.stream(window.episode, "action")?.1.step_bytes()];
//! let is_pad = aloha.read_delta_window_into(&window, "action", windows.offsets(0), &mut actions)?;
//! let frame = aloha.read_rows(window.episode, "observation.images.top", window.frame..window.frame + 1)?; // AV1, decoded
//! # Ok::<(), robocache_datasets::Error>(())
//! ```
//!
//! ROS 2 bags (MCAP or rosbag2 SQLite; one episode per bag file), each
//! topic a stream at its own rate, keys named by a mapping ([`ros2`]):
//!
//! ```no_run
//! use robocache_datasets::ros2::BagMapping;
//! use robocache_datasets::{Dataset, OpenOptions, TimeWindowSpec, TimeWindows};
//!
//! let mapping: BagMapping = r#"
//!     fps = 30
//!     [streams."observation.state"]
//!     topic = "/joint_states"
//!     field = "position"
//!     joints = ["shoulder", "elbow", "wrist"]
//! "#.parse()?;
//! let runs = Dataset::open_with("runs/", &OpenOptions { bag_mapping: Some(mapping), ..Default::default() })?;
//! let windows = TimeWindows::new(&runs, &[], &TimeWindowSpec { hz: 30.0, history: 2, horizon: 16, causal: false })?;
//! # Ok::<(), robocache_datasets::Error>(())
//! ```

mod dataset;
mod registry;
pub mod synthetic;

pub use dataset::Dataset;
pub use registry::{Format, OpenOptions};
pub use robocache_datasource::{
    decode_image, row_values, verify, CacheUsage, ChannelKind, DatasetInfo, DatasetReader, DeltaTimestamps,
    DeltaWindow, DeltaWindows, EpisodeInfo, EpochLength, Error, FormatName, MixturePart, MixtureSample, MixtureSampler,
    MixtureWeights, Result, Sampler, Shard, ShardBy, StepWindow, StepWindowSpec, StepWindows, StreamInfo, StreamKind,
    StreamTimes, TimeWindow, TimeWindowSpec, TimeWindows, Timeline, VerifyProblem, VerifyReport, DEFAULT_TOLERANCE_S,
    MAX_EPISODE_WINDOWS, MAX_ROW_VALUES,
};
pub use robocache_datasource_hdf5::{
    calvin::RATE_HZ as CALVIN_RATE_HZ, convert_calvin, npy, robomimic::DEFAULT_RATE_HZ as ROBOMIMIC_DEFAULT_RATE_HZ,
    ConvertProgress,
};
pub use robocache_datasource_lerobot::{
    CameraStorage, FeatureStorage, FeatureToWrite as LeRobotFeatureToWrite, LeRobotView, LeRobotWriter, LeRobotWritten,
    DATA_FILE_BYTES as LEROBOT_DATA_FILE_BYTES, DEFAULT_COLUMNS as LEROBOT_COLUMNS,
    MAX_OPEN_VIDEOS as LEROBOT_MAX_OPEN_VIDEOS, VIDEO_FILE_BYTES as LEROBOT_VIDEO_FILE_BYTES,
};
pub use robocache_datasource_rlds::rates::{oxe_rate_hz, OXE_RATES_HZ};
/// ROS 2 bags: mappings, live messages, point clouds, topic statistics
/// (the `robocache-datasource-ros2` crate).
pub use robocache_datasource_ros2 as ros2;
pub use robocache_storage::{FetchThroughput, Storage, StorageOptions, StorageUsage};
pub use robocache_video::{DecodeCounts, DecoderChoice, FrameCacheUsage, FrameFormat};

/// Helpers for tests of the data-source crates and of the crates above
/// them (feature `testing`).
#[cfg(feature = "testing")]
pub use robocache_datasource::testing;

//! What a [`crate::loader::Loader`] is asked for: windows, streams, batch
//! size and everything around them ([`LoaderConfig`]).

use robocache_datasets::{DecoderChoice, DeltaTimestamps, Shard, ShardBy, StepWindowSpec, TimeWindowSpec};

use robocache_augment::AugmentConfig;

use super::{FrameCacheBudget, MaskKind, Normalization};
use crate::{Device, Error, FrameOutput, Result};

/// How windows are cut.
#[derive(Clone, Debug, PartialEq)]
pub enum WindowSpec {
    /// robomimic `SequenceDataset` step windows.
    Steps(StepWindowSpec),
    /// Windows on a policy clock.
    Times(TimeWindowSpec),
    /// LeRobot's `delta_timestamps`: every frame a sample, each stream at
    /// its own frame offsets (a stream without offsets: the sample's frame).
    /// Every stream is read per batch (streamed), pad masks
    /// ([`MaskKind::Pad`]) whatever [`LoaderConfig::masks`] says.
    Deltas(DeltaTimestamps),
}

/// Where streams live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoaderMode {
    /// Low-dimensional streams resident on the device, images streamed.
    #[default]
    Auto,
    /// Every stream resident (an image stream is an error).
    Resident,
    /// Every stream read from the file per batch.
    Streaming,
}

/// What a [`Loader`] delivers.
#[derive(Clone, Debug)]
pub struct LoaderConfig {
    /// Streams, in the order batches hold them.
    pub streams: Vec<String>,
    pub windows: WindowSpec,
    pub batch_size: usize,
    /// Seed of the per-epoch shuffles.
    pub seed: u64,
    /// Shuffle each epoch (seeded by `seed` and the epoch); off: samples in
    /// order (evaluation), sharded the same way.
    pub shuffle: bool,
    /// This process's shard (`Shard::from_env()` for torchrun / SLURM).
    pub shard: Shard,
    /// How the shards split the windows: [`ShardBy::Windows`] (the default)
    /// or [`ShardBy::Episodes`], each rank reading only its own episodes
    /// (remote datasets: each node fetches only its ranks' part).
    pub shard_by: ShardBy,
    /// Drop the last batch of an epoch when it is short.
    pub drop_last: bool,
    /// Batches assembled ahead of the consumer (in all).
    pub prefetch: usize,
    /// Threads assembling batches (each reads, launches and waits for its own).
    pub workers: usize,
    pub mode: LoaderMode,
    /// Statistics applied to resident streams at upload (continuous channels).
    pub normalization: Option<Normalization>,
    /// CUDA: the most page-locked memory streamed batches are staged in
    /// (the device's pool, shared by its loaders; the last loader made sets
    /// it). A single upload larger than the budget takes one buffer of its
    /// size. Raised to one streamed batch per worker when that is more
    /// (workers hold their batch's buffer while they read into it).
    pub staging_bytes: usize,
    /// What the batches' masks mark: [`MaskKind::Valid`] (the default) or
    /// [`MaskKind::Pad`], LeRobot's `_is_pad`, written so by the resident
    /// assembly itself (streamed streams' masks are flipped after their
    /// resample, one small launch each).
    pub masks: MaskKind,
    /// `next()` returns once the batch is computed (the device synchronised),
    /// so telemetry counts the time until data is ready. Off: `next()`
    /// returns once the work is queued; synchronise on the device's stream.
    pub wait_until_ready: bool,
    /// The byte budget of the dataset's decoded-frame cache (camera video:
    /// frames kept in host memory after their first decode, see
    /// [`Dataset::set_frame_cache_budget`]). The default,
    /// [`FrameCacheBudget::Auto`], takes a quarter of the host memory
    /// available, shared among the node's processes; `Bytes(0)` turns it off.
    pub frame_cache_bytes: FrameCacheBudget,
    /// Where camera frames are decoded (see [`Dataset::set_video_decoders`]).
    /// `None`: NVDEC beside the CPU decoders on a CUDA loader's GPU
    /// ([`DecoderChoice::Auto`]), the dataset's setting (the CPU unless
    /// set) on a CPU loader.
    pub video_decoders: Option<DecoderChoice>,
    /// What camera frames become in batches: RGB `[B, T, H, W, 3]` u8 by
    /// default, or channels first and/or float32 (levels / 255, LeRobot's
    /// frames), cropped and resized when `frames.resize` asks
    /// ([`Device::convert_frames`]). In [`WindowSpec::Deltas`] batches
    /// video travels to the device as the decoder's YUV 4:2:0 planes and is
    /// converted there either way; 8-bit RGB image streams (`u8 [H, W, 3]`:
    /// robomimic, RLDS, bag cameras) are converted there when `frames` is
    /// not the default, in every window kind (step and time windows convert
    /// the frames they resampled, so cameras of datasets of any format come
    /// at one size in a mixture).
    pub frames: FrameOutput,
    /// The byte budget of a frame cache on the loader's device
    /// ([`DeviceFrameCache`]; 0, the default: none): camera video frames of
    /// [`WindowSpec::Deltas`] batches kept after their first decode as 8-bit
    /// RGB, already cropped and resized as `frames.resize` asks, in GPU
    /// memory for a CUDA loader and host memory for a CPU one. A later batch
    /// stacks them into its frames in one pass instead of decoding,
    /// uploading, converting and resizing them again. The first frames
    /// decoded are kept until the budget is spent. Step and time windows
    /// take 0 only.
    pub device_frame_cache_bytes: usize,
    /// Augmentation of the camera streams (`None`, the default: none):
    /// after their conversion to `frames`, on the loader's device, each
    /// window's frames of each camera with parameters drawn from (`seed`,
    /// epoch, sample, camera) — reproducible, resumable, each rank its own
    /// (docs/semantics.md). [`crate::Loader::set_evaluation`] switches to
    /// its evaluation transform (nothing random), as [`crate::live::Live`]
    /// applies it.
    pub augment: Option<AugmentConfig>,
}

impl LoaderConfig {
    /// `streams` cut by `windows` in batches of `batch_size`; shuffled with seed 0, the
    /// whole data set, last batch kept, 4 batches of prefetch over 2
    /// workers, [`LoaderMode::Auto`], 256 MiB of staging, valid masks,
    /// batches ready when delivered.
    pub fn new(streams: &[&str], windows: WindowSpec, batch_size: usize) -> Self {
        LoaderConfig {
            streams: streams.iter().map(|s| (*s).to_owned()).collect(),
            windows,
            batch_size,
            seed: 0,
            shuffle: true,
            shard: Shard::default(),
            shard_by: ShardBy::Windows,
            drop_last: false,
            prefetch: 4,
            workers: 2,
            mode: LoaderMode::Auto,
            normalization: None,
            staging_bytes: crate::cuda::DEFAULT_STAGING_BYTES,
            masks: MaskKind::Valid,
            wait_until_ready: true,
            frame_cache_bytes: FrameCacheBudget::default(),
            video_decoders: None,
            frames: FrameOutput::default(),
            device_frame_cache_bytes: 0,
            augment: None,
        }
    }
}

/// The GPU whose video engines (NVDEC) a loader on `device` decodes with:
/// its own GPU, or GPU 0 for a CPU loader.
pub fn nvdec_device(device: &Device) -> Result<u32> {
    let Device::Cuda(cuda) = device else { return Ok(0) };
    u32::try_from(cuda.ordinal()).map_err(|_| Error::Limit {
        what: format!("GPU {}", cuda.ordinal()),
        limit: "NVDEC takes GPU numbers that fit 32 bits".into(),
    })
}

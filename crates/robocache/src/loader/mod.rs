//! [`Loader`]: from a dataset to batches of aligned windows on a device, in
//! a training loop.
//!
//! Streams are split by kind:
//! - low-dimensional streams are **GPU-resident** ([`ResidentStreams`]):
//!   uploaded once, every batch assembled on the device in one launch from
//!   the sampled `(episode, anchor)` pairs — the host only draws indices;
//! - image streams are **streamed**: the rows each batch needs are read
//!   (HDF5 hyperslabs), staged in page-locked memory within a byte budget
//!   ([`LoaderConfig::staging_bytes`]), copied on the device's copy stream
//!   (overlapping the kernels queued before) and resampled there.
//!
//! Worker threads assemble whole batches (both kinds of streams) up to
//! `prefetch` batches ahead of the consumer through bounded queues, so the
//! training step only waits when the data cannot keep up.
//!
//! On the CPU backend the same code runs the reference, so CPU and CUDA
//! batches are equal for the same seed. Every batch is a [`WindowBatch`]:
//! one tensor per stream (device pointer, shape, dtype; the device's
//! stream handle to synchronise on), pad masks, episode ids and anchors.
//!
//! ```
//! use std::sync::Arc;
//! use robocache::datasets::{synthetic, Dataset, TimeWindowSpec};
//! use robocache::{Device, Loader, LoaderConfig, WindowSpec};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("demo.hdf5");
//! synthetic::write_robomimic(&path, &synthetic::SyntheticSpec { episodes: 8, image: Some([16, 16]), ..Default::default() })?;
//! let dataset = Arc::new(Dataset::open(&path)?);
//! let windows = WindowSpec::Times(TimeWindowSpec { hz: 50.0, history: 2, horizon: 16 });
//! let streams = ["actions", "obs/joint_pos", "obs/robot0_eef_quat", "obs/agentview_image"];
//! let loader = Loader::new(&Device::auto(), dataset, LoaderConfig::new(&streams, windows, 32))?;
//! for batch in loader.epoch(0).take(3) {
//!     let batch = batch?;
//!     assert_eq!(batch.stream("obs/joint_pos").unwrap().data.shape(), [32, 18, 7]);
//! }
//! println!("{:?}", loader.telemetry());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod frame_cache_budget;
pub mod normalization;
pub(crate) mod resident;
pub mod telemetry;

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use robocache_cpu::HostVec;
use robocache_datasets::{
    Dataset, DecoderChoice, DeltaTimestamps, DeltaWindows, Sampler, Shard, ShardBy, StepWindowSpec, StepWindows,
    TimeWindowSpec, TimeWindows,
};

pub use crate::assembly::{MaskKind, WindowShape};
pub use frame_cache_budget::{auto_bytes, host_memory_available, FrameCacheBudget, AUTO_SHARE};
pub use normalization::{Normalization, NormalizationMode, StreamStatistics};
pub use resident::ResidentStreams;
pub use telemetry::{FrameCacheReport, Telemetry, TelemetryReport, VideoDecodeReport};

use crate::assembly::AssemblyRequest;
use crate::backend::operations::CudaOperations;
use crate::backend::CudaBackend;
use crate::ops::descriptors::resize_plan;
use crate::windows::{BatchStream, WindowBatch};
use crate::{Device, DeviceFrameCache, Error, FrameOutput, Result, Tensor};

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
    /// What camera frames become in [`WindowSpec::Deltas`] batches: RGB
    /// `[B, T, H, W, 3]` u8 by default, or channels first and/or float32
    /// (levels / 255, LeRobot's frames), cropped and resized when
    /// `frames.resize` asks ([`Device::convert_frames`]). Video travels to
    /// the device as the decoder's YUV 4:2:0 planes and is converted there
    /// either way; 8-bit RGB image streams (`u8 [H, W, 3]`) are converted
    /// there too when `frames` is not the default. Step and time windows
    /// give camera frames as u8 `[H, W, 3]` and take only the default.
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

#[derive(Debug)]
enum Cut {
    Steps(StepWindows),
    Times(TimeWindows),
    Deltas(DeltaWindows),
}

impl Cut {
    fn len(&self) -> usize {
        match self {
            Cut::Steps(w) => w.len(),
            Cut::Times(w) => w.len(),
            Cut::Deltas(w) => w.len(),
        }
    }

    /// `(episode, anchor)`: the anchor time, or the anchor step for step windows.
    fn anchor(&self, sample: usize) -> Result<(usize, f64)> {
        Ok(match self {
            Cut::Steps(w) => {
                let window = w.window(sample)?;
                (window.episode, window.step as f64)
            }
            Cut::Times(w) => {
                let window = w.window(sample)?;
                (window.episode, window.anchor)
            }
            Cut::Deltas(w) => {
                let window = w.window(sample)?;
                (window.episode, window.frame as f64 / w.fps())
            }
        })
    }

    fn shape(&self) -> WindowShape {
        match self {
            Cut::Steps(w) => WindowShape::Steps { history: w.spec().frame_stack - 1, len: w.spec().window_len() },
            Cut::Times(w) => {
                let spec = w.spec();
                WindowShape::Times { hz: spec.hz, history: spec.history, len: spec.window_len() }
            }
            // Never resident (Loader::new streams every stream of these).
            Cut::Deltas(w) => WindowShape::Steps { history: 0, len: w.spec().deltas.first().map_or(1, |d| d.1.len()) },
        }
    }
}

/// Batches of windows of one dataset on one device.
#[derive(Debug)]
pub struct Loader {
    device: Device,
    dataset: Arc<Dataset>,
    config: LoaderConfig,
    cut: Arc<Cut>,
    resident: Option<Arc<ResidentStreams>>,
    epochs: Arc<Epochs>,
    telemetry: Arc<Mutex<Telemetry>>,
    utilization: telemetry::UtilizationSampler,
    /// Frames kept on the device (`LoaderConfig::device_frame_cache_bytes`).
    frame_cache: Option<Arc<DeviceFrameCache>>,
}

impl Loader {
    /// Numbers the windows, uploads the resident streams and checks the config.
    pub fn new(device: &Device, dataset: Arc<Dataset>, config: LoaderConfig) -> Result<Self> {
        if config.batch_size == 0 {
            return Err(invalid("batch_size must be at least 1".into()));
        }
        if config.streams.is_empty() {
            return Err(invalid("a loader needs at least one stream".into()));
        }
        let names: Vec<&str> = config.streams.iter().map(String::as_str).collect();
        let cut = match &config.windows {
            WindowSpec::Steps(spec) => Cut::Steps(StepWindows::new(dataset.info(), spec)?),
            WindowSpec::Times(spec) => Cut::Times(TimeWindows::new(&dataset, &names, spec)?),
            WindowSpec::Deltas(spec) => {
                if let Some((key, _)) = spec.deltas.iter().find(|(key, _)| !config.streams.contains(key)) {
                    return Err(invalid(format!(
                        "delta_timestamps names `{key}`, which is not among the loader's streams ({})",
                        config.streams.join(", ")
                    )));
                }
                if config.mode == LoaderMode::Resident {
                    return Err(invalid(
                        "delta_timestamps windows read every stream per batch: use LoaderMode::Auto or Streaming"
                            .into(),
                    ));
                }
                Cut::Deltas(DeltaWindows::new(dataset.info(), spec)?)
            }
        };
        let deltas = matches!(cut, Cut::Deltas(_));
        if !deltas && config.frames != FrameOutput::default() {
            return Err(invalid(format!(
                "LoaderConfig::frames {:?} applies to delta_timestamps windows; step and time windows give camera video as u8 [H, W, 3] (the default)",
                config.frames
            )));
        }
        if !deltas && config.device_frame_cache_bytes > 0 {
            return Err(invalid(format!(
                "LoaderConfig::device_frame_cache_bytes ({}) applies to delta_timestamps windows; step and time windows keep no frames on the device",
                config.device_frame_cache_bytes
            )));
        }
        let first = dataset.info().episodes.first().ok_or_else(|| invalid("the dataset has no episodes".into()))?;
        let (mut resident_names, mut streamed) = (Vec::new(), Vec::new());
        for &name in &names {
            let (_, info) = dataset.stream(0, name)?;
            let image = info.is_image();
            // A crop or resize that cannot apply to a camera stream fails here,
            // not in the first batch.
            if let Some(resize) = &config.frames.resize {
                let size = dataset.video_frame_size(name).or(crate::windows::rgb_image_size(info));
                if let Some((width, height)) = size {
                    resize_plan(resize, width, height).map_err(|error| match error {
                        Error::Resize { what, problem } => {
                            Error::Resize { what: format!("stream `{name}`: {what}"), problem }
                        }
                        other => other,
                    })?;
                }
            }
            match config.mode {
                _ if deltas => streamed.push(name.to_owned()),
                LoaderMode::Streaming => streamed.push(name.to_owned()),
                LoaderMode::Resident if image => {
                    return Err(invalid(format!(
                        "stream `{name}` of episode `{}` is an image stream: use LoaderMode::Auto or Streaming",
                        first.name
                    )))
                }
                LoaderMode::Resident | LoaderMode::Auto if !image => resident_names.push(name),
                LoaderMode::Resident | LoaderMode::Auto => streamed.push(name.to_owned()),
            }
        }
        // Sharded by episode, only this shard's episodes are read (and, from
        // a remote dataset, fetched) for the resident streams.
        let (sampler, episodes_read) = match config.shard_by {
            ShardBy::Windows => (Sampler::new(cut.len(), config.seed, config.shard)?, vec![true; dataset.len()]),
            ShardBy::Episodes => {
                let episode_of = (0..cut.len()).map(|s| cut.anchor(s).map(|(e, _)| e)).collect::<Result<Vec<_>>>()?;
                let sampler = Sampler::by_episode(&episode_of, config.seed, config.shard)?;
                let mut read = vec![false; dataset.len()];
                for &s in sampler.own_samples().unwrap_or_default() {
                    read[episode_of[s]] = true;
                }
                (sampler, read)
            }
        };
        let resident = if resident_names.is_empty() {
            None
        } else {
            let normalization = config.normalization.as_ref();
            Some(Arc::new(ResidentStreams::upload_episodes(
                device,
                &dataset,
                &resident_names,
                normalization,
                &episodes_read,
            )?))
        };
        if let Device::Cuda(cuda) = device {
            // Every worker holds one batch's staging buffer while it reads
            // into it (camera frames are decoded straight into it): a budget
            // below one batch per worker would make the workers take turns.
            let batch_bytes = streamed_batch_bytes(&cut, &dataset, &streamed, config.batch_size)?;
            let needed = batch_bytes.saturating_mul(config.workers.max(1));
            if needed > config.staging_bytes {
                tracing::info!(
                    batch_bytes,
                    workers = config.workers,
                    budget = needed,
                    "staging budget raised to one streamed batch per worker"
                );
            }
            cuda.set_staging_budget(config.staging_bytes.max(needed))?;
            // Batches are allocated and freed on the device over and over:
            // the pool keeps what the batches in flight take (prefetched,
            // being assembled, held by the consumer) instead of handing it
            // back to the driver at every synchronisation and mapping it
            // again for the next batch (docs/architecture.md).
            let device_batch = device_batch_bytes(
                &cut,
                &dataset,
                &streamed,
                config.batch_size,
                config.frames,
                config.device_frame_cache_bytes > 0,
            )?;
            let in_flight = config.prefetch + config.workers.max(1) + 2;
            cuda.keep_pool_memory(device_batch.saturating_mul(in_flight))?;
        }
        if let Some(bytes) = config.frame_cache_bytes.resolve() {
            dataset.set_frame_cache_budget(bytes);
        }
        let decoders = match (config.video_decoders, device) {
            (Some(choice), _) => Some(choice),
            (None, Device::Cuda(_)) => Some(DecoderChoice::auto(nvdec_device(device)?)),
            (None, _) => None,
        };
        if let Some(choice) = decoders {
            dataset.set_video_decoders(choice);
        }
        tracing::info!(
            device = %device,
            windows = cut.len(),
            shard = format!("{}/{}", config.shard.rank, config.shard.world_size),
            shard_by = ?config.shard_by,
            resident = resident_names.len(),
            resident_bytes = resident.as_ref().map_or(0, |r| r.size_in_bytes()),
            streamed = streamed.len(),
            "loader ready"
        );
        let cut = Arc::new(cut);
        let telemetry = Arc::new(Mutex::new(Telemetry::default()));
        let frame_cache = (config.device_frame_cache_bytes > 0)
            .then(|| Arc::new(DeviceFrameCache::new(device, config.frames.resize, config.device_frame_cache_bytes)));
        let job = Arc::new(Job {
            device: device.clone(),
            dataset: dataset.clone(),
            cut: cut.clone(),
            resident: resident.clone(),
            streamed,
            streams: config.streams.clone(),
            masks: config.masks,
            wait_until_ready: config.wait_until_ready,
            frames: config.frames,
            frame_cache: frame_cache.clone(),
        });
        let epochs = Arc::new(Epochs {
            job,
            sampler,
            batch_size: config.batch_size,
            shuffle: config.shuffle,
            drop_last: config.drop_last,
            workers: config.workers,
            prefetch: config.prefetch,
            telemetry: telemetry.clone(),
            ahead: Mutex::new(None),
        });
        Ok(Loader {
            device: device.clone(),
            dataset,
            config,
            cut,
            resident,
            epochs,
            telemetry,
            utilization: telemetry::UtilizationSampler::start(device),
            frame_cache,
        })
    }

    /// One loader per device for one process: device `i` of `n` takes
    /// shard `rank · n + i` of `world_size · n`, so all devices of all
    /// processes partition the windows.
    pub fn per_device(devices: &[Device], dataset: Arc<Dataset>, config: LoaderConfig) -> Result<Vec<Loader>> {
        let n = devices.len();
        devices
            .iter()
            .enumerate()
            .map(|(i, device)| {
                let shard = Shard::new(config.shard.rank * n + i, config.shard.world_size * n)?;
                Loader::new(device, dataset.clone(), LoaderConfig { shard, ..config.clone() })
            })
            .collect()
    }

    /// The device batches are on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Windows of the whole data set (all shards).
    pub fn windows(&self) -> usize {
        self.cut.len()
    }

    /// Windows this shard yields per epoch.
    pub fn samples_per_epoch(&self) -> usize {
        self.epochs.sampler.shard_len()
    }

    /// Batches per epoch.
    pub fn batches_per_epoch(&self) -> usize {
        let n = self.samples_per_epoch();
        if self.config.drop_last {
            n / self.config.batch_size
        } else {
            n.div_ceil(self.config.batch_size)
        }
    }

    /// Bytes of resident streams on the device.
    pub fn resident_bytes(&self) -> usize {
        self.resident.as_ref().map_or(0, |r| r.size_in_bytes())
    }

    /// The batches of epoch `epoch`, in its shuffled order (in order without `shuffle`). Worker threads
    /// assemble them ahead of the consumer (see [`LoaderConfig::prefetch`]).
    ///
    /// When an epoch has no more than `workers` batches left to hand over,
    /// it starts epoch `epoch + 1` in the background, so that the next
    /// epoch's first batches are assembled while the training loop finishes
    /// this one. Asking for that epoch next (from its first batch) takes
    /// it; asking for any other drops it (its workers stop). The batches are
    /// the same either way.
    pub fn epoch(&self, epoch: u64) -> Epoch {
        self.epoch_from(epoch, 0)
    }

    /// The batches of epoch `epoch` from batch `first_batch` on (to resume
    /// an epoch where a checkpoint stopped: the order is the epoch's, the
    /// first `first_batch` batches are skipped without being assembled).
    pub fn epoch_from(&self, epoch: u64, first_batch: usize) -> Epoch {
        let ahead = self.epochs.ahead.lock().ok().and_then(|mut ahead| ahead.take());
        if let Some(started) = ahead {
            if started.number == epoch && first_batch == 0 {
                return started;
            }
        }
        self.epochs.start(epoch, first_batch)
    }

    /// The epoch started ahead by the one before it, if one is waiting.
    pub fn started_ahead(&self) -> Option<u64> {
        self.epochs.ahead.lock().ok().and_then(|ahead| ahead.as_ref().map(|e| e.number))
    }

    /// What the loader delivered since it was made or last reset.
    pub fn telemetry(&self) -> TelemetryReport {
        let mut report = self.telemetry.lock().map(|t| t.report()).unwrap_or_default();
        (report.gpu_utilization_percent, report.gpu_utilization_note) = self.utilization.mean();
        if let Device::Cuda(cuda) = &self.device {
            if let Ok((budget, peak)) = cuda.staging_usage() {
                (report.staging_budget_bytes, report.staging_peak_bytes) = (Some(budget), Some(peak));
            }
        }
        report.frame_cache = self.dataset.frame_cache_usage().map(|usage| FrameCacheReport {
            automatic: matches!(self.config.frame_cache_bytes, FrameCacheBudget::Auto { .. }),
            ..usage.into()
        });
        report.device_frame_cache = self.frame_cache.as_ref().map(|cache| cache.usage().into());
        report.video_decode = self.dataset.video_decode_counts().map(Into::into);
        report
    }

    /// Forgets the telemetry so far (after warm-up).
    pub fn reset_telemetry(&self) {
        if let Ok(mut t) = self.telemetry.lock() {
            t.reset();
        }
        self.utilization.reset();
        self.dataset.reset_frame_cache_counts();
        if let Some(cache) = &self.frame_cache {
            cache.reset_counts();
        }
    }

    /// The time a consumer that drops each batch as it arrives takes for
    /// `batches` batches, after 3 warm-up batches (not timed), going through
    /// epochs 0, 1, … as needed. This is the loop `robocache bench loader`
    /// times. The Python bench runs it on the Python Loader's own loader,
    /// interleaved with Python's iteration, so both are compared in one
    /// process.
    pub fn time_batches(&self, batches: usize) -> Result<std::time::Duration> {
        if self.batches_per_epoch() == 0 {
            return Err(invalid("time_batches: the loader has no batches".into()));
        }
        const WARM_UP: usize = 3;
        let (mut epoch, mut done, mut started) = (0u64, 0usize, None);
        loop {
            for batch in self.epoch(epoch) {
                drop(batch?);
                done += 1;
                if done == WARM_UP {
                    started = Some(Instant::now());
                }
                if done >= batches + WARM_UP {
                    return Ok(started.map_or_else(std::time::Duration::default, |s| s.elapsed()));
                }
            }
            epoch += 1;
        }
    }
}

/// What starting an epoch takes, shared by the loader and (weakly) by its
/// epochs: an epoch about to end starts the next one and leaves it here.
#[derive(Debug)]
struct Epochs {
    job: Arc<Job>,
    sampler: Sampler,
    batch_size: usize,
    shuffle: bool,
    drop_last: bool,
    workers: usize,
    prefetch: usize,
    telemetry: Arc<Mutex<Telemetry>>,
    /// The next epoch, started while the one before it handed over its
    /// last batches.
    ahead: Mutex<Option<Epoch>>,
}

impl Epochs {
    /// Epoch `epoch` from batch `first_batch`, its workers started.
    fn start(self: &Arc<Self>, epoch: u64, first_batch: usize) -> Epoch {
        let order = if self.shuffle { self.sampler.epoch(epoch) } else { self.sampler.sequential() };
        let mut batches: Vec<Vec<usize>> = order.chunks(self.batch_size).map(<[usize]>::to_vec).collect();
        if self.drop_last && batches.last().is_some_and(|b| b.len() < self.batch_size) {
            batches.pop();
        }
        batches.drain(..first_batch.min(batches.len()));
        let batches = Arc::new(batches);
        let workers = self.workers.clamp(1, batches.len().max(1));
        let capacity = self.prefetch.max(1).div_ceil(workers);
        let mut queues = Vec::with_capacity(workers);
        let mut failed = None;
        for worker in 0..workers {
            let (sender, receiver) = sync_channel(capacity);
            let (job, batches) = (self.job.clone(), batches.clone());
            let spawned = std::thread::Builder::new().name(format!("robocache-loader-{worker}")).spawn(move || {
                for samples in batches.iter().skip(worker).step_by(workers) {
                    if sender.send(job.assemble(samples.clone())).is_err() {
                        return; // the consumer dropped the epoch
                    }
                }
            });
            match spawned {
                Ok(handle) => queues.push((receiver, handle)),
                Err(e) => failed = Some(invalid(format!("cannot start a loader thread: {e}"))),
            }
        }
        Epoch {
            queues,
            failed,
            next: 0,
            total: batches.len(),
            telemetry: self.telemetry.clone(),
            number: epoch,
            epochs: Arc::downgrade(self),
            started_next: false,
        }
    }
}

/// What the worker threads of an epoch share.
#[derive(Debug)]
struct Job {
    device: Device,
    dataset: Arc<Dataset>,
    cut: Arc<Cut>,
    resident: Option<Arc<ResidentStreams>>,
    streamed: Vec<String>,
    streams: Vec<String>,
    masks: MaskKind,
    wait_until_ready: bool,
    frames: FrameOutput,
    frame_cache: Option<Arc<DeviceFrameCache>>,
}

impl Job {
    /// One batch: resident streams in one launch, streamed ones read and
    /// resampled, in the configured stream order, with its columns on the
    /// device; synchronised when asked.
    fn assemble(&self, samples: Vec<usize>) -> Result<WindowBatch> {
        let pairs = samples.iter().map(|&s| self.cut.anchor(s)).collect::<Result<Vec<_>>>()?;
        let episodes: Vec<usize> = pairs.iter().map(|&(e, _)| e).collect();
        // Seconds, as every `WindowBatch` (step windows: the anchor step over
        // the dataset's rate, as `Device::step_window_batch` gives).
        let anchors: Vec<f64> = match &*self.cut {
            Cut::Steps(_) => {
                let rate = self.dataset.info().rate_hz;
                pairs.iter().map(|&(_, step)| step / rate).collect()
            }
            Cut::Times(_) | Cut::Deltas(_) => pairs.iter().map(|&(_, a)| a).collect(),
        };
        let columns: Vec<i64> = (samples.iter().map(|&s| s as i64))
            .chain(episodes.iter().map(|&e| e as i64))
            .chain(anchors.iter().map(|a| a.to_bits() as i64))
            .collect();
        let (mut parts, columns) = match &self.resident {
            Some(resident) => {
                let request =
                    AssemblyRequest { shape: self.cut.shape(), samples: &pairs, masks: self.masks, columns: &columns };
                let assembled = resident.assemble(&request)?;
                (assembled.streams, assembled.columns)
            }
            None => (Vec::new(), Tensor::from_slice(&self.device, &columns, &[3, samples.len()])?),
        };
        if !self.streamed.is_empty() {
            let names: Vec<&str> = self.streamed.iter().map(String::as_str).collect();
            let batch = match self.cut.as_ref() {
                Cut::Steps(w) => self.device.step_window_batch(&self.dataset, w, &samples, &names)?,
                Cut::Times(w) => self.device.time_window_batch(&self.dataset, w, &samples, &names)?,
                Cut::Deltas(w) => match &self.frame_cache {
                    Some(cache) => {
                        self.device.delta_window_batch_cached(&self.dataset, w, &samples, &names, self.frames, cache)?
                    }
                    None => {
                        self.device.delta_window_batch_with_frames(&self.dataset, w, &samples, &names, self.frames)?
                    }
                },
            };
            let keep_pad = matches!(*self.cut, Cut::Deltas(_));
            for mut stream in batch.streams {
                if stream.mask_kind != self.masks && !keep_pad {
                    flip_mask(&self.device, &mut stream)?;
                }
                parts.push(stream);
            }
        }
        let mut ordered = Vec::with_capacity(self.streams.len());
        for name in &self.streams {
            let at =
                parts.iter().position(|p| &p.name == name).ok_or_else(|| invalid(format!("no stream `{name}`")))?;
            ordered.push(parts.swap_remove(at));
        }
        if self.wait_until_ready {
            self.device.synchronize()?;
        }
        Ok(WindowBatch { streams: ordered, samples, episodes, anchors, columns: Some(columns) })
    }
}

/// Bytes of one batch's streamed streams (their staging buffers): camera
/// video of delta windows is staged as YUV 4:2:0 planes.
fn streamed_batch_bytes(cut: &Cut, dataset: &Dataset, streamed: &[String], batch_size: usize) -> Result<usize> {
    sum_over_streams(cut, dataset, streamed, batch_size, |info, video| match video {
        Some((width, height)) => robocache_video::yuv420_len(width, height),
        None => info.step_bytes(),
    })
}

/// Device bytes of one batch's streamed streams: each tensor, and for
/// camera video of delta windows the YUV planes it is converted from (and,
/// with a frame cache on the device, the 8-bit frames it stacks from); other
/// streams twice (their upload and the resampled result).
fn device_batch_bytes(
    cut: &Cut,
    dataset: &Dataset,
    streamed: &[String],
    batch_size: usize,
    frames: FrameOutput,
    frame_cache: bool,
) -> Result<usize> {
    // A converted frame: its output, and what the conversion holds on the
    // device meanwhile (the RGB frame and the horizontal pass, when resized).
    let converted = |width: usize, height: usize| {
        let (out_width, out_height) = frames.resize.map_or((width, height), |r| (r.width, r.height));
        let passes = if frames.resize.is_some() { 3 * width * height + 3 * height * out_width } else { 0 };
        let stacked_from = if frame_cache { 3 * out_width * out_height } else { 0 };
        passes + stacked_from + 3 * out_width * out_height * frames.dtype.dtype().size_in_bytes()
    };
    let deltas = matches!(cut, Cut::Deltas(_));
    sum_over_streams(cut, dataset, streamed, batch_size, |info, video| match video {
        Some((width, height)) => robocache_video::yuv420_len(width, height) + converted(width, height),
        None => match crate::windows::rgb_image_size(info) {
            Some((width, height)) if deltas && frames != FrameOutput::default() => {
                info.step_bytes() + converted(width, height)
            }
            _ => 2 * info.step_bytes(),
        },
    })
}

/// `batch_size × steps × step_bytes(stream, video size)` summed over the
/// streamed streams, where the video size is `Some((width, height))` for
/// camera video of delta windows (read as YUV and converted on the device).
fn sum_over_streams(
    cut: &Cut,
    dataset: &Dataset,
    streamed: &[String],
    batch_size: usize,
    step_bytes: impl Fn(&robocache_datasets::StreamInfo, Option<(usize, usize)>) -> usize,
) -> Result<usize> {
    let mut total = 0usize;
    for name in streamed {
        let (_, info) = dataset.stream(0, name)?;
        let (steps, video) = match cut {
            Cut::Deltas(w) => (w.offsets_of(name).map_or(1, <[i64]>::len), dataset.video_frame_size(name)),
            _ => (cut.shape().len(), None),
        };
        total = total.saturating_add(batch_size.saturating_mul(steps).saturating_mul(step_bytes(info, video)));
    }
    Ok(total)
}

/// Turns a stream's mask into the other kind (valid to padding and back):
/// on the host for the CPU, by a launch queued on the device's stream else.
fn flip_mask(device: &Device, stream: &mut BatchStream) -> Result<()> {
    match device {
        Device::Cpu => {
            let flipped: Vec<bool> = stream.mask.to_vec::<bool>()?.into_iter().map(|v| !v).collect();
            stream.mask = Tensor::from_host_vec(device, HostVec::Bool(flipped), stream.mask.shape())?;
        }
        Device::Cuda(cuda) => cuda.flip_mask(&mut stream.mask)?,
    }
    stream.mask_kind = match stream.mask_kind {
        MaskKind::Valid => MaskKind::Pad,
        MaskKind::Pad => MaskKind::Valid,
    };
    Ok(())
}

/// The batches of one epoch (an iterator), assembled by worker threads
/// ahead of the consumer; batch `i` comes from worker `i mod workers`, so
/// the order is the epoch's. Dropping it stops the workers.
#[derive(Debug)]
pub struct Epoch {
    queues: Vec<(Receiver<Result<WindowBatch>>, JoinHandle<()>)>,
    failed: Option<Error>,
    next: usize,
    total: usize,
    telemetry: Arc<Mutex<Telemetry>>,
    /// Its number (the shuffle's seed).
    number: u64,
    /// Weak: the loader owns the epoch started ahead, which must not keep
    /// the loader's state alive.
    epochs: Weak<Epochs>,
    started_next: bool,
}

impl Iterator for Epoch {
    type Item = Result<WindowBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(error) = self.failed.take() {
            self.next = self.total;
            return Some(Err(error));
        }
        if self.next >= self.total || self.queues.is_empty() {
            return None;
        }
        let entered = Instant::now();
        let (receiver, _) = &self.queues[self.next % self.queues.len()];
        self.next += 1;
        let batch = receiver.recv().unwrap_or_else(|_| Err(invalid("a loader thread stopped".into())));
        if let Ok(batch) = &batch {
            if let Ok(mut telemetry) = self.telemetry.lock() {
                telemetry.record(entered, batch.len());
            }
        }
        if !self.started_next && self.total - self.next <= self.queues.len() {
            // Every worker is on its last batch of this epoch or done.
            self.started_next = true;
            if let Some(epochs) = self.epochs.upgrade() {
                let next = epochs.start(self.number + 1, 0);
                if let Ok(mut ahead) = epochs.ahead.lock() {
                    *ahead = Some(next);
                }
            }
        }
        Some(batch)
    }
}

fn invalid(message: String) -> Error {
    Error::Dataset(robocache_datasets::Error::Invalid(message))
}

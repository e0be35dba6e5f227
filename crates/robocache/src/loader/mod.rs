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
//! let windows = WindowSpec::Times(TimeWindowSpec { hz: 50.0, history: 2, horizon: 16, causal: false });
//! let streams = ["actions", "obs/joint_pos", "obs/robot0_eef_quat", "obs/agentview_image"];
//! let loader = Loader::new(&Device::auto(), dataset, LoaderConfig::new(&streams, windows, 32))?;
//! for batch in loader.epoch(0).take(3) {
//!     let batch = batch?;
//!     assert_eq!(batch.stream("obs/joint_pos").unwrap().data.shape(), [32, 18, 7]);
//! }
//! println!("{:?}", loader.telemetry());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod augmentation;
mod config;
mod epochs;
mod frame_cache_budget;
pub mod mixture;
pub mod normalization;
pub(crate) mod resident;
mod spec_of;
pub mod telemetry;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use robocache_datasets::{Dataset, DecoderChoice, DeltaWindows, Sampler, Shard, ShardBy, StepWindows, TimeWindows};

pub use crate::assembly::{MaskKind, WindowShape};
pub use config::{nvdec_device, LoaderConfig, LoaderMode, WindowSpec};
pub use epochs::Epoch;
use epochs::{Epochs, Job};
pub use frame_cache_budget::{auto_bytes, host_memory_available, FrameCacheBudget, AUTO_SHARE};
pub use normalization::{Normalization, NormalizationMode, StreamStatistics};
pub use resident::ResidentStreams;
pub use telemetry::{FrameCacheReport, Telemetry, TelemetryReport, VideoDecodeReport};

use crate::backend::CudaBackend;
use crate::ops::descriptors::resize_plan;
use crate::{Device, DeviceFrameCache, Error, FrameOutput, Result};

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
                WindowShape::Times { hz: spec.hz, history: spec.history, len: spec.window_len(), causal: spec.causal }
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
                config.augment.is_some(),
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
            augmentation: augmentation::Augmentation::new(&dataset, &config)?,
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

    /// The batch of windows `windows` (numbered as the loader numbers them,
    /// `0..windows()`), assembled now on this thread: what a mixture asks of
    /// each of its datasets ([`mixture::MixtureLoader`]).
    pub fn batch(&self, windows: &[usize]) -> Result<crate::windows::WindowBatch> {
        if let Some(&bad) = windows.iter().find(|&&w| w >= self.windows()) {
            return Err(invalid(format!("window {bad}: the loader has {} windows", self.windows())));
        }
        self.epochs.job.assemble(0, windows.to_vec())
    }

    /// [`Loader::batch`] without waiting for the device, whatever
    /// `wait_until_ready` says: the batch's work is queued on the device's
    /// stream, which orders whatever is queued after it (a mixture pads its
    /// members' batches this way and waits once).
    pub fn batch_queued(&self, windows: &[usize]) -> Result<crate::windows::WindowBatch> {
        self.batch_queued_in_epoch(0, windows)
    }

    /// [`Loader::batch_queued`] as epoch `epoch` draws its augmentations
    /// ([`LoaderConfig::augment`]; [`Loader::batch`] draws epoch 0's).
    pub fn batch_queued_in_epoch(&self, epoch: u64, windows: &[usize]) -> Result<crate::windows::WindowBatch> {
        if let Some(&bad) = windows.iter().find(|&&w| w >= self.windows()) {
            return Err(invalid(format!("window {bad}: the loader has {} windows", self.windows())));
        }
        self.epochs.job.assemble_then(epoch, windows.to_vec(), false)
    }

    /// Evaluation mode on or off: with [`LoaderConfig::augment`], camera
    /// frames get its evaluation transform (a centre crop, nothing random)
    /// instead of random augmentations, from the next batch assembled (the
    /// batches already prefetched keep theirs). Without augmentation it
    /// changes nothing.
    pub fn set_evaluation(&self, on: bool) {
        if let Some(augmentation) = &self.epochs.job.augmentation {
            augmentation.set_evaluation(on);
        }
    }

    /// The augmentation of its camera streams, if any.
    pub(crate) fn augmentation(&self) -> Option<&augmentation::Augmentation> {
        self.epochs.job.augmentation.as_ref()
    }

    /// Whether the loader is in evaluation mode ([`Loader::set_evaluation`]).
    pub fn evaluation(&self) -> bool {
        self.epochs.job.augmentation.as_ref().is_some_and(|a| a.evaluation())
    }

    /// Whether its batches are waited for ([`LoaderConfig::wait_until_ready`]).
    pub fn waits_until_ready(&self) -> bool {
        self.config.wait_until_ready
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

    /// The dataset it reads.
    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.dataset
    }

    /// The device batches are on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// What it was asked for.
    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }

    /// The streams it holds resident (on its device, f32, normalized).
    pub fn resident_names(&self) -> Vec<&str> {
        self.resident.as_ref().map(|r| r.names()).unwrap_or_default()
    }

    /// Windows of the whole data set (all shards).
    pub fn windows(&self) -> usize {
        self.cut.len()
    }

    /// Each window's episode, in window order (all shards): what sharding
    /// by episode assigns ranks by.
    pub fn window_episodes(&self) -> Result<Vec<usize>> {
        (0..self.cut.len()).map(|s| self.cut.anchor(s).map(|(e, _)| e)).collect()
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
    augment: bool,
) -> Result<usize> {
    // What an augmentation holds on the device meanwhile, per frame of the
    // output's size: two float working frames and its output (f32 at most).
    let augmented = |width: usize, height: usize| {
        let (out_width, out_height) = frames.resize.map_or((width, height), |r| (r.width, r.height));
        if augment {
            3 * 4 * 3 * out_width * out_height
        } else {
            0
        }
    };
    // A converted frame: its output, and what the conversion holds on the
    // device meanwhile (the RGB frame and the horizontal pass, when resized).
    let converted = |width: usize, height: usize| {
        let (out_width, out_height) = frames.resize.map_or((width, height), |r| (r.width, r.height));
        let passes = if frames.resize.is_some() { 3 * width * height + 3 * height * out_width } else { 0 };
        let stacked_from = if frame_cache { 3 * out_width * out_height } else { 0 };
        passes
            + stacked_from
            + 3 * out_width * out_height * frames.dtype.dtype().size_in_bytes()
            + augmented(width, height)
    };
    let deltas = matches!(cut, Cut::Deltas(_));
    sum_over_streams(cut, dataset, streamed, batch_size, |info, video| match video {
        Some((width, height)) => robocache_video::yuv420_len(width, height) + converted(width, height),
        None => match crate::windows::rgb_image_size(info) {
            // Read as images, converted on the device (delta windows as they
            // read; step and time windows after their resample).
            Some((width, height)) if frames != FrameOutput::default() => {
                let read = if deltas { 1 } else { 2 };
                read * info.step_bytes() + converted(width, height)
            }
            Some((width, height)) => 2 * info.step_bytes() + augmented(width, height),
            None => 2 * info.step_bytes(),
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

fn invalid(message: String) -> Error {
    Error::Dataset(robocache_datasets::Error::Invalid(message))
}

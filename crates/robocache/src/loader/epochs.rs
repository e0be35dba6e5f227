//! An epoch's pipeline: worker threads assembling batches in order, each
//! into a bounded queue, handed out in sampler order by [`Epoch`], and the
//! next epoch started while the last batches of one are handed over.

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use robocache_cpu::HostVec;
use robocache_datasets::{Dataset, Sampler};

use super::augmentation::Augmentation;
use super::{invalid, Cut, MaskKind, ResidentStreams, Telemetry};
use crate::assembly::AssemblyRequest;
use crate::backend::operations::CudaOperations;
use crate::windows::{BatchStream, CachedFrames, WindowBatch};
use crate::{Device, DeviceFrameCache, Error, FrameOutput, Result, Tensor};

/// What starting an epoch takes, shared by the loader and (weakly) by its
/// epochs: an epoch about to end starts the next one and leaves it here.
#[derive(Debug)]
pub(super) struct Epochs {
    pub(super) job: Arc<Job>,
    pub(super) sampler: Sampler,
    pub(super) batch_size: usize,
    pub(super) shuffle: bool,
    pub(super) drop_last: bool,
    pub(super) workers: usize,
    pub(super) prefetch: usize,
    pub(super) telemetry: Arc<Mutex<Telemetry>>,
    /// The next epoch, started while the one before it handed over its
    /// last batches.
    pub(super) ahead: Mutex<Option<Epoch>>,
}

impl Epochs {
    /// Epoch `epoch` from batch `first_batch`, its workers started.
    pub(super) fn start(self: &Arc<Self>, epoch: u64, first_batch: usize) -> Epoch {
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
                    if sender.send(job.assemble(epoch, samples.clone())).is_err() {
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
pub(super) struct Job {
    pub(super) device: Device,
    pub(super) dataset: Arc<Dataset>,
    pub(super) cut: Arc<Cut>,
    pub(super) resident: Option<Arc<ResidentStreams>>,
    pub(super) streamed: Vec<String>,
    pub(super) streams: Vec<String>,
    pub(super) masks: MaskKind,
    pub(super) wait_until_ready: bool,
    pub(super) frames: FrameOutput,
    pub(super) frame_cache: Option<Arc<DeviceFrameCache>>,
    pub(super) augmentation: Option<Augmentation>,
}

impl Job {
    /// One batch: resident streams in one launch, streamed ones read and
    /// resampled, in the configured stream order, with its columns on the
    /// device; synchronised when asked.
    pub(super) fn assemble(&self, epoch: u64, samples: Vec<usize>) -> Result<WindowBatch> {
        self.assemble_then(epoch, samples, self.wait_until_ready)
    }

    /// [`Job::assemble`], waiting for the device only when `wait` says so.
    pub(super) fn assemble_then(&self, epoch: u64, samples: Vec<usize>, wait: bool) -> Result<WindowBatch> {
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
        let mut augmented: Vec<String> = Vec::new();
        let (mut parts, mut placed_columns) = match &self.resident {
            Some(resident) => {
                let request =
                    AssemblyRequest { shape: self.cut.shape(), samples: &pairs, masks: self.masks, columns: &columns };
                let assembled = resident.assemble(&request)?;
                (assembled.streams, Some(assembled.columns))
            }
            None => (Vec::new(), None),
        };
        if !self.streamed.is_empty() {
            let names: Vec<&str> = self.streamed.iter().map(String::as_str).collect();
            // Streamed step and delta windows place the columns on the
            // device with their rows, in one upload.
            let along = if placed_columns.is_none() { Some(columns.as_slice()) } else { None };
            let (dataset, frames, cache) = (&self.dataset, self.frames, self.frame_cache.as_deref());
            let mut batch = match self.cut.as_ref() {
                Cut::Steps(w) => self.device.step_window_batch_from(dataset, w, &samples, &names, along)?,
                Cut::Times(w) => self.device.time_window_batch(dataset, w, &samples, &names)?,
                Cut::Deltas(w) => {
                    let cached = match cache {
                        Some(cache) => {
                            cache.check_use(&self.device, frames.resize)?;
                            // Cameras the cache serves are augmented as their
                            // frames are stacked from it.
                            let draw = |stream: &str, frame: (usize, usize)| {
                                let params = self.augmentation.as_ref()?.draw(epoch, &samples, stream, frame)?;
                                augmented.push(stream.to_owned());
                                Some(params)
                            };
                            Some(CachedFrames { cache, augment: Box::new(draw) })
                        }
                        None => None,
                    };
                    self.device.delta_window_batch_from(dataset, w, &samples, &names, frames, cached, along)?
                }
            };
            if placed_columns.is_none() {
                placed_columns = batch.columns.take();
            }
            let keep_pad = matches!(*self.cut, Cut::Deltas(_));
            for mut stream in batch.streams {
                if stream.mask_kind != self.masks && !keep_pad {
                    flip_mask(&self.device, &mut stream)?;
                }
                // Delta windows convert camera frames as they read them;
                // step and time windows' image streams are converted here.
                if !keep_pad && self.frames != FrameOutput::default() {
                    convert_image_stream(&self.device, &self.dataset, &mut stream, self.frames)?;
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
        if let Some(augmentation) = &self.augmentation {
            augmentation.apply(&self.device, epoch, &samples, &mut ordered, &augmented)?;
        }
        if wait {
            self.device.synchronize()?;
        }
        let columns = match placed_columns {
            Some(placed) => placed,
            None => Tensor::from_slice(&self.device, &columns, &[3, samples.len()])?,
        };
        Ok(WindowBatch { streams: ordered, samples, episodes, anchors, columns: Some(columns) })
    }
}

/// Bytes of one batch's streamed streams (their staging buffers): camera
/// video of delta windows is staged as YUV 4:2:0 planes.
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
    pub(super) number: u64,
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

/// Converts a batch stream of camera frames stored as images (`u8 [B, T,
/// H, W, 3]`, see `rgb_image_size`) to the loader's frame output (crop,
/// resize, layout, dtype) on its device, as delta windows convert video.
fn convert_image_stream(
    device: &Device,
    dataset: &Dataset,
    stream: &mut BatchStream,
    frames: FrameOutput,
) -> Result<()> {
    let (_, info) = dataset.stream(0, &stream.name)?;
    let Some((width, height)) = crate::windows::rgb_image_size(info) else { return Ok(()) };
    let shape = stream.data.shape().to_vec();
    let [batch, steps, ..] = shape[..] else { return Ok(()) };
    let images = stream.data.clone().reshape(&[batch * steps, height, width, 3])?;
    let converted = device.convert_frames(&images, frames)?;
    let mut out = vec![batch, steps];
    out.extend(&converted.shape()[1..]);
    stream.data = converted.reshape(&out)?;
    Ok(())
}

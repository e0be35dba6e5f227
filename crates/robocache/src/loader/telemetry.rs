//! Data-stall telemetry: how long the consumer waited in `next()` for each
//! batch, the fraction of its wall time spent waiting, throughput, the host
//! cores the process kept busy, and the decoded-frame cache's hit rate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

/// A summary of what a loader delivered so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TelemetryReport {
    /// Batches delivered.
    pub batches: u64,
    /// Windows delivered.
    pub samples: u64,
    /// Wall time from the first request to the last delivery, in seconds.
    pub elapsed_s: f64,
    /// Time the consumer spent waiting inside `next()`, in seconds.
    pub waited_s: f64,
    /// `waited_s / elapsed_s`: the share of the consumer's time lost to data.
    pub stall_fraction: f64,
    /// Mean and 99th-percentile wait per batch, in milliseconds.
    pub wait_mean_ms: f64,
    pub wait_p99_ms: f64,
    /// Batches and windows per second of wall time.
    pub batches_per_s: f64,
    pub samples_per_s: f64,
    /// Mean GPU utilization (NVML, sampled every 50 ms) over the same span, in percent.
    pub gpu_utilization_percent: Option<f64>,
    /// Why GPU utilization is absent (CPU backend, no NVML, ...).
    pub gpu_utilization_note: Option<String>,
    /// CUDA: the page-locked staging budget of streamed uploads and the most
    /// bytes it held at once since the budget was last set (by the last
    /// loader made on the device; `None` on the CPU).
    pub staging_budget_bytes: Option<usize>,
    pub staging_peak_bytes: Option<usize>,
    /// Host CPU time of the whole process (every thread: the loader's
    /// workers and decoders, and the consumer) over wall time, from the
    /// first batch delivered to the last: the cores it kept busy. `None`
    /// where the platform does not report it, or before two batches.
    pub host_cores_busy: Option<f64>,
    /// The decoded-frame cache of the dataset (`None` without video).
    pub frame_cache: Option<FrameCacheReport>,
    /// The loader's frame cache on its device
    /// (`LoaderConfig::device_frame_cache_bytes`; `None` without one): hits
    /// and misses count each distinct frame a batch asked for.
    pub device_frame_cache: Option<FrameCacheReport>,
    /// Video samples decoded since the telemetry was last reset, on the CPU
    /// and on NVDEC (`None` without video).
    pub video_decode: Option<VideoDecodeReport>,
}

/// Where video was decoded, in a [`TelemetryReport`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VideoDecodeReport {
    /// Samples decoded (each frame asked for, and the frames it depends on).
    pub cpu_samples: u64,
    pub nvdec_samples: u64,
    /// `nvdec_samples` over all samples decoded (0 before any).
    pub nvdec_share: f64,
}

impl From<robocache_datasets::DecodeCounts> for VideoDecodeReport {
    fn from(counts: robocache_datasets::DecodeCounts) -> Self {
        let all = counts.cpu_samples + counts.nvdec_samples;
        VideoDecodeReport {
            cpu_samples: counts.cpu_samples,
            nvdec_samples: counts.nvdec_samples,
            nvdec_share: if all == 0 { 0.0 } else { counts.nvdec_samples as f64 / all as f64 },
        }
    }
}

/// The decoded-frame cache in a [`TelemetryReport`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FrameCacheReport {
    pub budget_bytes: usize,
    /// Whether the budget is the automatic one
    /// ([`super::FrameCacheBudget::Auto`]: a share of the host memory).
    pub automatic: bool,
    /// Bytes and frames held.
    pub bytes: usize,
    pub frames: usize,
    /// Frames served from the cache, and decoded, since the telemetry was
    /// last reset.
    pub hits: u64,
    pub misses: u64,
    /// `hits / (hits + misses)`.
    pub hit_rate: f64,
}

impl From<robocache_datasets::FrameCacheUsage> for FrameCacheReport {
    fn from(usage: robocache_datasets::FrameCacheUsage) -> Self {
        FrameCacheReport {
            budget_bytes: usage.budget_bytes,
            automatic: false,
            bytes: usage.bytes,
            frames: usage.frames,
            hits: usage.hits,
            misses: usage.misses,
            hit_rate: usage.hit_rate(),
        }
    }
}

/// Per-batch waits, recorded by the loader's iterator.
#[derive(Clone, Debug, Default)]
pub struct Telemetry {
    started: Option<Instant>,
    last: Option<Instant>,
    waits: Vec<Duration>,
    samples: u64,
    /// (wall clock, process CPU time) at the first and the last delivery.
    cpu_first: Option<(Instant, Duration)>,
    cpu_last: Option<(Instant, Duration)>,
}

impl Telemetry {
    /// Records one batch: when `next()` was entered and how many windows it returned.
    pub fn record(&mut self, entered: Instant, samples: usize) {
        let now = Instant::now();
        self.started.get_or_insert(entered);
        self.last = Some(now);
        self.waits.push(now - entered);
        self.samples += samples as u64;
        if let Some(cpu) = process_cpu_time() {
            self.cpu_first.get_or_insert((now, cpu));
            self.cpu_last = Some((now, cpu));
        }
    }

    /// Forgets everything (e.g. after warm-up).
    pub fn reset(&mut self) {
        *self = Telemetry::default();
    }

    /// The summary so far.
    pub fn report(&self) -> TelemetryReport {
        let elapsed = match (self.started, self.last) {
            (Some(start), Some(last)) => (last - start).as_secs_f64(),
            _ => 0.0,
        };
        let waited: f64 = self.waits.iter().map(Duration::as_secs_f64).sum();
        let mut sorted: Vec<f64> = self.waits.iter().map(|w| w.as_secs_f64() * 1e3).collect();
        sorted.sort_by(f64::total_cmp);
        let batches = self.waits.len() as u64;
        let p99 = sorted.get(((sorted.len() as f64 * 0.99).ceil() as usize).saturating_sub(1)).copied().unwrap_or(0.0);
        TelemetryReport {
            batches,
            samples: self.samples,
            elapsed_s: elapsed,
            waited_s: waited,
            stall_fraction: if elapsed > 0.0 { (waited / elapsed).min(1.0) } else { 0.0 },
            wait_mean_ms: if batches > 0 { waited * 1e3 / batches as f64 } else { 0.0 },
            wait_p99_ms: p99,
            batches_per_s: if elapsed > 0.0 { batches as f64 / elapsed } else { 0.0 },
            samples_per_s: if elapsed > 0.0 { self.samples as f64 / elapsed } else { 0.0 },
            gpu_utilization_percent: None,
            gpu_utilization_note: None,
            staging_budget_bytes: None,
            staging_peak_bytes: None,
            host_cores_busy: match (self.cpu_first, self.cpu_last) {
                (Some((t0, c0)), Some((t1, c1))) if t1 > t0 => {
                    Some((c1.saturating_sub(c0)).as_secs_f64() / (t1 - t0).as_secs_f64())
                }
                _ => None,
            },
            frame_cache: None,
            device_frame_cache: None,
            video_decode: None,
        }
    }
}

/// User plus system CPU time of this process, all threads.
#[cfg(unix)]
fn process_cpu_time() -> Option<Duration> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage writes a whole `rusage` into the pointer it is given.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
            return None;
        }
        usage.assume_init()
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1000);
    Some(time(usage.ru_utime) + time(usage.ru_stime))
}

#[cfg(not(unix))]
fn process_cpu_time() -> Option<Duration> {
    None
}

/// GPU utilization sampled through NVML on a background thread; absent
/// NVML (or on the CPU backend) it is disabled with a note, never an error.
#[derive(Debug)]
pub(crate) struct UtilizationSampler {
    samples: Arc<Mutex<Vec<u32>>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    note: Option<String>,
}

/// How often utilization is read.
#[cfg(feature = "cuda")]
const SAMPLE_PERIOD: Duration = Duration::from_millis(50);

impl UtilizationSampler {
    pub fn start(device: &crate::Device) -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let started = match device {
            crate::Device::Cpu => Err("the CPU backend has no GPU to sample".to_owned()),
            crate::Device::Cuda(cuda) => start_nvml(cuda.ordinal(), samples.clone(), stop.clone()),
        };
        match started {
            Ok(handle) => UtilizationSampler { samples, stop, handle: Some(handle), note: None },
            Err(note) => {
                if !matches!(device, crate::Device::Cpu) {
                    tracing::info!("GPU utilization is not sampled: {note}");
                }
                UtilizationSampler { samples, stop, handle: None, note: Some(note) }
            }
        }
    }

    /// Mean utilization since the last reset, or why there is none.
    pub fn mean(&self) -> (Option<f64>, Option<String>) {
        if let Some(note) = &self.note {
            return (None, Some(note.clone()));
        }
        let samples = self.samples.lock().map(|s| s.clone()).unwrap_or_default();
        if samples.is_empty() {
            return (None, Some("no sample taken yet".to_owned()));
        }
        (Some(samples.iter().map(|&s| f64::from(s)).sum::<f64>() / samples.len() as f64), None)
    }

    pub fn reset(&self) {
        if let Ok(mut samples) = self.samples.lock() {
            samples.clear();
        }
    }
}

impl Drop for UtilizationSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// NVML's device `ordinal` (the CUDA ordinal: they agree when devices are
/// enumerated in PCI order, as on the machines robocache targets).
#[cfg(feature = "cuda")]
fn start_nvml(ordinal: usize, samples: Arc<Mutex<Vec<u32>>>, stop: Arc<AtomicBool>) -> Result<JoinHandle<()>, String> {
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("NVML is not available ({e})"))?;
    nvml.device_by_index(ordinal as u32).map_err(|e| format!("NVML has no device {ordinal} ({e})"))?;
    std::thread::Builder::new()
        .name("robocache-nvml".into())
        .spawn(move || {
            let Ok(device) = nvml.device_by_index(ordinal as u32) else { return };
            while !stop.load(Ordering::Relaxed) {
                if let (Ok(rates), Ok(mut samples)) = (device.utilization_rates(), samples.lock()) {
                    samples.push(rates.gpu);
                }
                std::thread::sleep(SAMPLE_PERIOD);
            }
        })
        .map_err(|e| format!("cannot start the sampling thread ({e})"))
}

#[cfg(not(feature = "cuda"))]
fn start_nvml(_: usize, _: Arc<Mutex<Vec<u32>>>, _: Arc<AtomicBool>) -> Result<JoinHandle<()>, String> {
    Err("this build has no CUDA backend".to_owned())
}

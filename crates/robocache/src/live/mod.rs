//! [`Live`]: a running policy's observation windows, computed from samples
//! as they arrive by the rules its training windows were computed with
//! (docs/loader.md, "Deployment").
//!
//! A [`LoaderSpec`] saved at training time ([`crate::Loader::spec`]) says
//! what a window is. `Live` keeps each stream's latest samples in a bounded
//! ring ([`ring`]), and [`Live::window`] computes the observation part of
//! the window at a time `t` — every stream's targets up to `t` (time
//! windows: `t + (k - history) / hz` for `k ≤ history`; `delta_timestamps`:
//! each key's offsets, none after `t`) — with the loader's own code: the
//! CPU reference resample (`robocache_cpu::resample_into`, which the CUDA
//! kernels equal bit for bit), the same f32 conversion, angle unwrapping
//! and normalization as the resident streams, the same frame crop and
//! resize ([`Device::convert_frames`]) and stacking ([`Device::stack_frames`]).
//!
//! Rules:
//! - A stream's times must increase: a sample at or before the stream's
//!   latest is refused (an error naming the stream and both times), never
//!   inserted out of order. Serialized ROS 2 messages
//!   ([`Live::push_message`]) follow the bag reader's rule instead: a
//!   sample at or before its stream's latest moves just after it
//!   (`f64::next_up`), as a bag's ties and reordered stamps are placed.
//! - A push is whole or nothing: a sample (or every sample of a message)
//!   is checked — shape, dtype, time, statistics — before any stream or
//!   unwrapping state changes, and the latest time is read and the sample
//!   kept under one lock. [`Live::reset`] starts a new episode (and takes
//!   its message origin).
//! - Causal time windows read only samples at or before each target, so
//!   `window(t)` equals the training window anchored at `t` as soon as the
//!   samples up to `t` have been pushed. Non-causal windows interpolate
//!   towards the next sample: `window(t)` needs every stream's first sample
//!   at or after `t`, and is an error naming the stream until it has come
//!   (so it runs the slowest stream's sample interval behind).
//! - `delta_timestamps`: a key's current frame is its latest sample at or
//!   before `t + tolerance_s`; offset `d` (frames, `round(offset · fps)`)
//!   reads the sample `|d|` before it, or the episode's first sample,
//!   padding, before the episode began (as LeRobot clamps).
//! - Memory is bounded by time and bytes, never by an assumed rate: each
//!   stream keeps its samples of the last `span` seconds (in the data's
//!   own times: the window's history plus [`LiveOptions::lookback_s`], how
//!   far behind the latest sample a window may be asked), whatever rate
//!   they come at, up to [`LiveOptions::ring_bytes`] per stream (frames on
//!   the device counted). A window that would read a sample no longer kept
//!   — asked further back than that, or after the byte bound dropped it —
//!   is an error naming the stream and the times, never a different value.
//!
//! ```
//! use std::sync::Arc;
//! use robocache::datasets::{synthetic, Dataset, TimeWindowSpec};
//! use robocache::live::{Live, LiveOptions};
//! use robocache::{Device, HostSlice, Loader, LoaderConfig, WindowSpec};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("demo.hdf5");
//! synthetic::write_robomimic(&path, &synthetic::SyntheticSpec { episodes: 2, image: None, ..Default::default() })?;
//! let dataset = Arc::new(Dataset::open(&path)?);
//! let windows = WindowSpec::Times(TimeWindowSpec { hz: 20.0, history: 2, horizon: 4, causal: true });
//! let loader = Loader::new(&Device::Cpu, dataset.clone(), LoaderConfig::new(&["obs/joint_pos"], windows, 8))?;
//! let spec = loader.spec()?; // saved with the checkpoint: spec.save(path)
//!
//! let live = Live::new(&spec, &Device::Cpu, &LiveOptions::default())?;
//! let times = dataset.times(0, "obs/joint_pos")?;
//! let rows = dataset.read_stream(0, "obs/joint_pos")?.as_slice().to_f64_vec(); // f32 in the file
//! for (i, row) in rows.chunks(7).enumerate().take(50) {
//!     let row: Vec<f32> = row.iter().map(|&v| v as f32).collect();
//!     live.push("obs/joint_pos", times.time(i), HostSlice::F32(&row))?;
//! }
//! let window = live.window(times.time(49))?;
//! assert_eq!(window.streams[0].data.shape(), [1, 3, 7]); // history 2 and the tick itself
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod entry;
mod mixed;
mod ring;
mod window;

use std::sync::{Mutex, MutexGuard, PoisonError};

use robocache_cpu::{ChannelSpec, DType, HostSlice};
use robocache_datasets::ros2::{BagMapping, MessageStreams};
use robocache_datasets::{StreamKind, TimeWindowSpec};

use crate::loader::{MaskKind, Normalization};
use crate::spec::{LoaderSpec, SpecClock, SpecMixtureStream, SpecSource, SpecStream};
use crate::windows::AngleUnwrap;
use crate::{BatchStream, Device, Error, FrameDType, FrameLayout, FrameOutput, Result, Tensor};
use ring::{RingLimits, SampleRing, Value};

/// [`LiveOptions::lookback_s`] by default.
pub const DEFAULT_LOOKBACK_S: f64 = 1.0;
/// [`LiveOptions::ring_bytes`] by default: 256 MiB a stream.
pub const DEFAULT_RING_BYTES: usize = 256 << 20;
/// The largest [`LiveOptions::lookback_s`].
pub const MAX_LOOKBACK_S: f64 = 3600.0;

/// Which of a spec's streams a [`Live`] takes, and how much of them it keeps.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// The streams to keep and window; `None`: every stream of time windows,
    /// the keys with offsets (none after the anchor) of `delta_timestamps`.
    pub streams: Option<Vec<String>>,
    /// [`Live::push_message`]: a message at `t` ns is a sample at
    /// `(t - message_origin_ns) · 1e-9` s, as a bag episode's times are
    /// seconds since its first log time (its `origin_ns`).
    pub message_origin_ns: u64,
    /// How far behind each stream's latest sample a window may be asked, in
    /// seconds of the data's clock (module docs): a stream keeps its
    /// samples of the window's history plus this. Default 1 s.
    pub lookback_s: f64,
    /// The most bytes of samples a stream keeps (camera frames on the
    /// device counted); past it the oldest go, and windows that would read
    /// them are errors. Default 256 MiB.
    pub ring_bytes: usize,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            streams: None,
            message_origin_ns: 0,
            lookback_s: DEFAULT_LOOKBACK_S,
            ring_bytes: DEFAULT_RING_BYTES,
        }
    }
}

/// The observation window at one time (module docs): per stream `[1, T,
/// ...]` on the live device with its mask `[1, T]` (the spec's mask kind),
/// shaped as one row of a training batch's first `T` steps.
#[derive(Clone, Debug)]
pub struct LiveWindow {
    /// The time the window was asked for.
    pub time: f64,
    pub streams: Vec<BatchStream>,
    /// A mixture member's spec: per stream (in `streams`' order) its
    /// `dim_is_pad` `[1, D]` (true where the member has no such dimension),
    /// as the mixture's batches hold it. Empty for other specs.
    pub dim_is_pad: Vec<Tensor>,
}

impl LiveWindow {
    /// The stream called `name`.
    pub fn stream(&self, name: &str) -> Option<&BatchStream> {
        self.streams.iter().find(|s| s.name == name)
    }
}

/// Live observation windows of a [`LoaderSpec`] (module docs). Pushes from
/// several threads are safe: each stream has its own lock.
#[derive(Debug)]
pub struct Live {
    device: Device,
    clock: Clock,
    frames: FrameOutput,
    masks: MaskKind,
    normalization: Option<Normalization>,
    streams: Vec<LiveStream>,
    /// A mixture member's spec: the mixture's streams a window holds, made
    /// from `streams` (empty: a window holds `streams` themselves).
    mixture: Vec<MixedStream>,
    /// A ROS 2 spec's decoder of serialized messages, and its time origin.
    messages: Option<Mutex<MessageDecoder>>,
}

/// A mixture's stream as a member's live window fills it (`SpecMixtureStream`).
#[derive(Debug)]
struct MixedStream {
    name: String,
    source: MixedSource,
    dtype: DType,
    step_shape: Vec<usize>,
    width: usize,
}

#[derive(Debug)]
enum MixedSource {
    /// The member's streams side by side (one, or a concatenation): indices into `Live::streams`.
    Streams(Vec<usize>),
    /// One row of the stream's dtype.
    Constant(robocache_cpu::HostVec),
    Absent,
}

impl MixedStream {
    fn new(spec: &SpecMixtureStream, streams: &[LiveStream]) -> Result<Self> {
        let dtype = DType::from_name(&spec.dtype).ok_or_else(|| Error::Spec {
            what: format!("mixture stream `{}` dtype", spec.name),
            problem: format!("`{}` is no dtype", spec.dtype),
        })?;
        let source = match &spec.source {
            SpecSource::Absent => MixedSource::Absent,
            SpecSource::Constant { values } => {
                MixedSource::Constant(crate::loader::mixture::constant_row(dtype, values).ok_or_else(|| {
                    Error::Spec {
                        what: format!("mixture stream `{}` source", spec.name),
                        problem: format!("the constant {values:?} does not fit {dtype}"),
                    }
                })?)
            }
            SpecSource::Stream { .. } | SpecSource::Concat { .. } => MixedSource::Streams(
                spec.source
                    .streams()
                    .iter()
                    .map(|part| {
                        streams.iter().position(|s| s.name == *part).ok_or_else(|| {
                            Error::Internal(format!(
                                "live mixture stream `{}`: its part `{part}` is not kept",
                                spec.name
                            ))
                        })
                    })
                    .collect::<Result<_>>()?,
            ),
        };
        Ok(MixedStream {
            name: spec.name.clone(),
            source,
            dtype,
            step_shape: spec.step_shape.clone(),
            width: spec.width,
        })
    }
}

/// What decodes a robot's serialized messages, and where their time starts.
#[derive(Debug)]
struct MessageDecoder {
    streams: MessageStreams,
    origin_ns: u64,
}

/// How a push places a sample at or before its stream's latest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ties {
    /// Refused (decoded samples: times must increase).
    Refuse,
    /// Moved just after the latest, as the bag reader places them.
    MoveLater,
}

/// A sample checked and converted, ready to keep.
struct Prepared {
    stream: usize,
    time: f64,
    value: Value,
}

#[derive(Clone, Copy, Debug)]
enum Clock {
    Times(TimeWindowSpec),
    Deltas { tolerance_s: f64 },
}

/// How a stream's samples are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// f32 rows, angle channels unwrapped, normalized (the loader's resident streams).
    Resident,
    /// The dataset's dtype, as given.
    Raw,
    /// 8-bit RGB frames `(width, height)`, kept on the device cropped and resized.
    Camera { width: usize, height: usize },
}

#[derive(Debug)]
struct LiveStream {
    name: String,
    dtype: DType,
    step_shape: Vec<usize>,
    channels: usize,
    kind: StreamKind,
    /// The channels' methods its time windows resample it by.
    methods: ChannelSpec,
    form: Form,
    /// `delta_timestamps`: frame offsets, none after the anchor.
    offsets: Vec<i64>,
    state: Mutex<StreamState>,
    /// A camera's padding frame (zeros) on the device, at the kept size:
    /// made when a window first needs it.
    zero_frame: Mutex<Option<Tensor>>,
    frames: FrameOutput,
    /// A camera's evaluation crop (the spec's), applied to each window's
    /// stacked frames as the loader applies it in evaluation mode.
    evaluation: Option<robocache_augment::FrameAugment>,
}

#[derive(Debug)]
struct StreamState {
    ring: SampleRing,
    unwrap: AngleUnwrap,
}

impl Live {
    /// Live windows of `spec` on `device`, for the streams `options` names.
    pub fn new(spec: &LoaderSpec, device: &Device, options: &LiveOptions) -> Result<Self> {
        spec.check()?;
        if !(options.lookback_s.is_finite() && (0.0..=MAX_LOOKBACK_S).contains(&options.lookback_s)) {
            return Err(Error::Spec {
                what: "LiveOptions::lookback_s".into(),
                problem: format!("{} s is not in 0..={MAX_LOOKBACK_S} s", options.lookback_s),
            });
        }
        let frames = spec.frames.output()?;
        let (clock, offsets): (Clock, &[(String, Vec<f64>)]) = match &spec.clock {
            SpecClock::Times { hz, history, horizon, causal } => {
                (Clock::Times(TimeWindowSpec { hz: *hz, history: *history, horizon: *horizon, causal: *causal }), &[])
            }
            SpecClock::Deltas { tolerance_s, offsets, .. } => (Clock::Deltas { tolerance_s: *tolerance_s }, offsets),
        };
        let offsets_of = |name: &str| offsets.iter().find(|(key, _)| key == name).map(|(_, o)| o.clone());
        let fps = match &spec.clock {
            SpecClock::Deltas { fps, .. } => *fps,
            SpecClock::Times { .. } => 0.0,
        };
        // A mixture member's spec: the mixture's streams asked for, kept
        // as the member's own streams they read.
        let mixed_specs: Vec<&SpecMixtureStream> = match &spec.mixture {
            None => Vec::new(),
            Some(mixture) => {
                if !matches!(clock, Clock::Times(_)) {
                    return Err(Error::Spec {
                        what: "clock".into(),
                        problem: "a mixture member's live windows are time windows".into(),
                    });
                }
                match &options.streams {
                    None => mixture.streams.iter().collect(),
                    Some(names) => names
                        .iter()
                        .map(|name| {
                            mixture.streams.iter().find(|s| s.name == *name).ok_or_else(|| Error::Live {
                                stream: name.clone(),
                                problem: format!(
                                    "the mixture has no such stream (it has {})",
                                    mixture.streams.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
                                ),
                            })
                        })
                        .collect::<Result<_>>()?,
                }
            }
        };
        let mixed_parts: Vec<String> = {
            let mut parts: Vec<String> = Vec::new();
            for mixed in &mixed_specs {
                for part in mixed.source.streams() {
                    if !parts.contains(part) {
                        parts.push(part.clone());
                    }
                }
            }
            parts
        };
        let names: Vec<String> = match (&options.streams, clock) {
            _ if spec.mixture.is_some() => mixed_parts,
            (Some(names), _) => names.clone(),
            (None, Clock::Times(_)) => spec.streams.iter().map(|s| s.name.clone()).collect(),
            (None, Clock::Deltas { .. }) => spec
                .streams
                .iter()
                .filter(|s| offsets_of(&s.name).is_some_and(|o| o.iter().all(|&d| d <= 0.0)))
                .map(|s| s.name.clone())
                .collect(),
        };
        if names.is_empty() {
            return Err(Error::Spec {
                what: "streams".into(),
                problem: "no stream to keep: name them (LiveOptions::streams)".into(),
            });
        }
        let mut streams = Vec::with_capacity(names.len());
        for name in &names {
            let stream = spec.stream(name).ok_or_else(|| Error::Live {
                stream: name.clone(),
                problem: format!(
                    "the spec has no such stream (it has {})",
                    spec.streams.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            })?;
            let offsets = match clock {
                Clock::Times(_) => Vec::new(),
                Clock::Deltas { .. } => {
                    let seconds = offsets_of(name).unwrap_or_else(|| vec![0.0]);
                    if let Some(late) = seconds.iter().find(|&&d| d > 0.0) {
                        return Err(Error::Live {
                            stream: name.clone(),
                            problem: format!(
                                "its offset {late} s lies after the window's time: the future (an action), which a live window cannot hold"
                            ),
                        });
                    }
                    // As the loader rounds them (DeltaWindows: half to even).
                    seconds.iter().map(|d| (d * fps).round_ties_even() as i64).collect()
                }
            };
            if streams.iter().any(|s: &LiveStream| s.name == *name) {
                return Err(Error::Live {
                    stream: name.clone(),
                    problem: "named twice in LiveOptions::streams".into(),
                });
            }
            streams.push(LiveStream::new(stream, clock, offsets, frames, spec.evaluation_crop(&stream.name), options)?);
        }
        let mixture = mixed_specs.iter().map(|mixed| MixedStream::new(mixed, &streams)).collect::<Result<Vec<_>>>()?;
        let messages = match &spec.bag_mapping {
            Some(mapping) if !spec.bag_topics.is_empty() => {
                let mapping: BagMapping = serde_json::from_value(mapping.clone())
                    .map_err(|e| Error::Spec { what: "bag_mapping".into(), problem: e.to_string() })?;
                let decoder = MessageStreams::new(&mapping, &spec.bag_topics)?;
                Some(Mutex::new(MessageDecoder { streams: decoder, origin_ns: options.message_origin_ns }))
            }
            _ => None,
        };
        Ok(Live {
            device: device.clone(),
            clock,
            frames,
            masks: spec.mask_kind(),
            normalization: spec.normalization.clone(),
            streams,
            mixture,
            messages,
        })
    }

    /// The device windows are placed on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The streams kept (those pushed), in window order.
    pub fn stream_names(&self) -> Vec<&str> {
        self.streams.iter().map(|s| s.name.as_str()).collect()
    }

    /// The streams a window holds, in its order: the kept streams, or a
    /// mixture member's spec's mixture streams.
    pub fn window_names(&self) -> Vec<&str> {
        match self.mixture.is_empty() {
            true => self.stream_names(),
            false => self.mixture.iter().map(|m| m.name.as_str()).collect(),
        }
    }

    /// Adds a sample of `stream` at `time` (seconds, on the clock windows
    /// are asked on): one step of the stream's shape, in its dtype (or f32
    /// for a low-dimensional stream of floats), or a camera frame as 8-bit
    /// RGB `[H, W, 3]`. Refused: an unknown stream, a wrong shape or dtype,
    /// a time that is not finite or not after the stream's latest.
    pub fn push(&self, stream: &str, time: f64, values: HostSlice<'_>) -> Result<()> {
        let index = self.index_of(stream)?;
        let live = &self.streams[index];
        if !time.is_finite() {
            return Err(live.error(format!("sample time {time} is not finite")));
        }
        let value = live.value(values, &self.device, self.frames)?;
        self.keep(vec![Prepared { stream: index, time, value }], Ties::Refuse)
    }

    /// Keeps `samples` (each of another stream), all or none: under the
    /// locks of their streams (taken in stream order), each time checked
    /// against its stream's latest (or moved after it, `ties`), each row
    /// unwrapped and normalized on a copy of the unwrapping state; only
    /// when every sample passed are the rings and states changed.
    fn keep(&self, samples: Vec<Prepared>, ties: Ties) -> Result<()> {
        let mut order: Vec<usize> = (0..samples.len()).collect();
        order.sort_by_key(|&i| samples[i].stream);
        let mut guards: Vec<(usize, MutexGuard<'_, StreamState>)> = Vec::with_capacity(samples.len());
        for &i in &order {
            let stream = samples[i].stream;
            if guards.iter().any(|(s, _)| *s == stream) {
                return Err(self.streams[stream].error("two samples of the stream in one push".into()));
            }
            guards.push((stream, self.streams[stream].lock()));
        }
        let mut ready = Vec::with_capacity(samples.len());
        for sample in samples {
            let live = &self.streams[sample.stream];
            let Some(at) = guards.iter().position(|(s, _)| *s == sample.stream) else {
                return Err(Error::Internal(format!("live stream `{}`: not locked", live.name)));
            };
            let state = &guards[at].1;
            let mut time = sample.time;
            if let Some(last) = state.ring.last_time().filter(|&last| time <= last) {
                match ties {
                    Ties::MoveLater => time = f64::next_up(last),
                    Ties::Refuse => {
                        return Err(live.error(format!(
                            "sample at {time} s does not come after its latest, at {last} s: times must increase (late samples are refused)"
                        )))
                    }
                }
            }
            let (value, unwrap) = match sample.value {
                Value::Row(mut bytes) if live.form == Form::Resident => {
                    let rows: &mut [f32] = bytemuck::try_cast_slice_mut(&mut bytes)
                        .map_err(|e| Error::Internal(format!("live stream `{}`: f32 row: {e}", live.name)))?;
                    let mut unwrap = state.unwrap.clone();
                    unwrap.next_row(rows);
                    if let Some(stats) = &self.normalization {
                        stats.apply(&live.name, &live.kind, rows, live.channels)?;
                    }
                    (Value::Row(bytes), Some(unwrap))
                }
                other => (other, None),
            };
            ready.push((at, time, value, unwrap));
        }
        for (at, time, value, unwrap) in ready {
            let state = &mut guards[at].1;
            if let Some(unwrap) = unwrap {
                state.unwrap = unwrap;
            }
            state.ring.push(time, value);
        }
        Ok(())
    }

    /// [`Live::push`] of a camera frame given as JPEG or PNG bytes, decoded
    /// on arrival to 8-bit RGB of the stream's size.
    pub fn push_encoded(&self, stream: &str, time: f64, encoded: &[u8]) -> Result<()> {
        let live = self.find(stream)?;
        let Form::Camera { width, height } = live.form else {
            return Err(live.error("encoded images are for camera streams".into()));
        };
        let mut rgb = vec![0u8; width * height * 3];
        robocache_datasets::decode_image(encoded, DType::U8, &[height, width, 3], &mut rgb)
            .map_err(|problem| live.error(format!("image at {time} s: {problem}")))?;
        self.push(stream, time, HostSlice::U8(&rgb))
    }

    /// Adds the samples of one serialized (CDR) ROS 2 message of `topic`,
    /// received at `log_ns` (and published at `publish_ns`; `None`: the log
    /// time), for a spec of a bag dataset: decoded by the bag reader's own
    /// decoder, plan, time rule and joint holding
    /// (`robocache_datasets::ros2::MessageStreams`), each sample at its
    /// time since [`LiveOptions::message_origin_ns`]. A sample at the same
    /// time as its stream's latest moves a femtosecond later, as the bag
    /// reader places ties. Streams this `Live` does not keep are skipped.
    pub fn push_message(&self, topic: &str, log_ns: u64, publish_ns: Option<u64>, message: &[u8]) -> Result<()> {
        let Some(decoder) = &self.messages else {
            return Err(Error::Live {
                stream: topic.into(),
                problem:
                    "the spec has no bag topics: push decoded samples (a spec of a ROS 2 dataset decodes messages)"
                        .into(),
            });
        };
        let mut decoder = decoder.lock().unwrap_or_else(PoisonError::into_inner);
        let origin = i128::from(decoder.origin_ns);
        let publish_ns = publish_ns.unwrap_or(log_ns);
        // The decoder keeps its joint holding only when every sample is kept.
        decoder
            .streams
            .decode_then(topic, log_ns, publish_ns, message, |samples| {
                let mut prepared = Vec::with_capacity(samples.len());
                for sample in samples {
                    let Some(index) = self.streams.iter().position(|s| s.name == sample.stream) else { continue };
                    let live = &self.streams[index];
                    // As the bag reader places a sample (`ros2::decode`).
                    let time = (sample.time_ns - origin) as f64 * 1e-9;
                    let value = match sample.dtype {
                        DType::F64 => live.value(HostSlice::F64(&sample.values), &self.device, self.frames)?,
                        _ => {
                            let values: Vec<f32> = sample.values.iter().map(|&v| v as f32).collect();
                            live.value(HostSlice::F32(&values), &self.device, self.frames)?
                        }
                    };
                    prepared.push(Prepared { stream: index, time, value });
                }
                self.keep(prepared, Ties::MoveLater)
            })
            .map_err(|error| match error {
                // A message that does not fit is bad live input, named by its topic.
                Error::Dataset(error) => {
                    let text = error.to_string();
                    let prefix = format!("topic `{topic}`: ");
                    Error::Live {
                        stream: topic.into(),
                        problem: text.strip_prefix(&prefix).unwrap_or(&text).to_owned(),
                    }
                }
                other => other,
            })
    }

    /// Forgets every stream's samples: the next push starts a new episode.
    /// `message_origin_ns`: the new episode's message origin
    /// ([`LiveOptions::message_origin_ns`]; `None` keeps the current one).
    pub fn reset(&self, message_origin_ns: Option<u64>) -> Result<()> {
        if let Some(decoder) = &self.messages {
            let mut decoder = decoder.lock().unwrap_or_else(PoisonError::into_inner);
            decoder.streams.reset();
            if let Some(origin) = message_origin_ns {
                decoder.origin_ns = origin;
            }
        }
        for stream in &self.streams {
            let mut state = stream.lock();
            state.ring.clear();
            state.unwrap = AngleUnwrap::new(&stream.kind.angle_channels(stream.channels));
        }
        Ok(())
    }

    /// The observation window at `time` (module docs).
    pub fn window(&self, time: f64) -> Result<LiveWindow> {
        if !time.is_finite() {
            return Err(Error::Live { stream: "*".into(), problem: format!("window time {time} is not finite") });
        }
        window::compute(self, time)
    }

    fn find(&self, stream: &str) -> Result<&LiveStream> {
        self.index_of(stream).map(|i| &self.streams[i])
    }

    fn index_of(&self, stream: &str) -> Result<usize> {
        self.streams.iter().position(|s| s.name == stream).ok_or_else(|| Error::Live {
            stream: stream.into(),
            problem: format!("not a stream of this live window (it keeps {})", self.stream_names().join(", ")),
        })
    }
}

impl LiveStream {
    fn new(
        spec: &SpecStream,
        clock: Clock,
        offsets: Vec<i64>,
        frames: FrameOutput,
        evaluation: Option<&crate::spec::SpecEvaluationCrop>,
        options: &LiveOptions,
    ) -> Result<Self> {
        let evaluation = evaluation.map(|e| robocache_augment::FrameAugment {
            crop: Some(robocache_augment::CropWindow {
                left: e.crop.0,
                top: e.crop.1,
                width: e.crop.2,
                height: e.crop.3,
                output: e.output,
            }),
            ops: Vec::new(),
        });
        let kind = spec.stream_kind()?;
        let dtype = spec.data_type()?;
        let channels = spec.channels().max(1);
        let form = match (spec.camera, clock) {
            (Some((width, height)), _) => Form::Camera { width, height },
            (None, Clock::Deltas { .. }) => Form::Raw,
            (None, Clock::Times(_)) if spec.resident => Form::Resident,
            (None, Clock::Times(_)) => {
                return Err(Error::Live {
                    stream: spec.name.clone(),
                    problem: "the loader streamed this low-dimensional stream (LoaderMode::Streaming): live windows \
                              reproduce resident ones; train with the default mode"
                        .into(),
                })
            }
        };
        // The window's history plus the lookback, in the data's seconds;
        // `delta_timestamps` windows count their frames back from the
        // latest at or before the window's time, so that many are kept
        // before the span (module docs, `ring`).
        let limits = match clock {
            Clock::Times(times) => RingLimits {
                span_s: times.history as f64 / times.hz + options.lookback_s,
                kept_before_span: 1,
                max_bytes: options.ring_bytes,
            },
            Clock::Deltas { .. } => RingLimits {
                span_s: options.lookback_s,
                kept_before_span: offsets.iter().map(|d| d.unsigned_abs() as usize).max().unwrap_or(0) + 1,
                max_bytes: options.ring_bytes,
            },
        };
        Ok(LiveStream {
            name: spec.name.clone(),
            dtype,
            step_shape: spec.step_shape.clone(),
            channels,
            methods: crate::assembly::window_methods(
                &kind.channel_spec(),
                matches!(clock, Clock::Times(TimeWindowSpec { causal: true, .. })),
            ),
            state: Mutex::new(StreamState {
                ring: SampleRing::new(limits),
                unwrap: AngleUnwrap::new(&kind.angle_channels(channels)),
            }),
            kind,
            form,
            offsets,
            zero_frame: Mutex::new(None),
            frames,
            evaluation,
        })
    }

    fn error(&self, problem: String) -> Error {
        Error::Live { stream: self.name.clone(), problem }
    }

    /// Its samples and unwrapping state, locked. A lock is never poisoned
    /// in effect: the state changes only after every check has passed, in
    /// steps that cannot fail (`Live::keep`), so a panic elsewhere while it
    /// was held left it whole.
    fn lock(&self) -> MutexGuard<'_, StreamState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The padding frame (zeros) at the kept size, on `device`.
    fn zero_frame(&self, device: &Device) -> Result<Tensor> {
        let mut frame = self.zero_frame.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(frame) = frame.as_ref() {
            return Ok(frame.clone());
        }
        let Form::Camera { width, height } = self.form else {
            return Err(self.error("a padding frame of a stream that is not a camera".into()));
        };
        let (w, h) = self.frames.resize.map_or((width, height), |r| (r.width, r.height));
        let zeros = Tensor::from_slice(device, &vec![0u8; w * h * 3], &[1, h, w, 3])?;
        *frame = Some(zeros.clone());
        Ok(zeros)
    }

    /// A pushed step as the stream keeps it (module docs).
    fn value(&self, values: HostSlice<'_>, device: &Device, frames: FrameOutput) -> Result<Value> {
        let shape = || format!("{:?} {}", self.step_shape, self.dtype);
        match self.form {
            Form::Camera { width, height } => {
                if values.dtype() != DType::U8 || values.len() != width * height * 3 {
                    return Err(self.error(format!(
                        "a frame is 8-bit RGB [{height}, {width}, 3] ({} bytes), not {} elements of {}",
                        width * height * 3,
                        values.len(),
                        values.dtype()
                    )));
                }
                let frame = Tensor::from_host(device, values, &[1, height, width, 3])?;
                Ok(Value::Frame(match frames.resize {
                    Some(resize) => device.convert_frames(
                        &frame,
                        FrameOutput { layout: FrameLayout::Hwc, dtype: FrameDType::U8, resize: Some(resize) },
                    )?,
                    None => frame,
                }))
            }
            _ if values.len() != self.channels => Err(self.error(format!(
                "a step is {} ({} values), not {} values",
                shape(),
                self.channels,
                values.len()
            ))),
            Form::Resident if values.dtype() == self.dtype || values.dtype() == DType::F32 => {
                let rows = crate::loader::resident::host_f32(values.to_host_vec());
                Ok(Value::Row(bytemuck::cast_slice(&rows).to_vec()))
            }
            Form::Raw if values.dtype() == self.dtype => Ok(Value::Row(values.as_bytes().to_vec())),
            Form::Resident => {
                let or_f32 = if self.dtype == DType::F32 { "" } else { " (or f32)" };
                Err(self.error(format!("a step is {}{or_f32}, not {}", shape(), values.dtype())))
            }
            Form::Raw => Err(self.error(format!("a step is {}, not {}", shape(), values.dtype()))),
        }
    }
}

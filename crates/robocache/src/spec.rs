//! [`LoaderSpec`]: what defines a loader's windows, saved with a checkpoint
//! so that a running policy gets the same windows live ([`crate::live`]).
//!
//! One versioned JSON document, with no path to the dataset in it: the
//! streams (name, dtype, step shape, channel kinds, camera frame size,
//! fastest rate), the clock (time windows, causal or not, or
//! `delta_timestamps` with the dataset's fps and tolerance), what masks
//! mark, what camera frames become (crop, size, layout, dtype) and the
//! normalization statistics. [`crate::Loader::spec`] writes it.
//!
//! A spec is a contract: [`LoaderSpec::from_json`] (and [`LoaderSpec::load`])
//! refuse, naming the field, a document of another format or a newer
//! version, an unknown field anywhere, a missing field (`normalization` is
//! written as `null` when there is none, never left out), statistics that
//! are not finite or whose lengths differ from their stream's channels,
//! a rate that is not finite and positive, and any size beyond the bounds
//! below ([`SpecBounds`]: a window longer than [`MAX_WINDOW_STEPS`], a rate
//! above [`MAX_RATE_HZ`], ...), so that nothing a spec says can make a live
//! window allocate without bound, overflow or panic.

use std::path::Path;

use robocache_datasets::{DeltaTimestamps, StreamKind, TimeWindowSpec};
use serde::{Deserialize, Serialize};

use crate::loader::normalization::continuous_channels;
use crate::loader::{MaskKind, Normalization};
use crate::{DType, Error, FrameDType, FrameLayout, FrameOutput, FrameResize, Result};

/// The format version this build writes and the newest it reads.
pub const SPEC_VERSION: u32 = 1;

/// The `format` field of every spec.
pub const SPEC_FORMAT: &str = "robocache.loader_spec";

/// The fastest clock, frame rate or sample rate a spec may state (Hz).
pub const MAX_RATE_HZ: f64 = 1e6;
/// The most steps of a window (history, the anchor and horizon; the
/// offsets of a `delta_timestamps` key, and how many frames one reaches back).
pub const MAX_WINDOW_STEPS: usize = 10_000;
/// The most streams of a spec.
pub const MAX_STREAMS: usize = 4096;
/// The most elements of one step of a stream (an 8K camera frame has 2²⁶).
pub const MAX_STEP_ELEMENTS: usize = 1 << 28;
/// The most bytes of a live window, its streams together (their steps of
/// rows, or of frames after the resize): 1 GiB.
pub const MAX_WINDOW_BYTES: usize = 1 << 30;
/// The widest or tallest camera frame, before or after a resize.
pub const MAX_FRAME_SIDE: usize = 8192;
/// The largest `delta_timestamps` offset or tolerance, in seconds.
pub const MAX_OFFSET_S: f64 = 3600.0;

/// The bounds [`LoaderSpec::check`] holds a spec to (module docs), in one
/// place for documentation and errors.
#[derive(Clone, Copy, Debug)]
pub struct SpecBounds;

impl SpecBounds {
    /// The bounds as one line of text.
    pub fn describe() -> String {
        format!(
            "rates up to {MAX_RATE_HZ:e} Hz, windows of up to {MAX_WINDOW_STEPS} steps and {MAX_WINDOW_BYTES} bytes \
             (all streams), up to {MAX_STREAMS} streams of up to {MAX_STEP_ELEMENTS} elements a step, frames up to \
             {MAX_FRAME_SIDE} pixels a side, offsets and tolerance up to {MAX_OFFSET_S} s"
        )
    }
}

/// What defines a loader's windows (module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoaderSpec {
    /// [`SPEC_FORMAT`].
    pub format: String,
    /// [`SPEC_VERSION`] when written.
    pub version: u32,
    /// The robocache version that wrote it (information only).
    pub written_by: String,
    pub clock: SpecClock,
    /// The streams, in the order batches hold them.
    pub streams: Vec<SpecStream>,
    /// `"valid"` (true where a step is real) or `"pad"` (LeRobot's `_is_pad`).
    pub masks: SpecMasks,
    pub frames: SpecFrames,
    /// The statistics resident (low-dimensional) streams were normalized
    /// with, or none (`null`: the key is always written, and required).
    #[serde(deserialize_with = "required")]
    pub normalization: Option<Normalization>,
    /// A ROS 2 dataset's bag mapping (topics, fields, joints, time source
    /// of each stream): what a deployment subscribes to. Information for
    /// the robot's own subscriber code: live samples are pushed decoded.
    #[serde(default)]
    pub bag_mapping: Option<serde_json::Value>,
    /// The definitions of the topics the bag mapping reads (type and
    /// `.msg` text, as the bags carry them): a live window decodes a
    /// robot's serialized messages with them ([`crate::live::Live::push_message`]).
    #[serde(default)]
    pub bag_topics: Vec<robocache_datasets::ros2::TopicDefinition>,
    /// A member of a mixture ([`crate::loader::mixture::MixtureLoader::spec`]):
    /// the mixture's streams as this member fills them. A live window of
    /// such a spec holds the mixture's streams (names, widths, masks and
    /// `dim_is_pad`), computed from the member's own streams (`streams`).
    #[serde(default)]
    pub mixture: Option<SpecMixture>,
    /// The evaluation transform of a loader trained with augmentation
    /// ([`crate::LoaderConfig::augment`]): each camera's centre crop (or
    /// whole-frame resize) after the frames' own resize, which
    /// [`crate::live::Live`] applies as the loader does in evaluation mode.
    /// Cameras without one are left out (specs written before it: none).
    #[serde(default)]
    pub evaluation_crops: Vec<SpecEvaluationCrop>,
}

/// One camera's evaluation crop: `(left, top, width, height)` of its frames
/// after the spec's resize, brought to `output` `(width, height)` by
/// torchvision's antialiased bilinear resize (docs/semantics.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecEvaluationCrop {
    pub stream: String,
    pub crop: (usize, usize, usize, usize),
    pub output: (usize, usize),
}

/// How one member of a mixture fills the mixture's streams.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecMixture {
    /// The member's name in the mixture.
    pub member: String,
    /// The mixture's streams, in the order its batches hold them.
    pub streams: Vec<SpecMixtureStream>,
    /// The normalization statistics of the member's group under the
    /// mixture's names (`MixtureLoader::statistics`: merged over the
    /// group's members), which the training code normalized the mixture's
    /// batches with, or none (`null`). Information for the deployment's
    /// own normalization: a live window gives the batch's values.
    #[serde(deserialize_with = "required")]
    pub statistics: Option<Normalization>,
}

/// One stream of a mixture as a member fills it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecMixtureStream {
    pub name: String,
    /// Where the member's values come from.
    pub source: SpecSource,
    /// The dtype of the mixture's stream (the batch's).
    pub dtype: String,
    /// One step of the batch's stream: the member's step with its last
    /// dimension padded to `width` (or no last dimension: a `[B, T]` stream).
    pub step_shape: Vec<usize>,
    /// The widest last dimension of every member's version (1 for a
    /// stream without one): the length of its `dim_is_pad` row.
    pub width: usize,
}

impl SpecSource {
    /// The member's streams it reads.
    pub fn streams(&self) -> &[String] {
        match self {
            SpecSource::Stream { stream } => std::slice::from_ref(stream),
            SpecSource::Concat { streams } => streams,
            SpecSource::Constant { .. } | SpecSource::Absent => &[],
        }
    }
}

/// Where a member's values of a mixture stream come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SpecSource {
    /// One of the member's streams.
    Stream { stream: String },
    /// Several of them side by side along the last dimension.
    Concat { streams: Vec<String> },
    /// The same row at every step, valid throughout.
    Constant { values: Vec<f64> },
    /// The member lacks it: zeros, every step padding, every dimension padding.
    Absent,
}
/// The clock windows are cut on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SpecClock {
    /// Time windows: targets `anchor + (k - history) / hz`.
    Times { hz: f64, history: usize, horizon: usize, causal: bool },
    /// LeRobot's `delta_timestamps`: offsets in seconds per key, on the
    /// dataset's frame clock (`fps`).
    Deltas { fps: f64, tolerance_s: f64, offsets: Vec<(String, Vec<f64>)> },
}

/// What a batch's masks mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecMasks {
    Valid,
    Pad,
}

/// One stream as a batch holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecStream {
    pub name: String,
    /// The dtype of the dataset's values (what a live sample is given as).
    pub dtype: String,
    pub step_shape: Vec<usize>,
    /// Channel kinds as robocache writes them (`continuous`,
    /// `0..3:continuous,3..7:quat-xyzw`).
    pub kind: String,
    /// `(width, height)` of a camera stream's frames (video or 8-bit RGB
    /// images), before any crop or resize (`null` for other streams).
    #[serde(deserialize_with = "required")]
    pub camera: Option<(usize, usize)>,
    /// A camera stored as video (LeRobot's video features).
    #[serde(default)]
    pub video: bool,
    /// Low-dimensional streams the loader held resident: f32, angle
    /// channels unwrapped, normalized when statistics are given.
    pub resident: bool,
    /// The stream's typical sample rate in training (Hz): one over the
    /// median of its episodes' median sample intervals, so that one odd
    /// episode cannot move it; 0 when no episode has two samples.
    /// Information, and a first guess at a live ring's capacity: rings
    /// keep samples by time span ([`crate::live`]), whatever the rate.
    /// (Specs written before it was a median call it `max_rate_hz`.)
    #[serde(alias = "max_rate_hz")]
    pub rate_hz: f64,
}

/// What camera frames become.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecFrames {
    /// `"hwc"` or `"chw"`.
    pub layout: String,
    /// `"uint8"` or `"float32"`.
    pub dtype: String,
    /// `(width, height)` after the resize, or none (`null`).
    #[serde(deserialize_with = "required")]
    pub size: Option<(usize, usize)>,
    /// `(left, top, width, height)` of the source frame, or the whole frame (`null`).
    #[serde(deserialize_with = "required")]
    pub crop: Option<(usize, usize, usize, usize)>,
}

impl SpecFrames {
    /// The frames of `output`.
    pub fn of(output: FrameOutput) -> Self {
        SpecFrames {
            layout: match output.layout {
                FrameLayout::Hwc => "hwc",
                FrameLayout::Chw => "chw",
            }
            .into(),
            dtype: match output.dtype {
                FrameDType::U8 => "uint8",
                FrameDType::F32 => "float32",
            }
            .into(),
            size: output.resize.map(|r| (r.width, r.height)),
            crop: output.resize.and_then(|r| r.crop).map(|c| (c.left, c.top, c.width, c.height)),
        }
    }

    /// The frame output these fields describe.
    pub fn output(&self) -> Result<FrameOutput> {
        let layout = match self.layout.as_str() {
            "hwc" => FrameLayout::Hwc,
            "chw" => FrameLayout::Chw,
            other => return Err(spec_error("frames.layout", format!("`{other}` is not hwc or chw"))),
        };
        let dtype = match self.dtype.as_str() {
            "uint8" => FrameDType::U8,
            "float32" => FrameDType::F32,
            other => return Err(spec_error("frames.dtype", format!("`{other}` is not uint8 or float32"))),
        };
        let resize = match (self.size, self.crop) {
            (None, None) => None,
            (None, Some(_)) => return Err(spec_error("frames.crop", "a crop needs frames.size".into())),
            (Some((width, height)), crop) => Some(FrameResize {
                width,
                height,
                crop: crop.map(|(left, top, width, height)| robocache_video::CropBox { left, top, width, height }),
            }),
        };
        Ok(FrameOutput { layout, dtype, resize })
    }
}

impl SpecStream {
    /// The channel kinds.
    pub fn stream_kind(&self) -> Result<StreamKind> {
        self.kind.parse::<StreamKind>().map_err(|e| spec_error(&format!("stream `{}` kind", self.name), e))
    }

    /// The dtype of the dataset's values.
    pub fn data_type(&self) -> Result<DType> {
        DType::from_name(&self.dtype).ok_or_else(|| {
            spec_error(&format!("stream `{}` dtype", self.name), format!("`{}` is no dtype", self.dtype))
        })
    }

    /// Elements of one step.
    pub fn channels(&self) -> usize {
        self.step_shape.iter().product()
    }

    /// True for camera frames (video, or 8-bit RGB images).
    pub fn is_camera(&self) -> bool {
        self.camera.is_some()
    }
}

impl LoaderSpec {
    /// A spec of this version for `streams` on `clock`.
    pub fn new(
        clock: SpecClock,
        streams: Vec<SpecStream>,
        masks: MaskKind,
        frames: FrameOutput,
        normalization: Option<Normalization>,
    ) -> Self {
        LoaderSpec {
            format: SPEC_FORMAT.into(),
            version: SPEC_VERSION,
            written_by: env!("CARGO_PKG_VERSION").into(),
            clock,
            streams,
            masks: match masks {
                MaskKind::Valid => SpecMasks::Valid,
                MaskKind::Pad => SpecMasks::Pad,
            },
            frames: SpecFrames::of(frames),
            normalization,
            bag_mapping: None,
            bag_topics: Vec::new(),
            mixture: None,
            evaluation_crops: Vec::new(),
        }
    }

    /// The clock of time windows.
    pub fn times(spec: &TimeWindowSpec) -> SpecClock {
        SpecClock::Times { hz: spec.hz, history: spec.history, horizon: spec.horizon, causal: spec.causal }
    }

    /// The clock of `delta_timestamps` at `fps`.
    pub fn deltas(spec: &DeltaTimestamps, fps: f64) -> SpecClock {
        SpecClock::Deltas { fps, tolerance_s: spec.tolerance_s, offsets: spec.deltas.clone() }
    }

    /// The stream called `name`.
    pub fn stream(&self, name: &str) -> Option<&SpecStream> {
        self.streams.iter().find(|s| s.name == name)
    }

    /// The mask kind.
    pub fn mask_kind(&self) -> MaskKind {
        match self.masks {
            SpecMasks::Valid => MaskKind::Valid,
            SpecMasks::Pad => MaskKind::Pad,
        }
    }

    /// The spec as JSON text.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| spec_error("spec", e.to_string()))
    }

    /// A spec from JSON text, checked ([`LoaderSpec::check`]).
    pub fn from_json(text: &str) -> Result<Self> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| spec_error("spec", format!("not JSON: {e}")))?;
        if value.get("format").and_then(serde_json::Value::as_str) != Some(SPEC_FORMAT) {
            return Err(spec_error(
                "spec",
                format!("its `format` is not \"{SPEC_FORMAT}\": not a robocache loader spec"),
            ));
        }
        match value.get("version").and_then(serde_json::Value::as_u64) {
            Some(version) if version > u64::from(SPEC_VERSION) => {
                return Err(spec_error(
                    "spec",
                    format!(
                        "format version {version} was written by a newer robocache ({}); this one reads up to version {SPEC_VERSION}: upgrade robocache",
                        value.get("written_by").and_then(serde_json::Value::as_str).unwrap_or("unknown")
                    ),
                ))
            }
            Some(_) => {}
            None => return Err(spec_error("spec", "has no format version".into())),
        }
        let spec: LoaderSpec = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let what = if path == "." { "spec".to_owned() } else { path };
            spec_error(&what, e.into_inner().to_string())
        })?;
        spec.check()?;
        Ok(spec)
    }

    /// Writes the spec as JSON to `path`, checked first
    /// ([`LoaderSpec::check`]): a spec that would not load is never saved.
    pub fn save(&self, path: &Path) -> Result<()> {
        self.check()?;
        std::fs::write(path, self.to_json()?).map_err(|e| spec_error(&path.display().to_string(), e.to_string()))
    }

    /// Reads a spec written by [`LoaderSpec::save`].
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| spec_error(&path.display().to_string(), e.to_string()))?;
        Self::from_json(&text).map_err(|error| match error {
            Error::Spec { what, problem } => Error::Spec { what: format!("{}: {what}", path.display()), problem },
            other => other,
        })
    }

    /// Checks what a reader relies on (module docs): the format and
    /// version, a finite positive clock within the bounds, streams with
    /// unique names, readable kinds and dtypes and bounded shapes, frames
    /// that make sense for every camera, and finite statistics of the
    /// stream's width for every resident stream with continuous channels
    /// when normalization is given. Each error names the field.
    pub fn check(&self) -> Result<()> {
        if self.format != SPEC_FORMAT {
            return Err(spec_error("format", format!("`{}` is not \"{SPEC_FORMAT}\"", self.format)));
        }
        if self.version == 0 || self.version > SPEC_VERSION {
            return Err(spec_error(
                "version",
                format!("{} is not a version this robocache reads (1 to {SPEC_VERSION})", self.version),
            ));
        }
        self.check_streams()?;
        self.check_clock()?;
        self.check_frames()?;
        self.check_evaluation_crops()?;
        if let Some(stats) = &self.normalization {
            self.check_normalization(stats)?;
        }
        if let Some(mapping) = &self.bag_mapping {
            serde_json::from_value::<robocache_datasets::ros2::BagMapping>(mapping.clone())
                .map_err(|e| spec_error("bag_mapping", e.to_string()))?;
        }
        if let Some(mixture) = &self.mixture {
            self.check_mixture(mixture)?;
        }
        self.check_window_bytes()
    }

    /// One step of `stream` as a batch holds it: its dtype and shape (a
    /// camera's frame after the resize, in the spec's layout; f32 rows for a
    /// resident stream; the dataset's dtype otherwise).
    fn batch_step(&self, stream: &SpecStream) -> Result<(DType, Vec<usize>)> {
        match stream.camera {
            Some(size) => self.frame_step(&stream.name, size),
            None if stream.resident => Ok((DType::F32, stream.step_shape.clone())),
            None => Ok((stream.data_type()?, stream.step_shape.clone())),
        }
    }

    /// A camera's frame in a batch: its dtype and one step's shape, after
    /// the resize and in the layout the spec's frames say.
    fn frame_step(&self, stream: &str, (width, height): (usize, usize)) -> Result<(DType, Vec<usize>)> {
        let output = self.frames.output()?;
        let (w, h) = output.resize.map_or((width, height), |r| (r.width, r.height));
        let (w, h) = self.evaluation_crop(stream).map_or((w, h), |c| c.output);
        let dtype = match output.dtype {
            FrameDType::U8 => DType::U8,
            FrameDType::F32 => DType::F32,
        };
        Ok(match output.layout {
            FrameLayout::Hwc => (dtype, vec![h, w, 3]),
            FrameLayout::Chw => (dtype, vec![3, h, w]),
        })
    }

    /// `stream`'s evaluation crop, if it has one.
    pub fn evaluation_crop(&self, stream: &str) -> Option<&SpecEvaluationCrop> {
        self.evaluation_crops.iter().find(|c| c.stream == stream)
    }

    /// Each evaluation crop names a camera stream once and lies within its
    /// frames after the resize; its output within the frame bounds.
    fn check_evaluation_crops(&self) -> Result<()> {
        let output = self.frames.output()?;
        for (i, crop) in self.evaluation_crops.iter().enumerate() {
            let field = format!("evaluation_crops[{i}]");
            let camera = self.streams.iter().find(|s| s.name == crop.stream).and_then(|s| s.camera);
            let Some((width, height)) = camera else {
                return Err(spec_error(&field, format!("`{}` is not a camera stream of the spec", crop.stream)));
            };
            if self.evaluation_crops.iter().filter(|c| c.stream == crop.stream).count() > 1 {
                return Err(spec_error(&field, format!("`{}` has more than one evaluation crop", crop.stream)));
            }
            let (w, h) = output.resize.map_or((width, height), |r| (r.width, r.height));
            let (left, top, cw, ch) = crop.crop;
            let fits = cw > 0
                && ch > 0
                && left.checked_add(cw).is_some_and(|r| r <= w)
                && top.checked_add(ch).is_some_and(|b| b <= h);
            let (ow, oh) = crop.output;
            if !fits || ow == 0 || oh == 0 || ow > MAX_FRAME_SIDE || oh > MAX_FRAME_SIDE {
                return Err(spec_error(
                    &field,
                    format!(
                        "a crop of {cw}x{ch} at ({left}, {top}) to {ow}x{oh} does not fit `{}`'s {w}x{h} frames \
                         (outputs up to {MAX_FRAME_SIDE} a side)",
                        crop.stream
                    ),
                ));
            }
        }
        Ok(())
    }

    fn check_mixture(&self, mixture: &SpecMixture) -> Result<()> {
        if mixture.streams.is_empty() || mixture.streams.len() > MAX_STREAMS {
            return Err(spec_error(
                "mixture.streams",
                format!("{} streams: 1 to {MAX_STREAMS}", mixture.streams.len()),
            ));
        }
        for (i, stream) in mixture.streams.iter().enumerate() {
            let what = |field: &str| format!("mixture.streams[{i}] (`{}`).{field}", stream.name);
            if mixture.streams[..i].iter().any(|s| s.name == stream.name) {
                return Err(spec_error(&what("name"), "another stream has this name".into()));
            }
            let dtype = DType::from_name(&stream.dtype)
                .ok_or_else(|| spec_error(&what("dtype"), format!("`{}` is no dtype", stream.dtype)))?;
            let elements = stream.step_shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
            if elements.is_none_or(|n| n > MAX_STEP_ELEMENTS) || stream.width == 0 || stream.width > MAX_STEP_ELEMENTS {
                return Err(spec_error(
                    &what("step_shape"),
                    format!("{:?} of width {}: 1 to {MAX_STEP_ELEMENTS} elements", stream.step_shape, stream.width),
                ));
            }
            let last = if stream.step_shape.is_empty() { 1 } else { stream.step_shape[stream.step_shape.len() - 1] };
            if last != stream.width {
                return Err(spec_error(
                    &what("width"),
                    format!("{} is not the step's last dimension {last}", stream.width),
                ));
            }
            let parts: &[String] = match &stream.source {
                SpecSource::Stream { stream } => std::slice::from_ref(stream),
                SpecSource::Concat { streams } => streams,
                SpecSource::Constant { values } => {
                    if values.is_empty() || values.len() > stream.width || values.iter().any(|v| !v.is_finite()) {
                        return Err(spec_error(
                            &what("source"),
                            format!("a constant of {} finite values up to the width {}", values.len(), stream.width),
                        ));
                    }
                    if stream.step_shape.len() > 1 {
                        return Err(spec_error(&what("source"), "a constant fills [T, D] steps only".into()));
                    }
                    &[]
                }
                SpecSource::Absent => &[],
            };
            if matches!(stream.source, SpecSource::Concat { .. }) && parts.is_empty() {
                return Err(spec_error(&what("source"), "concatenates no stream".into()));
            }
            let mut total = 0usize;
            for part in parts {
                let own = self.stream(part).ok_or_else(|| {
                    spec_error(&what("source"), format!("names `{part}`, which is not a stream of the member"))
                })?;
                if own.camera.is_some() && parts.len() > 1 {
                    return Err(spec_error(&what("source"), format!("camera `{part}` concatenated")));
                }
                let (own_dtype, own_shape) = self.batch_step(own)?;
                if own_dtype != dtype {
                    return Err(spec_error(&what("source"), format!("`{part}` is {own_dtype}, the stream {dtype}")));
                }
                total = total.saturating_add(own_shape.last().copied().unwrap_or(1));
                let body = |shape: &[usize]| shape[..shape.len().saturating_sub(1)].to_vec();
                if body(&own_shape) != body(&stream.step_shape) {
                    return Err(spec_error(
                        &what("source"),
                        format!(
                            "`{part}` has steps {own_shape:?}, the stream {:?}: only the last dimension may differ",
                            stream.step_shape
                        ),
                    ));
                }
            }
            if total > stream.width {
                return Err(spec_error(
                    &what("source"),
                    format!("{total} values wider than the width {}", stream.width),
                ));
            }
        }
        if let Some(stats) = &mixture.statistics {
            for (name, statistics) in &stats.streams {
                statistics
                    .check()
                    .map_err(|problem| spec_error(&format!("mixture.statistics.streams[`{name}`]"), problem))?;
            }
        }
        Ok(())
    }

    fn check_clock(&self) -> Result<()> {
        match &self.clock {
            SpecClock::Times { hz, history, horizon, .. } => {
                check_rate("clock.hz", *hz)?;
                let steps = history.checked_add(*horizon).and_then(|s| s.checked_add(1));
                if steps.is_none_or(|s| s > MAX_WINDOW_STEPS) {
                    return Err(spec_error(
                        "clock",
                        format!(
                            "history {history} and horizon {horizon}: a window of more than {MAX_WINDOW_STEPS} steps"
                        ),
                    ));
                }
                if history + horizon == 0 {
                    return Err(spec_error(
                        "clock",
                        "history and horizon are both 0: a window of one step has nothing to resample".into(),
                    ));
                }
            }
            SpecClock::Deltas { fps, tolerance_s, offsets } => {
                check_rate("clock.fps", *fps)?;
                if !(tolerance_s.is_finite() && (0.0..=MAX_OFFSET_S).contains(tolerance_s)) {
                    return Err(spec_error(
                        "clock.tolerance_s",
                        format!("{tolerance_s} is not in 0..={MAX_OFFSET_S} s"),
                    ));
                }
                for (i, (key, seconds)) in offsets.iter().enumerate() {
                    let what = format!("clock.offsets[{i}] (`{key}`)");
                    if self.stream(key).is_none() {
                        return Err(spec_error(&what, "names no stream of the spec".into()));
                    }
                    if offsets[..i].iter().any(|(k, _)| k == key) {
                        return Err(spec_error(&what, "the key is given twice".into()));
                    }
                    if seconds.is_empty() || seconds.len() > MAX_WINDOW_STEPS {
                        return Err(spec_error(&what, format!("{} offsets: 1 to {MAX_WINDOW_STEPS}", seconds.len())));
                    }
                    if let Some(bad) = seconds.iter().find(|d| !(d.is_finite() && d.abs() <= MAX_OFFSET_S)) {
                        return Err(spec_error(
                            &what,
                            format!("offset {} s is not finite within ±{MAX_OFFSET_S} s", number(*bad)),
                        ));
                    }
                    if let Some(far) = seconds.iter().find(|d| (*d * fps).abs() > MAX_WINDOW_STEPS as f64) {
                        return Err(spec_error(
                            &what,
                            format!(
                                "offset {} s is {} frames at {fps} fps: more than {MAX_WINDOW_STEPS}",
                                number(*far),
                                number((far * fps).abs())
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_streams(&self) -> Result<()> {
        if self.streams.is_empty() || self.streams.len() > MAX_STREAMS {
            return Err(spec_error("streams", format!("{} streams: 1 to {MAX_STREAMS}", self.streams.len())));
        }
        for (i, stream) in self.streams.iter().enumerate() {
            let what = |field: &str| format!("streams[{i}] (`{}`).{field}", stream.name);
            if stream.name.is_empty() {
                return Err(spec_error(&format!("streams[{i}].name"), "is empty".into()));
            }
            if self.streams[..i].iter().any(|s| s.name == stream.name) {
                return Err(spec_error(&what("name"), "another stream has this name".into()));
            }
            stream.stream_kind()?;
            stream.data_type()?;
            let elements = stream.step_shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
            if elements.is_none_or(|n| n > MAX_STEP_ELEMENTS) {
                return Err(spec_error(
                    &what("step_shape"),
                    format!("{:?}: more than {MAX_STEP_ELEMENTS} elements a step", stream.step_shape),
                ));
            }
            if let Some((width, height)) = stream.camera {
                check_side(&what("camera"), width, height)?;
            }
            if !(stream.rate_hz.is_finite() && (0.0..=MAX_RATE_HZ).contains(&stream.rate_hz)) {
                return Err(spec_error(
                    &what("rate_hz"),
                    format!("{} Hz is not in 0..={MAX_RATE_HZ:e}", number(stream.rate_hz)),
                ));
            }
        }
        Ok(())
    }

    /// A live window within [`MAX_WINDOW_BYTES`], all its streams
    /// together: each stream's steps (the history and the anchor; a key's
    /// offsets) of rows (f32 when resident) or of frames as the resize makes
    /// them, and a mixture member's streams and `dim_is_pad` rows.
    fn check_window_bytes(&self) -> Result<()> {
        let mut total = 0usize;
        let mut add = |what: String, steps: usize, dtype: DType, shape: &[usize]| -> Result<()> {
            let bytes = shape
                .iter()
                .try_fold(dtype.size_in_bytes(), |n, &d| n.checked_mul(d))
                .and_then(|n| n.checked_mul(steps))
                .and_then(|n| n.checked_add(total));
            match bytes {
                Some(sum) if sum <= MAX_WINDOW_BYTES => {
                    total = sum;
                    Ok(())
                }
                _ => Err(spec_error(
                    &what,
                    format!(
                        "{steps} steps of {dtype} {shape:?}: the window's streams together would pass {MAX_WINDOW_BYTES} bytes"
                    ),
                )),
            }
        };
        let history_steps = match &self.clock {
            SpecClock::Times { history, .. } => history + 1,
            SpecClock::Deltas { .. } => 1,
        };
        for (i, stream) in self.streams.iter().enumerate() {
            let steps = match &self.clock {
                SpecClock::Times { .. } => history_steps,
                SpecClock::Deltas { offsets, .. } => {
                    offsets.iter().find(|(key, _)| *key == stream.name).map_or(1, |(_, o)| o.len())
                }
            };
            let (dtype, shape) = self.batch_step(stream)?;
            add(format!("streams[{i}] (`{}`)", stream.name), steps, dtype, &shape)?;
        }
        for (i, mixed) in self.mixture.iter().flat_map(|m| m.streams.iter()).enumerate() {
            let what = format!("mixture.streams[{i}] (`{}`)", mixed.name);
            let dtype = DType::from_name(&mixed.dtype)
                .ok_or_else(|| spec_error(&format!("{what}.dtype"), format!("`{}` is no dtype", mixed.dtype)))?;
            add(what.clone(), history_steps, dtype, &mixed.step_shape)?;
            add(what, 1, DType::Bool, &[mixed.width])?;
        }
        Ok(())
    }

    fn check_frames(&self) -> Result<()> {
        self.frames.output()?;
        if let Some((width, height)) = self.frames.size {
            check_side("frames.size", width, height)?;
        }
        let Some((left, top, width, height)) = self.frames.crop else { return Ok(()) };
        if width == 0 || height == 0 {
            return Err(spec_error("frames.crop", format!("{width}x{height}: an empty crop")));
        }
        for stream in &self.streams {
            let Some((frame_width, frame_height)) = stream.camera else { continue };
            let inside = left.checked_add(width).is_some_and(|r| r <= frame_width)
                && top.checked_add(height).is_some_and(|b| b <= frame_height);
            if !inside {
                return Err(spec_error(
                    "frames.crop",
                    format!(
                        "({left}, {top}, {width}, {height}) is not inside camera `{}`'s {frame_width}x{frame_height} frames",
                        stream.name
                    ),
                ));
            }
        }
        Ok(())
    }

    fn check_normalization(&self, stats: &Normalization) -> Result<()> {
        for (name, statistics) in &stats.streams {
            let what = format!("normalization.streams[`{name}`]");
            statistics.check().map_err(|problem| spec_error(&what, problem))?;
            let Some(stream) = self.stream(name) else { continue };
            let channels = stream.channels();
            if stream.resident && statistics.mean.len() != channels {
                return Err(spec_error(
                    &what,
                    format!("{} channels of statistics, the stream has {channels}", statistics.mean.len()),
                ));
            }
        }
        for stream in &self.streams {
            let kind = stream.stream_kind()?;
            let continuous = continuous_channels(&kind, stream.channels()).contains(&true);
            if stream.resident && continuous && !stats.streams.contains_key(&stream.name) {
                return Err(spec_error(
                    "normalization",
                    format!(
                        "has no statistics of `{}`, which the loader normalized ({:?}): the spec cannot reproduce its windows",
                        stream.name, stats.mode
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A field that must be present, `null` or a value (serde takes a missing
/// `Option` as `None` otherwise).
fn required<'de, D, T>(deserializer: D) -> std::result::Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer)
}

fn check_rate(what: &str, hz: f64) -> Result<()> {
    if hz.is_finite() && hz > 0.0 && hz <= MAX_RATE_HZ {
        Ok(())
    } else {
        Err(spec_error(
            what,
            format!("{} Hz is not a rate: finite, positive and at most {MAX_RATE_HZ:e} Hz", number(hz)),
        ))
    }
}

/// `value` as an error shows it: huge and tiny ones in exponent form.
fn number(value: f64) -> String {
    if value != 0.0 && value.is_finite() && !(1e-3..1e6).contains(&value.abs()) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

fn check_side(what: &str, width: usize, height: usize) -> Result<()> {
    if (1..=MAX_FRAME_SIDE).contains(&width) && (1..=MAX_FRAME_SIDE).contains(&height) {
        Ok(())
    } else {
        Err(spec_error(what, format!("{width}x{height}: each side 1 to {MAX_FRAME_SIDE} pixels")))
    }
}

fn spec_error(what: &str, problem: String) -> Error {
    Error::Spec { what: what.into(), problem }
}

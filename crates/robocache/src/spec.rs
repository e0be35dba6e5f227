//! [`LoaderSpec`]: what defines a loader's windows, saved with a checkpoint
//! so that a running policy gets the same windows live ([`crate::live`]).
//!
//! One versioned JSON document, with no path to the dataset in it: the
//! streams (name, dtype, step shape, channel kinds, camera frame size,
//! fastest rate), the clock (time windows, causal or not, or
//! `delta_timestamps` with the dataset's fps and tolerance), what masks
//! mark, what camera frames become (crop, size, layout, dtype) and the
//! normalization statistics. [`crate::Loader::spec`] writes it;
//! [`LoaderSpec::load`] refuses a spec of a newer format version, and one
//! whose normalization lacks the statistics of a stream it normalizes.

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

/// What defines a loader's windows (module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// with, or none.
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
}

/// The clock windows are cut on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
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
pub struct SpecStream {
    pub name: String,
    /// The dtype of the dataset's values (what a live sample is given as).
    pub dtype: String,
    pub step_shape: Vec<usize>,
    /// Channel kinds as robocache writes them (`continuous`,
    /// `0..3:continuous,3..7:quat-xyzw`).
    pub kind: String,
    /// `(width, height)` of a camera stream's frames (video or 8-bit RGB
    /// images), before any crop or resize.
    pub camera: Option<(usize, usize)>,
    /// A camera stored as video (LeRobot's video features).
    #[serde(default)]
    pub video: bool,
    /// Low-dimensional streams the loader held resident: f32, angle
    /// channels unwrapped, normalized when statistics are given.
    pub resident: bool,
    /// The fastest rate of the stream in any episode (Hz): sizes the live
    /// sample buffers.
    pub max_rate_hz: f64,
}

/// What camera frames become.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecFrames {
    /// `"hwc"` or `"chw"`.
    pub layout: String,
    /// `"uint8"` or `"float32"`.
    pub dtype: String,
    /// `(width, height)` after the resize, or none.
    pub size: Option<(usize, usize)>,
    /// `(left, top, width, height)` of the source frame, or the whole frame.
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
        let spec: LoaderSpec = serde_json::from_value(value).map_err(|e| spec_error("spec", e.to_string()))?;
        spec.check()?;
        Ok(spec)
    }

    /// Writes the spec as JSON to `path`.
    pub fn save(&self, path: &Path) -> Result<()> {
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

    /// Checks what a reader relies on: a positive clock, streams with
    /// readable kinds and dtypes, frames that make sense, and statistics for
    /// every resident stream with continuous channels when normalization is
    /// given.
    pub fn check(&self) -> Result<()> {
        match &self.clock {
            SpecClock::Times { hz, history, horizon, .. } => {
                if !(hz.is_finite() && *hz > 0.0) || history + horizon == 0 {
                    return Err(spec_error("clock", format!("{hz} Hz, history {history}, horizon {horizon}")));
                }
            }
            SpecClock::Deltas { fps, tolerance_s, offsets } => {
                if !(fps.is_finite() && *fps > 0.0 && tolerance_s.is_finite() && *tolerance_s >= 0.0) {
                    return Err(spec_error("clock", format!("fps {fps}, tolerance_s {tolerance_s}")));
                }
                if let Some((key, _)) = offsets.iter().find(|(key, _)| self.stream(key).is_none()) {
                    return Err(spec_error("clock", format!("offsets name `{key}`, which is not a stream")));
                }
            }
        }
        if self.streams.is_empty() {
            return Err(spec_error("streams", "none".into()));
        }
        self.frames.output()?;
        for stream in &self.streams {
            let kind = stream.stream_kind()?;
            stream.data_type()?;
            let Some(stats) = &self.normalization else { continue };
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

fn spec_error(what: &str, problem: String) -> Error {
    Error::Spec { what: what.into(), problem }
}

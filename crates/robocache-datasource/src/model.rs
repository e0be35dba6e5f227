//! The episode model every reader produces (docs/datasets.md): an episode is a set
//! of named streams, each with a dtype, a per-step shape, its own timeline
//! and the kind of its channels, which picks how the stream is resampled.

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::str::FromStr;

use robocache_cpu::{ChannelGroup, ChannelSpec, DType, Method, QuaternionOrder};
use serde::{Serialize, Serializer};

/// The name of the layout a dataset was read as (`robomimic`, `lerobot`,
/// `ros2`, ...). Each format crate names its own layouts; this crate names
/// none. It compares equal to the facade's `Format` of the same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct FormatName(&'static str);

impl FormatName {
    /// The layout called `name` (lowercase, as the CLI and JSON spell it).
    pub const fn new(name: &'static str) -> Self {
        FormatName(name)
    }

    /// The name used by the CLI and in JSON.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for FormatName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// What a group of channels holds, which decides how it is resampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelKind {
    /// Positions, velocities, joint angles without wrap-around: `Linear`.
    Continuous,
    /// Unit quaternions, 4 channels each: `Slerp` in the given order.
    Quaternion(QuaternionOrder),
    /// Angles in radians that wrap at ±π (Euler angles): unwrapped along the
    /// stream, interpolated linearly, wrapped back into [−π, π].
    Angle,
    /// Gripper open/closed, flags, rewards, ids: `Previous` (zero-order hold).
    Discrete,
    /// Camera frames and depth maps: `Previous`, so a window never shows a
    /// frame captured after its target time.
    Image,
}

impl ChannelKind {
    /// The resampling method of this kind.
    pub const fn method(self) -> Method {
        match self {
            ChannelKind::Continuous | ChannelKind::Angle => Method::Linear,
            ChannelKind::Quaternion(order) => Method::Slerp { order },
            ChannelKind::Discrete | ChannelKind::Image => Method::Previous,
        }
    }

    /// The name used in files (`robocache_kind` attributes), the CLI and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            ChannelKind::Continuous => "continuous",
            ChannelKind::Quaternion(QuaternionOrder::Xyzw) => "quaternion-xyzw",
            ChannelKind::Quaternion(QuaternionOrder::Wxyz) => "quaternion-wxyz",
            ChannelKind::Angle => "angle",
            ChannelKind::Discrete => "discrete",
            ChannelKind::Image => "image",
        }
    }
}

impl FromStr for ChannelKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "continuous" | "linear" => ChannelKind::Continuous,
            "quaternion" | "quaternion-xyzw" | "quat" | "quat-xyzw" => ChannelKind::Quaternion(QuaternionOrder::Xyzw),
            "quaternion-wxyz" | "quat-wxyz" => ChannelKind::Quaternion(QuaternionOrder::Wxyz),
            "angle" | "euler" => ChannelKind::Angle,
            "discrete" | "binary" | "gripper" => ChannelKind::Discrete,
            "image" | "rgb" | "depth" => ChannelKind::Image,
            other => {
                return Err(format!(
                    "unknown channel kind `{other}` (expected continuous, quaternion-xyzw, quaternion-wxyz, angle, discrete or image)"
                ))
            }
        })
    }
}

/// The kind of every channel of a stream: one kind, or groups over the
/// flattened per-step channels (`"0..3:continuous,3..6:angle,6..7:discrete"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// One kind for every channel.
    All(ChannelKind),
    /// Groups in channel order, covering every channel.
    Groups(Vec<(Range<usize>, ChannelKind)>),
}

impl StreamKind {
    /// The channel spec that resamples a stream of this kind.
    pub fn channel_spec(&self) -> ChannelSpec {
        match self {
            StreamKind::All(kind) => ChannelSpec::All(kind.method()),
            StreamKind::Groups(groups) => ChannelSpec::Groups(
                groups
                    .iter()
                    .map(|(range, kind)| ChannelGroup { range: range.clone(), method: kind.method() })
                    .collect(),
            ),
        }
    }

    /// The channel ranges holding angles (to unwrap before resampling).
    pub fn angle_channels(&self, channels: usize) -> Vec<Range<usize>> {
        match self {
            StreamKind::All(ChannelKind::Angle) => std::iter::once(0..channels).collect(),
            StreamKind::All(_) => Vec::new(),
            StreamKind::Groups(groups) => {
                groups.iter().filter(|(_, kind)| *kind == ChannelKind::Angle).map(|(range, _)| range.clone()).collect()
            }
        }
    }

    /// True when every channel is of `kind`.
    pub fn is(&self, kind: ChannelKind) -> bool {
        match self {
            StreamKind::All(k) => *k == kind,
            StreamKind::Groups(groups) => groups.iter().all(|(_, k)| *k == kind),
        }
    }

    /// Checks that the groups cover `0..channels` in order.
    pub fn check(&self, channels: usize) -> Result<(), String> {
        if let StreamKind::Groups(groups) = self {
            let mut next = 0;
            for (range, kind) in groups {
                if range.start != next || range.end <= range.start {
                    return Err(format!(
                        "channel kinds `{self}` must cover 0..{channels} in order without gaps or overlaps"
                    ));
                }
                if let ChannelKind::Quaternion(_) = kind {
                    if range.len() % 4 != 0 {
                        return Err(format!("quaternion channels {range:?} are not a multiple of 4"));
                    }
                }
                next = range.end;
            }
            if next != channels {
                return Err(format!("channel kinds `{self}` cover 0..{next} but the stream has {channels} channels"));
            }
        } else if let StreamKind::All(ChannelKind::Quaternion(_)) = self {
            if !channels.is_multiple_of(4) {
                return Err(format!("a quaternion stream needs a multiple of 4 channels, this one has {channels}"));
            }
        }
        Ok(())
    }
}

impl fmt::Display for StreamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamKind::All(kind) => f.write_str(kind.name()),
            StreamKind::Groups(groups) => {
                for (i, (range, kind)) in groups.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}..{}:{}", range.start, range.end, kind.name())?;
                }
                Ok(())
            }
        }
    }
}

impl FromStr for StreamKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if !s.contains(':') {
            return s.parse().map(StreamKind::All);
        }
        let mut groups = Vec::new();
        for part in s.split(',') {
            let (range, kind) =
                part.split_once(':').ok_or_else(|| format!("`{part}` is not START..END:KIND in `{s}`"))?;
            let (start, end) = range.trim().split_once("..").ok_or_else(|| format!("`{range}` is not START..END"))?;
            let parse =
                |v: &str| v.trim().parse::<usize>().map_err(|_| format!("`{v}` is not a channel index in `{s}`"));
            groups.push((parse(start)?..parse(end)?, kind.parse()?));
        }
        Ok(StreamKind::Groups(groups))
    }
}

impl Serialize for StreamKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// When the steps of a stream were recorded.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "type")]
pub enum Timeline {
    /// Step `i` at `start + i / hz` seconds.
    Uniform { start: f64, hz: f64 },
    /// Explicit per-step times in seconds (`f64`), read from the dataset `key`
    /// of the episode when a time window needs them.
    Explicit { key: String },
}

/// The most values one row (one step) of a stream may hold: 2^27
/// (512 MiB of f32; a 4K RGB frame holds 24,883,200). Metadata that
/// claims more is an error before anything is allocated for it: a file of
/// N bytes must not make the reader allocate far more than N.
pub const MAX_ROW_VALUES: usize = 1 << 27;

/// The values one row of `shape` holds, where 1 to [`MAX_ROW_VALUES`]
/// (a dimension of 0 holds nothing to read); else what is wrong with it.
pub fn row_values(shape: &[usize]) -> Result<usize, String> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| (1..=MAX_ROW_VALUES).contains(&n))
        .ok_or_else(|| format!("is {shape:?}: not 1 to {MAX_ROW_VALUES} values a row, as robocache reads"))
}

/// One stream of an episode.
#[derive(Clone, Debug, Serialize)]
pub struct StreamInfo {
    /// The name windows and batches use (`obs/robot0_eef_pos`, `actions`, `rgb_static`).
    pub name: String,
    /// The element type on disk.
    #[serde(serialize_with = "serialize_dtype")]
    pub dtype: DType,
    /// The shape of one step (`[7]`, `[84, 84, 3]`, `[]` for scalars).
    pub step_shape: Vec<usize>,
    /// Number of steps.
    pub len: usize,
    /// The kind of its channels (how it is resampled).
    pub kind: StreamKind,
    /// When its steps were recorded.
    pub timeline: Timeline,
    /// Where it lives in the file (an HDF5 dataset path; RLDS: the Example key, `steps/action`).
    pub source: String,
}

impl StreamInfo {
    /// Elements in one step (the product of the step shape).
    pub fn channels(&self) -> usize {
        self.step_shape.iter().product()
    }

    /// Bytes of one step.
    pub fn step_bytes(&self) -> usize {
        self.channels() * self.dtype.size_in_bytes()
    }

    /// Bytes of the whole stream.
    pub fn size_in_bytes(&self) -> usize {
        self.len * self.step_bytes()
    }

    /// True for camera and depth streams (kept out of the low-dimensional cache).
    pub fn is_image(&self) -> bool {
        self.kind.is(ChannelKind::Image)
    }
}

fn serialize_dtype<S: Serializer>(dtype: &DType, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(dtype.name())
}

/// One episode (a robomimic demo, a CALVIN segment, an RLDS episode).
#[derive(Clone, Debug, Serialize)]
pub struct EpisodeInfo {
    /// Its name in the file (`demo_12`, `segment_0000358`, `episode_3`).
    pub name: String,
    /// Number of steps (every stream whose timeline is the step clock has this many).
    pub len: usize,
    /// Duration in seconds from the first to the last step of the step clock.
    pub duration_s: f64,
    /// Its streams, in file order.
    pub streams: Vec<StreamInfo>,
    /// The language instruction, when the dataset has one.
    pub instruction: Option<String>,
    /// Everything else the file says about the episode (attributes, ids).
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl EpisodeInfo {
    /// The stream called `name`.
    pub fn stream(&self, name: &str) -> Option<&StreamInfo> {
        self.streams.iter().find(|s| s.name == name)
    }

    /// Index of the stream called `name`.
    pub fn stream_index(&self, name: &str) -> Option<usize> {
        self.streams.iter().position(|s| s.name == name)
    }
}

/// What opening a file learns: metadata only, no stream data.
#[derive(Clone, Debug, Serialize)]
pub struct DatasetInfo {
    /// The file.
    pub path: PathBuf,
    /// The layout it was read as.
    pub format: FormatName,
    /// The control rate of the step clock in Hz.
    pub rate_hz: f64,
    /// Episodes in dataset order (robomimic demos sorted by number).
    pub episodes: Vec<EpisodeInfo>,
    /// Named subsets of episodes (robomimic `mask/<filter_key>`).
    pub splits: Vec<String>,
    /// Dataset-level metadata (`env_args`, attributes).
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl DatasetInfo {
    /// Total steps over every episode.
    pub fn total_steps(&self) -> usize {
        self.episodes.iter().map(|e| e.len).sum()
    }

    /// Index of the episode called `name`.
    pub fn episode_index(&self, name: &str) -> Option<usize> {
        self.episodes.iter().position(|e| e.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_kinds_parse_print_and_check() {
        let kind: StreamKind = "0..3:continuous,3..6:angle,6..7:discrete".parse().unwrap();
        assert_eq!(kind.to_string(), "0..3:continuous,3..6:angle,6..7:discrete");
        assert!(kind.check(7).is_ok());
        assert!(kind.check(8).unwrap_err().contains("cover 0..7"));
        assert_eq!(kind.angle_channels(7), vec![3..6]);
        assert_eq!(kind.channel_spec().to_string(), "0..3:linear,3..6:linear,6..7:previous");
        assert!("0..3:continuous,4..6:angle".parse::<StreamKind>().unwrap().check(6).is_err());
        assert!("0..3:quaternion".parse::<StreamKind>().unwrap().check(3).is_err());
        assert!("wobbly".parse::<StreamKind>().is_err());
    }
}

//! The mapping from a bag's topics and fields to dataset keys: a TOML file
//! (or the same table from Python), or the default one robocache derives
//! from the topics' types.
//!
//! ```toml
//! fps = 30                            # the policy clock (the dataset's rate)
//!
//! [streams."observation.state"]
//! topic = "/joint_states"
//! field = "position"                  # a dotted path into the message
//! joints = ["j1", "j2", "j3"]         # JointState-like: values by joint name
//!
//! [streams."observation.images.wrist"]
//! topic = "/wrist/image/compressed"   # Image and CompressedImage: frames
//!
//! [streams.action]
//! topic = "/cmd"
//! field = "data"
//! time = "log"                        # header (default where the type has one), log or publish
//!
//! [streams."observation.ee_pose"]
//! topic = "/ee_pose"
//! fields = ["pose.position", "pose.orientation"]
//! kind = "0..3:continuous,3..7:quaternion-xyzw"
//!
//! [streams."observation.camera_pose"]
//! transform = ["world", "camera"]     # camera in world, through /tf and /tf_static
//!
//! [episodes]
//! gap_s = 2.0                         # a new episode after 2 s without a mapped message
//! # or, at marker messages:
//! # markers = "/episode"              # each message starts an episode, or with
//! # start = true                      # `start`/`stop` values of its `field`
//! # stop = false                      # (default `data`): between them
//! ```
//!
//! A field path to a message flattens every number under it in field
//! order (bools as 0 or 1); `fields` concatenates several paths. `kind` is
//! a channel kind or groups of them (the stream kinds of docs/datasets.md);
//! without it, `geometry_msgs/Quaternion` parts are `quaternion-xyzw`, a
//! stream of bools is `discrete`, and the rest `continuous`. `dtype` is
//! `float32` (the default, as LeRobot stores state and actions) or
//! `float64`.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use robocache_datasource::model::StreamKind;
use robocache_datasource::{Error, Result};

/// Where a stream's times come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeSource {
    /// `header.stamp` (the sensor's time), where the type has a header.
    Header,
    /// When the recorder received the message.
    Log,
    /// When the publisher sent it (MCAP; SQLite bags store only the log time).
    Publish,
}

/// One dataset key: a topic and what to take from its messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamMapping {
    /// The topic (`/joint_states`); not given for a `transform`.
    #[serde(default)]
    pub topic: String,
    /// `[parent, child]`: the child frame's pose in the parent frame,
    /// through the tf tree (`/tf`, `/tf_static`), at each `/tf` message.
    #[serde(default)]
    pub transform: Option<[String; 2]>,
    /// One dotted field path (`position`, `pose.orientation`); none: the
    /// whole message without its header, or the frame of an image topic.
    #[serde(default)]
    pub field: Option<String>,
    /// Several field paths, concatenated.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Values by joint name, from the messages' `name` list (JointState):
    /// reordered or partial lists are matched by name.
    #[serde(default)]
    pub joints: Vec<String>,
    /// Channel kinds (`continuous`, `quaternion-xyzw`, `discrete`,
    /// `0..3:continuous,3..7:quaternion-xyzw`).
    #[serde(default)]
    pub kind: Option<String>,
    /// Where its times come from (default: `header` where the type has one, else `log`).
    #[serde(default)]
    pub time: Option<TimeSource>,
    /// `float32` (default) or `float64`.
    #[serde(default)]
    pub dtype: Option<String>,
}

/// How bags are cut into episodes (by default, one episode a bag file).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpisodeSplit {
    /// A new episode wherever no message of a mapped topic was logged for
    /// more than this many seconds (a recording paused between demonstrations).
    #[serde(default)]
    pub gap_s: Option<f64>,
    /// A topic whose messages mark episodes (a teleoperation UI's
    /// `std_msgs/Bool` or `String`): without `start`, each of its messages
    /// starts an episode that runs to the next one (or the bag's end).
    #[serde(default)]
    pub markers: Option<String>,
    /// The dotted field of a marker message holding its value (default `data`).
    #[serde(default)]
    pub field: Option<String>,
    /// The value that starts an episode (`true`, `"start"`, `1`): other
    /// messages start none.
    #[serde(default)]
    pub start: Option<MarkerValue>,
    /// The value that ends the open episode; without it an episode runs to
    /// the next start (or the bag's end). Messages outside episodes are left out.
    #[serde(default)]
    pub stop: Option<MarkerValue>,
}

/// A marker message's value that starts or stops an episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MarkerValue {
    Bool(bool),
    Int(i64),
    Text(String),
}

impl std::fmt::Display for MarkerValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MarkerValue::Bool(b) => write!(f, "{b}"),
            MarkerValue::Int(i) => write!(f, "{i}"),
            MarkerValue::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// A bag-to-dataset mapping (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BagMapping {
    /// The policy clock in Hz (the dataset's rate); 30 when not given.
    #[serde(default)]
    pub fps: Option<f64>,
    /// How bags are cut into episodes.
    #[serde(default)]
    pub episodes: EpisodeSplit,
    /// Dataset keys and their topics.
    #[serde(default)]
    pub streams: BTreeMap<String, StreamMapping>,
}

impl FromStr for BagMapping {
    type Err = Error;

    /// Parses a mapping from TOML text.
    fn from_str(text: &str) -> Result<BagMapping> {
        let mapping: BagMapping = toml::from_str(text).map_err(|e| Error::Invalid(format!("the bag mapping: {e}")))?;
        mapping.check()?;
        Ok(mapping)
    }
}

impl BagMapping {
    /// Reads a mapping file (TOML).
    pub fn from_file(path: impl AsRef<Path>) -> Result<BagMapping> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| Error::Io { file: path.to_path_buf(), error })?;
        text.parse().map_err(|e: Error| Error::Invalid(format!("{}: {e}", path.display())))
    }

    /// Parses a mapping from JSON (the same table as the TOML file: what
    /// Python's dicts become).
    pub fn from_json(text: &str) -> Result<BagMapping> {
        let mapping: BagMapping =
            serde_json::from_str(text).map_err(|e| Error::Invalid(format!("the bag mapping: {e}")))?;
        mapping.check()?;
        Ok(mapping)
    }

    /// Checks what does not depend on a bag: kinds, dtypes, the rate.
    pub fn check(&self) -> Result<()> {
        if let Some(fps) = self.fps {
            if !(fps.is_finite() && fps > 0.0) {
                return Err(Error::Invalid(format!("the bag mapping's fps {fps} is not a positive rate")));
            }
        }
        if let Some(gap) = self.episodes.gap_s {
            if !(gap.is_finite() && gap > 0.0) {
                return Err(Error::Invalid(format!("the bag mapping's episodes.gap_s {gap} is not a positive time")));
            }
        }
        let split = &self.episodes;
        let problem = match (&split.gap_s, &split.markers) {
            (Some(_), Some(_)) => Some("cut bags at `gap_s` or at `markers`, not both"),
            (_, None) if split.start.is_some() || split.stop.is_some() || split.field.is_some() => {
                Some("`start`, `stop` and `field` need a `markers` topic")
            }
            (_, Some(_)) if split.stop.is_some() && split.start.is_none() => {
                Some("a `stop` value needs a `start` value")
            }
            (_, Some(topic)) if topic.is_empty() => Some("an empty `markers` topic"),
            _ => None,
        };
        if let Some(problem) = problem {
            return Err(Error::Invalid(format!("the bag mapping's [episodes]: {problem}")));
        }
        for (key, stream) in &self.streams {
            let at = |problem: String| Error::Invalid(format!("the bag mapping, stream `{key}`: {problem}"));
            if let Some(kind) = &stream.kind {
                kind.parse::<StreamKind>().map_err(at)?;
            }
            if let Some(dtype) = &stream.dtype {
                if !matches!(dtype.as_str(), "float32" | "float64") {
                    return Err(at(format!("dtype `{dtype}` (expected float32 or float64)")));
                }
            }
            if stream.field.is_some() && !stream.fields.is_empty() {
                return Err(at("give `field` or `fields`, not both".into()));
            }
            match (&stream.transform, stream.topic.is_empty()) {
                (Some(_), false) => return Err(at("give `topic` or `transform`, not both".into())),
                (None, true) => return Err(at("no `topic` (or `transform = [parent, child]`)".into())),
                (Some(_), true) if stream.field.is_some() || !stream.fields.is_empty() || !stream.joints.is_empty() => {
                    return Err(at("a `transform` takes no `field`, `fields` or `joints`".into()))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The field paths of `stream` (empty: the whole message).
    pub(crate) fn paths(stream: &StreamMapping) -> Vec<String> {
        match &stream.field {
            Some(field) => vec![field.clone()],
            None => stream.fields.clone(),
        }
    }
}

//! ROS 2 bags as robot teams record them: MCAP (`.mcap`, rosbag2's default
//! since Iron) and rosbag2 SQLite (`.db3`), read without a ROS install.
//!
//! - **A dataset** is a bag file, a rosbag2 directory (its `metadata.yaml`
//!   beside one file per split) or a directory holding bags anywhere below
//!   it. **An episode** is one bag file (a split of a recording is one
//!   file), in path order; with `[episodes] gap_s` each part of a bag
//!   between gaps in its mapped topics' log times, with `[episodes] markers`
//!   each part a marker topic's messages mark (`name#0`, `name#1`, ...).
//! - **Messages** are CDR, decoded by reflection over the definitions the
//!   bag itself carries (`msg_schema.rs`, `cdr.rs`): any message type.
//! - **Streams**: each mapped key (the [`BagMapping`], or the default one
//!   derived from the topic types) becomes a stream at its topic's native
//!   rate, with explicit timestamps: each message's `header.stamp`, log or
//!   publish time, in seconds from the bag's first log time. Time windows
//!   resample every stream onto the policy clock by its kind (linear,
//!   slerp for quaternions, hold for discrete values and frames).
//! - **Time you can trust**: a header stamp that is unset (0) or more than
//!   `MAX_HEADER_SKEW_NS` (60 s) from the message's log time (a driver
//!   that never sets it, a wrapped or foreign clock) does not place its
//!   message: that message is placed at its log time instead, and a warning
//!   names the bag, topic and how many messages. No span of times sizes an
//!   allocation: an episode of more than
//!   [`robocache_datasource::MAX_EPISODE_WINDOWS`] windows is an error naming it.
//! - **Order**: a stream's messages are sorted by the chosen time (stable;
//!   out-of-order messages are counted in a warning). Two messages of one
//!   stream at the same time keep both, the later one a femtosecond
//!   (`f64::next_up`) after: the latest message wins at that instant.
//! - **Joints by name**: a joint missing from a message keeps its value
//!   from the topic's previous message (publishers that each send part of
//!   the robot on one topic); before its first value it is `NaN`.
//! - **Decoding**: the first read of an episode decodes its mapped topics
//!   once (numbers as rows, image messages kept as their bytes and decoded
//!   per read); the last [`DECODED_EPISODES`] episodes stay decoded.
//!
//! - **Transforms**: a `[parent, child]` stream is the child's pose in the
//!   parent frame through the tf tree (`tf_tree.rs`) at each `/tf` message.
//!
//! - **Point clouds**: [`point_clouds`] reads a `PointCloud2` topic's
//!   messages as the voxelizer's input (positions and named fields as f32).
//!
//! What is not read yet: ros2idl definitions, bags before Iron in SQLite
//! (no definitions stored: listed, not decoded), `foxglove.CompressedVideo`.
//!
//! **A mapped topic missing from an episode** (no message on it in that bag,
//! or in that part of a bag cut at gaps) is a stream without rows there,
//! with a warning: its every window in that episode is padding, masked
//! (`_is_pad` true), holding zeros (unit quaternions), never values passed
//! off as data. A topic no bag has is an error naming it.

pub(crate) mod bag_file;
pub(crate) mod cdr;
mod decode;
mod episodes;
pub(crate) mod extract;
mod idl_schema;
mod live_messages;
pub(crate) mod mapping;
pub(crate) mod mcap_bag;
mod message_values;
pub(crate) mod msg_schema;
mod plans;
mod point_cloud;
mod reader;
mod service_event;
pub(crate) mod sqlite_bag;
mod standard_definitions;
pub(crate) mod tf_tree;
mod topic_stats;
mod video_frames;

#[cfg(test)]
mod definition_fuzz_tests;

use std::collections::{HashMap, VecDeque};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use robocache_storage::Storage;

use self::bag_file::{BagFile, RawMessage};
use self::episodes::{episode_of, leading_video_frames, segments_of, Segment};
pub use self::live_messages::{MessageSample, MessageStreams, TopicDefinition};
pub use self::mapping::{BagMapping, EpisodeSplit, MarkerValue, StreamMapping, TimeSource};
pub use self::message_values::{bag_messages, DecodedMessage, MessageValue};
pub use self::point_cloud::{point_clouds, PointCloud};
use self::reader::Ros2Reader;
pub use self::topic_stats::{decode_messages, topic_stats, TopicDecode, TopicStats};
use robocache_datasource::format_reader::{FormatKind, Opened};
use robocache_datasource::model::{DatasetInfo, FormatName};
use robocache_datasource::{Error, Result};

/// Episodes kept decoded (the most recently read).
pub const DECODED_EPISODES: usize = 4;
/// The policy clock when the mapping gives none.
pub const DEFAULT_FPS: f64 = 30.0;

/// ROS 2 bags: MCAP or rosbag2 SQLite files, one episode each, topics as
/// streams at their own rates.
pub const ROS2: FormatName = FormatName::new("ros2");

/// The format: bag files and directories of them, opened with a mapping
/// and a policy clock.
#[derive(Clone, Debug, Default)]
pub struct Ros2Kind {
    /// Which topics and fields become which streams (none: the default
    /// mapping from the topics' types).
    mapping: Option<BagMapping>,
    /// The policy clock in Hz, instead of the mapping's `fps`.
    rate_hz: Option<f64>,
}

impl Ros2Kind {
    /// Bags read by `mapping` (none: the default mapping from the topics'
    /// types) on a policy clock of `rate_hz` (none: the mapping's `fps`,
    /// else [`DEFAULT_FPS`]).
    pub fn new(mapping: Option<BagMapping>, rate_hz: Option<f64>) -> Self {
        Ros2Kind { mapping, rate_hz }
    }
}

fn is_bag_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "mcap" || e == "db3")
}

/// The bag files of `path`: itself, or every bag below it, in path order.
pub(crate) fn bag_files(path: &Path, storage: &Storage) -> Result<Vec<PathBuf>> {
    if is_bag_file(path) {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = storage.list_files(path)?.into_iter().filter(|f| is_bag_file(f)).collect();
    files.sort();
    Ok(files)
}

/// The store of `options` and the bag files at `path` (a bag or a directory
/// of them); none is an error naming the path.
pub(crate) fn bags_at(path: &Path, options: &robocache_storage::StorageOptions) -> Result<(Storage, Vec<PathBuf>)> {
    let storage = Storage::new(options.clone());
    let files = bag_files(path, &storage)?;
    if files.is_empty() {
        return Err(Error::UnknownFormat { file: path.into(), reason: "no .mcap or .db3 bag in it".into() });
    }
    Ok((storage, files))
}

/// Opens one bag file by its extension.
pub(crate) fn open_bag(path: &Path, storage: &Storage) -> Result<Arc<dyn BagFile>> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("db3") => Ok(Arc::new(sqlite_bag::SqliteBag::open(path, storage)?)),
        _ => Ok(Arc::new(mcap_bag::McapBag::open(path, storage)?)),
    }
}

impl FormatKind for Ros2Kind {
    fn name(&self) -> &'static str {
        "ROS 2 bag"
    }

    fn formats(&self) -> &'static [FormatName] {
        &[ROS2]
    }

    fn signs(&self) -> &'static [&'static str] {
        &[".mcap", ".db3", "metadata.yaml"]
    }

    fn reads(&self) -> &'static str {
        "a .mcap or .db3 file, or a directory of them, is read as ROS 2 bags"
    }

    fn detect(&self, path: &Path, storage: &Storage) -> Result<bool> {
        if is_bag_file(path) {
            return Ok(storage.is_file(path)?);
        }
        // A directory holding bags. A store that cannot tell or list (plain
        // HTTP) holds none as far as this format knows: the next format decides.
        Ok(storage.is_dir(path).unwrap_or(false) && bag_files(path, storage).is_ok_and(|files| !files.is_empty()))
    }

    fn open(&self, path: &Path, storage: &Storage) -> Result<Opened> {
        let files = bag_files(path, storage)?;
        if files.is_empty() {
            return Err(Error::UnknownFormat { file: path.into(), reason: "no .mcap or .db3 bag in it".into() });
        }
        let bags = files.iter().map(|f| open_bag(f, storage)).collect::<Result<Vec<_>>>()?;
        let mapping = match &self.mapping {
            Some(mapping) => mapping.clone(),
            None => default_mapping(&files[0], bags[0].as_ref())?,
        };
        mapping.check()?;
        let plans = plans::plans(path, &files, &bags, &mapping)?;
        let fps = self.rate_hz.or(mapping.fps).unwrap_or(DEFAULT_FPS);
        let mut episodes = Vec::with_capacity(files.len());
        let mut sources = Vec::with_capacity(files.len());
        for (file, bag) in files.iter().zip(&bags) {
            let split = &mapping.episodes;
            let segments: Vec<Option<Segment>> = match split.gap_s.is_some() || split.markers.is_some() {
                true => segments_of(file, bag.as_ref(), &plans, split)?.into_iter().map(Some).collect(),
                false => vec![None],
            };
            let ranges: Vec<(u64, u64)> =
                segments.iter().map(|s| s.as_ref().map_or((0, u64::MAX), |s| s.range_ns)).collect();
            let leading = leading_video_frames(file, bag.as_ref(), &plans, &ranges)?;
            for (segment, skip) in segments.into_iter().zip(leading) {
                let (episode, source) = episode_of(path, file, bag.clone(), &plans, fps, segment, skip)?;
                episodes.push(episode);
                sources.push(source);
            }
        }
        let mut metadata = serde_json::Map::new();
        // What the streams were read by (a deployment subscribes to the same
        // topics and fields; robocache's loader spec carries it).
        if let Ok(mapping) = serde_json::to_value(&mapping) {
            metadata.insert("bag_mapping".into(), mapping);
        }
        if let Ok(topics) = serde_json::to_value(live_messages::topic_definitions(&bags, &mapping)) {
            metadata.insert("bag_topics".into(), topics);
        }
        let warnings: Vec<String> = bags.iter().flat_map(|b| b.warnings().iter().cloned()).collect();
        if !warnings.is_empty() {
            metadata.insert("warnings".into(), warnings.into());
        }
        let info = DatasetInfo {
            path: path.to_path_buf(),
            format: ROS2,
            rate_hz: fps,
            episodes,
            splits: Vec::new(),
            metadata,
        };
        let video = video_frames::BagVideo::of(&sources);
        let reader = Ros2Reader { episodes: sources, decoded: Mutex::new(VecDeque::new()), video };
        Ok((Box::new(reader), info))
    }
}

/// The default mapping, from the first bag's topics (see [`extract::default_streams`]).
fn default_mapping(file: &Path, bag: &dyn BagFile) -> Result<BagMapping> {
    let wanted: Vec<usize> = (0..bag.topics().len()).filter(|&t| bag.topics()[t].schema.is_ok()).collect();
    let firsts = first_messages(file, bag, &wanted)?;
    let mut mapping = BagMapping::default();
    for (topic, value) in &firsts {
        let schema = bag.topics()[*topic].schema.as_ref().map_err(|p| Error::Invalid(p.clone()))?;
        for (key, stream) in extract::default_streams(&bag.topics()[*topic].name, schema, value) {
            mapping.streams.insert(key, stream);
        }
    }
    if mapping.streams.is_empty() {
        // Never a dataset without streams and without a word: say what each topic is.
        let why: Vec<String> = bag
            .topics()
            .iter()
            .enumerate()
            .map(|(t, topic)| {
                let reason = match (&topic.schema, topic.messages) {
                    (Err(problem), _) => problem.clone(),
                    (Ok(_), 0) => "no message".to_owned(),
                    (Ok(_), _) if !firsts.iter().any(|(f, _)| *f == t) => "no message could be read".to_owned(),
                    (Ok(_), _) => "no numeric field or camera image".to_owned(),
                };
                format!("`{}` ({}): {reason}", topic.name, topic.type_name)
            })
            .collect();
        let topics = if why.is_empty() { "it has no topic".to_owned() } else { why.join("; ") };
        return Err(bag_error(
            file,
            None,
            None,
            format!("no topic gives a stream without a mapping: {topics}; a mapping names the fields to read"),
        ));
    }
    Ok(mapping)
}

fn bag_error(file: &Path, topic: Option<&str>, message: Option<usize>, problem: impl Into<String>) -> Error {
    Error::Bag { file: file.to_path_buf(), topic: topic.map(str::to_owned), message, problem: problem.into() }
}

const STOP: &str = "\u{0}stop";

/// Reads the messages of `topics` in the file's order, each given to
/// `visit` until it says stop (`ControlFlow::Break`) or fails (its error
/// returned as it is); a failure of the bag's own reading is an error
/// naming the file and `topic`.
fn read_until(
    file: &Path,
    bag: &dyn BagFile,
    topics: &[usize],
    topic: Option<&str>,
    visit: &mut dyn FnMut(RawMessage<'_>) -> Result<ControlFlow<()>>,
) -> Result<()> {
    let mut failed = None;
    let read = bag.read(topics, &mut |message: RawMessage<'_>| match visit(message) {
        Ok(ControlFlow::Continue(())) => Ok(()),
        Ok(ControlFlow::Break(())) => Err(STOP.into()),
        Err(error) => {
            failed = Some(error);
            Err(STOP.into())
        }
    });
    match (failed, read) {
        (Some(error), _) => Err(error),
        (None, Err(problem)) if problem != STOP => Err(bag_error(file, topic, None, problem)),
        _ => Ok(()),
    }
}

/// The first message of each topic in `wanted`, decoded; of a
/// `CompressedVideo` topic, its first key frame (the frames before it
/// cannot be decoded: the reader leaves them out).
fn first_messages(file: &Path, bag: &dyn BagFile, wanted: &[usize]) -> Result<Vec<(usize, cdr::Value<'static>)>> {
    let mut found: HashMap<usize, cdr::Value<'static>> = HashMap::new();
    read_until(file, bag, wanted, None, &mut |message: RawMessage<'_>| {
        if found.contains_key(&message.topic) {
            return Ok(ControlFlow::Continue(()));
        }
        let topic = &bag.topics()[message.topic];
        let Ok(schema) = &topic.schema else { return Ok(ControlFlow::Continue(())) };
        let value = cdr::decode(schema, message.data).map_err(|p| bag_error(file, Some(&topic.name), Some(0), p))?;
        if extract::video_key_frame(&topic.type_name, schema, &value) != Some(false) {
            found.insert(message.topic, value.into_owned());
        }
        Ok(if found.len() == wanted.len() { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
    })?;
    let mut out: Vec<(usize, cdr::Value<'static>)> = found.into_iter().collect();
    out.sort_by_key(|(t, _)| *t);
    Ok(out)
}

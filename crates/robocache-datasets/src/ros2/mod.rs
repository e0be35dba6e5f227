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
//!   bag itself carries ([`msg_schema`], [`cdr`]): any message type.
//! - **Streams**: each mapped key (the [`BagMapping`], or the default one
//!   derived from the topic types) becomes a stream at its topic's native
//!   rate, with explicit timestamps: each message's `header.stamp`, log or
//!   publish time, in seconds from the bag's first log time. Time windows
//!   resample every stream onto the policy clock by its kind (linear,
//!   slerp for quaternions, hold for discrete values and frames).
//! - **Time you can trust**: a header stamp that is unset (0) or more than
//!   [`MAX_HEADER_SKEW_NS`] (60 s) from the message's log time (a driver
//!   that never sets it, a wrapped or foreign clock) does not place its
//!   message: that message is placed at its log time instead, and a warning
//!   names the bag, topic and how many messages. No span of times sizes an
//!   allocation: an episode of more than
//!   [`crate::MAX_EPISODE_WINDOWS`] windows is an error naming it.
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
//!   parent frame through the tf tree ([`tf_tree`]) at each `/tf` message.
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
pub(crate) mod extract;
mod idl_schema;
pub(crate) mod mapping;
pub(crate) mod mcap_bag;
mod message_values;
pub(crate) mod msg_schema;
mod point_cloud;
pub(crate) mod sqlite_bag;
mod standard_definitions;
pub(crate) mod tf_tree;
mod topic_stats;
mod video_frames;

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::ops::{ControlFlow, Range};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;
use robocache_cpu::DType;
use robocache_storage::Storage;

use self::bag_file::{BagFile, RawMessage};
use self::extract::{Extract, Frame, StreamPlan};
pub use self::mapping::{BagMapping, EpisodeSplit, MarkerValue, StreamMapping, TimeSource};
pub use self::message_values::{bag_messages, DecodedMessage, MessageValue};
pub use self::point_cloud::{point_clouds, PointCloud};
pub use self::topic_stats::{decode_messages, topic_stats, TopicDecode, TopicStats};
use crate::format_reader::{FormatKind, FormatReader, Opened};
use crate::formats::OpenOptions;
use crate::model::{DatasetInfo, EpisodeInfo, Format, StreamInfo, Timeline};
use crate::{Error, Result};

/// Episodes kept decoded (the most recently read).
pub const DECODED_EPISODES: usize = 4;
/// The policy clock when the mapping gives none.
pub const DEFAULT_FPS: f64 = 30.0;

/// The format: bag files and directories of them.
pub(crate) struct Ros2Kind;

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
pub(crate) fn bags_at(path: &Path, options: &crate::StorageOptions) -> Result<(Storage, Vec<PathBuf>)> {
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

    fn formats(&self) -> &'static [Format] {
        &[Format::Ros2]
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

    fn open(&self, path: &Path, options: &OpenOptions, storage: &Storage) -> Result<Opened> {
        let files = bag_files(path, storage)?;
        if files.is_empty() {
            return Err(Error::UnknownFormat { file: path.into(), reason: "no .mcap or .db3 bag in it".into() });
        }
        let bags = files.iter().map(|f| open_bag(f, storage)).collect::<Result<Vec<_>>>()?;
        let mapping = match &options.bag_mapping {
            Some(mapping) => mapping.clone(),
            None => default_mapping(&files[0], bags[0].as_ref())?,
        };
        mapping.check()?;
        let plans = plans(path, &files, &bags, &mapping)?;
        let fps = options.rate_hz.or(mapping.fps).unwrap_or(DEFAULT_FPS);
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
        let warnings: Vec<String> = bags.iter().flat_map(|b| b.warnings().iter().cloned()).collect();
        if !warnings.is_empty() {
            metadata.insert("warnings".into(), warnings.into());
        }
        let info = DatasetInfo {
            path: path.to_path_buf(),
            format: Format::Ros2,
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

/// The plan of every mapped stream, from the first bag holding its topic.
fn plans(root: &Path, files: &[PathBuf], bags: &[Arc<dyn BagFile>], mapping: &BagMapping) -> Result<Vec<StreamPlan>> {
    // Each topic stream's bag (the first with messages on it) and topic.
    let mut sources: Vec<Option<(usize, usize)>> = Vec::with_capacity(mapping.streams.len());
    for (key, stream) in &mapping.streams {
        if stream.transform.is_some() {
            sources.push(None);
            continue;
        }
        let found = bags.iter().enumerate().find_map(|(b, bag)| {
            bag.topics().iter().position(|t| t.name == stream.topic && t.messages > 0).map(|t| (b, t))
        });
        let Some((b, topic)) = found else {
            return Err(Error::Invalid(format!(
                "{}: the bag mapping's stream `{key}`: no bag has messages on topic `{}`",
                root.display(),
                stream.topic
            )));
        };
        let info = &bags[b].topics()[topic];
        if let Err(problem) = &info.schema {
            return Err(bag_error(&files[b], Some(&info.name), None, problem.clone()));
        }
        sources.push(Some((b, topic)));
    }
    // The first message of every mapped topic, one read of each bag.
    let mut firsts: HashMap<(usize, usize), cdr::Value<'static>> = HashMap::new();
    for (b, (bag, file)) in bags.iter().zip(files).enumerate() {
        let mut wanted: Vec<usize> = sources.iter().flatten().filter(|(of, _)| *of == b).map(|(_, t)| *t).collect();
        wanted.sort_unstable();
        wanted.dedup();
        if !wanted.is_empty() {
            firsts.extend(first_messages(file, bag.as_ref(), &wanted)?.into_iter().map(|(t, value)| ((b, t), value)));
        }
    }
    let mut out = Vec::with_capacity(mapping.streams.len());
    for ((key, stream), source) in mapping.streams.iter().zip(sources) {
        let Some((b, topic)) = source else {
            if !bags.iter().any(|b| b.topics().iter().any(|t| t.name == extract::TF_TOPIC && t.messages > 0)) {
                return Err(Error::Invalid(format!(
                    "{}: the bag mapping's stream `{key}`: a transform is read at each `/tf` message, and no bag has any",
                    root.display()
                )));
            }
            let frames =
                stream.transform.as_ref().ok_or_else(|| Error::Invalid(format!("stream `{key}`: no topic")))?;
            out.push(
                extract::transform_plan(key, stream, frames).map_err(|p| {
                    Error::Invalid(format!("{}: the bag mapping's stream `{key}`: {p}", root.display()))
                })?,
            );
            continue;
        };
        let (file, info) = (&files[b], &bags[b].topics()[topic]);
        let schema = info.schema.as_ref().map_err(|p| bag_error(file, Some(&info.name), None, p.clone()))?;
        let Some(value) = firsts.get(&(b, topic)) else {
            let problem = match extract::is_image_type(&info.type_name) {
                Some(Extract::CompressedVideo) => "no message of it is a key frame (an IDR or IRAP picture)",
                _ => "its messages could not be read",
            };
            return Err(bag_error(file, Some(&info.name), None, problem));
        };
        let plan = extract::plan(key, stream, &info.type_name, schema, value)
            .map_err(|p| bag_error(file, Some(&info.name), Some(0), format!("stream `{key}`: {p}")))?;
        out.push(plan);
    }
    Ok(out)
}

/// One episode's bag and what its streams take from it.
#[derive(Debug)]
struct EpisodeSource {
    file: PathBuf,
    bag: Arc<dyn BagFile>,
    plans: Vec<StreamPlan>,
    /// Per plan: the topic's index in the bag; `None` where the bag has no
    /// message on it (the stream has no rows in this episode).
    topics: Vec<Option<usize>>,
    /// The bag's first log time (ns): time 0 of the episode.
    origin_ns: u64,
    /// The log times (ns, inclusive) of a bag's part cut by time gaps.
    range_ns: Option<(u64, u64)>,
    /// Per plan: the rows the episode has (its topic's messages in it).
    lens: Vec<usize>,
    /// Per plan: the messages left out before a video stream's first key
    /// frame (in the file's order, in the episode's range).
    leading: Vec<usize>,
}

/// One part of a bag cut at time gaps: its number, log-time range
/// (inclusive) and each plan's messages in it.
#[derive(Debug)]
struct Segment {
    index: usize,
    range_ns: (u64, u64),
    counts: Vec<usize>,
}

/// The parts of a bag that `split` cuts it into (at gaps in the mapped
/// topics' log times, or at marker messages), each with its plans'
/// message counts (reads every mapped message's log time once).
fn segments_of(file: &Path, bag: &dyn BagFile, plans: &[StreamPlan], split: &EpisodeSplit) -> Result<Vec<Segment>> {
    let topic_of = |plan: &StreamPlan| bag.topics().iter().position(|t| t.name == plan.topic);
    let mut wanted: Vec<usize> = plans.iter().filter_map(topic_of).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut times: HashMap<usize, Vec<u64>> = HashMap::new();
    bag.read(&wanted, &mut |m: RawMessage<'_>| {
        times.entry(m.topic).or_default().push(m.log_ns);
        Ok(())
    })
    .map_err(|p| bag_error(file, None, None, p))?;
    let mut all: Vec<u64> = times.values().flatten().copied().collect();
    all.sort_unstable();
    for list in times.values_mut() {
        list.sort_unstable();
    }
    let (Some(&first), Some(&last)) = (all.first(), all.last()) else {
        return Err(bag_error(file, None, None, "no message of a mapped topic to cut into episodes"));
    };
    let ranges = match (&split.markers, split.gap_s) {
        (Some(markers), _) => marker_ranges(file, bag, markers, split, last)?,
        (None, Some(gap_s)) => {
            let gap_ns = (gap_s * 1e9) as u64;
            let mut ranges = Vec::new();
            let mut start = first;
            for pair in all.windows(2) {
                if pair[1] - pair[0] > gap_ns {
                    ranges.push((start, pair[0]));
                    start = pair[1];
                }
            }
            ranges.push((start, last));
            ranges
        }
        (None, None) => vec![(first, last)],
    };
    Ok(ranges
        .into_iter()
        .enumerate()
        .map(|(index, (a, b))| {
            let counts = plans
                .iter()
                .map(|plan| {
                    topic_of(plan)
                        .and_then(|t| times.get(&t))
                        .map_or(0, |list| list.partition_point(|&t| t <= b) - list.partition_point(|&t| t < a))
                })
                .collect();
            Segment { index, range_ns: (a, b), counts }
        })
        .collect())
}

/// The log-time ranges (inclusive) of the episodes that the messages on
/// `markers` mark (see [`EpisodeSplit`]); `end` is the bag's last mapped
/// log time, where an episode left open ends.
fn marker_ranges(
    file: &Path,
    bag: &dyn BagFile,
    markers: &str,
    split: &EpisodeSplit,
    end: u64,
) -> Result<Vec<(u64, u64)>> {
    let Some(topic) = bag.topics().iter().position(|t| t.name == markers) else {
        return Err(bag_error(file, Some(markers), None, "the episodes' marker topic is not in this bag"));
    };
    let info = &bag.topics()[topic];
    let field = split.field.as_deref().unwrap_or("data");
    // Each marker's log time and whether it starts (true) or stops (false) one.
    let mut marks: Vec<(u64, bool)> = Vec::new();
    let mut index = 0usize;
    read_until(file, bag, &[topic], Some(markers), &mut |m: RawMessage<'_>| {
        let at = index;
        index += 1;
        let Some(start) = &split.start else {
            marks.push((m.log_ns, true));
            return Ok(ControlFlow::Continue(()));
        };
        let value = info.schema.as_ref().map_err(Clone::clone).and_then(|schema| {
            let message = cdr::decode(schema, m.data)?;
            let value =
                message.get(schema, field).ok_or_else(|| format!("no field `{field}` in the marker message"))?;
            Ok(value.clone())
        });
        match value.map_err(|problem| bag_error(file, Some(markers), Some(at), problem))? {
            value if marker_is(&value, start) => marks.push((m.log_ns, true)),
            value if split.stop.as_ref().is_some_and(|stop| marker_is(&value, stop)) => marks.push((m.log_ns, false)),
            _ => {}
        }
        Ok(ControlFlow::Continue(()))
    })?;
    marks.sort_by_key(|&(t, _)| t);
    let mut ranges = Vec::new();
    let mut open: Option<u64> = None;
    for (t, starts) in marks {
        match (open, starts) {
            // A start while one is open ends it just before.
            (Some(from), true) => {
                ranges.push((from, t.saturating_sub(1).max(from)));
                open = Some(t);
            }
            (None, true) => open = Some(t),
            (Some(from), false) => {
                ranges.push((from, t));
                open = None;
            }
            (None, false) => {} // a stop with no episode open
        }
    }
    if let Some(from) = open {
        ranges.push((from, end.max(from)));
    }
    if ranges.is_empty() {
        return Err(bag_error(file, Some(markers), None, "no marker message starts an episode in this bag"));
    }
    Ok(ranges)
}

/// Whether a marker message's value is `wanted`.
fn marker_is(value: &cdr::Value<'_>, wanted: &MarkerValue) -> bool {
    match (value, wanted) {
        (cdr::Value::Bool(a), MarkerValue::Bool(b)) => a == b,
        (cdr::Value::Str(a), MarkerValue::Text(b)) => a.as_ref() == b.as_str(),
        (value, MarkerValue::Int(b)) => value.as_i64() == Some(*b),
        _ => false,
    }
}

/// Per log-time range (an episode of the bag, inclusive) and plan: the
/// messages of a `CompressedVideo` stream before its first key frame in
/// that range, in the file's order. A decode starts at a key frame, so
/// those frames cannot be decoded (a recording started in the middle of a
/// group of pictures): the stream starts at its first key frame, and they
/// are left out with a warning. One read of the bag's video topics, up to
/// each range's first key frame; none where no stream is video.
fn leading_video_frames(
    file: &Path,
    bag: &dyn BagFile,
    plans: &[StreamPlan],
    ranges: &[(u64, u64)],
) -> Result<Vec<Vec<usize>>> {
    let mut leading = vec![vec![0usize; plans.len()]; ranges.len()];
    let topic_of = |plan: &StreamPlan| bag.topics().iter().position(|t| t.name == plan.topic && t.messages > 0);
    let video: Vec<(usize, usize)> = plans
        .iter()
        .enumerate()
        .filter(|(_, plan)| plan.what == Extract::CompressedVideo)
        .filter_map(|(p, plan)| topic_of(plan).map(|t| (p, t)))
        .collect();
    if video.is_empty() {
        return Ok(leading);
    }
    let mut wanted: Vec<usize> = video.iter().map(|&(_, t)| t).collect();
    wanted.sort_unstable();
    wanted.dedup();
    // (range, plan) pairs whose first key frame is found.
    let mut keyed = vec![vec![false; plans.len()]; ranges.len()];
    let mut open = ranges.len() * video.len();
    read_until(file, bag, &wanted, None, &mut |message: RawMessage<'_>| {
        let Some(r) = ranges.iter().position(|&(a, b)| (a..=b).contains(&message.log_ns)) else {
            return Ok(ControlFlow::Continue(()));
        };
        let topic = &bag.topics()[message.topic];
        let Ok(schema) = &topic.schema else { return Ok(ControlFlow::Continue(())) };
        for &(p, _) in video.iter().filter(|&&(_, t)| t == message.topic) {
            if keyed[r][p] {
                continue;
            }
            let value = cdr::decode(schema, message.data).map_err(|p| bag_error(file, Some(&topic.name), None, p))?;
            if extract::video_key_frame(&topic.type_name, schema, &value).unwrap_or(true) {
                keyed[r][p] = true;
                open -= 1;
            } else {
                leading[r][p] += 1;
            }
        }
        Ok(if open == 0 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
    })?;
    for (r, skips) in leading.iter().enumerate() {
        for &(p, _) in &video {
            if skips[p] > 0 {
                tracing::warn!(
                    file = %file.display(), topic = %plans[p].topic, stream = %plans[p].key, episode_part = r,
                    frames = skips[p],
                    "video frames before the first key frame cannot be decoded: the stream starts at the key frame"
                );
            }
        }
    }
    Ok(leading)
}

fn episode_of(
    root: &Path,
    file: &Path,
    bag: Arc<dyn BagFile>,
    plans: &[StreamPlan],
    fps: f64,
    segment: Option<Segment>,
    leading: Vec<usize>,
) -> Result<(EpisodeInfo, EpisodeSource)> {
    let mut topics = Vec::with_capacity(plans.len());
    let mut streams = Vec::with_capacity(plans.len());
    let mut lens = Vec::with_capacity(plans.len());
    for (p, plan) in plans.iter().enumerate() {
        // A topic this bag (or this part of it) has no message on is a
        // stream without rows: its windows are padding, masked throughout.
        let topic = bag.topics().iter().position(|t| t.name == plan.topic && t.messages > 0);
        let len = match (&segment, topic) {
            (_, None) => 0,
            (Some(segment), Some(_)) => segment.counts[p],
            (None, Some(topic)) => usize::try_from(bag.topics()[topic].messages)
                .map_err(|_| bag_error(file, Some(&plan.topic), None, "more messages than this machine addresses"))?,
        };
        // Video frames before the first key frame are left out.
        let len = len.saturating_sub(leading.get(p).copied().unwrap_or(0));
        if len == 0 {
            tracing::warn!(
                file = %file.display(), topic = %plan.topic, stream = %plan.key,
                "no message on a mapped topic in this episode: its windows are padding (masked)"
            );
        }
        let topic = topic.filter(|_| len > 0);
        lens.push(len);
        topics.push(topic);
        streams.push(StreamInfo {
            name: plan.key.clone(),
            dtype: plan.dtype,
            step_shape: plan.step_shape.clone(),
            len,
            kind: plan.kind.clone(),
            timeline: Timeline::Explicit { key: plan.key.clone() },
            source: plan.topic.clone(),
        });
    }
    let (origin_ns, duration_s) = match (&segment, bag.span_ns()) {
        (Some(segment), _) => (segment.range_ns.0, (segment.range_ns.1 - segment.range_ns.0) as f64 * 1e-9),
        (None, Some((first, last))) => (first, last.saturating_sub(first) as f64 * 1e-9),
        (None, None) => (0, 0.0),
    };
    let steps = duration_s * fps;
    if !steps.is_finite() || steps >= crate::MAX_EPISODE_WINDOWS as f64 {
        return Err(bag_error(
            file,
            None,
            None,
            format!(
                "its log times span {duration_s} s, more than {} steps at {fps} Hz (at most {} an episode)",
                duration_s * fps,
                crate::MAX_EPISODE_WINDOWS
            ),
        ));
    }
    let name = file.strip_prefix(root).unwrap_or(file).with_extension("").to_string_lossy().into_owned();
    let name = if name.is_empty() {
        file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
    } else {
        name
    };
    let name = match &segment {
        Some(segment) => format!("{name}#{}", segment.index),
        None => name,
    };
    let mut metadata = serde_json::Map::new();
    metadata.insert("bag".into(), file.display().to_string().into());
    metadata.insert("storage".into(), bag.storage().into());
    if let Some(segment) = &segment {
        metadata.insert("log_time_ns".into(), serde_json::json!([segment.range_ns.0, segment.range_ns.1]));
    }
    let episode = EpisodeInfo {
        name,
        len: ((duration_s * fps) + 1e-9).floor() as usize + 1,
        duration_s,
        streams,
        instruction: None,
        metadata,
    };
    let range_ns = segment.map(|s| s.range_ns);
    let source = EpisodeSource {
        file: file.to_path_buf(),
        bag,
        plans: plans.to_vec(),
        topics,
        origin_ns,
        range_ns,
        lens,
        leading,
    };
    Ok((episode, source))
}

/// One decoded stream of an episode, sorted by time.
#[derive(Debug)]
struct DecodedStream {
    times: Arc<[f64]>,
    /// Numbers, `len × channels` (numeric streams).
    values: Vec<f64>,
    /// Frames (image streams).
    frames: Vec<Frame>,
}

#[derive(Debug)]
struct Decoded {
    streams: Vec<DecodedStream>,
}

type DecodeResult = std::result::Result<Arc<Decoded>, (Option<String>, Option<usize>, String)>;

/// The reader: one bag per episode, a few episodes decoded.
#[derive(Debug)]
pub(crate) struct Ros2Reader {
    episodes: Vec<EpisodeSource>,
    decoded: Mutex<VecDeque<(usize, Arc<OnceLock<DecodeResult>>)>>,
    /// `CompressedVideo` streams' frame cache and decode counts.
    video: video_frames::BagVideo,
}

impl Ros2Reader {
    /// The episode's source and the index of `stream`'s plan in it.
    fn plan_of(&self, episode: usize, stream: &StreamInfo) -> Result<(&EpisodeSource, usize)> {
        let source = self.episodes.get(episode).ok_or_else(|| Error::Invalid(format!("no episode {episode}")))?;
        let p = source
            .plans
            .iter()
            .position(|p| p.key == stream.name)
            .ok_or_else(|| Error::Invalid(format!("no stream `{}` in episode {episode}", stream.name)))?;
        Ok((source, p))
    }

    fn decoded(&self, episode: usize) -> Result<Arc<Decoded>> {
        let source = self.episodes.get(episode).ok_or_else(|| Error::Invalid(format!("no episode {episode}")))?;
        let slot = {
            let mut decoded = self.decoded.lock().unwrap_or_else(|p| p.into_inner());
            let slot = match decoded.iter().position(|(e, _)| *e == episode) {
                Some(at) => decoded.remove(at).map(|(_, slot)| slot).unwrap_or_default(),
                None => Arc::default(),
            };
            decoded.push_back((episode, slot.clone()));
            while decoded.len() > DECODED_EPISODES {
                decoded.pop_front();
            }
            slot
        };
        slot.get_or_init(|| decode_episode(source).map(Arc::new))
            .clone()
            .map_err(|(topic, message, problem)| bag_error(&source.file, topic.as_deref(), message, problem))
    }
}

/// The farthest a message's `header.stamp` may be from its log time and
/// still place it (60 s: far above a network's latency or two machines'
/// clock skew, far below an unset stamp, a wrapped one or another clock).
pub const MAX_HEADER_SKEW_NS: i128 = 60_000_000_000;

/// A message's time from its header stamp (ns): the stamp, unless it is
/// unset (0) or more than [`MAX_HEADER_SKEW_NS`] from the log time, where
/// `None` says to use the log time (module docs: "Time you can trust").
fn header_time_ns(stamp_ns: i128, log_ns: u64) -> Option<i128> {
    (stamp_ns != 0 && (stamp_ns - i128::from(log_ns)).abs() <= MAX_HEADER_SKEW_NS).then_some(stamp_ns)
}

/// Decodes every mapped topic of an episode (see the module docs).
fn decode_episode(source: &EpisodeSource) -> std::result::Result<Decoded, (Option<String>, Option<usize>, String)> {
    let bag = &source.bag;
    let mut wanted: Vec<usize> = source.topics.iter().flatten().copied().collect();
    // Transform streams read the whole tf tree.
    let with_tf = source.plans.iter().any(|p| matches!(p.what, Extract::Transform { .. }));
    let is_tf = |name: &str| name == extract::TF_TOPIC || name == extract::TF_STATIC_TOPIC;
    if with_tf {
        wanted.extend((0..bag.topics().len()).filter(|&t| is_tf(&bag.topics()[t].name)));
    }
    wanted.sort_unstable();
    wanted.dedup();
    let origin = i128::from(source.origin_ns);
    let mut tree = tf_tree::TfTree::default();
    // Per plan: (time ns as i128, message index, numbers or frame).
    struct Row {
        time_ns: i128,
        values: Vec<f64>,
        frame: Option<Frame>,
    }
    let mut rows: Vec<Vec<Row>> = source.plans.iter().map(|_| Vec::new()).collect();
    let mut left_out = vec![0usize; source.plans.len()];
    // Per plan: messages whose header stamp was not trusted (`header_time_ns`).
    let mut log_timed = vec![0usize; source.plans.len()];
    let mut counts: HashMap<usize, usize> = HashMap::new();
    let mut failure = None;
    let read = bag.read(&wanted, &mut |message: RawMessage<'_>| {
        let topic = &bag.topics()[message.topic];
        let index = counts.entry(message.topic).or_default();
        let at = *index;
        *index += 1;
        let fail = |problem: String| (Some(topic.name.clone()), Some(at), problem);
        let schema = match &topic.schema {
            Ok(schema) => schema,
            Err(problem) => {
                failure = Some(fail(problem.clone()));
                return Err(STOP.into());
            }
        };
        let value = match cdr::decode(schema, message.data) {
            Ok(value) => value,
            Err(problem) => {
                failure = Some(fail(problem));
                return Err(STOP.into());
            }
        };
        if with_tf && is_tf(&topic.name) {
            let is_static = topic.name == extract::TF_STATIC_TOPIC;
            let seconds = |ns: i128| (ns - origin) as f64 * 1e-9;
            if let Err(problem) = tree.add(schema, &value, is_static, seconds) {
                failure = Some(fail(problem));
                return Err(STOP.into());
            }
        }
        let in_range = source.range_ns.is_none_or(|(a, b)| (a..=b).contains(&message.log_ns));
        for (p, plan) in source.plans.iter().enumerate() {
            if source.topics[p] != Some(message.topic) || !in_range {
                continue;
            }
            // Video frames before the first key frame: left out (see `leading_video_frames`).
            if left_out[p] < source.leading[p] {
                left_out[p] += 1;
                continue;
            }
            let time_ns = match plan.time {
                TimeSource::Log => i128::from(message.log_ns),
                TimeSource::Publish => i128::from(message.publish_ns),
                TimeSource::Header => match value.header_stamp_ns(schema) {
                    Some(ns) => match header_time_ns(ns, message.log_ns) {
                        Some(ns) => ns,
                        None => {
                            log_timed[p] += 1;
                            i128::from(message.log_ns)
                        }
                    },
                    None => {
                        failure = Some(fail("no header.stamp".into()));
                        return Err(STOP.into());
                    }
                },
            };
            let row = match plan.what {
                // Its values are looked up once the whole tree is read.
                Extract::Transform { .. } => Row { time_ns, values: Vec::new(), frame: None },
                Extract::CompressedImage | Extract::RawImage | Extract::CompressedVideo => {
                    match extract::frame(schema, &value, &plan.what) {
                        Ok(frame) => Row { time_ns, values: Vec::new(), frame: Some(frame) },
                        Err(problem) => {
                            failure = Some(fail(format!("stream `{}`: {problem}", plan.key)));
                            return Err(STOP.into());
                        }
                    }
                }
                _ => {
                    let mut values = Vec::with_capacity(plan.step_shape[0]);
                    if let Err(problem) = extract::numbers(schema, &value, &plan.what, &mut values) {
                        failure = Some(fail(format!("stream `{}`: {problem}", plan.key)));
                        return Err(STOP.into());
                    }
                    if values.len() != plan.step_shape[0] {
                        failure = Some(fail(format!(
                            "stream `{}`: {} values, the stream's first message had {}",
                            plan.key,
                            values.len(),
                            plan.step_shape[0]
                        )));
                        return Err(STOP.into());
                    }
                    Row { time_ns, values, frame: None }
                }
            };
            rows[p].push(row);
        }
        Ok(())
    });
    if let Some(failure) = failure {
        return Err(failure);
    }
    if let Err(problem) = read {
        return Err((None, None, problem));
    }
    tree.finish();
    for (plan, &count) in source.plans.iter().zip(&log_timed).filter(|(_, &count)| count > 0) {
        tracing::warn!(
            file = %source.file.display(), topic = %plan.topic, stream = %plan.key, messages = count,
            "header.stamp unset (0) or more than {} s from the log time: those messages are placed at their log time",
            MAX_HEADER_SKEW_NS / 1_000_000_000
        );
    }
    let mut streams = Vec::with_capacity(rows.len());
    for (p, mut plan_rows) in rows.into_iter().enumerate() {
        let plan = &source.plans[p];
        let expected = source.lens[p];
        if plan_rows.len() != expected {
            return Err((
                Some(plan.topic.clone()),
                None,
                format!("{} messages read, the bag's index counts {expected}", plan_rows.len()),
            ));
        }
        let out_of_order = plan_rows.windows(2).filter(|w| w[1].time_ns < w[0].time_ns).count();
        if out_of_order > 0 {
            tracing::warn!(
                file = %source.file.display(), topic = %plan.topic, stream = %plan.key, out_of_order,
                "messages out of time order: sorted by time"
            );
            plan_rows.sort_by_key(|r| r.time_ns);
        }
        let mut times = Vec::with_capacity(plan_rows.len());
        for row in &plan_rows {
            let mut t = (row.time_ns - origin) as f64 * 1e-9;
            if let Some(&last) = times.last() {
                if t <= last {
                    t = f64::next_up(last);
                }
            }
            times.push(t);
        }
        if let (Extract::Transform { parent, child }, false) = (&plan.what, times.is_empty()) {
            tree.check(parent, child)
                .map_err(|p| (Some(plan.topic.clone()), None, format!("stream `{}`: {p}", plan.key)))?;
            let values = times.iter().flat_map(|&t| tree.lookup(parent, child, t).numbers()).collect();
            streams.push(DecodedStream { times: times.into(), values, frames: Vec::new() });
            continue;
        }
        let mut values = Vec::new();
        let mut frames = Vec::new();
        let width = plan.step_shape.iter().product::<usize>();
        let mut held: Vec<f64> = vec![f64::NAN; if matches!(plan.what, Extract::Joints { .. }) { width } else { 0 }];
        for row in plan_rows {
            match row.frame {
                Some(frame) => frames.push(frame),
                None if !held.is_empty() => {
                    for (h, v) in held.iter_mut().zip(&row.values) {
                        if !v.is_nan() {
                            *h = *v;
                        }
                    }
                    values.extend_from_slice(&held);
                }
                None => values.extend_from_slice(&row.values),
            }
        }
        streams.push(DecodedStream { times: times.into(), values, frames });
    }
    Ok(Decoded { streams })
}

impl FormatReader for Ros2Reader {
    fn read_rows_into(&self, episode: usize, stream: &StreamInfo, rows: Range<usize>, out: &mut [u8]) -> Result<()> {
        let (source, p) = self.plan_of(episode, stream)?;
        let decoded = self.decoded(episode)?;
        let plan = &source.plans[p];
        let data = &decoded.streams[p];
        let row_bytes = stream.step_bytes();
        if plan.what == Extract::CompressedVideo {
            if rows.end > data.frames.len() || out.len() != rows.len() * row_bytes {
                return Err(Error::Invalid(format!(
                    "rows {rows:?} of `{}` ({} frames) into {} bytes",
                    stream.name,
                    data.frames.len(),
                    out.len()
                )));
            }
            // Through the frame cache, as the loader's frame reads go.
            let wanted: Vec<(usize, usize)> = rows.map(|row| (episode, row)).collect();
            return crate::format_reader::VideoFrames::read_frames_into(
                self,
                stream,
                &wanted,
                robocache_video::FrameFormat::Rgb,
                out,
            );
        }
        if !data.frames.is_empty() || matches!(plan.what, Extract::CompressedImage | Extract::RawImage) {
            let frames = data.frames.get(rows.clone()).ok_or_else(|| {
                Error::Invalid(format!("rows {rows:?} of `{}` past its {} frames", stream.name, data.frames.len()))
            })?;
            // Frames decode side by side on the rayon pool (JPEG and PNG
            // decoding is most of a camera topic's cost).
            let held = out.len();
            let out = out
                .get_mut(..frames.len() * row_bytes)
                .ok_or_else(|| Error::Invalid(format!("a buffer of {held} bytes for {} frames", frames.len())))?;
            return out.par_chunks_mut(row_bytes.max(1)).zip(frames).enumerate().try_for_each(|(i, (at, frame))| {
                extract::decode_frame(frame, stream.dtype, &stream.step_shape, at).map_err(|problem| {
                    let row = rows.start + i;
                    bag_error(&source.file, Some(&plan.topic), Some(row), format!("stream `{}`: {problem}", plan.key))
                })
            });
        }
        let width = stream.channels();
        let values = data.values.get(rows.start * width..rows.end * width).ok_or_else(|| {
            Error::Invalid(format!("rows {rows:?} of `{}` past its {} rows", stream.name, data.times.len()))
        })?;
        match stream.dtype {
            DType::F32 => {
                for (chunk, v) in out.chunks_exact_mut(4).zip(values) {
                    chunk.copy_from_slice(&(*v as f32).to_le_bytes());
                }
            }
            DType::F64 => {
                for (chunk, v) in out.chunks_exact_mut(8).zip(values) {
                    chunk.copy_from_slice(&v.to_le_bytes());
                }
            }
            other => return Err(Error::Invalid(format!("a bag stream of {other}"))),
        }
        Ok(())
    }

    fn explicit_times(
        &self,
        _info: &DatasetInfo,
        episode: usize,
        stream: &StreamInfo,
        _key: &str,
    ) -> Result<Arc<[f64]>> {
        let (_, p) = self.plan_of(episode, stream)?;
        Ok(self.decoded(episode)?.streams[p].times.clone())
    }

    fn video(&self) -> Option<&dyn crate::format_reader::VideoFrames> {
        self.has_video().then_some(self as &dyn crate::format_reader::VideoFrames)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

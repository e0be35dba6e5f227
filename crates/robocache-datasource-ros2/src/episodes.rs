//! A bag's episodes: the parts it is cut into (at time gaps or marker
//! messages), the video frames before each part's first key frame, and each
//! episode's streams, length and span (from the storage's first and last
//! log time: no message is read for them).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::bag_file::{BagFile, RawMessage};
use super::extract::{self, Extract, StreamPlan};
use super::{bag_error, cdr, read_until, EpisodeSplit, MarkerValue};
use crate::Result;
use robocache_datasource::model::{EpisodeInfo, StreamInfo, Timeline};

/// One episode's bag and what its streams take from it.
#[derive(Debug)]
pub(super) struct EpisodeSource {
    pub(super) file: PathBuf,
    pub(super) bag: Arc<dyn BagFile>,
    pub(super) plans: Vec<StreamPlan>,
    /// Per plan: the topic's index in the bag; `None` where the bag has no
    /// message on it (the stream has no rows in this episode).
    pub(super) topics: Vec<Option<usize>>,
    /// The bag's first log time (ns): time 0 of the episode.
    pub(super) origin_ns: u64,
    /// The log times (ns, inclusive) of a bag's part cut by time gaps.
    pub(super) range_ns: Option<(u64, u64)>,
    /// Per plan: the rows the episode has (its topic's messages in it).
    pub(super) lens: Vec<usize>,
    /// Per plan: the messages left out before a video stream's first key
    /// frame (in the file's order, in the episode's range).
    pub(super) leading: Vec<usize>,
}

/// One part of a bag cut at time gaps: its number, log-time range
/// (inclusive) and each plan's messages in it.
#[derive(Debug)]
pub(super) struct Segment {
    pub(super) index: usize,
    pub(super) range_ns: (u64, u64),
    pub(super) counts: Vec<usize>,
}

/// The parts of a bag that `split` cuts it into (at gaps in the mapped
/// topics' log times, or at marker messages), each with its plans'
/// message counts (reads every mapped message's log time once).
pub(super) fn segments_of(
    file: &Path,
    bag: &dyn BagFile,
    plans: &[StreamPlan],
    split: &EpisodeSplit,
) -> Result<Vec<Segment>> {
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
pub(super) fn leading_video_frames(
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

pub(super) fn episode_of(
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
    if !steps.is_finite() || steps >= robocache_datasource::MAX_EPISODE_WINDOWS as f64 {
        return Err(bag_error(
            file,
            None,
            None,
            format!(
                "its log times span {duration_s} s, more than {} steps at {fps} Hz (at most {} an episode)",
                duration_s * fps,
                robocache_datasource::MAX_EPISODE_WINDOWS
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
    // The episode's times are seconds since this log time (ns).
    metadata.insert("origin_ns".into(), origin_ns.into());
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

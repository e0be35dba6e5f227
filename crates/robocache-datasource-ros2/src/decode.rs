//! An episode's mapped topics decoded once into sorted, timed rows
//! (numbers) and frames (image messages kept as their bytes), by the rules
//! of the module docs: the header stamp rule, joints by name, ties a
//! femtosecond apart, `/tf` looked up through the tree.

use std::collections::HashMap;
use std::sync::Arc;

use super::bag_file::RawMessage;
use super::episodes::EpisodeSource;
use super::extract::{self, Extract, Frame};
use super::{cdr, tf_tree, TimeSource, STOP};

/// One decoded stream of an episode, sorted by time.
#[derive(Debug)]
pub(super) struct DecodedStream {
    pub(super) times: Arc<[f64]>,
    /// Numbers, `len × channels` (numeric streams).
    pub(super) values: Vec<f64>,
    /// Frames (image streams).
    pub(super) frames: Vec<Frame>,
}

#[derive(Debug)]
pub(super) struct Decoded {
    pub(super) streams: Vec<DecodedStream>,
}

pub(super) type DecodeResult = Result<Arc<Decoded>, (Option<String>, Option<usize>, String)>;

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

/// A message's time (ns) for `plan`, by its time source, and whether a
/// header stamp was not trusted and the log time taken instead
/// ([`header_time_ns`]).
pub(super) fn message_time_ns(
    plan: &extract::StreamPlan,
    schema: &super::msg_schema::MessageSchema,
    value: &cdr::Value<'_>,
    log_ns: u64,
    publish_ns: u64,
) -> Result<(i128, bool), String> {
    Ok(match plan.time {
        TimeSource::Log => (i128::from(log_ns), false),
        TimeSource::Publish => (i128::from(publish_ns), false),
        TimeSource::Header => match value.header_stamp_ns(schema) {
            Some(ns) => match header_time_ns(ns, log_ns) {
                Some(ns) => (ns, false),
                None => (i128::from(log_ns), true),
            },
            None => return Err("no header.stamp".into()),
        },
    })
}

/// The numbers `plan` takes from a message, as many as its first
/// message had.
pub(super) fn message_numbers(
    plan: &extract::StreamPlan,
    schema: &super::msg_schema::MessageSchema,
    value: &cdr::Value<'_>,
) -> Result<Vec<f64>, String> {
    let mut values = Vec::with_capacity(plan.step_shape[0]);
    extract::numbers(schema, value, &plan.what, &mut values).map_err(|p| format!("stream `{}`: {p}", plan.key))?;
    if values.len() != plan.step_shape[0] {
        return Err(format!(
            "stream `{}`: {} values, the stream's first message had {}",
            plan.key,
            values.len(),
            plan.step_shape[0]
        ));
    }
    Ok(values)
}

/// Joints a message leaves out (NaN from `extract::numbers`) hold their
/// last value; NaN until a message gives one. Other streams pass as they are.
#[derive(Clone, Debug)]
pub(super) struct JointHold {
    held: Vec<f64>,
}

impl JointHold {
    pub(super) fn of(plan: &extract::StreamPlan, width: usize) -> Self {
        JointHold { held: vec![f64::NAN; if matches!(plan.what, Extract::Joints { .. }) { width } else { 0 }] }
    }

    /// `values` with the joints it lacks held (in place).
    pub(super) fn apply(&mut self, values: &mut [f64]) {
        if self.held.is_empty() {
            return;
        }
        for (h, v) in self.held.iter_mut().zip(values.iter_mut()) {
            if !v.is_nan() {
                *h = *v;
            }
            *v = *h;
        }
    }
}

/// Decodes every mapped topic of an episode (see the module docs).
pub(super) fn decode_episode(source: &EpisodeSource) -> Result<Decoded, (Option<String>, Option<usize>, String)> {
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
            let time_ns = match message_time_ns(plan, schema, &value, message.log_ns, message.publish_ns) {
                Ok((ns, from_log)) => {
                    log_timed[p] += usize::from(from_log);
                    ns
                }
                Err(problem) => {
                    failure = Some(fail(problem));
                    return Err(STOP.into());
                }
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
                _ => match message_numbers(plan, schema, &value) {
                    Ok(values) => Row { time_ns, values, frame: None },
                    Err(problem) => {
                        failure = Some(fail(problem));
                        return Err(STOP.into());
                    }
                },
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
        let mut held = JointHold::of(plan, width);
        for mut row in plan_rows {
            match row.frame {
                Some(frame) => frames.push(frame),
                None => {
                    held.apply(&mut row.values);
                    values.extend_from_slice(&row.values);
                }
            }
        }
        streams.push(DecodedStream { times: times.into(), values, frames });
    }
    Ok(Decoded { streams })
}

//! Serialized messages of a running robot's topics into the rows of a bag
//! mapping's streams, by the bag reader's own rules ([`MessageStreams`]):
//! the same reflection decoder (`cdr`), the same plan of each stream from
//! its topic's first message (`extract::plan`), the same time rule (header
//! stamp, or the log time where the stamp is unset or more than
//! [`super::decode::MAX_HEADER_SKEW_NS`] away) and joints held by name.
//!
//! Transform streams (`/tf` lookups) and image topics are not decoded here:
//! a deployment pushes their values or frames decoded.

use std::sync::Arc;

use robocache_cpu::DType;

use super::decode::{message_numbers, message_time_ns, JointHold};
use super::extract::{self, Extract, StreamPlan};
use super::msg_schema::MessageSchema;
use super::{cdr, BagMapping};
use crate::{Error, Result};

/// The definition of one topic's messages: its name, its type and the
/// definition text (as a bag carries it, `.msg` form), which
/// [`topic_definitions`] reads from an opened bag dataset.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TopicDefinition {
    pub topic: String,
    /// `sensor_msgs/msg/JointState`.
    pub type_name: String,
    pub definition: String,
}

/// One stream's sample of a message.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageSample {
    /// The stream's key in the mapping.
    pub stream: String,
    /// Its time, ns (the header stamp or the log or publish time).
    pub time_ns: i128,
    /// Its numbers (joints a message lacks held from earlier messages).
    pub values: Vec<f64>,
    /// The stream's dtype in the dataset (`float32` unless mapped `float64`).
    pub dtype: DType,
}

/// Live decoding of the mapped topics (module docs).
#[derive(Debug)]
pub struct MessageStreams {
    topics: Vec<LiveTopic>,
}

#[derive(Debug)]
struct LiveTopic {
    name: String,
    type_name: String,
    schema: Arc<MessageSchema>,
    /// The mapping's streams of this topic.
    streams: Vec<(String, super::StreamMapping)>,
    /// Their plans, from the topic's first message.
    plans: Option<Vec<(StreamPlan, JointHold)>>,
}

impl MessageStreams {
    /// A decoder of the numeric streams `mapping` takes from the topics
    /// `definitions` define.
    pub fn new(mapping: &BagMapping, definitions: &[TopicDefinition]) -> Result<Self> {
        let mut topics = Vec::new();
        for definition in definitions {
            let streams: Vec<_> = mapping
                .streams
                .iter()
                .filter(|(_, s)| s.transform.is_none() && s.topic == definition.topic)
                .map(|(k, s)| (k.clone(), s.clone()))
                .collect();
            if streams.is_empty() {
                continue;
            }
            let schema = MessageSchema::parse(&definition.type_name, &definition.definition)
                .map_err(|e| invalid(&definition.topic, format!("its `{}` definition: {e}", definition.type_name)))?;
            topics.push(LiveTopic {
                name: definition.topic.clone(),
                type_name: definition.type_name.clone(),
                schema: Arc::new(schema),
                streams,
                plans: None,
            });
        }
        Ok(MessageStreams { topics })
    }

    /// The topics it decodes.
    pub fn topics(&self) -> Vec<&str> {
        self.topics.iter().map(|t| t.name.as_str()).collect()
    }

    /// The samples of one serialized (CDR) message of `topic`, received at
    /// `log_ns` and published at `publish_ns`.
    pub fn decode(&mut self, topic: &str, log_ns: u64, publish_ns: u64, bytes: &[u8]) -> Result<Vec<MessageSample>> {
        let Some(live) = self.topics.iter_mut().find(|t| t.name == topic) else {
            return Err(invalid(topic, "no numeric stream of the mapping reads this topic".into()));
        };
        let schema = live.schema.clone();
        let value = cdr::decode(&schema, bytes).map_err(|e| invalid(topic, e))?;
        if live.plans.is_none() {
            let mut plans = Vec::with_capacity(live.streams.len());
            for (key, mapping) in &live.streams {
                let plan = extract::plan(key, mapping, &live.type_name, &schema, &value)
                    .map_err(|e| invalid(topic, format!("stream `{key}`: {e}")))?;
                if !matches!(plan.what, Extract::Numbers(_) | Extract::Joints { .. }) {
                    return Err(invalid(
                        topic,
                        format!("stream `{key}` takes images, which are pushed decoded, not as messages"),
                    ));
                }
                let width = plan.step_shape.iter().product();
                let hold = JointHold::of(&plan, width);
                plans.push((plan, hold));
            }
            live.plans = Some(plans);
        }
        let mut out = Vec::new();
        for (plan, hold) in live.plans.iter_mut().flatten() {
            let (time_ns, _) =
                message_time_ns(plan, &schema, &value, log_ns, publish_ns).map_err(|e| invalid(topic, e))?;
            let mut values = message_numbers(plan, &schema, &value).map_err(|e| invalid(topic, e))?;
            hold.apply(&mut values);
            out.push(MessageSample { stream: plan.key.clone(), time_ns, values, dtype: plan.dtype });
        }
        Ok(out)
    }

    /// Forgets the streams' plans and held joints (a new episode): the
    /// next message of each topic plans its streams again.
    pub fn reset(&mut self) {
        for topic in &mut self.topics {
            topic.plans = None;
        }
    }
}

fn invalid(topic: &str, problem: String) -> Error {
    Error::Invalid(format!("topic `{topic}`: {problem}"))
}

/// The definitions of the topics a bag dataset's mapping reads, as its
/// bags carry them (the first bag holding each topic).
pub(super) fn topic_definitions(
    bags: &[Arc<dyn super::bag_file::BagFile>],
    mapping: &BagMapping,
) -> Vec<TopicDefinition> {
    let mut out: Vec<TopicDefinition> = Vec::new();
    for stream in mapping.streams.values().filter(|s| s.transform.is_none()) {
        if out.iter().any(|d| d.topic == stream.topic) {
            continue;
        }
        let found = bags.iter().find_map(|bag| {
            bag.topics().iter().find(|t| t.name == stream.topic).and_then(|t| t.schema.as_ref().ok().cloned())
        });
        if let Some(schema) = found {
            let (type_name, text) = schema.definition();
            out.push(TopicDefinition {
                topic: stream.topic.clone(),
                type_name: type_name.to_owned(),
                definition: text.to_owned(),
            });
        }
    }
    out
}

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
use robocache_datasource::{Error, Result};

/// The definition of one topic's messages: its name, its type and the
/// definition text (as a bag carries it, `.msg` form), which
/// `topic_definitions` reads from an opened bag dataset.
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
        self.decode_then(topic, log_ns, publish_ns, bytes, Ok::<_, Error>)
    }

    /// [`MessageStreams::decode`], then `accept` of the samples; the
    /// decoder's state (the topic's plans, its held joints) changes only
    /// when both succeed, so a message refused downstream leaves it as it
    /// was, as if the message had not come.
    pub fn decode_then<T, E: From<Error>>(
        &mut self,
        topic: &str,
        log_ns: u64,
        publish_ns: u64,
        bytes: &[u8],
        accept: impl FnOnce(Vec<MessageSample>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let Some(live) = self.topics.iter_mut().find(|t| t.name == topic) else {
            return Err(invalid(topic, "no numeric stream of the mapping reads this topic".into()).into());
        };
        let schema = live.schema.clone();
        let value = cdr::decode(&schema, bytes).map_err(|e| invalid(topic, e))?;
        let fresh = match live.plans {
            Some(_) => None,
            None => {
                let mut plans = Vec::with_capacity(live.streams.len());
                for (key, mapping) in &live.streams {
                    let plan = extract::plan(key, mapping, &live.type_name, &schema, &value)
                        .map_err(|e| invalid(topic, format!("stream `{key}`: {e}")))?;
                    if !matches!(plan.what, Extract::Numbers(_) | Extract::Joints { .. }) {
                        return Err(invalid(
                            topic,
                            format!("stream `{key}` takes images, which are pushed decoded, not as messages"),
                        )
                        .into());
                    }
                    let width = plan.step_shape.iter().product();
                    let hold = JointHold::of(&plan, width);
                    plans.push((plan, hold));
                }
                Some(plans)
            }
        };
        let Some(plans) = fresh.as_ref().or(live.plans.as_ref()) else {
            return Err(invalid(topic, "no plan of its streams".into()).into());
        };
        let mut holds: Vec<JointHold> = plans.iter().map(|(_, hold)| hold.clone()).collect();
        let mut out = Vec::with_capacity(plans.len());
        for ((plan, _), hold) in plans.iter().zip(&mut holds) {
            let (time_ns, _) =
                message_time_ns(plan, &schema, &value, log_ns, publish_ns).map_err(|e| invalid(topic, e))?;
            let mut values = message_numbers(plan, &schema, &value).map_err(|e| invalid(topic, e))?;
            hold.apply(&mut values);
            out.push(MessageSample { stream: plan.key.clone(), time_ns, values, dtype: plan.dtype });
        }
        let accepted = accept(out)?;
        if fresh.is_some() {
            live.plans = fresh;
        }
        for ((_, kept), hold) in live.plans.iter_mut().flatten().zip(holds) {
            *kept = hold;
        }
        Ok(accepted)
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

#[cfg(test)]
mod tests {
    use super::{MessageStreams, TopicDefinition};

    /// A little-endian CDR `sensor_msgs/msg/JointState`.
    fn joint_state(sec: i32, names: &[&str], position: &[f64], velocity: &[f64]) -> Vec<u8> {
        let mut b = vec![0u8, 1, 0, 0];
        let align = |b: &mut Vec<u8>, n: usize| {
            while !(b.len() - 4).is_multiple_of(n) {
                b.push(0);
            }
        };
        b.extend(sec.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend(5u32.to_le_bytes());
        b.extend(b"base\0");
        align(&mut b, 4);
        b.extend((names.len() as u32).to_le_bytes());
        for name in names {
            align(&mut b, 4);
            b.extend((name.len() as u32 + 1).to_le_bytes());
            b.extend(name.as_bytes());
            b.push(0);
        }
        for values in [position, velocity, &[]] {
            align(&mut b, 4);
            b.extend((values.len() as u32).to_le_bytes());
            if !values.is_empty() {
                align(&mut b, 8);
            }
            for v in values {
                b.extend(v.to_le_bytes());
            }
        }
        b
    }

    fn decoder() -> MessageStreams {
        let mapping = "[streams.a_state]\ntopic = \"/joint_states\"\nfield = \"position\"\njoints = [\"j1\", \"j2\"]\n\
                       [streams.b_speed]\ntopic = \"/joint_states\"\nfield = \"velocity\"\n"
            .parse()
            .unwrap();
        let definition = TopicDefinition {
            topic: "/joint_states".into(),
            type_name: "sensor_msgs/msg/JointState".into(),
            definition: include_str!("../../robocache-datasets/tests/fixtures/ros2/joint_state.msg").into(),
        };
        MessageStreams::new(&mapping, &[definition]).unwrap()
    }

    /// A message refused — by a later stream's field, or downstream —
    /// leaves the held joints as they were.
    #[test]
    fn a_refused_message_changes_no_held_joint() {
        let mut streams = decoder();
        let first = streams.decode("/joint_states", 1, 1, &joint_state(1, &["j1", "j2"], &[1.0, 2.0], &[0.1, 0.2]));
        assert_eq!(first.unwrap()[0].values, [1.0, 2.0]);
        // j1 moves, but the velocity has one value of the two the stream has.
        let short = joint_state(2, &["j1"], &[5.0], &[0.3]);
        let error = streams.decode("/joint_states", 2, 2, &short).unwrap_err().to_string();
        assert!(error.contains("b_speed") && error.contains("1 values"), "{error}");
        // j1 moves again, and the samples are refused downstream.
        let refused = joint_state(3, &["j1"], &[9.0], &[0.3, 0.4]);
        let error = streams
            .decode_then("/joint_states", 3, 3, &refused, |_| {
                Err::<(), _>(robocache_datasource::Error::Invalid("no".into()))
            })
            .unwrap_err();
        assert!(error.to_string().contains("no"));
        // Only j2 given: j1 is still the first message's.
        let next = streams.decode("/joint_states", 4, 4, &joint_state(4, &["j2"], &[7.0], &[0.5, 0.6])).unwrap();
        assert_eq!(next[0].values, [1.0, 7.0], "held joints after refused messages");
    }
}

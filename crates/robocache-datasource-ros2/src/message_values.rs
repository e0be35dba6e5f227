//! Every message of one topic, decoded by the reflection decoder that
//! reads streams, as JSON values by field name: what a user checks a bag
//! against another reader with (`robocache.bag_messages`; the differential
//! test against `rosbags`), and what the loader's numbers come from.
//!
//! A message is a [`MessageValue::Struct`] of its fields by name, in order;
//! a sequence or fixed array a list (of `uint8`/`byte`/`char`: bytes);
//! integers exact (64-bit); floats as read (a `float32` widened exactly),
//! NaN and infinities included. An empty type holds its one field,
//! `structure_needs_at_least_one_member`, as rosidl and `rosbags` give it.

use std::path::{Path, PathBuf};

use super::cdr::Value;
use super::msg_schema::MessageSchema;
use super::{bag_error, bags_at, cdr, open_bag};
use robocache_datasource::{Error, Result};
use robocache_storage::StorageOptions;

/// A decoded value, owned, its fields named.
#[derive(Clone, Debug, PartialEq)]
pub enum MessageValue {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    /// A `uint8`/`byte`/`char` array or sequence.
    Bytes(Vec<u8>),
    List(Vec<MessageValue>),
    /// A message: its fields by name, in order.
    Struct(Vec<(String, MessageValue)>),
}

/// One message of a topic, decoded.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedMessage {
    /// The bag file.
    pub file: PathBuf,
    /// Its index among the topic's messages in that file, in the file's order.
    pub index: usize,
    pub log_time_ns: u64,
    pub publish_time_ns: u64,
    /// Its fields (see the module docs).
    pub value: MessageValue,
}

/// Every message of `topic` in every bag at `path` (a bag file or a
/// directory of them), in each file's order. A topic no bag has, or one
/// whose messages cannot be decoded (no definition, not CDR), is an error
/// that says why; so is a message that does not decode, by its index.
pub fn bag_messages(path: &Path, topic: &str, storage: &StorageOptions) -> Result<Vec<DecodedMessage>> {
    let (storage, files) = bags_at(path, storage)?;
    let mut out = Vec::new();
    let mut found = false;
    for file in files {
        let bag = open_bag(&file, &storage)?;
        let Some(at) = bag.topics().iter().position(|t| t.name == topic) else { continue };
        found = true;
        let info = &bag.topics()[at];
        let schema = info.schema.as_ref().map_err(|p| bag_error(&file, Some(topic), None, p.clone()))?;
        let mut index = 0usize;
        let mut failed = None;
        bag.read(&[at], &mut |message| {
            let here = index;
            index += 1;
            match cdr::decode(schema, message.data) {
                Ok(value) => {
                    out.push(DecodedMessage {
                        file: file.clone(),
                        index: here,
                        log_time_ns: message.log_ns,
                        publish_time_ns: message.publish_ns,
                        value: named(schema, &value),
                    });
                    Ok(())
                }
                Err(problem) => {
                    failed = Some((here, problem));
                    Err(super::STOP.into())
                }
            }
        })
        .or_else(|problem| match problem.as_str() {
            super::STOP => Ok(()),
            _ => Err(bag_error(&file, Some(topic), None, problem)),
        })?;
        if let Some((index, problem)) = failed {
            return Err(bag_error(&file, Some(topic), Some(index), problem));
        }
    }
    if !found {
        return Err(Error::Invalid(format!("{}: no bag has a topic `{topic}`", path.display())));
    }
    Ok(out)
}

/// A decoded value with its fields named.
pub(crate) fn named(schema: &MessageSchema, value: &Value<'_>) -> MessageValue {
    match value {
        Value::Bool(b) => MessageValue::Bool(*b),
        Value::Int(i) => MessageValue::Int(*i),
        Value::UInt(u) => MessageValue::UInt(*u),
        Value::Float(f) => MessageValue::Float(*f),
        Value::Str(s) => MessageValue::Str(s.as_ref().to_owned()),
        Value::Bytes(bytes) => MessageValue::Bytes(bytes.to_vec()),
        Value::List(items) => MessageValue::List(items.iter().map(|v| named(schema, v)).collect()),
        Value::Struct(ty, fields) => MessageValue::Struct(
            schema.types[*ty].fields.iter().zip(fields).map(|(f, v)| (f.name.clone(), named(schema, v))).collect(),
        ),
    }
}

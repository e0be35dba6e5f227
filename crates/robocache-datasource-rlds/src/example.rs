//! `tf.train.Example` (tensorflow/core/example/{example,feature}.proto):
//!
//! ```text
//! Example  { Features features = 1; }
//! Features { map<string, Feature> feature = 1; }
//! Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//! BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
//! Int64List { repeated int64 value = 1 [packed]; }
//! ```
//!
//! The messages are declared with `prost` derives (no protoc at build
//! time). A record is never decoded whole: [`feature_spans`] walks its wire
//! format with positioned reads to find where each feature's `Feature`
//! message lies, skipping over the values; a window then decodes only the
//! features, and for `bytes_list` only the entries ([`bytes_entries`]), it
//! needs.

use robocache_storage::Blob;
use std::path::Path;

use robocache_datasource::direct_read::read_exact_at;
use robocache_datasource::{Error, Result};

/// `tensorflow.Feature`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Feature {
    #[prost(oneof = "Kind", tags = "1, 2, 3")]
    pub kind: Option<Kind>,
}

/// The value list of a [`Feature`] (variants named as the proto's fields).
#[allow(clippy::enum_variant_names)]
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Kind {
    #[prost(message, tag = "1")]
    BytesList(BytesList),
    #[prost(message, tag = "2")]
    FloatList(FloatList),
    #[prost(message, tag = "3")]
    Int64List(Int64List),
}

/// `tensorflow.BytesList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BytesList {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub value: Vec<Vec<u8>>,
}

/// `tensorflow.FloatList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FloatList {
    #[prost(float, repeated, tag = "1")]
    pub value: Vec<f32>,
}

/// `tensorflow.Int64List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Int64List {
    #[prost(int64, repeated, tag = "1")]
    pub value: Vec<i64>,
}

/// `tensorflow.Features` (for writers and tests).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Features {
    #[prost(map = "string, message", tag = "1")]
    pub feature: std::collections::HashMap<String, Feature>,
}

/// `tensorflow.Example` (for writers and tests).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Example {
    #[prost(message, optional, tag = "1")]
    pub features: Option<Features>,
}

/// A byte range of a shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub offset: u64,
    pub len: u64,
}

impl Span {
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

const WIRE_VARINT: u64 = 0;
const WIRE_I64: u64 = 1;
const WIRE_LEN: u64 = 2;
const WIRE_I32: u64 = 5;

/// Reads a protobuf message's structure from a file through a small window,
/// so that skipping a large field costs one seek rather than a read.
struct WireReader<'a> {
    file: &'a Blob,
    window: Vec<u8>,
    window_start: u64,
    window_len: usize,
}

impl<'a> WireReader<'a> {
    const WINDOW: usize = 4096;

    fn new(file: &'a Blob) -> Self {
        WireReader { file, window: vec![0; Self::WINDOW], window_start: 0, window_len: 0 }
    }

    /// The byte at `at`, which lies before `end` (the record's end).
    fn byte(&mut self, at: u64, end: u64) -> std::io::Result<u8> {
        if at < self.window_start || at >= self.window_start + self.window_len as u64 {
            let len = (end - at).min(Self::WINDOW as u64) as usize;
            read_exact_at(self.file, &mut self.window[..len], at)?;
            self.window_start = at;
            self.window_len = len;
        }
        Ok(self.window[(at - self.window_start) as usize])
    }

    /// A varint at `*at`, advancing `*at`; `None` when it runs past `end` or
    /// is longer than 10 bytes.
    fn varint(&mut self, at: &mut u64, end: u64) -> std::io::Result<Option<u64>> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            if *at >= end {
                return Ok(None);
            }
            let b = self.byte(*at, end)?;
            *at += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(Some(value));
            }
        }
        Ok(None)
    }

    fn bytes(&mut self, span: Span) -> std::io::Result<Vec<u8>> {
        let mut out = vec![0; span.len as usize];
        read_exact_at(self.file, &mut out, span.offset)?;
        Ok(out)
    }
}

/// What went wrong walking a record, before the caller adds file and record.
type WalkError = String;

/// Reads the next field header at `*at`: (field number, wire type, and for
/// length-delimited fields the span of the value); skips other values.
fn next_field(
    reader: &mut WireReader<'_>,
    at: &mut u64,
    end: u64,
) -> std::io::Result<Result<(u64, u64, Span), WalkError>> {
    let start = *at;
    let Some(tag) = reader.varint(at, end)? else {
        return Ok(Err(format!("a field tag at byte {start} of the record runs past its end")));
    };
    let (field, wire) = (tag >> 3, tag & 7);
    let span = match wire {
        WIRE_VARINT => {
            if reader.varint(at, end)?.is_none() {
                return Ok(Err(format!("a varint at byte {start} runs past its message")));
            }
            Span { offset: *at, len: 0 }
        }
        WIRE_I64 | WIRE_I32 => {
            let len = if wire == WIRE_I64 { 8 } else { 4 };
            Span { offset: *at, len }
        }
        WIRE_LEN => {
            let Some(len) = reader.varint(at, end)? else {
                return Ok(Err(format!("the length of field {field} at byte {start} runs past its message")));
            };
            Span { offset: *at, len }
        }
        other => return Ok(Err(format!("field {field} at byte {start} has wire type {other}, which no Example uses"))),
    };
    if span.offset.checked_add(span.len).is_none_or(|e| e > end) {
        return Ok(Err(format!(
            "field {field} at byte {start} claims {} bytes, past the end of its {}-byte message",
            span.len,
            end.saturating_sub(start)
        )));
    }
    *at = span.end();
    Ok(Ok((field, wire, span)))
}

/// Where each feature of the Example in `record` lies: `(key, span of its
/// Feature message)`, in record order. Reads field headers and keys only.
pub fn feature_spans(path: &Path, file: &Blob, record: usize, payload: Span) -> Result<Vec<(String, Span)>> {
    let mut reader = WireReader::new(file);
    walk_example(&mut reader, payload).map_err(|error| Error::Io { file: path.to_path_buf(), error })?.map_err(
        |problem| Error::Record {
            file: path.to_path_buf(),
            record,
            problem: format!("not a tf.train.Example: {problem}"),
        },
    )
}

fn walk_example(reader: &mut WireReader<'_>, payload: Span) -> std::io::Result<Result<Vec<(String, Span)>, WalkError>> {
    let mut features = Vec::new();
    let mut at = payload.offset;
    let in_record = |span: Span| Span { offset: span.offset - payload.offset, len: span.len };
    while at < payload.end() {
        let (field, wire, features_span) = match next_field(reader, &mut at, payload.end())? {
            Ok(f) => f,
            Err(e) => return Ok(Err(e)),
        };
        if field != 1 {
            continue; // unknown Example fields are skipped, as protobuf does
        }
        if wire != WIRE_LEN {
            return Ok(Err(format!("Example.features at byte {} is not a message", in_record(features_span).offset)));
        }
        let mut inner = features_span.offset;
        while inner < features_span.end() {
            let (field, wire, entry) = match next_field(reader, &mut inner, features_span.end())? {
                Ok(f) => f,
                Err(e) => return Ok(Err(e)),
            };
            if field != 1 {
                continue;
            }
            if wire != WIRE_LEN {
                return Ok(Err("a Features map entry is not a message".into()));
            }
            let mut key = None;
            let mut value = Span { offset: entry.end(), len: 0 };
            let mut e = entry.offset;
            while e < entry.end() {
                let (field, wire, span) = match next_field(reader, &mut e, entry.end())? {
                    Ok(f) => f,
                    Err(err) => return Ok(Err(err)),
                };
                match (field, wire) {
                    (1, WIRE_LEN) => match String::from_utf8(reader.bytes(span)?) {
                        Ok(k) => key = Some(k),
                        Err(_) => {
                            return Ok(Err(format!("a feature key at byte {} is not UTF-8", in_record(span).offset)))
                        }
                    },
                    (2, WIRE_LEN) => value = span,
                    _ => {}
                }
            }
            let Some(key) = key else { return Ok(Err("a Features map entry has no key".into())) };
            // A later entry for the same key replaces an earlier one (protobuf map semantics).
            match features.iter_mut().find(|(k, _): &&mut (String, Span)| *k == key) {
                Some(existing) => existing.1 = value,
                None => features.push((key, value)),
            }
        }
    }
    Ok(Ok(features))
}

/// The spans of the entries of the `bytes_list` in the Feature at `feature`:
/// one per encoded image, text or encoded tensor. `Err` names the problem
/// when the Feature holds another list or is malformed.
pub fn bytes_entries(path: &Path, file: &Blob, feature: Span) -> Result<Result<Vec<Span>, WalkError>> {
    let io = |error| Error::Io { file: path.to_path_buf(), error };
    let mut reader = WireReader::new(file);
    let mut at = feature.offset;
    let mut entries = Vec::new();
    let mut list = None;
    while at < feature.end() {
        match next_field(&mut reader, &mut at, feature.end()).map_err(io)? {
            Ok((1, WIRE_LEN, span)) => list = Some(span),
            Ok((2 | 3, _, _)) => {
                return Ok(Err(
                    "holds a float_list or int64_list, not the bytes_list its features.json type stores".into()
                ))
            }
            Ok(_) => {}
            Err(e) => return Ok(Err(e)),
        }
    }
    let Some(list) = list else { return Ok(Ok(entries)) };
    let mut at = list.offset;
    while at < list.end() {
        match next_field(&mut reader, &mut at, list.end()).map_err(io)? {
            Ok((1, WIRE_LEN, span)) => entries.push(span),
            Ok(_) => {}
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(entries))
}

/// Where the values of a packed `float_list` in the Feature at `feature`
/// lie (4 bytes each, little-endian); `None` for any other list, or floats
/// written unpacked, which the caller decodes whole.
pub fn packed_floats(path: &Path, file: &Blob, feature: Span) -> Result<Option<Span>> {
    let io = |error| Error::Io { file: path.to_path_buf(), error };
    let mut reader = WireReader::new(file);
    let mut at = feature.offset;
    let mut list = None;
    while at < feature.end() {
        match next_field(&mut reader, &mut at, feature.end()).map_err(io)? {
            Ok((2, WIRE_LEN, span)) if list.is_none() => list = Some(span),
            Ok((1..=3, _, _)) | Err(_) => return Ok(None),
            Ok(_) => {}
        }
    }
    let Some(list) = list else { return Ok(None) };
    let mut at = list.offset;
    let mut packed = None;
    while at < list.end() {
        match next_field(&mut reader, &mut at, list.end()).map_err(io)? {
            Ok((1, WIRE_LEN, span)) if packed.is_none() && span.len % 4 == 0 => packed = Some(span),
            Ok((1, _, _)) | Err(_) => return Ok(None),
            Ok(_) => {}
        }
    }
    Ok(Some(packed.unwrap_or(Span { offset: list.offset, len: 0 })))
}

/// Decodes the Feature message at `span`.
pub fn read_feature(path: &Path, file: &Blob, span: Span) -> Result<std::result::Result<Feature, String>> {
    let mut bytes = vec![0; span.len as usize];
    read_exact_at(file, &mut bytes, span.offset).map_err(|error| Error::Io { file: path.to_path_buf(), error })?;
    Ok(<Feature as prost::Message>::decode(bytes.as_slice()).map_err(|e| format!("not a tf.train.Feature: {e}")))
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    pub(crate) fn example(features: Vec<(&str, Kind)>) -> Vec<u8> {
        let feature = features.into_iter().map(|(k, v)| (k.to_owned(), Feature { kind: Some(v) })).collect();
        Example { features: Some(Features { feature }) }.encode_to_vec()
    }

    #[test]
    fn spans_point_at_each_feature_and_bytes_entries_at_each_value() {
        let images = vec![vec![1u8; 5000], vec![], vec![3u8; 7]];
        let bytes = example(vec![
            ("steps/image", Kind::BytesList(BytesList { value: images.clone() })),
            ("steps/action", Kind::FloatList(FloatList { value: vec![1.5, -2.0, 3.25] })),
            ("steps/is_first", Kind::Int64List(Int64List { value: vec![1, 0, 0] })),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        // Put the record after some bytes, as in a shard.
        let mut file_bytes = vec![0xee; 100];
        file_bytes.extend(&bytes);
        std::fs::write(&path, &file_bytes).unwrap();
        let file = robocache_storage::Storage::new(Default::default()).open(&path).unwrap();
        let spans = feature_spans(&path, &file, 0, Span { offset: 100, len: bytes.len() as u64 }).unwrap();
        assert_eq!(spans.len(), 3);
        for (key, span) in &spans {
            let feature = read_feature(&path, &file, *span).unwrap().unwrap();
            match (key.as_str(), feature.kind.unwrap()) {
                ("steps/action", Kind::FloatList(l)) => assert_eq!(l.value, [1.5, -2.0, 3.25]),
                ("steps/is_first", Kind::Int64List(l)) => assert_eq!(l.value, [1, 0, 0]),
                ("steps/image", Kind::BytesList(_)) => {
                    let entries = bytes_entries(&path, &file, *span).unwrap().unwrap();
                    let read: Vec<Vec<u8>> =
                        entries.iter().map(|s| file_bytes[s.offset as usize..s.end() as usize].to_vec()).collect();
                    assert_eq!(read, images);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        let action = spans.iter().find(|(k, _)| k == "steps/action").unwrap().1;
        assert!(bytes_entries(&path, &file, action).unwrap().unwrap_err().contains("float_list"));
        // Garbage is not an Example.
        std::fs::write(&path, b"\x0a\xff\xff\xff\xff\x0f this is not").unwrap();
        let file = robocache_storage::Storage::new(Default::default()).open(&path).unwrap();
        let err = feature_spans(&path, &file, 4, Span { offset: 0, len: 17 }).unwrap_err().to_string();
        assert!(err.contains("record 4: not a tf.train.Example") && err.contains("past the end"), "{err}");
    }
}

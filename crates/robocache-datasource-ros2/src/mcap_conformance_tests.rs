//! Foxglove's MCAP conformance suite (`../shared/data/mcap-conformance/
//! conformance`): every file's channels, message counts and messages (log
//! and publish time, bytes) as the suite's `.json` lists its records, in
//! the file's order; a file with no channel the reader can list is an
//! error, never an empty result.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use robocache_storage::{Storage, StorageOptions};
use serde_json::Value;

use super::McapBag;
use crate::bag_file::{BagFile, RawMessage};

/// A record's field, by name.
fn field<'v>(record: &'v Value, name: &str) -> &'v Value {
    record["fields"]
        .as_array()
        .and_then(|fields| fields.iter().find(|f| f[0] == name))
        .map(|f| &f[1])
        .unwrap_or_else(|| panic!("no field `{name}` in {record}"))
}

fn number(value: &Value) -> u64 {
    value.as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("not a number: {value}"))
}

/// (topic, message encoding) per channel id, and per topic its messages as
/// (log time, publish time, bytes), in the file's order.
type Expected = (BTreeMap<u16, (String, String)>, BTreeMap<String, Vec<(u64, u64, Vec<u8>)>>);

fn expected(json: &Path) -> Expected {
    let text = std::fs::read_to_string(json).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let mut channels = BTreeMap::new();
    let mut messages: BTreeMap<String, Vec<(u64, u64, Vec<u8>)>> = BTreeMap::new();
    for record in doc["records"].as_array().unwrap() {
        match record["type"].as_str().unwrap() {
            "Channel" => {
                let id = number(field(record, "id")) as u16;
                let topic = field(record, "topic").as_str().unwrap().to_owned();
                let encoding = field(record, "message_encoding").as_str().unwrap().to_owned();
                channels.entry(id).or_insert((topic, encoding));
            }
            "Message" => {
                let id = number(field(record, "channel_id")) as u16;
                let topic = channels[&id].0.clone();
                let data = field(record, "data").as_array().unwrap().iter().map(|b| number(b) as u8).collect();
                let times = (number(field(record, "log_time")), number(field(record, "publish_time")));
                messages.entry(topic).or_default().push((times.0, times.1, data));
            }
            _ => {}
        }
    }
    (channels, messages)
}

#[test]
fn the_mcap_conformance_suite_reads_as_its_records_say() {
    let Some(root) = robocache_datasource::testing::shared_data("mcap-conformance/conformance") else { return };
    let storage = Storage::new(StorageOptions::default());
    let mut files: Vec<_> = walkdir(&root).into_iter().filter(|p| p.extension().is_some_and(|e| e == "mcap")).collect();
    files.sort();
    assert!(files.len() > 400, "{} files in {}", files.len(), root.display());
    let mut read = 0;
    for file in &files {
        let (channels, want) = expected(&file.with_extension("json"));
        let bag = McapBag::open(file, &storage).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        // Every topic, its count and its messages, in the file's order.
        let topics: BTreeMap<&str, u64> = bag.topics().iter().map(|t| (t.name.as_str(), t.messages)).collect();
        let mut want_topics: BTreeMap<&str, u64> = channels.values().map(|(t, _)| (t.as_str(), 0)).collect();
        for (topic, list) in &want {
            want_topics.insert(topic, list.len() as u64);
        }
        assert_eq!(topics, want_topics, "{}", file.display());
        let all: Vec<usize> = (0..bag.topics().len()).collect();
        let mut got: BTreeMap<String, Vec<(u64, u64, Vec<u8>)>> = BTreeMap::new();
        bag.read(&all, &mut |m: RawMessage<'_>| {
            got.entry(bag.topics()[m.topic].name.clone()).or_default().push((m.log_ns, m.publish_ns, m.data.to_vec()));
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(got, want, "{}", file.display());
        // The span of log times, from the statistics or the scan.
        let times: Vec<u64> = want.values().flatten().map(|m| m.0).collect();
        let span = times.iter().min().map(|&a| (a, *times.iter().max().unwrap()));
        assert_eq!(bag.span_ns(), span, "{}", file.display());
        // Messages robocache cannot decode (the suite's are of encoding `a`
        // and schema encoding `c`) are listed, and said not decodable, why.
        let encodings: HashMap<&str, &str> = channels.values().map(|(t, e)| (t.as_str(), e.as_str())).collect();
        for topic in bag.topics() {
            if encodings[topic.name.as_str()] != "cdr" {
                let problem = topic.schema.as_ref().err().map(String::as_str).unwrap_or_default();
                assert!(
                    ["robocache decodes ROS 2's cdr", "no schema", "robocache reads ros2msg and ros2idl"]
                        .iter()
                        .any(|why| problem.contains(why)),
                    "{}: `{}`: {problem}",
                    file.display(),
                    topic.name
                );
            }
        }
        read += 1;
    }
    assert_eq!(read, files.len());
}

fn walkdir(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walkdir(&path));
        } else {
            out.push(path);
        }
    }
    out
}

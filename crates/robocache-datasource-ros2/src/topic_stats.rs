//! What a bag holds, topic by topic, for `robocache inspect`: type,
//! message count, rate, largest gap and time range, read from the log
//! times of every message (nothing decoded); and, when asked, every
//! message decoded ([`decode_messages`]).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::bag_file::BagFile;
use super::{bags_at, cdr, open_bag};
use robocache_datasource::{Error, Result};
use robocache_storage::StorageOptions;

/// One topic of one bag file.
#[derive(Clone, Debug, Serialize)]
pub struct TopicStats {
    /// The bag file.
    pub file: PathBuf,
    /// `MCAP` or `SQLite`.
    pub storage: &'static str,
    pub topic: String,
    /// `sensor_msgs/msg/JointState`.
    pub type_name: String,
    pub messages: u64,
    /// First and last log time, in seconds from the bag's first message.
    pub first_s: f64,
    pub last_s: f64,
    /// Messages per second over the topic's span (0 for one message).
    pub rate_hz: f64,
    /// The longest time between two consecutive messages, in seconds.
    pub largest_gap_s: f64,
    /// Messages whose log time is before the previous message's.
    pub out_of_order: u64,
    /// Why its messages cannot be decoded (no definition, not CDR), if so.
    pub not_decodable: Option<String>,
}

/// The topics of every bag at `path` (a bag file or a directory of them).
pub fn topic_stats(path: &Path, storage: &StorageOptions) -> Result<Vec<TopicStats>> {
    let (storage, files) = bags_at(path, storage)?;
    let mut out = Vec::new();
    for file in files {
        let bag = open_bag(&file, &storage)?;
        let topics = bag.topics();
        let mut times: Vec<Vec<u64>> = topics.iter().map(|_| Vec::new()).collect();
        let all: Vec<usize> = (0..topics.len()).collect();
        bag.read(&all, &mut |message| {
            times[message.topic].push(message.log_ns);
            Ok(())
        })
        .map_err(|problem| Error::Bag { file: file.clone(), topic: None, message: None, problem })?;
        let origin = times.iter().flat_map(|t| t.iter().copied()).min().unwrap_or(0);
        for (topic, logged) in topics.iter().zip(&times) {
            let seconds = |ns: u64| ns.saturating_sub(origin) as f64 * 1e-9;
            let (first, last) = match (logged.iter().min(), logged.iter().max()) {
                (Some(&a), Some(&b)) => (seconds(a), seconds(b)),
                _ => (0.0, 0.0),
            };
            let span = last - first;
            let largest_gap_ns = logged.windows(2).map(|w| w[1].saturating_sub(w[0])).max().unwrap_or(0);
            out.push(TopicStats {
                file: file.clone(),
                storage: bag.storage(),
                topic: topic.name.clone(),
                type_name: topic.type_name.clone(),
                messages: logged.len() as u64,
                first_s: first,
                last_s: last,
                rate_hz: if logged.len() > 1 && span > 0.0 { (logged.len() - 1) as f64 / span } else { 0.0 },
                largest_gap_s: largest_gap_ns as f64 * 1e-9,
                out_of_order: logged.windows(2).filter(|w| w[1] < w[0]).count() as u64,
                not_decodable: topic.schema.as_ref().err().cloned(),
            });
        }
    }
    Ok(out)
}

/// What decoding every message of one topic of one bag file gave.
#[derive(Clone, Debug, Serialize)]
pub struct TopicDecode {
    /// The bag file.
    pub file: PathBuf,
    pub topic: String,
    /// `sensor_msgs/msg/JointState`.
    pub type_name: String,
    /// Messages decoded.
    pub messages: u64,
    /// Their serialized bytes.
    pub bytes: u64,
    /// Why the topic's messages were not all decoded: no definition, not
    /// CDR, or the first message that failed (its index among the topic's
    /// messages in the order the bag stores them) and why. The topic's
    /// later messages are not decoded.
    pub error: Option<String>,
}

/// Decodes every message of every topic of every bag at `path` with the
/// definitions the bag carries (the reflection decoder that reads streams)
/// and counts what decoded: the check that a bag is whole before training,
/// and the measure of how fast robocache decodes CDR (`robocache inspect
/// --decode`; `benches/ros2_decode.py`). The parts of a bag that read on
/// their own (an indexed MCAP's chunks) are read and decoded side by side
/// on `threads` threads (0: the rayon pool, every core), and their counts
/// added in the file's order, so the result is the one a single thread
/// gives. A topic whose message does not decode is reported, and the
/// others are still decoded; a bag that cannot be read (a damaged chunk, a
/// bad CRC) is an error naming the file.
pub fn decode_messages(path: &Path, storage: &StorageOptions, threads: usize) -> Result<Vec<TopicDecode>> {
    let (storage, files) = bags_at(path, storage)?;
    let pool = match threads {
        0 => None,
        n => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map_err(|e| Error::Invalid(format!("a pool of {n} decoding threads: {e}")))?,
        ),
    };
    let mut out = Vec::new();
    for file in files {
        let bag = open_bag(&file, &storage)?;
        let decode = || decode_bag(bag.as_ref());
        let decoded = match &pool {
            Some(pool) => pool.install(decode),
            None => decode(),
        }
        .map_err(|problem| Error::Bag { file: file.clone(), topic: None, message: None, problem })?;
        out.extend(decoded.into_iter().map(|mut topic| {
            topic.file = file.clone();
            topic
        }));
    }
    Ok(out)
}

/// One topic's messages in one part of a bag: decoded (up to the first that
/// failed), their bytes, and that failure (its index in the part).
#[derive(Clone, Debug, Default)]
struct PartDecode {
    messages: u64,
    bytes: u64,
    error: Option<(u64, String)>,
}

/// Every message of every topic of `bag`, its parts side by side on the
/// current rayon pool (see [`decode_messages`]).
fn decode_bag(bag: &dyn BagFile) -> std::result::Result<Vec<TopicDecode>, String> {
    use rayon::prelude::*;
    let topics = bag.topics();
    let wanted: Vec<usize> = (0..topics.len()).filter(|&t| topics[t].schema.is_ok()).collect();
    let parts: Vec<Vec<PartDecode>> = (0..bag.parts())
        .into_par_iter()
        .map(|part| {
            let mut decoded = vec![PartDecode::default(); topics.len()];
            bag.read_part(part, &wanted, &mut |message| {
                let (Some(report), Some(topic)) = (decoded.get_mut(message.topic), topics.get(message.topic)) else {
                    return Ok(());
                };
                let Ok(schema) = &topic.schema else { return Ok(()) };
                if report.error.is_some() {
                    return Ok(());
                }
                match cdr::decode(schema, message.data) {
                    Ok(value) => {
                        std::hint::black_box(value);
                        report.messages += 1;
                        report.bytes += message.data.len() as u64;
                    }
                    Err(problem) => report.error = Some((report.messages, problem)),
                }
                Ok(())
            })?;
            Ok(decoded)
        })
        .collect::<std::result::Result<_, String>>()?;
    let mut out: Vec<TopicDecode> = topics
        .iter()
        .map(|topic| TopicDecode {
            file: PathBuf::new(),
            topic: topic.name.clone(),
            type_name: topic.type_name.clone(),
            messages: 0,
            bytes: 0,
            error: topic.schema.as_ref().err().cloned(),
        })
        .collect();
    // In the file's order: a topic's count stops at its first failure.
    for part in parts {
        for (report, here) in out.iter_mut().zip(part) {
            if report.error.is_some() {
                continue;
            }
            report.messages += here.messages;
            report.bytes += here.bytes;
            if let Some((_, problem)) = here.error {
                report.error = Some(format!("message {}: {problem}", report.messages));
            }
        }
    }
    Ok(out)
}

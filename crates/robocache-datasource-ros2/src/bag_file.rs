//! One bag file as the ROS 2 reader sees it, whatever its storage: its
//! topics (name, type, definition, message count) and its messages, read
//! topic by topic. MCAP ([`super::mcap_bag`]) and rosbag2's SQLite
//! ([`super::sqlite_bag`]) implement it.

use std::sync::Arc;

use super::msg_schema::MessageSchema;

/// One topic of a bag.
#[derive(Clone, Debug)]
pub(crate) struct Topic {
    pub(crate) name: String,
    /// `sensor_msgs/msg/JointState`.
    pub(crate) type_name: String,
    /// `cdr` for ROS 2; other encodings are listed but not decoded.
    pub(crate) encoding: String,
    /// The definition the bag carries, or why there is none usable.
    pub(crate) schema: Result<Arc<MessageSchema>, String>,
    pub(crate) messages: u64,
    /// First and last log time (ns), where known without reading messages.
    pub(crate) span_ns: Option<(u64, u64)>,
}

/// One message: its topic (an index in [`BagFile::topics`]), log and
/// publish times (ns; publish is the log time where the storage has none)
/// and CDR bytes.
pub(crate) struct RawMessage<'a> {
    pub(crate) topic: usize,
    pub(crate) log_ns: u64,
    pub(crate) publish_ns: u64,
    pub(crate) data: &'a [u8],
}

/// A visitor of messages; an error stops the read.
pub(crate) type Visit<'v> = dyn FnMut(RawMessage<'_>) -> Result<(), String> + 'v;

/// A bag file, opened (its topics read), shared by reader threads.
pub(crate) trait BagFile: Send + Sync + std::fmt::Debug {
    /// `MCAP` or `SQLite`.
    fn storage(&self) -> &'static str;

    fn topics(&self) -> &[Topic];

    /// Calls `visit` for every message of the topics `wanted` (indices), in
    /// the file's order (log-time order within a topic where the writer
    /// kept it; the reader sorts by the chosen time afterwards). Errors
    /// name what is wrong in the file (the caller adds its path).
    fn read(&self, wanted: &[usize], visit: &mut Visit<'_>) -> Result<(), String>;

    /// Parts of the file that read on their own, for reads side by side
    /// (an indexed MCAP's chunks, in file order); 1 where the file reads
    /// as a whole.
    fn parts(&self) -> usize {
        1
    }

    /// [`BagFile::read`] of part `part` of [`BagFile::parts`] only (the
    /// whole file where it has one part). A part past the last holds nothing.
    fn read_part(&self, part: usize, wanted: &[usize], visit: &mut Visit<'_>) -> Result<(), String> {
        match part {
            0 => self.read(wanted, visit),
            _ => Ok(()),
        }
    }

    /// The first and last log time (ns) of all its messages, as the
    /// storage records them (SQLite: each topic's; MCAP: the summary's
    /// statistics); `None` without messages. Reads no message.
    fn span_ns(&self) -> Option<(u64, u64)> {
        self.topics()
            .iter()
            .filter_map(|t| t.span_ns)
            .fold(None, |acc, (a, b)| Some(acc.map_or((a, b), |(x, y): (u64, u64)| (x.min(a), y.max(b)))))
    }

    /// Warnings from opening it (a missing summary read by a scan).
    fn warnings(&self) -> &[String] {
        &[]
    }
}

/// Marks topics whose messages are not CDR as not decodable.
pub(crate) fn require_cdr(topics: &mut [Topic]) {
    for topic in topics {
        if topic.encoding != "cdr" && topic.schema.is_ok() {
            topic.schema = Err(format!("messages encoded as `{}`; robocache decodes ROS 2's cdr", topic.encoding));
        }
    }
}

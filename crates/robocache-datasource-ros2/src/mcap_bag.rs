//! MCAP bags (rosbag2's default storage since Iron), read through the
//! `mcap` crate and robocache-storage: a local file, or an object on S3,
//! GCS, Azure or the Hub read by range.
//!
//! - **Indexed** (the file has its summary): the summary gives the
//!   channels, schemas, message counts and chunk indexes; a read fetches
//!   only the chunks holding the wanted channels, each by one ranged read,
//!   decompresses it (zstd, lz4) and checks its CRC.
//! - **Scanned** (no summary: a recording cut short by a crash): the file
//!   is read whole and its records walked from the start; messages up to
//!   the first damaged record are kept, with a warning.
//!
//! Bounds: a chunk is read only if its sizes fit the file, and its
//! uncompressed size is at most [`MAX_CHUNK_BYTES`]. Chunks are decompressed
//! here, not by the `mcap` crate's chunk reader, which reserves whatever a
//! damaged record length inside a chunk claims (and aborts the process,
//! found by `tests/fuzz.rs`): the output grows with what the stream holds,
//! up to the declared size, and every record length is checked against
//! the bytes left.

use std::collections::{BTreeMap, HashMap};
use std::io::SeekFrom;
use std::path::Path;
use std::sync::Arc;

use mcap::records::Record;
use mcap::sans_io::summary_reader::{SummaryReadEvent, SummaryReader, SummaryReaderOptions};
use robocache_storage::{Blob, Storage};

use super::bag_file::{BagFile, RawMessage, Topic, Visit};
use super::msg_schema::MessageSchema;
use crate::Result;

/// The largest chunk (uncompressed) a read decompresses.
pub(crate) const MAX_CHUNK_BYTES: u64 = 1 << 31;
/// The largest record of the summary section.
const MAX_SUMMARY_RECORD: usize = 1 << 28;

#[derive(Debug)]
pub(crate) struct McapBag {
    blob: Blob,
    topics: Vec<Topic>,
    /// Channel id → topic index.
    channel_topic: HashMap<u16, usize>,
    /// The chunk indexes, by file offset; `None`: read by a scan.
    chunks: Option<Vec<mcap::records::ChunkIndex>>,
    /// The first and last log time of its messages (the statistics', or the scan's).
    span: Option<(u64, u64)>,
    warnings: Vec<String>,
}

fn schema_of(name: &str, encoding: &str, data: &[u8]) -> std::result::Result<Arc<MessageSchema>, String> {
    match encoding {
        "ros2msg" => {
            let text = std::str::from_utf8(data).map_err(|_| format!("the `{name}` definition is not UTF-8"))?;
            MessageSchema::parse(name, text).map(Arc::new).map_err(|e| format!("the `{name}` definition: {e}"))
        }
        "ros2idl" => {
            let text = std::str::from_utf8(data).map_err(|_| format!("the `{name}` definition is not UTF-8"))?;
            let msg = super::idl_schema::to_msg_text(name, text)
                .map_err(|e| format!("the `{name}` definition (ros2idl): {e}"))?;
            MessageSchema::parse(name, &msg).map(Arc::new).map_err(|e| format!("the `{name}` definition: {e}"))
        }
        "" => Err(format!("the bag carries no definition of `{name}`")),
        other => Err(format!("`{name}` is defined as {other}, and robocache reads ros2msg and ros2idl definitions")),
    }
}

/// A topic of `channel`, its definition from `schema` (name, encoding,
/// text) where the channel has one; messages counted later.
fn new_topic(topic: &str, message_encoding: &str, schema: Option<(&str, &str, &[u8])>) -> Topic {
    let (type_name, schema) = match schema {
        Some((name, encoding, data)) => (name.to_owned(), schema_of(name, encoding, data)),
        None => (String::new(), Err("the channel has no schema".to_owned())),
    };
    Topic {
        name: topic.to_owned(),
        type_name,
        encoding: message_encoding.to_owned(),
        schema,
        messages: 0,
        span_ns: None,
    }
}

/// Reads the summary by ranged reads: `None` when the file has none.
fn read_summary(blob: &Blob) -> std::result::Result<Option<mcap::Summary>, String> {
    let len = blob.len();
    let options = SummaryReaderOptions::default().with_file_size(len).with_record_length_limit(MAX_SUMMARY_RECORD);
    let mut reader = SummaryReader::new_with_options(options);
    let mut at: u64 = 0;
    while let Some(event) = reader.next_event() {
        match event.map_err(|e| format!("its summary: {e}"))? {
            SummaryReadEvent::ReadRequest(need) => {
                let n = (need as u64).min(len.saturating_sub(at)) as usize;
                let buffer = reader.insert(need);
                blob.read_exact_at(&mut buffer[..n], at).map_err(|e| e.to_string())?;
                at += n as u64;
                reader.notify_read(n);
            }
            SummaryReadEvent::SeekRequest(to) => {
                at = match to {
                    SeekFrom::Start(x) => Some(x),
                    SeekFrom::End(x) => len.checked_add_signed(x),
                    SeekFrom::Current(x) => at.checked_add_signed(x),
                }
                .filter(|&x| x <= len)
                .ok_or_else(|| format!("its summary points outside the file ({to:?} of {len} bytes)"))?;
                reader.notify_seeked(at);
            }
        }
    }
    Ok(reader.finish())
}

impl McapBag {
    pub(crate) fn open(path: &Path, storage: &Storage) -> Result<McapBag> {
        let blob = storage.open(path)?;
        let bad = |problem: String| robocache_datasource::Error::Bag {
            file: path.to_path_buf(),
            topic: None,
            message: None,
            problem,
        };
        let why_scanned = |reason: &str| format!("{}: {reason}: read by a scan of the whole file", path.display());
        let summary = match read_summary(&blob) {
            Ok(Some(summary)) if !summary.chunk_indexes.is_empty() && summary.stats.is_some() => summary,
            // Unchunked messages (MCAP allows them): a scan is how they read, no warning.
            Ok(Some(summary)) if summary.chunk_indexes.is_empty() => {
                return McapBag::scanned(blob, path, None).map_err(bad);
            }
            Ok(Some(_)) => {
                let warning = why_scanned("its MCAP summary has chunk indexes but no statistics");
                return McapBag::scanned(blob, path, Some(warning)).map_err(bad);
            }
            Ok(None) => {
                let warning = why_scanned("no MCAP summary (a recording cut short?)");
                return McapBag::scanned(blob, path, Some(warning)).map_err(bad);
            }
            Err(problem) if problem.contains("summary") => {
                let warning =
                    why_scanned(&format!("no MCAP summary could be read, a recording cut short? ({problem})"));
                return McapBag::scanned(blob, path, Some(warning)).map_err(bad);
            }
            Err(problem) => return Err(bad(problem)),
        };
        let stats = summary.stats.as_ref();
        let counts = stats.map(|s| s.channel_message_counts.clone()).unwrap_or_default();
        let span = stats.filter(|s| s.message_count > 0).map(|s| (s.message_start_time, s.message_end_time));
        let mut warnings = Vec::new();
        // The summary may leave out the channel records (MCAP makes them
        // optional there): where a channel with messages is not in it, the
        // channels and schemas are read from the data section, once.
        let referenced = counts
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(id, _)| *id)
            .chain(summary.chunk_indexes.iter().flat_map(|c| c.message_index_offsets.keys().copied()));
        let missing = referenced.filter(|id| !summary.channels.contains_key(id)).count();
        let channels: Vec<ChannelRecord> = if missing > 0 {
            let warning = format!(
                "{}: the MCAP summary lists no channel record for channels with messages: channels read from the data section",
                path.display()
            );
            tracing::warn!("{warning}");
            warnings.push(warning);
            data_section_channels(&blob).map_err(bad)?
        } else {
            summary
                .channels
                .iter()
                .map(|(id, c)| {
                    let schema = c.schema.as_ref().map(|s| (s.name.clone(), s.encoding.clone(), s.data.to_vec()));
                    (*id, c.topic.clone(), c.message_encoding.clone(), schema)
                })
                .collect()
        };
        let mut by_name: BTreeMap<String, (Topic, Vec<u16>)> = BTreeMap::new();
        for (id, topic, encoding, schema) in &channels {
            let entry = by_name.entry(topic.clone()).or_insert_with(|| {
                let schema =
                    schema.as_ref().map(|(name, encoding, data)| (name.as_str(), encoding.as_str(), &data[..]));
                (new_topic(topic, encoding, schema), Vec::new())
            });
            entry.0.messages += counts.get(id).copied().unwrap_or(0);
            entry.1.push(*id);
        }
        let mut topics = Vec::new();
        let mut channel_topic = HashMap::new();
        for (_, (topic, ids)) in by_name {
            for id in ids {
                channel_topic.insert(id, topics.len());
            }
            topics.push(topic);
        }
        let len = blob.len();
        let mut chunks = summary.chunk_indexes;
        for chunk in &chunks {
            if chunk.chunk_start_offset.checked_add(chunk.chunk_length).is_none_or(|end| end > len) {
                return Err(bad(format!(
                    "a chunk at byte {} of {} bytes ends past the file's {len} bytes",
                    chunk.chunk_start_offset, chunk.chunk_length
                )));
            }
        }
        chunks.sort_by_key(|c| c.chunk_start_offset);
        super::bag_file::require_cdr(&mut topics);
        Ok(McapBag { blob, topics, channel_topic, chunks: Some(chunks), span, warnings })
    }

    /// Opens a file without a usable summary by walking its records
    /// (`warning`: why, where a writer should have left one).
    fn scanned(blob: Blob, path: &Path, warning: Option<String>) -> std::result::Result<McapBag, String> {
        if let Some(warning) = &warning {
            tracing::warn!("{warning}");
        }
        let mut bag = McapBag {
            blob,
            topics: Vec::new(),
            channel_topic: HashMap::new(),
            chunks: None,
            span: None,
            warnings: warning.into_iter().collect(),
        };
        let mut span: Option<(u64, u64)> = None;
        let mut schemas: HashMap<u16, (String, String, Vec<u8>)> = HashMap::new();
        let mut counts: HashMap<usize, u64> = HashMap::new();
        let bytes = bag.blob.read_at(0, bag.blob.len() as usize).map_err(|e| e.to_string())?;
        let stopped = walk(&bytes, &mut |record| {
            match record {
                Record::Schema { header, data } => {
                    schemas.insert(header.id, (header.name, header.encoding, data.into_owned()));
                }
                Record::Channel(channel) if !bag.channel_topic.contains_key(&channel.id) => {
                    let index = match bag.topics.iter().position(|t| t.name == channel.topic) {
                        Some(index) => index,
                        None => {
                            let schema = schemas
                                .get(&channel.schema_id)
                                .map(|(name, encoding, data)| (name.as_str(), encoding.as_str(), &data[..]));
                            bag.topics.push(new_topic(&channel.topic, &channel.message_encoding, schema));
                            bag.topics.len() - 1
                        }
                    };
                    bag.channel_topic.insert(channel.id, index);
                }
                Record::Message { header, .. } => {
                    if let Some(&topic) = bag.channel_topic.get(&header.channel_id) {
                        *counts.entry(topic).or_default() += 1;
                        let t = header.log_time;
                        span = Some(span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
                    }
                }
                _ => {}
            }
            Ok(())
        })?;
        bag.span = span;
        if let Some(problem) = stopped {
            let warning = format!("{}: {problem}: the messages before it are read", path.display());
            tracing::warn!("{warning}");
            bag.warnings.push(warning);
        }
        for (topic, count) in counts {
            bag.topics[topic].messages = count;
        }
        super::bag_file::require_cdr(&mut bag.topics);
        Ok(bag)
    }
}

/// A channel record: id, topic, message encoding and its schema (name,
/// encoding, data) where it has one.
type ChannelRecord = (u16, String, String, Option<(String, String, Vec<u8>)>);

/// Every channel record of the data section (chunks opened) with its schema.
fn data_section_channels(blob: &Blob) -> std::result::Result<Vec<ChannelRecord>, String> {
    let bytes = blob.read_at(0, blob.len() as usize).map_err(|e| e.to_string())?;
    let mut schemas: HashMap<u16, (String, String, Vec<u8>)> = HashMap::new();
    let mut channels: BTreeMap<u16, (String, String, u16)> = BTreeMap::new();
    let stopped = walk(&bytes, &mut |record| {
        match record {
            Record::Schema { header, data } => {
                schemas.insert(header.id, (header.name, header.encoding, data.into_owned()));
            }
            Record::Channel(channel) => {
                channels.entry(channel.id).or_insert((channel.topic, channel.message_encoding, channel.schema_id));
            }
            _ => {}
        }
        Ok(())
    })?;
    if let Some(problem) = stopped {
        return Err(format!("reading its channel records from the data section: {problem}"));
    }
    Ok(channels
        .into_iter()
        .map(|(id, (topic, encoding, schema_id))| (id, topic, encoding, schemas.get(&schema_id).cloned()))
        .collect())
}

/// Decompresses a chunk (none, zstd or lz4) into at most its declared
/// size, checks its CRC (where written), and visits its records, each
/// length checked against the bytes left.
/// Why [`chunk_records`] stopped.
enum ChunkFailure {
    /// The chunk is damaged (what is wrong).
    Damaged(String),
    /// The visitor stopped (its error, passed on as it is).
    Stopped(String),
}

fn chunk_records(
    header: &mcap::records::ChunkHeader,
    compressed: &[u8],
    inflated: &mut Vec<u8>,
    visit: &mut dyn FnMut(Record<'_>) -> std::result::Result<(), String>,
) -> std::result::Result<(), ChunkFailure> {
    use std::io::Read;
    use ChunkFailure::Damaged;
    let declared = header.uncompressed_size;
    if declared > MAX_CHUNK_BYTES {
        return Err(Damaged(format!("{declared} bytes uncompressed (at most {MAX_CHUNK_BYTES})")));
    }
    // Output grows with what the stream holds, never to what the header
    // claims; `inflated` is the caller's, reused chunk after chunk.
    inflated.clear();
    let read = |reader: &mut dyn Read, out: &mut Vec<u8>| reader.take(declared + 1).read_to_end(out).map(|_| ());
    let data: &[u8] = match header.compression.as_str() {
        "" => compressed,
        "zstd" => {
            let mut decoder =
                zstd::stream::read::Decoder::new(compressed).map_err(|e| Damaged(format!("zstd: {e}")))?;
            read(&mut decoder, inflated).map_err(|e| Damaged(format!("zstd: {e}")))?;
            inflated
        }
        "lz4" => {
            let mut decoder = lz4::Decoder::new(compressed).map_err(|e| Damaged(format!("lz4: {e}")))?;
            read(&mut decoder, inflated).map_err(|e| Damaged(format!("lz4: {e}")))?;
            inflated
        }
        other => return Err(Damaged(format!("compression `{other}` (robocache reads none, zstd and lz4)"))),
    };
    if data.len() as u64 != declared {
        return Err(Damaged(format!("{} bytes uncompressed, its header says {declared}", data.len())));
    }
    if header.uncompressed_crc != 0 && crc32fast::hash(data) != header.uncompressed_crc {
        return Err(Damaged(format!(
            "CRC {:08x} does not match the header's {:08x}",
            crc32fast::hash(data),
            header.uncompressed_crc
        )));
    }
    let mut at = 0usize;
    while at < data.len() {
        let (Some(&opcode), Some(len)) = (data.get(at), data.get(at + 1..at + 9)) else {
            return Err(Damaged(format!("a record cut short at byte {at} of the chunk")));
        };
        let len = u64::from_le_bytes(len.try_into().unwrap_or_default());
        let body = usize::try_from(len)
            .ok()
            .and_then(|len| data.get(at + 9..(at + 9).checked_add(len)?))
            .ok_or_else(|| Damaged(format!("a record at byte {at} of the chunk claims {len} bytes")))?;
        let record =
            mcap::read::parse_record(opcode, body).map_err(|e| Damaged(format!("the record at byte {at}: {e}")))?;
        visit(record).map_err(ChunkFailure::Stopped)?;
        at += 9 + body.len();
    }
    Ok(())
}

/// Walks every record of a whole file (chunks opened), stopping at the
/// first damaged one: `Some(what)` when it stopped early.
fn walk(
    bytes: &[u8],
    visit: &mut dyn FnMut(Record<'_>) -> std::result::Result<(), String>,
) -> std::result::Result<Option<String>, String> {
    let reader = match mcap::read::LinearReader::new_with_options(bytes, mcap::read::Options::IgnoreEndMagic.into()) {
        Ok(reader) => reader,
        Err(e) => return Err(format!("not an MCAP file: {e}")),
    };
    for record in reader {
        let record = match record {
            Ok(record) => record,
            Err(e) => return Ok(Some(format!("a damaged record ({e})"))),
        };
        if let Record::Chunk { header, data } = record {
            match chunk_records(&header, &data, &mut Vec::new(), visit) {
                Ok(()) => {}
                Err(ChunkFailure::Damaged(problem)) => return Ok(Some(format!("a damaged chunk ({problem})"))),
                Err(ChunkFailure::Stopped(error)) => return Err(error),
            }
        } else {
            visit(record)?;
        }
    }
    Ok(None)
}

impl BagFile for McapBag {
    fn storage(&self) -> &'static str {
        "MCAP"
    }

    fn topics(&self) -> &[Topic] {
        &self.topics
    }

    fn warnings(&self) -> &[String] {
        &self.warnings
    }

    fn span_ns(&self) -> Option<(u64, u64)> {
        self.span
    }

    fn read(&self, wanted: &[usize], visit: &mut Visit<'_>) -> std::result::Result<(), String> {
        let channels = self.channels_of(wanted);
        let mut on_message = |record: Record<'_>| self.visit_message(record, wanted, visit);
        let Some(chunks) = &self.chunks else {
            let bytes = self.blob.read_at(0, self.blob.len() as usize).map_err(|e| e.to_string())?;
            walk(&bytes, &mut on_message)?;
            return Ok(());
        };
        // One buffer for the chunk records and one for their inflated bytes,
        // reused: a fresh allocation per chunk cost as much in zeroing and
        // page faults as the decoding (`benches/ros2_decode.py`).
        let mut buffers = ChunkBuffers::default();
        for chunk in chunks {
            self.read_chunk(chunk, &channels, &mut buffers, &mut on_message)?;
        }
        Ok(())
    }

    fn parts(&self) -> usize {
        self.chunks.as_ref().map_or(1, |chunks| chunks.len().max(1))
    }

    fn read_part(&self, part: usize, wanted: &[usize], visit: &mut Visit<'_>) -> std::result::Result<(), String> {
        let Some(chunks) = &self.chunks else {
            return if part == 0 { self.read(wanted, visit) } else { Ok(()) };
        };
        let Some(chunk) = chunks.get(part) else { return Ok(()) };
        let channels = self.channels_of(wanted);
        let mut on_message = |record: Record<'_>| self.visit_message(record, wanted, visit);
        // Each thread's buffers, reused across the parts it reads.
        thread_local! {
            static BUFFERS: std::cell::RefCell<ChunkBuffers> = std::cell::RefCell::default();
        }
        BUFFERS.with(|buffers| match buffers.try_borrow_mut() {
            Ok(mut buffers) => self.read_chunk(chunk, &channels, &mut buffers, &mut on_message),
            // A part read from inside another's visit: buffers of its own.
            Err(_) => self.read_chunk(chunk, &channels, &mut ChunkBuffers::default(), &mut on_message),
        })
    }
}

/// A chunk record's bytes and its inflated records, kept between chunks.
#[derive(Debug, Default)]
struct ChunkBuffers {
    record: Vec<u8>,
    inflated: Vec<u8>,
}

impl McapBag {
    /// The channels of the topics `wanted` (indices).
    fn channels_of(&self, wanted: &[usize]) -> Vec<u16> {
        self.channel_topic.iter().filter(|(_, t)| wanted.contains(t)).map(|(&id, _)| id).collect()
    }

    /// Passes `record` to `visit` where it is a message of a topic `wanted`.
    fn visit_message(
        &self,
        record: Record<'_>,
        wanted: &[usize],
        visit: &mut Visit<'_>,
    ) -> std::result::Result<(), String> {
        if let Record::Message { header, data } = record {
            if let Some(&topic) = self.channel_topic.get(&header.channel_id).filter(|t| wanted.contains(t)) {
                visit(RawMessage { topic, log_ns: header.log_time, publish_ns: header.publish_time, data: &data })?;
            }
        }
        Ok(())
    }

    /// Reads one chunk (by its index) and visits its records, where it
    /// holds any of `channels` (every chunk when its index lists none).
    fn read_chunk(
        &self,
        chunk: &mcap::records::ChunkIndex,
        channels: &[u16],
        buffers: &mut ChunkBuffers,
        on_message: &mut dyn FnMut(Record<'_>) -> std::result::Result<(), String>,
    ) -> std::result::Result<(), String> {
        let holds = chunk.message_index_offsets.is_empty()
            || channels.iter().any(|id| chunk.message_index_offsets.contains_key(id));
        if !holds {
            return Ok(());
        }
        let at = chunk.chunk_start_offset;
        if chunk.uncompressed_size > MAX_CHUNK_BYTES {
            return Err(format!("the chunk at byte {at} is {} bytes uncompressed", chunk.uncompressed_size));
        }
        let length = usize::try_from(chunk.chunk_length)
            .ok()
            .filter(|&n| at.checked_add(n as u64).is_some_and(|end| end <= self.blob.len()))
            .ok_or_else(|| {
                format!("the chunk at byte {at} claims {} bytes, past the file's end", chunk.chunk_length)
            })?;
        let ChunkBuffers { record, inflated } = buffers;
        if record.len() < length {
            record.resize(length, 0);
        }
        let record = &mut record[..length];
        self.blob.read_exact_at(record, at).map_err(|e| e.to_string())?;
        let (Some(&opcode), Some(len)) = (record.first(), record.get(1..9)) else {
            return Err(format!("the chunk at byte {at} is cut short"));
        };
        let len = u64::from_le_bytes(len.try_into().unwrap_or_default());
        let body = usize::try_from(len)
            .ok()
            .and_then(|len| record.get(9..9usize.checked_add(len)?))
            .ok_or_else(|| format!("the chunk at byte {at} claims {len} bytes"))?;
        let Ok(Record::Chunk { header, data }) = mcap::read::parse_record(opcode, body) else {
            return Err(format!("the chunk index points at byte {at}, which holds no chunk"));
        };
        match chunk_records(&header, &data, inflated, on_message) {
            Ok(()) => Ok(()),
            Err(ChunkFailure::Damaged(problem)) => Err(format!("the chunk at byte {at}: {problem}")),
            Err(ChunkFailure::Stopped(error)) => Err(error),
        }
    }
}

#[cfg(test)]
#[path = "mcap_conformance_tests.rs"]
mod conformance_tests;

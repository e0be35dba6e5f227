//! RLDS datasets as TFDS publishes them (Open X-Embodiment): a builder
//! directory of TFRecord shards, one `tf.train.Example` per episode, read
//! without TensorFlow (docs/datasets.md).
//!
//! - Opening reads `dataset_info.json` and `features.json`, then indexes
//!   every shard of the split: record headers (checking the length CRCs) and,
//!   per record, where each feature lies, walking the Example's field
//!   headers with positioned reads and skipping over the values. Per
//!   episode it reads only the step count (from `steps/is_first` or the
//!   smallest step feature), the language instruction and
//!   `episode_metadata/*`.
//! - Reading rows of a stream reads only that feature of that record: the
//!   rows themselves for packed floats, the entries of those steps for
//!   images and encoded tensors (decoded in parallel), the feature's list
//!   for integers. A record's payload CRC is checked the first time any of
//!   its rows are read.
//! - Step `i` is at `i / rate` seconds: RLDS has no timestamps (the rate
//!   comes from [`rates`] or [`RldsOptions::rate_hz`]).

pub(crate) mod builder;
pub(crate) mod decode;
pub(crate) mod example;
pub(crate) mod features;
mod format;
pub(crate) mod index_file;
pub mod rates;
pub(crate) mod tfrecord;
mod writer;

pub use format::RldsKind;
pub use writer::{write_rlds, RldsSpec};

/// RLDS builder directories as TFDS publishes them.
pub const RLDS: FormatName = FormatName::new("rlds");

/// How an RLDS builder directory is opened.
#[derive(Clone, Debug, Default)]
pub struct RldsOptions {
    /// The TFDS split (`train` by default).
    pub split: Option<String>,
    /// The step-clock rate in Hz, instead of the Open X-Embodiment rate
    /// table's (required for datasets not in it).
    pub rate_hz: Option<f64>,
    /// Do not check each record's payload CRC32C on its first read (the
    /// length CRCs are always checked while indexing).
    pub skip_checksums: bool,
}

use robocache_storage::{Blob, Storage};
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use robocache_cpu::DType;
use serde_json::{json, Map, Value};

use self::builder::{BuilderInfo, Split, FEATURES};
use self::example::{Kind, Span};
use self::features::{Features, Leaf, LeafKind, TensorEncoding};
use self::index_file::{EpisodeText, IndexFile};
use self::tfrecord::RecordSpan;
use robocache_datasource::direct_read::read_exact_at;
use robocache_datasource::model::{
    ChannelKind, DatasetInfo, EpisodeInfo, FormatName, StreamInfo, StreamKind, Timeline,
};
use robocache_datasource::stream_shape::StreamShape;
use robocache_datasource::{Error, Result};

/// One shard file, open for positioned reads.
#[derive(Debug)]
struct Shard {
    path: PathBuf,
    file: Blob,
    /// Records in the file.
    records: usize,
}

/// Where an episode's record and features lie.
#[derive(Debug)]
struct EpisodeRecord {
    /// Position in the split, empty episodes included: the `<i>` of its name.
    index: usize,
    shard: usize,
    record: usize,
    span: RecordSpan,
    /// The span of each leaf's Feature message, by leaf index.
    features: Vec<Span>,
    steps: usize,
}

/// How the values of one feature of one episode lie, found on first read.
#[derive(Debug)]
enum Values {
    /// A packed `float_list`: the values, 4 bytes each, little-endian.
    PackedFloats(Span),
    /// A `bytes_list`: one entry per value (image, encoded tensor).
    Entries(Vec<Span>),
    /// Anything else (`int64_list`, unpacked floats): decoded whole each read.
    Decoded,
}

/// An open RLDS builder directory.
#[derive(Debug)]
pub(crate) struct RldsSource {
    dir: PathBuf,
    /// The split read.
    split: String,
    leaves: Vec<Leaf>,
    /// Leaf index by stream source (the Example key).
    leaf_of_source: HashMap<String, usize>,
    shards: Vec<Shard>,
    episodes: Vec<EpisodeRecord>,
    verify_checksums: bool,
    /// Episodes of the split without steps, left out.
    empty_episodes: usize,
    verified: Vec<AtomicBool>,
    values: Mutex<HashMap<(usize, usize), Arc<Values>>>,
}

impl RldsSource {
    /// Opens the builder at `path` (a version folder or its parent).
    pub fn open(path: &Path, options: &RldsOptions, storage: &Storage) -> Result<(RldsSource, DatasetInfo)> {
        let builder = BuilderInfo::read(path, storage)?;
        let features_path = builder.dir.join(FEATURES);
        if !storage.is_file(&features_path)? {
            return Err(Error::Missing { file: builder.dir.clone(), what: "file", path: FEATURES.into() });
        }
        let features = Features::read(&features_path, storage)?;
        let split = builder.split(options.split.as_deref())?;
        let rate_hz = match options.rate_hz {
            Some(hz) => hz,
            None => rates::oxe_rate_hz(&builder.name).ok_or_else(|| {
                Error::Invalid(format!(
                    "{}: RLDS stores no timestamps and `{}` is not in robocache's table of Open X-Embodiment control frequencies: give the rate in Hz (Rust `OpenOptions {{ rate_hz: Some(hz), .. }}`, CLI `--rate-hz HZ`, Python `robocache.open(path, rate_hz=HZ)`)",
                    builder.dir.display(),
                    builder.name
                ))
            })?,
        };
        let leaves = features.leaves;
        let count_leaf = step_count_leaf(&leaves).ok_or_else(|| Error::Layout {
            file: features_path.clone(),
            path: "steps".into(),
            problem: "has no numeric or image feature to count the steps of an episode by".into(),
        })?;

        // Every shard opened (one HEAD each when remote), then the sidecar
        // index when one matches them, else every shard indexed in parallel:
        // headers, then each record's feature spans.
        let files: Vec<Blob> =
            split.shards.par_iter().map(|(shard_path, _)| Ok(storage.open(shard_path)?)).collect::<Result<_>>()?;
        let sidecar = IndexFile::load(storage, &builder.dir, split, &leaves, &files);
        let from_index = sidecar.is_some();
        let (shard_records, episodes, texts, empty) = match sidecar {
            Some(indexed) => (indexed.shard_records, indexed.episodes, Some(indexed.texts), indexed.empty_episodes),
            None => {
                let (records, episodes, empty) = index_shards(split, &files, &leaves, count_leaf)?;
                (records, episodes, None, empty)
            }
        };
        let shards = split
            .shards
            .iter()
            .zip(files)
            .zip(shard_records)
            .map(|(((path, _), file), records)| Shard { path: path.clone(), file, records })
            .collect();
        let leaf_of_source = leaves.iter().enumerate().map(|(i, l)| (l.key.clone(), i)).collect();
        let source = RldsSource {
            dir: builder.dir.clone(),
            split: split.name.clone(),
            verified: episodes.iter().map(|_| AtomicBool::new(false)).collect(),
            leaves,
            leaf_of_source,
            shards,
            episodes,
            verify_checksums: !options.skip_checksums,
            empty_episodes: empty,
            values: Mutex::new(HashMap::new()),
        };
        // Each episode's instruction and `episode_metadata`: from the index,
        // else read from the records; kept only in the episode model.
        let texts = match texts {
            Some(texts) => texts,
            None => (0..source.episodes.len()).map(|e| source.episode_text(e)).collect::<Result<_>>()?,
        };
        tracing::debug!(dir = %builder.dir.display(), from_index, episodes = source.episodes.len(), "RLDS split indexed");
        let info = source.dataset_info(&builder, &split.name, rate_hz, &features.skipped, &texts)?;
        Ok((source, info))
    }

    fn dataset_info(
        &self,
        builder: &BuilderInfo,
        split: &str,
        rate_hz: f64,
        skipped: &[(String, String)],
        texts: &[EpisodeText],
    ) -> Result<DatasetInfo> {
        let mut episodes = Vec::with_capacity(self.episodes.len());
        for (index, episode) in self.episodes.iter().enumerate() {
            let name = format!("episode_{}", episode.index);
            let mut streams = Vec::new();
            let EpisodeText { instruction, episode_metadata } = &texts[index];
            for leaf in &self.leaves {
                match (&leaf.kind, leaf.per_step) {
                    (LeafKind::Text, true) => {}
                    (LeafKind::Tensor { dtype, shape, .. } | LeafKind::Image { dtype, shape, .. }, true) => {
                        // Images are images; integer and bool tensors (flags,
                        // `terminate_episode`, ids) are discrete; the rest by name.
                        let kind = match leaf.kind {
                            LeafKind::Image { .. } => StreamKind::All(ChannelKind::Image),
                            _ if !dtype.is_float() => StreamKind::All(ChannelKind::Discrete),
                            _ => StreamShape {
                                key: leaf.stream_name(),
                                dtype: *dtype,
                                step_shape: &[shape.iter().product()],
                            }
                            .common_kind(),
                        };
                        streams.push(StreamInfo {
                            name: leaf.stream_name().to_owned(),
                            dtype: *dtype,
                            step_shape: shape.clone(),
                            len: episode.steps,
                            kind,
                            timeline: Timeline::Uniform { start: 0.0, hz: rate_hz },
                            source: leaf.key.clone(),
                        });
                    }
                    (_, false) => {}
                }
            }
            let shard = &self.shards[episode.shard];
            let mut metadata = Map::new();
            metadata.insert("split".into(), json!(split));
            metadata.insert(
                "shard".into(),
                json!(shard.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()),
            );
            metadata.insert("record".into(), json!(episode.record));
            if !episode_metadata.is_empty() {
                metadata.insert("episode_metadata".into(), Value::Object(episode_metadata.clone()));
            }
            episodes.push(EpisodeInfo {
                name,
                len: episode.steps,
                duration_s: episode.steps.saturating_sub(1) as f64 / rate_hz,
                streams,
                instruction: instruction.clone(),
                metadata,
            });
        }
        let mut metadata = Map::new();
        metadata.insert("dataset_name".into(), json!(builder.name));
        metadata.insert("version".into(), json!(builder.version));
        metadata.insert("split".into(), json!(split));
        metadata.insert("control_frequency_hz".into(), json!(rate_hz));
        if self.empty_episodes > 0 {
            metadata.insert("empty_episodes_left_out".into(), json!(self.empty_episodes));
        }
        if !skipped.is_empty() {
            let skipped: Map<String, Value> = skipped.iter().map(|(k, why)| (k.clone(), json!(why))).collect();
            metadata.insert("skipped_features".into(), Value::Object(skipped));
        }
        for key in ["description", "citation", "homepage"] {
            if let Some(value) = builder.json.get(key) {
                metadata.insert(key.into(), value.clone());
            }
        }
        Ok(DatasetInfo {
            path: builder.dir.clone(),
            format: RLDS,
            rate_hz,
            episodes,
            splits: builder.splits.iter().map(|s| s.name.clone()).collect(),
            metadata,
        })
    }

    /// The instruction (the first non-empty text of the first per-step text
    /// feature named `*instruction*`) and the `episode_metadata/*` values
    /// of an episode, read from its record.
    fn episode_text(&self, episode: usize) -> Result<EpisodeText> {
        let mut text = EpisodeText::default();
        for (leaf_index, leaf) in self.leaves.iter().enumerate() {
            match (&leaf.kind, leaf.per_step) {
                (LeafKind::Text, true) => {
                    let last = leaf.key.rsplit('/').next().unwrap_or_default();
                    if text.instruction.is_none() && last.contains("instruction") {
                        text.instruction = self.text_values(episode, leaf_index)?.into_iter().find(|s| !s.is_empty());
                    }
                }
                (_, true) => {}
                (_, false) => {
                    let key = leaf.key.strip_prefix("episode_metadata/").unwrap_or(&leaf.key).to_owned();
                    text.episode_metadata.insert(key, self.metadata_value(episode, leaf_index)?);
                }
            }
        }
        Ok(text)
    }

    /// The sidecar index of this split (see [`index_file`]), its texts
    /// from the episode model `info` this source opened with, and where it
    /// goes by default: beside the shards.
    pub fn index_file(&self, info: &DatasetInfo) -> (PathBuf, Vec<u8>) {
        let shards: Vec<(String, u64, usize)> = self
            .shards
            .iter()
            .map(|s| {
                let name = s.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                (name, s.file.len(), s.records)
            })
            .collect();
        let texts = info
            .episodes
            .iter()
            .map(|e| EpisodeText {
                instruction: e.instruction.clone(),
                episode_metadata: e
                    .metadata
                    .get("episode_metadata")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect();
        let index = IndexFile::new(&self.split, &self.leaves, &shards, self.empty_episodes, &self.episodes, texts);
        (index_file::path(&self.dir, &self.split), index.to_json())
    }

    /// The strings of a text leaf of an episode.
    fn text_values(&self, episode: usize, leaf: usize) -> Result<Vec<String>> {
        match self.feature(episode, leaf)? {
            Kind::BytesList(list) => {
                Ok(list.value.into_iter().map(|b| String::from_utf8_lossy(&b).into_owned()).collect())
            }
            _ => Err(self
                .record_error(episode, format!("feature `{}` is text but holds no bytes_list", self.leaves[leaf].key))),
        }
    }

    /// An `episode_metadata/*` value as JSON.
    fn metadata_value(&self, episode: usize, leaf: usize) -> Result<Value> {
        let scalar_or_list =
            |mut values: Vec<Value>| if values.len() == 1 { values.remove(0) } else { Value::Array(values) };
        Ok(match (&self.leaves[leaf].kind, self.feature(episode, leaf)?) {
            (LeafKind::Text, Kind::BytesList(l)) => {
                scalar_or_list(l.value.iter().map(|b| json!(String::from_utf8_lossy(b))).collect())
            }
            (LeafKind::Tensor { dtype: DType::Bool, .. }, Kind::Int64List(l)) => {
                scalar_or_list(l.value.iter().map(|v| json!(*v != 0)).collect())
            }
            (_, Kind::Int64List(l)) => scalar_or_list(l.value.iter().map(|v| json!(v)).collect()),
            (_, Kind::FloatList(l)) => scalar_or_list(l.value.iter().map(|v| json!(v)).collect()),
            (_, Kind::BytesList(l)) => json!(format!("<{} encoded values>", l.value.len())),
        })
    }

    /// The decoded Feature of `leaf` in `episode`.
    fn feature(&self, episode: usize, leaf: usize) -> Result<Kind> {
        let record = &self.episodes[episode];
        let shard = &self.shards[record.shard];
        let feature = example::read_feature(&shard.path, &shard.file, record.features[leaf])?
            .map_err(|problem| self.record_error(episode, format!("feature `{}`: {problem}", self.leaves[leaf].key)))?;
        feature.kind.ok_or_else(|| {
            self.record_error(episode, format!("feature `{}` holds no value list", self.leaves[leaf].key))
        })
    }

    fn record_error(&self, episode: usize, problem: String) -> Error {
        let record = &self.episodes[episode];
        Error::Record { file: self.shards[record.shard].path.clone(), record: record.record, problem }
    }

    /// Rows `rows` of `stream` of `episode` into `out` (exactly their bytes).
    pub fn read_rows_into(
        &self,
        episode: usize,
        stream: &StreamInfo,
        rows: Range<usize>,
        out: &mut [u8],
    ) -> Result<()> {
        let leaf_index = *self.leaf_of_source.get(&stream.source).ok_or_else(|| {
            Error::Invalid(format!(
                "stream `{}`: no feature `{}` in {}",
                stream.name,
                stream.source,
                self.dir.display()
            ))
        })?;
        self.verify(episode)?;
        let leaf = &self.leaves[leaf_index];
        let record = &self.episodes[episode];
        let shard = &self.shards[record.shard];
        let Some((dtype, shape)) = leaf.kind.array() else {
            return Err(Error::Invalid(format!(
                "stream `{}`: feature `{}` is text, not a stream",
                stream.name, leaf.key
            )));
        };
        let elements: usize = shape.iter().product();
        let row_bytes = elements * dtype.size_in_bytes();
        let values = self.values(episode, leaf_index)?;
        match (&*values, &leaf.kind) {
            (Values::PackedFloats(span), LeafKind::Tensor { .. }) => {
                let count = (span.len / 4) as usize;
                self.check_count(episode, leaf, shape, count, "float")?;
                let at = span.offset + (rows.start * elements * 4) as u64;
                let io = |error| Error::Io { file: shard.path.clone(), error };
                if dtype == DType::F32 {
                    // The file's little-endian f32s are the rows' bytes.
                    return read_exact_at(&shard.file, out, at).map_err(io);
                }
                let mut raw = vec![0u8; rows.len() * elements * 4];
                read_exact_at(&shard.file, &mut raw, at).map_err(io)?;
                let floats: Vec<f32> =
                    raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
                decode::store_floats(&floats, dtype, out)
                    .map_err(|p| self.record_error(episode, format!("feature `{}` {p}", leaf.key)))
            }
            (Values::Decoded, LeafKind::Tensor { .. }) => {
                let range = rows.start * elements..rows.end * elements;
                match self.feature(episode, leaf_index)? {
                    Kind::FloatList(l) => {
                        self.check_count(episode, leaf, shape, l.value.len(), "float")?;
                        decode::store_floats(&l.value[range], dtype, out)
                    }
                    Kind::Int64List(l) => {
                        self.check_count(episode, leaf, shape, l.value.len(), "integer")?;
                        decode::store_ints(&l.value[range], dtype, out)
                    }
                    Kind::BytesList(_) => {
                        Err("holds a bytes_list, not the numbers its features.json type stores".into())
                    }
                }
                .map_err(|p| self.record_error(episode, format!("feature `{}` {p}", leaf.key)))
            }
            (Values::Entries(entries), kind) => {
                if entries.len() != record.steps {
                    return Err(self.record_error(
                        episode,
                        format!(
                            "feature `{}` holds {} values for the episode's {} steps",
                            leaf.key,
                            entries.len(),
                            record.steps
                        ),
                    ));
                }
                let decode_row = |(row, chunk): (usize, &mut [u8])| -> Result<()> {
                    let span = entries[row];
                    let mut bytes = vec![0u8; span.len as usize];
                    read_exact_at(&shard.file, &mut bytes, span.offset)
                        .map_err(|error| Error::Io { file: shard.path.clone(), error })?;
                    let decoded = match kind {
                        LeafKind::Image { dtype, shape, .. } => {
                            robocache_datasource::image_decode::decode_image(&bytes, *dtype, shape, chunk)
                        }
                        LeafKind::Tensor { encoding, dtype, .. } if *encoding != TensorEncoding::None => {
                            decode::store_encoded(&bytes, *encoding, *dtype, chunk)
                        }
                        _ => Err("holds a bytes_list, not the numbers its features.json type stores".into()),
                    };
                    decoded.map_err(|problem| Error::Decode {
                        file: shard.path.clone(),
                        episode: format!("episode_{}", record.index),
                        key: leaf.key.clone(),
                        step: row,
                        problem,
                    })
                };
                let jobs = rows.clone().zip(out.chunks_exact_mut(row_bytes.max(1)));
                if rows.len() > 1 && matches!(kind, LeafKind::Image { .. }) {
                    jobs.collect::<Vec<_>>().into_par_iter().try_for_each(decode_row)
                } else {
                    jobs.into_iter().try_for_each(decode_row)
                }
            }
            (_, _) => Err(self.record_error(
                episode,
                format!("feature `{}` does not hold the values its features.json type stores", leaf.key),
            )),
        }
    }

    /// Checks that `leaf` holds `count` values: its episode's steps of `shape`.
    fn check_count(&self, episode: usize, leaf: &Leaf, shape: &[usize], count: usize, what: &str) -> Result<()> {
        let steps = self.episodes[episode].steps;
        let elements: usize = shape.iter().product();
        if count != steps * elements {
            return Err(self.record_error(
                episode,
                format!(
                    "feature `{}` holds {count} {what} values, not the {} of {steps} steps of shape {shape:?}{}",
                    leaf.key,
                    steps * elements,
                    if elements > 0 && !count.is_multiple_of(elements) { " (not a whole number of steps)" } else { "" }
                ),
            ));
        }
        Ok(())
    }

    /// Checks the payload CRC of `episode`'s record once.
    fn verify(&self, episode: usize) -> Result<()> {
        if !self.verify_checksums || self.verified[episode].load(Ordering::Acquire) {
            return Ok(());
        }
        let record = &self.episodes[episode];
        let shard = &self.shards[record.shard];
        tfrecord::verify_payload(&shard.path, &shard.file, record.record, record.span)?;
        self.verified[episode].store(true, Ordering::Release);
        Ok(())
    }

    /// How the values of `leaf` lie in `episode`'s record (found once).
    fn values(&self, episode: usize, leaf: usize) -> Result<Arc<Values>> {
        let key = (episode, leaf);
        if let Some(values) = self.values.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(values.clone());
        }
        let record = &self.episodes[episode];
        let shard = &self.shards[record.shard];
        let span = record.features[leaf];
        let values = match &self.leaves[leaf].kind {
            LeafKind::Image { .. }
            | LeafKind::Tensor { encoding: TensorEncoding::Bytes | TensorEncoding::Zlib, .. } => {
                let entries = example::bytes_entries(&shard.path, &shard.file, span)?.map_err(|problem| {
                    self.record_error(episode, format!("feature `{}` {problem}", self.leaves[leaf].key))
                })?;
                Values::Entries(entries)
            }
            _ => match example::packed_floats(&shard.path, &shard.file, span)? {
                Some(floats) => Values::PackedFloats(floats),
                None => Values::Decoded,
            },
        };
        let values = Arc::new(values);
        self.values.lock().unwrap_or_else(|p| p.into_inner()).insert(key, values.clone());
        Ok(values)
    }
}

/// Indexes every shard of `split` in parallel (headers, then each record's
/// feature spans): the records of each shard, the episodes with steps
/// (numbered by their position in the split) and how many had none.
fn index_shards(
    split: &Split,
    files: &[Blob],
    leaves: &[Leaf],
    count_leaf: usize,
) -> Result<(Vec<usize>, Vec<EpisodeRecord>, usize)> {
    let indexed: Vec<(usize, Vec<EpisodeRecord>)> = split
        .shards
        .par_iter()
        .zip(files)
        .enumerate()
        .map(|(shard_index, ((shard_path, expected), file))| {
            // Indexing reads every block of the shard, each after the one
            // before: a remote shard is fetched whole first, in parallel.
            file.prefetch()?;
            let records = tfrecord::index_shard(shard_path, file)?;
            if let Some(expected) = expected {
                if records.len() as u64 != *expected {
                    return Err(Error::Layout {
                        file: shard_path.clone(),
                        path: String::new(),
                        problem: format!(
                            "holds {} records but dataset_info.json says {expected} (a truncated or replaced shard)",
                            records.len()
                        ),
                    });
                }
            }
            let episodes = records
                .iter()
                .enumerate()
                .map(|(record, span)| index_record(shard_path, file, shard_index, record, *span, leaves, count_leaf))
                .collect::<Result<Vec<_>>>()?;
            Ok((records.len(), episodes))
        })
        .collect::<Result<_>>()?;
    let mut counts = Vec::with_capacity(indexed.len());
    let mut episodes: Vec<EpisodeRecord> = Vec::new();
    for (count, records) in indexed {
        counts.push(count);
        episodes.extend(records);
    }
    // Episodes without steps have no windows: leave them out (named by
    // their position in the split, so the others keep their names).
    for (index, episode) in episodes.iter_mut().enumerate() {
        episode.index = index;
    }
    let empty = episodes.iter().filter(|e| e.steps == 0).count();
    if empty > 0 {
        tracing::warn!(empty, "RLDS episodes without steps left out");
        episodes.retain(|e| e.steps > 0);
    }
    Ok((counts, episodes, empty))
}

/// The leaf whose value count gives an episode's steps: `steps/is_first`,
/// else the per-step numeric leaf with the fewest values a step, else the
/// first per-step leaf.
fn step_count_leaf(leaves: &[Leaf]) -> Option<usize> {
    let per_step = || leaves.iter().enumerate().filter(|(_, l)| l.per_step);
    per_step()
        .find(|(_, l)| {
            l.key == "steps/is_first" && matches!(l.kind, LeafKind::Tensor { encoding: TensorEncoding::None, .. })
        })
        .or_else(|| {
            per_step()
                .filter(|(_, l)| matches!(l.kind, LeafKind::Tensor { encoding: TensorEncoding::None, .. }))
                .min_by_key(|(_, l)| l.kind.array().map_or(usize::MAX, |(_, s)| s.iter().product::<usize>().max(1)))
        })
        .or_else(|| per_step().find(|(_, l)| !matches!(l.kind, LeafKind::Text)))
        .map(|(i, _)| i)
}

/// Indexes one record: where each leaf's Feature lies, and the step count.
fn index_record(
    path: &Path,
    file: &Blob,
    shard: usize,
    record: usize,
    span: RecordSpan,
    leaves: &[Leaf],
    count_leaf: usize,
) -> Result<EpisodeRecord> {
    let payload = Span { offset: span.offset, len: span.len };
    let found: HashMap<String, Span> = example::feature_spans(path, file, record, payload)?.into_iter().collect();
    let missing = |key: &str| Error::Record {
        file: path.to_path_buf(),
        record,
        problem: format!("the Example has no feature `{key}`, which features.json declares (features present: {})", {
            let mut keys: Vec<&str> = found.keys().map(String::as_str).collect();
            keys.sort_unstable();
            keys.join(", ")
        }),
    };
    let features =
        leaves.iter().map(|l| found.get(&l.key).copied().ok_or_else(|| missing(&l.key))).collect::<Result<Vec<_>>>()?;
    let leaf = &leaves[count_leaf];
    let count_span = features[count_leaf];
    let error = |problem: String| Error::Record {
        file: path.to_path_buf(),
        record,
        problem: format!("feature `{}` {problem}", leaf.key),
    };
    let steps = match &leaf.kind {
        LeafKind::Tensor { encoding: TensorEncoding::None, shape, .. } => {
            let elements: usize = shape.iter().product();
            let count = match example::packed_floats(path, file, count_span)? {
                Some(floats) => (floats.len / 4) as usize,
                None => match example::read_feature(path, file, count_span)?.map_err(error)?.kind {
                    Some(Kind::Int64List(l)) => l.value.len(),
                    Some(Kind::FloatList(l)) => l.value.len(),
                    Some(Kind::BytesList(_)) | None => return Err(error("holds no numbers".into())),
                },
            };
            if elements == 0 || count % elements != 0 {
                return Err(error(format!(
                    "holds {count} values, not a whole number of steps of shape {shape:?} ({elements} values a step)"
                )));
            }
            count / elements
        }
        _ => example::bytes_entries(path, file, count_span)?.map_err(error)?.len(),
    };
    Ok(EpisodeRecord { index: 0, shard, record, span, features, steps })
}

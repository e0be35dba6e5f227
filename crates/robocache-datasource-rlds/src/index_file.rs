//! The sidecar index of an RLDS split, `robocache-index.<split>.json`
//! beside the TFRecord shards: what opening otherwise learns by walking
//! every record of every shard (each record's span, each feature's span,
//! the step count, the language instruction and `episode_metadata`). An
//! open that finds a matching index reads that one file instead of the
//! shards, so on a remote dataset every node's first open fetches the index,
//! not the dataset, and each rank then fetches only the records its windows
//! read.
//!
//! Written by `robocache index` ([`crate::Dataset::write_index`]). Used only
//! while it matches the dataset: the same split, the same features (leaf
//! keys, in order) and the same shard files with the same sizes (and the
//! record counts `dataset_info.json` gives); anything else is logged and
//! the shards are indexed as without it. Payload CRCs are checked at a
//! record's first read either way, so an index that lies gives errors,
//! never wrong rows.

use std::path::{Path, PathBuf};

use robocache_storage::{Blob, Storage};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::builder::Split;
use super::example::Span;
use super::features::Leaf;
use super::tfrecord::{RecordSpan, FOOTER_BYTES, HEADER_BYTES};
use super::EpisodeRecord;

/// What the file says it is.
const FORMAT: &str = "robocache-rlds-index";
/// Its layout's version: a file of another version is not used.
const VERSION: u32 = 1;

/// The index file of `split` in the builder directory `dir`.
pub(super) fn path(dir: &Path, split: &str) -> PathBuf {
    dir.join(format!("robocache-index.{split}.json"))
}

/// An index file's contents.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct IndexFile {
    format: String,
    version: u32,
    split: String,
    /// The features' leaf keys, in features.json's order.
    leaves: Vec<String>,
    shards: Vec<IndexedShard>,
    /// Episodes of the split without steps (left out).
    empty_episodes: usize,
    episodes: Vec<IndexedEpisode>,
}

#[derive(Debug, Serialize, Deserialize)]
struct IndexedShard {
    /// The shard's file name.
    file: String,
    bytes: u64,
    records: usize,
}

#[derive(Debug, Serialize, Deserialize)]
struct IndexedEpisode {
    /// Position in the split, empty episodes included.
    index: usize,
    shard: usize,
    record: usize,
    /// The record's payload: `[offset, len]`.
    payload: [u64; 2],
    steps: usize,
    /// Each leaf's Feature message: `[offset, len]`, by leaf index.
    features: Vec<[u64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    instruction: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    episode_metadata: Map<String, Value>,
}

/// What opening learns from the records, besides the spans: the text
/// `dataset_info` puts in the episode model.
#[derive(Debug, Default)]
pub(super) struct EpisodeText {
    pub(super) instruction: Option<String>,
    pub(super) episode_metadata: Map<String, Value>,
}

/// An index's episodes, ready for the reader.
pub(super) struct Indexed {
    /// Records of each shard.
    pub(super) shard_records: Vec<usize>,
    pub(super) episodes: Vec<EpisodeRecord>,
    pub(super) texts: Vec<EpisodeText>,
    pub(super) empty_episodes: usize,
}

impl IndexFile {
    /// The index of an open split.
    pub(super) fn new(
        split: &str,
        leaves: &[Leaf],
        shards: &[(String, u64, usize)],
        empty_episodes: usize,
        episodes: &[EpisodeRecord],
        texts: Vec<EpisodeText>,
    ) -> IndexFile {
        IndexFile {
            format: FORMAT.into(),
            version: VERSION,
            split: split.into(),
            leaves: leaves.iter().map(|l| l.key.clone()).collect(),
            shards: shards
                .iter()
                .map(|(file, bytes, records)| IndexedShard { file: file.clone(), bytes: *bytes, records: *records })
                .collect(),
            empty_episodes,
            episodes: episodes
                .iter()
                .zip(texts)
                .map(|(e, text)| IndexedEpisode {
                    index: e.index,
                    shard: e.shard,
                    record: e.record,
                    payload: [e.span.offset, e.span.len],
                    steps: e.steps,
                    features: e.features.iter().map(|s| [s.offset, s.len]).collect(),
                    instruction: text.instruction,
                    episode_metadata: text.episode_metadata,
                })
                .collect(),
        }
    }

    /// The file's bytes.
    pub(super) fn to_json(&self) -> Vec<u8> {
        // Plain data of strings and numbers: serialising it cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The index of `split` in `dir` when there is one that matches the
    /// shards opened as `files` and the features `leaves`; `None` (and a
    /// log line saying why, when a file was there) otherwise.
    pub(super) fn load(
        storage: &Storage,
        dir: &Path,
        split: &Split,
        leaves: &[Leaf],
        files: &[Blob],
    ) -> Option<Indexed> {
        let path = path(dir, &split.name);
        let bytes = match storage.read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.is_not_found() => return None,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "RLDS index not read: indexing the shards");
                return None;
            }
        };
        let checked = serde_json::from_slice::<IndexFile>(&bytes)
            .map_err(|e| format!("not an index file: {e}"))
            .and_then(|index| index.check(split, leaves, files).map(|()| index));
        match checked {
            Ok(index) => {
                tracing::debug!(file = %path.display(), episodes = index.episodes.len(), "RLDS index used");
                Some(index.into_indexed())
            }
            Err(reason) => {
                tracing::warn!(file = %path.display(), reason, "RLDS index does not match the dataset: indexing the shards");
                None
            }
        }
    }

    /// Why this index does not describe the split, if it does not.
    fn check(&self, split: &Split, leaves: &[Leaf], files: &[Blob]) -> Result<(), String> {
        if self.format != FORMAT || self.version != VERSION {
            return Err(format!("`{}` version {}, not `{FORMAT}` version {VERSION}", self.format, self.version));
        }
        if self.split != split.name {
            return Err(format!("indexes split `{}`, not `{}`", self.split, split.name));
        }
        if !self.leaves.iter().eq(leaves.iter().map(|l| &l.key)) {
            return Err("its features differ from features.json".into());
        }
        if self.shards.len() != split.shards.len() {
            return Err(format!("{} shards, the split has {}", self.shards.len(), split.shards.len()));
        }
        for ((indexed, (shard_path, expected)), file) in self.shards.iter().zip(&split.shards).zip(files) {
            let name = shard_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if indexed.file != name || indexed.bytes != file.len() {
                return Err(format!(
                    "shard `{}` of {} bytes where the dataset has `{name}` of {} bytes",
                    indexed.file,
                    indexed.bytes,
                    file.len()
                ));
            }
            if expected.is_some_and(|n| n != indexed.records as u64) {
                return Err(format!("shard `{name}`: {} records, dataset_info.json says otherwise", indexed.records));
            }
        }
        for e in &self.episodes {
            let shard = self.shards.get(e.shard).ok_or_else(|| format!("episode_{}: no shard {}", e.index, e.shard))?;
            let payload = e.payload[0]..e.payload[0].saturating_add(e.payload[1]);
            let inside = |[offset, len]: [u64; 2]| offset >= payload.start && offset.saturating_add(len) <= payload.end;
            // A record is its header, its payload and its footer, inside the shard.
            if payload.start < HEADER_BYTES
                || payload.end.saturating_add(FOOTER_BYTES) > shard.bytes
                || e.record >= shard.records
                || e.steps == 0
                || e.features.len() != self.leaves.len()
                || !e.features.iter().all(|&s| inside(s))
            {
                return Err(format!("episode_{}: spans outside its record or shard", e.index));
            }
        }
        Ok(())
    }

    fn into_indexed(self) -> Indexed {
        let shard_records = self.shards.iter().map(|s| s.records).collect();
        let (episodes, texts) = self
            .episodes
            .into_iter()
            .map(|e| {
                let record = EpisodeRecord {
                    index: e.index,
                    shard: e.shard,
                    record: e.record,
                    span: RecordSpan { offset: e.payload[0], len: e.payload[1] },
                    features: e.features.iter().map(|&[offset, len]| Span { offset, len }).collect(),
                    steps: e.steps,
                };
                (record, EpisodeText { instruction: e.instruction, episode_metadata: e.episode_metadata })
            })
            .unzip();
        Indexed { shard_records, episodes, texts, empty_episodes: self.empty_episodes }
    }
}

//! RLDS as a format of the format layer ([`robocache_datasource::format_reader`]): a TFDS
//! builder directory, recognised and opened, and its reader.

use std::any::Any;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use robocache_storage::Storage;

use super::builder::DATASET_INFO;
use super::RldsSource;
use crate::RldsOptions;
use robocache_datasource::format_reader::{FormatKind, FormatReader, Opened};
use robocache_datasource::model::{DatasetInfo, FormatName, StreamInfo};
use robocache_datasource::{Error, Result};

/// RLDS builder directories: locally a directory with `dataset_info.json`
/// or a folder of version folders holding one; remotely, a prefix with `dataset_info.json`, or a prefix that is not an
/// object (a folder of versions, listed when opened). Opened with its
/// options.
#[derive(Clone, Debug, Default)]
pub struct RldsKind {
    options: RldsOptions,
}

impl RldsKind {
    /// RLDS builder directories, opened with `options`.
    pub fn new(options: RldsOptions) -> Self {
        RldsKind { options }
    }
}

impl FormatKind for RldsKind {
    fn name(&self) -> &'static str {
        "RLDS"
    }

    fn formats(&self) -> &'static [FormatName] {
        &[crate::RLDS]
    }

    fn signs(&self) -> &'static [&'static str] {
        &["dataset_info.json", "features.json", ".tfrecord"]
    }

    fn reads(&self) -> &'static str {
        "a directory with dataset_info.json (or version folders holding one) is read as an RLDS builder directory"
    }

    fn detect(&self, path: &Path, storage: &Storage) -> Result<bool> {
        match robocache_storage::is_remote(path) {
            // A builder directory, or a folder of its versions (`1.0.0/`).
            false => Ok(path.join(DATASET_INFO).is_file()
                || std::fs::read_dir(path)
                    .is_ok_and(|entries| entries.flatten().any(|entry| entry.path().join(DATASET_INFO).is_file()))),
            true => Ok(storage.is_file(&path.join(DATASET_INFO))? || !storage.is_file(path)?),
        }
    }

    fn open(&self, path: &Path, storage: &Storage) -> Result<Opened> {
        let (source, info) = RldsSource::open(path, &self.options, storage)?;
        Ok((Box::new(source), info))
    }

    fn has_index(&self) -> bool {
        true
    }
}

impl FormatReader for RldsSource {
    fn read_rows_into(&self, episode: usize, stream: &StreamInfo, rows: Range<usize>, out: &mut [u8]) -> Result<()> {
        RldsSource::read_rows_into(self, episode, stream, rows, out)
    }

    fn explicit_times(&self, _: &DatasetInfo, _: usize, stream: &StreamInfo, _: &str) -> Result<Arc<[f64]>> {
        Err(Error::Invalid(format!(
            "stream `{}`: RLDS streams are on the step clock and have no explicit timestamps",
            stream.name
        )))
    }

    fn index_file(&self, info: &DatasetInfo) -> Option<(PathBuf, Vec<u8>)> {
        Some(RldsSource::index_file(self, info))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

//! RLDS as a format of the format layer ([`crate::format_reader`]): a TFDS
//! builder directory, recognised and opened, and its reader.

use std::any::Any;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use robocache_storage::Storage;

use super::builder::DATASET_INFO;
use super::RldsSource;
use crate::format_reader::{FormatKind, FormatReader, Opened};
use crate::formats::OpenOptions;
use crate::model::{DatasetInfo, Format, StreamInfo};
use crate::{Error, Result};

/// RLDS builder directories: locally any directory (after LeRobot roots);
/// remotely, a prefix with `dataset_info.json`, or a prefix that is not an
/// object (a folder of versions, listed when opened).
pub(crate) struct RldsKind;

impl FormatKind for RldsKind {
    fn name(&self) -> &'static str {
        "RLDS"
    }

    fn formats(&self) -> &'static [Format] {
        &[Format::Rlds]
    }

    fn reads(&self) -> &'static str {
        "a directory is read as an RLDS builder directory"
    }

    fn detect(&self, path: &Path, storage: &Storage) -> Result<bool> {
        match robocache_storage::is_remote(path) {
            false => Ok(path.is_dir()),
            true => Ok(storage.is_file(&path.join(DATASET_INFO))? || !storage.is_file(path)?),
        }
    }

    fn open(&self, path: &Path, options: &OpenOptions, storage: &Storage) -> Result<Opened> {
        let (source, info) = RldsSource::open(path, options, storage)?;
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

//! The HDF5 layouts (robomimic, CALVIN, RT-X) as a format of the format
//! layer ([`robocache_datasource::format_reader`]): a file opened through the HDF5
//! library, its layout detected from its structure, and its rows read with
//! positioned reads where a dataset is stored uncompressed (see
//! `direct_read`), through the library otherwise.

use std::any::Any;
use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};

use robocache_cpu::HostVec;
use robocache_storage::Storage;

use crate::hdf5_file::Hdf5File;
use crate::row_layout::RowLayout;
use crate::streams::read_timestamps;
use crate::Hdf5Options;
use robocache_datasource::format_reader::{FormatKind, FormatReader, Opened};
use robocache_datasource::model::{DatasetInfo, FormatName, StreamInfo};
use robocache_datasource::{Error, Result};

/// HDF5 files in one of robocache's three layouts, opened with its
/// options. The last format a registry tries: any path the others do not
/// read is opened as a file.
#[derive(Clone, Debug, Default)]
pub struct Hdf5Kind {
    options: Hdf5Options,
}

impl Hdf5Kind {
    /// The HDF5 layouts, opened with `options`.
    pub fn new(options: Hdf5Options) -> Self {
        Hdf5Kind { options }
    }
}

impl FormatKind for Hdf5Kind {
    fn name(&self) -> &'static str {
        "HDF5"
    }

    fn formats(&self) -> &'static [FormatName] {
        &crate::LAYOUTS
    }

    fn signs(&self) -> &'static [&'static str] {
        &[".hdf5", ".h5"]
    }

    fn reads(&self) -> &'static str {
        "any other file is read as HDF5 (robomimic, calvin or rtx)"
    }

    fn detect(&self, path: &Path, storage: &Storage) -> Result<bool> {
        // Any file (the last format tried); a directory is never HDF5.
        Ok(!storage.is_dir(path).unwrap_or(false))
    }

    fn open(&self, path: &Path, storage: &Storage) -> Result<Opened> {
        let options = &self.options;
        // The HDF5 library reads files: a remote one is fetched whole
        // into the node-local cache first (once per node).
        let local = storage.local_file(path)?;
        let file = Hdf5File::open(&local)?;
        let format = match options.layout {
            Some(format) => format,
            None => crate::detect(&file)?,
        };
        let info = crate::read_info(&file, format, options)?;
        let source = Hdf5Source::new(file, options.reads_only)?;
        Ok((Box::new(source), info))
    }
}

/// An HDF5 file, read through the library or with positioned reads.
#[derive(Debug)]
pub(crate) struct Hdf5Source {
    file: Hdf5File,
    times: Mutex<HashMap<String, Arc<[f64]>>>,
    /// The same file for positioned reads of rows (see `direct_read`);
    /// `None` with [`Hdf5Options::reads_only`].
    raw: Option<File>,
    /// Per dataset path: where its rows lie, or `None` when HDF5 reads it.
    layouts: Mutex<HashMap<String, Option<Arc<RowLayout>>>>,
}

impl Hdf5Source {
    /// Reads `file`, with positioned reads of uncompressed rows unless
    /// `reads_only`.
    pub(crate) fn new(file: Hdf5File, reads_only: bool) -> Result<Self> {
        let raw = match reads_only {
            true => None,
            false => {
                Some(File::open(file.path()).map_err(|error| Error::Io { file: file.path().to_path_buf(), error })?)
            }
        };
        Ok(Hdf5Source { file, times: Mutex::new(HashMap::new()), raw, layouts: Mutex::new(HashMap::new()) })
    }

    /// Explicit timestamps at `key` (read once and kept).
    fn times(&self, episode: &str, key: &str) -> Result<Arc<[f64]>> {
        let mut cached = self.times.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(times) = cached.get(key) {
            return Ok(times.clone());
        }
        let times: Arc<[f64]> = read_timestamps(&self.file, episode, key)?.into();
        cached.insert(key.to_owned(), times.clone());
        Ok(times)
    }

    pub(crate) fn read(&self, info: &StreamInfo, rows: Range<usize>) -> Result<HostVec> {
        if let Some((layout, raw)) = self.row_layout(info) {
            if rows.end <= layout.rows() {
                return layout.read(raw, info.dtype, rows.clone()).map_err(|e| self.io_error(info, &rows, e));
            }
        }
        self.read_rows_through_hdf5(info, rows)
    }

    pub(crate) fn read_into(&self, info: &StreamInfo, rows: Range<usize>, out: &mut [u8]) -> Result<()> {
        if let Some((layout, raw)) = self.row_layout(info) {
            if rows.end <= layout.rows() {
                return layout.read_into(raw, rows.clone(), out).map_err(|e| self.io_error(info, &rows, e));
            }
        }
        let read = self.read_rows_through_hdf5(info, rows)?;
        out.copy_from_slice(read.as_slice().as_bytes());
        Ok(())
    }

    fn io_error(&self, info: &StreamInfo, rows: &Range<usize>, error: std::io::Error) -> Error {
        let error =
            std::io::Error::new(error.kind(), format!("`{}` rows {}..{}: {error}", info.source, rows.start, rows.end));
        Error::Io { file: self.file.path().to_path_buf(), error }
    }

    fn read_rows_through_hdf5(&self, info: &StreamInfo, rows: Range<usize>) -> Result<HostVec> {
        let dataset = self.file.dataset(&info.source)?;
        let data = self.file.read_rows(&dataset, &info.source, info.dtype, rows.clone())?;
        let expected = rows.len() * info.channels();
        if data.len() != expected {
            return Err(self.file.layout_error(
                &info.source,
                format!("read {} elements for rows {}..{}, expected {expected}", data.len(), rows.start, rows.end),
            ));
        }
        Ok(data)
    }

    /// Where the rows of `info`'s dataset lie (found once per dataset) and
    /// the file to read them from; `None` when HDF5 must read it. A layout
    /// is used only after its first and last rows read directly equal what
    /// HDF5 reads.
    fn row_layout(&self, info: &StreamInfo) -> Option<(Arc<RowLayout>, &File)> {
        let raw = self.raw.as_ref()?;
        let mut layouts = self.layouts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(layout) = layouts.get(&info.source) {
            return layout.clone().map(|layout| (layout, raw));
        }
        let layout = self
            .file
            .dataset(&info.source)
            .ok()
            .and_then(|dataset| RowLayout::of(&dataset, info.dtype, info.step_bytes()))
            .filter(|layout| {
                let last = layout.rows().min(info.len).saturating_sub(1);
                [0..1, last..last + 1].into_iter().all(|rows| {
                    let direct = layout.read(raw, info.dtype, rows.clone());
                    let library = self.read_rows_through_hdf5(info, rows);
                    matches!((direct, library), (Ok(d), Ok(l)) if d.as_slice().as_bytes() == l.as_slice().as_bytes())
                })
            })
            .map(Arc::new);
        tracing::trace!(source = %info.source, direct = layout.is_some(), "row layout");
        layouts.insert(info.source.clone(), layout.clone());
        layout.map(|layout| (layout, raw))
    }
}

impl FormatReader for Hdf5Source {
    fn read_rows_into(&self, _: usize, stream: &StreamInfo, rows: Range<usize>, out: &mut [u8]) -> Result<()> {
        self.read_into(stream, rows, out)
    }

    fn read_rows(&self, _: usize, stream: &StreamInfo, rows: Range<usize>) -> Result<HostVec> {
        self.read(stream, rows)
    }

    fn explicit_times(&self, info: &DatasetInfo, episode: usize, _: &StreamInfo, key: &str) -> Result<Arc<[f64]>> {
        self.times(&info.episodes[episode].name, key)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

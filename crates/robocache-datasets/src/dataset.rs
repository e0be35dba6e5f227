//! [`Dataset`]: a path opened by the registry's formats.

use std::ops::Deref;
use std::path::Path;

use robocache_datasource::DatasetReader;
use robocache_datasource_lerobot::LeRobotView;

use crate::registry::OpenOptions;
use crate::Result;

/// A dataset in any format robocache reads (docs/datasets.md describes
/// each): the first format of the registry that recognises the path opens
/// it. Opening reads the metadata (and explicit timestamps, to check them);
/// stream data is read per window or per stream on request. Everything a
/// dataset does once open is [`DatasetReader`]'s, which this dereferences
/// to. Shareable between threads.
///
/// ```no_run
/// use robocache_datasets::Dataset;
///
/// let dataset = Dataset::open("lift_ph.hdf5")?;
/// let demo = &dataset.info().episodes[0];
/// let actions = dataset.read_rows(0, "actions", 0..10)?; // 10 rows, one HDF5 hyperslab
/// println!("{} steps, {} actions read", demo.len, actions.len());
/// # Ok::<(), robocache_datasets::Error>(())
/// ```
#[derive(Debug)]
pub struct Dataset {
    reader: DatasetReader,
}

impl Dataset {
    /// Opens `path`, detecting its format, with default options (no cache).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, &OpenOptions::default())
    }

    /// Opens `path` with `options`: the first format that recognises the
    /// path reads it ([`OpenOptions::format`] checks it is the one asked for).
    pub fn open_with(path: impl AsRef<Path>, options: &OpenOptions) -> Result<Self> {
        let reader = DatasetReader::open(path.as_ref(), &options.kinds(), &options.reader_options())?;
        Ok(Dataset { reader })
    }

    /// The LeRobot dataset behind this one (`None` for other formats): its
    /// fps, tasks, dataset indices, as `LeRobotDataset` numbers them.
    pub fn lerobot(&self) -> Option<LeRobotView<'_>> {
        LeRobotView::of(&self.reader)
    }
}

impl Deref for Dataset {
    type Target = DatasetReader;

    fn deref(&self) -> &DatasetReader {
        &self.reader
    }
}

impl AsRef<DatasetReader> for Dataset {
    fn as_ref(&self) -> &DatasetReader {
        &self.reader
    }
}

//! The three HDF5 layouts and their detection. Each turns a file into a
//! [`DatasetInfo`](crate::DatasetInfo) reading metadata only (plus explicit
//! timestamps, which are small and checked at open); [`Hdf5Kind`] is them
//! as one format of the format layer.

pub mod calvin;
mod hdf5_reader;
pub mod robomimic;
pub mod rtx;

pub(crate) use hdf5_reader::Hdf5Kind;

use crate::hdf5_file::Hdf5File;
use crate::model::{DatasetInfo, Format};
use crate::{Error, Result};
use robocache_storage::StorageOptions;

/// Attribute on the root group naming robocache's own layouts (`calvin`, `rtx`).
pub const LAYOUT_ATTRIBUTE: &str = "robocache_layout";
/// Attribute on the root group with the layout's version (1).
pub const LAYOUT_VERSION_ATTRIBUTE: &str = "robocache_layout_version";
/// The layout version this build writes and reads.
pub const LAYOUT_VERSION: f64 = 1.0;

/// How to open a dataset.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Read as this layout instead of detecting it.
    pub format: Option<Format>,
    /// The step-clock rate in Hz, instead of the one the file gives (RLDS:
    /// instead of the Open X-Embodiment rate table, required for datasets
    /// not in it).
    pub rate_hz: Option<f64>,
    /// Only the episodes of this split (robomimic `mask/<split>`; RLDS: the
    /// TFDS split, `train` by default).
    pub split: Option<String>,
    /// Bytes of low-dimensional streams kept in memory after their first read
    /// (0: no cache; every window reads from the file).
    pub cache_bytes: usize,
    /// Read every dataset through the HDF5 library (one thread at a time),
    /// never with the positioned reads used for uncompressed datasets.
    pub hdf5_reads_only: bool,
    /// RLDS: do not check each record's payload CRC32C on its first read
    /// (the length CRCs are always checked while indexing).
    pub skip_checksums: bool,
    /// ROS 2 bags: which topics and fields become which streams (none: the
    /// default mapping from the topics' types).
    pub bag_mapping: Option<crate::ros2::BagMapping>,
    /// Where remote datasets (`s3://`, `gs://`, `az://`, `http(s)://`,
    /// `hf://datasets/...`) are cached and how their stores are reached.
    pub storage: StorageOptions,
}

/// The layout of `file`: its `robocache_layout` attribute, else its structure.
pub(crate) fn detect(file: &Hdf5File) -> Result<Format> {
    let root = file.group("/")?;
    if let Some(layout) = file.attr_string(&root, LAYOUT_ATTRIBUTE)? {
        return layout.parse().map_err(|e: String| file.layout_error(&format!("/@{LAYOUT_ATTRIBUTE}"), e));
    }
    if robomimic::detect(file) {
        return Ok(Format::Robomimic);
    }
    if file.exists("segments") {
        return Ok(Format::Calvin);
    }
    if file.exists("episodes") {
        return Ok(Format::Rtx);
    }
    Err(Error::UnknownFormat {
        file: file.path().to_path_buf(),
        reason: format!(
            "no `data/demo_N` groups (robomimic), no `{LAYOUT_ATTRIBUTE}` attribute and no `segments` (calvin) or `episodes` (rtx) group"
        ),
    })
}

pub(crate) fn read_info(file: &Hdf5File, format: Format, options: &OpenOptions) -> Result<DatasetInfo> {
    if let Some(split) = &options.split {
        if format != Format::Robomimic {
            return Err(Error::Invalid(format!(
                "split `{split}`: only robomimic files and RLDS directories have splits"
            )));
        }
    }
    if let Some(hz) = options.rate_hz {
        if !(hz.is_finite() && hz > 0.0) {
            return Err(Error::Invalid(format!("rate {hz} Hz is not a positive rate")));
        }
    }
    let root = file.group("/")?;
    if let Some(version) = file.attr_f64(&root, LAYOUT_VERSION_ATTRIBUTE)? {
        if version > LAYOUT_VERSION {
            return Err(file.layout_error(
                &format!("/@{LAYOUT_VERSION_ATTRIBUTE}"),
                format!("layout version {version} is newer than this robocache reads ({LAYOUT_VERSION})"),
            ));
        }
    }
    match format {
        Format::Robomimic => robomimic::read_info(file, options),
        Format::Calvin => calvin::read_info(file, options),
        Format::Rtx => rtx::read_info(file, options),
        Format::Rlds => Err(file.layout_error(
            "/",
            "is an HDF5 file; the rlds format reads TFDS builder directories (dataset_info.json, features.json, TFRecord shards)",
        )),
        Format::LeRobot => Err(file.layout_error(
            "/",
            "is an HDF5 file; the lerobot format reads LeRobot dataset roots (meta/info.json, data/, videos/)",
        )),
        Format::Ros2 => Err(file.layout_error("/", "is an HDF5 file; the ros2 format reads .mcap and .db3 bags")),
    }
}

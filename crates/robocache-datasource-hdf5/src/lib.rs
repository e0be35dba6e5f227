//! robocache's HDF5 layouts: robomimic's native files, robocache's CALVIN
//! and RT-X mirror layouts, and ALOHA/ACT episode files ([`aloha`], a
//! format of its own: a directory of one file per episode); a format
//! family of the format layer (`robocache-datasource`). Each layout turns a file into a
//! [`DatasetInfo`] reading metadata only (plus explicit timestamps, which
//! are small and checked at open); [`Hdf5Kind`] is them as one format.
//! Rows of uncompressed datasets are read with positioned reads from any
//! number of threads (`row_layout.rs`), others as HDF5 hyperslabs.
//!
//! ```no_run
//! use robocache_datasource::{DatasetReader, ReaderOptions};
//! use robocache_datasource::format_reader::FormatKind;
//! use robocache_datasource_hdf5::{Hdf5Kind, Hdf5Options};
//!
//! let kinds: Vec<Box<dyn FormatKind>> = vec![Box::new(Hdf5Kind::new(Hdf5Options::default()))];
//! let lift = DatasetReader::open("lift_ph.hdf5".as_ref(), &kinds, &ReaderOptions::default())?;
//! assert_eq!(lift.format(), robocache_datasource_hdf5::ROBOMIMIC);
//! # Ok::<(), robocache_datasource::Error>(())
//! ```

pub mod aloha;
pub mod calvin;
mod calvin_convert;
mod hdf5_file;
mod hdf5_reader;
mod hdf5_writer;
pub mod npy;
pub mod robomimic;
mod row_layout;
pub mod rtx;
mod streams;
pub mod synthetic;

pub use aloha::{AlohaKind, AlohaOptions, ALOHA};
pub use calvin_convert::{convert_calvin, ConvertProgress, ConvertSummary};
pub use hdf5_reader::Hdf5Kind;

use crate::hdf5_file::Hdf5File;
use robocache_datasource::model::{DatasetInfo, FormatName};
use robocache_datasource::{Error, Result};

/// robomimic's native HDF5 layout (docs/datasets.md).
pub const ROBOMIMIC: FormatName = FormatName::new("robomimic");
/// robocache's HDF5 layout for CALVIN (docs/datasets.md).
pub const CALVIN: FormatName = FormatName::new("calvin");
/// robocache's HDF5 layout mirroring RLDS for Open X-Embodiment (docs/datasets.md).
pub const RTX: FormatName = FormatName::new("rtx");
/// The layouts of this crate.
pub const LAYOUTS: [FormatName; 3] = [ROBOMIMIC, CALVIN, RTX];

/// Attribute on the root group naming robocache's own layouts (`calvin`, `rtx`).
pub const LAYOUT_ATTRIBUTE: &str = "robocache_layout";
/// Attribute on the root group with the layout's version (1).
pub const LAYOUT_VERSION_ATTRIBUTE: &str = "robocache_layout_version";
/// The layout version this build writes and reads.
pub const LAYOUT_VERSION: f64 = 1.0;

/// How an HDF5 file is opened.
#[derive(Clone, Debug, Default)]
pub struct Hdf5Options {
    /// Read as this layout ([`ROBOMIMIC`], [`CALVIN`], [`RTX`]) instead of detecting it.
    pub layout: Option<FormatName>,
    /// The step-clock rate in Hz, instead of the one the file gives.
    pub rate_hz: Option<f64>,
    /// Only the episodes of this split (robomimic `mask/<split>`).
    pub split: Option<String>,
    /// Read every dataset through the HDF5 library (one thread at a time),
    /// never with the positioned reads used for uncompressed datasets.
    pub reads_only: bool,
}

/// The layout of `file`: its `robocache_layout` attribute, else its structure.
pub(crate) fn detect(file: &Hdf5File) -> Result<FormatName> {
    let root = file.group("/")?;
    if let Some(layout) = file.attr_string(&root, LAYOUT_ATTRIBUTE)? {
        return LAYOUTS.into_iter().find(|l| l.name() == layout.to_ascii_lowercase()).ok_or_else(|| {
            file.layout_error(
                &format!("/@{LAYOUT_ATTRIBUTE}"),
                format!("is `{layout}`, not one of the HDF5 layouts (robomimic, calvin, rtx)"),
            )
        });
    }
    if robomimic::detect(file) {
        return Ok(ROBOMIMIC);
    }
    if file.exists("segments") {
        return Ok(CALVIN);
    }
    if file.exists("episodes") {
        return Ok(RTX);
    }
    Err(Error::UnknownFormat {
        file: file.path().to_path_buf(),
        reason: format!(
            "no `data/demo_N` groups (robomimic), no `{LAYOUT_ATTRIBUTE}` attribute and no `segments` (calvin) or `episodes` (rtx) group"
        ),
    })
}

pub(crate) fn read_info(file: &Hdf5File, format: FormatName, options: &Hdf5Options) -> Result<DatasetInfo> {
    if let Some(split) = &options.split {
        if format != ROBOMIMIC {
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
        ROBOMIMIC => robomimic::read_info(file, options),
        CALVIN => calvin::read_info(file, options),
        RTX => rtx::read_info(file, options),
        other => Err(file.layout_error(
            "/",
            format!(
                "is an HDF5 file; the {other} format does not read HDF5 files (HDF5 layouts: robomimic, calvin, rtx)"
            ),
        )),
    }
}

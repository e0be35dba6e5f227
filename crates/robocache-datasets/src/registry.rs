//! The formats robocache reads, as one list: each format family's crate,
//! built with the options [`OpenOptions`] gives it, in the order they are
//! tried on a path. The only place that names every format.

use std::fmt;
use std::str::FromStr;

use robocache_datasource::format_reader::FormatKind;
use robocache_datasource::{FormatName, ReaderOptions};
use robocache_datasource_hdf5::{AlohaKind, AlohaOptions, Hdf5Kind, Hdf5Options};
use robocache_datasource_lerobot::LeRobotKind;
use robocache_datasource_rlds::{RldsKind, RldsOptions};
use robocache_datasource_ros2::Ros2Kind;
use robocache_datasource_zarr::{ZarrKind, ZarrOptions};
use robocache_storage::StorageOptions;
use serde::Serialize;

/// The dataset family a file is read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// robomimic's native HDF5 layout (docs/datasets.md).
    Robomimic,
    /// robocache's HDF5 layout for CALVIN (docs/datasets.md).
    Calvin,
    /// robocache's HDF5 layout mirroring RLDS for Open X-Embodiment (docs/datasets.md).
    Rtx,
    /// RLDS as TFDS publishes it (Open X-Embodiment): a builder directory
    /// of TFRecord shards, read without TensorFlow (docs/datasets.md).
    Rlds,
    /// A LeRobot dataset root (codebase v3.0 or v2.1): parquet data, MP4
    /// video, `meta/info.json` (docs/datasets.md).
    LeRobot,
    /// ROS 2 bags: MCAP or rosbag2 SQLite files, one episode each, topics
    /// as streams at their own rates (docs/datasets.md).
    Ros2,
    /// ALOHA / ACT HDF5: one file per episode (`episode_N.hdf5`) with
    /// `/observations/qpos`, `/action` and raw or JPEG cameras (docs/datasets.md).
    Aloha,
    /// Zarr replay buffers: diffusion policy's `ReplayBuffer` and UMI's
    /// `dataset.zarr.zip` (`data/<key>`, `meta/episode_ends`; Zarr formats
    /// 2 and 3) (docs/datasets.md).
    Zarr,
}

impl Format {
    /// Every format, in detection order.
    pub const ALL: [Format; 8] = [
        Format::Robomimic,
        Format::Calvin,
        Format::Rtx,
        Format::Rlds,
        Format::LeRobot,
        Format::Ros2,
        Format::Aloha,
        Format::Zarr,
    ];

    /// The layout's name, as its format crate gives it ([`FormatName`]).
    pub const fn format_name(self) -> FormatName {
        match self {
            Format::Robomimic => robocache_datasource_hdf5::ROBOMIMIC,
            Format::Calvin => robocache_datasource_hdf5::CALVIN,
            Format::Rtx => robocache_datasource_hdf5::RTX,
            Format::Rlds => robocache_datasource_rlds::RLDS,
            Format::LeRobot => robocache_datasource_lerobot::LEROBOT,
            Format::Ros2 => robocache_datasource_ros2::ROS2,
            Format::Aloha => robocache_datasource_hdf5::ALOHA,
            Format::Zarr => robocache_datasource_zarr::ZARR,
        }
    }

    /// The name used by the CLI and in JSON.
    pub const fn name(self) -> &'static str {
        self.format_name().name()
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "robomimic" => Ok(Format::Robomimic),
            "calvin" => Ok(Format::Calvin),
            "rtx" | "rt-x" => Ok(Format::Rtx),
            "rlds" | "tfds" | "oxe" => Ok(Format::Rlds),
            "lerobot" => Ok(Format::LeRobot),
            "ros2" | "rosbag2" | "mcap" | "bag" => Ok(Format::Ros2),
            "aloha" | "act" => Ok(Format::Aloha),
            "zarr" | "replay-buffer" | "umi" => Ok(Format::Zarr),
            other => Err(format!(
                "unknown format `{other}` (expected robomimic, calvin, rtx, rlds, lerobot, ros2, aloha or zarr)"
            )),
        }
    }
}

impl From<Format> for FormatName {
    fn from(format: Format) -> FormatName {
        format.format_name()
    }
}

impl PartialEq<Format> for FormatName {
    fn eq(&self, other: &Format) -> bool {
        *self == other.format_name()
    }
}

impl PartialEq<FormatName> for Format {
    fn eq(&self, other: &FormatName) -> bool {
        self.format_name() == *other
    }
}

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
    pub bag_mapping: Option<robocache_datasource_ros2::BagMapping>,
    /// Where remote datasets (`s3://`, `gs://`, `az://`, `http(s)://`,
    /// `hf://datasets/...`) are cached and how their stores are reached.
    pub storage: StorageOptions,
}

impl OpenOptions {
    /// The formats, in the order they are tried on a path, each built with
    /// the options of its own: LeRobot roots (a directory with
    /// `meta/info.json`), ROS 2 bags, Zarr replay buffers (a store with
    /// `meta/episode_ends`, or a `.zip`), ALOHA/ACT episode files (a
    /// directory of them, or one), RLDS builder directories, and HDF5 files
    /// last (any other file).
    pub(crate) fn kinds(&self) -> Vec<Box<dyn FormatKind>> {
        vec![
            Box::new(LeRobotKind::refusing(self.split.is_some(), self.rate_hz.is_some())),
            Box::new(Ros2Kind::new(self.bag_mapping.clone(), self.rate_hz)),
            Box::new(ZarrKind::new(ZarrOptions { rate_hz: self.rate_hz, split: self.split.clone() })),
            Box::new(AlohaKind::new(AlohaOptions {
                rate_hz: self.rate_hz,
                reads_only: self.hdf5_reads_only,
                split: self.split.clone(),
            })),
            Box::new(RldsKind::new(RldsOptions {
                split: self.split.clone(),
                rate_hz: self.rate_hz,
                skip_checksums: self.skip_checksums,
            })),
            Box::new(Hdf5Kind::new(Hdf5Options {
                layout: self.format.map(Format::format_name),
                rate_hz: self.rate_hz,
                split: self.split.clone(),
                reads_only: self.hdf5_reads_only,
            })),
        ]
    }

    /// What every format shares.
    pub(crate) fn reader_options(&self) -> ReaderOptions {
        ReaderOptions {
            format: self.format.map(Format::format_name),
            cache_bytes: self.cache_bytes,
            storage: self.storage.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_is_read_by_exactly_one_kind_of_the_registry() {
        let kinds = OpenOptions::default().kinds();
        for format in Format::ALL {
            let readers: Vec<&str> =
                kinds.iter().filter(|k| k.formats().contains(&format.format_name())).map(|k| k.name()).collect();
            assert_eq!(readers.len(), 1, "{format} is read by {readers:?}");
            assert_eq!(format.name().parse::<Format>(), Ok(format));
        }
        let named: usize = kinds.iter().map(|k| k.formats().len()).sum();
        assert_eq!(named, Format::ALL.len(), "every layout a kind reads is a Format");
    }
}

//! Zarr replay buffers, as diffusion policy and UMI store their data: a
//! group with the arrays `data/<key>` concatenated over episodes (`[N,
//! ...]`) and `meta/episode_ends` (each episode's end row), in a directory
//! store (`*.zarr/`), a zip store (`*.zarr.zip`) or a remote prefix. Zarr
//! formats 2 (zarr-python 2.x: Blosc, Zstd, GZip, zlib or no compressor)
//! and 3 (zarr-python 3.x's codecs, sharding included) are read through the
//! zarrs crate; imagecodecs' JPEG XL frames (UMI's cameras) through
//! jxl-oxide ([`jpegxl`]). A format family of the format layer
//! (`robocache-datasource`).
//!
//! - **Episodes** are the row ranges `meta/episode_ends` cuts (strictly
//!   increasing, the last no further than any array's rows); every array of
//!   `data/` is a stream of each, named by its key (`action`, `img`,
//!   `camera0_rgb`, `robot0_eef_pos`); `[H, W, 3]` bytes and camera-like
//!   keys are images, the rest continuous (bools discrete).
//! - **Rates**: a replay buffer stores none. Known layouts have theirs
//!   ([`RATES`]: diffusion policy's PushT at 10 Hz, UMI's GoPro at
//!   59.94 Hz); any other needs [`ZarrOptions::rate_hz`], which the error
//!   names, unless it has timestamps.
//! - **Clock**: a `data/timestamp` array (seconds, f64 or f32, as diffusion
//!   policy's real-robot recorder writes it) is every stream's clock: time
//!   windows read it, episodes last from its first to its last time, and a
//!   buffer with no known rate keeps the one its median step interval
//!   gives. Its times must increase within each episode (an error names the
//!   episode and row). Without it, step `i` is at `i / rate`.
//!
//! ```no_run
//! use robocache_datasource::format_reader::FormatKind;
//! use robocache_datasource::{DatasetReader, ReaderOptions};
//! use robocache_datasource_zarr::{ZarrKind, ZarrOptions};
//!
//! let kinds: Vec<Box<dyn FormatKind>> = vec![Box::new(ZarrKind::new(ZarrOptions::default()))];
//! let pusht = DatasetReader::open("pusht_cchi_v7_replay.zarr".as_ref(), &kinds, &ReaderOptions::default())?;
//! let images = pusht.read_rows(0, "img", 0..2)?; // the first two frames of episode 0
//! # Ok::<(), robocache_datasource::Error>(())
//! ```

pub mod jpegxl;
mod replay_buffer;
mod store;
mod timestamps;

use std::path::Path;

use robocache_datasource::format_reader::{FormatKind, Opened};
use robocache_datasource::model::FormatName;
use robocache_datasource::Result;
use robocache_storage::Storage;

pub use store::MAX_VALUE_BYTES;

/// Zarr replay buffers (diffusion policy, UMI).
pub const ZARR: FormatName = FormatName::new("zarr");

/// Known replay buffers by the arrays they hold: the layout's name, the
/// keys that identify it, its rate in Hz.
pub const RATES: [(&str, &[&str], f64); 2] = [
    // diffusion policy's PushT (pusht_cchi_v7_replay.zarr): the env's 10 Hz control.
    ("diffusion-policy-pusht", &["img", "state", "action", "keypoint"], 10.0),
    // UMI (dataset.zarr.zip): GoPro video at 59.94 fps, every array at the camera's rate.
    ("umi", &["camera0_rgb", "robot0_eef_pos"], 60_000.0 / 1001.0),
];

/// The rate of a buffer holding `arrays` and its layout's name: `asked`
/// when given, else the table's.
pub(crate) fn rate_of(arrays: &[&str], asked: Option<f64>) -> std::result::Result<(f64, &'static str), String> {
    let known = RATES.iter().find(|(_, keys, _)| keys.iter().all(|k| arrays.contains(k)));
    let layout = known.map_or("replay-buffer", |(name, _, _)| *name);
    match (asked, known) {
        (Some(hz), _) if hz.is_finite() && hz > 0.0 => Ok((hz, layout)),
        (Some(hz), _) => Err(format!("rate {hz} Hz is not a positive rate")),
        (None, Some((_, _, hz))) => Ok((*hz, layout)),
        (None, None) => Err(format!(
            "a replay buffer stores no rate and its arrays ({}) are not a layout robocache knows (diffusion policy's PushT, UMI): give the rate in Hz (Rust `OpenOptions {{ rate_hz: Some(hz), .. }}`, CLI `--rate-hz HZ`, Python `robocache.open(path, rate_hz=HZ)`)",
            arrays.join(", ")
        )),
    }
}

/// How a replay buffer is opened.
#[derive(Clone, Debug, Default)]
pub struct ZarrOptions {
    /// The step rate in Hz, instead of the table's ([`RATES`]).
    pub rate_hz: Option<f64>,
    /// A split asked for: replay buffers have none, so opening is an error.
    pub split: Option<String>,
}

/// Replay buffers: a directory or `.zip` file holding `meta/episode_ends`.
#[derive(Clone, Debug, Default)]
pub struct ZarrKind {
    options: ZarrOptions,
}

impl ZarrKind {
    /// Replay buffers, opened with `options`.
    pub fn new(options: ZarrOptions) -> Self {
        ZarrKind { options }
    }
}

/// True when `path` names a zip archive a Zarr store may be.
fn is_zip(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zip")
}

impl FormatKind for ZarrKind {
    fn name(&self) -> &'static str {
        "Zarr"
    }

    fn formats(&self) -> &'static [FormatName] {
        &[ZARR]
    }

    fn signs(&self) -> &'static [&'static str] {
        &[".zarray", ".zgroup", ".zattrs", "zarr.json", "episode_ends", ".zarr"]
    }

    fn reads(&self) -> &'static str {
        "a Zarr store (a directory, or a .zarr.zip) with meta/episode_ends and data/ arrays is read as a replay buffer (diffusion policy, UMI)"
    }

    fn detect(&self, path: &Path, storage: &Storage) -> Result<bool> {
        let ends = ["meta/episode_ends/.zarray", "meta/episode_ends/zarr.json"];
        if is_zip(path) {
            return Ok(storage.is_file(path).unwrap_or(false));
        }
        Ok(storage.is_dir(path).unwrap_or(false)
            && ends.iter().any(|e| storage.is_file(&path.join(e)).unwrap_or(false)))
    }

    fn open(&self, path: &Path, storage: &Storage) -> Result<Opened> {
        if let Some(split) = &self.options.split {
            return Err(robocache_datasource::Error::Invalid(format!(
                "{}: split `{split}`: a replay buffer has no splits",
                path.display()
            )));
        }
        replay_buffer::open(path, storage, &self.options)
    }
}

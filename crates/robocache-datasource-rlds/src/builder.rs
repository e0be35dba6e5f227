//! A TFDS builder directory: `<data_dir>/<name>/<version>/` holding
//! `dataset_info.json`, `features.json` and the TFRecord shards of every
//! split, named by the split's `filepathTemplate`
//! (default `{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}`, e.g.
//! `bridge-train.tfrecord-00003-of-01024`).

use std::path::{Path, PathBuf};

use robocache_storage::Storage;
use serde_json::Value;

use robocache_datasource::{Error, Result};

/// The file TFDS writes with the dataset's name, version and splits.
pub const DATASET_INFO: &str = "dataset_info.json";
/// The file TFDS writes with every feature's type.
pub const FEATURES: &str = "features.json";

const DEFAULT_TEMPLATE: &str = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}";

/// One split and its shards.
#[derive(Clone, Debug)]
pub struct Split {
    pub name: String,
    /// Shard files in order, with the number of records `dataset_info.json` gives for each.
    pub shards: Vec<(PathBuf, Option<u64>)>,
}

/// What `dataset_info.json` says.
#[derive(Clone, Debug)]
pub struct BuilderInfo {
    /// The version folder.
    pub dir: PathBuf,
    /// The dataset's name (`bridge`, `fractal20220817_data`).
    pub name: String,
    pub version: String,
    pub splits: Vec<Split>,
    /// The whole `dataset_info.json`, for the dataset's metadata.
    pub json: Value,
}

/// The version folders of `path` that hold a `dataset_info.json`, oldest
/// first (a remote `path` is listed: one listing of every key below it).
fn version_dirs(path: &Path, storage: &Storage) -> Result<Vec<PathBuf>> {
    let mut versions: Vec<(Vec<u64>, PathBuf)> = storage
        .list_files(path)?
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == DATASET_INFO))
        .filter_map(|info| {
            let dir = info.parent()?.to_path_buf();
            if dir.parent()? != path {
                return None;
            }
            let name = dir.file_name()?.to_str()?;
            let version = name.split('.').map(|part| part.parse::<u64>().ok()).collect::<Option<Vec<_>>>()?;
            Some((version, dir))
        })
        .collect();
    versions.sort();
    Ok(versions.into_iter().map(|(_, p)| p).collect())
}

impl BuilderInfo {
    /// Reads the builder at `path`: a version folder, or a dataset folder
    /// whose newest version folder is taken.
    pub fn read(path: &Path, storage: &Storage) -> Result<BuilderInfo> {
        let dir = if storage.is_file(&path.join(DATASET_INFO))? {
            path.to_path_buf()
        } else {
            let versions = version_dirs(path, storage)?;
            versions.into_iter().last().ok_or_else(|| Error::UnknownFormat {
                file: path.to_path_buf(),
                reason: format!(
                    "a directory without `{DATASET_INFO}` and without version folders (`1.0.0/`) holding one: not a TFDS builder directory"
                ),
            })?
        };
        let info_path = dir.join(DATASET_INFO);
        let text = storage.read_to_string(&info_path)?;
        let json: Value =
            serde_json::from_str(&text).map_err(|e| layout(&info_path, "", format!("is not JSON: {e}")))?;
        let name = json.get("name").and_then(Value::as_str).map(str::to_owned).ok_or_else(|| Error::Missing {
            file: info_path.clone(),
            what: "key",
            path: "name".into(),
        })?;
        let version = json.get("version").and_then(Value::as_str).unwrap_or("").to_owned();
        let format = json.get("fileFormat").and_then(Value::as_str).unwrap_or("tfrecord");
        if format != "tfrecord" {
            return Err(layout(
                &info_path,
                "fileFormat",
                format!("is `{format}`: robocache reads TFRecord shards (`tfrecord`)"),
            ));
        }
        let Some(splits_json) = json.get("splits").and_then(Value::as_array) else {
            return Err(Error::Missing { file: info_path, what: "key", path: "splits".into() });
        };
        let mut splits = Vec::new();
        for split in splits_json {
            let Some(split_name) = split.get("name").and_then(Value::as_str) else {
                return Err(layout(&info_path, "splits", "a split without a `name`".into()));
            };
            let lengths: Vec<Option<u64>> = split
                .get("shardLengths")
                .and_then(Value::as_array)
                .map(|l| l.iter().map(|v| v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_u64())).collect())
                .unwrap_or_default();
            let template = split.get("filepathTemplate").and_then(Value::as_str).unwrap_or(DEFAULT_TEMPLATE);
            let count = lengths.len();
            if count == 0 {
                return Err(layout(
                    &info_path,
                    &format!("splits/{split_name}/shardLengths"),
                    "is missing or empty: the number of shards is unknown".into(),
                ));
            }
            let shards = (0..count)
                .map(|i| {
                    let file = template
                        .replace("{DATASET}", &name)
                        .replace("{SPLIT}", split_name)
                        .replace("{FILEFORMAT}", format)
                        .replace("{SHARD_X_OF_Y}", &format!("{i:05}-of-{count:05}"))
                        .replace("{SHARD_INDEX}", &format!("{i:05}"))
                        .replace("{NUM_SHARDS}", &format!("{count:05}"));
                    (dir.join(file), lengths[i])
                })
                .collect();
            splits.push(Split { name: split_name.to_owned(), shards });
        }
        Ok(BuilderInfo { dir, name, version, splits, json })
    }

    /// The split called `name`; by default `train`, else the only split.
    pub fn split(&self, name: Option<&str>) -> Result<&Split> {
        let names = || self.splits.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ");
        match name {
            Some(name) => self.splits.iter().find(|s| s.name == name).ok_or_else(|| {
                Error::Invalid(format!("{}: no split `{name}` (splits: {})", self.dir.display(), names()))
            }),
            None => self
                .splits
                .iter()
                .find(|s| s.name == "train")
                .or_else(|| if self.splits.len() == 1 { self.splits.first() } else { None })
                .ok_or_else(|| {
                    Error::Invalid(format!(
                        "{}: no `train` split; choose one of {} (OpenOptions::split, --split)",
                        self.dir.display(),
                        names()
                    ))
                }),
        }
    }
}

fn layout(file: &Path, key: &str, problem: String) -> Error {
    Error::Layout { file: file.to_path_buf(), path: key.to_owned(), problem }
}

//! A LeRobot root's `meta/`: `info.json` (codebase version, fps, features,
//! path templates), the episodes (v3.0: `meta/episodes/chunk-*/file-*.parquet`;
//! v2.1: `meta/episodes.jsonl`) and the tasks (v3.0: `meta/tasks.parquet`;
//! v2.1: `meta/tasks.jsonl`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use robocache_storage::Storage;
use serde::Deserialize;
use serde_json::Value;

use super::columns::{column_names, read_f64, read_i64, read_strings};
use robocache_datasource::{Error, Result};

pub(crate) const INFO: &str = "meta/info.json";

/// The codebase versions this reader knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    /// One parquet and one MP4 per episode, `meta/episodes.jsonl`.
    V21,
    /// Many episodes per file, episodes and tasks in parquet.
    V30,
}

/// One entry of `info.json`'s `features`.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Feature {
    pub dtype: String,
    pub shape: Vec<usize>,
}

/// `meta/info.json`.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Info {
    pub codebase_version: String,
    pub fps: f64,
    /// By name (sorted: serde_json's map).
    pub features: serde_json::Map<String, Value>,
    pub data_path: String,
    #[serde(default)]
    pub video_path: Option<String>,
    #[serde(default)]
    pub chunks_size: Option<usize>,
    #[serde(default)]
    pub robot_type: Option<String>,
}

/// `info.json` read: the typed part, its version, its features in order, the raw JSON.
pub(crate) type InfoRead = (Info, Version, Vec<(String, Feature)>, Value);

impl Info {
    pub fn read(root: &Path, storage: &Storage) -> Result<InfoRead> {
        let path = root.join(INFO);
        let text = storage.read_to_string(&path)?;
        let raw: Value = serde_json::from_str(&text).map_err(|e| Error::Layout {
            file: path.clone(),
            path: String::new(),
            problem: format!("not JSON: {e}"),
        })?;
        check_storage_format(&path, &raw)?;
        let info: Info = serde_json::from_value(raw.clone()).map_err(|e| Error::Layout {
            file: path.clone(),
            path: String::new(),
            problem: e.to_string(),
        })?;
        let version = match info.codebase_version.as_str() {
            "v3.0" => Version::V30,
            "v2.1" | "v2.0" => Version::V21,
            other => {
                return Err(Error::Layout {
                    file: path,
                    path: "codebase_version".into(),
                    problem: format!(
                        "is `{other}`; robocache reads LeRobot datasets of codebase v3.0 and v2.1 (convert older ones with LeRobot's conversion scripts)"
                    ),
                })
            }
        };
        if !(info.fps.is_finite() && info.fps > 0.0) {
            return Err(Error::Layout {
                file: path,
                path: "fps".into(),
                problem: format!("is {}, not a rate", info.fps),
            });
        }
        let mut features = Vec::new();
        // In key order, whatever order the JSON map keeps (serde_json's
        // `preserve_order` is on in builds that hold zarrs).
        let mut entries: Vec<_> = info.features.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        for (name, value) in entries {
            let feature: Feature = serde_json::from_value(value.clone()).map_err(|e| Error::Layout {
                file: path.clone(),
                path: format!("features/{name}"),
                problem: e.to_string(),
            })?;
            features.push((name.clone(), feature));
        }
        Ok((info, version, features, raw))
    }
}

/// Refuses a root whose `storage_format` is not Parquet (LeRobot's main
/// branch also writes `"lance"` roots, which robocache does not read yet:
/// docs/datasets.md says why), before its other keys give a vaguer error.
fn check_storage_format(path: &Path, raw: &Value) -> Result<()> {
    match raw.get("storage_format") {
        None => Ok(()),
        Some(Value::String(format)) if format == "parquet" => Ok(()),
        Some(other) => Err(Error::Layout {
            file: path.to_path_buf(),
            path: "storage_format".into(),
            problem: format!(
                "is {other}; robocache reads LeRobot roots stored as Parquet (\"parquet\" or absent), not yet \
                 those stored in Lance (docs/datasets.md, \"LeRobot stored in Lance\")"
            ),
        }),
    }
}

/// Where one camera's frames of one episode are.
#[derive(Clone, Debug)]
pub(crate) struct VideoSpan {
    pub file: PathBuf,
    /// The episode's first frame's time in the file (v2.1: 0).
    pub from_timestamp: f64,
    pub to_timestamp: Option<f64>,
}

/// One episode as `meta/` describes it.
#[derive(Clone, Debug)]
pub(crate) struct EpisodeMeta {
    pub index: usize,
    pub length: usize,
    pub tasks: Vec<String>,
    /// The data file holding its rows.
    pub data_file: PathBuf,
    /// v3.0: its rows `[from, to)` in the dataset's `index`.
    pub dataset_from_index: Option<usize>,
    /// Per video feature, in feature order.
    pub videos: BTreeMap<String, VideoSpan>,
}

/// The widest number a path template may ask for (`{episode_index:020d}`:
/// a 64-bit index has 20 digits).
const MAX_TEMPLATE_WIDTH: usize = 20;

/// Fills a path template (`data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet`).
pub(crate) fn fill_template(template: &str, values: &[(&str, &str, u64)]) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').ok_or_else(|| format!("`{template}` has an unclosed `{{`"))? + open;
        let field = &rest[open + 1..close];
        let (name, spec) = field.split_once(':').unwrap_or((field, ""));
        match values.iter().find(|(n, _, _)| *n == name) {
            Some((_, text, _)) if !text.is_empty() => out.push_str(text),
            Some((_, _, number)) => {
                let width = spec.trim_start_matches('0').trim_end_matches('d');
                let width: usize = if spec.is_empty() {
                    0
                } else {
                    width.parse().map_err(|_| format!("`{{{field}}}` in `{template}`: an unknown format"))?
                };
                if width > MAX_TEMPLATE_WIDTH {
                    return Err(format!(
                        "`{{{field}}}` in `{template}`: a width of {width} digits (at most {MAX_TEMPLATE_WIDTH})"
                    ));
                }
                out.push_str(&format!("{number:0width$}"));
            }
            None => return Err(format!("`{template}` names `{{{name}}}`, which robocache does not know")),
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn template_error(root: &Path, key: &str, problem: String) -> Error {
    Error::Layout { file: root.join(INFO), path: key.into(), problem }
}

/// A filled template of `info.json`'s field `key` as a path inside `root`
/// (no `..`, no absolute path, no other scheme).
fn inside_root(root: &Path, key: &str, filled: &str) -> Result<PathBuf> {
    robocache_storage::join_inside(root, filled)
        .map_err(|problem| template_error(root, key, format!("fills to {problem}")))
}

/// The episodes of a v3.0 root.
pub(crate) fn episodes_v30(
    storage: &Storage,
    root: &Path,
    info: &Info,
    video_keys: &[String],
) -> Result<Vec<EpisodeMeta>> {
    let dir = root.join("meta/episodes");
    let mut files = match parquet_files(storage, &dir) {
        Err(Error::Storage(robocache_storage::Error::List { .. })) => episode_files_by_name(storage, &dir)?,
        other => other?,
    };
    files.sort();
    if files.is_empty() {
        return Err(Error::Missing {
            file: root.to_path_buf(),
            what: "file",
            path: "meta/episodes/chunk-*/file-*.parquet".into(),
        });
    }
    let mut episodes = Vec::new();
    for file in files {
        let names = column_names(storage, &file)?;
        let ints = |column: &str| read_i64(storage, &file, column);
        let index = ints("episode_index")?;
        let length = ints("length")?;
        let data_chunk = ints("data/chunk_index")?;
        let data_file = ints("data/file_index")?;
        let from_index = ints("dataset_from_index")?;
        let tasks = read_task_lists(storage, &file)?;
        let mut videos = Vec::new();
        for key in video_keys {
            let column = |what: &str| format!("videos/{key}/{what}");
            if !names.contains(&column("chunk_index")) {
                return Err(Error::Missing { file: file.clone(), what: "parquet column", path: column("chunk_index") });
            }
            let to = match names.contains(&column("to_timestamp")) {
                true => Some(read_f64(storage, &file, &column("to_timestamp"))?),
                false => None,
            };
            videos.push((
                key.clone(),
                ints(&column("chunk_index"))?,
                ints(&column("file_index"))?,
                read_f64(storage, &file, &column("from_timestamp"))?,
                to,
            ));
        }
        for row in 0..index.len() {
            let checked = |value: i64, what: &str| -> Result<usize> {
                usize::try_from(value).map_err(|_| Error::Layout {
                    file: file.clone(),
                    path: what.into(),
                    problem: format!("row {row} is {value}, not an index"),
                })
            };
            let data_path = fill_template(
                &info.data_path,
                &[
                    ("chunk_index", "", checked(data_chunk[row], "data/chunk_index")? as u64),
                    ("file_index", "", checked(data_file[row], "data/file_index")? as u64),
                ],
            )
            .map_err(|p| template_error(root, "data_path", p))?;
            let mut spans = BTreeMap::new();
            for (key, chunks, file_indices, from, to) in &videos {
                let template = info.video_path.as_deref().ok_or_else(|| {
                    template_error(root, "video_path", "is missing but the dataset has video features".into())
                })?;
                let path = fill_template(
                    template,
                    &[
                        ("video_key", key, 0),
                        ("chunk_index", "", checked(chunks[row], "videos chunk_index")? as u64),
                        ("file_index", "", checked(file_indices[row], "videos file_index")? as u64),
                    ],
                )
                .map_err(|p| template_error(root, "video_path", p))?;
                spans.insert(
                    key.clone(),
                    VideoSpan {
                        file: inside_root(root, "video_path", &path)?,
                        from_timestamp: from[row],
                        to_timestamp: to.as_ref().map(|t| t[row]),
                    },
                );
            }
            episodes.push(EpisodeMeta {
                index: checked(index[row], "episode_index")?,
                length: checked(length[row], "length")?,
                tasks: tasks.get(row).cloned().unwrap_or_default(),
                data_file: inside_root(root, "data_path", &data_path)?,
                dataset_from_index: Some(checked(from_index[row], "dataset_from_index")?),
                videos: spans,
            });
        }
    }
    episodes.sort_by_key(|e| e.index);
    Ok(episodes)
}

/// The `tasks` column of the episodes parquet: a list of strings per row.
fn read_task_lists(storage: &Storage, file: &Path) -> Result<Vec<Vec<String>>> {
    super::columns::guarded(file, "tasks", || read_task_lists_unguarded(storage, file))
}

fn read_task_lists_unguarded(storage: &Storage, file: &Path) -> Result<Vec<Vec<String>>> {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    let mut out = Vec::new();
    for array in super::columns::read_arrays(storage, file, "tasks")? {
        let list = match array.data_type() {
            arrow_schema::DataType::List(_) => array.as_list::<i32>().clone(),
            other => {
                return Err(Error::Layout {
                    file: file.to_path_buf(),
                    path: "tasks".into(),
                    problem: format!("is {other}, not a list of strings"),
                })
            }
        };
        for row in 0..list.len() {
            let values = list.value(row);
            let strings: Vec<String> = match values.data_type() {
                arrow_schema::DataType::Utf8 => {
                    values.as_string::<i32>().iter().map(|s| s.unwrap_or_default().to_owned()).collect()
                }
                arrow_schema::DataType::LargeUtf8 => {
                    values.as_string::<i64>().iter().map(|s| s.unwrap_or_default().to_owned()).collect()
                }
                _ => Vec::new(),
            };
            out.push(strings);
        }
    }
    Ok(out)
}

/// The episodes of a v2.1 root (`meta/episodes.jsonl`).
pub(crate) fn episodes_v21(
    storage: &Storage,
    root: &Path,
    info: &Info,
    video_keys: &[String],
) -> Result<Vec<EpisodeMeta>> {
    let path = root.join("meta/episodes.jsonl");
    let text = storage.read_to_string(&path)?;
    let chunks_size = info.chunks_size.unwrap_or(1000).max(1);
    let mut episodes = Vec::new();
    for (line_number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        #[derive(Deserialize)]
        struct Line {
            episode_index: usize,
            length: usize,
            #[serde(default)]
            tasks: Vec<String>,
        }
        let entry: Line = serde_json::from_str(line).map_err(|e| Error::Layout {
            file: path.clone(),
            path: format!("line {}", line_number + 1),
            problem: e.to_string(),
        })?;
        let chunk = (entry.episode_index / chunks_size) as u64;
        let values = [("episode_chunk", "", chunk), ("episode_index", "", entry.episode_index as u64)];
        let data_path = fill_template(&info.data_path, &values).map_err(|p| template_error(root, "data_path", p))?;
        let mut videos = BTreeMap::new();
        for key in video_keys {
            let template = info.video_path.as_deref().ok_or_else(|| {
                template_error(root, "video_path", "is missing but the dataset has video features".into())
            })?;
            let path = fill_template(template, &[values[0], values[1], ("video_key", key, 0)])
                .map_err(|p| template_error(root, "video_path", p))?;
            let file = inside_root(root, "video_path", &path)?;
            videos.insert(key.clone(), VideoSpan { file, from_timestamp: 0.0, to_timestamp: None });
        }
        episodes.push(EpisodeMeta {
            index: entry.episode_index,
            length: entry.length,
            tasks: entry.tasks,
            data_file: inside_root(root, "data_path", &data_path)?,
            dataset_from_index: None,
            videos,
        });
    }
    episodes.sort_by_key(|e| e.index);
    Ok(episodes)
}

/// The column pandas gives an unnamed index.
const PANDAS_INDEX: &str = "__index_level_0__";

/// Task texts by task index.
pub(crate) fn tasks(storage: &Storage, root: &Path, version: Version) -> Result<Vec<String>> {
    let mut by_index: BTreeMap<usize, String> = BTreeMap::new();
    match version {
        Version::V30 => {
            let file = root.join("meta/tasks.parquet");
            if !storage.is_file(&file)? {
                return Err(Error::Missing {
                    file: root.to_path_buf(),
                    what: "file",
                    path: "meta/tasks.parquet".into(),
                });
            }
            let indices = read_i64(storage, &file, "task_index")?;
            // pandas writes the texts as its index column: named `task`
            // (LeRobot 0.6), or unnamed, `__index_level_0__` (LeRobot ≤ 0.5's
            // recorder and v2.1→v3.0 converter; LeRobot renames it on reading).
            let names = column_names(storage, &file)?;
            let column = match (names.iter().any(|n| n == "task"), names.iter().any(|n| n == PANDAS_INDEX)) {
                (false, true) => PANDAS_INDEX,
                _ => "task",
            };
            let texts = read_strings(storage, &file, column)?;
            if indices.len() != texts.len() {
                return Err(Error::Layout {
                    file: file.clone(),
                    path: "task".into(),
                    problem: format!("has {} rows, `task_index` {}", texts.len(), indices.len()),
                });
            }
            for (row, (i, text)) in indices.into_iter().zip(texts).enumerate() {
                let index = usize::try_from(i).map_err(|_| Error::Layout {
                    file: file.clone(),
                    path: "task_index".into(),
                    problem: format!("row {row} is {i}, not an index"),
                })?;
                by_index.insert(index, text);
            }
        }
        Version::V21 => {
            let path = root.join("meta/tasks.jsonl");
            let text = storage.read_to_string(&path)?;
            for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                #[derive(Deserialize)]
                struct Line {
                    task_index: usize,
                    task: String,
                }
                let entry: Line = serde_json::from_str(line).map_err(|e| Error::Layout {
                    file: path.clone(),
                    path: format!("line {}", n + 1),
                    problem: e.to_string(),
                })?;
                by_index.insert(entry.task_index, entry.task);
            }
        }
    }
    let mut tasks = Vec::with_capacity(by_index.len());
    for (i, (index, text)) in by_index.into_iter().enumerate() {
        if index != i {
            return Err(Error::Layout {
                file: root.join("meta"),
                path: "tasks".into(),
                problem: format!("task indices skip {i} (the next is {index})"),
            });
        }
        tasks.push(text);
    }
    Ok(tasks)
}

/// The episode files of a v3.0 root found by the names LeRobot gives them
/// (`chunk-{c:03d}/file-{f:03d}.parquet`, files then chunks counted up
/// until one is missing): for servers that cannot list a directory (plain HTTP).
fn episode_files_by_name(storage: &Storage, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for chunk in 0.. {
        let mut found = 0;
        for file in 0.. {
            let path = dir.join(format!("chunk-{chunk:03}/file-{file:03}.parquet"));
            if !storage.is_file(&path)? {
                break;
            }
            files.push(path);
            found += 1;
        }
        if found == 0 {
            break;
        }
    }
    Ok(files)
}

/// Every `*.parquet` below `dir`, recursively (none where `dir` does not exist).
pub(crate) fn parquet_files(storage: &Storage, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = storage.list_files(dir)?;
    files.retain(|path| path.extension().is_some_and(|e| e == "parquet"));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_stored_in_lance_is_named_as_such() {
        let path = Path::new("root/meta/info.json");
        assert!(check_storage_format(path, &serde_json::json!({"codebase_version": "v3.0"})).is_ok());
        assert!(check_storage_format(path, &serde_json::json!({"storage_format": "parquet"})).is_ok());
        let error = check_storage_format(path, &serde_json::json!({"storage_format": "lance"})).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("storage_format") && text.contains("\"lance\"") && text.contains("info.json"), "{text}");
        assert!(check_storage_format(path, &serde_json::json!({"storage_format": 3})).is_err());
    }

    #[test]
    fn templates_fill_as_python_formats_them() {
        let v3 = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet";
        assert_eq!(
            fill_template(v3, &[("chunk_index", "", 0), ("file_index", "", 12)]).unwrap(),
            "data/chunk-000/file-012.parquet"
        );
        let video = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4";
        assert_eq!(
            fill_template(
                video,
                &[("video_key", "observation.images.top", 0), ("chunk_index", "", 1), ("file_index", "", 2)]
            )
            .unwrap(),
            "videos/observation.images.top/chunk-001/file-002.mp4"
        );
        let v21 = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet";
        assert_eq!(
            fill_template(v21, &[("episode_chunk", "", 0), ("episode_index", "", 42)]).unwrap(),
            "data/chunk-000/episode_000042.parquet"
        );
        assert!(fill_template("x/{unknown}", &[]).unwrap_err().contains("unknown"));
        assert!(fill_template("x/{chunk_index", &[("chunk_index", "", 1)]).unwrap_err().contains("unclosed"));
        // A width past 20 digits is an error, not a panic in the formatter.
        let wide = fill_template("data/{chunk_index:0999999999d}.parquet", &[("chunk_index", "", 1)]);
        assert!(wide.unwrap_err().contains("999999999 digits"));
        assert_eq!(fill_template("{i:020d}", &[("i", "", u64::MAX)]).unwrap(), u64::MAX.to_string());
    }
}

//! Where a dataset path points: a local file, or an object in a remote store.
//!
//! Readers build paths by joining names onto a root (`root.join("meta/info.json")`);
//! a remote root is kept as its URL in a [`PathBuf`] (`s3://bucket/oxe/bridge`),
//! so the same joins give object URLs and every error names the URL.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The kinds of remote store robocache reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// Amazon S3 and S3-compatible stores (MinIO, Ceph, R2, moto): `s3://bucket/key`.
    S3,
    /// Google Cloud Storage: `gs://bucket/key`.
    Gcs,
    /// Azure Blob Storage / ADLS Gen2: `az://container/key`, `abfs[s]://container@account.dfs.core.windows.net/key`.
    Azure,
    /// Any HTTP server that answers ranged GETs: `http(s)://host/path`.
    Http,
    /// The Hugging Face Hub: `hf://datasets/<org>/<name>[@revision]/<path>`.
    Hub,
}

/// A remote object (or directory), split into the store it lives in and its key there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RemoteUrl {
    pub kind: StoreKind,
    /// The URL of the store: `s3://bucket`, `https://host:port`, or for the
    /// Hub `hf://datasets/<org>/<name>@<revision>`. One client per store.
    pub store: String,
    /// For the Hub: the repository id (`org/name`) and revision.
    pub hub_repo: Option<(String, String)>,
    /// The key inside the store: `/`-separated, no leading or trailing `/`,
    /// no `.` or `..` segment (empty for the store's root).
    pub key: String,
}

impl RemoteUrl {
    /// The full URL, as the user would write it.
    pub fn url(&self) -> String {
        match self.key.is_empty() {
            true => self.store.clone(),
            false => format!("{}/{}", self.store, self.key),
        }
    }

    /// The object `name` below this one.
    pub fn join(&self, name: &str) -> RemoteUrl {
        let key = match self.key.is_empty() {
            true => name.trim_matches('/').to_owned(),
            false => format!("{}/{}", self.key, name.trim_matches('/')),
        };
        RemoteUrl { key, ..self.clone() }
    }
}

/// Where a path points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    Local(PathBuf),
    Remote(RemoteUrl),
}

const SCHEMES: &[(&str, StoreKind)] = &[
    ("s3://", StoreKind::S3),
    ("s3a://", StoreKind::S3),
    ("gs://", StoreKind::Gcs),
    ("gcs://", StoreKind::Gcs),
    ("az://", StoreKind::Azure),
    ("azure://", StoreKind::Azure),
    ("abfs://", StoreKind::Azure),
    ("abfss://", StoreKind::Azure),
    ("http://", StoreKind::Http),
    ("https://", StoreKind::Http),
    ("hf://", StoreKind::Hub),
];

/// `root` joined with `relative`, a path that metadata or a listing gave
/// (a filled template, a listed key), confined to `root`: `relative` must be
/// a non-empty relative path of plain names, with no `..` segment, no
/// leading `/` (which would replace `root`, even a remote one, by a local
/// path), no scheme (`s3://`, `file:`), no NUL and no backslash. The error
/// says what is wrong; the caller names the file and field it came from.
pub fn join_inside(root: &Path, relative: &str) -> std::result::Result<PathBuf, String> {
    let problem = if relative.is_empty() {
        Some("is empty")
    } else if relative.starts_with('/') {
        Some("is an absolute path (it must stay inside the dataset root)")
    } else if relative.contains("://") || relative.split('/').next().is_some_and(|first| first.contains(':')) {
        Some("names a scheme or drive (it must be a path inside the dataset root)")
    } else if relative.contains('\\') || relative.contains('\0') {
        Some("holds a backslash or NUL")
    } else if relative.split('/').any(|segment| segment == "..") {
        Some("has a `..` segment (it must stay inside the dataset root)")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(format!("`{relative}` {problem}")),
        None => Ok(root.join(relative)),
    }
}

/// True when `path` is a URL of a remote store robocache reads (`s3://`,
/// `gs://`, `az://`, `abfs[s]://`, `http(s)://`, `hf://`).
pub fn is_remote(path: &Path) -> bool {
    path.to_str().is_some_and(|s| scheme_of(s).is_some())
}

fn scheme_of(text: &str) -> Option<(&'static str, StoreKind)> {
    let lower = text.get(..8.min(text.len()))?.to_ascii_lowercase();
    SCHEMES.iter().find(|(prefix, _)| lower.starts_with(prefix)).copied()
}

impl Location {
    /// Reads a path: a URL of a remote store, or a local path. A string
    /// with `://` and a scheme robocache does not read is an error (rather
    /// than a local file that does not exist).
    pub fn parse(path: &Path) -> Result<Location> {
        let Some(text) = path.to_str() else {
            return Ok(Location::Local(path.to_path_buf()));
        };
        let Some((prefix, kind)) = scheme_of(text) else {
            if let Some((scheme, _)) = text.split_once("://") {
                if !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c)) {
                    return Err(Error::InvalidUrl {
                        url: text.into(),
                        reason: format!(
                            "robocache does not read `{scheme}://` locations: use a local path, s3://, gs://, az://, abfs[s]://, http(s):// or hf://datasets/<org>/<name>"
                        ),
                    });
                }
            }
            return Ok(Location::Local(path.to_path_buf()));
        };
        let rest = &text[prefix.len()..];
        let invalid = |reason: &str| Error::InvalidUrl { url: text.into(), reason: reason.into() };
        if kind == StoreKind::Hub {
            return parse_hub(text, rest).map(Location::Remote);
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() {
            return Err(invalid(match kind {
                StoreKind::Http => "has no host",
                _ => "has no bucket (or container)",
            }));
        }
        let key = clean_key(path).map_err(|reason| invalid(&reason))?;
        let scheme = &prefix[..prefix.len() - 3];
        let store = format!("{}://{authority}", scheme.to_ascii_lowercase());
        Ok(Location::Remote(RemoteUrl { kind, store, hub_repo: None, key }))
    }
}

/// `/`-separated segments without empty or `.` ones; `..` is refused
/// (object keys have no parent directories to climb to).
fn clean_key(path: &str) -> std::result::Result<String, String> {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err("has a `..` segment: give the object's own path".into()),
            part => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

/// `hf://datasets/<org>/<name>[@revision]/<path>`, as `huggingface_hub`'s
/// `HfFileSystem` reads it: the revision may be percent-encoded
/// (`refs%2Fpr%2F3`) or one of the Hub's `refs/pr/<n>` and `refs/convert/<name>`.
fn parse_hub(url: &str, rest: &str) -> Result<RemoteUrl> {
    let invalid = |reason: String| Error::InvalidUrl { url: url.into(), reason };
    let Some(rest) = rest.strip_prefix("datasets/") else {
        return Err(invalid(
            "robocache reads dataset repositories of the Hub: write hf://datasets/<org>/<name>[@revision]/<path>"
                .into(),
        ));
    };
    let mut parts = rest.splitn(3, '/');
    let org = parts.next().unwrap_or_default();
    let name_rev = parts.next().unwrap_or_default();
    let mut tail = parts.next().unwrap_or_default().to_owned();
    if org.is_empty() || name_rev.is_empty() {
        return Err(invalid("names no repository: write hf://datasets/<org>/<name>[@revision]/<path>".into()));
    }
    let (name, revision) = match name_rev.split_once('@') {
        None => (name_rev, "main".to_owned()),
        Some((name, "refs")) => {
            // `@refs/pr/3/...` or `@refs/convert/parquet/...`: the revision spans two more segments.
            let mut segments = tail.splitn(3, '/');
            let (kind, id) = (segments.next().unwrap_or_default(), segments.next().unwrap_or_default());
            if !matches!(kind, "pr" | "convert") || id.is_empty() {
                return Err(invalid("a revision `refs/...` must be refs/pr/<n> or refs/convert/<name>".into()));
            }
            let revision = format!("refs/{kind}/{id}");
            tail = segments.next().unwrap_or_default().to_owned();
            (name, revision)
        }
        Some((name, rev)) => (name, percent_decode(rev).map_err(invalid)?),
    };
    if name.is_empty() || revision.is_empty() {
        return Err(invalid("has an empty repository name or revision".into()));
    }
    let key = clean_key(&tail).map_err(invalid)?;
    let repo = format!("{org}/{name}");
    Ok(RemoteUrl {
        kind: StoreKind::Hub,
        store: format!("hf://datasets/{repo}@{}", percent_encode(&revision)),
        hub_repo: Some((repo, revision)),
        key,
    })
}

/// The Hub's revision in a URL path segment (`/` as `%2F`, as `huggingface_hub` quotes it).
pub(crate) fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(byte as char),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

fn percent_decode(text: &str) -> std::result::Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(byte) = hex else {
                return Err(format!("the revision `{text}` has a bad percent escape at byte {i}"));
            };
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("the revision `{text}` is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(text: &str) -> RemoteUrl {
        match Location::parse(Path::new(text)).unwrap() {
            Location::Remote(url) => url,
            Location::Local(path) => panic!("{} read as local", path.display()),
        }
    }

    #[test]
    fn paths_from_metadata_stay_inside_the_root() {
        let root = Path::new("s3://bucket/root");
        assert_eq!(
            join_inside(root, "data/chunk-000/file-000.parquet").unwrap(),
            root.join("data/chunk-000/file-000.parquet")
        );
        assert_eq!(join_inside(Path::new("/data/ds"), "a..b/c.mp4").unwrap(), Path::new("/data/ds/a..b/c.mp4"));
        for (bad, says) in [
            ("../outside/data/file.parquet", "`..`"),
            ("data/../../x", "`..`"),
            ("/etc/passwd", "absolute"),
            ("file:///etc/passwd", "scheme"),
            ("s3://other/x", "scheme"),
            ("c:/x", "scheme"),
            ("a\\..\\b", "backslash"),
            ("", "empty"),
        ] {
            let error = join_inside(root, bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn urls_split_into_store_and_key() {
        let s3 = remote("s3://bucket/oxe/bridge/0.1.0/");
        assert_eq!((s3.kind, s3.store.as_str(), s3.key.as_str()), (StoreKind::S3, "s3://bucket", "oxe/bridge/0.1.0"));
        assert_eq!(s3.join("dataset_info.json").url(), "s3://bucket/oxe/bridge/0.1.0/dataset_info.json");
        let http = remote("http://127.0.0.1:8080/data//lift.hdf5");
        assert_eq!((http.store.as_str(), http.key.as_str()), ("http://127.0.0.1:8080", "data/lift.hdf5"));
        // A joined PathBuf is the same URL.
        let joined = Path::new("gs://b/root").join("meta/info.json");
        assert_eq!(remote(joined.to_str().unwrap()).url(), "gs://b/root/meta/info.json");
        assert!(matches!(Location::parse(Path::new("/data/x.hdf5")).unwrap(), Location::Local(_)));
        assert!(matches!(Location::parse(Path::new("relative/dir")).unwrap(), Location::Local(_)));
    }

    #[test]
    fn hub_urls_read_as_huggingface_hub_reads_them() {
        let plain = remote("hf://datasets/lerobot/pusht/meta/info.json");
        assert_eq!(plain.hub_repo, Some(("lerobot/pusht".into(), "main".into())));
        assert_eq!(plain.key, "meta/info.json");
        let tagged = remote("hf://datasets/lerobot/pusht@v3.0/meta");
        assert_eq!(tagged.hub_repo.unwrap().1, "v3.0");
        assert_eq!(tagged.store, "hf://datasets/lerobot/pusht@v3.0");
        let pr = remote("hf://datasets/org/name@refs/pr/3/data/x.parquet");
        assert_eq!(pr.hub_repo.unwrap().1, "refs/pr/3");
        assert_eq!(pr.key, "data/x.parquet");
        assert_eq!(pr.store, "hf://datasets/org/name@refs%2Fpr%2F3");
        let quoted = remote("hf://datasets/org/name@refs%2Fpr%2F3/data");
        assert_eq!(quoted.hub_repo.unwrap().1, "refs/pr/3");
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        let error = |text: &str| Location::parse(Path::new(text)).unwrap_err().to_string();
        assert!(error("ftp://host/x").contains("does not read `ftp://`"));
        assert!(error("s3:///key").contains("no bucket"));
        assert!(error("s3://b/a/../x").contains("`..`"));
        assert!(error("hf://models/org/name").contains("dataset repositories"));
        assert!(error("hf://datasets/org").contains("names no repository"));
        assert!(error("hf://datasets/org/name@refs/heads/x").contains("refs/pr/<n>"));
        assert!(error("hf://datasets/org/name@%zz/x").contains("percent escape"));
    }
}

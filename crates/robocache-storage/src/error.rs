//! The storage layer's one error type.

use std::ops::Range;
use std::path::PathBuf;

/// What went wrong reading a dataset's bytes: each variant names the URL
/// (or local file) and, for reads, the byte range.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A dataset location robocache cannot read.
    #[error("`{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// An option given for a store that the store does not know, or a bad value.
    #[error("storage option `{key}`: {reason}")]
    InvalidOption { key: String, reason: String },
    /// The object does not exist (HTTP 404, no such key).
    #[error("{url}: not found")]
    NotFound { url: String },
    /// A request that failed after its retries (or one not safe to retry:
    /// denied, bad credentials).
    #[error("{url}{}: {source}", range_text(.range))]
    Request {
        url: String,
        range: Option<Range<u64>>,
        #[source]
        source: Box<object_store::Error>,
    },
    /// A ranged read that returned fewer (or more) bytes than asked, on every try.
    #[error("{url} bytes {}..{}: the server sent {got} bytes instead of {} (a truncated body), on each of {tries} tries", .range.start, .range.end, .range.end - .range.start)]
    Truncated { url: String, range: Range<u64>, got: u64, tries: usize },
    /// The object was replaced on the server after it was opened: its ETag
    /// no longer matches (a ranged read sent `If-Match`), so its bytes are
    /// not mixed with the old version's (nor cached as them).
    #[error("{url}: the object changed on the server since it was opened (it had ETag {etag}); open the dataset again to read the new version")]
    Changed { url: String, etag: String },
    /// A read past the end of an object.
    #[error("{url}: bytes {}..{} asked of an object of {size} bytes", .range.start, .range.end)]
    OutOfRange { url: String, range: Range<u64>, size: u64 },
    /// Listing a remote directory failed or is not supported by the server.
    #[error("{url}: listing: {reason}")]
    List { url: String, reason: String },
    /// A listing named a path outside the directory listed (`..`, an
    /// absolute path, another scheme): never opened.
    #[error("{url}: the listing names {problem}")]
    OutsideRoot { url: String, problem: String },
    /// The Hugging Face Hub answered a request with something else than expected.
    #[error("{url}: {reason}")]
    Hub { url: String, reason: String },
    /// A local file (a dataset file, or the node-local cache).
    #[error("{}: {source}", .file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The async runtime that drives requests could not start.
    #[error("starting the storage runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

fn range_text(range: &Option<Range<u64>>) -> String {
    match range {
        Some(r) => format!(" bytes {}..{}", r.start, r.end),
        None => String::new(),
    }
}

impl Error {
    /// True for a missing object (a 404 or no such key), which callers
    /// asking "is there a file here?" turn into `false`.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
            || matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Read errors reach the readers as [`std::io::Error`]s (the readers already
/// name their file): this keeps the storage error, URL and range included, as
/// the source.
impl From<Error> for std::io::Error {
    fn from(error: Error) -> Self {
        match error {
            Error::Io { source, .. } => source,
            Error::NotFound { .. } => std::io::Error::new(std::io::ErrorKind::NotFound, error),
            Error::OutOfRange { .. } => std::io::Error::new(std::io::ErrorKind::UnexpectedEof, error),
            other => std::io::Error::other(other),
        }
    }
}

/// The result of a storage operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

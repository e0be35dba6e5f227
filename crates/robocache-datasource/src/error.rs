//! The one error type of the crate. Every variant that comes from a file
//! names the file and the place inside it (group, episode, key, row).

use std::path::PathBuf;

/// Result alias of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong reading a dataset or cutting windows from it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file is missing or unreadable at the operating-system level.
    #[error("{}: {error}", file.display())]
    Io { file: PathBuf, error: std::io::Error },
    /// Reaching a remote dataset: a bad URL or option, a missing object,
    /// a request that failed after its retries, a listing the server refuses.
    #[error(transparent)]
    Storage(#[from] robocache_storage::Error),
    /// The file does not start with the HDF5 signature.
    #[error("{}: not an HDF5 file (no HDF5 signature in the first bytes)", file.display())]
    NotHdf5 { file: PathBuf },
    /// The HDF5 library failed at `location` (a truncated file, a broken chunk, ...).
    #[error("{}: {location}: HDF5 error: {message}", file.display())]
    Hdf5 { file: PathBuf, location: String, message: String },
    /// A group, dataset or attribute that the layout requires is absent.
    #[error("{}: missing {what} `{path}`", file.display())]
    Missing { file: PathBuf, what: &'static str, path: String },
    /// A dataset or attribute exists but does not have the layout's rank,
    /// dtype or length.
    #[error("{}: `{path}`: {problem}", file.display())]
    Layout { file: PathBuf, path: String, problem: String },
    /// An episode whose timestamps are not finite and strictly increasing.
    #[error(
        "{}: episode `{episode}`, timestamps `{key}`: row {row} is {value} after {previous} (timestamps must be finite and strictly increasing)",
        file.display()
    )]
    NonMonotonic { file: PathBuf, episode: String, key: String, row: usize, previous: f64, value: f64 },
    /// An episode with no steps.
    #[error("{}: episode `{episode}` has no steps", file.display())]
    EmptyEpisode { file: PathBuf, episode: String },
    /// The file is HDF5 but in none of the layouts robocache reads.
    #[error("{}: unknown dataset layout: {reason}", file.display())]
    UnknownFormat { file: PathBuf, reason: String },
    /// An episode too short for the step windows asked for without padding.
    #[error(
        "episode `{episode}` has {length} steps, fewer than the {needed} that frame_stack {frame_stack} and seq_length {seq_length} need without padding"
    )]
    EpisodeTooShort { episode: String, length: usize, needed: usize, frame_stack: usize, seq_length: usize },
    /// A stream name that the dataset does not have.
    #[error("no stream `{stream}` in {scope} (streams: {available})")]
    UnknownStream { stream: String, scope: String, available: String },
    /// Bad arguments: window sizes, sample indices, shard numbers, options.
    #[error("{0}")]
    Invalid(String),
    /// A ROS 2 bag that cannot be read: a damaged file or chunk, a message
    /// that does not decode by its definition, a mapped topic it lacks.
    #[error("{}{}{}: {problem}", file.display(), topic.as_ref().map(|t| format!(", topic `{t}`")).unwrap_or_default(), message.map(|m| format!(", message {m}")).unwrap_or_default())]
    Bag { file: PathBuf, topic: Option<String>, message: Option<usize>, problem: String },
    /// A TFRecord record that is truncated, fails its CRC32C or is not the
    /// `tf.train.Example` the dataset's `features.json` describes.
    #[error("{}: record {record}: {problem}", file.display())]
    Record { file: PathBuf, record: usize, problem: String },
    /// One step of a stream that cannot be decoded (corrupt image bytes,
    /// values that do not fill the declared shape).
    #[error("{}: episode `{episode}`, `{key}`, step {step}: {problem}", file.display())]
    Decode { file: PathBuf, episode: String, key: String, step: usize, problem: String },
    /// A camera's video that cannot be read or decoded for an episode, or
    /// whose frame times do not match the episode's timestamps.
    #[error("episode `{episode}`, `{key}`: {source}")]
    Video {
        episode: String,
        key: String,
        /// Boxed: the video error names its file and frame and keeps the
        /// decoder's own error, which would double the size of every result.
        #[source]
        source: Box<robocache_video::Error>,
    },
    /// A frame LeRobot would not load either: the closest frame of the
    /// video is further than `tolerance_s` from the time asked for.
    #[error(
        "{}: episode `{episode}`, `{key}`, row {row}: the frame for t = {query} s is at {found} s, beyond tolerance_s = {tolerance_s} (LeRobot's FrameTimestampError)",
        file.display()
    )]
    FrameTime { file: PathBuf, episode: String, key: String, row: usize, query: f64, found: f64, tolerance_s: f64 },
    /// A native CALVIN split that cannot be converted.
    #[error("{}: {problem}", file.display())]
    Convert { file: PathBuf, problem: String },
}

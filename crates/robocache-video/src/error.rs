//! The one error type of the crate: every variant names the file.

use std::path::PathBuf;

/// What went wrong reading or decoding a video file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file is missing or unreadable.
    #[error("{}: {error}", file.display())]
    Io { file: PathBuf, error: std::io::Error },
    /// Not an MP4 file robocache reads: truncated, no video track, broken tables.
    #[error("{}: {problem}", file.display())]
    Container { file: PathBuf, problem: String },
    /// NVDEC was required ([`crate::DecoderChoice::Nvdec`]) and this
    /// machine has none: no NVIDIA driver, no `libnvcuvid`, no such GPU.
    #[error("{}: NVDEC is not available here: {reason}", file.display())]
    NvdecUnavailable { file: PathBuf, reason: String },
    /// NVDEC was required and cannot decode this file: a codec or size
    /// its video engines lack, a configuration record it refuses, a
    /// sample that fails.
    #[error("{}: NVDEC cannot decode it: {problem}", file.display())]
    Nvdec { file: PathBuf, problem: String },
    /// A frame that does not decode (corrupt data), or decodes to the wrong size.
    #[error("{}: frame {frame}: {problem}", file.display())]
    Decode { file: PathBuf, frame: usize, problem: String },
    /// A frame index past the end of the video.
    #[error("{}: frame {frame} asked for, the video has {frames} frames", file.display())]
    FrameOutOfRange { file: PathBuf, frame: usize, frames: usize },
}

/// Result alias of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

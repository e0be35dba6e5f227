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
    /// machine has none: no NVIDIA driver, no `libnvcuvid`, no such GPU
    /// ([`CodecError::Unavailable`], or the driver's [`CodecError::Cuda`]).
    #[error("{}: NVDEC is not available here: {source}", file.display())]
    NvdecUnavailable { file: PathBuf, source: CodecError },
    /// NVDEC was required and cannot decode this file: a codec or size
    /// its video engines lack, a configuration record it refuses, a
    /// sample that fails.
    #[error("{}: NVDEC cannot decode it: {source}", file.display())]
    Nvdec { file: PathBuf, source: CodecError },
    /// A frame that does not decode (corrupt data, a decoder's failure),
    /// or decodes to the wrong size.
    #[error("{}: frame {frame}: {source}", file.display())]
    Decode { file: PathBuf, frame: usize, source: CodecError },
    /// A frame index past the end of the video.
    #[error("{}: frame {frame} asked for, the video has {frames} frames", file.display())]
    FrameOutOfRange { file: PathBuf, frame: usize, frames: usize },
}

/// What a decoder (rav1d, OpenH264, libde265, NVDEC) or the parsing of a
/// codec's bytes reported, before [`Error`] names the file and the frame.
/// Decoder libraries' own status codes are kept as fields.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// A decoder library failed a call: `decoder` (`rav1d`, `OpenH264`,
    /// `libde265`), its own status `code`, and what it means.
    #[error("{message}")]
    Library { decoder: &'static str, code: i64, message: String },
    /// A CUDA driver call of NVDEC failed: the call, its `CUresult` and the
    /// driver's text for it.
    #[error("{call} failed: {message} (CUDA error {code})")]
    Cuda { call: &'static str, code: u32, message: String },
    /// The decoder could not allocate memory (host or device).
    #[error("{0}")]
    OutOfMemory(String),
    /// Bytes the codec's format does not allow: a configuration record,
    /// NAL unit sizes, a sample the decoder refuses, a frame of no sample.
    #[error("{0}")]
    Corrupt(String),
    /// A valid stream robocache does not decode (10-bit, not 4:2:0), or a
    /// codec or size a GPU's NVDEC lacks.
    #[error("{0}")]
    Unsupported(String),
    /// NVDEC is not there: no driver library, a symbol missing, no such GPU.
    #[error("{0}")]
    Unavailable(String),
}

/// [`CodecError::Corrupt`].
pub(crate) fn corrupt(message: impl Into<String>) -> CodecError {
    CodecError::Corrupt(message.into())
}

/// Result alias of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! The one error type of augmentation configs and their application.

/// What can go wrong configuring or applying an augmentation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A config that cannot be applied: a range out of torchvision's
    /// bounds, an unknown transform, a field of the wrong type. The message
    /// names the field (`tfs.hue.kwargs.hue`).
    #[error("augmentation config: {0}")]
    Config(String),
    /// Frames that do not fit the augmentation: a crop larger than the
    /// frame, a count of parameters that is not one per window.
    #[error("augmentation of frames: {0}")]
    Frames(String),
}

/// This crate's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn config(message: impl Into<String>) -> Error {
    Error::Config(message.into())
}

//! robocache errors as the exception classes of `robocache._errors`
//! (Python classes, so each can subclass both `robocache.Error` and the
//! built-in it behaves as: `ValueError`, `TypeError`, `RuntimeError`).

use pyo3::prelude::*;
use robocache::Error;

/// The `robocache._errors` class for `error`.
fn class_name(error: &Error) -> &'static str {
    match error {
        Error::Invalid(robocache_cpu::Error::DTypeMismatch { .. }) => "DTypeError",
        Error::Invalid(_)
        | Error::Rank { .. }
        | Error::Limit { .. }
        | Error::Layout { .. }
        | Error::Resize { .. }
        | Error::FrameIndex { .. }
        | Error::Spec { .. }
        | Error::Live { .. }
        | Error::Augment(_) => "InvalidInputError",
        Error::DeviceMismatch { .. } => "DeviceMismatchError",
        Error::CudaNotCompiled | Error::NoCudaDevice { .. } => "CudaUnavailableError",
        Error::OutOfMemory { .. } => "OutOfMemoryError",
        Error::Cuda(_) => "CudaError",
        Error::Dataset(_) => "DatasetError",
        Error::Internal(_) => "InternalError",
    }
}

/// A Python exception for a robocache error: its class from
/// `robocache._errors`, its message the Rust error with its causes.
pub(crate) fn to_py(error: Error) -> PyErr {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    raise(class_name(&error), message)
}

/// A bad argument found by the binding itself (a malformed descriptor).
pub(crate) fn invalid(message: impl Into<String>) -> PyErr {
    raise("InvalidInputError", message.into())
}

/// An instance of `robocache._errors.<class>` carrying `message` (or the
/// error met making it).
fn raise(class: &str, message: String) -> PyErr {
    Python::attach(|py| {
        let made = py.import("robocache._errors").and_then(|m| m.getattr(class)).and_then(|c| c.call1((message,)));
        match made {
            Ok(value) => PyErr::from_value(value),
            Err(e) => e,
        }
    })
}

/// Maps a facade result.
pub(crate) trait IntoPy<T> {
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, Error> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

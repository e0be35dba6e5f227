//! What the integration tests of robocache-video share.

use std::path::PathBuf;

/// This crate's folder: where it was built, or the working directory (the
/// GPU bundle runs its test binaries from a copy of the checkout elsewhere).
pub fn crate_dir() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if built.is_dir() {
        built
    } else {
        PathBuf::from(".")
    }
}

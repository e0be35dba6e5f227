//! Helpers for tests of this crate and of the crates above it (feature
//! `testing`): fixture roots copied where a test may change them.

use std::path::{Path, PathBuf};

/// `../shared/data/<part>` beside the checkout (data other tools wrote: the
/// MCAP conformance suite, rosbag2's test bags, real datasets), where it is
/// there; `None`, with a message on stderr saying the test skips, where not.
#[allow(clippy::print_stderr, reason = "a test that skips says so where cargo test shows it")]
pub fn shared_data(part: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data").join(part);
    match root.exists() {
        true => Some(root),
        false => {
            eprintln!("skipped: {} is not here (third-party data beside the checkout)", root.display());
            None
        }
    }
}

/// Copies the directory tree `from` into `to` (made where missing), files
/// and folders alike: a fixture root a test may then truncate or delete
/// parts of.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

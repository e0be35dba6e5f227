//! Helpers for tests of this crate and of the crates above it (feature
//! `testing`): fixture roots copied where a test may change them.

use std::path::Path;

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

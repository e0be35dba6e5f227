//! Test files written by an independent writer: `fixtures/make_fixtures.py`
//! (h5py and NumPy; robomimic itself for the reference windows).
//!
//! The interpreter is `ROBOCACHE_PYTHON`, else the project's
//! `target/tools/python` that `cargo xtask test` sets up with h5py, NumPy and
//! robomimic. Without one the tests fail and say how to get it.

#![allow(dead_code)]

pub mod servers;

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

pub fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("ROBOCACHE_PYTHON") {
        return PathBuf::from(python);
    }
    let venv = workspace_root().join("target/tools/python/bin/python");
    assert!(
        venv.exists(),
        "the dataset tests write their files with h5py: run `cargo xtask test` (it installs Python packages into target/tools/python) or set ROBOCACHE_PYTHON to a Python with h5py, numpy and robomimic 0.3"
    );
    venv
}

/// Runs `make_fixtures.py` with `args`, panicking with its output on failure.
pub fn make(args: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/make_fixtures.py");
    let output = Command::new(python()).arg(&script).args(args).output().expect("cannot run the fixture script");
    assert!(
        output.status.success(),
        "make_fixtures.py {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A temporary folder with a file made by `make_fixtures.py <command> <path> [args]`.
pub fn fixture(command: &str, name: &str, extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(name);
    let path_text = path.to_str().expect("utf-8 temp path").to_owned();
    let mut args = vec![command, path_text.as_str()];
    args.extend_from_slice(extra);
    make(&args);
    (dir, path)
}

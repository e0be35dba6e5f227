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
    run_fixture_script("make_fixtures.py", args);
}

/// Runs the fixture writer `script` (in `tests/fixtures/`) with `args`,
/// panicking with its output on failure.
pub fn run_fixture_script(script: &str, args: &[&str]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(script);
    let output = Command::new(python()).arg(&path).args(args).output().expect("cannot run the fixture script");
    assert!(
        output.status.success(),
        "{script} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Opens `path` and reads every row of it within the deadline: the
/// error's text, or the first problem `verify` found, or empty when all
/// of it reads (for the crafted-file tests).
pub fn open_and_verify(what: &str, path: PathBuf) -> String {
    robocache_video::testing::within_deadline(what, move || {
        let dataset = match robocache_datasets::Dataset::open(&path) {
            Ok(dataset) => dataset,
            Err(error) => return error.to_string(),
        };
        let report = dataset.verify(2);
        report.problems.first().map(|p| format!("{} {}: {}", p.episode, p.stream, p.error)).unwrap_or_default()
    })
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

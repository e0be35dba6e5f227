//! `cargo xtask sdist`: the Python package's source distribution, the one
//! `pip install robocache` builds where no wheel fits.
//!
//! maturin packs the workspace's crates but not `.cargo/config.toml`, whose
//! `[env]` points cust_raw's build script at robocache-cuda's link stub
//! (`CUDA_LIBRARY_PATH`): without it a build on a machine with no CUDA
//! toolkit would stop in cust_raw ("Could not find a cuda installation")
//! instead of building as the checkout does. This command adds it to the
//! archive, so that a build from the sdist runs the checkout's build with
//! the same checks (NASM, CMake) and errors.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use crate::portable_wheel::portable_tools;
use crate::{root, run};

/// Builds `target/sdist/robocache-<version>.tar.gz` and returns its path.
pub fn build() -> Result<PathBuf> {
    let bin = portable_tools()?;
    let out = root().join("target/sdist");
    let _ = std::fs::remove_dir_all(&out);
    run(Command::new(bin.join("maturin"))
        .current_dir(root())
        .args(["sdist", "-m", "crates/robocache-python/Cargo.toml", "-o"])
        .arg(&out))?;
    let archive = std::fs::read_dir(&out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .with_context(|| format!("maturin wrote no sdist into {}", out.display()))?;
    let name = archive.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let top = name.trim_end_matches(".tar.gz").to_owned();
    let tar = out.join(format!("{top}.tar"));
    run(Command::new("gzip").arg("-d").arg(&archive))?;
    run(Command::new("tar")
        .arg("-rf")
        .arg(&tar)
        .arg("-C")
        .arg(root())
        .arg(format!("--transform=s,^,{top}/,"))
        .args(["--owner=0", "--group=0", "--numeric-owner", ".cargo/config.toml"]))?;
    run(Command::new("gzip").arg("-9").arg(&tar))?;
    let listed = Command::new("tar").arg("-tzf").arg(&archive).output().context("tar -t")?;
    anyhow::ensure!(
        String::from_utf8_lossy(&listed.stdout).lines().any(|l| l == format!("{top}/.cargo/config.toml")),
        "{} lacks .cargo/config.toml",
        archive.display()
    );
    Ok(archive)
}

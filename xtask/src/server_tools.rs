//! nginx for the remote-dataset tests (they start it themselves, serving
//! fixtures over HTTP and laid out as the Hugging Face Hub): Debian's
//! package unpacked into `target/tools/nginx` (`apt-get download`,
//! `dpkg-deb -x`), never installed into the system.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use crate::{root, run};

/// The nginx binary, fetched when missing.
pub fn nginx() -> Result<PathBuf> {
    let dir = root().join("target/tools/nginx");
    let binary = dir.join("root/usr/sbin/nginx");
    if binary.is_file() {
        return Ok(binary);
    }
    eprintln!("fetching Debian's nginx into {}", dir.display());
    std::fs::create_dir_all(&dir)?;
    // apt's progress to stderr: stdout is `cargo xtask env`'s exports.
    run(Command::new("apt-get").current_dir(&dir).args(["download", "nginx"]).stdout(std::io::stderr()))
        .context("apt-get download nginx (the remote-dataset tests serve files with it)")?;
    let deb = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("nginx_") && n.ends_with(".deb"))
        })
        .context("apt-get download nginx wrote no .deb")?;
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(dir.join("root")))?;
    anyhow::ensure!(binary.is_file(), "{} has no usr/sbin/nginx", deb.display());
    Ok(binary)
}

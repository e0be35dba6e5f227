//! NASM, which the x86-64 assembly of the CPU video decoders needs at build
//! time (rav1d's AV1, OpenH264's H.264): the one on PATH when it is recent
//! enough, else Debian's package unpacked into `target/tools/nasm`
//! (`apt-get download`, `dpkg-deb -x`), never installed into the system.
//! Where neither works the command stops and says how to install it.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{root, run};

/// The build script's own check, so that xtask and the build agree.
#[path = "../../crates/robocache-video/build/nasm.rs"]
#[allow(dead_code)]
mod nasm_probe;

/// The folder to put first on PATH for NASM (`None`: the system's serves,
/// or this machine needs none).
pub fn nasm() -> Result<Option<PathBuf>> {
    if !cfg!(target_arch = "x86_64") {
        // aarch64: the C compiler assembles rav1d's and OpenH264's code.
        return Ok(None);
    }
    let dir = root().join("target/tools/nasm");
    let bin = dir.join("root/usr/bin");
    if bin.join("nasm").is_file() {
        return Ok(Some(bin));
    }
    if system_nasm_is_recent() {
        return Ok(None);
    }
    eprintln!("fetching Debian's nasm into {} (the video decoders' assembly)", dir.display());
    let fetched = (|| -> Result<()> {
        std::fs::create_dir_all(&dir)?;
        run(Command::new("apt-get").current_dir(&dir).args(["download", "nasm"]).stdout(std::io::stderr()))?;
        let deb = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .context("apt-get download nasm wrote no .deb")?;
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(dir.join("root")))?;
        Ok(())
    })();
    if let Err(e) = fetched {
        bail!(
            "NASM >= 2.14 is needed to build the video decoders' assembly and could not be fetched ({e:#}): \
             install it (`sudo apt install nasm`, `sudo dnf install nasm`, `brew install nasm` or \
             `conda install -c conda-forge nasm`) and run the command again"
        );
    }
    anyhow::ensure!(bin.join("nasm").is_file(), "Debian's nasm package has no usr/bin/nasm");
    // OpenH264's build script looks for NASM once and never reruns: what
    // was built before NASM came would keep its C-only decoder.
    for profile in [&[][..], &["--release"][..]] {
        run(Command::new(env!("CARGO"))
            .current_dir(root())
            .args(["clean", "--quiet", "-p", "openh264-sys2"])
            .args(profile))?;
    }
    Ok(Some(bin))
}

/// Whether the system's NASM serves, found as robocache-video's build
/// script (and nasm-rs) finds it: `$NASM`, else `nasm` on PATH.
fn system_nasm_is_recent() -> bool {
    let nasm_env = std::env::var_os("NASM").map(PathBuf::from);
    let path = std::env::var_os("PATH");
    matches!(nasm_probe::probe(nasm_env.as_deref(), path.as_deref()), nasm_probe::Probe::Found { .. })
}

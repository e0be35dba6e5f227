//! Finding NASM, which the x86-64 assembly of rav1d (AV1) and OpenH264
//! (H.264) needs at build time: shared by `build.rs` and its test
//! (`tests/nasm_probe.rs`), so that what the build decides is tested.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The oldest NASM rav1d's assembly builds with.
pub const MIN_VERSION: (u32, u32) = (2, 14);

/// What looking for NASM found.
#[derive(Debug, PartialEq, Eq)]
pub enum Probe {
    /// A NASM of at least [`MIN_VERSION`].
    Found { program: PathBuf, version: (u32, u32) },
    /// A NASM older than [`MIN_VERSION`].
    TooOld { program: PathBuf, version: (u32, u32) },
    /// None that runs.
    Missing,
}

/// Looks for NASM as nasm-rs (which rav1d and OpenH264 call) does: the
/// program `$NASM` names, else `nasm` on `path`.
pub fn probe(nasm_env: Option<&Path>, path: Option<&std::ffi::OsStr>) -> Probe {
    let candidates: Vec<PathBuf> = match nasm_env {
        Some(program) => vec![program.to_path_buf()],
        None => path.map(|p| std::env::split_paths(p).map(|dir| dir.join("nasm")).collect()).unwrap_or_default(),
    };
    for program in candidates {
        let Ok(output) = Command::new(&program).arg("-v").output() else { continue };
        let text = String::from_utf8_lossy(&output.stdout);
        let Some(version) = parse_version(&text) else { continue };
        return match version >= MIN_VERSION {
            true => Probe::Found { program, version },
            false => Probe::TooOld { program, version },
        };
    }
    Probe::Missing
}

/// `(major, minor)` of `NASM version 2.16.01 compiled on ...`.
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let rest = text.split("NASM version ").nth(1)?;
    let number: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    let mut parts = number.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |m| m.parse().ok())?;
    Some((major, minor))
}

/// Why the build stops when the assembly is asked for and NASM is not
/// there, and the commands that fix it.
pub fn missing_message(probe: &Probe) -> String {
    let found = match probe {
        Probe::TooOld { program, version } => format!(
            "{} is NASM {}.{}, older than {}.{}",
            program.display(),
            version.0,
            version.1,
            MIN_VERSION.0,
            MIN_VERSION.1
        ),
        _ => "no `nasm` on PATH (nor in $NASM)".to_owned(),
    };
    format!(
        "robocache's video decoders are built with their x86-64 assembly, which needs NASM >= {}.{}: {found}.\n\
         Without it, AV1 decodes about 7x and H.264 2.5-6x slower on the CPU.\n\
         Install NASM with one of these, then build again:\n\
         \x20   sudo apt install nasm                  (Debian, Ubuntu)\n\
         \x20   sudo dnf install nasm                  (Fedora, RHEL)\n\
         \x20   brew install nasm                      (macOS)\n\
         \x20   conda install -c conda-forge nasm      (conda, no root needed)\n\
         (`cargo xtask` fetches NASM itself.) To build without the assembly (slower CPU decoding, \
         which robocache.build_info() and `robocache info` then report):\n\
         \x20   pip install ./crates/robocache-python -C maturin.build-args=--no-default-features\n\
         \x20   cargo build -p robocache-cli --no-default-features",
        MIN_VERSION.0, MIN_VERSION.1
    )
}

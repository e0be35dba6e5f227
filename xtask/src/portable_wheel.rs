//! `cargo xtask wheel --portable [--arch A]`: the Python package as an abi3
//! wheel tagged `manylinux_2_28` for x86-64 or aarch64, the one users
//! install without Rust, NASM or a compiler (docs/architecture.md,
//! "Portable wheels").
//!
//! - Built with `maturin --zig`: zig (PyPI's `ziglang`) compiles every C and
//!   C++ dependency (HDF5, OpenH264, mozjpeg, libde265, rav1d's assembly)
//!   and links against glibc 2.28's symbol versions, whatever this machine's
//!   glibc is, and links libc++ statically; the same command cross-builds
//!   aarch64 (rustup adds the target's standard library).
//! - Two libraries that the build scripts name as dynamic are archives:
//!   `libcuda` (the empty stub; robocache-cuda's driver loader opens the
//!   driver at run time) and libde265 (built from source). GNU ld falls back
//!   to an archive; zig's linker does not, so a folder of one-line linker
//!   scripts (`INPUT(/path/lib*.a)`) is put on the link's search path, and
//!   libde265's build script is asked for its archive
//!   (`SYSTEM_DEPS_LIBDE265_LINK=static`, system-deps' own setting).
//! - rav1d's aarch64 assembly includes a header its crates.io package lacks;
//!   robocache-video carries it (`rav1d-arm/`, on `CPATH` through
//!   `.cargo/config.toml`, for every build).
//! - `auditwheel show` (PyPI) must find the wheel consistent with
//!   `manylinux_2_28_<arch>`, or the command fails.
//!
//! The wheel lands in `target/wheels-portable/<arch>/`; its build folder is
//! `target/portable` (zig's objects are not the system compiler's).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::python_tools::{self, Needs, PythonTools};
use crate::{root, run};

/// The tools of this build, pinned: a zig upgrade changes the compiler of
/// every C dependency, so it is a decision, not a side effect.
const PORTABLE_PACKAGES: [&str; 3] = ["ziglang==0.17.1", "maturin==1.16.0", "auditwheel==6.8.2"];

/// The manylinux policy the wheels are built for: glibc 2.28 (Debian 10,
/// Ubuntu 18.10, RHEL 8 and everything after; JetPack 5's Ubuntu 20.04).
pub const MANYLINUX: &str = "manylinux_2_28";

/// The two architectures robot learning runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Arch {
    /// Workstations and clusters.
    #[value(name = "x86_64")]
    X86_64,
    /// Jetson Orin and GH200.
    #[value(name = "aarch64")]
    Aarch64,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    pub fn rust_target(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-unknown-linux-gnu",
            Arch::Aarch64 => "aarch64-unknown-linux-gnu",
        }
    }

    /// Debian's name of the architecture.
    pub fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Aarch64 => "arm64",
        }
    }

    /// This machine's architecture (aarch64 on aarch64, else x86-64).
    pub fn native() -> Arch {
        if cfg!(target_arch = "aarch64") {
            Arch::Aarch64
        } else {
            Arch::X86_64
        }
    }

    /// Whether this machine runs the architecture's code itself.
    pub fn is_native(self) -> bool {
        std::env::consts::ARCH == self.name()
    }

    pub fn platform_tag(self) -> String {
        format!("{MANYLINUX}_{}", self.name())
    }
}

/// The tools' virtual environment (`target/tools/portable`), created or
/// updated when its pins change.
pub fn portable_tools() -> Result<PathBuf> {
    let venv = root().join("target/tools/portable");
    let python = python_tools::create_venv(&venv)?;
    python_tools::install_once(&python, &venv.join("robocache-portable-packages.txt"), &PORTABLE_PACKAGES)?;
    Ok(venv.join("bin"))
}

/// The Rust standard library for `arch`, added with rustup when missing.
fn ensure_rust_target(arch: Arch) -> Result<()> {
    let installed = Command::new("rustup").args(["target", "list", "--installed"]).output();
    let listed = installed.as_ref().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    if listed.lines().any(|line| line.trim() == arch.rust_target()) {
        return Ok(());
    }
    if arch.is_native() && installed.is_err() {
        // No rustup: the toolchain's own target is there.
        return Ok(());
    }
    eprintln!("adding the Rust standard library for {} (rustup)", arch.rust_target());
    run(Command::new("rustup").args(["target", "add", arch.rust_target()]))
        .with_context(|| format!("the {} wheel needs Rust's {} target", arch.name(), arch.rust_target()))
}

/// The folder of linker scripts that stand for the archives the build
/// scripts name as dynamic libraries (see the module's docs).
fn archive_link_scripts() -> Result<PathBuf> {
    let dir = root().join("target/portable/link-scripts");
    std::fs::create_dir_all(&dir)?;
    let stub = root().join("crates/robocache-cuda/link/lib64/libcuda.a");
    anyhow::ensure!(stub.is_file(), "{} is missing (robocache-cuda's link stub)", stub.display());
    std::fs::write(dir.join("libcuda.so"), format!("INPUT({})\n", stub.display()))?;
    Ok(dir)
}

/// Builds the portable wheel for `arch`, checks it with `auditwheel show`,
/// and returns its path.
pub fn build(arch: Arch) -> Result<PathBuf> {
    let bin = portable_tools()?;
    ensure_rust_target(arch)?;
    // CMake for HDF5 and libde265; NASM for the x86-64 assembly.
    let tools = PythonTools::ensure_for(Needs::Build)?;
    let out = root().join("target/wheels-portable").join(arch.name());
    let _ = std::fs::remove_dir_all(&out);
    let scripts = archive_link_scripts()?;
    let started = std::time::Instant::now();
    let mut build = Command::new(bin.join("maturin"));
    build
        .current_dir(root())
        .args(["build", "--release", "--strip", "--zig", "--compatibility", MANYLINUX])
        .args(["--target", arch.rust_target()])
        .args(["-m", "crates/robocache-python/Cargo.toml", "-o"])
        .arg(&out)
        .arg("--")
        .arg("-L")
        .arg(format!("native={}", scripts.display()))
        .env("CARGO_TARGET_DIR", root().join("target/portable"))
        // `--strip` drops the line tables the release profile keeps for the
        // CLI's profiles: not generating them is the same machine code,
        // built faster (its own target folder, so nothing else rebuilds).
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("SYSTEM_DEPS_LIBDE265_LINK", "static");
    if arch == Arch::Aarch64 && !arch.is_native() {
        // A cross build: libde265's build reads the pkg-config file it just
        // wrote for the target.
        build.env("PKG_CONFIG_ALLOW_CROSS", "1");
    }
    tools.apply(&mut build);
    // maturin finds zig as `python -m ziglang` of the Python on PATH: the
    // portable tools' one, ahead of the project tools'.
    prepend_path(&mut build, &bin);
    run(&mut build)?;
    let wheel = std::fs::read_dir(&out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .with_context(|| format!("maturin wrote no wheel into {}", out.display()))?;
    audit(&bin, &wheel, arch)?;
    let size = std::fs::metadata(&wheel)?.len();
    eprintln!("built {} ({:.1} MB) in {:.0} s", wheel.display(), size as f64 / 1e6, started.elapsed().as_secs_f64());
    Ok(wheel)
}

/// `auditwheel show`: the wheel must be consistent with the manylinux tag
/// it carries.
fn audit(bin: &Path, wheel: &Path, arch: Arch) -> Result<()> {
    let output =
        Command::new(bin.join("auditwheel")).arg("show").arg(wheel).output().context("cannot start auditwheel")?;
    let report = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    eprintln!("{}", report.trim_end());
    let tag = arch.platform_tag();
    let consistent = report.split_whitespace().collect::<Vec<_>>().join(" ");
    if !output.status.success()
        || !consistent.contains(&format!("consistent with the following platform tag: \"{tag}\""))
    {
        bail!("auditwheel does not find {} consistent with {tag}", wheel.display());
    }
    Ok(())
}

fn prepend_path(command: &mut Command, dir: &Path) {
    let current = command
        .get_envs()
        .find(|(k, _)| *k == "PATH")
        .and_then(|(_, v)| v.map(|v| v.to_owned()))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    let mut dirs = vec![dir.to_path_buf()];
    dirs.extend(std::env::split_paths(&current));
    if let Ok(joined) = std::env::join_paths(dirs) {
        command.env("PATH", joined);
    }
}

//! Project automation, run as `cargo xtask <command>` (rust-analyzer's xtask pattern).
//!
//! - `test [ARGS]`: the workspace's tests (`cargo test --workspace ARGS`)
//!   with the Python tools (CMake, h5py, robomimic, maturin, pytest, torch)
//!   installed from PyPI into `target/tools/python`, then the Python
//!   package built into that environment (`maturin develop`) and its pytest
//!   suite. The README's test command.
//! - `wheel`: the Python package's wheel (release) into `target/wheels`, as
//!   `pip install` builds it on this machine; `wheel --portable [--arch A]`:
//!   the abi3 `manylinux_2_28` wheel for x86-64 or aarch64, built with zig
//!   and checked by `auditwheel show` (`portable_wheel`).
//! - `sdist`: the source distribution (`target/sdist`), with the
//!   workspace's cargo settings (`sdist`).
//! - `test-wheel [--arch A] [--wheel W]`: the portable wheel (built first
//!   unless given) installed and tested in a Debian bullseye chroot with no
//!   compiler; aarch64 under qemu (`userland`), every command in private
//!   mount and PID namespaces (`sandbox`).
//! - `userland-run --root DIR -- CMD`: a command in a userland folder
//!   under `target/`, in the same sandbox (to look around the test userland).
//! - `run [ARGS]`: the `robocache` binary (release) with the same tools.
//! - `env`: the tools as shell exports, for `eval "$(cargo xtask env)"`.
//! - `bench-numpy`: the CPU backend against NumPy on the same workloads, in one
//!   run, with NumPy installed from PyPI into `target/tools/python`.
//! - `build-ptx [--check]`: `kernels/*.cu` to PTX for sm_80, sm_90 and sm_120
//!   with nvcc 13.0 (from `CUDA_PATH`, else installed from PyPI into
//!   `target/tools/cuda`); `--check` fails when the committed PTX is stale.
//! - `driver-loader [--check]`: regenerates robocache-cuda's driver loader
//!   (`crates/robocache-cuda/src/driver_loader.c`) from `cust_raw`'s list of
//!   driver functions; `--check` fails when the committed one is stale.
//! - `gpu-bundle`: the GPU test and benchmark binaries in one folder to carry
//!   to a GPU machine (no Rust needed there).
//! - `lerobot-wheels`: LeRobot and what it needs beyond the GPU machines'
//!   image, as wheels for their Python 3.12 (the bundle's `lerobot` part).

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod cuda_tools;
mod nasm_tools;
mod portable_wheel;
mod python_tools;
mod sandbox;
mod sdist;
mod server_tools;
mod userland;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use python_tools::Needs;

#[derive(Debug, Parser)]
#[command(name = "xtask", about = "robocache project automation")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Run the workspace's tests with the project's tools (the README's test command).
    Test {
        /// Passed to `cargo test --workspace`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build and run the `robocache` binary (release) with the project's tools.
    Run {
        /// Passed to `robocache`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Print the tools' settings as shell exports: `eval "$(cargo xtask env)"`.
    Env {
        /// Only the build's tools (CMake, maturin, NASM), not the tests'
        /// (PyTorch, the oracles' packages, nginx): what clippy and a build need.
        #[arg(long)]
        build: bool,
    },
    /// Time the CPU backend against NumPy (benches/cpu_vs_numpy.py) and print the ratios.
    BenchNumpy {
        /// Timed calls per workload.
        #[arg(long, default_value_t = 10)]
        repeats: usize,
    },
    /// Compile kernels/*.cu to committed PTX for every supported arch.
    BuildPtx {
        /// Fail if the committed PTX differs from what the sources produce.
        #[arg(long)]
        check: bool,
    },
    /// Regenerate robocache-cuda's driver loader from cust_raw's bindings.
    DriverLoader {
        /// Fail if the committed loader differs from what the bindings produce.
        #[arg(long)]
        check: bool,
    },
    /// Build the GPU test and benchmark binaries into target/gpu-bundle.
    GpuBundle,
    /// Build the Python package's wheel (release) into target/wheels; with
    /// --portable, the manylinux_2_28 wheel into target/wheels-portable/ARCH.
    Wheel {
        /// The abi3 manylinux_2_28 wheel (zig, auditwheel-checked) that installs without a compiler.
        #[arg(long)]
        portable: bool,
        /// The portable wheel's architecture (default: this machine's).
        #[arg(long, value_enum, requires = "portable")]
        arch: Option<portable_wheel::Arch>,
    },
    /// Build the Python package's source distribution into target/sdist.
    Sdist,
    /// Install the portable wheel into a Debian bullseye chroot with no compiler and run its tests there.
    TestWheel {
        /// The userland's architecture (aarch64: under qemu-user-static); default: this machine's.
        #[arg(long, value_enum)]
        arch: Option<portable_wheel::Arch>,
        /// A wheel to test instead of building the portable one.
        #[arg(long)]
        wheel: Option<PathBuf>,
    },
    /// LeRobot 0.6.1, PyAV and torchcodec as wheels for the GPU machines'
    /// Python 3.12, into target/lerobot-wheels (the bundle's `lerobot` part).
    LerobotWheels,
    /// Run a program chrooted into a userland folder under target/, in the
    /// sandbox test-wheel uses (private mount and PID namespaces, their own
    /// /proc and /dev): to look around the test userland.
    UserlandRun {
        /// The userland folder (under the checkout's target/).
        #[arg(long)]
        root: PathBuf,
        /// The program (a path in the userland) and its arguments.
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Task::Test { args } => {
            cargo(&["test", "--workspace", "--exclude", "robocache-python"], &args)?;
            python_tests()
        }
        Task::Wheel { portable: false, .. } => {
            wheel(&root().join("target/wheels")).map(|path| println!("{}", path.display()))
        }
        Task::Wheel { portable: true, arch } => {
            portable_wheel::build(arch.unwrap_or_else(portable_wheel::Arch::native))
                .map(|path| println!("{}", path.display()))
        }
        Task::Sdist => sdist::build().map(|path| println!("{}", path.display())),
        Task::TestWheel { arch, wheel } => {
            let arch = arch.unwrap_or_else(portable_wheel::Arch::native);
            let wheel = match wheel {
                Some(wheel) => wheel,
                None => portable_wheel::build(arch)?,
            };
            userland::test_wheel(arch, &wheel)
        }
        Task::Run { args } => {
            let mut all = vec!["--".to_owned()];
            all.extend(args);
            cargo_with(Needs::Build, &["run", "--release", "--quiet", "-p", "robocache-cli"], &all)
        }
        Task::Env { build } => {
            let needs = if build { Needs::Build } else { Needs::Tests };
            python_tools::PythonTools::ensure_for(needs).map(|tools| print!("{}", tools.exports()))
        }
        Task::BenchNumpy { repeats } => bench_numpy(repeats),
        Task::BuildPtx { check } => cuda_tools::build_ptx(check),
        Task::DriverLoader { check } => cuda_tools::driver_loader(check),
        Task::GpuBundle => cuda_tools::gpu_bundle(),
        Task::LerobotWheels => cuda_tools::lerobot_wheels(),
        Task::UserlandRun { root: userland, command } => userland_run(&userland, &command),
    }
}

/// [`Task::UserlandRun`]: `command` in the sandbox of `userland`, which
/// must lie under the checkout's `target/`.
fn userland_run(userland: &Path, command: &[String]) -> Result<()> {
    let target = root().join("target").canonicalize().context("the checkout has no target/ folder")?;
    let userland = userland.canonicalize().with_context(|| format!("no folder {}", userland.display()))?;
    anyhow::ensure!(
        userland.starts_with(&target) && userland != target,
        "{} is not a folder under {}: a userland lives in target/",
        userland.display(),
        target.display()
    );
    let (program, args) = command.split_first().context("no program to run")?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&mut sandbox::Sandbox::new(&userland).command(program, &args))
}

/// The workspace root (xtask lives one level below it).
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

pub(crate) fn run(command: &mut Command) -> Result<()> {
    let status = command.status().with_context(|| format!("cannot start {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

/// Runs cargo with `args` and `extra`, the project's tools on its PATH.
fn cargo(args: &[&str], extra: &[String]) -> Result<()> {
    cargo_with(Needs::Tests, args, extra)
}

/// [`cargo`] with only the tools `needs` names installed.
fn cargo_with(needs: Needs, args: &[&str], extra: &[String]) -> Result<()> {
    let tools = python_tools::PythonTools::ensure_for(needs)?;
    let mut command = Command::new(env!("CARGO"));
    command.current_dir(root()).args(args).args(extra);
    tools.apply(&mut command);
    run(&mut command)
}

/// The Python package built into the tools' environment (`maturin
/// develop`, dev profile) and its pytest suite.
fn python_tests() -> Result<()> {
    let tools = python_tools::PythonTools::ensure()?;
    let mut develop = Command::new(tools.bin.join("maturin"));
    develop
        .current_dir(root())
        .args(["develop", "--quiet", "-m", "crates/robocache-python/Cargo.toml"])
        .env("VIRTUAL_ENV", root().join("target/tools/python"));
    tools.apply(&mut develop);
    run(&mut develop)?;
    let mut pytest = Command::new(tools.bin.join("python"));
    pytest.current_dir(root()).args(["-m", "pytest", "-q", "-rs", "crates/robocache-python/tests"]);
    tools.apply(&mut pytest);
    run(&mut pytest)
}

/// The Python package's wheel (release, abi3) in `out`, as `pip install`
/// builds it (its default features: the decoders' assembly, NASM on
/// PATH); returns its path.
pub(crate) fn wheel(out: &Path) -> Result<PathBuf> {
    let tools = python_tools::PythonTools::ensure_for(Needs::Build)?;
    let _ = std::fs::remove_dir_all(out);
    let mut build = Command::new(tools.bin.join("maturin"));
    build
        .current_dir(root())
        .args(["build", "--release", "--strip", "--quiet", "-m", "crates/robocache-python/Cargo.toml", "-o"])
        .arg(out);
    tools.apply(&mut build);
    run(&mut build)?;
    std::fs::read_dir(out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .with_context(|| format!("maturin wrote no wheel into {}", out.display()))
}

fn bench_numpy(repeats: usize) -> Result<()> {
    let tools = python_tools::PythonTools::ensure()?;
    let mut build = Command::new(env!("CARGO"));
    build.current_dir(root()).args(["build", "--release", "-p", "robocache-cli"]);
    tools.apply(&mut build);
    run(&mut build)?;
    let python = tools.bin.join("python");
    let out = root().join("target/bench");
    std::fs::create_dir_all(&out)?;
    run(Command::new(python)
        .arg(root().join("benches/cpu_vs_numpy.py"))
        .arg("--robocache")
        .arg(root().join("target/release/robocache"))
        .args(["--repeats", &repeats.to_string(), "--json"])
        .arg(out.join("cpu_vs_numpy.json")))
}

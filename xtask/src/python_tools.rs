//! The tools the project needs, installed from PyPI into
//! `target/tools/python` (never by hand), in two sets, so that a command
//! installs only what it runs:
//! - to build (`run`, `wheel`, `gpu-bundle`): CMake ≥ 3.26, which the
//!   static HDF5 build (`hdf5-metno-src`) and libde265 need and Debian 12
//!   does not ship, maturin (the Python package's build backend), and NASM
//!   for the decoders' assembly (`nasm_tools`);
//! - to test (`test`, `env`), in addition: h5py and NumPy, the independent
//!   writers of the dataset tests' files; robomimic 0.3.0 (without its
//!   PyTorch dependency: the tests run its `SequenceDataset` with a
//!   stand-in module), tqdm and termcolor it imports; Pillow, whose
//!   `Image.resize` the frame resize equals bit for bit; rosbags, pyarrow
//!   and PyAV, the other tools' readers the third-party data is checked
//!   against; OpenCV, ACT's JPEG writer and reader of ALOHA's frames;
//!   zarr-python 2 and imagecodecs, diffusion policy's and UMI's; torchvision,
//!   the oracle of the image augmentation; pytest and
//!   PyTorch (its CUDA build, the one PyPI has, without Triton, which only
//!   `torch.compile` uses); moto's S3 server and boto3 and nginx (`server_tools`) for the
//!   remote-dataset tests.
//!
//! The test tools are gigabytes (PyTorch's CUDA libraries), and CI installs
//! them while clippy fills `target/` on a disk it shares: one `pip install`
//! of them all would hold every downloaded wheel beside the whole install.
//! [`install_staged`] resolves once, then installs the resolved packages with
//! the largest ones a call each, so that at most one large wheel waits on
//! disk at a time.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;

use crate::{root, run};

/// What building robocache needs.
const BUILD_PACKAGES: [&str; 2] = ["cmake>=3.26,<5", "maturin>=1.7,<2"];
/// What its tests need beyond that.
const TEST_PACKAGES: [&str; 15] = [
    "numpy>=1.26",
    "h5py>=3.10",
    "tqdm",
    "termcolor",
    "pytest>=7",
    // The Python package's tensors in and out are what the tests exchange;
    // a CPU machine runs torch's CUDA build without a driver.
    "torch>=2.4",
    // The S3-compatible server of the remote-dataset tests (and boto3, which
    // uploads their fixtures).
    "moto[server]>=5",
    // Pillow, the reference frame resizes are checked against (13 changed
    // the order of its passes in some downscales: docs/semantics.md).
    "pillow>=10,<13",
    // The readers of other tools' data that the third-party tests take as
    // oracles: rosbags for ROS 2 bags (pure Python), pyarrow for LeRobot's
    // parquet, PyAV (FFmpeg) for its video.
    "rosbags==0.11.9",
    "pyarrow>=15",
    "av>=12",
    // OpenCV: ACT writes and reads ALOHA's compressed frames with
    // cv2.imencode/imdecode, the oracle of robocache's JPEG decode of them.
    "opencv-python-headless>=4.8",
    // zarr-python 2 and imagecodecs (JPEG XL): the writers and readers of
    // diffusion policy's and UMI's replay buffers, the oracle of the Zarr
    // reader (the committed format-3 fixtures were written by zarr-python 3).
    "zarr>=2.18,<3",
    "imagecodecs>=2024.1",
    // torchvision: its v2 functional operations are the oracle of the
    // augmentation (crates/robocache-augment/tests/torchvision.rs).
    "torchvision",
];
const ROBOMIMIC: &str = "robomimic==0.3.0";

/// Which set of tools a command needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Build,
    Tests,
}

/// The virtual environment with the tools, created or updated when stale.
#[derive(Debug)]
pub struct PythonTools {
    pub bin: PathBuf,
    /// nginx for the remote-dataset tests (`server_tools`), with the test tools.
    pub nginx: Option<PathBuf>,
    /// The folder holding NASM, where the system's is missing or too old.
    pub nasm: Option<PathBuf>,
}

impl PythonTools {
    /// Everything: the build tools and the test tools.
    pub fn ensure() -> Result<Self> {
        Self::ensure_for(Needs::Tests)
    }

    pub fn ensure_for(needs: Needs) -> Result<Self> {
        let venv = root().join("target/tools/python");
        let python = create_venv(&venv)?;
        let pip = |args: &[&str]| pip_install(&python, args);
        install_once(&python, &venv.join("robocache-build-packages.txt"), &BUILD_PACKAGES)?;
        let mut nginx = None;
        if needs == Needs::Tests {
            let test_stamp = venv.join("robocache-test-packages.txt");
            let wanted = format!("{}\n{ROBOMIMIC}\n", TEST_PACKAGES.join("\n"));
            if std::fs::read_to_string(&test_stamp).ok().as_deref() != Some(wanted.as_str()) {
                eprintln!("installing {} into {} (PyPI)", TEST_PACKAGES.join(", "), venv.display());
                install_staged(&python, &venv.join("robocache-test-resolution.json"), &TEST_PACKAGES)?;
                pip(&["--no-deps", ROBOMIMIC])?;
                std::fs::write(&test_stamp, wanted)?;
            }
            nginx = Some(crate::server_tools::nginx()?);
        }
        Ok(PythonTools { bin: venv.join("bin"), nginx, nasm: crate::nasm_tools::nasm()? })
    }

    /// The folders to put first on PATH.
    fn path_dirs(&self) -> Vec<PathBuf> {
        std::iter::once(self.bin.clone()).chain(self.nasm.clone()).collect()
    }

    /// Puts the tools on `command`'s PATH and names them for the build
    /// scripts and tests: `CMAKE` (the cmake crate), `ROBOCACHE_PYTHON`
    /// and, with the test tools, `ROBOCACHE_NGINX`.
    pub fn apply(&self, command: &mut Command) {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = self.path_dirs();
        paths.extend(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(paths) {
            command.env("PATH", joined);
        }
        command.env("CMAKE", self.bin.join("cmake")).env("ROBOCACHE_PYTHON", self.bin.join("python"));
        if let Some(nginx) = &self.nginx {
            command.env("ROBOCACHE_NGINX", nginx);
        }
    }

    /// The same settings as shell `export`s, for `eval "$(cargo xtask env)"`.
    pub fn exports(&self) -> String {
        let dirs: Vec<String> = self.path_dirs().iter().map(|d| d.display().to_string()).collect();
        let mut out = format!(
            "export PATH=\"{}:$PATH\"\nexport CMAKE=\"{bin}/cmake\"\nexport ROBOCACHE_PYTHON=\"{bin}/python\"\n",
            dirs.join(":"),
            bin = self.bin.display(),
        );
        if let Some(nginx) = &self.nginx {
            out.push_str(&format!("export ROBOCACHE_NGINX=\"{}\"\n", nginx.display()));
        }
        out
    }
}

/// The Python of the virtual environment `venv`, created if missing, with
/// a pip that resolves from the index's metadata files (PEP 658) instead of
/// downloading every wheel to read its dependencies: Debian 12's venv comes
/// with pip 23, whose `--dry-run` of the test tools downloaded PyTorch's
/// 3 GB of wheels once more.
pub fn create_venv(venv: &Path) -> Result<PathBuf> {
    let python = venv.join("bin/python");
    if !python.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
        pip_install(&python, &["--upgrade", "pip>=25"])?;
    }
    Ok(python)
}

/// `pip install ARGS` with `python`, quietly and without pip's wheel cache
/// (torch's CUDA libraries would keep a second copy, gigabytes, beside
/// target/ on a disk CI shares).
pub fn pip_install(python: &Path, args: &[&str]) -> Result<()> {
    run(Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-cache-dir"])
        .args(args))
}

/// Packages resolved but not installed: Triton (1 GB installed) serves only
/// `torch.compile`, which no test calls; torch imports it lazily.
const LEFT_OUT: [&str; 1] = ["triton"];

/// Installs `packages` and their dependencies as pip resolves them, in
/// stages: `pip install --dry-run --report` resolves the whole set into
/// `report` (exact versions), then the large packages (PyTorch and its
/// NVIDIA libraries) are installed a `pip install --no-deps` each and the
/// rest in one more, so pip never holds all the downloaded wheels and the
/// whole install at once. What [`LEFT_OUT`] names is not installed.
pub fn install_staged(python: &Path, report: &Path, packages: &[&str]) -> Result<()> {
    run(Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--dry-run", "--report"])
        .arg(report)
        .args(packages))?;
    let text = std::fs::read_to_string(report)?;
    let resolved =
        resolved_packages(&text).map_err(|e| anyhow::anyhow!("pip's resolution {}: {e}", report.display()))?;
    let (large, small): (Vec<_>, Vec<_>) = resolved
        .into_iter()
        .filter(|(name, _)| !LEFT_OUT.contains(&name.as_str()))
        .map(|(name, version)| format!("{name}=={version}"))
        .partition(|pin| pin.starts_with("torch==") || pin.starts_with("nvidia-"));
    for pin in &large {
        pip_install(python, &["--no-deps", pin])?;
    }
    if !small.is_empty() {
        let mut args = vec!["--no-deps"];
        args.extend(small.iter().map(String::as_str));
        pip_install(python, &args)?;
    }
    Ok(())
}

/// The `(name, version)` of each package a `pip install --report` would
/// install, names normalised as PyPI compares them.
fn resolved_packages(report: &str) -> std::result::Result<Vec<(String, String)>, String> {
    let json: serde_json::Value = serde_json::from_str(report).map_err(|e| e.to_string())?;
    let install = json.get("install").and_then(|v| v.as_array()).ok_or("no \"install\" list")?;
    install
        .iter()
        .map(|item| {
            let metadata = item.get("metadata").ok_or("an install entry without \"metadata\"")?;
            let field = |key: &str| {
                metadata.get(key).and_then(|v| v.as_str()).ok_or(format!("an install entry without metadata.{key}"))
            };
            let name = field("name")?.to_ascii_lowercase().replace(['_', '.'], "-");
            Ok((name, field("version")?.to_owned()))
        })
        .collect()
}

/// Installs `packages` into `python`'s environment unless `stamp` says the
/// same list is already in.
pub fn install_once(python: &Path, stamp: &Path, packages: &[&str]) -> Result<()> {
    let wanted = format!("{}\n", packages.join("\n"));
    if std::fs::read_to_string(stamp).ok().as_deref() != Some(wanted.as_str()) {
        let venv = python.parent().and_then(Path::parent).unwrap_or(python);
        eprintln!("installing {} into {} (PyPI)", packages.join(", "), venv.display());
        pip_install(python, packages)?;
        std::fs::write(stamp, wanted)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::resolved_packages;

    #[test]
    fn a_reports_packages_are_its_names_and_versions() {
        let report = r#"{"version": "1", "install": [
            {"download_info": {"url": "https://x/torch.whl"}, "metadata": {"name": "torch", "version": "2.9.1"}},
            {"metadata": {"name": "NVIDIA_cublas.cu12", "version": "12.8.4.1"}}]}"#;
        assert_eq!(
            resolved_packages(report).unwrap(),
            [("torch".to_owned(), "2.9.1".to_owned()), ("nvidia-cublas-cu12".to_owned(), "12.8.4.1".to_owned())]
        );
        assert!(resolved_packages(r#"{"install": [{"metadata": {"name": "x"}}]}"#).unwrap_err().contains("version"));
        assert!(resolved_packages("{}").unwrap_err().contains("install"));
    }
}

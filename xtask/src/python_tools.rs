//! The Python tools the project needs, installed from PyPI into
//! `target/tools/python` (never by hand):
//! - CMake ≥ 3.26, which the static HDF5 build (`hdf5-metno-src`) needs and
//!   Debian 12 does not ship;
//! - h5py and NumPy, the independent writers of the dataset tests' files;
//! - robomimic 0.3.0 (without its PyTorch dependency: the tests run its
//!   `SequenceDataset` with a stand-in module), tqdm and termcolor it imports;
//! - Pillow, whose `Image.resize` the frame resize equals bit for bit;
//! - moto's S3 server and boto3 for the remote-dataset tests (and nginx,
//!   from Debian's package: `server_tools`).

use std::path::PathBuf;
use std::process::Command;

use anyhow::Result;

use crate::{root, run};

/// What `target/tools/python` holds; a change re-runs pip.
const PACKAGES: [&str; 10] = [
    "cmake>=3.26,<5",
    "numpy>=1.26",
    "h5py>=3.10",
    "tqdm",
    "termcolor",
    // The Python package: its build backend, its tests, and PyTorch (its
    // tensors in and out are what the tests exchange; a CPU machine runs
    // torch's CUDA build without a driver).
    "maturin>=1.7,<2",
    "pytest>=7",
    "torch>=2.4",
    // The S3-compatible server of the remote-dataset tests (and boto3, which
    // uploads their fixtures).
    "moto[server]>=5",
    // Pillow, the reference frame resizes are checked against (13 changed
    // the order of its passes in some downscales: docs/semantics.md).
    "pillow>=10,<13",
];
const ROBOMIMIC: &str = "robomimic==0.3.0";

/// The virtual environment with the tools, created or updated when stale.
pub struct PythonTools {
    pub bin: PathBuf,
    /// nginx for the remote-dataset tests (`server_tools`).
    pub nginx: PathBuf,
}

impl PythonTools {
    pub fn ensure() -> Result<Self> {
        let venv = root().join("target/tools/python");
        let python = venv.join("bin/python");
        let stamp = venv.join("robocache-packages.txt");
        let wanted = format!("{}\n{ROBOMIMIC}\n", PACKAGES.join("\n"));
        if !python.exists() {
            run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        }
        if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
            eprintln!("installing {} into {} (PyPI)", PACKAGES.join(", "), venv.display());
            let pip = |args: &[&str]| {
                run(Command::new(&python)
                    .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
                    .args(args))
            };
            pip(&PACKAGES)?;
            pip(&["--no-deps", ROBOMIMIC])?;
            std::fs::write(&stamp, wanted)?;
        }
        Ok(PythonTools { bin: venv.join("bin"), nginx: crate::server_tools::nginx()? })
    }

    /// Puts the tools on `command`'s PATH and names them for the build
    /// scripts and tests: `CMAKE` (the cmake crate) and `ROBOCACHE_PYTHON`.
    pub fn apply(&self, command: &mut Command) {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![self.bin.clone()];
        paths.extend(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(paths) {
            command.env("PATH", joined);
        }
        command
            .env("CMAKE", self.bin.join("cmake"))
            .env("ROBOCACHE_PYTHON", self.bin.join("python"))
            .env("ROBOCACHE_NGINX", &self.nginx);
    }

    /// The same settings as shell `export`s, for `eval "$(cargo xtask env)"`.
    pub fn exports(&self) -> String {
        format!(
            "export PATH=\"{bin}:$PATH\"\nexport CMAKE=\"{bin}/cmake\"\nexport ROBOCACHE_PYTHON=\"{bin}/python\"\nexport ROBOCACHE_NGINX=\"{nginx}\"\n",
            bin = self.bin.display(),
            nginx = self.nginx.display()
        )
    }
}

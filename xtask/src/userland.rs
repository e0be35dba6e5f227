//! `cargo xtask test-wheel [--arch A] [--wheel W]`: a portable wheel
//! installed and tested where users are — a Debian bullseye userland
//! (glibc 2.31 and Python 3.9, as Ubuntu 20.04 and JetPack 5 have) with
//! nothing but Python and pip: no Rust, no NASM, no compiler.
//!
//! - The userland is a `debootstrap` chroot from Debian's packages
//!   (`target/userland/bullseye-<arch>`, made once). debootstrap itself is
//!   Debian's package unpacked into `target/tools/debian`, never installed.
//! - aarch64 runs under `qemu-user-static` (Debian's package, unpacked there
//!   too), registered with the kernel's `binfmt_misc` with the `F` flag so
//!   the chroot needs no copy of it. The whole suite runs under emulation
//!   too (about a minute).
//! - In the chroot: a venv, `pip install` of the wheel (timed), `import
//!   robocache` (timed: the first import after install, and warm),
//!   `build_info()` checked (the platform tag, every CPU decoder with its
//!   assembly), then the test tools from PyPI as binary wheels and the
//!   package's pytest suite from a copy of the tests and their fixtures (the
//!   checkout's `../shared/data` mounted read-only beside it).
//! - Every command in the chroot runs in a sandbox of its own (`sandbox`):
//!   private mount and PID namespaces with their own `/proc` and a small
//!   tmpfs `/dev`, so no mount is ever seen by the host or outlives the
//!   command, and a killed run leaves nothing that removing `target/`
//!   could follow out of it. Nothing is written outside `target/`: the
//!   host's certificate bundle goes into the run's own fresh folder, its
//!   resolver configuration is mounted read-only, the page cache is left
//!   alone, and a `binfmt_misc` entry this run registered is removed when
//!   it ends.
//!
//! Needs root (namespaces, chroot, mounts), as CI has.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::portable_wheel::Arch;
use crate::sandbox::Sandbox;
use crate::{root, run};

/// The Debian release of the test userland: glibc 2.31, Python 3.9.
const SUITE: &str = "bullseye";
/// What the userland holds beyond Debian's minimal base.
const USERLAND_PACKAGES: &str = "python3,python3-venv,ca-certificates";
/// The test tools installed into the chroot's venv, binary wheels only.
/// Left out, and the tests that need them skip: PyTorch (PyPI's Linux build
/// is the CUDA one, gigabytes with its libraries; the checkout's CI runs
/// those tests) and rosbags 0.11.9 (it needs Python 3.10).
const TEST_PACKAGES: [&str; 5] = ["pytest>=7", "h5py>=3", "pillow>=10,<13", "pyarrow>=15", "av>=12"];

/// Installs `wheel` into a fresh bullseye userland of `arch` and runs its
/// tests there; prints the times.
pub fn test_wheel(arch: Arch, wheel: &Path) -> Result<()> {
    let started = Instant::now();
    let tools = debian_tools(arch)?;
    let _qemu = match arch.is_native() {
        true => None,
        false => Some(register_qemu(&tools)?),
    };
    let userland = userland(arch, &tools)?;
    let chroot = prepare(&userland, wheel)?;

    let found = chroot.output("command -v cc gcc c++ g++ clang rustc cargo nasm zig || true")?;
    if !found.trim().is_empty() {
        bail!("the test userland has a compiler ({}): it would prove nothing", found.trim());
    }
    eprintln!(
        "== {}",
        chroot
            .output(". /etc/os-release; echo \"$PRETTY_NAME, $(ldd --version | head -1), $(python3 --version)\"")?
            .trim()
    );

    chroot.run("rm -rf /venv && python3 -m venv /venv")?;
    let install = Instant::now();
    chroot.run("/venv/bin/pip install --quiet --no-cache-dir --only-binary :all: /robocache/wheels/*.whl")?;
    let install_s = install.elapsed().as_secs_f64();

    // The first import after install (the page cache as the install left
    // it: dropping it would reach the whole host); warm: the median of five more.
    let import = "cd /tmp && /venv/bin/python -c 'import time; t = time.perf_counter(); import robocache; print(time.perf_counter() - t)'";
    let cold_s: f64 = chroot.output(import)?.trim().parse().context("import time")?;
    let mut warm: Vec<f64> =
        (0..5).map(|_| chroot.output(import)?.trim().parse::<f64>().context("import time")).collect::<Result<_>>()?;
    warm.sort_by(f64::total_cmp);
    let warm_s = warm[warm.len() / 2];

    let tag = arch.platform_tag();
    chroot.run(&format!(
        "cd /robocache/src/main/crates/robocache-python/tests && /venv/bin/python -c '
import json, robocache
assert robocache.__file__.startswith(\"/venv/\"), robocache.__file__
info = robocache.build_info()
print(json.dumps({{k: info[k] for k in (\"platform\", \"glibc\", \"cpu_video_decoders_have_assembly\", \"ptx_archs\")}}))
assert info[\"platform\"] == \"{tag}\", info[\"platform\"]
assert info[\"cpu_video_decoders_have_assembly\"], info[\"video_decoders\"]
'"
    ))?;

    let deps = Instant::now();
    chroot.run(&format!(
        "/venv/bin/pip install --quiet --no-cache-dir --only-binary :all: {}",
        TEST_PACKAGES.iter().map(|p| format!("'{p}'")).collect::<Vec<_>>().join(" ")
    ))?;
    let deps_s = deps.elapsed().as_secs_f64();

    let pytest = Instant::now();
    chroot.run(
        "cd /robocache/src/main/crates/robocache-python && \
         PYTHONDONTWRITEBYTECODE=1 /venv/bin/python -m pytest -q -p no:cacheprovider -rs tests",
    )?;
    let pytest_s = pytest.elapsed().as_secs_f64();

    let size = std::fs::metadata(wheel)?.len() as f64 / 1e6;
    println!("wheel                {}", wheel.file_name().unwrap_or_default().to_string_lossy());
    println!(
        "userland             Debian {SUITE} {} ({})",
        arch.debian(),
        if arch.is_native() { "native" } else { "qemu-user" }
    );
    println!("wheel size           {size:.1} MB");
    println!("pip install          {install_s:.1} s");
    println!("import robocache     {:.0} ms first, {:.0} ms warm", cold_s * 1e3, warm_s * 1e3);
    println!("test tools install   {deps_s:.0} s");
    println!("pytest               {pytest_s:.0} s");
    println!("whole command        {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Debian's debootstrap (and, for a foreign architecture, qemu-user-static)
/// unpacked into `target/tools/debian/root`.
fn debian_tools(arch: Arch) -> Result<PathBuf> {
    let dir = root().join("target/tools/debian");
    let unpacked = dir.join("root");
    let mut wanted = vec![("debootstrap", unpacked.join("usr/sbin/debootstrap"))];
    if !arch.is_native() {
        wanted.push(("qemu-user-static", unpacked.join(format!("usr/bin/qemu-{}-static", arch.name()))));
    }
    for (package, file) in wanted {
        if file.is_file() {
            continue;
        }
        eprintln!("fetching Debian's {package} into {}", dir.display());
        let download = dir.join(package);
        let _ = std::fs::remove_dir_all(&download);
        std::fs::create_dir_all(&download)?;
        run(Command::new("apt-get").current_dir(&download).args(["download", package]).stdout(std::io::stderr()))
            .with_context(|| format!("cannot fetch Debian's {package} (apt-get download)"))?;
        let deb = std::fs::read_dir(&download)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .with_context(|| format!("apt-get download {package} wrote no .deb"))?;
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked))?;
        anyhow::ensure!(file.is_file(), "Debian's {package} has no {}", file.display());
    }
    Ok(unpacked)
}

/// Lets the kernel run aarch64 programs through qemu: a `binfmt_misc`
/// entry with the `F` flag (the interpreter is opened now, so the chroot
/// needs no copy of it). An entry already there is kept (and left); one
/// this run registers is removed, and a `binfmt_misc` it mounted
/// unmounted, when the returned guard drops.
fn register_qemu(tools: &Path) -> Result<QemuRegistration> {
    let binfmt = Path::new("/proc/sys/fs/binfmt_misc");
    let mut registration = QemuRegistration { entry: None, mounted: None };
    if !binfmt.join("register").exists() {
        run(Command::new("mount").args(["-t", "binfmt_misc", "binfmt_misc"]).arg(binfmt))
            .context("binfmt_misc is not mounted and cannot be (aarch64 tests need it)")?;
        registration.mounted = Some(binfmt.to_path_buf());
    }
    let entry = binfmt.join("qemu-aarch64");
    if entry.exists() {
        return Ok(registration);
    }
    let qemu = tools.join("usr/bin/qemu-aarch64-static");
    let magic = r"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00";
    let mask = r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff";
    std::fs::write(binfmt.join("register"), format!(":qemu-aarch64:M::{magic}:{mask}:{}:F", qemu.display()))
        .context("cannot register qemu-aarch64 with binfmt_misc")?;
    registration.entry = Some(entry);
    Ok(registration)
}

/// What [`register_qemu`] changed, undone on drop.
#[derive(Debug)]
struct QemuRegistration {
    entry: Option<PathBuf>,
    mounted: Option<PathBuf>,
}

impl Drop for QemuRegistration {
    fn drop(&mut self) {
        if let Some(entry) = &self.entry {
            // Writing -1 to an entry removes it.
            if std::fs::write(entry, "-1").is_err() {
                eprintln!("warning: cannot remove the binfmt_misc entry {}", entry.display());
            }
        }
        if let Some(mounted) = &self.mounted {
            let _ = Command::new("umount").arg(mounted).status();
        }
    }
}

/// The userland, made with debootstrap once (a stamp says with what).
fn userland(arch: Arch, tools: &Path) -> Result<PathBuf> {
    let dir = root().join(format!("target/userland/{SUITE}-{}", arch.debian()));
    let stamp = dir.join("robocache-userland.txt");
    let wanted = format!("{SUITE} {} {USERLAND_PACKAGES}\n", arch.debian());
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(dir);
    }
    unmount_below(&dir)?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    eprintln!("debootstrap {SUITE} ({}) into {}", arch.debian(), dir.display());
    let started = Instant::now();
    run(Command::new(tools.join("usr/sbin/debootstrap"))
        .env("DEBOOTSTRAP_DIR", tools.join("usr/share/debootstrap"))
        .arg(format!("--arch={}", arch.debian()))
        .args(["--variant=minbase", &format!("--include={USERLAND_PACKAGES}"), SUITE])
        .arg(&dir)
        .arg("http://deb.debian.org/debian")
        .stdout(std::io::stderr()))
    .context("debootstrap failed")?;
    eprintln!("debootstrap took {:.0} s", started.elapsed().as_secs_f64());
    std::fs::write(stamp, wanted)?;
    Ok(dir)
}

/// Copies the wheel, the tests and their fixtures and the host's
/// certificate bundle into a fresh folder of the userland (`/robocache`),
/// and returns the sandbox its commands run in (`sandbox`: the shared data
/// and the resolver configuration lent read-only).
fn prepare(userland: &Path, wheel: &Path) -> Result<Chroot> {
    // Mounts an interrupted run of an older xtask left behind (it mounted
    // in the host's namespace) come off first: removing the work folder
    // through a bind mount would delete what it shows.
    unmount_below(userland)?;
    let work = userland.join("robocache");
    // A link planted there is removed, not followed; the folder is ours.
    if let Ok(meta) = work.symlink_metadata() {
        match meta.is_dir() {
            true => std::fs::remove_dir_all(&work),
            false => std::fs::remove_file(&work),
        }
        .with_context(|| format!("cannot remove {}", work.display()))?;
    }
    std::fs::create_dir_all(work.join("wheels"))?;
    let name = wheel.file_name().context("the wheel path has no file name")?;
    std::fs::copy(wheel, work.join("wheels").join(name)).with_context(|| format!("cannot copy {}", wheel.display()))?;
    // The checkout's files (tracked and new, not ignored: no build output),
    // as the tests read fixtures and the docs' tests check the files the
    // docs name.
    let tree = work.join("src/main");
    let listed = Command::new("git")
        .current_dir(root())
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .output()
        .context("git ls-files")?;
    anyhow::ensure!(listed.status.success(), "git ls-files failed in {}", root().display());
    for path in listed.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = Path::new(std::str::from_utf8(path).context("a checkout path is not UTF-8")?);
        let from = root().join(path);
        if from.is_file() {
            let to = tree.join(path);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::copy(&from, &to).with_context(|| format!("cannot copy {}", from.display()))?;
        }
    }
    // The host's certificate bundle, into the run's own folder: pip reaches
    // PyPI as the host does (through its proxy, where there is one).
    let bundle = std::env::var_os("PIP_CERT")
        .or_else(|| std::env::var_os("SSL_CERT_FILE"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/ssl/certs/ca-certificates.crt"));
    let cert = bundle.is_file();
    if cert {
        std::fs::copy(&bundle, work.join("host-ca.crt"))?;
    }
    let mut sandbox = Sandbox::new(userland).with_host_resolver();
    let shared = root().join("../shared");
    if shared.is_dir() {
        std::fs::create_dir_all(work.join("src/shared"))?;
        sandbox = sandbox.with_shared(&shared);
    }
    Ok(Chroot { sandbox, cert })
}

/// Unmounts every mount point at or below `dir` (deepest first) and fails
/// if any is left: nothing below a folder about to be removed may be a
/// mount.
fn unmount_below(dir: &Path) -> Result<()> {
    let Ok(dir) = dir.canonicalize() else {
        return Ok(());
    };
    let below = || -> Result<Vec<PathBuf>> {
        let table = std::fs::read_to_string("/proc/self/mountinfo").context("cannot read /proc/self/mountinfo")?;
        let mut points: Vec<PathBuf> = table
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .map(|point| PathBuf::from(unescape_mount_point(point)))
            .filter(|point| point.starts_with(&dir))
            .collect();
        points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        points.dedup();
        Ok(points)
    };
    for point in below()? {
        let done = Command::new("umount").arg(&point).status().is_ok_and(|s| s.success());
        if !done {
            let _ = Command::new("umount").arg("-l").arg(&point).status();
        }
    }
    let left = below()?;
    anyhow::ensure!(left.is_empty(), "cannot unmount {left:?}: remove them by hand before the next run");
    Ok(())
}

/// A mount point as /proc/self/mountinfo writes it (space, tab, newline
/// and backslash as octal escapes).
fn unescape_mount_point(point: &str) -> String {
    let bytes = point.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            if let Ok(code) = u8::from_str_radix(&point[i + 1..i + 4], 8) {
                out.push(code);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Commands run as root in the userland's sandbox with a clean environment.
struct Chroot {
    sandbox: Sandbox,
    /// The host's certificate bundle is at `/robocache/host-ca.crt`.
    cert: bool,
}

impl Chroot {
    fn command(&self, script: &str) -> Command {
        let mut args = vec![
            "-i",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "HOME=/root",
            "LANG=C.UTF-8",
            "PIP_DISABLE_PIP_VERSION_CHECK=1",
        ];
        if self.cert {
            args.push("PIP_CERT=/robocache/host-ca.crt");
        }
        args.extend(["/bin/bash", "-euc", script]);
        self.sandbox.command("/usr/bin/env", &args)
    }

    fn run(&self, script: &str) -> Result<()> {
        run(&mut self.command(script))
    }

    fn output(&self, script: &str) -> Result<String> {
        let output = self.command(script).output().with_context(|| format!("cannot run in the chroot: {script}"))?;
        if !output.status.success() {
            bail!("in the chroot `{script}` failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

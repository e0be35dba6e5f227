//! Commands run as root inside a test userland (a folder under `target/`)
//! without touching the host: each command gets its own mount and PID
//! namespaces (`unshare --mount --propagation private --pid --fork`), and
//! every mount it needs is made inside them —
//!
//! - `/proc`: a new proc of the command's own PID namespace;
//! - `/dev`: a small tmpfs holding only the nodes Python and pip use
//!   (`null`, `zero`, `full`, `random`, `urandom`, `tty`, the `fd` links)
//!   and a tmpfs `/dev/shm`, never the host's `/dev`;
//! - read-only binds of what the command reads from the host: the
//!   checkout's `../shared` data, the host's resolver configuration.
//!
//! Mounts made in a private namespace are never seen in the host's mount
//! table and vanish with the namespace's last process, so removing
//! `target/` (`rm -rf`, `cargo clean`, `git clean -xdf`) can never reach
//! the host's device nodes or data through them, whenever and however a run
//! ended. The chain dies with the tool: `setpriv --pdeathsig KILL` kills
//! `unshare` when the tool's process dies (a SIGKILL included), and
//! `unshare --kill-child` then kills the namespace's first process, which
//! takes every other process of the namespace with it.
//!
//! Nothing is written outside the userland: a command's own files are
//! written by the command inside it, and what the host lends is mounted,
//! never copied into a path the userland's root processes could have made
//! a link.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The nodes of the sandbox's `/dev`: (name, major, minor).
const DEVICE_NODES: [(&str, u32, u32); 6] =
    [("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8), ("urandom", 1, 9), ("tty", 5, 0)];

/// Sets the namespace up (`$1`: the userland, `$2`: the shared data or
/// empty, `$3`: the resolver configuration or empty), then runs the rest
/// of the arguments chrooted there.
const SETUP: &str = r#"
root=$1; shared=$2; resolv=$3; nodes=$4; shift 4
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t tmpfs -o size=1m,mode=0755,nosuid,noexec tmpfs "$root/dev"
for node in $nodes; do
    IFS=: read -r name major minor <<< "$node"
    mknod -m 666 "$root/dev/$name" c "$major" "$minor"
done
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mkdir "$root/dev/shm" "$root/dev/pts"
mount -t tmpfs -o size=1g,mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
if [ -n "$shared" ]; then
    mount --bind "$shared" "$root/robocache/src/shared"
    mount -o remount,ro,bind "$root/robocache/src/shared"
fi
if [ -n "$resolv" ] && [ -f "$root/etc/resolv.conf" ] && [ ! -L "$root/etc/resolv.conf" ]; then
    mount --bind "$resolv" "$root/etc/resolv.conf"
    mount -o remount,ro,bind "$root/etc/resolv.conf"
fi
exec chroot "$root" "$@"
"#;

/// A userland folder whose commands run in a sandbox (module docs).
#[derive(Debug)]
pub struct Sandbox {
    root: PathBuf,
    /// Mounted read-only at `/robocache/src/shared` when given (the
    /// folder must exist in the userland).
    shared: Option<PathBuf>,
    /// The host's resolver configuration, mounted read-only over the
    /// userland's.
    resolv: Option<PathBuf>,
}

impl Sandbox {
    /// A sandbox of the userland at `root`, with nothing of the host in it.
    pub fn new(root: &Path) -> Self {
        Sandbox { root: root.to_path_buf(), shared: None, resolv: None }
    }

    /// Lends `shared` read-only at `/robocache/src/shared`.
    pub fn with_shared(mut self, shared: &Path) -> Self {
        self.shared = Some(shared.to_path_buf());
        self
    }

    /// Lends the host's resolver configuration read-only (pip reaches PyPI
    /// as the host does).
    pub fn with_host_resolver(mut self) -> Self {
        let resolv = Path::new("/etc/resolv.conf");
        self.resolv = resolv.is_file().then(|| resolv.to_path_buf());
        self
    }

    /// `program` with `args` run chrooted into the userland in the sandbox.
    pub fn command(&self, program: &str, args: &[&str]) -> Command {
        let nodes: Vec<String> = DEVICE_NODES.iter().map(|(n, major, minor)| format!("{n}:{major}:{minor}")).collect();
        let mut command = Command::new("setpriv");
        command
            .args(["--pdeathsig", "KILL", "--"])
            .args(["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--"])
            .args(["/bin/bash", "-euc", SETUP, "robocache-sandbox"])
            .arg(&self.root)
            .arg(self.shared.as_deref().unwrap_or(Path::new("")))
            .arg(self.resolv.as_deref().unwrap_or(Path::new("")))
            .arg(nodes.join(" "))
            .arg(program)
            .args(args);
        command
    }
}

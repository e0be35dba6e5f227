//! The test userland's sandbox cannot touch the host: a command run in it
//! (`cargo xtask userland-run`, as `test-wheel` runs each of its commands)
//! sees its own `/proc` and a `/dev` of a few nodes, the host's mount
//! table never shows its mounts, and when the tool is killed with SIGKILL
//! mid-run the command dies with it, no mount of it is left, and removing
//! the userland leaves the host's `/dev` as it was.
//!
//! Needs root (namespaces, mknod, chroot), as CI has; elsewhere it says so
//! and returns (CI runs `test-wheel`, which needs root too, so CI is root).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A userland of one program: `/bin/sleep` and the libraries it loads, as
/// `ldd` lists them, at their own paths.
fn tiny_userland(root: &Path) {
    for dir in ["bin", "proc", "dev", "etc"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    let sleep = Path::new("/bin/sleep").canonicalize().unwrap();
    std::fs::copy(&sleep, root.join("bin/sleep")).unwrap();
    let ldd = Command::new("ldd").arg(&sleep).output().expect("ldd");
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        let Some(path) = line.split_whitespace().find(|w| w.starts_with('/')) else { continue };
        let inside = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
        std::fs::copy(path, inside).unwrap();
    }
}

/// Mount points of the host's table at or below `dir`.
fn host_mounts_below(dir: &Path) -> Vec<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dir = dir.to_string_lossy().into_owned();
    table.lines().filter_map(|l| l.split(' ').nth(4)).filter(|p| p.starts_with(&dir)).map(str::to_owned).collect()
}

/// The process running `/bin/sleep` chrooted into `root`, if any.
fn sleeper_in(root: &Path) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let is_sleep = std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"/bin/sleep\0"));
        let rooted = std::fs::read_link(format!("/proc/{pid}/root")).is_ok_and(|r| r == root);
        if is_sleep && rooted {
            return Some(pid);
        }
    }
    None
}

fn wait_for<T>(what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{what}: not within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn dev_listing() -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = std::fs::read_dir("/dev")
        .unwrap()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.file_type().is_ok_and(|t| t.is_dir())))
        .collect();
    out.sort();
    out
}

#[test]
fn a_killed_run_leaves_no_mount_and_removing_target_leaves_the_host_dev_alone() {
    if !is_root() {
        #[allow(clippy::print_stderr, reason = "a skipped test says why")]
        {
            eprintln!("SKIPPED: the sandbox needs root (namespaces, mknod, chroot); CI runs as root");
        }
        return;
    }
    let checkout = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let work = checkout.join(format!("target/sandbox-test/{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let root = work.join("userland");
    tiny_userland(&root);
    let root = root.canonicalize().unwrap();
    let dev_before = dev_listing();

    let mut tool = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["userland-run", "--root"])
        .arg(&root)
        .args(["/bin/sleep", "120"])
        .spawn()
        .unwrap();
    let sleeper = wait_for("the sandboxed sleep", || sleeper_in(&root));

    // Inside: its own proc and a tmpfs /dev of the few nodes, none of the host's.
    let inside = std::fs::read_to_string(format!("/proc/{sleeper}/mountinfo")).unwrap();
    let mount_of = |point: &str| inside.lines().find(|l| l.split(' ').nth(4) == Some(point)).map(str::to_owned);
    assert!(mount_of("/proc").is_some_and(|l| l.contains(" - proc ")), "{inside}");
    assert!(mount_of("/dev").is_some_and(|l| l.contains(" - tmpfs ")), "{inside}");
    let mut nodes: Vec<String> = std::fs::read_dir(format!("/proc/{sleeper}/root/dev"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    nodes.sort();
    assert_eq!(
        nodes,
        ["fd", "full", "null", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"],
        "the sandbox's /dev"
    );
    // The host's table never shows the sandbox's mounts, even while it runs.
    assert_eq!(host_mounts_below(&root), Vec::<String>::new(), "host mounts below the userland while it runs");

    // SIGKILL: the tool cannot clean up; the sandbox dies with it.
    tool.kill().unwrap();
    tool.wait().unwrap();
    wait_for("the sandboxed sleep to die with the tool", || {
        (!Path::new(&format!("/proc/{sleeper}")).exists()).then_some(())
    });
    assert_eq!(host_mounts_below(&root), Vec::<String>::new(), "host mounts below the userland after the kill");

    // Removing the folder (as `rm -rf target` would) leaves the host's /dev intact.
    std::fs::remove_dir_all(&work).unwrap();
    assert_eq!(dev_listing(), dev_before, "the host's /dev after removing the userland");
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
}

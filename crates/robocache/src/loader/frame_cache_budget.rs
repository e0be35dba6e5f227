//! How much host memory the dataset's decoded-frame cache may take when
//! the user does not say: by default a share of the memory this process
//! may use, so that a LeRobot user who changes nothing gets the epochs
//! after the first from memory (docs/loader.md, "The frame cache by
//! default").

/// The share of the available host memory the automatic budget takes,
/// divided among the node's loader processes.
pub const AUTO_SHARE: f64 = 0.25;

/// The byte budget of the dataset's decoded-frame cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameCacheBudget {
    /// A quarter ([`AUTO_SHARE`]) of the host memory available when the
    /// loader is made (`MemAvailable`, and the cgroup's limit less its use
    /// where a container sets one), divided among `processes_per_node`
    /// (the node's processes that each make a loader: torchrun's
    /// `LOCAL_WORLD_SIZE`). Where the memory is not known (not Linux), 0.
    /// Frames fill it as they are decoded; nothing is reserved up front.
    Auto { processes_per_node: usize },
    /// Exactly this many bytes (0: no cache).
    Bytes(usize),
    /// The dataset's budget as it is ([`robocache_datasets::Dataset::set_frame_cache_budget`]).
    Unchanged,
}

impl Default for FrameCacheBudget {
    fn default() -> Self {
        FrameCacheBudget::Auto { processes_per_node: 1 }
    }
}

impl FrameCacheBudget {
    /// The bytes this budget comes to on this machine now (`None`: unchanged).
    pub fn resolve(self) -> Option<usize> {
        match self {
            FrameCacheBudget::Bytes(bytes) => Some(bytes),
            FrameCacheBudget::Unchanged => None,
            FrameCacheBudget::Auto { processes_per_node } => {
                let available = host_memory_available().unwrap_or(0);
                Some(auto_bytes(available, processes_per_node))
            }
        }
    }
}

/// The automatic budget for `available` bytes of host memory shared by
/// `processes_per_node` loader processes.
pub fn auto_bytes(available: u64, processes_per_node: usize) -> usize {
    let share = available as f64 * AUTO_SHARE / processes_per_node.max(1) as f64;
    usize::try_from(share as u64).unwrap_or(usize::MAX)
}

/// The host memory this process may still take: Linux's `MemAvailable`,
/// lowered to the cgroup's limit less its use where one is set (v2
/// `memory.max`/`memory.current`, v1 `memory.limit_in_bytes`/`usage_in_bytes`).
pub fn host_memory_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = mem_available(&meminfo)?;
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let cgroup = [
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ]
    .iter()
    .find_map(|(limit, used)| cgroup_room(read(limit)?.as_str(), read(used)?.as_str()));
    Some(cgroup.map_or(available, |room| room.min(available)))
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A cgroup's limit less its use; `None` without a limit (`max`, or v1's
/// near-2^63 "unlimited").
fn cgroup_room(limit: &str, used: &str) -> Option<u64> {
    let limit: u64 = limit.trim().parse().ok()?;
    if limit >= 1 << 60 {
        return None;
    }
    let used: u64 = used.trim().parse().ok()?;
    Some(limit.saturating_sub(used))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_automatic_budget_is_a_share_of_the_memory_divided_among_the_nodes_processes() {
        assert_eq!(auto_bytes(128 << 30, 1), 32 << 30);
        assert_eq!(auto_bytes(128 << 30, 8), 4 << 30);
        assert_eq!(auto_bytes(128 << 30, 0), 32 << 30);
        assert_eq!(auto_bytes(0, 4), 0);
    }

    #[test]
    fn memory_is_read_from_meminfo_and_the_cgroup_limit() {
        let meminfo = "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   100000000 kB\n";
        assert_eq!(mem_available(meminfo), Some(100_000_000 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(cgroup_room("max\n", "123\n"), None);
        assert_eq!(cgroup_room("9223372036854771712\n", "5\n"), None);
        assert_eq!(cgroup_room("17179869184\n", "4294967296\n"), Some(12 << 30));
        assert_eq!(cgroup_room("100\n", "200\n"), Some(0));
        // On this machine, when Linux: something, and the budget follows it.
        if cfg!(target_os = "linux") {
            let available = host_memory_available().expect("Linux reports MemAvailable");
            assert!(available > 0);
            let Some(bytes) = (FrameCacheBudget::Auto { processes_per_node: 2 }).resolve() else {
                panic!("an automatic budget resolves to bytes")
            };
            assert!(bytes > 0 && bytes as u64 <= available / 8 + (64 << 20), "{bytes} of {available}");
        }
        assert_eq!(FrameCacheBudget::Bytes(7).resolve(), Some(7));
        assert_eq!(FrameCacheBudget::Unchanged.resolve(), None);
    }
}

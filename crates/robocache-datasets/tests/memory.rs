//! Opening a large file and taking windows keeps resident memory within the
//! configured cache budget (plus a fixed allowance for the HDF5 library and
//! one window's rows). The file is written by h5py in another process, so
//! the writer's memory is not this process's.
//!
//! `ROBOCACHE_MEMORY_TEST_MB` sets the file size (default 256 MB; the
//! numbers in docs/datasets.md are from a 3 GB run).

#![allow(clippy::print_stderr)]

mod support;

use robocache_datasets::{
    Dataset, OpenOptions, Sampler, Shard, StepWindowSpec, StepWindows, TimeWindowSpec, TimeWindows,
};

/// Resident set size of this process in bytes (Linux; None elsewhere).
fn resident_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The resident memory now and the size of the test's data in MB
/// (`ROBOCACHE_MEMORY_TEST_MB`, default 256); None where RSS cannot be read.
fn setup() -> Option<(usize, f64)> {
    let Some(before_open) = resident_bytes() else {
        eprintln!("no /proc/self/status on this system: resident memory cannot be measured here");
        return None;
    };
    let megabytes = std::env::var("ROBOCACHE_MEMORY_TEST_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(256.0);
    Some((before_open, megabytes))
}

#[test]
fn windows_of_a_large_file_stay_within_the_memory_budget() {
    let Some((before_open, megabytes)) = setup() else { return };
    let (_dir, path) = support::fixture("big-robomimic", "big.hdf5", &[&megabytes.to_string()]);
    let file_bytes = std::fs::metadata(&path).unwrap().len() as usize;

    // Smaller than the low-dimensional streams of the larger files, so the cache evicts.
    let budget = 1 << 20;
    let dataset = Dataset::open_with(&path, &OpenOptions { cache_bytes: budget, ..Default::default() }).unwrap();
    let after_open = resident_bytes().unwrap();

    let step =
        StepWindows::new(dataset.info(), &StepWindowSpec { seq_length: 16, frame_stack: 2, ..Default::default() })
            .unwrap();
    let time = TimeWindows::new(
        &dataset,
        &["actions", "obs/agentview_image"],
        &TimeWindowSpec { hz: 10.0, history: 2, horizon: 8, causal: false },
    )
    .unwrap();
    let mut peak = after_open;
    let mut bytes_read = 0usize;
    let windows = 2000;
    for (i, sample) in
        Sampler::new(step.len(), 1, Shard::default()).unwrap().epoch(0).into_iter().take(windows).enumerate()
    {
        let window = step.window(sample).unwrap();
        for stream in
            ["actions", "obs/robot0_eef_pos", "obs/robot0_eef_quat", "obs/agentview_image", "next_obs/agentview_image"]
        {
            let data = dataset.read_step_window(&window, stream).unwrap();
            bytes_read += data.len() * data.dtype().size_in_bytes();
        }
        let t = time.window(i * 7 % time.len()).unwrap();
        let targets = time.targets(&t);
        let rows = dataset.times(t.episode, "obs/agentview_image").unwrap().rows_covering(targets[0], targets[9]);
        bytes_read += dataset.read_rows(t.episode, "obs/agentview_image", rows).unwrap().len();
        let actions = dataset.read_rows(t.episode, "states", 0..1).unwrap();
        bytes_read += actions.len() * 8;
        if i % 50 == 0 {
            peak = peak.max(resident_bytes().unwrap());
        }
    }
    peak = peak.max(resident_bytes().unwrap());
    let usage = dataset.cache_usage();
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    eprintln!(
        "file {:.0} MiB, {} episodes; RSS before open {:.1} MiB, after open {:.1} MiB, peak over {windows} windows {:.1} MiB (+{:.1} MiB); read {:.0} MiB; cache {:.1} of {:.1} MiB, {} streams, {} hits, {} misses",
        mib(file_bytes),
        dataset.len(),
        mib(before_open),
        mib(after_open),
        mib(peak),
        mib(peak.saturating_sub(after_open)),
        mib(bytes_read),
        mib(usage.bytes),
        mib(usage.budget),
        usage.streams,
        usage.hits,
        usage.misses
    );
    assert!(usage.bytes <= budget);
    assert!(bytes_read > 64 * budget, "the windows must read much more than the budget for the test to mean anything");
    // Opening reads metadata only.
    // HDF5's object headers; then the cache budget, HDF5's per-dataset chunk
    // cache and one window's buffers.
    check_growth([before_open, after_open, peak], 64 << 20, budget);
}

/// The same for an RLDS builder directory of JPEG episodes (written in
/// TFDS's format by robocache's writer): opening indexes record headers
/// only, and windows read only their steps' features.
#[test]
fn windows_of_a_large_rlds_directory_stay_within_the_memory_budget() {
    use robocache_datasets::synthetic::{write_rlds, RldsSpec};

    let Some((before_open, megabytes)) = setup() else { return };
    let dir = tempfile::tempdir().unwrap();
    // 128x128 frames of about 4.5 KB: episodes of ~250 steps, ~1.1 MB each.
    let episodes = ((megabytes * 1e6 / (250.0 * 4600.0)).ceil() as usize).max(16);
    let spec = RldsSpec { episodes, mean_steps: 250, shards: 16, image: Some([128, 128]), ..Default::default() };
    let version = write_rlds(dir.path(), &spec).unwrap();
    let dir_bytes: u64 = std::fs::read_dir(&version).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    let before_open = before_open.max(resident_bytes().unwrap());

    let budget = 1 << 20;
    let options = OpenOptions { rate_hz: Some(10.0), cache_bytes: budget, ..Default::default() };
    let started = std::time::Instant::now();
    let dataset = Dataset::open_with(&version, &options).unwrap();
    let open_s = started.elapsed().as_secs_f64();
    let after_open = resident_bytes().unwrap();
    let step =
        StepWindows::new(dataset.info(), &StepWindowSpec { seq_length: 16, frame_stack: 2, ..Default::default() })
            .unwrap();
    let mut peak = after_open;
    let mut bytes_read = 0usize;
    let windows = 2000;
    for (i, sample) in
        Sampler::new(step.len(), 1, Shard::default()).unwrap().epoch(0).into_iter().take(windows).enumerate()
    {
        let window = step.window(sample).unwrap();
        for stream in ["action", "observation/state", "observation/image", "is_first"] {
            let data = dataset.read_step_window(&window, stream).unwrap();
            bytes_read += data.len() * data.dtype().size_in_bytes();
        }
        if i % 50 == 0 {
            peak = peak.max(resident_bytes().unwrap());
        }
    }
    peak = peak.max(resident_bytes().unwrap());
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    eprintln!(
        "RLDS directory {:.0} MiB, {} episodes in {} shards, opened in {open_s:.2} s; RSS before open {:.1} MiB, after open {:.1} MiB, peak over {windows} windows {:.1} MiB (+{:.1} MiB); decoded {:.0} MiB",
        dir_bytes as f64 / (1 << 20) as f64,
        dataset.len(),
        spec.shards,
        mib(before_open),
        mib(after_open),
        mib(peak),
        mib(peak.saturating_sub(after_open)),
        mib(bytes_read),
    );
    assert!(bytes_read as u64 > dir_bytes / 4, "the windows must decode a good part of the directory");
    // The index; then the cache budget, the entry tables and one window's buffers.
    check_growth([before_open, after_open, peak], 32 << 20, budget);
}

/// Opening grew resident memory by less than `open_limit`, reading by at
/// most the cache `budget` plus a 48 MiB allowance.
fn check_growth([before_open, after_open, peak]: [usize; 3], open_limit: usize, budget: usize) {
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    let opening = after_open.saturating_sub(before_open);
    assert!(opening < open_limit, "opening took {:.1} MiB", mib(opening));
    let allowance = 48 << 20;
    let growth = peak.saturating_sub(after_open);
    assert!(
        growth <= budget + allowance,
        "resident memory grew by {:.1} MiB, more than the {:.0} MiB budget + {:.0} MiB allowance",
        mib(growth),
        mib(budget),
        mib(allowance)
    );
}

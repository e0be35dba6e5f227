//! Fuzzing the readers with mutated copies of the committed fixtures:
//! LeRobot metadata (`info.json`, the episodes and tasks in parquet and
//! JSON lines), LeRobot data parquet files (the column reader), RLDS
//! TFRecord shards (records and `tf.train.Example`s) and their JSON, and
//! ROS 2 bags (MCAP chunks and summaries, SQLite pages, CDR messages). Each
//! case copies a root, damages one file, opens it and reads every row
//! (`verify`): whatever the bytes, an answer within the deadline and an
//! error that names where, never a panic or a hang. `PROPTEST_CASES` sets
//! how many (CI runs thousands in release, `.ci/run`); failures are kept
//! in `proptest-regressions/fuzz.txt`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use robocache_datasets::testing::copy_tree;
use robocache_datasets::{Dataset, OpenOptions};
use robocache_video::testing::{apply, mutations, within_deadline, Mutation};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every file of the roots below, as (root, file relative to it).
fn targets() -> &'static [(PathBuf, PathBuf)] {
    static TARGETS: OnceLock<Vec<(PathBuf, PathBuf)>> = OnceLock::new();
    TARGETS.get_or_init(|| {
        let roots = [
            "lerobot/av1",
            "lerobot/v21",
            "lerobot/images",
            "rlds/robocache_fixture_dict/1.0.0",
            "rlds/robocache_fixture_tensor/1.0.0",
            "ros2",
        ];
        let mut out = Vec::new();
        for root in roots.map(|r| fixtures().join(r)) {
            let mut stack = vec![root.clone()];
            while let Some(dir) = stack.pop() {
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let path = entry.unwrap().path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if path.extension().is_none_or(|e| e != "mp4") {
                        // The MP4 files are robocache-video's harness's; of
                        // the bags' folder, the bags (not the test answers).
                        let is_bag = path.extension().is_some_and(|e| e == "mcap" || e == "db3");
                        if is_bag || !root.ends_with("ros2") {
                            out.push((root.clone(), path.strip_prefix(&root).unwrap().to_path_buf()));
                        }
                    }
                }
            }
        }
        out.sort();
        out
    })
}

/// Opens the root and reads all of it, returning the error text if any.
fn read_everything(root: &Path) -> Option<String> {
    // RLDS stores no rates: 10 Hz (LeRobot's own fps wins for LeRobot roots).
    let options =
        OpenOptions { rate_hz: root.to_string_lossy().contains("rlds").then_some(10.0), ..Default::default() };
    let dataset = match Dataset::open_with(root, &options) {
        Ok(dataset) => dataset,
        Err(error) => return Some(error.to_string()),
    };
    let report = dataset.verify(2);
    if let Some(episode) = dataset.info().episodes.first() {
        for stream in &episode.streams {
            if let Err(error) = dataset.read_stream(0, &stream.name) {
                return Some(error.to_string());
            }
        }
    }
    report.problems.first().map(|p| format!("{} {}: {}", p.episode, p.stream, p.error))
}

/// Where proptest keeps the failures it found (committed: each stays a regression case).
const REGRESSIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions/fuzz.txt");

fn damaged_root_reads_or_fails_clearly(target: usize, edits: &[Mutation]) {
    let (root, file) = &targets()[target % targets().len()];
    damage_and_read(root, file, edits);
}

/// Copies `root`, applies `edits` to its `file`, reads it all within the deadline.
fn damage_and_read(root: &Path, file: &Path, edits: &[Mutation]) {
    let dir = tempfile::tempdir().unwrap();
    // The copy keeps the root's name (`rlds/...`, `lerobot/...`).
    let copy = dir.path().join(root.strip_prefix(fixtures()).unwrap());
    copy_tree(root, &copy).unwrap();
    let mut bytes = std::fs::read(copy.join(file)).unwrap();
    apply(&mut bytes, edits);
    std::fs::write(copy.join(file), &bytes).unwrap();
    let what = format!("{} with {} damaged by {edits:?}", root.display(), file.display());
    let error = within_deadline(&what, move || read_everything(&copy));
    if let Some(error) = error {
        assert!(!error.trim().is_empty(), "{what}: an empty error");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn damaged_metadata_and_data_files_are_read_or_refused_clearly(target in any::<usize>(), edits in mutations(3)) {
        damaged_root_reads_or_fails_clearly(target, &edits);
    }

    /// The bags alone (a few of the many files above), as many cases again.
    #[test]
    fn damaged_bags_are_read_or_refused_clearly(target in any::<usize>(), edits in mutations(3)) {
        let bags: Vec<&(PathBuf, PathBuf)> = targets().iter().filter(|(root, _)| root.ends_with("ros2")).collect();
        let (root, file) = bags[target % bags.len()];
        damage_and_read(root, file, &edits);
    }
}

#[test]
fn every_fixture_root_reads_undamaged() {
    let roots: std::collections::BTreeSet<&PathBuf> = targets().iter().map(|(root, _)| root).collect();
    for root in roots {
        assert_eq!(read_everything(root), None, "{}", root.display());
    }
}

/// What the harness found, each now an error: before, the first aborted the
/// process allocating 34 GB for a feature whose `info.json` shape became
/// [4294967295]; the second allocated 120 GB for an episode whose
/// `episodes.jsonl` length became 4294967295 (the metadata's length, not
/// the data file's rows); the third panicked (`chunks_exact_mut(0)`) on an
/// RLDS feature whose `features.json` shape held a 0; the fourth (kept in
/// `proptest-regressions/fuzz.txt` too) made the parquet crate panic on a
/// page that names a missing dictionary; the fifth (kept there too) made a
/// page header's field claim millions of booleans, which the parquet crate
/// skipped one empty step each: 4.7 s, past the deadline on a loaded CI
/// machine (`lerobot/parquet_thrift.rs` now refuses the header).
#[test]
fn what_the_fuzzer_found_is_an_error() {
    let cases: [(&str, &str, Vec<Mutation>); 5] = [
        (
            "lerobot/v21",
            "meta/info.json",
            vec![
                Mutation::Number { nth: 15466264059902873559, replacement: 6 },
                Mutation::Number { nth: 16856137982564320261, replacement: 5 },
            ],
        ),
        ("lerobot/v21", "meta/episodes.jsonl", vec![Mutation::Number { nth: 224859472946234781, replacement: 6 }]),
        (
            "rlds/robocache_fixture_dict/1.0.0",
            "features.json",
            vec![Mutation::Number { nth: 6487862676107849971, replacement: 1 }],
        ),
        (
            "lerobot/v21",
            "data/chunk-000/episode_000002.parquet",
            vec![Mutation::Delete { at: 1501588393227493130, len: 19 }],
        ),
        (
            "lerobot/v21",
            "data/chunk-000/episode_000002.parquet",
            vec![Mutation::Insert { at: 612463376139100689, bytes: vec![219, 128, 128, 128, 99, 221] }],
        ),
    ];
    for (root, file, edits) in cases {
        damage_and_read(&fixtures().join(root), Path::new(file), &edits);
    }
}

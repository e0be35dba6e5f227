//! Fuzzing the readers with mutated copies of the committed fixtures:
//! LeRobot metadata (`info.json`, the episodes and tasks in parquet and
//! JSON lines), LeRobot data parquet files (the column reader), RLDS
//! TFRecord shards (records and `tf.train.Example`s) and their JSON, ROS 2
//! bags (MCAP chunks and summaries, SQLite pages, CDR messages), and Zarr
//! replay buffers of formats 2 and 3 (metadata JSON, Blosc, Zstd, GZip and
//! raw chunks, `meta/episode_ends`). Each
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
            "zarr/pusht_v2.zarr",
            "zarr/pusht_v3.zarr",
            "zarr/timed_v2.zarr",
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

/// A bag mapping built from a grammar: a third of them from the bag's own
/// topics and fields only ([`valid_mapping_toml`]: they open and read, so
/// the reading itself is exercised), the rest with keys, topics, fields,
/// joints, kinds, time sources and dtypes from pools of valid and invalid
/// values, and the episode splits (gaps and markers). Byte edits of a TOML
/// file rarely build one that parses; this builds them.
fn mapping_toml(choices: &[usize], bag: usize) -> String {
    if choices.get(39).copied().unwrap_or(0) % 3 == 0 {
        return valid_mapping_toml(choices, bag);
    }
    const KEYS: [&str; 7] = ["state", "observation.images.wrist", "a/b", "../../x", "", "k\u{0}", "cam"];
    const TOPICS: [&str; 9] = [
        "/joint_states",
        "/imu",
        "/cmd",
        "/ee_pose",
        "/gripper",
        "/wrist/image/compressed",
        "/scene/image",
        "/camera/video",
        "/lidar/points",
    ];
    const FIELDS: [&str; 9] =
        ["position", "orientation", "data", "pose.position", "header.stamp", "name", "nope", "", "layout.dim"];
    const KINDS: [&str; 6] =
        ["continuous", "discrete", "quaternion-xyzw", "0..3:continuous,3..7:quaternion-xyzw", "9..2:x", "angle"];
    const TIMES: [&str; 4] = ["header", "log", "publish", "sundial"];
    const DTYPES: [&str; 3] = ["float32", "float64", "int8"];
    const GAPS: [&str; 5] = ["0.0", "-1.0", "1e308", "0.001", "nan"];
    let pick = |i: usize, n: usize| choices.get(i).copied().unwrap_or(0) % n;
    let mut text = format!("fps = {}\n", ["30", "0", "-5", "1e9", "inf"][pick(0, 5)]);
    if pick(1, 3) == 0 {
        text.push_str(&format!("[episodes]\ngap_s = {}\n", GAPS[pick(2, GAPS.len())]));
    } else if pick(1, 3) == 1 {
        text.push_str(&format!("[episodes]\nmarkers = \"{}\"\n", TOPICS[pick(2, TOPICS.len())]));
    }
    for s in 0..=pick(3, 4) {
        let at = 4 + s * 8;
        text.push_str(&format!("[streams.{:?}]\n", KEYS[pick(at, KEYS.len())]));
        if pick(at + 1, 5) == 0 {
            text.push_str("transform = [\"world\", \"tool\"]\n");
        } else {
            text.push_str(&format!("topic = {:?}\n", TOPICS[pick(at + 2, TOPICS.len())]));
        }
        if pick(at + 3, 2) == 0 {
            text.push_str(&format!("field = {:?}\n", FIELDS[pick(at + 4, FIELDS.len())]));
        }
        if pick(at + 5, 4) == 0 {
            text.push_str("joints = [\"j1\", \"j3\", \"j9\"]\n");
        }
        if pick(at + 6, 3) == 0 {
            text.push_str(&format!(
                "kind = {:?}\ntime = {:?}\n",
                KINDS[pick(at + 7, KINDS.len())],
                TIMES[pick(at, TIMES.len())]
            ));
        }
        if pick(at + 7, 3) == 0 {
            text.push_str(&format!("dtype = {:?}\n", DTYPES[pick(at + 1, DTYPES.len())]));
        }
    }
    text
}

/// A mapping of the bag's own topics and fields (the arm bag's joints by
/// name, IMU, gripper and command; the video bag's camera; the cloud bag's
/// scalar fields), with valid
/// kinds, time sources and dtypes: one that opens and reads.
fn valid_mapping_toml(choices: &[usize], bag: usize) -> String {
    let pick = |i: usize, n: usize| choices.get(i).copied().unwrap_or(0) % n;
    if bag == 1 {
        return "[streams.camera]\ntopic = \"/camera/video\"\n".into();
    }
    if bag == 2 {
        // The cloud's scalar fields (its points vary in count: not a stream of numbers).
        let field = ["width", "height", "point_step", "row_step"][pick(1, 4)];
        return format!("[streams.points]\ntopic = \"/lidar/points\"\nfield = \"{field}\"\n");
    }
    const STREAMS: [(&str, &str, &str); 4] = [
        ("state", "/joint_states", "position"),
        ("orientation", "/imu", "orientation"),
        ("gripper", "/gripper", "data"),
        ("action", "/cmd", "data"),
    ];
    // The bag's joint states list some joints only: its positions are read by name.
    const JOINTS: [&str; 3] = ["[\"j1\", \"j2\", \"j3\"]", "[\"j3\", \"j1\"]", "[\"j2\"]"];
    let mut text = String::new();
    for (s, (key, topic, field)) in STREAMS.iter().enumerate() {
        if s > 0 && pick(s, 2) == 0 {
            continue;
        }
        text.push_str(&format!("[streams.{key}]\ntopic = \"{topic}\"\nfield = \"{field}\"\n"));
        if *topic == "/joint_states" {
            text.push_str(&format!("joints = {}\n", JOINTS[pick(5, 3)]));
        }
        if pick(6 + s, 3) == 0 {
            text.push_str(&format!("time = {:?}\n", ["log", "publish"][pick(10 + s, 2)]));
        }
        if pick(14 + s, 3) == 0 {
            text.push_str("dtype = \"float64\"\n");
        }
    }
    text
}

/// Opens `bag` with the mapping and reads every episode: the problem found, or none.
fn open_and_read(bag: usize, text: &str) -> Option<String> {
    let root = fixtures().join("ros2").join(["arm_mcap", "video_mcap", "clouds_mcap"][bag]);
    let mapping = match text.parse() {
        Ok(mapping) => mapping,
        Err(error) => return Some(format!("{error}")),
    };
    let options = OpenOptions { bag_mapping: Some(mapping), ..Default::default() };
    let dataset = match Dataset::open_with(&root, &options) {
        Ok(dataset) => dataset,
        Err(error) => return Some(error.to_string()),
    };
    let report = dataset.verify(2);
    report.problems.first().map(|p| format!("{} {}: {}", p.episode, p.stream, p.error))
}

/// The grammar's valid third opens and reads whole: the fuzz cases built
/// from it read bags rather than stop at the mapping.
#[test]
fn the_grammar_builds_mappings_that_open_and_read() {
    let mut rng = robocache_cpu::noise::XorShift::new(11);
    for case in 0..40 {
        let mut choices: Vec<usize> = (0..40).map(|_| rng.next_u64() as usize).collect();
        choices[39] = 3 * (case + 1);
        for bag in 0..3 {
            let text = mapping_toml(&choices, bag);
            let problem = open_and_read(bag, &text);
            assert!(problem.is_none(), "bag {bag}, mapping\n{text}: {problem:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any mapping the grammar builds, on the arm, video and cloud bags:
    /// opened and read whole, or an error that says why, within the deadline.
    #[test]
    fn grammar_built_mappings_read_or_fail_clearly(bag in 0usize..3, choices in prop::collection::vec(any::<usize>(), 40)) {
        let text = mapping_toml(&choices, bag);
        let what = format!("bag {bag} with the mapping\n{text}");
        let error = within_deadline(&what, move || open_and_read(bag, &text));
        if let Some(error) = error {
            prop_assert!(!error.trim().is_empty(), "{}: an empty error", what);
        }
    }
}

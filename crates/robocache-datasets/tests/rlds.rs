//! RLDS builder directories written by tensorflow-datasets itself
//! (`fixtures/make_rlds_fixtures.py`, committed under `fixtures/rlds/`),
//! read without TensorFlow and compared with what TFDS returns for them
//! (`fixtures/rlds/expected/`), plus every way a directory can be broken.

use std::path::{Path, PathBuf};

use robocache_cpu::{DType, HostVec};
use robocache_datasets::{
    ChannelKind, Dataset, Format, OpenOptions, StepWindowSpec, StepWindows, StreamKind, TimeWindowSpec, TimeWindows,
};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rlds")
}

fn open(name: &str, split: Option<&str>) -> Dataset {
    let options = OpenOptions { rate_hz: Some(10.0), split: split.map(str::to_owned), ..Default::default() };
    Dataset::open_with(fixtures().join(name), &options).unwrap()
}

fn expected(name: &str) -> (npyz::npz::NpzArchive<std::io::BufReader<std::fs::File>>, Value) {
    let dir = fixtures().join("expected");
    let archive = npyz::npz::NpzArchive::open(dir.join(format!("{name}.npz"))).unwrap();
    let json = serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap()).unwrap();
    (archive, json)
}

fn npz_array(archive: &mut npyz::npz::NpzArchive<std::io::BufReader<std::fs::File>>, name: &str) -> HostVec {
    let npy = archive.by_name(name).unwrap().unwrap_or_else(|| panic!("TFDS's dump has no {name}"));
    robocache_datasets::npy::read_array(npy, u64::MAX).unwrap().data
}

/// Every stream of every episode of every split equals TFDS's values bit
/// for bit, JPEG frames included (decoded with TensorFlow's IDCT).
fn check_against_tfds(name: &str) {
    let (mut archive, json) = expected(name);
    let splits = json["episodes"].as_object().unwrap();
    for (split, episodes) in splits {
        let dataset = open(name, Some(split));
        assert_eq!(dataset.format(), Format::Rlds);
        let episodes = episodes.as_array().unwrap();
        assert_eq!(dataset.len(), episodes.len(), "{name}/{split}: episodes");
        for (index, episode) in episodes.iter().enumerate() {
            let info = dataset.episode(index).unwrap();
            let len = episode["len"].as_u64().unwrap() as usize;
            assert_eq!(info.len, len, "{name}/{split}/{index}: steps");
            let text = &episode["text"]["steps/language_instruction"];
            let instruction = text.as_array().unwrap().iter().map(|t| t.as_str().unwrap()).find(|t| !t.is_empty());
            assert_eq!(info.instruction.as_deref(), instruction, "{name}/{split}/{index}: instruction");
            for (key, value) in episode["metadata"].as_object().unwrap() {
                assert_eq!(&info.metadata["episode_metadata"][key], value, "{name}/{split}/{index}: metadata {key}");
            }
            for stream in &info.streams {
                let ours = dataset.read_stream(index, &stream.name).unwrap();
                let theirs = npz_array(&mut archive, &format!("{split}/{index}/steps/{}", stream.name));
                let context = format!("{name}/{split}/{index}/{}", stream.name);
                assert_eq!(ours, theirs, "{context}");
                // A window of rows equals the same rows of the whole stream.
                if stream.len >= 3 {
                    let rows = dataset.read_rows(index, &stream.name, 1..3).unwrap();
                    let whole = ours.as_slice().as_bytes();
                    let row_bytes = stream.step_bytes();
                    assert_eq!(rows.as_slice().as_bytes(), &whole[row_bytes..3 * row_bytes], "{context}: rows 1..3");
                }
            }
        }
    }
}

#[test]
fn dict_actions_and_four_kinds_of_image_equal_tfds() {
    check_against_tfds("robocache_fixture_dict");
}

#[test]
fn tensor_actions_and_encoded_tensors_equal_tfds() {
    check_against_tfds("robocache_fixture_tensor");
}

#[test]
fn the_episode_model_has_rlds_streams_kinds_and_clock() {
    let dataset = open("robocache_fixture_dict", None);
    let info = dataset.info();
    assert_eq!(info.rate_hz, 10.0);
    assert_eq!(info.splits, ["train", "val"]);
    assert_eq!(info.metadata["dataset_name"], "robocache_fixture_dict");
    let episode = &info.episodes[0];
    let kind = |name: &str| episode.stream(name).unwrap_or_else(|| panic!("no stream {name}")).kind.clone();
    for image in ["observation/image", "observation/wrist_image", "observation/depth", "observation/depth_float"] {
        assert_eq!(kind(image), StreamKind::All(ChannelKind::Image), "{image}");
    }
    assert_eq!(kind("observation/state"), StreamKind::All(ChannelKind::Continuous));
    assert_eq!(kind("action/world_vector"), StreamKind::All(ChannelKind::Continuous));
    assert_eq!(kind("is_first"), StreamKind::All(ChannelKind::Discrete));
    assert_eq!(kind("reward"), StreamKind::All(ChannelKind::Discrete));
    assert_eq!(kind("action/terminate_episode"), StreamKind::All(ChannelKind::Discrete), "integers are discrete");
    let depth = episode.stream("observation/depth_float").unwrap();
    assert_eq!((depth.dtype, depth.step_shape.as_slice()), (DType::F32, &[8usize, 8, 1][..]));
    assert_eq!(episode.stream("observation/joint_positions").unwrap().dtype, DType::F64);
    assert!(episode.stream("language_instruction").is_none(), "text is the instruction, not a stream");
    assert_eq!(episode.metadata["split"], "train");
    assert!(episode.metadata["shard"].as_str().unwrap().starts_with("robocache_fixture_dict-train.tfrecord-0000"));
    let times = dataset.times(0, "action/world_vector").unwrap();
    assert_eq!(times.time(3), 0.3);
    // The dataset folder (above the version folder) opens the newest version.
    let parent = Dataset::open_with(
        fixtures().join("robocache_fixture_dict"),
        &OpenOptions { rate_hz: Some(10.0), ..Default::default() },
    )
    .unwrap();
    assert_eq!(parent.len(), dataset.len());
}

#[test]
fn step_and_time_windows_read_from_records() {
    let dataset = open("robocache_fixture_dict", None);
    let windows =
        StepWindows::new(dataset.info(), &StepWindowSpec { seq_length: 4, frame_stack: 2, ..Default::default() })
            .unwrap();
    for sample in 0..windows.len() {
        let window = windows.window(sample).unwrap();
        let image = dataset.read_step_window(&window, "observation/image").unwrap();
        assert_eq!(image.len(), (4 + 1) * 24 * 32 * 3);
    }
    let time = TimeWindows::new(
        &dataset,
        &["observation/image", "observation/state"],
        &TimeWindowSpec { hz: 20.0, history: 2, horizon: 4, causal: false },
    )
    .unwrap();
    assert!(!time.is_empty());
}

#[test]
fn unknown_dataset_names_need_a_rate() {
    let err = Dataset::open(fixtures().join("robocache_fixture_tensor/1.0.0")).unwrap_err().to_string();
    assert!(err.contains("robocache_fixture_tensor") && err.contains("rate_hz") && err.contains("--rate-hz"), "{err}");
    let err = Dataset::open_with(
        fixtures().join("robocache_fixture_dict"),
        &OpenOptions { rate_hz: Some(5.0), split: Some("test".into()), ..Default::default() },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("no split `test`") && err.contains("train, val"), "{err}");
}

/// A copy of the tensor fixture in a temporary directory, to break.
fn broken_copy(from: &Path) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("1.0.0");
    std::fs::create_dir(&target).unwrap();
    let mut shard = None;
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let to = target.join(path.file_name().unwrap());
        std::fs::copy(&path, &to).unwrap();
        if to.to_string_lossy().contains(".tfrecord-") {
            shard = Some(to);
        }
    }
    (dir, target, shard.unwrap())
}

fn open_error(path: &Path) -> String {
    let options = OpenOptions { rate_hz: Some(10.0), ..Default::default() };
    match Dataset::open_with(path, &options) {
        Ok(dataset) => (0..dataset.len())
            .flat_map(|e| dataset.info().episodes[e].streams.iter().map(move |s| (e, s.name.clone())))
            .find_map(|(e, s)| dataset.read_stream(e, &s).err())
            .map(|e| e.to_string())
            .unwrap_or_else(|| panic!("{} opened and read without an error", path.display())),
        Err(e) => e.to_string(),
    }
}

#[test]
fn broken_directories_fail_naming_file_record_and_key() {
    let good = fixtures().join("robocache_fixture_tensor/1.0.0");
    let shard_name = "robocache_fixture_tensor-train.tfrecord-00000-of-00001";

    // Truncated shard.
    let (_d, dir, shard) = broken_copy(&good);
    let bytes = std::fs::read(&shard).unwrap();
    std::fs::write(&shard, &bytes[..bytes.len() - 100]).unwrap();
    let err = open_error(&dir);
    assert!(err.contains(shard_name) && err.contains("record 2") && err.contains("truncated"), "{err}");

    // A flipped byte of the first record's length CRC, then of its payload CRC.
    let (_d, dir, shard) = broken_copy(&good);
    let mut flipped = bytes.clone();
    flipped[9] ^= 0x40;
    std::fs::write(&shard, &flipped).unwrap();
    let err = open_error(&dir);
    assert!(err.contains(shard_name) && err.contains("record 0") && err.contains("length field"), "{err}");
    let first_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut flipped = bytes.clone();
    flipped[12 + first_len + 1] ^= 0x40;
    std::fs::write(&shard, &flipped).unwrap();
    let err = open_error(&dir);
    assert!(err.contains(shard_name) && err.contains("record 0") && err.contains("payload does not match"), "{err}");

    // Records written by tf.io.TFRecordWriter, broken in one way each.
    let bad = fixtures().join("bad");
    let err = open_error(&bad.join("not_example"));
    assert!(err.contains(shard_name) && err.contains("record 0: not a tf.train.Example"), "{err}");
    let err = open_error(&bad.join("missing_feature"));
    assert!(err.contains("record 0") && err.contains("no feature `steps/action`"), "{err}");
    let err = open_error(&bad.join("bad_shape"));
    assert!(
        err.contains("record 0") && err.contains("`steps/action`") && err.contains("not a whole number of steps"),
        "{err}"
    );
    let err = open_error(&bad.join("corrupt_jpeg"));
    assert!(
        err.contains("episode `episode_0`")
            && err.contains("`steps/observation/image`")
            && err.contains("step 2")
            && err.contains("Jpeg"),
        "{err}"
    );

    // No features.json.
    let (_d, dir, _) = broken_copy(&good);
    std::fs::remove_file(dir.join("features.json")).unwrap();
    let err = open_error(&dir);
    assert!(err.contains("missing file `features.json`"), "{err}");
    // A directory that is not a builder.
    let empty = tempfile::tempdir().unwrap();
    let err = open_error(empty.path());
    assert!(err.contains("an empty directory") && err.contains("RLDS: a directory with dataset_info.json"), "{err}");
}

#[test]
fn directories_written_by_robocache_read_back() {
    use robocache_datasets::synthetic::{write_rlds, RldsSpec};
    let dir = tempfile::tempdir().unwrap();
    let spec = RldsSpec { episodes: 7, mean_steps: 12, shards: 3, image: Some([16, 24]), ..Default::default() };
    let version = write_rlds(dir.path(), &spec).unwrap();
    let dataset = Dataset::open_with(&version, &OpenOptions { rate_hz: Some(15.0), ..Default::default() }).unwrap();
    assert_eq!(dataset.len(), 7);
    // Episodes come shard by shard: shard 0 holds episodes 0, 3, 6.
    let ids: Vec<i64> = dataset
        .info()
        .episodes
        .iter()
        .map(|e| e.metadata["episode_metadata"]["episode_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [0, 3, 6, 1, 4, 2, 5]);
    for (index, episode) in dataset.info().episodes.iter().enumerate() {
        let first = dataset.read_stream(index, "is_first").unwrap();
        let HostVec::Bool(first) = first else { panic!("is_first is bool") };
        assert!(first[0] && first[1..].iter().all(|f| !f));
        let image = dataset.read_rows(index, "observation/image", 0..2).unwrap();
        assert_eq!(image.len(), 2 * 16 * 24 * 3);
        assert_eq!(episode.instruction.as_deref(), Some(format!("task {}", ids[index] % 5).as_str()));
    }
}

/// Every stream of every episode, whole, with the episode model as JSON.
fn everything(dataset: &Dataset) -> (String, Vec<HostVec>) {
    let info = serde_json::to_string(dataset.info()).unwrap();
    let rows = (0..dataset.len())
        .flat_map(|e| dataset.info().episodes[e].streams.iter().map(move |s| (e, s.name.clone())))
        .map(|(e, s)| dataset.read_stream(e, &s).unwrap())
        .collect();
    (info, rows)
}

#[test]
fn a_sidecar_index_opens_the_same_dataset_and_is_used_only_while_it_matches() {
    let (_dir, version, _) = broken_copy(&fixtures().join("robocache_fixture_dict/1.0.0"));
    let options = OpenOptions { rate_hz: Some(10.0), ..Default::default() };
    let indexed = Dataset::open_with(&version, &options).unwrap();
    let want = everything(&indexed);
    let written = indexed.write_index(None).unwrap();
    assert_eq!(written, version.join("robocache-index.train.json"));
    let from_index = Dataset::open_with(&version, &options).unwrap();
    assert_eq!(everything(&from_index), want, "the same episode model and rows through the index");
    // The val split has no index of its own and is indexed as before.
    let val = OpenOptions { split: Some("val".into()), ..options.clone() };
    assert_eq!(Dataset::open_with(&version, &val).unwrap().len(), 2);

    // The index is what opening reads: an instruction changed in it shows...
    let text = std::fs::read_to_string(&written).unwrap();
    let mut index: Value = serde_json::from_str(&text).unwrap();
    index["episodes"][0]["instruction"] = Value::from("changed in the index");
    std::fs::write(&written, serde_json::to_vec(&index).unwrap()).unwrap();
    let opened = Dataset::open_with(&version, &options).unwrap();
    assert_eq!(opened.info().episodes[0].instruction.as_deref(), Some("changed in the index"));
    // ...until it no longer matches the shards (here: a shard's size), when the records are read again.
    let true_size = index["shards"][0]["bytes"].as_u64().unwrap();
    index["shards"][0]["bytes"] = Value::from(true_size + 1);
    std::fs::write(&written, serde_json::to_vec(&index).unwrap()).unwrap();
    assert_eq!(everything(&Dataset::open_with(&version, &options).unwrap()), want);
    // Not an index at all, or another layout version: not used either.
    for bad in [b"{ not json".to_vec(), text.replace("\"version\":1", "\"version\":99").into_bytes()] {
        std::fs::write(&written, bad).unwrap();
        assert_eq!(everything(&Dataset::open_with(&version, &options).unwrap()), want);
    }

    // An index that lies about where a record lies (sizes still matching)
    // gives a CRC error on the first read of that record, never wrong rows.
    index["shards"][0]["bytes"] = Value::from(true_size);
    index["episodes"][0]["instruction"] = want_instruction(&want);
    let payload = index["episodes"][0]["payload"][0].as_u64().unwrap();
    index["episodes"][0]["payload"][0] = Value::from(payload + 1);
    let features = index["episodes"][0]["features"].as_array_mut().unwrap();
    for span in features {
        span[0] = Value::from(span[0].as_u64().unwrap() + 1);
    }
    std::fs::write(&written, serde_json::to_vec(&index).unwrap()).unwrap();
    let lying = Dataset::open_with(&version, &options).unwrap();
    let stream = lying.info().episodes[0].streams[0].name.clone();
    let err = lying.read_stream(0, &stream).unwrap_err().to_string();
    assert!(err.contains("tfrecord") && err.to_lowercase().contains("crc"), "{err}");

    // Other formats have no index.
    let lerobot = Dataset::open(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lerobot/v21")).unwrap();
    let err = lerobot.write_index(None).unwrap_err().to_string();
    assert!(err.contains("only RLDS"), "{err}");
}

fn want_instruction(want: &(String, Vec<HostVec>)) -> Value {
    let info: Value = serde_json::from_str(&want.0).unwrap();
    info["episodes"][0]["instruction"].clone()
}

#[test]
fn verify_reads_every_record_and_names_the_episode_and_stream() {
    let options = OpenOptions { rate_hz: Some(10.0), ..Default::default() };
    let good = Dataset::open_with(fixtures().join("robocache_fixture_dict/1.0.0"), &options).unwrap();
    let report = good.verify(2);
    assert!(report.is_ok() && report.episodes == good.len() && report.rows > 0, "{report:?}");
    // A JPEG that does not decode: the directory opens, verify names the
    // episode, the camera stream and the step.
    let bad = Dataset::open_with(fixtures().join("bad/corrupt_jpeg"), &options).unwrap();
    let report = bad.verify(1);
    assert_eq!(report.problems.len(), 1, "{report:?}");
    let problem = &report.problems[0];
    assert_eq!((problem.episode.as_str(), problem.stream.as_str()), ("episode_0", "observation/image"));
    assert!(problem.error.contains("step 2"), "{}", problem.error);
}

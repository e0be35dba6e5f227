//! ROS 2 bags written by `rosbags` (`fixtures/make_ros2_fixtures.py`,
//! committed under `fixtures/ros2/`), read natively: every decoded field
//! equals what `rosbags` deserialises (`fixtures/ros2/expected/`), for the
//! MCAP and the SQLite storage, plus damaged bags and bad mappings.

use std::path::{Path, PathBuf};

use robocache_cpu::HostVec;
use robocache_datasets::ros2::BagMapping;
use robocache_datasets::{Dataset, Format, OpenOptions, StreamKind};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ros2")
}

const MAPPING: &str = r#"
fps = 20

[streams."observation.state"]
topic = "/joint_states"
field = "position"
joints = ["j1", "j2", "j3"]
dtype = "float64"

[streams."observation.velocity"]
topic = "/joint_states"
field = "velocity"
joints = ["j1", "j2", "j3"]
dtype = "float64"

[streams."imu.orientation"]
topic = "/imu"
field = "orientation"
dtype = "float64"

[streams."imu.angular_velocity"]
topic = "/imu"
field = "angular_velocity"
dtype = "float64"

[streams.action]
topic = "/cmd"
field = "data"
dtype = "float64"

[streams."observation.ee_pose"]
topic = "/ee_pose"
fields = ["pose.position", "pose.orientation"]
dtype = "float64"

[streams.gripper]
topic = "/gripper"
field = "data"

[streams."observation.images.wrist"]
topic = "/wrist/image/compressed"

[streams."observation.images.scene"]
topic = "/scene/image"
"#;

fn open(path: &Path, mapping: Option<&str>) -> robocache_datasets::Result<Dataset> {
    let options = OpenOptions { bag_mapping: mapping.map(|m| m.parse().unwrap()), ..Default::default() };
    Dataset::open_with(path, &options)
}

fn npy<T: npyz::Deserialize>(bag: &str, name: &str) -> Vec<T> {
    let path = fixtures().join("expected").join(bag).join(format!("{name}.npy"));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    npyz::NpyFile::new(std::io::BufReader::new(file)).unwrap().into_vec().unwrap()
}

fn f64s(data: HostVec) -> Vec<f64> {
    match data {
        HostVec::F64(v) => v,
        HostVec::F32(v) => v.into_iter().map(f64::from).collect(),
        other => panic!("not floats: {:?}", other.dtype()),
    }
}

fn times(dataset: &Dataset, key: &str) -> Vec<f64> {
    let times = dataset.times(0, key).unwrap();
    (0..times.len()).map(|i| times.time(i)).collect()
}

/// Every mapped stream of the bag equals what rosbags reads, bit for bit.
fn check_bag(path: &str, bag: &str) {
    let dataset = open(&fixtures().join(path), Some(MAPPING)).unwrap();
    let info = dataset.info();
    assert_eq!(info.format, Format::Ros2);
    assert_eq!(info.rate_hz, 20.0);
    assert_eq!(info.episodes.len(), 1);
    let episode = &info.episodes[0];
    let origin: i64 = 1_700_000_000_000_000_000;
    let seconds =
        |ns: &[i64]| ns.iter().map(|&t| (i128::from(t) - i128::from(origin)) as f64 * 1e-9).collect::<Vec<_>>();

    // Joints by name: a joint a message lacks keeps its previous value.
    for (key, field) in [("observation.state", "position"), ("observation.velocity", "velocity")] {
        let table: Vec<f64> = npy(bag, &format!("joint_states.{field}"));
        let mut held = vec![f64::NAN; 3];
        let mut expected = Vec::new();
        for row in table.chunks(3) {
            for (h, v) in held.iter_mut().zip(row) {
                if !v.is_nan() {
                    *h = *v;
                }
            }
            expected.extend_from_slice(&held);
        }
        let got = f64s(dataset.read_stream(0, key).unwrap());
        assert_eq!(got.len(), expected.len(), "{bag} {key}");
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert!(g.to_bits() == e.to_bits(), "{bag} {key} value {i}: {g} != {e}");
        }
        let stamps: Vec<i64> = npy(bag, "joint_states.header_stamp");
        assert_eq!(times(&dataset, key), seconds(&stamps), "{bag} {key} times");
    }
    assert_eq!(f64s(dataset.read_stream(0, "imu.orientation").unwrap()), npy::<f64>(bag, "imu.orientation"));
    assert_eq!(f64s(dataset.read_stream(0, "imu.angular_velocity").unwrap()), npy::<f64>(bag, "imu.angular_velocity"));
    assert_eq!(episode.stream("imu.orientation").unwrap().kind.to_string(), "quaternion-xyzw");
    // No header: log times.
    assert_eq!(f64s(dataset.read_stream(0, "action").unwrap()), npy::<f64>(bag, "cmd.data"));
    let cmd_log: Vec<i64> = npy(bag, "cmd.log_time");
    assert_eq!(times(&dataset, "action"), seconds(&cmd_log));
    // Sorted by header stamp: the message logged late comes back in place.
    let stamps: Vec<i64> = npy(bag, "ee_pose.header_stamp");
    let mut order: Vec<usize> = (0..stamps.len()).collect();
    order.sort_by_key(|&i| stamps[i]);
    assert_ne!(order, (0..stamps.len()).collect::<Vec<_>>(), "the fixture has a message out of order");
    let pose: Vec<f64> = npy(bag, "ee_pose.pose");
    let expected: Vec<f64> = order.iter().flat_map(|&i| pose[i * 7..i * 7 + 7].to_vec()).collect();
    assert_eq!(f64s(dataset.read_stream(0, "observation.ee_pose").unwrap()), expected);
    let sorted: Vec<i64> = order.iter().map(|&i| stamps[i]).collect();
    assert_eq!(times(&dataset, "observation.ee_pose"), seconds(&sorted));
    assert_eq!(
        episode.stream("observation.ee_pose").unwrap().kind,
        "0..3:continuous,3..7:quaternion-xyzw".parse::<StreamKind>().unwrap()
    );
    // Bools: discrete, 0 or 1.
    let gripper: Vec<u8> = npy(bag, "gripper.data");
    assert_eq!(
        f64s(dataset.read_stream(0, "gripper").unwrap()),
        gripper.iter().map(|&g| f64::from(g)).collect::<Vec<_>>()
    );
    assert_eq!(episode.stream("gripper").unwrap().kind.to_string(), "discrete");
    // Frames: PNG decoded, raw rgb8 as sent.
    for (key, name, shape) in [
        ("observation.images.wrist", "wrist_image_compressed", [12, 16, 3]),
        ("observation.images.scene", "scene_image", [6, 8, 3]),
    ] {
        let stream = episode.stream(key).unwrap();
        assert_eq!(stream.step_shape, shape, "{key}");
        assert!(stream.is_image());
        let HostVec::U8(frames) = dataset.read_stream(0, key).unwrap() else { panic!("{key}: not u8") };
        assert_eq!(frames, npy::<u8>(bag, &format!("{name}.pixels")), "{bag} {key}");
    }
}

#[test]
fn an_mcap_bag_reads_as_rosbags_reads_it() {
    check_bag("arm_mcap", "arm_mcap");
}

#[test]
fn an_mcap_file_of_zstd_chunks_reads_the_same() {
    // The `mcap` library's writer: 16 KiB zstd chunks with CRCs.
    check_bag("arm_zstd.mcap", "arm_mcap");
}

#[test]
fn an_mcap_bag_of_ros2idl_schemas_reads_the_same() {
    // `arm_mcap`'s messages, each type defined in IDL as rosidl writes it.
    check_bag("arm_idl.mcap", "arm_mcap");
}

#[test]
fn a_sqlite_bag_reads_as_rosbags_reads_it() {
    check_bag("arm_sqlite", "arm_sqlite");
}

#[test]
/// A SQLite bag as Humble wrote them carries no message definitions:
/// ROS 2 Humble's standard ones are used, and it reads as the Iron bag of
/// the same messages does.
fn a_humble_sqlite_bag_reads_with_the_standard_definitions() {
    check_bag("arm_sqlite_humble", "arm_sqlite");
    let topics =
        robocache_datasets::ros2::topic_stats(&fixtures().join("arm_sqlite_humble"), &Default::default()).unwrap();
    assert!(topics.iter().all(|t| t.not_decodable.is_none()), "{topics:?}");
}

#[test]
fn a_transform_is_looked_up_through_the_tf_tree() {
    // world -> base on /tf (x = 0.01 i at 20 Hz), base -> camera on /tf_static (0.1, 0, 0.5).
    let mapping = "[streams.camera]\ntransform = [\"world\", \"camera\"]\ndtype = \"float64\"\n\n\
                   [streams.back]\ntransform = [\"camera\", \"world\"]\ndtype = \"float64\"\n";
    for bag in ["arm_mcap", "arm_sqlite"] {
        let dataset = open(&fixtures().join(bag), Some(mapping)).unwrap();
        let stream = dataset.info().episodes[0].stream("camera").unwrap().clone();
        assert_eq!(stream.kind.to_string(), "0..3:continuous,3..7:quaternion-xyzw");
        let poses = f64s(dataset.read_stream(0, "camera").unwrap());
        assert_eq!(poses.len(), 40 * 7);
        for (i, pose) in poses.chunks(7).enumerate() {
            let want = [0.01 * i as f64 + 0.1, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
            for (g, w) in pose.iter().zip(want) {
                assert!((g - w).abs() < 1e-12, "{bag} row {i}: {pose:?} != {want:?}");
            }
        }
        let back = f64s(dataset.read_stream(0, "back").unwrap());
        assert!((back[7 * 10] + 0.2).abs() < 1e-12 && (back[7 * 10 + 2] + 1.0).abs() < 1e-12, "{:?}", &back[70..77]);
        let tf_log: Vec<i64> = npy(bag, "tf.log_time");
        let origin = 1_700_000_000_000_000_000i64;
        let expected: Vec<f64> = tf_log.iter().map(|&t| (t - origin) as f64 * 1e-9).collect();
        assert_eq!(times(&dataset, "camera"), expected);
    }
    let unknown = "[streams.x]\ntransform = [\"world\", \"moon\"]\n";
    let error = open(&fixtures().join("arm_mcap"), Some(unknown)).unwrap().read_stream(0, "x").unwrap_err();
    assert!(error.to_string().contains("`moon` are not connected"), "{error}");
}

#[test]
fn a_bag_is_cut_into_episodes_at_time_gaps() {
    // The gripper alone (5 Hz): with gaps of over 0.15 s each message is an episode.
    let mapping = "[episodes]\ngap_s = 0.15\n[streams.gripper]\ntopic = \"/gripper\"\nfield = \"data\"\n";
    for bag in ["arm_mcap", "arm_sqlite"] {
        let dataset = open(&fixtures().join(bag), Some(mapping)).unwrap();
        let episodes = &dataset.info().episodes;
        assert_eq!(episodes.len(), 10, "{bag}");
        assert_eq!(episodes[3].name, format!("{bag}#3"));
        let expected: Vec<u8> = npy(bag, "gripper.data");
        for (e, want) in expected.iter().enumerate() {
            assert_eq!(episodes[e].stream("gripper").unwrap().len, 1);
            assert_eq!(f64s(dataset.read_stream(e, "gripper").unwrap()), [f64::from(*want)], "{bag} episode {e}");
            assert_eq!(
                dataset.times(e, "gripper").unwrap().time(0),
                0.0,
                "each episode's clock starts at its first message"
            );
        }
    }
    // With the commands too (10 Hz) no gap is over 0.15 s: one episode.
    let both = "[episodes]\ngap_s = 0.15\n[streams.gripper]\ntopic = \"/gripper\"\nfield = \"data\"\n\
                [streams.action]\ntopic = \"/cmd\"\nfield = \"data\"\n";
    assert_eq!(open(&fixtures().join("arm_mcap"), Some(both)).unwrap().info().episodes.len(), 1);
    // Cut finer (each command its own part), a part without a gripper
    // message has a gripper stream without rows: padding, not an error.
    let finer = both.replace("0.15", "0.05");
    let dataset = open(&fixtures().join("arm_mcap"), Some(&finer)).unwrap();
    let episodes = &dataset.info().episodes;
    let gripper_rows: Vec<usize> = episodes.iter().map(|e| e.stream("gripper").unwrap().len).collect();
    assert_eq!(gripper_rows.iter().sum::<usize>(), 10, "every gripper message in some part: {gripper_rows:?}");
    let without = gripper_rows.iter().position(|&n| n == 0).expect("a part without a gripper message");
    assert!(dataset.read_stream(without, "gripper").unwrap().is_empty());
    assert!(dataset.times(without, "gripper").unwrap().span().is_none());
    assert_eq!(episodes[without].stream("action").unwrap().len, 1);
    assert!("[episodes]\ngap_s = -1\n".parse::<BagMapping>().is_err());
}

#[test]
fn marker_messages_cut_a_bag_into_episodes() {
    // The gripper (std_msgs/Bool at 5 Hz: 0 1 0 0 1 0 0 1 0 0) as the
    // marker topic, the commands (10 Hz, 2 ms after each 100 ms) mapped.
    let gripper: Vec<u8> = npy("arm_mcap", "gripper.data");
    let log_times = |topic: &str| -> Vec<u64> {
        npy::<i64>("arm_mcap", &format!("{topic}.log_time")).into_iter().map(|t| t as u64).collect()
    };
    let (gripper_times, cmd_times) = (log_times("gripper"), log_times("cmd"));
    let action = "[streams.action]\ntopic = \"/cmd\"\nfield = \"data\"\ndtype = \"float64\"\n";
    let in_range = |a: u64, b: u64| cmd_times.iter().filter(|&&t| a <= t && t <= b).count();
    for bag in ["arm_mcap", "arm_sqlite"] {
        // Start at true, stop at false: three episodes, each from a true to the next false.
        let mapping = format!("[episodes]\nmarkers = \"/gripper\"\nstart = true\nstop = false\n{action}");
        let dataset = open(&fixtures().join(bag), Some(&mapping)).unwrap();
        let starts: Vec<usize> = (0..gripper.len()).filter(|&i| gripper[i] == 1).collect();
        let episodes = &dataset.info().episodes;
        assert_eq!(episodes.len(), starts.len(), "{bag}");
        let all_actions: Vec<f64> = npy(bag, "cmd.data");
        for (e, &s) in starts.iter().enumerate() {
            let (a, b) = (gripper_times[s], gripper_times[s + 1]);
            assert_eq!(episodes[e].name, format!("{bag}#{e}"));
            assert_eq!(episodes[e].stream("action").unwrap().len, in_range(a, b), "{bag} episode {e}");
            let first = cmd_times.iter().position(|&t| t >= a).unwrap();
            let width = all_actions.len() / cmd_times.len();
            let want = &all_actions[first * width..(first + in_range(a, b)) * width];
            assert_eq!(f64s(dataset.read_stream(e, "action").unwrap()), want, "{bag} episode {e}");
            let t0 = dataset.times(e, "action").unwrap().time(0);
            assert!((t0 - (cmd_times[first] - a) as f64 * 1e-9).abs() < 1e-12, "clock from the start marker: {t0}");
        }
        // Without values: every marker message starts an episode, the last to the bag's end.
        let mapping = format!("[episodes]\nmarkers = \"/gripper\"\n{action}");
        let dataset = open(&fixtures().join(bag), Some(&mapping)).unwrap();
        let lens: Vec<usize> = dataset.info().episodes.iter().map(|e| e.stream("action").unwrap().len).collect();
        let mut want: Vec<usize> = gripper_times.windows(2).map(|w| in_range(w[0], w[1] - 1)).collect();
        want.push(in_range(*gripper_times.last().unwrap(), u64::MAX));
        assert_eq!(lens, want, "{bag}");
    }
    // A marker topic the bag lacks, and values without a topic, are errors naming them.
    let missing = format!("[episodes]\nmarkers = \"/episode\"\n{action}");
    let error = open(&fixtures().join("arm_mcap"), Some(&missing)).unwrap_err().to_string();
    assert!(error.contains("/episode") && error.contains("arm_mcap"), "{error}");
    assert!("[episodes]\nstart = true\n".parse::<BagMapping>().is_err());
    assert!("[episodes]\nmarkers = \"/m\"\ngap_s = 1\n".parse::<BagMapping>().is_err());
    let never = format!("[episodes]\nmarkers = \"/gripper\"\nstart = \"go\"\n{action}");
    let error = open(&fixtures().join("arm_mcap"), Some(&never)).unwrap_err().to_string();
    assert!(error.contains("no marker message starts an episode"), "{error}");
}

#[test]
fn point_clouds_read_as_numpy_reads_the_bytes_rosbags_gives() {
    use robocache_datasets::ros2::point_clouds;
    let bag = fixtures().join("clouds_mcap");
    let clouds = point_clouds(&bag, "/lidar/points", &["intensity", "ring"], &Default::default()).unwrap();
    let counts: Vec<i64> = npy("clouds_mcap", "lidar_points.counts");
    let xyz: Vec<f32> = npy("clouds_mcap", "lidar_points.xyz");
    let features: Vec<f32> = npy("clouds_mcap", "lidar_points.intensity_ring");
    assert_eq!(clouds.iter().map(|c| c.len() as i64).collect::<Vec<_>>(), counts);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let got_xyz: Vec<f32> = clouds.iter().flat_map(|c| c.positions.iter().copied()).collect();
    let got_features: Vec<f32> = clouds.iter().flat_map(|c| c.features.iter().copied()).collect();
    assert_eq!(bits(&got_xyz), bits(&xyz), "positions, the NaN point and the big-endian cloud included");
    assert_eq!(bits(&got_features), bits(&features));
    assert!(got_xyz.iter().any(|v| v.is_nan()), "a cloud that is not dense keeps its NaN point");
    assert_eq!(clouds[0].frame_id, "lidar");
    assert!(clouds.windows(2).all(|w| w[0].log_time_ns < w[1].log_time_ns));
    // A field the cloud lacks, or a topic the bag lacks: errors naming them.
    let error = point_clouds(&bag, "/lidar/points", &["rgb"], &Default::default()).unwrap_err().to_string();
    assert!(
        error.contains("no field `rgb`") && error.contains("/lidar/points") && error.contains("message 0"),
        "{error}"
    );
    let error = point_clouds(&bag, "/radar", &[], &Default::default()).unwrap_err().to_string();
    assert!(error.contains("/radar") && error.contains("clouds_mcap"), "{error}");
    // A message that is not a cloud: an error, not a panic.
    let error =
        point_clouds(&fixtures().join("arm_mcap"), "/gripper", &[], &Default::default()).unwrap_err().to_string();
    assert!(error.contains("not a sensor_msgs/PointCloud2"), "{error}");
}

#[test]
fn a_directory_of_bags_is_a_dataset_of_episodes() {
    let dir = tempfile::tempdir().unwrap();
    for bag in ["arm_mcap", "arm_sqlite"] {
        std::fs::create_dir(dir.path().join(bag)).unwrap();
        for entry in std::fs::read_dir(fixtures().join(bag)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.path().join(bag).join(entry.file_name())).unwrap();
        }
    }
    let dataset = open(dir.path(), Some(MAPPING)).unwrap();
    let names: Vec<&str> = dataset.info().episodes.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["arm_mcap/arm_mcap", "arm_sqlite/arm_sqlite"]);
    assert_eq!(f64s(dataset.read_stream(1, "action").unwrap()), npy::<f64>("arm_sqlite", "cmd.data"));
}

#[test]
fn without_a_mapping_every_numeric_field_and_camera_is_a_stream() {
    let dataset = open(&fixtures().join("arm_mcap"), None).unwrap();
    let episode = &dataset.info().episodes[0];
    let mut names: Vec<&str> = episode.streams.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "cmd/data",
            "ee_pose/pose",
            "gripper/data",
            "imu/angular_velocity",
            "imu/linear_acceleration",
            "imu/orientation",
            "joint_states/position",
            "joint_states/velocity",
            "scene/image",
            "wrist/image/compressed",
        ]
    );
    assert_eq!(dataset.info().rate_hz, 30.0);
    assert_eq!(episode.stream("joint_states/position").unwrap().step_shape, [3]);
}

#[test]
fn damaged_bags_and_bad_mappings_are_errors_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read(fixtures().join("arm_zstd.mcap")).unwrap();
    // A recording cut short: no summary, read by a scan up to the cut, with a warning.
    let cut = dir.path().join("cut.mcap");
    std::fs::write(&cut, &original[..original.len() * 2 / 3]).unwrap();
    let dataset = open(&cut, Some(MAPPING)).unwrap();
    let warnings = dataset.info().metadata.get("warnings").map(ToString::to_string).unwrap_or_default();
    assert!(warnings.contains("no MCAP summary") && warnings.contains("cut.mcap"), "{warnings}");
    let whole = open(&fixtures().join("arm_zstd.mcap"), Some(MAPPING)).unwrap();
    let (kept, all) = (&dataset.info().episodes[0], &whole.info().episodes[0]);
    let imu = |e: &robocache_datasets::EpisodeInfo| e.stream("imu.orientation").unwrap().len;
    assert!(imu(kept) > 0 && imu(kept) < imu(all), "{} of {} IMU messages kept", imu(kept), imu(all));
    let kept_rows = f64s(dataset.read_stream(0, "imu.orientation").unwrap());
    assert_eq!(kept_rows, f64s(whole.read_rows(0, "imu.orientation", 0..imu(kept)).unwrap()));
    // A byte of a chunk changed: its CRC fails on the read, naming the file.
    let flipped = dir.path().join("flipped.mcap");
    let mut bytes = original.clone();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x55;
    std::fs::write(&flipped, &bytes).unwrap();
    let error = open(&flipped, Some(MAPPING)).and_then(|d| d.read_stream(0, "action").map(|_| ())).unwrap_err();
    assert!(error.to_string().contains("flipped.mcap"), "{error}");
    // A record inside a chunk claiming 7 EB: the `mcap` crate's chunk reader
    // reserved that much and aborted the process (found by tests/fuzz.rs).
    let mut bytes = std::fs::read(fixtures().join("arm_mcap/arm_mcap.mcap")).unwrap();
    let chunk = 43; // the one chunk: opcode, length, then its header (49 bytes with no compression name)
    assert_eq!(bytes[chunk], 0x06, "not the chunk record");
    let first_record = chunk + 9 + 8 + 8 + 8 + 4 + 4 + 8;
    bytes[first_record + 1..first_record + 9].copy_from_slice(&0x6464_6464_6464_6464u64.to_le_bytes());
    let lying = dir.path().join("lying.mcap");
    std::fs::write(&lying, &bytes).unwrap();
    let error = open(&lying, Some(MAPPING)).and_then(|d| d.read_stream(0, "action").map(|_| ())).unwrap_err();
    assert!(error.to_string().contains("lying.mcap") && error.to_string().contains("claims"), "{error}");
    // A topic no bag has.
    let mapping = "[streams.x]\ntopic = \"/nope\"\n";
    let error = open(&fixtures().join("arm_mcap"), Some(mapping)).unwrap_err().to_string();
    assert!(error.contains("`x`") && error.contains("/nope"), "{error}");
    // A field the message lacks.
    let mapping = "[streams.x]\ntopic = \"/cmd\"\nfield = \"nothing\"\n";
    let error = open(&fixtures().join("arm_mcap"), Some(mapping)).unwrap_err().to_string();
    assert!(error.contains("/cmd") && error.contains("nothing"), "{error}");
    // `time = "header"` on a type without a header; an unknown key.
    let mapping = "[streams.x]\ntopic = \"/cmd\"\nfield = \"data\"\ntime = \"header\"\n";
    let error = open(&fixtures().join("arm_mcap"), Some(mapping)).unwrap_err().to_string();
    assert!(error.contains("no std_msgs/Header"), "{error}");
    assert!("[streams.x]\ntopic = \"/cmd\"\nfeild = \"data\"\n".parse::<BagMapping>().is_err());
    // Not a bag at all.
    let junk = dir.path().join("junk.db3");
    std::fs::write(&junk, b"not sqlite").unwrap();
    let error = open(&junk, None).unwrap_err().to_string();
    assert!(error.contains("junk.db3"), "{error}");
}

#[test]
/// `decode_messages` decodes every message of every topic (as many as
/// `topic_stats` counts, in both storages), and a message that does not
/// decode is reported by topic and index while the other topics decode.
/// The damaged bag is the fixture rewritten by the `mcap` crate's writer
/// with the fourth `/joint_states` message cut to 3 bytes; then again in
/// 4 KiB chunks with the 151st cut, decoded on 1 and on 4 threads (chunks
/// side by side): the same counts and the same message named.
fn every_message_decodes_and_a_bad_one_is_named() {
    use robocache_datasets::ros2::{decode_messages, topic_stats};
    use robocache_datasets::StorageOptions;

    let storage = StorageOptions::default();
    for bag in ["arm_mcap", "arm_sqlite"] {
        let counted = topic_stats(&fixtures().join(bag), &storage).unwrap();
        let decoded = decode_messages(&fixtures().join(bag), &storage, 0).unwrap();
        assert_eq!(counted.len(), decoded.len(), "{bag}");
        for (count, decode) in counted.iter().zip(&decoded) {
            assert_eq!((&count.topic, count.messages), (&decode.topic, decode.messages), "{bag}");
            assert!(decode.error.is_none() && decode.bytes > 0, "{bag} {}: {:?}", decode.topic, decode.error);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixtures().join("arm_mcap/arm_mcap.mcap")).unwrap();
    for (chunk_bytes, cut) in [(None, 3usize), (Some(4096u64), 150)] {
        let damaged = dir.path().join(format!("damaged_{cut}.mcap"));
        let file = std::io::BufWriter::new(std::fs::File::create(&damaged).unwrap());
        let mut writer = mcap::WriteOptions::new().chunk_size(chunk_bytes).create(file).unwrap();
        let mut joint_states = 0;
        for message in mcap::MessageStream::new(&bytes).unwrap() {
            let mut message = message.unwrap();
            if message.channel.topic == "/joint_states" {
                if joint_states == cut {
                    message.data = std::borrow::Cow::Owned(message.data[..3].to_vec());
                }
                joint_states += 1;
            }
            writer.write(&message).unwrap();
        }
        writer.finish().unwrap();
        drop(writer);
        let one = decode_messages(&damaged, &storage, 1).unwrap();
        for decoded in [&one, &decode_messages(&damaged, &storage, 4).unwrap()] {
            let joints = decoded.iter().find(|t| t.topic == "/joint_states").unwrap();
            assert_eq!(joints.messages, cut as u64);
            let named = format!("message {cut}:");
            assert!(joints.error.as_deref().is_some_and(|e| e.starts_with(&named)), "{:?}", joints.error);
            let imu = decoded.iter().find(|t| t.topic == "/imu").unwrap();
            assert_eq!((imu.messages, imu.error.as_ref()), (400, None));
            let totals = |d: &[robocache_datasets::ros2::TopicDecode]| -> Vec<(u64, u64)> {
                d.iter().map(|t| (t.messages, t.bytes)).collect()
            };
            assert_eq!(totals(decoded), totals(&one), "every thread count gives the same counts");
        }
    }
}

#[test]
/// A `foxglove_msgs/CompressedVideo` topic (H.264 from x264, written by
/// rosbags; `make_ros2_video_fixture.py`) reads as frames equal to what
/// FFmpeg decodes from the same bytes (its YUV planes, converted as every
/// video frame is), whole and from the middle of a group of pictures, on
/// the clock of the messages' `timestamp`.
fn a_compressed_video_topic_reads_as_ffmpeg_decodes_it() {
    let both = "[streams.camera]\ntopic = \"/camera/video\"\n[streams.camera_h265]\ntopic = \"/camera/video_h265\"\n";
    let dataset = open(&fixtures().join("video_mcap"), Some(both)).unwrap();
    for (key, expected) in [("camera", "camera_video"), ("camera_h265", "camera_video_h265")] {
        let stream = dataset.info().episodes[0].stream(key).unwrap();
        assert_eq!((stream.step_shape.as_slice(), stream.len), ([48, 64, 3].as_slice(), 24), "{key}");
        let planes: Vec<u8> = npy("video_mcap", &format!("{expected}.yuv420"));
        let frame_planes = 64 * 48 * 3 / 2;
        let mut expected = vec![0u8; 24 * 48 * 64 * 3];
        for (k, rgb) in expected.chunks_exact_mut(48 * 64 * 3).enumerate() {
            robocache_video::yuv420_to_rgb_into(64, 48, &planes[k * frame_planes..(k + 1) * frame_planes], rgb);
        }
        let HostVec::U8(all) = dataset.read_stream(0, key).unwrap() else { panic!("not u8") };
        assert!(all == expected, "{key}: the frames differ from FFmpeg's");
        // From the middle of the second group of pictures (key frames at 0, 8, 16).
        let HostVec::U8(some) = dataset.read_rows(0, key, 10..13).unwrap() else { panic!("not u8") };
        assert!(some == expected[10 * 9216..13 * 9216], "{key}: rows 10..13 differ");
    }
    compressed_video_reads_as_camera_video(&dataset);
    let times = times(&dataset, "camera");
    // `timestamp`, 2 ms before each log time (the bag's clock starts at its first log time).
    assert!((times[0] + 0.002).abs() < 1e-9 && (times[3] - times[0] - 0.1).abs() < 1e-9, "{times:?}");
    let mapping = "[streams.camera]\ntopic = \"/camera/video\"\n";
    // A recording that starts in the middle of a group of pictures (the
    // first 3 frames cut): frames 3 to 7 cannot be decoded, and the stream
    // starts at the key frame at 8, on its own clock.
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixtures().join("video_mcap/video_mcap.mcap")).unwrap();
    let rewrite = |name: &str, left_out: &dyn Fn(usize) -> bool| {
        let path = dir.path().join(name);
        let mut writer = mcap::Writer::new(std::io::BufWriter::new(std::fs::File::create(&path).unwrap())).unwrap();
        let mut k = 0;
        for message in mcap::MessageStream::new(&bytes).unwrap() {
            let message = message.unwrap();
            if message.channel.topic == "/camera/video" {
                k += 1;
                if left_out(k - 1) {
                    continue;
                }
            }
            writer.write(&message).unwrap();
        }
        writer.finish().unwrap();
        drop(writer);
        path
    };
    let cut = rewrite("cut.mcap", &|k| k < 3);
    let late = open(&cut, Some(mapping)).unwrap();
    assert_eq!(late.info().episodes[0].stream("camera").unwrap().len, 16);
    let HostVec::U8(frames) = late.read_rows(0, "camera", 0..16).unwrap() else { panic!("not u8") };
    let HostVec::U8(whole) = dataset.read_rows(0, "camera", 8..24).unwrap() else { panic!("not u8") };
    assert!(frames == whole, "the stream is the original's frames 8 to 23");
    let late_times = self::times(&late, "camera");
    let shift = late_times[0] - (times[8] - times[0]);
    assert!(late_times.iter().zip(&times[8..]).all(|(a, b)| (a - (b - times[0]) - shift).abs() < 1e-6));
    // A topic without any key frame: an error that says so.
    let keyless = rewrite("keyless.mcap", &|k| k % 8 == 0);
    let error = open(&keyless, Some(mapping)).unwrap_err().to_string();
    assert!(error.contains("key frame") && error.contains("/camera/video"), "{error}");
}

/// The video bag's streams read as camera video (what the loader reads):
/// scattered frames as RGB equal the rows read in order, as YUV equal
/// FFmpeg's planes; the frame cache serves them a second time with no
/// decoding; frames read together decode each group of pictures once;
/// NVDEC alone is refused by name.
fn compressed_video_reads_as_camera_video(dataset: &Dataset) {
    use robocache_video::{DecoderChoice, FrameFormat};
    assert_eq!(dataset.video_frame_size("camera"), Some((64, 48)));
    let frame_planes = robocache_video::yuv420_len(64, 48);
    for (key, expected) in [("camera", "camera_video"), ("camera_h265", "camera_video_h265")] {
        let planes: Vec<u8> = npy("video_mcap", &format!("{expected}.yuv420"));
        let HostVec::U8(all) = dataset.read_rows(0, key, 0..24).unwrap() else { panic!("not u8") };
        // Out of order, repeated, across groups (key frames at 0, 8, 16).
        let rows = [19usize, 3, 3, 12, 23, 0];
        let wanted: Vec<(usize, usize)> = rows.iter().map(|&r| (0, r)).collect();
        dataset.reset_frame_cache_counts();
        let mut rgb = vec![0u8; rows.len() * 9216];
        dataset.read_video_frames_at_into(key, &wanted, FrameFormat::Rgb, &mut rgb).unwrap();
        for (got, &row) in rgb.chunks(9216).zip(&rows) {
            assert!(got == &all[row * 9216..(row + 1) * 9216], "{key}: row {row}");
        }
        // In order: 0..=3 (4 units), 8..=12 (5: from the key frame at 8),
        // 16..=19 (4), 20..=23 (4, on from 19): each group once.
        let counts = dataset.video_decode_counts().unwrap();
        assert_eq!((counts.cpu_samples, counts.nvdec_samples), (17, 0), "{key}");
        dataset.set_frame_cache_budget(64 << 20);
        for round in 0..2 {
            let mut yuv = vec![0u8; rows.len() * frame_planes];
            dataset.read_video_frames_at_into(key, &wanted, FrameFormat::Yuv420, &mut yuv).unwrap();
            for (got, &row) in yuv.chunks(frame_planes).zip(&rows) {
                assert!(got == &planes[row * frame_planes..(row + 1) * frame_planes], "{key}: YUV of row {row}");
            }
            let usage = dataset.frame_cache_usage().unwrap();
            assert_eq!(usage.frames, 5, "{key}: the five distinct frames are kept");
            if round == 1 {
                assert!(usage.hits >= 6, "{key}: the second read comes from the cache: {usage:?}");
            }
        }
        dataset.set_frame_cache_budget(0);
    }
    // NVDEC beside the CPU: the same frames (on the CPU where there is no
    // NVDEC); NVDEC alone: the same frames, decoded on NVDEC (counted), or,
    // only where this machine has no GPU (CI) and the run does not require
    // one (`ROBOCACHE_REQUIRE_CUDA=1` on the GPU host), an error naming the
    // bag's topic and NVDEC.
    let required = std::env::var("ROBOCACHE_REQUIRE_CUDA").is_ok_and(|v| v == "1");
    let HostVec::U8(all) = dataset.read_rows(0, "camera", 0..24).unwrap() else { panic!("not u8") };
    let wanted: Vec<(usize, usize)> = [5usize, 20, 21].iter().map(|&r| (0, r)).collect();
    for choice in [DecoderChoice::auto(0), DecoderChoice::Nvdec { device: 0 }] {
        dataset.set_video_decoders(choice);
        let mut rgb = vec![0u8; 3 * 9216];
        let before = dataset.video_decode_counts().unwrap();
        match dataset.read_video_frames_at_into("camera", &wanted, FrameFormat::Rgb, &mut rgb) {
            Ok(()) => {
                for (got, &(_, row)) in rgb.chunks(9216).zip(&wanted) {
                    assert!(got == &all[row * 9216..(row + 1) * 9216], "{choice:?}: row {row}");
                }
                let after = dataset.video_decode_counts().unwrap();
                let counts = (after.cpu_samples - before.cpu_samples, after.nvdec_samples - before.nvdec_samples);
                let (cpu, nvdec) = counts;
                if matches!(choice, DecoderChoice::Nvdec { .. }) {
                    assert!(nvdec > 0 && cpu == 0, "{choice:?}: (cpu, nvdec) samples {counts:?}");
                } else if required {
                    assert!(nvdec > 0, "{choice:?} with a GPU required: (cpu, nvdec) samples {counts:?}");
                }
            }
            Err(error) => {
                let text = error.to_string();
                assert!(!required, "ROBOCACHE_REQUIRE_CUDA=1, and {choice:?} failed: {text}");
                assert!(matches!(choice, DecoderChoice::Nvdec { .. }), "{choice:?}: {text}");
                assert!(text.contains("NVDEC") && text.contains("/camera/video"), "{text}");
            }
        }
    }
    dataset.set_video_decoders(DecoderChoice::Cpu);
}

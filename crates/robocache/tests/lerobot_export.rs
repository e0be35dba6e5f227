//! A ROS 2 bag (written by rosbags) exported as a LeRobot v3.0 root: read
//! back through robocache's LeRobot reader (checked against LeRobot 0.6.1's
//! own batches in robocache-datasets' tests), every frame equals the bag's
//! streams resampled on the same clock, and the metadata says what LeRobot
//! reads.

use std::path::PathBuf;

use robocache::datasets::ros2::BagMapping;
use robocache::datasets::{Dataset, Format, OpenOptions, TimeWindowSpec, TimeWindows};
use robocache::lerobot_export::{export_lerobot, LeRobotExport};
use robocache::{Device, HostVec};

fn bag() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/ros2/arm_mcap")
}

const MAPPING: &str = r#"
fps = 20
[streams."observation.state"]
topic = "/joint_states"
field = "position"
joints = ["j1", "j2", "j3"]
[streams."observation.images.wrist"]
topic = "/wrist/image/compressed"
[streams.action]
topic = "/cmd"
field = "data"
dtype = "float64"
[streams.gripper]
topic = "/gripper"
field = "data"
"#;

#[test]
fn a_bag_exported_as_lerobot_reads_back_as_the_bag_resampled() {
    let mapping: BagMapping = MAPPING.parse().unwrap();
    let source = Dataset::open_with(bag(), &OpenOptions { bag_mapping: Some(mapping), ..Default::default() }).unwrap();
    let out = tempfile::tempdir().unwrap();
    let root = out.path().join("arm");
    let export =
        LeRobotExport { fps: 20.0, streams: Vec::new(), task: "pick the cube".into(), robot_type: Some("arm".into()) };
    let mut done = Vec::new();
    let written = export_lerobot(&source, &root, &export, |d, n| done.push((d, n))).unwrap();
    assert_eq!(done, [(1, 1)]);
    assert_eq!((written.episodes, written.data_files), (1, 1));

    let lerobot = Dataset::open(&root).unwrap();
    assert_eq!(lerobot.info().format, Format::LeRobot);
    assert_eq!(lerobot.info().rate_hz, 20.0);
    let episode = &lerobot.info().episodes[0];
    assert_eq!(episode.len, written.frames);
    assert_eq!(episode.instruction.as_deref(), Some("pick the cube"));

    // The same ticks resampled from the bag: the span every stream covers.
    let streams = ["action", "gripper", "observation.images.wrist", "observation.state"];
    let windows = TimeWindows::new(&source, &streams, &TimeWindowSpec { hz: 20.0, history: 0, horizon: 1 }).unwrap();
    let samples: Vec<usize> = windows.episode_samples(0).collect();
    let batch = Device::cpu().time_window_batch(&source, &windows, &samples, &streams).unwrap();
    let mut valid = vec![true; samples.len()];
    for stream in &batch.streams {
        for (v, m) in valid.iter_mut().zip(stream.mask.to_vec::<bool>().unwrap()) {
            *v &= m;
        }
    }
    let from = valid.iter().position(|&v| v).unwrap();
    let to = valid.iter().rposition(|&v| v).unwrap() + 1;
    assert_eq!(to - from, written.frames);
    assert!(from > 0, "the cameras start after the joints: the first ticks are left out");
    for stream in &batch.streams {
        let width = stream.data.shape()[2..].iter().product::<usize>();
        let expected = stream.data.to_host().unwrap();
        let got = lerobot.read_stream(0, &stream.name).unwrap();
        let bits = |values: HostVec| -> Vec<u64> {
            match values {
                HostVec::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
                HostVec::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
                HostVec::U8(v) => v.iter().map(|&x| u64::from(x)).collect(),
                other => panic!("{}: {}", stream.name, other.dtype()),
            }
        };
        assert_eq!(expected.dtype(), got.dtype(), "{}", stream.name);
        let (expected, got) = (bits(expected), bits(got));
        assert_eq!(got, expected[from * width..to * width], "{}", stream.name);
    }
    // Timestamps k / fps, LeRobot's bookkeeping columns.
    let HostVec::F32(timestamps) = lerobot.read_stream(0, "timestamp").unwrap() else { panic!() };
    assert!(timestamps.iter().enumerate().all(|(k, &t)| t == (k as f64 / 20.0) as f32));

    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("meta/info.json")).unwrap()).unwrap();
    assert_eq!(info["codebase_version"], "v3.0");
    assert_eq!(info["fps"], 20);
    assert_eq!(info["robot_type"], "arm");
    assert_eq!(info["features"]["observation.images.wrist"]["dtype"], "image");
    assert_eq!(info["features"]["action"]["dtype"], "float64");
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("meta/stats.json")).unwrap()).unwrap();
    assert_eq!(stats["observation.state"]["count"][0], written.frames);
    assert_eq!(stats["observation.images.wrist"]["mean"].as_array().unwrap().len(), 3);

    // A root that exists and is not empty is not written over.
    let error = export_lerobot(&source, &root, &export, |_, _| {}).unwrap_err();
    assert!(error.to_string().contains("not empty"), "{error}");
}

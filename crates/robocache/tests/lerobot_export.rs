//! A ROS 2 bag (written by rosbags) exported as a LeRobot v3.0 root: read
//! back through robocache's LeRobot reader (checked against LeRobot 0.6.1's
//! own batches in robocache-datasets' tests), every frame equals the bag's
//! streams resampled on the same clock (camera frames stored as `image`
//! features bit for bit; as `video` features within H.264's loss), and the
//! metadata says what LeRobot reads.

use std::path::PathBuf;

use robocache::datasets::ros2::BagMapping;
use robocache::datasets::{CameraStorage, Dataset, Format, OpenOptions, TimeWindowSpec, TimeWindows};
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

fn psnr(a: &[u64], b: &[u64]) -> f64 {
    let mse = a.iter().zip(b).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum::<f64>() / a.len() as f64;
    10.0 * (255.0f64 * 255.0 / mse.max(1e-12)).log10()
}

#[test]
fn a_bag_exported_as_lerobot_reads_back_as_the_bag_resampled() {
    let cameras = CameraStorage::Image;
    let mapping: BagMapping = MAPPING.parse().unwrap();
    let source = Dataset::open_with(bag(), &OpenOptions { bag_mapping: Some(mapping), ..Default::default() }).unwrap();
    let out = tempfile::tempdir().unwrap();
    let root = out.path().join("arm");
    let export = LeRobotExport {
        fps: 20.0,
        streams: Vec::new(),
        task: "pick the cube".into(),
        robot_type: Some("arm".into()),
        cameras,
    };
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
    let windows =
        TimeWindows::new(&source, &streams, &TimeWindowSpec { hz: 20.0, history: 0, horizon: 1, causal: false })
            .unwrap();
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
        let expected = &expected[from * width..to * width];
        assert_eq!(got, expected, "{}", stream.name);
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
    assert!(!root.join("videos").exists());
    assert_eq!(info["features"]["action"]["dtype"], "float64");
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("meta/stats.json")).unwrap()).unwrap();
    assert_eq!(stats["observation.state"]["count"][0], written.frames);
    assert_eq!(stats["observation.images.wrist"]["mean"].as_array().unwrap().len(), 3);

    // A root that exists and is not empty is not written over.
    let error = export_lerobot(&source, &root, &export, |_, _| {}).unwrap_err();
    assert!(error.to_string().contains("not empty"), "{error}");
}

/// Both video topics of the CompressedVideo bag (H.264 and H.265 in,
/// `make_ros2_video_fixture.py`) exported as `video` features (H.264 out):
/// each frame within H.264's loss of the bag's frame at the same tick, in
/// one MP4 file per camera that the metadata points to.
#[test]
fn a_bag_exported_with_video_features_reads_back_within_the_codec_loss() {
    let mapping: BagMapping =
        "[streams.camera]\ntopic = \"/camera/video\"\n[streams.camera_h265]\ntopic = \"/camera/video_h265\"\n"
            .parse()
            .unwrap();
    let bag = bag().with_file_name("video_mcap");
    let source = Dataset::open_with(bag, &OpenOptions { bag_mapping: Some(mapping), ..Default::default() }).unwrap();
    let out = tempfile::tempdir().unwrap();
    let root = out.path().join("video");
    let export = LeRobotExport {
        fps: 10.0,
        streams: Vec::new(),
        task: String::new(),
        robot_type: None,
        cameras: CameraStorage::Video { key_frame_every: 2 },
    };
    let written = export_lerobot(&source, &root, &export, |_, _| {}).unwrap();
    let lerobot = Dataset::open(&root).unwrap();
    let streams = ["camera", "camera_h265"];
    let windows =
        TimeWindows::new(&source, &streams, &TimeWindowSpec { hz: 10.0, history: 0, horizon: 1, causal: false })
            .unwrap();
    let samples: Vec<usize> = windows.episode_samples(0).collect();
    let batch = Device::cpu().time_window_batch(&source, &windows, &samples, &streams).unwrap();
    let masks: Vec<Vec<bool>> = batch.streams.iter().map(|s| s.mask.to_vec::<bool>().unwrap()).collect();
    let from = (0..samples.len()).position(|k| masks.iter().all(|m| m[k])).unwrap();
    assert_eq!(lerobot.info().episodes[0].len, written.frames);
    for stream in &batch.streams {
        let HostVec::U8(expected) = stream.data.to_host().unwrap() else { panic!("frames are u8") };
        let HostVec::U8(got) = lerobot.read_stream(0, &stream.name).unwrap() else { panic!("frames are u8") };
        let frame = 48 * 64 * 3;
        assert_eq!(got.len(), written.frames * frame, "{}", stream.name);
        let expected = &expected[from * frame..(from + written.frames) * frame];
        let wide = |v: &[u8]| v.iter().map(|&x| u64::from(x)).collect::<Vec<_>>();
        for (k, (a, b)) in got.chunks(frame).zip(expected.chunks(frame)).enumerate() {
            let quality = psnr(&wide(a), &wide(b));
            assert!(quality > 30.0, "{}, frame {k}: PSNR {quality:.1} dB", stream.name);
        }
        assert!(root.join(format!("videos/{}/chunk-000/file-000.mp4", stream.name)).is_file());
    }
}

/// The arm bag's 12×16 camera is below the smallest frame the H.264
/// encoder takes: as a video feature it is refused before anything is
/// written, naming the camera, its size and the way out.
#[test]
fn a_camera_too_small_for_video_is_refused_by_name() {
    let mapping: BagMapping = MAPPING.parse().unwrap();
    let source = Dataset::open_with(bag(), &OpenOptions { bag_mapping: Some(mapping), ..Default::default() }).unwrap();
    let out = tempfile::tempdir().unwrap();
    let export = LeRobotExport {
        fps: 20.0,
        streams: Vec::new(),
        task: String::new(),
        robot_type: None,
        cameras: CameraStorage::default(),
    };
    let error = export_lerobot(&source, &out.path().join("arm"), &export, |_, _| {}).unwrap_err().to_string();
    assert!(
        error.contains("observation.images.wrist") && error.contains("16×12") && error.contains("image"),
        "{error}"
    );
}

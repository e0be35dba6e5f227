//! A LeRobot root written with camera frames as `video` features (H.264
//! MP4) reads back through robocache's LeRobot reader: every episode's
//! frames within the codec's tolerance of what was written and equal to
//! decoding its file from `from_timestamp`, the vectors bit for bit, the
//! files rolled over at the size asked for, and the metadata as LeRobot
//! 0.6 reads it (`videos/<key>/{chunk_index, file_index, from_timestamp,
//! to_timestamp}`, the feature's `info`).

use std::path::Path;

use robocache_cpu::{DType, HostVec};
use robocache_datasets::{CameraStorage, Dataset, LeRobotFeatureToWrite, LeRobotWriter};
use robocache_video::VideoFile;

const FPS: f64 = 15.0;
const CAMERA: &str = "observation.images.front";

/// Episode `e`'s frames: a gradient that moves, and a square.
fn frames(e: usize, n: usize, h: usize, w: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * h * w * 3);
    for k in 0..n {
        for y in 0..h {
            for x in 0..w {
                let square = (x + 40 - (k % 40)) % w < 8 && y / 8 == e % (h / 8);
                out.extend_from_slice(&[
                    (20 + 2 * x + k) as u8,
                    (60 + 3 * y + 10 * e) as u8,
                    if square { 220 } else { 90 },
                ]);
            }
        }
    }
    out
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let mse = a.iter().zip(b).map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2)).sum::<f64>() / a.len() as f64;
    10.0 * (255.0f64 * 255.0 / mse.max(1e-12)).log10()
}

fn features(h: usize, w: usize) -> Vec<LeRobotFeatureToWrite> {
    vec![
        LeRobotFeatureToWrite { name: "observation.state".into(), dtype: DType::F32, shape: vec![2], names: None },
        LeRobotFeatureToWrite { name: CAMERA.into(), dtype: DType::U8, shape: vec![h, w, 3], names: None },
    ]
}

/// Writes episodes of `lengths` frames; returns each one's camera frames and states.
fn write(root: &Path, lengths: &[usize], file_bytes: Option<u64>) -> Vec<(Vec<u8>, Vec<f32>)> {
    let (h, w) = (32, 48);
    let mut writer =
        LeRobotWriter::create(root, FPS, features(h, w), None, CameraStorage::Video { key_frame_every: 2 }).unwrap();
    if let Some(bytes) = file_bytes {
        writer.set_video_file_bytes(bytes);
    }
    let mut written = Vec::new();
    for (e, &n) in lengths.iter().enumerate() {
        let states: Vec<f32> = (0..2 * n).map(|i| (i as f32 * 0.25 + e as f32).sin()).collect();
        let camera = frames(e, n, h, w);
        writer.add_episode("stack", n, &[HostVec::F32(states.clone()), HostVec::U8(camera.clone())]).unwrap();
        written.push((camera, states));
    }
    writer.finish().unwrap();
    written
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn video_features_read_back_episode_by_episode_within_the_codec_tolerance() {
    let lengths = [23, 1, 40, 7];
    for (file_bytes, files) in [(None, 1), (Some(1), lengths.len())] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let written = write(&root, &lengths, file_bytes);

        let info = json(&root.join("meta/info.json"));
        let feature = &info["features"][CAMERA];
        assert_eq!(feature["dtype"], "video");
        assert_eq!(feature["shape"], serde_json::json!([32, 48, 3]));
        assert_eq!(
            (feature["info"]["video.codec"].as_str(), feature["info"]["video.g"].as_u64()),
            (Some("h264"), Some(2))
        );
        assert_eq!(info["video_path"], "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4");
        let mp4s: Vec<_> =
            (0..files).map(|f| root.join(format!("videos/{CAMERA}/chunk-000/file-{f:03}.mp4"))).collect();
        assert!(mp4s.iter().all(|p| p.is_file()), "{files} file(s)");
        assert!(!root.join(format!("videos/{CAMERA}/chunk-000/file-{files:03}.mp4")).exists());

        let dataset = Dataset::open(&root).unwrap();
        assert_eq!(dataset.info().episodes.len(), lengths.len());
        let mut in_file = 0usize;
        for (e, ((camera, states), &n)) in written.iter().zip(&lengths).enumerate() {
            let HostVec::U8(got) = dataset.read_stream(e, CAMERA).unwrap() else { panic!("frames are u8") };
            assert_eq!(got.len(), camera.len(), "episode {e}");
            for (k, (a, b)) in got.chunks(32 * 48 * 3).zip(camera.chunks(32 * 48 * 3)).enumerate() {
                let quality = psnr(a, b);
                assert!(quality > 30.0, "episode {e}, frame {k}: PSNR {quality:.1} dB");
            }
            let HostVec::F32(got_states) = dataset.read_stream(e, "observation.state").unwrap() else { panic!() };
            assert_eq!(&got_states, states, "episode {e}: vectors are stored as they are");

            // The frames are the file's, from the episode's first one on.
            let file = if files == 1 { 0 } else { e };
            if files > 1 {
                in_file = 0;
            }
            let video = VideoFile::open(&mp4s[file]).unwrap();
            let first = video.frame_at(in_file as f64 / FPS).unwrap();
            assert_eq!(first, in_file, "episode {e}");
            let decoded = video.decode_rgb(&(first..first + n).collect::<Vec<_>>()).unwrap();
            assert_eq!(decoded.concat(), got, "episode {e}: the reader's frames are the file's");
            in_file += n;
        }
        let stats = json(&root.join("meta/stats.json"));
        assert_eq!(stats[CAMERA]["count"][0], lengths.iter().sum::<usize>());
        assert_eq!(stats[CAMERA]["mean"].as_array().unwrap().len(), 3);
    }
}

#[test]
fn frames_the_encoder_cannot_take_are_refused_before_any_episode() {
    let dir = tempfile::tempdir().unwrap();
    let error = LeRobotWriter::create(dir.path(), FPS, features(31, 48), None, CameraStorage::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains(CAMERA) && error.contains("48×31") && error.contains("image feature"), "{error}");
    // As images, any size is written.
    assert!(LeRobotWriter::create(dir.path(), FPS, features(31, 48), None, CameraStorage::Image).is_ok());
    let error =
        LeRobotWriter::create(dir.path(), FPS, features(32, 48), None, CameraStorage::Video { key_frame_every: 0 })
            .unwrap_err()
            .to_string();
    assert!(error.contains("key frame"), "{error}");
}

#[test]
fn nan_is_left_out_of_the_statistics_and_a_feature_of_nan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let feature =
        |name: &str| LeRobotFeatureToWrite { name: name.into(), dtype: DType::F32, shape: vec![2], names: None };
    // A joint NaN before its first reading: statistics over the rest, no `null`.
    let root = dir.path().join("partial");
    let mut writer =
        LeRobotWriter::create(&root, FPS, vec![feature("observation.state")], None, CameraStorage::Image).unwrap();
    let states = vec![1.0, f32::NAN, 2.0, f32::NAN, 3.0, 4.0, 5.0, 6.0];
    writer.add_episode("reach", 4, &[HostVec::F32(states)]).unwrap();
    writer.finish().unwrap();
    let text = std::fs::read_to_string(root.join("meta/stats.json")).unwrap();
    assert!(!text.contains("null"), "{text}");
    let stats = json(&root.join("meta/stats.json"));
    assert_eq!(stats["observation.state"]["mean"], serde_json::json!([2.75, 5.0]), "{stats}");
    assert_eq!(stats["observation.state"]["min"][1], 4.0);
    // A channel NaN in every frame: an error naming the feature, before `meta/`.
    let root = dir.path().join("never");
    let mut writer =
        LeRobotWriter::create(&root, FPS, vec![feature("observation.state")], None, CameraStorage::Image).unwrap();
    writer.add_episode("reach", 2, &[HostVec::F32(vec![1.0, f32::NAN, 2.0, f32::NAN])]).unwrap();
    let error = writer.finish().unwrap_err().to_string();
    assert!(error.contains("observation.state") && error.contains("channel 1 is NaN in every frame"), "{error}");
    assert!(!root.join("meta/info.json").exists());
}

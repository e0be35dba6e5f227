//! The three layouts read from files that h5py and NumPy wrote.

mod support;

use robocache_cpu::{DType, HostVec};
use robocache_datasets::{
    convert_calvin, ChannelKind, Dataset, Format, OpenOptions, StreamKind, StreamTimes, Timeline,
};
use support::fixture;

fn f32s(data: HostVec) -> Vec<f32> {
    match data {
        HostVec::F32(v) => v,
        other => panic!("expected f32, got {}", other.dtype()),
    }
}

#[test]
fn robomimic_layout_metadata() {
    let (_dir, path) = fixture("robomimic", "lift.hdf5", &[]);
    let dataset = Dataset::open(&path).unwrap();
    let info = dataset.info();
    assert_eq!(info.format, Format::Robomimic);
    assert_eq!(info.rate_hz, 20.0);
    let names: Vec<&str> = info.episodes.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["demo_0", "demo_1", "demo_2", "demo_3", "demo_10"], "numeric order, as robomimic sorts");
    assert_eq!(info.episodes.iter().map(|e| e.len).collect::<Vec<_>>(), [7, 1, 3, 5, 12]);
    assert_eq!(info.splits, ["long", "train", "valid"]);
    assert_eq!(info.metadata["env_args"]["env_kwargs"]["control_freq"], 20);

    let demo = &info.episodes[4];
    assert!((demo.duration_s - 11.0 / 20.0).abs() < 1e-12);
    assert_eq!(demo.metadata["model_file"], "<mujoco/>");
    let stream = |name: &str| demo.stream(name).unwrap_or_else(|| panic!("no stream {name}"));
    assert_eq!(stream("actions").dtype, DType::F32);
    assert_eq!(stream("actions").step_shape, [7]);
    assert_eq!(stream("actions").kind, StreamKind::All(ChannelKind::Continuous));
    assert_eq!(stream("rewards").dtype, DType::F64);
    assert_eq!(stream("rewards").step_shape, Vec::<usize>::new());
    assert_eq!(stream("rewards").kind, StreamKind::All(ChannelKind::Discrete));
    assert_eq!(stream("dones").dtype, DType::I64);
    assert_eq!(stream("obs/robot0_eef_quat").kind.to_string(), "quaternion-xyzw");
    assert_eq!(stream("obs/agentview_image").dtype, DType::U8);
    assert_eq!(stream("obs/agentview_image").step_shape, [8, 8, 3]);
    assert!(stream("next_obs/agentview_image").is_image());
    let fast = stream("obs/joint_pos_fast");
    assert_eq!(fast.len, 60);
    assert_eq!(fast.timeline, Timeline::Uniform { start: 0.0, hz: 100.0 });
    assert_eq!(stream("actions").timeline, Timeline::Uniform { start: 0.0, hz: 20.0 });

    let train = Dataset::open_with(&path, &OpenOptions { split: Some("train".into()), ..Default::default() }).unwrap();
    let names: Vec<&str> = train.info().episodes.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["demo_0", "demo_1", "demo_2", "demo_3"]);
    let rate = Dataset::open_with(&path, &OpenOptions { rate_hz: Some(10.0), ..Default::default() }).unwrap();
    assert_eq!(rate.info().rate_hz, 10.0);
    assert!(Dataset::open_with(&path, &OpenOptions { split: Some("test".into()), ..Default::default() })
        .unwrap_err()
        .to_string()
        .contains("missing dataset `mask/test`"));
}

#[test]
fn rows_come_from_hyperslabs_and_the_cache_alike() {
    let (_dir, path) = fixture("robomimic", "lift.hdf5", &[]);
    let plain = Dataset::open(&path).unwrap();
    let cached = Dataset::open_with(&path, &OpenOptions { cache_bytes: 1 << 20, ..Default::default() }).unwrap();
    let library = Dataset::open_with(&path, &OpenOptions { hdf5_reads_only: true, ..Default::default() }).unwrap();
    for episode in 0..plain.len() {
        for stream in ["actions", "obs/robot0_eef_pos", "obs/agentview_image", "states", "dones"] {
            let all = plain.read_stream(episode, stream).unwrap();
            let len = plain.episode(episode).unwrap().len;
            let channels = plain.stream(episode, stream).unwrap().1.channels();
            for (start, end) in [(0, len), (len / 2, len), (0, 1), (len - 1, len)] {
                let rows = plain.read_rows(episode, stream, start..end).unwrap();
                assert_eq!(rows, cached.read_rows(episode, stream, start..end).unwrap());
                assert_eq!(rows, library.read_rows(episode, stream, start..end).unwrap());
                assert_eq!(rows.len(), (end - start) * channels);
                let expected = match &all {
                    HostVec::F32(v) => HostVec::F32(v[start * channels..end * channels].to_vec()),
                    HostVec::F64(v) => HostVec::F64(v[start * channels..end * channels].to_vec()),
                    HostVec::I64(v) => HostVec::I64(v[start * channels..end * channels].to_vec()),
                    HostVec::U8(v) => HostVec::U8(v[start * channels..end * channels].to_vec()),
                    other => panic!("unexpected dtype {}", other.dtype()),
                };
                assert_eq!(rows, expected);
                // The same rows as bytes, written into a caller's buffer.
                for dataset in [&plain, &cached, &library] {
                    let mut bytes = vec![0xAA; rows.as_slice().as_bytes().len()];
                    dataset.read_rows_into(episode, stream, start..end, &mut bytes).unwrap();
                    assert_eq!(bytes, rows.as_slice().as_bytes(), "{stream} rows {start}..{end}");
                }
            }
        }
    }
    let err = plain.read_rows_into(0, "actions", 0..2, &mut [0; 7]).unwrap_err().to_string();
    assert!(err.contains("rows 0..2 of stream `actions`") && err.contains("not the 7 bytes"), "{err}");
    let usage = cached.cache_usage();
    assert!(usage.hits > 0 && usage.bytes <= usage.budget, "{usage:?}");
    let err = plain.read_rows(0, "actions", 5..9).unwrap_err().to_string();
    assert!(err.contains("rows 5..9") && err.contains("demo_0") && err.contains("7 rows"), "{err}");
    let err = plain.read_rows(0, "action", 0..1).unwrap_err().to_string();
    assert!(err.contains("no stream `action`") && err.contains("actions"), "{err}");
}

#[test]
fn calvin_native_split_converts_and_reads() {
    let (dir, native) = fixture("calvin-native", "split", &[]);
    let output = dir.path().join("calvin.hdf5");
    let mut last = None;
    let summary = convert_calvin(&native, &output, |p| last = Some(p)).unwrap();
    assert_eq!((summary.segments, summary.frames, summary.annotations), (2, 14, 2));
    assert_eq!(last.map(|p| (p.frames_done, p.frames_total)), Some((14, 14)));

    let dataset = Dataset::open(&output).unwrap();
    let info = dataset.info();
    assert_eq!(info.format, Format::Calvin);
    assert_eq!(info.rate_hz, 30.0);
    let names: Vec<&str> = info.episodes.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["segment_0000100", "segment_0000250"]);
    assert_eq!(info.episodes[0].len, 10);
    assert_eq!(info.episodes[1].len, 4);
    assert_eq!(info.episodes[0].instruction.as_deref(), Some("push the red block to the left"));
    assert_eq!(info.episodes[1].instruction.as_deref(), Some("open the drawer"));
    let annotations = &info.episodes[0].metadata["annotations"];
    assert_eq!(annotations[0]["task"], "push_red_block_left");
    assert_eq!((annotations[0]["start_step"].as_i64(), annotations[0]["end_step"].as_i64()), (Some(1), Some(5)));
    let segment = &info.episodes[0];
    assert_eq!(segment.stream("actions").unwrap().kind.to_string(), "0..3:continuous,3..6:angle,6..7:discrete");
    assert_eq!(segment.stream("robot_obs").unwrap().step_shape, [15]);
    assert_eq!(segment.stream("rgb_static").unwrap().step_shape, [20, 20, 3]);
    assert!(segment.stream("depth_static").unwrap().is_image());
    assert!(segment.stream("frame_ids").is_none(), "frame ids are metadata, not a stream");

    // Every row equals the frame's .npz, read independently.
    for (episode, (start, end)) in [(0usize, (100, 109)), (1, (250, 253))] {
        for (row, frame) in (start..=end).enumerate() {
            let mut archive = npyz::npz::NpzArchive::open(native.join(format!("episode_{frame:07}.npz"))).unwrap();
            let actions: Vec<f64> = archive.by_name("actions").unwrap().unwrap().into_vec().unwrap();
            let rgb: Vec<u8> = archive.by_name("rgb_static").unwrap().unwrap().into_vec().unwrap();
            assert_eq!(dataset.read_rows(episode, "actions", row..row + 1).unwrap(), HostVec::F64(actions));
            assert_eq!(dataset.read_rows(episode, "rgb_static", row..row + 1).unwrap(), HostVec::U8(rgb));
        }
    }
}

#[test]
fn calvin_convert_reports_missing_frames() {
    let (dir, native) = fixture("calvin-native", "split", &[]);
    std::fs::remove_file(native.join("episode_0000103.npz")).unwrap();
    let err = convert_calvin(&native, &dir.path().join("out.hdf5"), |_| {}).unwrap_err().to_string();
    assert!(err.contains("episode_0000103.npz") && err.contains("missing"), "{err}");
    let err =
        convert_calvin(&dir.path().join("nowhere"), &dir.path().join("out.hdf5"), |_| {}).unwrap_err().to_string();
    assert!(err.contains("ep_start_end_ids.npy"), "{err}");
}

#[test]
fn rtx_layout_with_rates_and_timestamps() {
    let (_dir, path) = fixture("rtx", "fractal.hdf5", &[]);
    let dataset = Dataset::open(&path).unwrap();
    let info = dataset.info();
    assert_eq!(info.format, Format::Rtx);
    assert_eq!(info.rate_hz, 3.75);
    assert_eq!(info.metadata["dataset_name"], "fractal20220817_data");
    let first = &info.episodes[0];
    assert_eq!((first.name.as_str(), first.len), ("episode_0", 6));
    assert!((first.duration_s - 5.0 / 3.75).abs() < 1e-12);
    assert_eq!(first.instruction.as_deref(), Some("pick rxbar chocolate"));
    assert_eq!(first.metadata["episode_metadata"]["file_path"], "gs://rtx/episode_0.tfrecord");
    assert!(first.stream("observation/image").unwrap().is_image());
    assert_eq!(first.stream("is_first").unwrap().dtype, DType::Bool);
    assert_eq!(first.stream("is_first").unwrap().kind, StreamKind::All(ChannelKind::Discrete));
    assert_eq!(first.stream("action/world_vector").unwrap().step_shape, [3]);
    assert!(first.stream("language_instruction").is_none());
    assert_eq!(
        dataset.read_stream(0, "is_first").unwrap(),
        HostVec::Bool(vec![true, false, false, false, false, false])
    );

    let second = &info.episodes[1];
    assert_eq!(second.len, 4);
    let Timeline::Explicit { key } = &second.stream("action/world_vector").unwrap().timeline else {
        panic!("episode 1 has per-step timestamps")
    };
    assert_eq!(key, "episodes/episode_1/steps/timestamp");
    let StreamTimes::Explicit(times) = dataset.times(1, "observation/image").unwrap() else { panic!("explicit") };
    assert!(times[0] > 1.7e9 && times.windows(2).all(|w| w[1] > w[0]));
    assert!((second.duration_s - (times[3] - times[0])).abs() < 1e-9);
    assert_eq!(dataset.read_rows(1, "action/world_vector", 1..3).map(f32s).unwrap().len(), 6);
}

#[test]
fn layout_can_be_forced() {
    let (_dir, path) = fixture("robomimic", "lift.hdf5", &[]);
    let err = Dataset::open_with(&path, &OpenOptions { format: Some(Format::Rtx), ..Default::default() })
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing group `episodes`"), "{err}");
}

#[test]
fn synthetic_multi_rate_file_reads_back() {
    use robocache_datasets::synthetic::{write_robomimic, SyntheticSpec};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("synthetic.hdf5");
    let spec = SyntheticSpec { episodes: 5, mean_steps: 40, image: Some([8, 6]), ..Default::default() };
    write_robomimic(&path, &spec).unwrap();
    let dataset = Dataset::open(&path).unwrap();
    assert_eq!(dataset.len(), 5);
    assert_eq!(dataset.info().rate_hz, 20.0);
    for episode in &dataset.info().episodes {
        assert!((30..=50).contains(&episode.len), "{}", episode.len);
        let joints = episode.stream("obs/joint_pos").unwrap();
        assert_eq!(joints.timeline, Timeline::Uniform { start: 0.0, hz: 100.0 });
        assert_eq!(joints.len, ((episode.len - 1) as f64 / 20.0 * 100.0).floor() as usize + 1);
        assert_eq!(episode.stream("obs/agentview_image").unwrap().step_shape, [8, 6, 3]);
        assert_eq!(episode.stream("obs/gripper_closed").unwrap().kind, StreamKind::All(ChannelKind::Discrete));
        assert_eq!(episode.stream("obs/robot0_eef_quat").unwrap().kind.to_string(), "quaternion-xyzw");
    }
    let quats = f32s(dataset.read_stream(0, "obs/robot0_eef_quat").unwrap());
    assert!(quats.chunks(4).all(|q| (q.iter().map(|v| v * v).sum::<f32>() - 1.0).abs() < 1e-5));
    assert_eq!(dataset.info().splits, ["train", "valid"]);
    // robomimic itself reads the file (integer num_samples, the train split, its cache mode).
    let reference = dir.path().join("robomimic.npz");
    support::make(&["robomimic-reads", path.to_str().unwrap(), reference.to_str().unwrap()]);
    let mut archive = npyz::npz::NpzArchive::open(&reference).unwrap();
    let len: Vec<i64> = archive.by_name("len").unwrap().unwrap().into_vec().unwrap();
    let train = Dataset::open_with(&path, &OpenOptions { split: Some("train".into()), ..Default::default() }).unwrap();
    assert_eq!(len[0] as usize, train.info().total_steps());
    let actions: Vec<f32> = archive.by_name("actions").unwrap().unwrap().into_vec().unwrap();
    assert_eq!(HostVec::F32(actions), train.read_rows(0, "actions", 0..4).unwrap());
    // The same seed writes the same file contents.
    let again = dir.path().join("again.hdf5");
    write_robomimic(&again, &spec).unwrap();
    assert_eq!(
        Dataset::open(&again).unwrap().read_stream(3, "actions").unwrap(),
        dataset.read_stream(3, "actions").unwrap()
    );
}

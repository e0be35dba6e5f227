//! ALOHA / ACT HDF5 episodes, written by ACT's own recording code
//! (`fixtures/make_aloha_fixtures.py`: h5py, and OpenCV for compressed
//! frames) and read against what ACT's `EpisodicDataset` reads from them
//! (h5py, `cv2.imdecode`): every stream of every episode, equal.

mod support;

use std::path::{Path, PathBuf};

use robocache_cpu::HostVec;
use robocache_datasets::{Dataset, Error, Format, OpenOptions, StepWindowSpec, StepWindows};

/// Runs `make_aloha_fixtures.py` with `args`.
fn make(args: &[&str]) {
    support::run_fixture_script("make_aloha_fixtures.py", args);
}

/// A folder of episodes made by `make_aloha_fixtures.py <layout>` and the
/// reference `.npz` of what ACT's loader reads from them.
fn episodes(layout: &str, count: usize, steps: usize) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let episodes = dir.path().join(layout);
    let reference = dir.path().join("reference.npz");
    let text = |p: &Path| p.to_str().unwrap().to_owned();
    make(&[layout, &text(&episodes), &count.to_string(), &steps.to_string()]);
    make(&["reference", &text(&episodes), &text(&reference)]);
    (dir, episodes, reference)
}

/// Every stream of every episode equals the reference's array of it.
fn assert_equal_to_reference(dataset: &Dataset, reference: &Path) -> usize {
    let mut archive = npyz::npz::NpzArchive::open(reference).unwrap();
    let names: Vec<String> = archive.array_names().map(str::to_owned).collect();
    let mut compared = 0;
    for name in names {
        let (episode, key) = name.split_once('/').unwrap();
        let index = dataset.info().episode_index(episode).unwrap_or_else(|| panic!("episode {episode} is read"));
        let stream = dataset.stream(index, key).unwrap_or_else(|e| panic!("{name}: {e}")).1.clone();
        let array = archive.by_name(&name).unwrap().unwrap();
        assert_eq!(
            [&[stream.len][..], &stream.step_shape].concat(),
            array.shape().iter().map(|&d| d as usize).collect::<Vec<_>>(),
            "{name}: shape"
        );
        let read = dataset.read_rows(index, key, 0..stream.len).unwrap();
        let expected = match read {
            HostVec::U8(_) => HostVec::U8(array.into_vec().unwrap()),
            HostVec::F32(_) => HostVec::F32(array.into_vec().unwrap()),
            HostVec::F64(_) => HostVec::F64(array.into_vec().unwrap()),
            ref other => panic!("{name}: {} was not written", other.dtype()),
        };
        assert!(read == expected, "{name}: robocache's rows differ from ACT's reading");
        compared += 1;
    }
    compared
}

#[test]
fn acts_simulated_episodes_read_as_act_reads_them() {
    let (_dir, path, reference) = episodes("sim", 3, 12);
    let dataset = Dataset::open(&path).unwrap();
    let info = dataset.info();
    assert_eq!(info.format, Format::Aloha);
    assert_eq!(info.rate_hz, 50.0, "ACT's DT = 0.02");
    let names: Vec<&str> = info.episodes.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["episode_0", "episode_1", "episode_2"], "in ACT's order, not the order written");
    let streams: Vec<&str> = info.episodes[0].streams.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        streams,
        [
            "action",
            "observations/images/cam_high",
            "observations/images/cam_left_wrist",
            "observations/qpos",
            "observations/qvel"
        ]
    );
    let camera = info.episodes[0].stream("observations/images/cam_high").unwrap();
    assert!(camera.is_image());
    assert_eq!(camera.step_shape, [48, 64, 3]);
    assert_eq!(assert_equal_to_reference(&dataset, &reference), 3 * 5);

    // Step windows over the episodes, as any other layout's.
    let windows = StepWindows::new(info, &StepWindowSpec { seq_length: 4, ..Default::default() }).unwrap();
    let window = windows.window(windows.len() - 1).unwrap();
    assert_eq!(dataset.read_step_window(&window, "action").unwrap().len(), 4 * 14);
}

#[test]
fn compressed_cameras_decode_to_the_pixels_opencv_gives_act() {
    let (_dir, path, reference) = episodes("real", 2, 10);
    let dataset = Dataset::open(&path).unwrap();
    let info = dataset.info();
    assert_eq!(info.format, Format::Aloha);
    let episode = &info.episodes[1];
    assert_eq!(episode.stream("observations/images/cam_left_wrist").unwrap().step_shape, [48, 64, 3]);
    assert_eq!(episode.stream("base_action").unwrap().step_shape, [2], "Mobile ALOHA's base action");
    assert!(episode.stream("compress_len").is_none());
    assert!(info.metadata["ignored"]["compress_len"].as_str().unwrap().contains("lengths"), "{:?}", info.metadata);
    assert_eq!(episode.metadata["compress"], serde_json::Value::Bool(true), "{:?}", episode.metadata);
    // qpos, qvel, effort, action, base_action and two cameras, bit for bit.
    assert_eq!(assert_equal_to_reference(&dataset, &reference), 2 * 7);
    // A window's frames from the middle of an episode, one read.
    let rows = dataset.read_rows(1, "observations/images/cam_high", 3..6).unwrap();
    assert_eq!(rows.len(), 3 * 48 * 64 * 3);

    // Decoded frames kept within the frame cache's budget: the first pass
    // decodes and keeps every frame, the second reads them all from memory,
    // and both equal ACT's reading; a window that straddles held and new
    // rows reads the same as without the cache.
    assert_eq!(dataset.frame_cache_usage().unwrap().frames, 0, "no budget: nothing kept");
    dataset.set_frame_cache_budget(64 << 20);
    let partial = dataset.read_rows(0, "observations/images/cam_high", 4..6).unwrap();
    assert_eq!(
        dataset.read_rows(0, "observations/images/cam_high", 2..8).unwrap().as_slice().as_bytes()[2 * 48 * 64 * 3..],
        {
            let mut expected = partial.as_slice().as_bytes().to_vec();
            expected.extend(dataset.read_rows(0, "observations/images/cam_high", 6..8).unwrap().as_slice().as_bytes());
            expected
        }[..]
    );
    dataset.reset_frame_cache_counts();
    for pass in 0..2 {
        assert_eq!(assert_equal_to_reference(&dataset, &reference), 2 * 7, "pass {pass}");
        let usage = dataset.frame_cache_usage().unwrap();
        assert_eq!(usage.frames, 2 * 2 * 10, "pass {pass}: every frame of two cameras of two episodes held");
        // The first pass finds the six rows the window above kept; the
        // second finds all forty and decodes nothing.
        let (hits, misses) = if pass == 0 { (6, 34) } else { (46, 34) };
        assert_eq!((usage.hits, usage.misses), (hits, misses), "pass {pass}: {usage:?}");
    }
    dataset.set_frame_cache_budget(0);
    assert_eq!(dataset.frame_cache_usage().unwrap().frames, 0);
}

#[test]
fn uncompressed_real_episodes_and_one_episode_file_read_too() {
    let (_dir, path, reference) = episodes("real-raw", 2, 6);
    let dataset = Dataset::open(&path).unwrap();
    assert_eq!(assert_equal_to_reference(&dataset, &reference), 2 * 7);
    let one = Dataset::open(path.join("episode_1.hdf5")).unwrap();
    assert_eq!(one.info().format, Format::Aloha);
    assert_eq!(one.len(), 1);
    assert_eq!(one.info().episodes[0].name, "episode_1");
    let forced = Dataset::open_with(&path, &OpenOptions { rate_hz: Some(30.0), ..Default::default() }).unwrap();
    assert_eq!(forced.info().rate_hz, 30.0);
    let split = Dataset::open_with(&path, &OpenOptions { split: Some("train".into()), ..Default::default() });
    assert!(split.unwrap_err().to_string().contains("no splits"));
}

#[test]
fn damaged_episodes_are_errors_naming_file_episode_key_and_step() {
    let (_dir, path, _) = episodes("real", 2, 5);
    // A frame whose JPEG bytes are cut (zeros from the middle on).
    {
        let writer = hdf5::File::open_rw(path.join("episode_1.hdf5")).unwrap();
        let camera = writer.dataset("observations/images/cam_high").unwrap();
        let mut frames: ndarray::Array2<u8> = camera.read_2d().unwrap();
        let third = frames.ncols() / 3;
        frames.row_mut(2).iter_mut().skip(third).for_each(|b| *b = 0);
        camera.write(&frames).unwrap();
    }
    let dataset = Dataset::open(&path).unwrap();
    let error = dataset.read_rows(1, "observations/images/cam_high", 0..5).unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::Decode { step: 2, .. }), "{text}");
    assert!(text.contains("episode_1.hdf5") && text.contains("cam_high") && text.contains("step 2"), "{text}");

    // An episode without its actions.
    let writer = hdf5::File::open_rw(path.join("episode_0.hdf5")).unwrap();
    writer.unlink("action").unwrap();
    drop(writer);
    let text = Dataset::open(&path).unwrap_err().to_string();
    assert!(text.contains("episode_0.hdf5") && text.contains("/action"), "{text}");
}

#[test]
fn a_camera_claiming_huge_frames_is_refused_before_anything_is_allocated() {
    let (_dir, path, _) = episodes("real", 1, 4);
    let writer = hdf5::File::open_rw(path.join("episode_0.hdf5")).unwrap();
    writer.unlink("observations/images/cam_high").unwrap();
    // Declared, never written: 2^40 bytes a frame.
    writer
        .new_dataset::<u8>()
        .chunk((1, 1 << 20))
        .shape((4, 1usize << 40))
        .create("observations/images/cam_high")
        .unwrap();
    drop(writer);
    let text = Dataset::open(&path).unwrap_err().to_string();
    assert!(text.contains("cam_high") && text.contains("values a row"), "{text}");
}

#[test]
fn a_directory_no_format_reads_is_an_error_listing_the_layouts_tried() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["notes.txt", "more.txt", "run.log"] {
        std::fs::write(dir.path().join(name), "not a dataset").unwrap();
    }
    let text = Dataset::open(dir.path()).unwrap_err().to_string();
    for wanted in ["a directory of 3 files: 2 .txt, 1 .log", "LeRobot: ", "ALOHA: ", "RLDS: ", "ROS 2 bag: "] {
        assert!(text.contains(wanted), "`{wanted}` in {text}");
    }
    assert!(!text.contains("nearest"), "no format's files are there: {text}");
    // A LeRobot root without its meta/info.json: LeRobot is named the nearest.
    std::fs::write(dir.path().join("episode_000000.parquet"), "PAR1").unwrap();
    std::fs::write(dir.path().join("episode_000001.parquet"), "PAR1").unwrap();
    std::fs::write(dir.path().join("file-000.mp4"), "").unwrap();
    let text = Dataset::open(dir.path()).unwrap_err().to_string();
    assert!(text.contains("the nearest is LeRobot: a directory with meta/info.json"), "{text}");
}

/// Episodes with one crafted defect each: opening or reading them is an
/// error naming the file and what is wrong, within the deadline, never a
/// panic or an allocation of what a header claims.
#[test]
fn crafted_episodes_are_clear_errors() {
    let cases: [(&str, &[&str]); 8] = [
        ("compress-text", &["episode_1.hdf5", "compress", "not a number"]),
        ("short-qpos", &["episode_1.hdf5", "observations/qpos", "5"]),
        ("no-steps", &["episode_1", "no steps"]),
        ("scalar-action", &["episode_1.hdf5", "/action", "scalar"]),
        ("huge-frame-header", &["episode_1.hdf5", "cam_high", "values a row"]),
        ("not-jpeg", &["episode_1.hdf5", "cam_high", "step 0", "JPEG"]),
        ("other-size-frame", &["episode_1.hdf5", "cam_high", "step 3", "32x32"]),
        ("images-float", &["episode_1.hdf5", "cam_high", "u8 JPEG bytes"]),
    ];
    for (case, wanted) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("episodes");
        make(&["hostile", case, path.to_str().unwrap()]);
        let text = support::open_and_verify(&format!("crafted case {case}"), path);
        for part in wanted {
            assert!(text.contains(part), "{case}: `{part}` in `{text}`");
        }
    }
}

//! The `robocache` binary end to end: `.npy` in, `.npy` out, one-line errors.

use std::path::{Path, PathBuf};
use std::process::Command;

use npyz::WriterBuilder;

fn write<T: npyz::AutoSerialize + Copy>(path: &Path, data: &[T], shape: &[u64]) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = npyz::WriteOptions::<T>::new().default_dtype().shape(shape).writer(file).begin_nd().unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

fn read<T: npyz::Deserialize>(path: &Path) -> (Vec<T>, Vec<u64>) {
    let npy = npyz::NpyFile::new(std::fs::File::open(path).unwrap()).unwrap();
    let shape = npy.shape().to_vec();
    (npy.into_vec().unwrap(), shape)
}

fn robocache(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_robocache")).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn path(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

#[test]
fn resample_a_2d_stream_at_uniform_rates() {
    let dir = tempfile::tempdir().unwrap();
    let data = path(&dir, "x.npy");
    write::<f32>(&data, &[0.0, 100.0, 10.0, 200.0, 20.0, 300.0], &[3, 2]);
    let out = path(&dir, "out.npy");
    let (ok, stdout, stderr) = robocache(&[
        "resample",
        "--data",
        data.to_str().unwrap(),
        "--hz",
        "10",
        "--target-hz",
        "20",
        "--target-count",
        "6",
        "--backend",
        "cpu",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("5 of 6 targets"), "{stdout}");
    let (values, shape) = read::<f32>(&out);
    assert_eq!(shape, [6, 2]);
    assert_eq!(values, [0.0, 100.0, 5.0, 150.0, 10.0, 200.0, 15.0, 250.0, 20.0, 300.0, 20.0, 300.0]);
    let (valid, shape) = read::<bool>(&path(&dir, "out.valid.npy"));
    assert_eq!(shape, [6]);
    assert_eq!(valid, [true, true, true, true, true, false]);
}

#[test]
fn resample_with_time_files_channel_groups_and_fill() {
    let dir = tempfile::tempdir().unwrap();
    let (data, times, targets, lengths, out) =
        (path(&dir, "x.npy"), path(&dir, "t.npy"), path(&dir, "q.npy"), path(&dir, "n.npy"), path(&dir, "o.npy"));
    // 2 rows x 2 samples x 5 channels: a quaternion (xyzw) and a gripper flag.
    let h = std::f64::consts::FRAC_1_SQRT_2;
    let row = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, h, h, 1.0];
    write::<f64>(&data, &[row, row].concat(), &[2, 2, 5]);
    write::<f64>(&times, &[1.7e9, 1.7e9 + 1.0, 1.7e9 + 10.0, 1.7e9 + 11.0], &[2, 2]);
    write::<f64>(&targets, &[1.7e9 + 0.5, 1.7e9 + 10.5], &[2]);
    write::<i64>(&lengths, &[2, 2], &[2]);
    let (ok, _, stderr) = robocache(&[
        "resample",
        "--data",
        data.to_str().unwrap(),
        "--times",
        times.to_str().unwrap(),
        "--targets",
        targets.to_str().unwrap(),
        "--lengths",
        lengths.to_str().unwrap(),
        "--channels",
        "0..4:slerp-xyzw,4..5:previous",
        "--boundary",
        "fill:-1",
        "--backend",
        "cpu",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    let (values, shape) = read::<f64>(&out);
    assert_eq!(shape, [2, 2, 5]);
    // Row 0 at +0.5 s: halfway from identity to 90° about z is 45° about z.
    let e = std::f64::consts::FRAC_PI_8;
    let want = [0.0, 0.0, e.sin(), e.cos(), 0.0];
    for (got, want) in values[..5].iter().zip(want) {
        assert!((got - want).abs() < 1e-12, "{values:?}");
    }
    assert_eq!(&values[5..10], &[-1.0; 5], "outside row 0's range: the fill value");
    assert_eq!(&values[10..15], &[-1.0; 5]);
    assert_eq!(values[19], 0.0, "gripper of row 1 holds its first sample");
}

#[test]
fn errors_are_one_line_and_exit_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (data, times, out) = (path(&dir, "x.npy"), path(&dir, "t.npy"), path(&dir, "o.npy"));
    write::<f32>(&data, &[0.0; 6], &[1, 3, 2]);
    write::<f64>(&times, &[0.0, 1.0, 1.0], &[3]);
    let truncated = path(&dir, "truncated.npy");
    let bytes = std::fs::read(&times).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() - 4]).unwrap();
    let args = |extra: &[&str]| {
        let mut a = vec![
            "resample",
            "--data",
            data.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--target-hz",
            "1",
            "--target-count",
            "2",
            "--backend",
            "cpu",
        ];
        a.extend_from_slice(extra);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| robocache(&a.iter().map(String::as_str).collect::<Vec<_>>());
    for (extra, expected) in [
        (vec!["--times", times.to_str().unwrap()], "row 0, index 2"),
        (vec!["--hz", "10", "--method", "cubic"], "unknown method 'cubic'"),
        (vec!["--hz", "10", "--channels", "0..1:linear"], "covers channels 0..1"),
        (vec!["--hz", "10", "--boundary", "fill:nope"], "not a number"),
        (vec!["--times", "/nonexistent.npy"], "cannot open /nonexistent.npy"),
        (vec!["--times", truncated.to_str().unwrap()], "is the file truncated?"),
    ] {
        let (ok, _, stderr) = run(args(&extra));
        assert!(!ok);
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().filter(|l| l.starts_with("error:")).count(), 1, "{stderr}");
    }
    let mut cuda = args(&["--hz", "10"]);
    let backend = cuda.iter().position(|a| a == "--backend").unwrap();
    cuda[backend + 1] = "cuda".into();
    let (ok, _, stderr) = run(cuda);
    assert!(!ok && stderr.contains("error: CUDA"), "{stderr}");
}

#[test]
fn voxelize_count_and_mean() {
    let dir = tempfile::tempdir().unwrap();
    let (points, features, out) = (path(&dir, "p.npy"), path(&dir, "f.npy"), path(&dir, "g.npy"));
    write::<f32>(&points, &[0.1, 0.1, 0.1, 0.2, 0.2, 0.2, 1.5, 0.1, 0.1, -3.0, 0.0, 0.0], &[4, 3]);
    write::<f32>(&features, &[1.0, 3.0, 5.0, 7.0], &[4, 1]);
    let grid = ["--origin", "0,0,0", "--voxel-size", "1", "--dims", "2,1,1", "--backend", "cpu"];
    let mut args =
        vec!["voxelize", "--points", points.to_str().unwrap(), "--output", out.to_str().unwrap(), "--mode", "count"];
    args.extend(grid);
    let (ok, stdout, stderr) = robocache(&args);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("1 points dropped"), "{stdout}");
    let (counts, shape) = read::<u32>(&out);
    assert_eq!((counts, shape), (vec![2, 1], vec![1, 2, 1, 1]));
    args[5..7].copy_from_slice(&["--mode", "mean"]);
    args.extend(["--features", features.to_str().unwrap()]);
    let (ok, _, stderr) = robocache(&args);
    assert!(ok, "{stderr}");
    let (mean, shape) = read::<f32>(&out);
    assert_eq!((mean, shape), (vec![2.0, 5.0], vec![1, 2, 1, 1, 1]));
    let (counts, _) = read::<u32>(&path(&dir, "g.counts.npy"));
    assert_eq!(counts, [2, 1]);
    // f64 points are refused with a hint, not cast silently.
    write::<f64>(&points, &[0.0; 3], &[1, 3]);
    let (ok, _, stderr) = robocache(&args);
    assert!(!ok && stderr.contains("astype(numpy.float32)"), "{stderr}");
}

#[test]
fn info_reports_backends() {
    let (ok, stdout, _) = robocache(&["info", "--json"]);
    assert!(ok);
    let info: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(info["backends"][0]["name"], "cpu");
    assert_eq!(info["backends"][1]["name"], "cuda");
    // The CLI's default build is the fast one: every CPU decoder with its
    // assembly (NASM on x86-64; the C compiler assembles it on aarch64).
    let decoders = &info["build"]["video_decoders"];
    assert_eq!(decoders["av1"][0]["decoder"], "rav1d");
    assert_eq!(decoders["h264"][0]["decoder"], "openh264");
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        assert_eq!(decoders["av1"][0]["assembly"], true, "{decoders}");
        assert_eq!(decoders["h264"][0]["assembly"], true, "{decoders}");
    }
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        assert_eq!(info["build"]["cpu_video_decoders_have_assembly"], true, "{decoders}");
    }
    assert_eq!(decoders["hevc"][1]["assembly"], serde_json::Value::Null);
    let (ok, stdout, _) = robocache(&["info"]);
    assert!(ok && stdout.contains("auto picks") && stdout.contains("rav1d (cpu, with its assembly)"), "{stdout}");
}

#[test]
fn inspect_summarizes_and_prints_json() {
    use robocache::datasets::synthetic::{write_robomimic, SyntheticSpec};
    let dir = tempfile::tempdir().unwrap();
    let file = path(&dir, "demo.hdf5");
    write_robomimic(&file, &SyntheticSpec { episodes: 12, mean_steps: 30, image: Some([4, 4]), ..Default::default() })
        .unwrap();
    let file = file.to_str().unwrap();
    let (ok, stdout, stderr) = robocache(&["inspect", file]);
    assert!(ok, "{stderr}");
    for words in [
        "robomimic layout, 12 episodes",
        "20 Hz step clock",
        "splits: train, valid",
        "obs/joint_pos",
        "100 Hz (own clock)",
        "obs/agentview_image",
        "[4, 4, 3]",
        "quaternion-xyzw",
        "demo_0",
        "... 2 more",
    ] {
        assert!(stdout.contains(words), "`{words}` missing from:\n{stdout}");
    }
    let (ok, stdout, stderr) = robocache(&["inspect", file, "--json"]);
    assert!(ok, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["format"], "robomimic");
    assert_eq!(json["episodes"].as_array().unwrap().len(), 12);
    let streams = json["episodes"][0]["streams"].as_array().unwrap();
    let joints = streams.iter().find(|s| s["name"] == "obs/joint_pos").unwrap();
    assert_eq!(joints["timeline"]["hz"], 100.0);
    assert_eq!(joints["dtype"], "f32");

    let (ok, stdout, stderr) = robocache(&["inspect", file, "--split", "valid", "--episodes", "0"]);
    assert!(ok && stdout.contains("1 episodes") && stdout.contains("demo_11"), "{stdout}{stderr}");
}

#[test]
fn inspect_and_convert_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let not_hdf5 = path(&dir, "notes.h5");
    std::fs::write(&not_hdf5, "hello").unwrap();
    for args in [
        vec!["inspect", not_hdf5.to_str().unwrap()],
        vec!["inspect", "/nonexistent/file.hdf5"],
        vec!["convert", "calvin", "/nonexistent/split", path(&dir, "out.h5").to_str().unwrap()],
    ] {
        let (ok, stdout, stderr) = robocache(&args);
        assert!(!ok && stdout.is_empty(), "{args:?}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
    }
    let (_, _, stderr) = robocache(&["inspect", not_hdf5.to_str().unwrap()]);
    assert!(stderr.contains("notes.h5") && stderr.contains("not an HDF5 file"), "{stderr}");
}

#[test]
fn demo_runs_on_the_cpu() {
    let (ok, stdout, stderr) = robocache(&[
        "demo",
        "--backend",
        "cpu",
        "--episodes",
        "4",
        "--batch",
        "16",
        "--batches",
        "5",
        "--step-ms",
        "0",
    ]);
    assert!(ok, "{stderr}");
    for words in [
        "robocache demo on cpu",
        "robomimic layout, 4 episodes",
        "batches/s",
        "data stall",
        "obs/joint_pos",
        "[16, 16, 7]",
    ] {
        assert!(stdout.contains(words), "`{words}` missing from:\n{stdout}");
    }
    let (ok, stdout, stderr) = robocache(&[
        "demo",
        "--backend",
        "cpu",
        "--episodes",
        "3",
        "--batch",
        "8",
        "--batches",
        "3",
        "--step-ms",
        "0",
        "--json",
        "--streams",
        "actions,obs/agentview_image",
    ]);
    assert!(ok, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["telemetry"]["batches"], 3);
    assert!(json["resident_bytes"].as_u64().unwrap() > 0);
    let (ok, _, stderr) = robocache(&["demo", "--backend", "cpu", "--file", "/nonexistent.hdf5"]);
    assert!(!ok && stderr.lines().count() == 1 && stderr.contains("nonexistent.hdf5"), "{stderr}");
}

#[test]
fn bench_loader_times_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    let json = path(&dir, "loader.json");
    let keep = path(&dir, "bench.hdf5");
    let (ok, stdout, stderr) = robocache(&[
        "bench",
        "loader",
        "--backend",
        "cpu",
        "--episodes",
        "4",
        "--batch",
        "8",
        "--batches",
        "4",
        "--keep",
        keep.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("resident") && stdout.contains("streaming") && stdout.contains("batches/s"), "{stdout}");
    let results: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(results.as_array().unwrap().len(), 2);
    assert!(results[0]["batches_per_s"].as_f64().unwrap() > 0.0);
    assert!(keep.exists(), "--keep leaves the file for benches/robomimic_loader.py");
}

#[test]
fn bench_writes_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = path(&dir, "bench");
    let (ok, stdout, stderr) = robocache(&[
        "bench",
        "--backend",
        "cpu",
        "--filter",
        "32x500",
        "--repeats",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("copy bandwidth") && stdout.contains("resample f32 32x500->250 D=256"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap()).unwrap();
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    let first = &results[0];
    assert!(first["median_us"].as_f64().unwrap() > 0.0);
    // 32 rows of 500 samples × 256 f32 channels read, 250 targets written, plus times and masks.
    assert_eq!(
        first["bytes"].as_u64().unwrap(),
        32 * 500 * 256 * 4 + 32 * 500 * 8 + 32 * 250 * 8 + 32 * 250 * (256 * 4 + 1)
    );
    assert!(report["copy_gbytes_per_s"].as_f64().unwrap() > 0.0);
    let table = std::fs::read_to_string(out.join("bench.md")).unwrap();
    assert!(table.contains("| resample f32 32x500->250 D=256 |"), "{table}");
}

#[test]
fn inspect_and_demo_read_an_rlds_directory() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/rlds/robocache_fixture_dict");
    let dir = fixture.to_str().unwrap();
    let (ok, stdout, stderr) = robocache(&["inspect", dir, "--rate-hz", "10", "--split", "val"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("rlds layout, 2 episodes") && stdout.contains("observation/image"), "{stdout}");
    let (ok, stdout, stderr) = robocache(&["inspect", dir, "--rate-hz", "10", "--json"]);
    assert!(ok, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["format"], "rlds");
    assert_eq!(json["episodes"].as_array().unwrap().len(), 6);
    // Without a rate: one line that says how to give it.
    let (ok, _, stderr) = robocache(&["inspect", dir]);
    assert!(!ok && stderr.trim().lines().count() == 1 && stderr.contains("--rate-hz"), "{stderr}");
    let (ok, stdout, stderr) = robocache(&[
        "demo",
        "--file",
        dir,
        "--rate-hz",
        "10",
        "--backend",
        "cpu",
        "--streams",
        "observation/image,action/world_vector",
        "--batch",
        "4",
        "--batches",
        "3",
        "--hz",
        "10",
        "--history",
        "1",
        "--horizon",
        "2",
        "--step-ms",
        "0",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("dataset: robocache_fixture_dict (rlds layout, 6 episodes"), "{stdout}");
    assert!(stdout.contains("[4, 3, 24, 32, 3]"), "{stdout}");
}

#[test]
fn inspect_verify_reads_everything_and_fails_on_a_bad_record() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/rlds");
    let good = fixtures.join("robocache_fixture_dict");
    let (ok, stdout, stderr) = robocache(&["inspect", good.to_str().unwrap(), "--rate-hz", "10", "--verify"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("verify: 6 episodes") && stdout.contains("no problems"), "{stdout}");
    let (ok, stdout, stderr) =
        robocache(&["inspect", good.to_str().unwrap(), "--rate-hz", "10", "--verify", "--json", "--threads", "2"]);
    assert!(ok, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["verify"]["episodes"], 6);
    assert_eq!(json["verify"]["problems"].as_array().unwrap().len(), 0);
    // A JPEG that does not decode: listed with its episode and stream, and the exit status says so.
    let bad = fixtures.join("bad/corrupt_jpeg");
    let (ok, stdout, stderr) = robocache(&["inspect", bad.to_str().unwrap(), "--rate-hz", "10", "--verify"]);
    assert!(!ok, "{stdout}");
    assert!(stdout.contains("1 problem(s)") && stdout.contains("episode_0 observation/image:"), "{stdout}");
    assert!(stderr.contains("1 problem(s) found by --verify"), "{stderr}");
}

#[test]
fn inspect_lists_a_bags_topics_and_reads_it_by_a_mapping() {
    let bags = Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/ros2");
    let mcap = bags.join("arm_zstd.mcap");
    let (ok, out, err) = robocache(&["inspect", mcap.to_str().unwrap()]);
    assert!(ok, "{err}");
    let imu =
        out.lines().find(|l| l.trim_start().starts_with("/imu ")).unwrap_or_else(|| panic!("no /imu line: {out}"));
    assert!(imu.contains("sensor_msgs/msg/Imu") && imu.contains(" 400 ") && imu.contains("200.00"), "{imu}");
    assert!(out.contains("ros2 layout") && out.contains("joint_states/position"), "{out}");
    // A mapping file: its keys, its clock.
    let dir = tempfile::tempdir().unwrap();
    let map = path(&dir, "map.toml");
    std::fs::write(&map, "fps = 10\n[streams.action]\ntopic = \"/cmd\"\nfield = \"data\"\n").unwrap();
    let (ok, out, err) = robocache(&["inspect", mcap.to_str().unwrap(), "--map", map.to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["dataset"]["rate_hz"], 10.0);
    let streams = json["dataset"]["episodes"][0]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0]["name"], "action");
    assert_eq!(json["topics"].as_array().unwrap().len(), 9);
    // A mapping naming a topic the bag lacks: one line naming it.
    std::fs::write(&map, "[streams.x]\ntopic = \"/missing\"\n").unwrap();
    let (ok, _, err) = robocache(&["inspect", mcap.to_str().unwrap(), "--map", map.to_str().unwrap()]);
    assert!(!ok && err.contains("/missing"), "{err}");
}

#[test]
fn convert_lerobot_writes_cameras_as_video_by_default() {
    let bags = Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/ros2");
    let dir = tempfile::tempdir().unwrap();
    let map = path(&dir, "map.toml");
    std::fs::write(&map, "[streams.camera]\ntopic = \"/camera/video\"\n").unwrap();
    let out = path(&dir, "root");
    let video = bags.join("video_mcap");
    let args = ["convert", "lerobot", video.to_str().unwrap(), out.to_str().unwrap(), "--map", map.to_str().unwrap()];
    let (ok, stdout, err) = robocache(&[&args[..], &["--fps", "10", "--key-frame-every", "4"]].concat());
    assert!(ok && stdout.contains("LeRobot v3.0, 1 episodes"), "{err}");
    assert!(out.join("videos/camera/chunk-000/file-000.mp4").is_file());
    let info = std::fs::read_to_string(out.join("meta/info.json")).unwrap();
    assert!(info.contains("\"video\"") && info.contains("\"video.g\": 4"), "{info}");
    // A 6x8 camera is smaller than the encoder takes: one line naming it.
    std::fs::write(&map, "[streams.camera]\ntopic = \"/scene/image\"\n").unwrap();
    let arm = bags.join("arm_sqlite");
    let (ok, _, err) = robocache(&[
        "convert",
        "lerobot",
        arm.to_str().unwrap(),
        &path(&dir, "small").to_string_lossy(),
        "--map",
        map.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("`camera`") && err.contains("8×6") && err.lines().count() == 1, "{err}");
    let (ok, _, err) = robocache(&[&args[..], &["--key-frame-every", "0"]].concat());
    assert!(!ok && err.contains("key-frame-every"), "{err}");
}

#[test]
fn convert_lerobot_writes_a_root_that_inspect_reads() {
    let bags = Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/ros2/arm_sqlite");
    let dir = tempfile::tempdir().unwrap();
    let map = path(&dir, "map.toml");
    std::fs::write(
        &map,
        "[streams.action]\ntopic = \"/cmd\"\nfield = \"data\"\n[streams.camera]\ntopic = \"/scene/image\"\n",
    )
    .unwrap();
    let out = path(&dir, "root");
    let (ok, stdout, err) = robocache(&[
        "convert",
        "lerobot",
        bags.to_str().unwrap(),
        out.to_str().unwrap(),
        "--map",
        map.to_str().unwrap(),
        "--fps",
        "10",
        "--task",
        "wave",
        "--cameras",
        "image",
    ]);
    assert!(ok, "{err}");
    assert!(stdout.contains("LeRobot v3.0, 1 episodes") && stdout.contains("at 10 fps"), "{stdout}");
    let (ok, stdout, err) = robocache(&["inspect", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        stdout.contains("lerobot layout") && stdout.contains("\"wave\"") && stdout.contains("[6, 8, 3]"),
        "{stdout}"
    );
    // Into a root that is not empty: one line.
    let (ok, _, err) = robocache(&[
        "convert",
        "lerobot",
        bags.to_str().unwrap(),
        out.to_str().unwrap(),
        "--map",
        map.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("not empty") && err.lines().count() == 1, "{err}");
}

/// A Zarr replay buffer (diffusion policy's PushT layout, written by
/// zarr-python): `inspect` names its layout and streams, `--verify` reads
/// every step, and `convert lerobot` writes a root `inspect` reads back.
#[test]
fn inspect_and_convert_read_a_zarr_replay_buffer() {
    let store =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/zarr/pusht_v2.zarr.zip");
    let store = store.to_str().unwrap();
    let (ok, stdout, stderr) = robocache(&["inspect", store, "--verify"]);
    assert!(ok, "{stderr}");
    for words in ["zarr layout, 3 episodes", "10 Hz step clock", "img", "[24, 24, 3]", "keypoint", "episode_2"] {
        assert!(stdout.contains(words), "`{words}` missing from:\n{stdout}");
    }
    let dir = tempfile::tempdir().unwrap();
    let out = path(&dir, "root");
    let (ok, stdout, err) =
        robocache(&["convert", "lerobot", store, out.to_str().unwrap(), "--task", "push the T", "--cameras", "image"]);
    assert!(ok, "{err}");
    assert!(stdout.contains("LeRobot v3.0, 3 episodes, 40 frames at 10 fps"), "{stdout}");
    let (ok, stdout, err) = robocache(&["inspect", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(stdout.contains("lerobot layout") && stdout.contains("[24, 24, 3]"), "{stdout}");
}

/// `augment-preview` on diffusion policy's PushT store: a PNG of the frames
/// under their draws (rows of frames, columns: frame, evaluation, draws),
/// its size from the preset's crop; a bad preset names the presets.
#[test]
fn augment_preview_writes_a_grid_of_draws() {
    let store =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/zarr/pusht_v2.zarr.zip");
    let store = store.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = path(&dir, "grid.png");
    let args = ["augment-preview", store, "--preset", "lerobot", "--samples", "2", "--draws", "3", "--out"];
    let (ok, stdout, stderr) = robocache(&[&args[..], &[out.to_str().unwrap()]].concat());
    assert!(ok, "{stderr}");
    assert!(stdout.contains("camera `img`, 2 frames x (frame, evaluation, 3 draws), 136x52 pixels"), "{stdout}");
    let png = std::fs::read(&out).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // 24x24 frames: 5 columns of 24 and 4-pixel gaps, 2 rows.
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 136);
    assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 52);
    let (ok, _, stderr) =
        robocache(&["augment-preview", store, "--preset", "imagenet", "--out", out.to_str().unwrap()]);
    assert!(
        !ok && stderr.contains("no preset `imagenet` (presets: lerobot, act, openpi, groot, diffusion_policy)"),
        "{stderr}"
    );
}

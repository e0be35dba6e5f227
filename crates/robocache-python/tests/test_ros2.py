"""ROS 2 bags (written by rosbags: crates/robocache-datasets/tests/fixtures/make_ros2_fixtures.py)
opened with a mapping and windowed on the policy clock: every window equals a NumPy reference
of the resampling rules (docs/semantics.md) applied to what rosbags itself deserialises."""

import json
import os
import pathlib

import numpy as np
import pytest

import robocache

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "robocache-datasets" / "tests" / "fixtures" / "ros2"
ORIGIN_NS = 1_700_000_000_000_000_000
HZ, HISTORY, HORIZON = 20.0, 2, 6

MAPPING = {
    "fps": HZ,
    "streams": {
        "observation.state": {"topic": "/joint_states", "field": "position", "joints": ["j1", "j2", "j3"],
                              "dtype": "float64"},
        "imu.orientation": {"topic": "/imu", "field": "orientation", "dtype": "float64"},
        "action": {"topic": "/cmd", "field": "data", "dtype": "float64"},
        "gripper": {"topic": "/gripper", "field": "data", "dtype": "float64"},
        "observation.images.wrist": {"topic": "/wrist/image/compressed"},
    },
}


def expected(name):
    return np.load(FIXTURES / "expected" / "arm_mcap" / f"{name}.npy")


def seconds(ns):
    return np.array([(int(t) - ORIGIN_NS) * 1e-9 for t in ns])


def held_joints(table):
    out, held = [], np.full(3, np.nan)
    for row in table:
        held = np.where(np.isnan(row), held, row)
        out.append(held.copy())
    return np.array(out)


def linear(times, values, targets):
    """docs/semantics.md's Linear in f32 (the loader's resident streams are f32): w rounded to
    f32, then x_i + w (x_{i+1} - x_i) with each operation rounded; edges clamped."""
    values = values.astype(np.float32)
    out = []
    for q in targets:
        i = np.searchsorted(times, q, side="right") - 1
        if i < 0:
            out.append(values[0])
        elif i >= len(times) - 1:
            out.append(values[-1])
        else:
            w = np.float32((q - times[i]) / (times[i + 1] - times[i]))
            out.append(values[i] + w * (values[i + 1] - values[i]))
    return np.array(out)


def previous(times, values, targets):
    idx = np.clip(np.searchsorted(times, targets, side="right") - 1, 0, len(times) - 1)
    return values[idx]


def slerp(times, values, targets):
    """In f64 on the f32 samples, rounded once (docs/semantics.md)."""
    values = values.astype(np.float32).astype(np.float64)
    out = []
    for q in targets:
        i = np.searchsorted(times, q, side="right") - 1
        if i < 0 or i >= len(times) - 1:
            v = values[0] if i < 0 else values[-1]
            out.append(v / np.linalg.norm(v))
            continue
        t = (q - times[i]) / (times[i + 1] - times[i])
        a, b = values[i] / np.linalg.norm(values[i]), values[i + 1] / np.linalg.norm(values[i + 1])
        if a @ b < 0:
            b = -b
        theta = 2 * np.arctan(np.linalg.norm(a - b) / np.linalg.norm(a + b))
        v = (1 - t) * a + t * b if theta < 1e-6 else (
            np.sin((1 - t) * theta) / np.sin(theta) * a + np.sin(t * theta) / np.sin(theta) * b)
        out.append(v / np.linalg.norm(v))
    return np.array(out).astype(np.float32)


def test_a_bag_opens_with_its_mapping():
    dataset = robocache.open(FIXTURES / "arm_mcap", mapping=MAPPING)
    assert dataset.format == "ros2"
    assert dataset.info["rate_hz"] == HZ
    assert sorted(dataset.streams) == sorted(MAPPING["streams"])
    streams = {s["name"]: s for s in dataset.episodes[0]["streams"]}
    assert streams["imu.orientation"]["kind"] == "quaternion-xyzw"
    assert streams["gripper"]["kind"] == "discrete"
    assert streams["observation.images.wrist"]["step_shape"] == [12, 16, 3]


def test_a_toml_mapping_file_and_errors(tmp_path):
    mapping = tmp_path / "map.toml"
    mapping.write_text('fps = 10\n[streams.action]\ntopic = "/cmd"\nfield = "data"\n')
    dataset = robocache.open(FIXTURES / "arm_sqlite", mapping=mapping)
    assert dataset.streams == ["action"] and dataset.info["rate_hz"] == 10.0
    with pytest.raises(robocache.Error, match="/nope"):
        robocache.open(FIXTURES / "arm_mcap", mapping={"streams": {"x": {"topic": "/nope"}}})
    with pytest.raises(robocache.Error, match="unknown field"):
        robocache.open(FIXTURES / "arm_mcap", mapping={"streams": {"x": {"topic": "/cmd", "feild": "data"}}})
    with pytest.raises(robocache.Error, match="mapping must be a dict"):
        robocache.open(FIXTURES / "arm_mcap", mapping=3)


def test_windows_on_the_policy_clock_equal_a_numpy_reference():
    dataset = robocache.open(FIXTURES / "arm_mcap", mapping=MAPPING)
    names = ["observation.state", "imu.orientation", "action", "gripper", "observation.images.wrist"]
    loader = robocache.Loader(dataset, names, windows={"hz": HZ, "history": HISTORY, "horizon": HORIZON},
                              batch_size=8, device="cpu", shuffle=False)
    sources = {
        "observation.state": (seconds(expected("joint_states.header_stamp")),
                              held_joints(expected("joint_states.position")), linear),
        "imu.orientation": (seconds(expected("imu.header_stamp")), expected("imu.orientation"), slerp),
        "action": (seconds(expected("cmd.log_time")), expected("cmd.data"), linear),
        "gripper": (seconds(expected("gripper.log_time")), expected("gripper.data").astype(np.float64)[:, None],
                    previous),
        "observation.images.wrist": (seconds(expected("wrist_image_compressed.header_stamp")),
                                     expected("wrist_image_compressed.pixels"), previous),
    }
    windows = 0
    for batch in loader:
        anchors = np.asarray(batch["anchor"])
        for b, anchor in enumerate(anchors):
            targets = anchor + (np.arange(HISTORY + HORIZON) - HISTORY) / HZ
            for name, (times, values, rule) in sources.items():
                got = np.asarray(batch[name])[b]
                pad = np.asarray(batch[f"{name}_is_pad"])[b]
                np.testing.assert_array_equal(pad, (targets < times[0]) | (targets > times[-1]), err_msg=name)
                want = rule(times, values, targets)
                if rule is slerp:
                    # robocache's own sin and atan against NumPy's: within an ulp of f32.
                    np.testing.assert_allclose(got, want, rtol=0, atol=1.2e-7, err_msg=name)
                elif name == "observation.images.wrist":
                    # Frames come channels-first as floats in [0, 1] or as uint8: compare the uint8 view.
                    got = np.asarray(got)
                    if got.dtype != np.uint8:
                        got = np.rint(got * 255).astype(np.uint8)
                    if got.shape[-1] != 3:
                        got = np.moveaxis(got, -3, -1)
                    np.testing.assert_array_equal(got, want, err_msg=name)
                else:
                    np.testing.assert_array_equal(got, want, err_msg=name)
            windows += 1
    assert windows == len(loader) * 8 or windows > 30


def test_a_bag_written_as_lerobot_reads_back(tmp_path):
    dataset = robocache.open(FIXTURES / "arm_sqlite", mapping=MAPPING)
    written = dataset.to_lerobot(tmp_path / "root", streams=["action", "observation.images.wrist"], task="wave",
                                 cameras="image")
    assert written["episodes"] == 1 and written["data_files"] == 1
    root = robocache.open(tmp_path / "root")
    assert root.format == "lerobot" and root.info["rate_hz"] == HZ
    assert root.episodes[0]["instruction"] == "wave"
    assert len(root.episodes[0]["streams"]) == 2 + 5  # and LeRobot's timestamp and indices
    with pytest.raises(robocache.Error, match="not empty"):
        dataset.to_lerobot(tmp_path / "root")
    info = json.loads((tmp_path / "root" / "meta" / "info.json").read_text())
    assert info["features"]["observation.images.wrist"]["dtype"] == "image"
    # Its 12x16 camera is smaller than H.264's encoder takes: said by name.
    with pytest.raises(robocache.DatasetError, match=r"observation.images.wrist.*16×12"):
        dataset.to_lerobot(tmp_path / "video")


def test_a_bag_written_as_lerobot_images_or_video_reads_back_alike(tmp_path):
    """Camera frames written as PNG read back as the bag's frames; written as
    H.264 they read back within the codec's loss of them."""
    dataset = robocache.open(FIXTURES / "video_mcap", mapping={"streams": {"camera": {"topic": "/camera/video"}}})
    frames = {}
    for cameras in ("image", "video"):
        dataset.to_lerobot(tmp_path / cameras, fps=10.0, cameras=cameras)
        loader = robocache.Loader(robocache.open(tmp_path / cameras), ["camera"],
                                  windows={"hz": 10.0, "history": 0, "horizon": 1},
                                  batch_size=1_000_000, device="cpu", shuffle=False)
        (batch,) = list(loader)
        frames[cameras] = np.asarray(batch["camera"], dtype=np.float64)
        assert (tmp_path / cameras / "videos").exists() == (cameras == "video")
    assert frames["image"].shape == frames["video"].shape
    mse = np.mean((frames["image"] - frames["video"]) ** 2)
    assert 0 < mse and 10 * np.log10(255.0**2 / mse) > 30, mse
    with pytest.raises(robocache.Error, match="cameras"):
        dataset.to_lerobot(tmp_path / "other", cameras="gif")


def test_bag_topics_lists_what_a_bag_holds():
    topics = robocache.bag_topics(FIXTURES / "arm_sqlite")
    imu = next(t for t in topics if t["topic"] == "/imu")
    assert imu["type_name"] == "sensor_msgs/msg/Imu" and imu["messages"] == 400 and imu["storage"] == "SQLite"
    assert imu["rate_hz"] == pytest.approx(200.0, rel=1e-3)
    assert imu["not_decodable"] is None
    assert len({t["file"] for t in robocache.bag_topics(FIXTURES / "arm_zstd.mcap")}) == 1
    with pytest.raises(robocache.Error, match="no .mcap or .db3"):
        robocache.bag_topics(FIXTURES / "expected")


def test_bag_decode_decodes_every_message_and_names_a_bad_one(tmp_path):
    counted = {t["topic"]: t["messages"] for t in robocache.bag_topics(FIXTURES / "arm_mcap")}
    decoded = robocache.bag_decode(FIXTURES / "arm_mcap")
    assert {t["topic"]: t["messages"] for t in decoded} == counted
    assert all(t["error"] is None and t["bytes"] > 0 for t in decoded)
    # A chunk's bytes changed: the bag cannot be read, and the error names it.
    damaged = tmp_path / "damaged.mcap"
    data = bytearray((FIXTURES / "arm_zstd.mcap").read_bytes())
    data[len(data) // 3] ^= 0x55
    damaged.write_bytes(bytes(data))
    with pytest.raises(robocache.DatasetError, match="damaged.mcap"):
        robocache.bag_decode(damaged)


def test_point_clouds_are_the_voxelizers_input():
    """A PointCloud2 topic read by field name equals NumPy's reading of the
    bytes rosbags gives back, and voxelizes as a batch of clouds."""
    clouds = robocache.bag_point_clouds(FIXTURES / "clouds_mcap", "/lidar/points", ["intensity", "ring"])
    counts = np.load(FIXTURES / "expected" / "clouds_mcap" / "lidar_points.counts.npy")
    assert [len(c["positions"]) for c in clouds] == list(counts)
    positions = np.concatenate([c["positions"] for c in clouds])
    features = np.concatenate([c["features"] for c in clouds])
    want = np.load(FIXTURES / "expected" / "clouds_mcap" / "lidar_points.xyz.npy")
    assert np.array_equal(positions.view(np.uint32), want.view(np.uint32)), "bit for bit, NaN included"
    assert np.array_equal(features, np.load(FIXTURES / "expected" / "clouds_mcap" / "lidar_points.intensity_ring.npy"))
    assert clouds[0]["frame_id"] == "lidar" and features.shape[1] == 2
    index = np.concatenate([np.full(len(c["positions"]), i, np.int64) for i, c in enumerate(clouds)])
    grid, _, dropped = robocache.voxelize(positions, origin=(-2.0, -2.0, -2.0), voxel_size=0.5, dims=(8, 8, 8),
                                          mode="count", clouds=index, num_clouds=len(clouds))
    grid = np.asarray(grid)
    assert grid.shape == (len(clouds), 8, 8, 8)
    assert int(np.asarray(dropped)[0]) == 1, "the NaN point is dropped"
    assert int(grid.sum()) == len(positions) - 1
    with pytest.raises(robocache.DatasetError, match="no field `rgb`"):
        robocache.bag_point_clouds(FIXTURES / "clouds_mcap", "/lidar/points", ["rgb"])


def test_a_compressed_video_topic_is_a_camera_stream():
    expected = np.load(FIXTURES / "expected" / "video_mcap" / "camera_video.yuv420.npy")
    dataset = robocache.open(FIXTURES / "video_mcap", mapping={"streams": {"camera": {"topic": "/camera/video"}}})
    loader = robocache.Loader(dataset, ["camera"], windows={"hz": 30.0, "history": 0, "horizon": 1},
                              batch_size=4, device="cpu", shuffle=False)
    batch = next(iter(loader))
    frames = np.asarray(batch["camera"])
    assert frames.shape == (4, 1, 48, 64, 3) and frames.dtype == np.uint8
    # Gradients that move frame to frame: consecutive windows' frames differ,
    # and the luma follows FFmpeg's planes (the conversion is tested in Rust).
    assert not np.array_equal(frames[0, 0], frames[1, 0])
    luma = frames[..., 0].astype(np.float64) * 0.299 + frames[..., 1] * 0.587 + frames[..., 2] * 0.114
    y = expected[:, :48, :].astype(np.float64)
    assert abs(luma[0, 0].mean() - (y[0].mean() - 16) * 255 / 219) < 3


def test_compressed_video_frames_come_from_the_frame_cache_in_later_epochs():
    """The loader reads a bag's CompressedVideo frames through the host frame
    cache, as it reads a LeRobot root's video: the second epoch's frames are
    served from it, and they are the first epoch's."""
    dataset = robocache.open(FIXTURES / "video_mcap", mapping={"streams": {"camera": {"topic": "/camera/video"}}})
    loader = robocache.Loader(dataset, ["camera"], windows={"hz": 30.0, "history": 1, "horizon": 2},
                              batch_size=4, device="cpu", shuffle=False, frame_cache_bytes=64 << 20)
    epochs = [np.concatenate([np.asarray(b["camera"]) for b in loader]) for _ in range(2)]
    np.testing.assert_array_equal(epochs[0], epochs[1])
    cache = loader.telemetry()["frame_cache"]
    assert cache["hits"] > 0 and cache["frames"] > 0, cache


@pytest.mark.parametrize("decoder", ["cpu", "auto", "nvdec"])
def test_compressed_video_decodes_alike_on_every_decoder(decoder):
    """A bag's CompressedVideo frames are the same bits decoded on the CPU or
    on NVDEC (on a CUDA machine; where there is none, "auto" decodes on the
    CPU and "nvdec" is an error that names NVDEC)."""
    mapping = {"streams": {"camera": {"topic": "/camera/video"}, "hevc": {"topic": "/camera/video_h265"}}}
    required = os.environ.get("ROBOCACHE_REQUIRE_CUDA") == "1"
    gpu = robocache.cuda_available()
    # NVDEC decodes HEVC from 144x144: the fixture's 64x48 HEVC stream is
    # NVDEC's to refuse, naming its limits (`auto` decodes it on the CPU).
    keys = ["camera"] if decoder == "nvdec" and gpu else ["camera", "hevc"]
    frames, counts = {}, {}
    for name in ("cpu", decoder):
        dataset = robocache.open(FIXTURES / "video_mcap", mapping=mapping)
        device = "cuda" if name != "cpu" and gpu else "cpu"
        if device == "cuda":
            pytest.importorskip("torch")  # a CUDA loader's batches are torch tensors
        loader = robocache.Loader(dataset, keys, windows={"hz": 30.0, "history": 1, "horizon": 2},
                                  batch_size=8, device=device, shuffle=False, video_decoder=name, frame_cache_bytes=0)
        try:
            frames[name] = [np.concatenate([np.asarray(b[k].cpu() if hasattr(b[k], "cpu") else b[k]) for b in loader])
                            for k in keys]
        except robocache.Error as error:
            # Only NVDEC alone may fail, only where there is no GPU, and saying so.
            assert name == "nvdec" and not required and "NVDEC" in str(error), error
            assert not robocache.cuda_available(), f"a GPU answers, and NVDEC failed: {error}"
            return
        counts[name] = loader.telemetry()["video_decode"]
    for got, want in zip(frames[decoder], frames["cpu"]):
        np.testing.assert_array_equal(got, want)
    # Where each decoder says: the CPU's on the CPU; NVDEC's (and auto's, on
    # a GPU loader) on NVDEC for its share, counted.
    assert counts["cpu"]["cpu_samples"] > 0 and counts["cpu"]["nvdec_samples"] == 0, counts
    if decoder == "nvdec":
        assert counts["nvdec"]["nvdec_samples"] > 0 and counts["nvdec"]["cpu_samples"] == 0, counts
        if gpu:
            dataset = robocache.open(FIXTURES / "video_mcap", mapping=mapping)
            loader = robocache.Loader(dataset, ["hevc"], windows={"hz": 30.0, "history": 1, "horizon": 2},
                                      batch_size=8, device="cuda", video_decoder="nvdec", frame_cache_bytes=0)
            with pytest.raises(robocache.Error, match=r"NVDEC decodes hevc from 144x144.*the video is 64x48"):
                next(iter(loader))
    if decoder == "auto" and (required or robocache.cuda_available()):
        assert counts["auto"]["nvdec_samples"] > 0, counts

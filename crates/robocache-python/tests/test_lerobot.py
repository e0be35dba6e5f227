"""LeRobot roots written by LeRobot 0.6.1 itself (the committed fixtures of
robocache-datasets), read from Python through ``robocache.Loader(root,
delta_timestamps=...)`` and compared with what ``LeRobotDataset`` returned
for every index, collated as a ``DataLoader`` collates it."""

import json
import os
import pathlib

import numpy as np
import pytest

import robocache

FIXTURES = next(
    (p / "crates" / "robocache-datasets" / "tests" / "fixtures" / "lerobot"
     for p in pathlib.Path(__file__).resolve().parents
     if (p / "crates" / "robocache-datasets" / "tests" / "fixtures" / "lerobot").is_dir()),
    pathlib.Path("no-lerobot-fixtures"),
)

if not FIXTURES.is_dir():  # the Python tests copied outside a checkout
    pytest.skip(f"no LeRobot fixtures at {FIXTURES}", allow_module_level=True)

LOW_DIM = ["observation.state", "action", "observation.effort", "observation.counter", "next.done"]


def expected(name):
    archive = np.load(FIXTURES / "expected" / f"{name}.npz")
    meta = json.loads((FIXTURES / "expected" / f"{name}.json").read_text())
    return archive, meta


def lerobot_item(archive, meta, i, keys, video_keys):
    """Item ``i`` as LeRobotDataset returned it (camera frames as float32 from their uint8 rows;
    a video key with one offset squeezed, as LeRobot's decode squeezes it)."""
    item = {}
    for key in keys:
        value = archive[f"{i}/{key}"]
        if f"frames/{key}" in archive.files:
            frames = archive[f"frames/{key}"][value]
            if key in video_keys and len(meta["deltas"].get(key, [])) == 1:
                frames = frames[0]
            value = frames.astype(np.float32) / np.float32(255.0)
        item[key] = value
    item["task"] = meta["tasks"][i]
    return item


def to_numpy(value):
    return value.cpu().numpy() if hasattr(value, "cpu") else np.asarray(value)


def check_root(root, answers, keys, device="cpu", frame_cache_bytes=0, loader=None, video_decoder="auto",
               nvdec_sessions=None):
    archive, meta = expected(answers)
    deltas = {k: v for k, v in meta["deltas"].items() if k in keys}
    if loader is None:
        loader = robocache.Loader(FIXTURES / root, keys, delta_timestamps=deltas, batch_size=16, shuffle=False,
                                  device=device, rank=0, world_size=1, frame_cache_bytes=frame_cache_bytes,
                                  video_decoder=video_decoder, nvdec_sessions=nvdec_sessions)
    assert loader.samples_per_epoch == meta["len"]
    seen = 0
    compared = list(keys) + [f"{k}_is_pad" for k in deltas]
    compared += ["timestamp", "frame_index", "episode_index", "index", "task_index"]
    for batch in loader:
        index = to_numpy(batch["index"])
        for row, i in enumerate(index):
            assert i == seen + row
            want = lerobot_item(archive, meta, int(i), [k for k in compared if f"{i}/{k}" in archive.files],
                                loader.dataset.info["metadata"]["video_keys"])
            for key, value in want.items():
                if key == "task":
                    assert batch["task"][row] == value, (root, i)
                    continue
                got = to_numpy(batch[key])[row]
                assert got.dtype == value.dtype and got.shape == value.shape, (root, i, key, got.dtype, got.shape,
                                                                                value.dtype, value.shape)
                np.testing.assert_array_equal(got, value, err_msg=f"{root} item {i}: {key}")
        seen += len(index)
    assert seen == meta["len"]
    return loader


def test_open_reads_a_lerobot_root():
    dataset = robocache.open(FIXTURES / "av1")
    assert dataset.format == "lerobot" and len(dataset) == 5
    assert dataset.info["rate_hz"] == 10.0
    assert {"observation.state", "action", "observation.images.front", "timestamp"} <= set(dataset.streams)
    assert dataset.info["metadata"]["video_keys"] == ["observation.images.front", "observation.images.wrist"]
    assert [e["len"] for e in dataset.episodes] == [13, 21, 6, 25, 11]


def test_loader_batches_equal_lerobot_low_dimensional():
    pytest.importorskip("torch")
    check_root("av1", "av1", LOW_DIM)
    check_root("h264", "h264", LOW_DIM)


def test_loader_batches_equal_lerobot_with_av1_video():
    """Frames decoded from AV1 (rav1d, swscale's conversion) equal LeRobot's
    bit for bit; the wrist camera's one offset gives [B, C, H, W] as LeRobot's."""
    pytest.importorskip("torch")
    check_root("av1", "av1", LOW_DIM + ["observation.images.front", "observation.images.wrist"])


def test_loader_batches_equal_lerobot_with_h264_video():
    """Frames decoded from H.264 (OpenH264 on the CPU, swscale's conversion)
    equal LeRobot's (FFmpeg's decoder) bit for bit."""
    pytest.importorskip("torch")
    check_root("h264", "h264", LOW_DIM + ["observation.images.front", "observation.images.wrist"])


def test_loader_batches_equal_lerobot_with_hevc_video():
    """Frames decoded from HEVC (libde265 on the CPU; open groups of pictures,
    whose leading pictures decode from the key frame before) equal LeRobot's
    (its pyav backend: FFmpeg's decoder) bit for bit, at 48x64."""
    pytest.importorskip("torch")
    loader = check_root("hevc", "hevc", LOW_DIM + ["observation.images.front", "observation.images.wrist"])
    assert loader.telemetry()["video_decode"]["cpu_samples"] > 0


def test_loader_batches_equal_lerobot_with_image_features():
    pytest.importorskip("torch")
    cameras = ["observation.images.front", "observation.images.wrist"]
    check_root("images", "images", LOW_DIM + cameras)
    check_root("v21", "images", LOW_DIM + cameras)


def test_loader_returns_uint8_frames_on_request_without_torch_arrays():
    loader = robocache.Loader(FIXTURES / "images", ["observation.images.front"],
                              delta_timestamps={"observation.images.front": [-0.1, 0.0]}, return_uint8=True,
                              batch_size=4, shuffle=False, device="cpu", rank=0, world_size=1)
    batch = next(iter(loader))
    frames = to_numpy(batch["observation.images.front"])
    assert frames.dtype == np.uint8 and frames.shape == (4, 2, 3, 32, 48)
    assert to_numpy(batch["observation.images.front_is_pad"]).tolist()[0] == [True, False]


def test_bad_delta_timestamps_are_clear_errors(tmp_path):
    with pytest.raises(robocache.Error, match="multiples of 1/fps"):
        robocache.Loader(FIXTURES / "av1", ["action"], delta_timestamps={"action": [0.0, 0.05]}, batch_size=4,
                         device="cpu")
    with pytest.raises(robocache.Error, match="nope"):
        robocache.Loader(FIXTURES / "av1", ["action"], delta_timestamps={"nope": [0.0]}, batch_size=4, device="cpu")
    # Video that does not decode as its codec (the H.264 root relabelled as
    # HEVC) fails at the first batch, naming the episode, the key, the file
    # and the frame.
    import shutil
    root = tmp_path / "hevc"
    shutil.copytree(FIXTURES / "h264", root)
    for video in root.glob("videos/*/*/*.mp4"):
        video.write_bytes(video.read_bytes().replace(b"avc1", b"hvc1"))
    loader = robocache.Loader(root, ["observation.images.front"],
                              delta_timestamps={"observation.images.front": [0.0]}, batch_size=4, device="cpu")
    with pytest.raises(robocache.Error, match=r"file-000\.mp4: frame \d+") as error:
        next(iter(loader))
    assert "observation.images.front" in str(error.value) and "file-000.mp4" in str(error.value)


def test_frame_cache_serves_the_second_epoch_with_the_same_frames():
    pytest.importorskip("torch")
    cameras = ["observation.images.front", "observation.images.wrist"]
    loader = check_root("av1", "av1", LOW_DIM + cameras, frame_cache_bytes=64 << 20)
    first = loader.telemetry()["frame_cache"]
    assert first["budget_bytes"] == 64 << 20 and first["frames"] > 0 and first["misses"] > 0
    loader.reset_telemetry()
    check_root("av1", "av1", LOW_DIM + cameras, loader=loader)
    second = loader.telemetry()
    assert second["frame_cache"]["misses"] == 0 and second["frame_cache"]["hit_rate"] == 1.0
    # Linux reports the process's CPU time: from the second batch on, the
    # cores the loader kept busy are a positive share of this machine's.
    assert second["batches"] >= 2, second
    busy = second["host_cores_busy"]
    assert isinstance(busy, float) and 0 < busy <= (os.cpu_count() or 1) + 0.5, busy
    with pytest.raises(robocache.Error, match="frame_cache_bytes"):
        robocache.Loader(FIXTURES / "av1", ["action"], delta_timestamps={"action": [0.0]}, batch_size=4,
                         device="cpu", frame_cache_bytes=-1)


def test_the_frame_cache_is_on_by_default_sized_from_host_memory(monkeypatch):
    """Two lines swapped, nothing tuned: a share of the host memory keeps the
    frames, so the second epoch decodes nothing; 0 turns it off."""
    common = dict(delta_timestamps={"observation.images.front": [-0.1, 0.0]}, batch_size=4, device="cpu",
                  rank=0, world_size=1)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    loader = robocache.Loader(FIXTURES / "av1", ["observation.images.front"], **common)
    for epoch in range(2):
        loader.set_epoch(epoch)
        loader.reset_telemetry()
        for _ in loader:
            pass
        cache = loader.telemetry()["frame_cache"]
        assert cache["automatic"] is True and cache["budget_bytes"] > 0, cache
        if epoch == 0:
            assert cache["misses"] > 0 and cache["frames"] > 0, cache
        else:
            assert cache["misses"] == 0 and cache["hit_rate"] == 1.0, cache
    alone = cache["budget_bytes"]
    # The node's processes share it (host memory moves a little between the two reads).
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    shared = robocache.Loader(FIXTURES / "av1", ["observation.images.front"], **common)
    next(iter(shared))
    quarter = shared.telemetry()["frame_cache"]["budget_bytes"]
    assert 0.2 * alone < quarter < 0.3 * alone, (alone, quarter)
    off = robocache.Loader(FIXTURES / "av1", ["observation.images.front"], frame_cache_bytes=0, **common)
    for _ in off:
        pass
    cache = off.telemetry()["frame_cache"]
    assert cache["automatic"] is False and cache["budget_bytes"] == 0 and cache["frames"] == 0, cache


def test_cuda_loader_equals_the_cpu_one(cuda):
    cameras = ["observation.images.front", "observation.images.wrist"]
    check_root("images", "images", LOW_DIM + cameras, device=cuda)
    check_root("v21", "images", LOW_DIM + cameras, device=cuda)
    check_root("av1", "av1", LOW_DIM + cameras, device=cuda)
    check_root("av1", "av1", LOW_DIM + cameras, device=cuda, frame_cache_bytes=64 << 20)
    check_root("h264", "h264", LOW_DIM + cameras, device=cuda)  # NVDEC beside the CPU
    decoded = check_root("h264", "h264", LOW_DIM + cameras, device=cuda, video_decoder="nvdec").telemetry()
    assert decoded["video_decode"]["nvdec_samples"] > 0 and decoded["video_decode"]["cpu_samples"] == 0, decoded
    decoded = check_root("h264", "h264", LOW_DIM + cameras, device=cuda, video_decoder="cpu").telemetry()
    assert decoded["video_decode"]["nvdec_samples"] == 0 and decoded["video_decode"]["cpu_samples"] > 0, decoded
    # AV1 on a GPU whose NVDEC lacks it (the H100): "auto" decodes on the CPU.
    check_root("av1", "av1", LOW_DIM + cameras, device=cuda, video_decoder="auto")
    # No NVDEC session allowed: "auto" decodes on the CPU.
    decoded = check_root("h264", "h264", LOW_DIM + cameras, device=cuda, nvdec_sessions=0).telemetry()
    assert decoded["video_decode"]["nvdec_samples"] == 0 and decoded["video_decode"]["cpu_samples"] > 0, decoded


def test_video_decoder_is_checked_by_name():
    with pytest.raises(robocache.Error, match="video_decoder"):
        robocache.Loader(FIXTURES / "h264", LOW_DIM, delta_timestamps={}, batch_size=4, device="cpu",
                         rank=0, world_size=1, video_decoder="gpu")
    for decoder, sessions, problem in (("cpu", 4, "nvdec_sessions"), ("nvdec", 4, "nvdec_sessions"),
                                       ("auto", -1, "nvdec_sessions")):
        with pytest.raises(robocache.InvalidInputError, match=problem):
            robocache.Loader(FIXTURES / "h264", LOW_DIM, delta_timestamps={}, batch_size=4, device="cpu",
                             rank=0, world_size=1, video_decoder=decoder, nvdec_sessions=sessions)
    # With "auto" and no NVDEC session allowed, frames decode on the CPU.
    loader = check_root("h264", "h264", LOW_DIM + ["observation.images.front"], nvdec_sessions=0)
    assert loader.telemetry()["video_decode"]["nvdec_samples"] == 0
    # On the CPU, "cpu" and "auto" decode the same frames as LeRobot.
    loader = check_root("h264", "h264", LOW_DIM + ["observation.images.front"], video_decoder="cpu")
    decoded = loader.telemetry()["video_decode"]
    assert decoded["cpu_samples"] > 0 and decoded["nvdec_samples"] == 0 and decoded["nvdec_share"] == 0, decoded


def test_workers_default_to_the_cores_for_camera_video_and_to_2_otherwise(monkeypatch):
    common = dict(batch_size=4, device="cpu", rank=0, world_size=1)
    cameras = {"observation.images.front": [-0.1, 0.0]}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(12)), raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    video = robocache.Loader(FIXTURES / "av1", LOW_DIM, delta_timestamps=cameras, **common)
    assert video.workers == 12
    batch = next(iter(video))
    assert to_numpy(batch["observation.images.front"]).shape[:2] == (4, 2)
    for local_world_size, workers in (("4", 3), ("8", 2)):  # the node's cores shared, never fewer than 2
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local_world_size)
        assert robocache.Loader(FIXTURES / "av1", LOW_DIM, delta_timestamps=cameras, **common).workers == workers
    assert robocache.Loader(FIXTURES / "av1", LOW_DIM, delta_timestamps={}, **common).workers == 2
    assert robocache.Loader(FIXTURES / "av1", LOW_DIM, delta_timestamps=cameras, workers=5, **common).workers == 5


def test_verify_reads_every_frame_and_names_a_truncated_video(tmp_path):
    import shutil

    report = robocache.open(FIXTURES / "av1").verify(threads=2)
    assert report["problems"] == [] and report["episodes"] == 5
    assert report["rows"] == sum(s["len"] for e in robocache.open(FIXTURES / "av1").episodes for s in e["streams"])
    root = tmp_path / "av1"
    shutil.copytree(FIXTURES / "av1", root)
    video = root / "videos" / "observation.images.wrist" / "chunk-000" / "file-000.mp4"
    video.write_bytes(video.read_bytes()[: video.stat().st_size // 2])
    problems = robocache.open(root).verify()["problems"]
    assert problems and all(p["stream"] == "observation.images.wrist" for p in problems), problems
    assert any("file-000.mp4" in p["error"] and "truncated" in p["error"] for p in problems), problems
    with pytest.raises(robocache.InvalidInputError, match="threads"):
        robocache.open(root).verify(threads=0)


def test_hostile_templates_are_errors_not_panics(tmp_path):
    """A template width past 20 digits reached Python as PanicException; a
    template leaving the root read files outside it."""
    import shutil

    for template, says in (("data/chunk-{chunk_index:0999999999d}/file-{file_index:03d}.parquet", "digits"),
                           ("../outside/data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", "..")):
        root = tmp_path / f"root-{len(template)}"
        shutil.copytree(FIXTURES / "av1", root)
        info = json.loads((root / "meta/info.json").read_text())
        info["data_path"] = template
        (root / "meta/info.json").write_text(json.dumps(info))
        with pytest.raises(robocache.DatasetError, match="data_path") as error:
            robocache.open(root)
        assert says in str(error.value) and "info.json" in str(error.value)

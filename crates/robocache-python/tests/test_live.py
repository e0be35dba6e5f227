"""Deployment from Python: ``loader.spec()`` saved and loaded, and
``robocache.Live`` fed a recorded episode sample by sample, in time order,
gives the loader's windows bit for bit (causal time windows at once,
non-causal ones a lag behind, LeRobot ``delta_timestamps`` on a root with
video); bad input raises naming the stream. CUDA where a GPU answers."""

import json
import pathlib
import sys
import threading
import time

import numpy as np
import pytest

import robocache

FIXTURES = next(
    (p / "crates" / "robocache-datasets" / "tests" / "fixtures" / "lerobot"
     for p in pathlib.Path(__file__).resolve().parents
     if (p / "crates" / "robocache-datasets" / "tests" / "fixtures" / "lerobot").is_dir()),
    pathlib.Path("no-lerobot-fixtures"),
)
STREAMS = ["actions", "obs/joint_pos", "obs/gripper", "obs/camera"]


@pytest.fixture(scope="module")
def camera_file(tmp_path_factory):
    """4 demos at 20 Hz: actions, joints, gripper (discrete), a 12x16 camera."""
    h5py = pytest.importorskip("h5py")
    path = tmp_path_factory.mktemp("live") / "camera.hdf5"
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift", "env_kwargs": {"control_freq": 20}})
        for i in range(4):
            n = int(rng.integers(20, 30))
            demo = data.create_group(f"demo_{i}")
            demo.attrs["num_samples"] = n
            demo.create_dataset("actions", data=rng.standard_normal((n, 7)).astype(np.float32))
            obs = demo.create_group("obs")
            obs.create_dataset("joint_pos", data=np.cumsum(rng.standard_normal((n, 7)), 0))  # float64
            gripper = obs.create_dataset("gripper", data=(rng.uniform(size=(n, 1)) > 0.5).astype(np.float32))
            gripper.attrs["robocache_kind"] = "discrete"
            obs.create_dataset("camera", data=rng.integers(0, 256, (n, 12, 16, 3), dtype=np.uint8))
    return str(path)


def _rows(path):
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "r") as f:
        return [{name: f[f"data/demo_{i}/{name}"][()] for name in STREAMS} for i in range(len(f["data"]))]


def _loader(path, causal, device="cpu"):
    return robocache.Loader(path, STREAMS, windows={"hz": 30, "history": 2, "horizon": 3, "causal": causal},
                            batch_size=1000, shuffle=False, device=device, normalization="zscore",
                            frame_size=(6, 8), frame_layout="chw", frame_dtype="float32")


def _host(x):
    return x.cpu().numpy() if hasattr(x, "cpu") else np.asarray(x)


def _replay(path, loader, live, lag):
    """Pushes each demo's samples up to every anchor (plus ``lag``) and
    compares the live window there with the batch's first steps."""
    batch = next(iter(loader))
    episodes, anchors = _host(batch["episode_index"]), _host(batch["anchor"])
    compared = 0
    for e, rows in enumerate(_rows(path)):
        live.reset()
        events = sorted((i / 20.0, name, row) for name in STREAMS for i, row in enumerate(rows[name]))
        at = 0
        for b in np.flatnonzero(episodes == e):
            anchor = float(anchors[b])
            while at < len(events) and events[at][0] <= anchor + lag:
                live.push(events[at][1], events[at][0], events[at][2])
                at += 1
            try:
                window = live.window(anchor)
            except robocache.InvalidInputError as error:
                assert lag > 0 and "no sample at or after" in str(error), error
                continue
            for name in STREAMS:
                for key in (name, f"{name}_is_pad"):
                    want, got = _host(batch[key])[b, :3], _host(window[key])[0]
                    assert got.dtype == want.dtype and np.array_equal(got, want), (key, e, anchor)
            compared += 1
    return compared


def test_causal_windows_replay_bit_for_bit_from_a_saved_spec(camera_file, tmp_path):
    loader = _loader(camera_file, causal=True)
    loader.spec().save(tmp_path / "spec.json")
    spec = robocache.LoaderSpec.load(tmp_path / "spec.json")
    assert spec == loader.spec() and str(tmp_path) not in spec.to_json()
    live = robocache.Live(tmp_path / "spec.json", device="cpu")
    assert live.streams == STREAMS
    assert _replay(camera_file, loader, live, lag=0.0) == loader.samples_per_epoch


def test_non_causal_windows_replay_a_lag_behind(camera_file):
    loader = _loader(camera_file, causal=False)
    live = robocache.Live(loader.spec(), device="cpu")
    compared = _replay(camera_file, loader, live, lag=1 / 20 + 1e-9)
    assert compared > loader.samples_per_epoch * 3 // 4


def test_causal_windows_on_cuda_equal_the_cpu_loader(camera_file, cuda):
    torch = pytest.importorskip("torch")
    loader = _loader(camera_file, causal=True)
    live = robocache.Live(loader.spec().to_json(), device=cuda)
    assert _replay(camera_file, loader, live, lag=0.0) == loader.samples_per_epoch
    window = live.window(10.0)  # after the last episode: causal windows hold its last samples
    assert isinstance(window["actions"], torch.Tensor) and window["actions"].device.type == "cuda"
    assert not window["actions_is_pad"].any()


@pytest.mark.skipif(not (FIXTURES / "av1").is_dir(), reason="the LeRobot fixtures are not beside the tests")
def test_delta_windows_replay_lerobot_batches_with_video():
    root = str(FIXTURES / "av1")
    front, state = "observation.images.front", "observation.state"
    deltas = {front: [-0.1, 0.0], state: [-0.2, -0.1, 0.0]}
    loader = robocache.Loader(root, [front, state], delta_timestamps=deltas, batch_size=1000, shuffle=False,
                              device="cpu", frame_size=(16, 20), frame_crop=(2, 4, 28, 40))
    frames = robocache.Loader(root, [front, state], delta_timestamps={front: [0.0]}, batch_size=1000, shuffle=False,
                              device="cpu", return_uint8=True)
    batch, recorded = next(iter(loader)), next(iter(frames))
    live = robocache.Live(loader.spec(), device="cpu")
    assert live.streams == [front, state]
    frame_index, episode_index = _host(batch["frame_index"]), _host(batch["episode_index"])
    for b in range(len(frame_index)):
        if b == 0 or episode_index[b] != episode_index[b - 1]:
            live.reset()
        t = int(frame_index[b]) / 10.0
        live.push(front, t, np.ascontiguousarray(_host(recorded[front][b]).transpose(1, 2, 0)))  # the camera's HWC
        live.push(state, t, _host(recorded[state][b]))
        window = live.window(t)
        for key in (front, f"{front}_is_pad", state, f"{state}_is_pad"):
            assert np.array_equal(_host(window[key][0]), _host(batch[key][b])), (key, b)


def test_bad_input_raises_naming_the_stream(camera_file):
    live = robocache.Live(_loader(camera_file, causal=True).spec(), device="cpu")
    cases = [
        (("obs/elbow", 0.0, np.zeros(7, np.float32)), "not a stream"),
        (("obs/joint_pos", 0.0, np.zeros(6)), "not 6 values"),
        (("obs/joint_pos", 0.0, np.zeros(7, np.int32)), "not i32"),
        (("obs/joint_pos", float("nan"), np.zeros(7)), "not finite"),
        (("obs/camera", 0.0, np.zeros((12, 15, 3), np.uint8)), "[12, 16, 3]"),
        (("obs/camera", 0.0, b"\x00\x01"), "neither PNG nor JPEG"),
    ]
    for args, words in cases:
        with pytest.raises(robocache.InvalidInputError, match=None) as raised:
            live.push(*args)
        assert f"`{args[0]}`" in str(raised.value) and words in str(raised.value), raised.value
    live.push("obs/joint_pos", 1.0, np.zeros(7))
    with pytest.raises(robocache.InvalidInputError, match="does not come after"):
        live.push("obs/joint_pos", 0.5, np.zeros(7))
    # Causal: a stream with no sample yet is padding (zeros), not an error.
    window = live.window(1.0)
    assert window["actions_is_pad"].all() and not window["actions"].any()
    assert not window["obs/joint_pos_is_pad"][0, -1]


def test_pushes_from_several_threads(camera_file):
    live = robocache.Live(_loader(camera_file, causal=True).spec(), device="cpu")

    def feed(name, shape, dtype):
        for i in range(200):
            live.push(name, i / 100.0, np.full(shape, i, dtype))

    threads = [threading.Thread(target=feed, args=a) for a in
               [("actions", 7, np.float32), ("obs/joint_pos", 7, np.float64), ("obs/camera", (12, 16, 3), np.uint8)]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    window = live.window(1.99)
    assert not window["actions_is_pad"].any() and window["obs/camera"].shape == (1, 3, 3, 6, 8)


def _big_camera_spec(camera_file, size, layout="hwc", dtype="uint8"):
    """The camera file's spec with a 4K camera, resized to ``size``."""
    spec = _loader(camera_file, causal=True).spec().to_dict()
    for stream in spec["streams"]:
        if stream["name"] == "obs/camera":
            stream["camera"], stream["step_shape"] = [3840, 2160], [2160, 3840, 3]
    spec["frames"].update(size=list(size), layout=layout, dtype=dtype)
    return spec


def test_push_releases_the_gil_so_threads_push_concurrently(camera_file):
    """A push of a 4K frame (resized on the CPU) runs without the GIL: a
    Python thread ticking meanwhile is never held up for the push's length."""
    live = robocache.Live(_big_camera_spec(camera_file, (640, 360)), device="cpu")
    frame = np.random.default_rng(1).integers(0, 256, (2160, 3840, 3), dtype=np.uint8)
    started = time.perf_counter()
    live.push("obs/camera", 0.0, frame)
    one_push = time.perf_counter() - started
    gaps, done = [], threading.Event()

    def tick():
        last = time.perf_counter()
        while not done.is_set():
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    try:
        ticker = threading.Thread(target=tick)
        ticker.start()
        pushes = 6
        for i in range(1, pushes + 1):
            live.push("obs/camera", i / 10.0, frame)
        done.set()
        ticker.join()
    finally:
        sys.setswitchinterval(interval)
    # Held, the ticker would stop for a whole push at a time.
    assert max(gaps) < one_push / 2, (max(gaps), one_push)
    assert live.window(pushes / 10.0)["obs/camera"].shape == (1, 3, 360, 640, 3)


def test_cuda_windows_are_ordered_on_torchs_stream(camera_file, cuda):
    """robocache's own stream kept busy (4K frames converted on it just
    before each window), the window read at once on torch's current
    stream: always the CPU live window's values."""
    torch = pytest.importorskip("torch")
    spec = _big_camera_spec(camera_file, (448, 252), layout="chw", dtype="float32")
    on_gpu, on_cpu = robocache.Live(spec, device=cuda), robocache.Live(spec, device="cpu")
    rng = np.random.default_rng(5)
    frames = [rng.integers(0, 256, (2160, 3840, 3), dtype=np.uint8) for _ in range(3)]
    for i in range(120):
        t = i / 30.0
        joints = rng.standard_normal(7)
        for live in (on_gpu, on_cpu):
            live.push("obs/camera", t, frames[i % 3])
            live.push("obs/joint_pos", t, joints)
        got = on_gpu.window(t)
        read = {key: value.cpu().numpy() for key, value in got.items()}  # on torch's stream, at once
        want = on_cpu.window(t)
        for key, value in want.items():
            assert np.array_equal(read[key], _host(value)), (key, i)


def test_specs_refuse_what_they_cannot_reproduce(camera_file, robomimic_file):
    spec = _loader(camera_file, causal=True).spec().to_dict()
    newer = dict(spec, version=spec["version"] + 1)
    with pytest.raises(robocache.InvalidInputError, match="newer robocache"):
        robocache.Live(newer)
    del spec["normalization"]["streams"]["actions"]
    with pytest.raises(robocache.InvalidInputError, match="no statistics of `actions`"):
        robocache.LoaderSpec.from_json(json.dumps(spec))
    steps = robocache.Loader(robomimic_file, ["actions"], windows={"seq_length": 4}, batch_size=4, device="cpu")
    with pytest.raises(robocache.InvalidInputError, match="step windows"):
        steps.spec()
    # A contract: unknown and missing fields, absurd rates, statistics of the wrong width.
    spec = _loader(camera_file, causal=True).spec().to_dict()
    cases = [
        (dict(spec, surprise=1), "unknown field `surprise`"),
        ({k: v for k, v in spec.items() if k != "normalization"}, "missing field `normalization`"),
        (dict(spec, clock=dict(spec["clock"], hz=1e300)), "clock.hz"),
        (dict(spec, clock=dict(spec["clock"], hz=-30)), "clock.hz"),
    ]
    narrow = json.loads(json.dumps(spec))
    for field in ("mean", "std", "min", "max", "p01", "p99", "counts"):
        narrow["normalization"]["streams"]["obs/joint_pos"][field] = narrow["normalization"]["streams"]["obs/joint_pos"][field][:3]
    cases.append((narrow, "the stream has 7"))
    for bad, words in cases:
        with pytest.raises(robocache.InvalidInputError) as raised:
            robocache.Live(bad, device="cpu")
        assert words in str(raised.value), raised.value


MAPPING = """[streams."observation.state"]
topic = "/joint_states"
field = "position"
joints = ["j2", "j1"]
[streams.orientation]
topic = "/imu"
field = "orientation"
[streams.action]
topic = "/cmd"
field = "data"
"""


@pytest.mark.skipif(not (FIXTURES.parent / "ros2" / "arm_mcap").is_dir(), reason="the ROS 2 fixtures are not beside the tests")
def test_serialized_ros2_messages_replay_training(tmp_path):
    rosbag2 = pytest.importorskip("rosbags.rosbag2")
    bag = FIXTURES.parent / "ros2" / "arm_mcap"
    (tmp_path / "map.toml").write_text(MAPPING)
    dataset = robocache.open(bag, mapping=str(tmp_path / "map.toml"))
    streams = ["observation.state", "orientation", "action"]
    loader = robocache.Loader(dataset, streams, windows={"hz": 15, "history": 3, "horizon": 2, "causal": True},
                              batch_size=1000, shuffle=False, device="cpu")
    spec = loader.spec()
    assert sorted(t["topic"] for t in spec.to_dict()["bag_topics"]) == ["/cmd", "/imu", "/joint_states"]
    origin = dataset.episodes[0]["metadata"]["origin_ns"]
    live = robocache.Live(spec, device="cpu", message_origin_ns=origin)
    batch = next(iter(loader))
    with rosbag2.Reader(bag) as reader:
        wanted = [c for c in reader.connections if c.topic in ("/joint_states", "/imu", "/cmd")]
        messages = sorted(((t, c.topic, bytes(raw)) for c, t, raw in reader.messages(connections=wanted)),
                          key=lambda m: m[0])
    at = 0
    for b, anchor in enumerate(_host(batch["anchor"])):
        while at < len(messages) and messages[at][0] <= origin + (anchor + 0.5) * 1e9:
            live.push_message(messages[at][1], messages[at][0], messages[at][2])
            at += 1
        window = live.window(float(anchor))
        for name in streams:
            for key in (name, f"{name}_is_pad"):
                assert np.array_equal(_host(window[key])[0], _host(batch[key])[b, :4]), (key, b)
    with pytest.raises(robocache.InvalidInputError, match="`/scene/image`: no numeric stream"):
        live.push_message("/scene/image", 0, b"\x00\x01\x00\x00")
    # Three messages with one stamp are kept, as the bag reader keeps them;
    # reset takes the next episode's origin.
    first = next(m for m in messages if m[1] == "/joint_states")
    live.reset(message_origin_ns=origin)
    for _ in range(3):
        live.push_message(first[1], first[0], first[2])

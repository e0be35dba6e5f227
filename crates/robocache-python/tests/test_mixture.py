"""robocache.MixtureSampler: weights, epochs, ranks and resuming from Python."""

import collections

import numpy as np
import pytest

import robocache


def test_sample_weights_are_shares_whatever_the_sizes():
    mix = robocache.MixtureSampler([100, 4000], [1.0, 10.0], epoch_windows=1100, seed=3)
    assert mix.counts == [100, 1000]
    assert mix.shares == pytest.approx([1 / 11, 10 / 11])
    epoch = mix.epoch(0)
    assert collections.Counter(part for part, _ in epoch) == {0: 100, 1: 1000}
    assert len({w for part, w in epoch if part == 0}) == 100, "each window of the small dataset once"


def test_balance_weights_scale_by_size():
    mix = robocache.MixtureSampler([100, 400], [1.0, 1.0], convention="balance", seed=3)
    assert mix.epoch_len == 500 and mix.counts == [100, 400]


def test_until_exhausted_by_name_and_resume():
    mix = robocache.MixtureSampler([37, 500], [1.0, 3.0], names=["small", "large"], until_exhausted="small", seed=1)
    epoch = mix.epoch(2)
    assert sorted(w for part, w in epoch if part == 0) == list(range(37))
    assert mix.epoch(2, start=10) == epoch[10:]
    assert mix.epoch(2) != mix.epoch(3)
    assert "small" in repr(mix)


def test_ranks_partition_each_share():
    seen = collections.Counter()
    lengths = []
    for rank in range(3):
        mix = robocache.MixtureSampler([50, 1000], [1.0, 1.0], epoch_windows=400, seed=5, rank=rank, world_size=3)
        epoch = mix.epoch(1)
        lengths.append(len(epoch))
        assert len(epoch) == len(mix)
        seen.update(epoch)
    assert sum(lengths) == 400
    assert all(seen[(0, w)] == 4 for w in range(50)), "the small dataset's share needs four passes"
    assert all(n == 1 for (part, _), n in seen.items() if part == 1)


def test_sharded_by_episode_each_rank_reads_its_own_episodes():
    episodes = [[w // 10 for w in range(80)], [w // 50 for w in range(300)]]
    owners = collections.defaultdict(set)
    for rank in range(2):
        mix = robocache.MixtureSampler([80, 300], [1.0, 2.0], epoch_windows=150, seed=4, rank=rank, world_size=2,
                                       episodes=episodes)
        for part, window in mix.epoch(0):
            owners[(part, episodes[part][window])].add(rank)
    assert all(len(ranks) == 1 for ranks in owners.values())


def test_bad_mixtures_raise_clear_errors():
    with pytest.raises(robocache.InvalidInputError, match="one of each"):
        robocache.MixtureSampler([10, 20], [1.0])
    with pytest.raises(robocache.InvalidInputError, match="balance"):
        robocache.MixtureSampler([10], [1.0], convention="octo")
    with pytest.raises(robocache.DatasetError, match="weight 0"):
        robocache.MixtureSampler([10], [0.0])
    with pytest.raises(robocache.InvalidInputError, match="names no dataset"):
        robocache.MixtureSampler([10], [1.0], until_exhausted="nope")
    with pytest.raises(robocache.InvalidInputError, match="both rank"):
        robocache.MixtureSampler([10], [1.0], rank=0)


def _fixtures():
    import pathlib

    for parent in pathlib.Path(__file__).resolve().parents:
        candidate = parent / "crates" / "robocache-datasets" / "tests" / "fixtures"
        if candidate.is_dir():
            return candidate
    return None


def test_a_mixture_loader_batches_a_lerobot_root_and_a_robomimic_file(robomimic_file):
    fixtures = _fixtures()
    if fixtures is None:
        pytest.skip("no dataset fixtures (the tests copied outside a checkout)")
    deltas = {"action": [0.0, 0.1, 0.2, 0.3], "observation.state": [0.0, 0.1, 0.2, 0.3]}
    lerobot = robocache.Loader(fixtures / "lerobot" / "av1", ["action", "observation.state"],
                               delta_timestamps=deltas, batch_size=8, device="cpu")
    robomimic = robocache.Loader(robomimic_file, ["actions", "obs/gripper"], windows={"seq_length": 4},
                                 batch_size=8, device="cpu")
    mixture = robocache.MixtureLoader(
        [{"loader": lerobot, "weight": 1.0, "keys": {"action": "action", "state": "observation.state"}, "name": "aloha"},
         {"loader": robomimic, "weight": 3.0, "keys": {"action": "actions"}, "name": "lift"}],
        batch_size=16, epoch_windows=64, seed=2)
    assert mixture.shares == pytest.approx([0.25, 0.75])
    assert len(mixture) == 4
    batches = list(mixture)
    assert len(batches) == 4
    report = mixture.telemetry()
    assert report["batches"] == 4 and [m["name"] for m in report["members"]] == ["aloha", "lift"]
    assert sum(m["windows"] for m in report["members"]) == 64
    assert all(abs(m["share"] - m["weight_share"]) <= 1 / 64 for m in report["members"])
    batch = batches[0]
    rows = len(batch["dataset_index"])
    assert tuple(batch["action"].shape) == (rows, 4, 7)
    assert tuple(batch["state"].shape) == (rows, 4, 6)
    dataset = np.asarray(batch["dataset_index"])
    assert list(dataset) == sorted(dataset), "rows grouped by dataset"
    lift = dataset == 1
    state_pad = np.asarray(batch["state_dim_is_pad"])
    assert state_pad[lift].all() and not state_pad[~lift].any(), "lift has no state: every dimension padding"
    assert np.asarray(batch["state_is_pad"])[lift].all()
    assert (np.asarray(batch["state"])[lift] == 0).all()
    # Both datasets have 7 action dimensions: none padded, and real values
    # (the Rust tests compare every row with each loader's own batch).
    assert not np.asarray(batch["action_dim_is_pad"]).any()
    assert np.abs(np.asarray(batch["action"])[lift]).sum() > 0
    assert np.asarray(batch["window_index"])[lift].max() < robomimic.samples_per_epoch
    # Resuming mid-epoch gives the same batch.
    state = {"epoch": 0, "next_batch": 2, "rank": 0, "world_size": 1}
    again = robocache.MixtureLoader(
        [(lerobot, 1.0, {"action": "action", "state": "observation.state"}), (robomimic, 3.0, {"action": "actions"})],
        batch_size=16, epoch_windows=64, seed=2)
    again.load_state_dict(state)
    resumed = next(iter(again))
    assert np.array_equal(np.asarray(resumed["action"]), np.asarray(batches[2]["action"]))
    # A state carries the mixture's fingerprint: it resumes on the same
    # mixture, and is refused by one of other weights, seed or length.
    saved = again.state_dict()
    assert "weight 3 × " in saved["mixture"] and "seed 2" in saved["mixture"], saved["mixture"]
    again.load_state_dict(saved)
    for changed in [dict(weights=(1.0, 1.0)), dict(seed=3), dict(epoch_windows=80)]:
        weights = changed.get("weights", (1.0, 3.0))
        other = robocache.MixtureLoader(
            [(lerobot, weights[0], {"action": "action", "state": "observation.state"}),
             (robomimic, weights[1], {"action": "actions"})],
            batch_size=16, epoch_windows=changed.get("epoch_windows", 64), seed=changed.get("seed", 2))
        with pytest.raises(robocache.InvalidInputError, match="saved by another mixture"):
            other.load_state_dict(saved)
    with pytest.raises(robocache.InvalidInputError, match="at least one"):
        robocache.MixtureLoader([])


def test_a_mixture_on_the_gpu_equals_it_on_the_cpu(cuda):
    """A LeRobot root with a camera (frames converted on the device) and an
    RLDS dataset: every batch on the GPU equals the CPU's, bit for bit."""
    fixtures = _fixtures()
    if fixtures is None:
        pytest.skip("no dataset fixtures (the tests copied outside a checkout)")
    deltas = {"action": [0.0, 0.1, 0.2, 0.3], "observation.state": [0.0, 0.1, 0.2, 0.3],
              "observation.images.front": [0.0]}
    rlds = robocache.open(fixtures / "rlds" / "robocache_fixture_dict" / "1.0.0", rate_hz=10.0)
    results = {}
    for device in ["cpu", cuda]:
        lerobot = robocache.Loader(fixtures / "lerobot" / "av1", list(deltas), delta_timestamps=deltas, batch_size=8,
                                   device=device)
        steps = robocache.Loader(rlds, ["action/world_vector", "observation/state"], windows={"seq_length": 4},
                                 batch_size=8, device=device)
        mixture = robocache.MixtureLoader(
            [(lerobot, 1.0, {"action": "action", "state": "observation.state", "front": "observation.images.front"}),
             (steps, 2.0, {"action": "action/world_vector", "state": "observation/state"})],
            batch_size=16, epoch_windows=64, seed=5)
        batches = []
        for batch in mixture:
            if device != "cpu":
                assert batch["front"].device.type == "cuda"
            batches.append({k: np.asarray(v.cpu()) for k, v in batch.items()})
        results[device] = batches
    assert len(results["cpu"]) == 4
    for want, got in zip(results["cpu"], results[cuda]):
        assert want.keys() == got.keys()
        for key in want:
            assert np.array_equal(want[key], got[key]), key


def _lerobot_and_rlds_members(fixtures):
    """Mixture members: the LeRobot fixture with its camera and a constant
    ``mode``, weight 1, and the RLDS fixture with a concatenated ``state``,
    weight 2; windows of 4 steps, cameras at 16×16 (CHW uint8)."""
    deltas = {"action": [0.0, 0.1, 0.2, 0.3], "observation.state": [0.0, 0.1, 0.2, 0.3],
              "observation.images.front": [0.0, 0.1, 0.2, 0.3]}
    rlds = robocache.open(fixtures / "rlds" / "robocache_fixture_dict" / "1.0.0", rate_hz=10.0)
    return [
        {"dataset": fixtures / "lerobot" / "av1", "weight": 1.0, "delta_timestamps": deltas, "return_uint8": True,
         "frame_size": (16, 16),
         "keys": {"action": "action", "state": "observation.state", "camera": "observation.images.front",
                  "mode": {"constant": [1.0, 0.0]}}},
        {"dataset": rlds, "weight": 2.0, "windows": {"seq_length": 4}, "frame_size": (16, 16), "frame_layout": "chw",
         "keys": {"action": "action/world_vector", "state": ["observation/state", "observation/joint_positions"],
                  "camera": "observation/image"}},
    ]


def test_keys_and_cameras_of_a_mixture_on_the_gpu_equal_the_cpu(cuda):
    """Padding on the device, a concatenated key, a constant and an RLDS
    camera converted after its windows: every batch on the GPU equals the
    CPU's, bit for bit."""
    fixtures = _fixtures()
    if fixtures is None:
        pytest.skip("no dataset fixtures (the tests copied outside a checkout)")
    results = {}
    for device in ["cpu", cuda]:
        mixture = robocache.Loader(_lerobot_and_rlds_members(fixtures), batch_size=16, epoch_windows=64, seed=5,
                                   device=device)
        batches = []
        for batch in mixture:
            if device != "cpu":
                assert all(v.device.type == "cuda" for v in batch.values() if hasattr(v, "device"))
            batches.append({k: np.asarray(v.cpu()) for k, v in batch.items()})
        results[device] = batches
    assert len(results["cpu"]) == 4 and results["cpu"][0]["camera"].shape[1:] == (4, 3, 16, 16)
    for want, got in zip(results["cpu"], results[cuda]):
        for key in want:
            assert np.array_equal(want[key], got[key]), key


def test_batches_assembled_together_equal_batches_assembled_alone(robomimic_file):
    """``batches_together`` (each member asked once for several batches'
    windows) changes no batch: a LeRobot root with a camera and a constant,
    an RLDS dataset with a concatenated key, and a robomimic file lacking
    the state, the camera and the constant, from the start and resumed
    mid-epoch; a key's shape is the same in every batch."""
    fixtures = _fixtures()
    if fixtures is None:
        pytest.skip("no dataset fixtures (the tests copied outside a checkout)")

    def mixture(batches_together, workers):
        lift = {"dataset": robomimic_file, "weight": 1.0, "windows": {"seq_length": 4}, "keys": {"action": "actions"}}
        return robocache.Loader(_lerobot_and_rlds_members(fixtures) + [lift],
                                streams=["action", "state", "camera", "mode"], batch_size=8, epoch_windows=60, seed=4,
                                device="cpu", mixture_workers=workers, batches_together=batches_together)

    def arrays(loader):
        return [{k: np.asarray(v) for k, v in batch.items()} for batch in loader]

    alone = arrays(mixture(1, 1))
    assert len(alone) == 8
    chosen = mixture(None, 2)
    assert chosen.telemetry()["batches_per_run"] == 1, "one a run before any batch is timed"
    got = arrays(chosen)
    assert chosen.telemetry()["batches_per_run"] in (1, 4)
    for a, b in zip(got, alone):
        for key in b:
            assert np.array_equal(a[key], b[key]), key
    # Every batch has every key at the mixture's shape, whichever datasets it draws.
    assert {tuple(b["state"].shape[1:]) for b in alone} == {(4, 15)}, "RLDS state 8 ++ joints 7"
    assert {tuple(b["mode"].shape[1:]) for b in alone} == {(4, 2)}
    assert any(0 not in b["dataset_index"] for b in alone), "a batch without the LeRobot rows (its mode)"
    for together, workers in [(3, 2), (8, 1), (4, 3)]:
        got = arrays(mixture(together, workers))
        assert len(got) == len(alone)
        for index, (a, b) in enumerate(zip(got, alone)):
            assert a.keys() == b.keys()
            for key in b:
                assert np.array_equal(a[key], b[key]), (together, index, key)
    resumed = mixture(3, 2)
    resumed.load_state_dict({"epoch": 0, "next_batch": 5, "rank": 0, "world_size": 1})
    for a, b in zip(arrays(resumed), alone[5:]):
        for key in b:
            assert np.array_equal(a[key], b[key]), key
    with pytest.raises(robocache.InvalidInputError, match="batches_together"):
        mixture(0, 1)


def test_a_loader_of_several_datasets_is_their_mixture(robomimic_file):
    fixtures = _fixtures()
    if fixtures is None:
        pytest.skip("no dataset fixtures (the tests copied outside a checkout)")
    deltas = {"action": [0.0, 0.1, 0.2, 0.3], "observation.state": [0.0, 0.1, 0.2, 0.3]}
    mixture = robocache.Loader([
        {"dataset": fixtures / "lerobot" / "av1", "weight": 1.0, "delta_timestamps": deltas,
         "keys": {"action": "action", "state": "observation.state"}, "name": "aloha"},
        {"dataset": robomimic_file, "weight": 3.0, "windows": {"seq_length": 4}, "keys": {"action": "actions"}},
    ], batch_size=16, epoch_windows=64, seed=2, device="cpu")
    assert isinstance(mixture, robocache.MixtureLoader)
    assert mixture.names[0] == "aloha" and mixture.streams == ["action", "state"]
    # The same as the mixture of the two loaders made by hand.
    lerobot = robocache.Loader(fixtures / "lerobot" / "av1", ["action", "observation.state"],
                               delta_timestamps=deltas, batch_size=16, seed=2, device="cpu")
    robomimic = robocache.Loader(robomimic_file, ["actions"], windows={"seq_length": 4}, batch_size=16, seed=2,
                                 device="cpu")
    by_hand = robocache.MixtureLoader(
        [(lerobot, 1.0, {"action": "action", "state": "observation.state"}), (robomimic, 3.0, {"action": "actions"})],
        batch_size=16, epoch_windows=64, seed=2)
    for got, want in zip(mixture, by_hand):
        assert got.keys() == want.keys()
        for key in want:
            assert np.array_equal(np.asarray(got[key]), np.asarray(want[key])), key
    with pytest.raises(robocache.InvalidInputError, match="member 0 must be a dict"):
        robocache.Loader([("not", "a dict")], batch_size=4)


def test_keys_concatenate_streams_and_fill_constants(robomimic_file):
    """`keys` values: a stream, a list of streams side by side, or a constant."""
    fixtures = _fixtures()
    if fixtures is None:
        pytest.skip("no dataset fixtures (the tests copied outside a checkout)")
    rlds = robocache.open(fixtures / "rlds" / "robocache_fixture_dict" / "1.0.0", rate_hz=10.0)
    def mixture_of(lift_keys):
        return robocache.Loader([
            {"dataset": robomimic_file, "name": "lift", "windows": {"seq_length": 3}, "keys": lift_keys},
            {"dataset": rlds, "name": "rt1", "windows": {"seq_length": 3}, "keys": {"state": "observation/state"}},
        ], batch_size=16, epoch_windows=32, seed=1, device="cpu")

    mixture = mixture_of({"state": ["obs/joint_pos", "obs/gripper"], "mode": {"constant": [2.0, -1.0]}})
    # The same windows with the two streams apart (same sizes, weights, seed).
    apart = mixture_of({"joints": "obs/joint_pos", "gripper": "obs/gripper"})
    seen = 0
    for batch, other in zip(mixture, apart):
        assert np.array_equal(np.asarray(batch["window_index"]), np.asarray(other["window_index"]))
        rows = np.asarray(batch["dataset_index"]) == 0
        seen += rows.sum()
        state, mode = np.asarray(batch["state"]), np.asarray(batch["mode"])
        assert state.shape[1:] == (3, 8) and mode.shape[1:] == (3, 2)
        joined = np.concatenate([np.asarray(other["joints"]), np.asarray(other["gripper"])], axis=-1)[rows]
        assert np.array_equal(state[rows], joined)
        either = np.asarray(other["joints_is_pad"]) | np.asarray(other["gripper_is_pad"])
        assert np.array_equal(np.asarray(batch["state_is_pad"])[rows], either[rows])
        assert (mode[rows] == [2.0, -1.0]).all() and not np.asarray(batch["mode_is_pad"])[rows].any()
        assert (mode[~rows] == 0).all() and np.asarray(batch["mode_is_pad"])[~rows].all()
    assert seen > 0
    stats = mixture.statistics()["lift"]["streams"]
    assert stats["mode"]["mean"] == [2.0, -1.0] and stats["mode"]["std"] == [0.0, 0.0]
    assert len(stats["state"]["mean"]) == 8
    with pytest.raises(robocache.InvalidInputError, match="key 'state' maps to 3"):
        robocache.Loader([{"dataset": robomimic_file, "keys": {"state": 3}}], batch_size=4, device="cpu")
    with pytest.raises(robocache.InvalidInputError, match="constant"):
        robocache.Loader([{"dataset": robomimic_file, "keys": {"state": {"const": 1}}}], batch_size=4, device="cpu")


def test_statistics_per_group_are_merged_and_saved_with_the_state(robomimic_file):
    fixtures = _fixtures()
    if fixtures is None:
        pytest.skip("no dataset fixtures (the tests copied outside a checkout)")
    deltas = {"action": [0.0, 0.1, 0.2, 0.3]}
    members = [
        {"dataset": robomimic_file, "name": "lift", "windows": {"seq_length": 4}, "keys": {"action": "actions"}},
        {"dataset": fixtures / "lerobot" / "av1", "name": "aloha", "delta_timestamps": deltas,
         "keys": {"action": "action"}},
    ]
    mixture = robocache.Loader(members, batch_size=8, epoch_windows=32, device="cpu")
    alone = mixture.statistics()
    assert set(alone) == {"lift", "aloha"}
    together = mixture.statistics({"arm": ["lift", "aloha"]})["arm"]["streams"]["action"]
    parts = [alone[name]["streams"]["action"] for name in ("lift", "aloha")]
    # Counts add; means are count-weighted; extremes are the extremes' (the
    # Rust tests compare variances and percentiles with the concatenation's).
    assert together["count"] == sum(p["count"] for p in parts)
    for c in range(7):
        mean = sum(p["count"] * p["mean"][c] for p in parts) / together["count"]
        assert together["mean"][c] == pytest.approx(mean, rel=1e-12)
        assert together["min"][c] == min(p["min"][c] for p in parts)
    state = mixture.state_dict()
    assert state["statistics"]["arm"]["streams"]["action"]["count"] == together["count"]
    again = robocache.Loader(members, batch_size=8, epoch_windows=32, device="cpu")
    again.load_state_dict(state)
    assert again.saved_statistics == state["statistics"]
    with pytest.raises(robocache.InvalidInputError, match="names no member"):
        mixture.statistics({"arm": ["nope"]})
    # Datasets of different widths are not one embodiment: one group refuses them.
    rlds = robocache.open(fixtures / "rlds" / "robocache_fixture_dict" / "1.0.0", rate_hz=10.0)
    mixed = robocache.Loader([members[0], {"dataset": rlds, "windows": {"seq_length": 4},
                                           "keys": {"action": "action/world_vector"}}],
                             batch_size=8, epoch_windows=32, device="cpu")
    with pytest.raises(robocache.DatasetError, match="normalisation group `all`: stream `action`"):
        mixed.statistics({"all": [0, 1]})


def test_cameras_of_different_members_come_at_one_size(robomimic_file):
    """Each member crops and resizes its own cameras on the loader's device
    (its frame_crop / frame_size): the mixture's camera key has one size."""
    fixtures = _fixtures()
    if fixtures is None:
        pytest.skip("no dataset fixtures (the tests copied outside a checkout)")
    deltas = {"action": [0.0, 0.1], "observation.images.front": [0.0], "observation.images.wrist": [0.0]}
    mixture = robocache.Loader([
        {"dataset": fixtures / "lerobot" / "av1", "weight": 1.0, "delta_timestamps": deltas,
         "keys": {"action": "action", "camera": "observation.images.front"}, "frame_size": (16, 16)},
        {"dataset": fixtures / "lerobot" / "images", "weight": 1.0, "delta_timestamps": deltas,
         "keys": {"action": "action", "camera": "observation.images.wrist"},
         "frame_crop": (0, 8, 32, 32), "frame_size": (16, 16)},
    ], batch_size=8, epoch_windows=16, seed=1, device="cpu", return_uint8=True)
    for batch in mixture:
        camera = np.asarray(batch["camera"])
        assert camera.shape[0] == len(batch["dataset_index"]) and camera.shape[-2:] == (16, 16), camera.shape
        assert camera.dtype == np.uint8
        assert not np.asarray(batch["camera_dim_is_pad"]).any()


def test_image_streams_of_step_windows_come_at_the_lerobot_members_size():
    """An RLDS camera read by step windows, converted on the loader's device
    (frame_size, channels first, uint8), mixes with a LeRobot camera; its
    rows equal convert_frames of the same windows' raw frames."""
    fixtures = _fixtures()
    if fixtures is None:
        pytest.skip("no dataset fixtures (the tests copied outside a checkout)")
    rlds = robocache.open(fixtures / "rlds" / "robocache_fixture_dict" / "1.0.0", rate_hz=10.0)
    deltas = {"action": [0.0, 0.1], "observation.images.wrist": [0.0, 0.1]}
    lerobot = {"dataset": fixtures / "lerobot" / "images", "delta_timestamps": deltas,
               "keys": {"camera": "observation.images.wrist"}, "return_uint8": True, "frame_size": (16, 16)}

    def mixture_of(rlds_member):
        return robocache.Loader([{"dataset": rlds, "windows": {"seq_length": 2}, **rlds_member}, lerobot],
                                batch_size=8, epoch_windows=16, seed=3, device="cpu")

    mixture = mixture_of({"keys": {"camera": "observation/image"}, "frame_size": (16, 16), "frame_layout": "chw",
                          "frame_dtype": "uint8"})
    raw = mixture_of({"keys": {"raw": "observation/image"}})  # the same windows, frames as stored
    seen = 0
    for batch, other in zip(mixture, raw):
        assert np.array_equal(np.asarray(batch["window_index"]), np.asarray(other["window_index"]))
        camera = np.asarray(batch["camera"])
        assert camera.shape[1:] == (2, 3, 16, 16) and camera.dtype == np.uint8, camera.shape
        rows = np.asarray(batch["dataset_index"]) == 0
        seen += rows.sum()
        frames = np.asarray(other["raw"])[rows]
        want = robocache.convert_frames(np.ascontiguousarray(frames.reshape(-1, *frames.shape[2:])), (16, 16),
                                        layout="chw", dtype="uint8")
        assert np.array_equal(camera[rows].reshape(-1, 3, 16, 16), np.asarray(want))
    assert seen > 0
    with pytest.raises(robocache.InvalidInputError, match="frame_layout"):
        robocache.Loader(rlds, ["observation/image"], windows={"seq_length": 2}, batch_size=4, frame_layout="nhwc")


def test_a_mixture_sharded_by_episode_reads_each_ranks_own_episodes(robomimic_file):
    """``shard_by="episodes"``: each rank's members hold only their episodes,
    and the mixture draws every rank's windows from those (no "not resident"
    error); the two ranks' episodes do not overlap, and together they cover
    every episode of each member."""
    plain = robocache.Loader(robomimic_file, ["actions"], windows={"seq_length": 4}, batch_size=64, shuffle=False,
                             device="cpu", rank=0, world_size=1)
    episode_of = {}
    for batch in plain:
        episode_of.update(zip(np.asarray(batch["sample_index"]).tolist(), np.asarray(batch["episode_index"]).tolist()))
    episodes = {}
    for rank in range(2):
        mixture = robocache.Loader([
            {"dataset": robomimic_file, "weight": 1.0, "windows": {"seq_length": 4}, "keys": {"action": "actions"}},
            {"dataset": robomimic_file, "weight": 2.0, "windows": {"seq_length": 4}, "keys": {"action": "obs/joint_pos"}},
        ], batch_size=8, epoch_windows=96, seed=5, device="cpu", rank=rank, world_size=2, shard_by="episodes")
        seen = set()
        for batch in mixture:
            for member, window in zip(np.asarray(batch["dataset_index"]), np.asarray(batch["window_index"])):
                seen.add((int(member), episode_of[int(window)]))
        assert seen, f"rank {rank} read nothing"
        episodes[rank] = seen
    assert not episodes[0] & episodes[1], "the ranks' episodes overlap"
    assert {e for m, e in episodes[0] | episodes[1] if m == 0} == set(range(12))


def test_a_member_deploys_with_the_spec_the_mixture_trained_it_with(robomimic_file):
    """``mixture.spec(member)``: the mixture's names and widths, the member's
    group statistics; a ``Live`` of it gives the member's rows of the
    mixture's batches, ``{stream}_dim_is_pad`` included."""
    windows = {"hz": 20, "history": 2, "horizon": 3, "causal": True}
    arm = robocache.Loader(robomimic_file, ["obs/joint_pos", "obs/gripper"], windows=windows, batch_size=8,
                           shuffle=False, device="cpu")
    lift = robocache.Loader(robomimic_file, ["actions"], windows=windows, batch_size=8, shuffle=False, device="cpu")
    mixture = robocache.MixtureLoader(
        [{"loader": arm, "keys": {"state": ["obs/joint_pos", "obs/gripper"]}, "name": "arm"},
         {"loader": lift, "keys": {"state": "actions", "flag": {"constant": [1.0]}}, "name": "lift"}],
        batch_size=16, epoch_windows=48, seed=2)
    statistics = mixture.statistics()
    spec = mixture.spec("lift")
    mixed = spec.to_dict()["mixture"]
    assert mixed["member"] == "lift" and [s["name"] for s in mixed["streams"]] == ["state", "flag"]
    assert mixed["streams"][0]["width"] == 8 and mixed["statistics"] == statistics["lift"]
    with pytest.raises(robocache.InvalidInputError, match="no member 'nope'"):
        mixture.spec("nope")
    batch = next(iter(mixture))
    rows = np.flatnonzero(np.asarray(batch["dataset_index"]) == 1)
    assert len(rows) > 0
    all_windows = next(iter(robocache.Loader(robomimic_file, ["actions"], windows=windows, batch_size=100000,
                                             shuffle=False, device="cpu")))
    h5py = pytest.importorskip("h5py")
    with h5py.File(robomimic_file, "r") as f:
        for r in rows:
            w = int(np.asarray(batch["window_index"])[r])
            episode, anchor = int(all_windows["episode_index"][w]), float(all_windows["anchor"][w])
            live = robocache.Live(spec, device="cpu")
            assert live.streams == ["state", "flag"] and live.pushed_streams == ["actions"]
            actions = f[f"data/demo_{episode}/actions"][()]
            for i, row in enumerate(actions):
                if i / 20.0 <= anchor:
                    live.push("actions", i / 20.0, row)
            window = live.window(anchor)
            for key in ("state", "state_is_pad", "state_dim_is_pad", "flag", "flag_is_pad", "flag_dim_is_pad"):
                want = np.asarray(batch[key])[r]
                want = want[:3] if key in ("state", "state_is_pad", "flag", "flag_is_pad") else want
                assert np.array_equal(np.asarray(window[key])[0], want), (key, r)

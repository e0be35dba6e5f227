"""ALOHA / ACT episodes written by ACT's recording code, trained on through
robocache.Loader: each sample's camera frames equal what ACT's
EpisodicDataset reads (h5py and cv2.imdecode), its state and action chunk
equal the file's rows, padded past the episode's end."""

import importlib.util
import pathlib

import numpy as np
import pytest

import robocache

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "robocache-datasets" / "tests" / "fixtures"
CAMERAS = ["cam_high", "cam_left_wrist"]
CHUNK = 4


def writer():
    spec = importlib.util.spec_from_file_location("make_aloha_fixtures", FIXTURES / "make_aloha_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def act_episodes(tmp_path_factory):
    if not FIXTURES.is_dir():
        pytest.skip("the fixture writers are beside the checkout's crates, not here")
    pytest.importorskip("cv2")
    directory = tmp_path_factory.mktemp("act") / "episodes"
    writer().write_real(str(directory), 3, 9, True)
    return directory


def test_open_lists_acts_streams_at_50_hz(act_episodes):
    episodes = robocache.open(act_episodes)
    assert episodes.format == "aloha"
    assert len(episodes) == 3
    assert set(episodes.streams) >= {"action", "base_action", "observations/qpos", "observations/effort",
                                     "observations/images/cam_high", "observations/images/cam_left_wrist"}
    assert [e["name"] for e in episodes.episodes] == ["episode_0", "episode_1", "episode_2"]


def test_loader_samples_equal_acts_reading(act_episodes):
    cv2 = pytest.importorskip("cv2")
    h5py = pytest.importorskip("h5py")
    deltas = {f"observations/images/{cam}": [0.0] for cam in CAMERAS}
    deltas["observations/qpos"] = [0.0]
    deltas["action"] = [k / 50.0 for k in range(CHUNK)]
    # delta_timestamps batches are LeRobot's: frames channels first (uint8 here, as asked), every frame a sample.
    loader = robocache.Loader(act_episodes, list(deltas), delta_timestamps=deltas, batch_size=27, device="cpu",
                              shuffle=False, return_uint8=True)
    batch = next(iter(loader))
    assert tuple(batch["observations/images/cam_high"].shape) == (27, 1, 3, 48, 64)
    seen = 0
    for i in range(27):
        # Unshuffled, LeRobot's windows: sample i is frame i of the episodes in order (9 frames each).
        episode, step = divmod(i, 9)
        with h5py.File(act_episodes / f"episode_{episode}.hdf5", "r") as root:
            for cam in CAMERAS:
                frame = cv2.imdecode(root[f"/observations/images/{cam}"][step], 1)
                np.testing.assert_array_equal(np.asarray(batch[f"observations/images/{cam}"][i, 0]), frame.transpose(2, 0, 1))
            np.testing.assert_array_equal(np.asarray(batch["observations/qpos"][i, 0]), root["/observations/qpos"][step])
            action = root["/action"][()]
        rows = action[step:step + CHUNK]
        pad = np.asarray(batch["action_is_pad"][i])
        assert list(pad) == [k >= len(rows) for k in range(CHUNK)]
        np.testing.assert_array_equal(np.asarray(batch["action"][i, : len(rows)]), rows)
        seen += 1
    assert seen == 27

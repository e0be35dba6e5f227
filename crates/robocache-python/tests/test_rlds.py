"""RLDS builder directories written by tensorflow-datasets (the committed
fixtures of robocache-datasets), opened and batched from Python without
TensorFlow, compared with what TFDS itself returned for them."""

import pathlib

import numpy as np
import pytest

import robocache

# In the checkout beside this crate; the GPU bundle carries these tests
# inside a checkout, so look in every folder above for the crate's fixtures.
FIXTURES = next(
    (p / "crates" / "robocache-datasets" / "tests" / "fixtures" / "rlds"
     for p in pathlib.Path(__file__).resolve().parents
     if (p / "crates" / "robocache-datasets" / "tests" / "fixtures" / "rlds").is_dir()),
    pathlib.Path("no-rlds-fixtures"),
)
DICT = FIXTURES / "robocache_fixture_dict" / "1.0.0"

if not FIXTURES.is_dir():  # the Python tests copied outside a checkout
    pytest.skip(f"no RLDS fixtures at {FIXTURES}", allow_module_level=True)


def test_open_reads_the_episode_model_of_an_rlds_directory():
    dataset = robocache.open(DICT, rate_hz=10.0)
    assert dataset.format == "rlds" and len(dataset) == 6
    assert dataset.info["splits"] == ["train", "val"]
    assert {"observation/image", "action/world_vector", "is_first"} <= set(dataset.streams)
    assert dataset.episodes[0]["instruction"]
    assert len(robocache.open(DICT, rate_hz=10.0, split="val")) == 2
    # Not in the Open X-Embodiment rate table: the error says how to give the rate.
    with pytest.raises(robocache.Error, match="rate_hz"):
        robocache.open(DICT)


def test_loader_batches_equal_tfds_frames():
    torch = pytest.importorskip("torch")
    expected = np.load(FIXTURES / "expected" / "robocache_fixture_dict.npz")
    loader = robocache.Loader(
        robocache.open(DICT, rate_hz=10.0),
        ["observation/image", "action/world_vector"],
        windows={"seq_length": 4, "frame_stack": 2},
        batch_size=8,
        device="cpu",
        shuffle=False,
        rank=0,
        world_size=1,
    )
    checked = 0
    for batch in loader:
        images = batch["observation/image"]
        assert images.dtype == torch.uint8 and tuple(images.shape[1:]) == (5, 24, 32, 3)
        for i in range(images.shape[0]):
            if bool(batch["observation/image_is_pad"][i].any()):
                continue
            episode = int(batch["episode_index"][i])
            step = round(float(batch["anchor"][i]) * 10.0)
            theirs = expected[f"train/{episode}/steps/observation/image"][step - 1 : step + 4]
            np.testing.assert_array_equal(images[i].numpy(), theirs)
            actions = expected[f"train/{episode}/steps/action/world_vector"][step - 1 : step + 4]
            np.testing.assert_array_equal(batch["action/world_vector"][i].numpy(), actions)
            checked += 1
    assert checked > 10


def test_cuda_loader_on_rlds_equals_cpu(cuda):
    torch = pytest.importorskip("torch")
    dataset = robocache.open(DICT, rate_hz=10.0)
    streams = ["observation/image", "observation/depth", "action/world_vector", "is_first"]

    def make(device):
        return robocache.Loader(dataset, streams, windows={"hz": 20.0, "history": 2, "horizon": 4}, batch_size=8,
                                device=device, seed=1, rank=0, world_size=1)

    batches = 0
    for a, b in zip(make("cpu"), make(cuda)):
        assert b["observation/image"].device.type == "cuda"
        for name in streams:
            assert torch.equal(a[name], b[name].cpu()), name
            assert torch.equal(a[f"{name}_is_pad"], b[f"{name}_is_pad"].cpu()), name
        batches += 1
    assert batches > 2


def test_write_index_beside_the_shards_and_reopen_through_it(tmp_path):
    import shutil

    version = tmp_path / "1.0.0"
    shutil.copytree(DICT, version)
    dataset = robocache.open(version, rate_hz=10.0)
    written = dataset.write_index()
    assert written == str(version / "robocache-index.train.json")
    again = robocache.open(version, rate_hz=10.0)
    assert again.info == dataset.info
    report, want = again.verify(threads=2), dataset.verify(threads=2)
    assert report["problems"] == [] and report["rows"] == want["rows"] and report["bytes"] == want["bytes"]
    elsewhere = dataset.write_index(tmp_path / "copy.json")
    assert pathlib.Path(elsewhere).read_bytes() == pathlib.Path(written).read_bytes()
    lerobot = FIXTURES.parent / "lerobot" / "v21"
    with pytest.raises(robocache.DatasetError, match="only RLDS"):
        robocache.open(lerobot).write_index()

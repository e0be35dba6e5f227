"""Zarr replay buffers (diffusion policy's PushT, UMI's JPEG XL cameras),
read by zarr-python itself and by robocache.Loader: every step of every
array equal (JPEG XL frames within one level: jxl-oxide against libjxl)."""

import pathlib

import numpy as np
import pytest

import robocache

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "robocache-datasets" / "tests" / "fixtures" / "zarr"


def zarr_arrays(store_path):
    zarr = pytest.importorskip("zarr")
    if int(zarr.__version__.split(".")[0]) >= 3:
        pytest.skip("these fixtures are read with zarr-python 2 (format 3's reading is committed beside them)")
    try:
        from imagecodecs.numcodecs import register_codecs

        register_codecs()
    except ImportError:
        pytest.skip("imagecodecs is not installed")
    store = zarr.ZipStore(str(store_path), mode="r") if store_path.suffix == ".zip" else str(store_path)
    root = zarr.open_group(store=store, mode="r")
    return {key: root["data"][key][...] for key in root["data"].array_keys()}, root["meta"]["episode_ends"][...]


@pytest.mark.parametrize("name", ["pusht_v2.zarr", "pusht_v2.zarr.zip", "umi_v2.zarr.zip"])
def test_loader_steps_equal_zarr_pythons_arrays(name):
    if not FIXTURES.is_dir():
        pytest.skip("the fixtures are beside the checkout's crates, not here")
    arrays, ends = zarr_arrays(FIXTURES / name)
    dataset = robocache.open(FIXTURES / name)
    assert dataset.format == "zarr"
    assert [e["len"] for e in dataset.episodes] == list(np.diff(np.concatenate([[0], ends])))
    keys = sorted(arrays)
    total = int(ends[-1])
    loader = robocache.Loader(dataset, keys, windows={"seq_length": 1}, batch_size=total, shuffle=False, device="cpu")
    batch = next(iter(loader))
    for key in keys:
        read = np.asarray(batch[key])[:, 0]
        expected = arrays[key][:total]
        assert read.shape == expected.shape, key
        if key.endswith("_rgb"):
            assert np.abs(read.astype(int) - expected.astype(int)).max() <= 1, key
        else:
            np.testing.assert_array_equal(read, expected, err_msg=key)

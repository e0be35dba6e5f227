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


def sequence_sampler_windows(arrays, ends, sequence_length, pad_before, pad_after):
    """Diffusion policy's SequenceSampler over a replay buffer, as its
    create_indices and sample_sequence describe it (written out here: the
    diffusion_policy package is not on PyPI): every start from -pad_before
    to len - sequence_length + pad_after (pads clamped to sequence_length - 1),
    the rows inside the episode, the first/last row repeated outside."""
    pad_before = min(max(pad_before, 0), sequence_length - 1)
    pad_after = min(max(pad_after, 0), sequence_length - 1)
    windows = []
    begin = 0
    for end in ends:
        length = int(end) - begin
        for start in range(-pad_before, length - sequence_length + pad_after + 1):
            steps = np.clip(np.arange(start, start + sequence_length), 0, length - 1) + begin
            real = (np.arange(start, start + sequence_length) >= 0) & (np.arange(start, start + sequence_length) < length)
            windows.append(({key: value[steps] for key, value in arrays.items()}, real))
        begin = int(end)
    return windows


# The fixture's episodes have 12, 13 and 15 steps: windows of 16 exist only
# with padding, of 4 without.
@pytest.mark.parametrize("length, pads", [(4, (0, 0)), (4, (1, 3)), (16, (1, 7)), (16, (3, 0)), (16, (0, 15)),
                                          (16, (20, 20)), (16, (0, 0))])
def test_sequence_windows_equal_diffusion_policys_sequence_sampler(length, pads):
    if not FIXTURES.is_dir():
        pytest.skip("the fixtures are beside the checkout's crates, not here")
    arrays, ends = zarr_arrays(FIXTURES / "pusht_v2.zarr")
    pad_before, pad_after = pads
    theirs = sequence_sampler_windows(arrays, ends, length, pad_before, pad_after)
    keys = sorted(arrays)
    windows = {"sequence_length": length, "pad_before": pad_before, "pad_after": pad_after}
    if not theirs:
        # SequenceSampler would be empty; robocache says why.
        with pytest.raises(robocache.DatasetError, match="no episode is long enough .* has 15 steps"):
            robocache.Loader(FIXTURES / "pusht_v2.zarr", keys, windows=windows, batch_size=1, device="cpu")
        return
    loader = robocache.Loader(FIXTURES / "pusht_v2.zarr", keys, windows=windows, batch_size=len(theirs),
                              shuffle=False, device="cpu")
    assert len(loader) == 1
    batch = next(iter(loader))
    assert len(np.asarray(batch["sample_index"])) == len(theirs)
    for i, (values, real) in enumerate(theirs):
        for key in keys:
            np.testing.assert_array_equal(np.asarray(batch[key])[i], values[key], err_msg=f"window {i} {key}")
            np.testing.assert_array_equal(np.asarray(batch[f"{key}_is_pad"])[i], ~real, err_msg=f"window {i} {key}")


def write_timed_buffer(path, times, ends):
    """A replay buffer as diffusion policy's real-robot recorder leaves it:
    `data/timestamp` (seconds, f64) beside the data, here a copy of the
    times as a stream (`clock_copy`) and an action."""
    zarr = pytest.importorskip("zarr")
    if int(zarr.__version__.split(".")[0]) >= 3:
        pytest.skip("written with zarr-python 2's API")
    root = zarr.open_group(str(path), mode="w")
    data, meta = root.create_group("data"), root.create_group("meta")
    data.array("timestamp", np.asarray(times, dtype=np.float64), chunks=(64,))
    data.array("clock_copy", np.asarray(times, dtype=np.float64)[:, None], chunks=(64, 1))
    data.array("action", np.arange(len(times) * 2, dtype=np.float32).reshape(-1, 2), chunks=(64, 2))
    meta.array("episode_ends", np.asarray(ends, dtype=np.int64))


def test_a_timestamp_array_is_the_replay_buffers_clock(tmp_path):
    # Two episodes recorded near 10 Hz with jitter and a 0.4 s stall, on a
    # wall clock: time windows must follow these times, not i / rate.
    rng = np.random.default_rng(0)
    steps = np.concatenate([[0.0], np.cumsum(0.1 + rng.uniform(-0.03, 0.03, 59))])
    steps[30:] += 0.4
    times = np.concatenate([1000.0 + steps[:25], 2000.0 + steps[25:]])
    path = tmp_path / "timed.zarr"
    write_timed_buffer(path, times, [25, 60])
    dataset = robocache.open(path)
    assert [e["len"] for e in dataset.episodes] == [25, 35]
    np.testing.assert_allclose([e["duration_s"] for e in dataset.episodes],
                               [times[24] - times[0], times[59] - times[25]])
    # Time windows on a 20 Hz policy clock: the copy of the clock, linearly
    # resampled, reads back each window's own times where they are inside
    # the episode.
    loader = robocache.Loader(path, ["clock_copy"], windows={"hz": 20.0, "history": 2, "horizon": 4},
                              batch_size=16, shuffle=False, device="cpu")
    checked = 0
    for batch in loader:
        anchors = np.asarray(batch["anchor"])
        values = np.asarray(batch["clock_copy"])[..., 0]
        pad = np.asarray(batch["clock_copy_is_pad"])
        for b, anchor in enumerate(anchors):
            wanted = anchor + (np.arange(values.shape[1]) - 2) / 20.0
            inside = ~pad[b]
            # f32 values keep about 1e-4 s at 2000 s; a clock of i / rate
            # would be off by the jitter (up to 30 ms) and the stall (0.4 s).
            atol = 1e-9 if values.dtype == np.float64 else 1e-3
            np.testing.assert_allclose(values[b][inside], wanted[inside], rtol=0, atol=atol)
            checked += int(inside.sum())
    assert checked > 100


def test_timestamps_that_do_not_increase_are_an_error_naming_episode_and_row(tmp_path):
    times = np.arange(20, dtype=np.float64) * 0.1
    times[13] = times[12]
    path = tmp_path / "stalled.zarr"
    write_timed_buffer(path, times, [10, 20])
    with pytest.raises(robocache.DatasetError, match=r"data/timestamp.*episode 1, row 13: 1\.2.* after 1\.2"):
        robocache.open(path)

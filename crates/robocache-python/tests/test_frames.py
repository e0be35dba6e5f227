"""Camera frames cropped, resized and laid out (``robocache.convert_frames``
and the loader's ``frame_size``/``frame_crop``) against Pillow, the
reference: its bilinear resize of the crop, bit for bit."""

import pathlib

import numpy as np
import pytest

import robocache

Image = pytest.importorskip("PIL.Image")
PILLOW_MAJOR = int(Image.__version__.split(".")[0])


def pillow(frame, size, crop=None):
    """Pillow's bilinear resize of the crop, rows first, then columns.

    Two calls (each resizes one axis) give that order in every Pillow
    version; Pillow 10 to 12 give it in one call too (13 runs the columns
    first when the height shrinks much more than the width), which is
    checked where the installed Pillow is one of those."""
    height, width = size
    if crop is not None:
        top, left, h, w = crop
        frame = frame[top:top + h, left:left + w]
    image = Image.fromarray(np.ascontiguousarray(frame))
    rows = image.resize((width, image.height), Image.BILINEAR)
    both = np.asarray(rows.resize((width, height), Image.BILINEAR))
    if PILLOW_MAJOR < 13:
        np.testing.assert_array_equal(np.asarray(image.resize((width, height), Image.BILINEAR)), both)
    return both


@pytest.mark.parametrize("seed", range(6))
def test_resize_equals_pillow(seed):
    rng = np.random.default_rng(seed)
    n, h, w = int(rng.integers(1, 4)), int(rng.integers(1, 90)), int(rng.integers(1, 120))
    frames = rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
    size = (int(rng.integers(1, 100)), int(rng.integers(1, 130)))
    crop = None
    if seed % 2:
        ch, cw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
        crop = (int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1)), ch, cw)
    got = robocache.convert_frames(frames, size, crop=crop)
    want = np.stack([pillow(f, size, crop) for f in frames])
    assert got.dtype == np.uint8 and got.shape == (n, *size, 3)
    np.testing.assert_array_equal(got, want)
    # Channels first, float32: the same levels moved and divided by 255.
    floats = robocache.convert_frames(frames, size, crop=crop, layout="chw", dtype="float32")
    assert floats.dtype == np.float32 and floats.shape == (n, 3, *size)
    np.testing.assert_array_equal(floats, np.moveaxis(want, -1, 1).astype(np.float32) / np.float32(255))


def test_a_camera_frame_to_a_policy_input_equals_pillow():
    """640x480 to a centre crop of 480x480 resized to 224x224."""
    rng = np.random.default_rng(7)
    frames = rng.integers(0, 256, (2, 480, 640, 3), dtype=np.uint8)
    got = robocache.convert_frames(frames, (224, 224), crop=(0, 80, 480, 480))
    np.testing.assert_array_equal(got, np.stack([pillow(f, (224, 224), (0, 80, 480, 480)) for f in frames]))
    # A crop alone keeps its size and copies the pixels.
    np.testing.assert_array_equal(robocache.convert_frames(frames, crop=(10, 20, 30, 40)), frames[:, 10:40, 20:60])


def test_bad_frames_and_resizes_are_clear_errors():
    frames = np.zeros((1, 7, 9, 3), np.uint8)
    with pytest.raises(robocache.InvalidInputError, match="past the 9x7 frame"):
        robocache.convert_frames(frames, (2, 2), crop=(0, 8, 2, 2))
    with pytest.raises(robocache.InvalidInputError, match="no pixels"):
        robocache.convert_frames(frames, (0, 3))
    with pytest.raises(robocache.InvalidInputError, match=r"\[N, H, W, 3\]"):
        robocache.convert_frames(np.zeros((1, 7, 9), np.uint8), (2, 2))
    with pytest.raises(robocache.DTypeError, match="RGB frames"):
        robocache.convert_frames(np.zeros((1, 7, 9, 3), np.float32), (2, 2))
    with pytest.raises(robocache.InvalidInputError, match="layout"):
        robocache.convert_frames(frames, (2, 2), layout="nhwc")


FIXTURES = next(
    (p / "crates" / "robocache-datasets" / "tests" / "fixtures" / "lerobot"
     for p in pathlib.Path(__file__).resolve().parents
     if (p / "crates" / "robocache-datasets" / "tests" / "fixtures" / "lerobot").is_dir()),
    None,
)


@pytest.mark.skipif(FIXTURES is None, reason="the Python tests copied outside a checkout")
@pytest.mark.parametrize("root", ["av1", "images"])
def test_loader_crops_and_resizes_every_camera_as_pillow(root, device="cpu"):
    """LeRobot batches with ``frame_crop``/``frame_size``: each frame is
    Pillow's resize of the crop of the frame the plain loader gives."""
    check_loader_resize(root, device)


def check_loader_resize(root, device):
    cameras = ["observation.images.front", "observation.images.wrist"]
    deltas = {"observation.images.front": [-0.1, 0.0], "observation.images.wrist": [0.0, 0.1]}
    common = dict(delta_timestamps=deltas, batch_size=8, shuffle=False, device=device, rank=0, world_size=1,
                  return_uint8=True)
    plain = robocache.Loader(FIXTURES / root, cameras, **common)
    small = robocache.Loader(FIXTURES / root, cameras, frame_size=(20, 24), frame_crop=(2, 8, 28, 32), **common)
    for a, b in zip(plain, small):
        for key in cameras:
            full = np.moveaxis(np.asarray(a[key].cpu() if hasattr(a[key], "cpu") else a[key]), 2, -1)
            got = np.asarray(b[key].cpu() if hasattr(b[key], "cpu") else b[key])
            assert got.shape == (*full.shape[:2], 3, 20, 24), (key, got.shape)
            want = np.stack([np.stack([pillow(f, (20, 24), (2, 8, 28, 32)) for f in window]) for window in full])
            np.testing.assert_array_equal(got, np.moveaxis(want, -1, 2), err_msg=key)
    with pytest.raises(robocache.InvalidInputError, match="past the 48x32 frame"):
        robocache.Loader(FIXTURES / root, cameras, frame_crop=(0, 40, 8, 16), **common)


def test_cuda_frames_equal_cpu(cuda):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    frames = rng.integers(0, 256, (5, 480, 640, 3), dtype=np.uint8)
    for size, crop, layout, dtype in [((224, 224), (0, 80, 480, 480), "chw", "float32"), ((96, 128), None, "hwc", "uint8"),
                                      (None, None, "chw", "float32"), ((960, 1280), None, "hwc", "uint8")]:
        want = robocache.convert_frames(frames, size, crop=crop, layout=layout, dtype=dtype)
        got = robocache.convert_frames(torch.from_numpy(frames).to(cuda), size, crop=crop, layout=layout, dtype=dtype)
        assert got.device.type == "cuda"
        assert np.array_equal(got.cpu().numpy(), want), (size, crop, layout, dtype)


@pytest.mark.skipif(FIXTURES is None, reason="the Python tests copied outside a checkout")
@pytest.mark.parametrize("root", ["av1", "h264", "images"])
def test_cuda_loader_crops_and_resizes_as_pillow(root, cuda):
    pytest.importorskip("torch")
    check_loader_resize(root, cuda)


def check_device_frame_cache(root, device):
    """A loader with ``device_frame_cache_bytes`` gives the batches of one
    without it, bit for bit, in its first epoch (which fills the cache) and
    its second (served from it: no new misses)."""
    cameras = ["observation.images.front", "observation.images.wrist"]
    deltas = {"observation.images.front": [-0.1, 0.0], "observation.images.wrist": [0.0, 0.2]}
    common = dict(delta_timestamps=deltas, batch_size=8, shuffle=True, seed=4, device=device, rank=0, world_size=1,
                  frame_size=(20, 24), frame_crop=(2, 8, 28, 32), workers=3)
    plain = robocache.Loader(FIXTURES / root, cameras, **common)
    cached = robocache.Loader(FIXTURES / root, cameras, device_frame_cache_bytes=1 << 24, **common)
    assert plain.telemetry()["device_frame_cache"] is None
    misses = None
    for epoch in range(2):
        for a, b in zip(plain, cached):
            for key in cameras:
                want = np.asarray(a[key].cpu() if hasattr(a[key], "cpu") else a[key])
                got = np.asarray(b[key].cpu() if hasattr(b[key], "cpu") else b[key])
                assert got.dtype == np.float32 and got.shape == want.shape, (key, got.shape)
                np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"{epoch} {key}")
                pads = [np.asarray(x.cpu() if hasattr(x, "cpu") else x) for x in (a[f"{key}_is_pad"], b[f"{key}_is_pad"])]
                np.testing.assert_array_equal(*pads)
        usage = cached.telemetry()["device_frame_cache"]
        frames = 2 * sum(e["len"] for e in robocache.open(FIXTURES / root).episodes)  # both cameras
        assert usage["frames"] == frames and usage["bytes"] == frames * 20 * 24 * 3, usage
        if epoch == 0:
            misses = usage["misses"]
            assert misses == frames, usage  # each frame decoded once: workers wait for one another's
        else:
            assert usage["misses"] == misses and usage["hit_rate"] > 0.5, usage


@pytest.mark.skipif(FIXTURES is None, reason="the Python tests copied outside a checkout")
def test_device_frame_cache_gives_the_batches_it_would_decode():
    check_device_frame_cache("av1", "cpu")


@pytest.mark.skipif(FIXTURES is None, reason="the Python tests copied outside a checkout")
@pytest.mark.parametrize("root", ["av1", "h264"])
def test_cuda_device_frame_cache_gives_the_batches_it_would_decode(root, cuda):
    pytest.importorskip("torch")
    check_device_frame_cache(root, cuda)


def test_loader_frame_arguments_are_checked():
    root = FIXTURES / "av1" if FIXTURES is not None else None
    if root is None:
        pytest.skip("the Python tests copied outside a checkout")
    common = dict(delta_timestamps={"observation.images.front": [0.0]}, batch_size=2, device="cpu", rank=0,
                  world_size=1)
    with pytest.raises(robocache.InvalidInputError, match=r"frame_crop is \(top, left, height, width\)"):
        robocache.Loader(root, ["observation.images.front"], frame_crop=(0, 0, 8), **common)
    with pytest.raises(robocache.InvalidInputError, match=r"frame_size is \(height, width\)"):
        robocache.Loader(root, ["observation.images.front"], frame_size=224, **common)
    with pytest.raises(robocache.InvalidInputError, match="device_frame_cache_bytes"):
        robocache.Loader(root, ["observation.images.front"], device_frame_cache_bytes=-1, **common)
    with pytest.raises(robocache.InvalidInputError, match="device_frame_cache_bytes"):
        robocache.Loader(root, ["action"], windows={"seq_length": 2}, batch_size=2, device="cpu", rank=0,
                         world_size=1, device_frame_cache_bytes=1 << 20)
    with pytest.raises(robocache.InvalidInputError, match=r"crop is \(top, left, height, width\)"):
        robocache.convert_frames(np.zeros((1, 4, 4, 3), np.uint8), (2, 2), crop=(0, 0, 2))

"""Per-sample augmentation in the loader (``augment=``): reproducible by
(seed, epoch, sample), its evaluation transform in ``eval()``, LeRobot's
``ImageTransformsConfig`` (dataclass or dict) and the presets accepted,
bad configs refused with the field named; on CUDA the same frames as on
the CPU (up to a level where gamma or noise is drawn)."""

import dataclasses
import json
from typing import Any, Dict, Tuple

import numpy as np
import pytest

import robocache

torch = pytest.importorskip("torch")

CAMERA = "obs/agentview_image"


@pytest.fixture(scope="module")
def camera_file(tmp_path_factory):
    """6 demos of 20-30 steps at 20 Hz with a 24x32 RGB camera (h5py)."""
    h5py = pytest.importorskip("h5py")
    path = tmp_path_factory.mktemp("augment") / "camera.hdf5"
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift", "env_kwargs": {"control_freq": 20}})
        total = 0
        for i in range(6):
            n = int(rng.integers(20, 30))
            demo = data.create_group(f"demo_{i}")
            demo.attrs["num_samples"] = n
            demo.create_dataset("actions", data=rng.standard_normal((n, 7)).astype(np.float32))
            obs = demo.create_group("obs")
            obs.create_dataset(CAMERA.split("/")[1], data=rng.integers(0, 256, (n, 24, 32, 3), dtype=np.uint8))
            total += n
        data.attrs["total"] = total
    return str(path)


def make(path, **kwargs):
    options = dict(windows={"hz": 20, "history": 1, "horizon": 2}, batch_size=8, device="cpu", seed=5, workers=1)
    options.update(kwargs)
    return robocache.Loader(path, ["actions", CAMERA], **options)


def frames(loader, epoch=0, batches=3):
    loader.set_epoch(epoch)
    return [b[CAMERA].clone() for _, b in zip(range(batches), loader)]


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def test_augmentation_is_reproducible_and_evaluation_takes_it_off(camera_file):
    plain = frames(make(camera_file))
    loader = make(camera_file, augment="lerobot")
    first = frames(loader)
    assert same(first, frames(make(camera_file, augment="lerobot", workers=3))), "workers change nothing"
    assert same(first, frames(loader, epoch=0)), "the same epoch again"
    assert not same(first, frames(loader, epoch=1)), "each epoch its own draws"
    assert not same(first, plain)
    assert loader.training
    assert loader.eval() is loader and not loader.training
    assert same(frames(loader), plain), "evaluation: LeRobot's transforms have no evaluation counterpart"
    loader.train()
    assert same(frames(loader), first)


def test_presets_crop_and_evaluate_at_the_centre(camera_file):
    # Diffusion policy: a random crop of 90% of each side, the centre one in evaluation.
    loader = make(camera_file, augment="diffusion_policy")
    batch = next(iter(loader))
    assert tuple(batch[CAMERA].shape) == (8, 3, 21, 28, 3)
    plain = next(iter(make(camera_file)))
    evaluated = next(iter(make(camera_file, augment="diffusion_policy").eval()))
    # torchvision's CenterCrop: offsets (24 - 21) / 2 and (32 - 28) / 2, rounded half to even.
    assert torch.equal(evaluated[CAMERA], plain[CAMERA][:, :, 2:23, 2:30])
    # GR00T: 95% crop resized to 224x224.
    assert tuple(next(iter(make(camera_file, augment="groot")))[CAMERA].shape) == (8, 3, 224, 224, 3)


@dataclasses.dataclass
class ImageTransformConfig:
    """LeRobot's own dataclass, field for field (lerobot.datasets.transforms)."""

    weight: float = 1.0
    type: str = "Identity"
    kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ImageTransformsConfig:
    enable: bool = False
    max_num_transforms: int = 3
    random_order: bool = False
    tfs: Dict[str, ImageTransformConfig] = dataclasses.field(default_factory=lambda: {
        "brightness": ImageTransformConfig(type="ColorJitter", kwargs={"brightness": (0.8, 1.2)}),
        "contrast": ImageTransformConfig(type="ColorJitter", kwargs={"contrast": (0.8, 1.2)}),
        "saturation": ImageTransformConfig(type="ColorJitter", kwargs={"saturation": (0.5, 1.5)}),
        "hue": ImageTransformConfig(type="ColorJitter", kwargs={"hue": (-0.05, 0.05)}),
        "sharpness": ImageTransformConfig(type="SharpnessJitter", kwargs={"sharpness": (0.5, 1.5)}),
        "affine": ImageTransformConfig(type="RandomAffine", kwargs={"degrees": (-5.0, 5.0), "translate": (0.05, 0.05)}),
    })


def test_lerobot_config_as_dataclass_or_dict(camera_file):
    plain = frames(make(camera_file))
    # LeRobot's default is off: the frames as they are.
    assert same(frames(make(camera_file, augment=ImageTransformsConfig())), plain)
    on = ImageTransformsConfig(enable=True)
    lerobot = frames(make(camera_file, augment=on))
    assert same(lerobot, frames(make(camera_file, augment="lerobot")))
    assert same(lerobot, frames(make(camera_file, augment=dataclasses.asdict(on))))
    # Per camera: none for this one.
    assert same(frames(make(camera_file, augment={"default": "lerobot", "cameras": {CAMERA: None}})), plain)


@pytest.mark.parametrize("augment, names", [
    ("imagenet", "no preset `imagenet`"),
    ({"tfs": {"blur": {"type": "MotionBlur"}}}, "tfs.blur: unknown transform type `MotionBlur`"),
    ({"tfs": {"hue": {"type": "ColorJitter", "kwargs": {"hue": [-0.7, 0.1]}}}}, "tfs.hue.kwargs.hue"),
    ({"crop": {"size": [40, 10]}}, "a crop of 10x40 does not fit its 32x24 frames"),
    ({"cameras": {"obs/other": "act"}}, "`obs/other` is not a camera stream"),
    ({"crop": {"fraction": 0.9, "shape": 3}}, "crop.shape: unknown field"),
    (object(), "augment:"),
])
def test_bad_configs_name_the_field(camera_file, augment, names):
    with pytest.raises(robocache.InvalidInputError, match=names.replace("(", r"\(").replace("[", r"\[")):
        make(camera_file, augment=augment)


def test_cuda_augmentation_equals_cpu(camera_file, cuda):
    for preset in ["lerobot", "act", "groot", "diffusion_policy"]:
        for dtype in ["uint8", "float32"]:
            cpu = frames(make(camera_file, augment=preset, frame_dtype=dtype, frame_layout="chw"), batches=2)
            gpu = frames(make(camera_file, augment=preset, frame_dtype=dtype, frame_layout="chw", device=cuda), batches=2)
            for a, b in zip(cpu, gpu):
                assert torch.equal(a, b.cpu()), (preset, dtype)


def test_augment_preview_grid(camera_file, tmp_path):
    out = tmp_path / "grid.png"
    grid = robocache.augment_preview(camera_file, "act", samples=2, draws=3, out=out)
    # 24x32 frames: 5 columns (frame, evaluation, 3 draws) with 4-pixel gaps, 2 rows.
    assert grid.shape == (52, 176, 3) and grid.dtype == np.uint8
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The first column is the frame as the loader gives it, the second ACT's evaluation (the whole frame).
    assert np.array_equal(grid[:24, :32], grid[:24, 36:68])
    with pytest.raises(robocache.InvalidInputError, match="previews nothing"):
        robocache.augment_preview(camera_file, None)


def test_mixture_members_augment_by_the_mixtures_epoch(camera_file):
    def mixture(augment):
        return robocache.Loader([
            {"dataset": camera_file, "windows": {"hz": 20, "history": 1, "horizon": 2}, "augment": augment,
             "keys": {"camera": CAMERA, "action": "actions"}},
        ], batch_size=8, epoch_windows=32, seed=3, device="cpu")

    def by_window(loader, epoch):
        loader.set_epoch(epoch)
        return {int(w): b["camera"][i].clone() for b in loader for i, w in enumerate(b["window_index"])}

    first = by_window(mixture("lerobot"), 0)
    assert all(torch.equal(v, first[w]) for w, v in by_window(mixture("lerobot"), 0).items())
    # The same window in another epoch: another draw; unaugmented: the same frames.
    second, plain = by_window(mixture("lerobot"), 1), by_window(mixture(None), 1)
    shared = [w for w in first if w in second]
    assert shared and any(not torch.equal(first[w], second[w]) for w in shared)
    plain0 = by_window(mixture(None), 0)
    assert all(torch.equal(plain0[w], plain[w]) for w in shared)

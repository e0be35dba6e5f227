"""robocache: multi-rate robot data onto one policy clock, on the GPU or the CPU.

Arrays in and out are NumPy arrays or torch tensors (CPU or CUDA), exchanged
without copies; results come back as the caller's kind on the caller's
device. CUDA work is ordered with torch's current stream: no
``torch.cuda.synchronize()`` is needed, and no call synchronises the device.

>>> import numpy as np, robocache
>>> data = np.arange(6, dtype=np.float32).reshape(1, 3, 2)     # [B, S, D]
>>> out, valid = robocache.resample(data, (0.0, 10.0), (0.05, 20.0, 4))
>>> out[0, :, 0].tolist(), valid[0].tolist()
([1.0, 2.0, 3.0, 4.0], [True, True, True, True])
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays
from ._errors import (
    CudaError,
    CudaUnavailableError,
    DatasetError,
    DeviceMismatchError,
    DTypeError,
    Error,
    InternalError,
    InvalidInputError,
    OutOfMemoryError,
    RobocacheWarning,
)
from ._data import Dataset, Loader, augment_preview, bag_decode, bag_messages, bag_point_clouds, bag_topics, open  # noqa: A004
from ._mixture import MixtureLoader, MixtureSampler
from ._live import Live, LoaderSpec
from ._data import _int_tuple
from ._native import __version__
from ._native import convert_frames as _native_convert_frames
from ._native import cuda_available as _cuda_available
from ._native import fuse as _native_fuse
from ._native import build_info as _build_info
from ._native import info as _info
from ._native import resample as _native_resample
from ._native import voxelize as _native_voxelize

__all__ = [
    "Error", "InvalidInputError", "DTypeError", "DeviceMismatchError", "CudaUnavailableError", "CudaError",
    "OutOfMemoryError", "DatasetError", "InternalError", "RobocacheWarning",
    "cuda_available", "is_cuda_available", "info", "build_info", "resample", "fuse", "voxelize",
    "convert_frames",
    "resample_trajectories", "fuse_multimodal", "fuse_multimodal_alignment", "voxelize_pointcloud", "self_test",
    "Dataset", "open", "bag_topics", "bag_decode", "bag_messages", "bag_point_clouds", "Loader", "augment_preview", "MixtureLoader", "MixtureSampler", "Live", "LoaderSpec", "__version__",
]


def cuda_available() -> bool:
    """Whether a CUDA device answers (False on a machine without an NVIDIA driver)."""
    return _cuda_available()


is_cuda_available = cuda_available


def info() -> Dict[str, Any]:
    """Version, backends, the CUDA device (or why there is none), PTX archs,
    and what this build has (``build``: :func:`build_info`)."""
    report = json.loads(_info())
    report["build"] = _with_platform(report["build"])
    return report


def build_info() -> Dict[str, Any]:
    """What this build of robocache has: ``version``, ``cuda_compiled``,
    ``ptx_archs``, and ``video_decoders``: per codec (``av1``, ``h264``,
    ``hevc``) its decoders (``rav1d``, ``openh264``, ``libde265`` on the
    CPU, ``nvdec`` on the GPU) and whether each has its SIMD code
    (``assembly``: ``False`` means several times slower CPU decoding, a build
    made without NASM; ``None`` for NVDEC, and for a CPU decoder with no SIMD
    code for this CPU: libde265 on aarch64). ``cpu_video_decoders_have_assembly``
    sums it up. ``platform``: the installed wheel's platform tag
    (``manylinux_2_28_x86_64`` for the portable wheels, ``linux_x86_64`` for
    one built on the machine; ``None`` when not installed from a wheel);
    ``glibc``: the newest glibc symbol version the extension module needs,
    the oldest glibc it loads on (``"2.28"``).

    >>> info = build_info()
    >>> [d["decoder"] for d in info["video_decoders"]["av1"]]
    ['rav1d', 'nvdec']
    """
    return _with_platform(json.loads(_build_info()))


def _with_platform(build: Dict[str, Any]) -> Dict[str, Any]:
    from . import _native, _platform

    build["platform"] = _platform.wheel_platform()
    build["glibc"] = _platform.required_glibc(_native.__file__)
    return build


# ---- argument forms --------------------------------------------------------

def _boundary(boundary: Union[str, float]) -> str:
    if isinstance(boundary, (int, float)) and not isinstance(boundary, bool):
        return f"fill:{float(boundary)!r}"
    return str(boundary)


def _channels(method: Optional[str], channels: Any) -> str:
    """``method`` for every channel, or ``channels`` as text
    (``"0..3:linear,3..7:slerp-xyzw"``) or ``[(start, stop, method), ...]``."""
    if channels is None:
        return method or "linear"
    if method is not None:
        raise InvalidInputError("pass either method= or channels=, not both")
    if isinstance(channels, str):
        return channels
    return ",".join(f"{int(a)}..{int(b)}:{m}" for a, b, m in channels)


def _times(times: Any, what: str, keep: list):
    """An f64 array, or ``(start, hz)`` for uniform times."""
    if isinstance(times, tuple) and len(times) == 2 and all(isinstance(v, (int, float)) for v in times):
        return ("uniform", float(times[0]), float(times[1]))
    return _arrays.describe(times, what, keep)


def _targets(targets: Any, keep: list):
    """An f64 array, or ``(start, hz, count)`` for uniform targets."""
    if isinstance(targets, tuple) and len(targets) == 3 and all(isinstance(v, (int, float)) for v in targets):
        return ("uniform", float(targets[0]), float(targets[1]), int(targets[2]))
    return _arrays.describe(targets, "target times", keep)


def _device_of(desc) -> str:
    return desc[3]


_STREAM_NAMES: list = []


def _stream_names(k: int) -> Tuple[str, str, str]:
    """What stream ``k``'s arrays are called in errors (made once, not per call)."""
    while len(_STREAM_NAMES) <= k:
        n = len(_STREAM_NAMES)
        _STREAM_NAMES.append((f"stream {n} data", f"stream {n} source times", f"stream {n} lengths"))
    return _STREAM_NAMES[k]


# ---- operations ------------------------------------------------------------

def resample(data, times, targets, *, method: Optional[str] = None, channels=None,
             boundary: Union[str, float] = "clamp", lengths=None, trusted: bool = False):
    """Resamples ``data`` ``[B, S, D]`` (or ``[S, D]``), sampled at ``times``
    (f64 ``[S]`` shared or ``[B, S]`` per row, or ``(start, hz)``), at
    ``targets`` (f64 ``[T]`` or ``[B, T]``, or ``(start, hz, count)``).

    ``method``: ``linear`` (default), ``nearest``, ``previous``,
    ``slerp-xyzw``, ``slerp-wxyz`` for every channel, or ``channels``
    per group. ``boundary``: ``clamp``, ``extrapolate`` or a fill value.
    ``lengths``: valid samples per row ``[B]`` (integers).
    ``trusted``: skip the check that source times are finite and strictly
    increasing, target times finite and lengths in ``1..=S`` (on a GPU the
    check's verdict is read back: one wait for the device per call). A
    trusted call never reads out of bounds; on bad times its values are
    unspecified.

    Returns ``(out [B, T, D], valid [B, T] bool)``, as the caller's kind on
    its device (``[T, D]`` and ``[T]`` for 2-D data).
    """
    like_torch = _arrays.is_torch(data)
    if not (like_torch or isinstance(data, np.ndarray)):
        raise InvalidInputError(f"data: expected a NumPy array or a torch tensor, got {type(data).__name__}")
    keep: list = []
    squeeze = False
    shape = tuple(data.shape)
    if len(shape) == 2:
        data = data.reshape(1, *shape)
        squeeze = True
    desc = _arrays.describe(data, "data", keep)
    device = _device_of(desc)
    stream = _arrays.current_stream(device)
    out, valid = _native_resample(
        desc, _times(times, "source times", keep), _targets(targets, keep), _channels(method, channels),
        _boundary(boundary), None if lengths is None else _arrays.describe(lengths, "lengths", keep), trusted, stream,
    )
    out, valid = _arrays.output(out, like_torch), _arrays.output(valid, like_torch)
    if squeeze:
        out, valid = out[0], valid[0]
    return out, valid


def fuse(streams: Sequence, targets, *, dtype: str = "f32", trusted: bool = False):
    """Aligns several streams onto one timeline and concatenates them along
    the channels, in one launch on a GPU.

    Each stream is ``(data, times)``, ``(data, times, method_or_channels)``
    or a dict with ``data``, ``times`` and optionally ``method``,
    ``channels``, ``boundary``, ``lengths``. ``dtype``: the output's
    (``f32``, ``bf16``, ``f16``, ``f64``). ``trusted``: as for
    :func:`resample`, for every stream.

    Returns ``(out [B, T, ΣD], valids [K, B, T])``.
    """
    parts = []
    keep: list = []
    like_torch = False
    for k, stream in enumerate(streams):
        if isinstance(stream, dict):
            data, times = stream["data"], stream["times"]
            spec = _channels(stream.get("method"), stream.get("channels"))
            boundary = _boundary(stream.get("boundary", "clamp"))
            lengths = stream.get("lengths")
        else:
            data, times = stream[0], stream[1]
            spec = stream[2] if len(stream) > 2 else "linear"
            boundary, lengths = "clamp", None
        like_torch = like_torch or _arrays.is_torch(data)
        names = _stream_names(k)
        parts.append((
            _arrays.describe(data, names[0], keep), _times(times, names[1], keep),
            None if lengths is None else _arrays.describe(lengths, names[2], keep), spec, boundary,
        ))
    if not parts:
        raise InvalidInputError("fuse needs at least one stream")
    stream = _arrays.current_stream(_device_of(parts[0][0]))
    out, valid, _offsets = _native_fuse(parts, _targets(targets, keep), _dtype_name(dtype), bool(trusted), stream)
    return _arrays.output(out, like_torch), _arrays.output(valid, like_torch)


_OUTPUT_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64"}


def _dtype_name(dtype) -> str:
    """An output dtype's name: robocache's (``"f32"``, as given), NumPy's or torch's."""
    if isinstance(dtype, str) and len(dtype) <= 4:
        return dtype
    text = str(dtype).replace("torch.", "")
    return _OUTPUT_DTYPES.get(text, text)


def voxelize(points, *, origin, voxel_size, dims, mode: str = "occupancy", features=None, clouds=None,
             num_clouds: Optional[int] = None, budget_bytes: int = 1 << 30):
    """Voxelizes float32 points ``[N, 3]`` into a grid of ``dims`` voxels of
    ``voxel_size`` from ``origin``. ``mode``: ``occupancy`` (u8),
    ``count`` (u32), ``mean`` or ``max`` of ``features`` ``[N, F]`` (f32).
    ``clouds``: a cloud index per point ``[N]`` (integers) for a batch of
    ``num_clouds`` clouds.

    Returns ``(grid [C, X, Y, Z(, F)], counts or None, dropped)`` where
    ``dropped`` counts the points outside the grid (a one-element array).
    """
    like_torch = _arrays.is_torch(points)
    keep: list = []
    desc = _arrays.describe(points, "points", keep)
    size = voxel_size if isinstance(voxel_size, (tuple, list)) else (voxel_size,) * 3
    clouds_desc = None if clouds is None else _arrays.describe(clouds, "cloud index", keep)
    if clouds is not None and num_clouds is None:
        raise InvalidInputError("voxelize: clouds= needs num_clouds=")
    stream = _arrays.current_stream(_device_of(desc))
    grid, counts, dropped = _native_voxelize(
        desc, None if features is None else _arrays.describe(features, "features", keep), clouds_desc,
        int(num_clouds or 1), tuple(float(v) for v in origin), tuple(float(v) for v in size),
        tuple(int(v) for v in dims), mode, int(budget_bytes), stream,
    )
    convert = lambda a: None if a is None else _arrays.output(a, like_torch)  # noqa: E731
    return convert(grid), convert(counts), convert(dropped)


def convert_frames(frames, size: Optional[Tuple[int, int]] = None, *,
                   crop: Optional[Tuple[int, int, int, int]] = None, layout: str = "hwc", dtype: str = "uint8"):
    """Camera frames, uint8 RGB ``[N, H, W, 3]``, cropped, resized and laid
    out, on their own device.

    ``crop=(top, left, height, width)`` cuts that rectangle out first;
    ``size=(height, width)`` then resizes it bit for bit as Pillow 10 to 12
    resize an RGB image with ``Image.BILINEAR`` (an antialiasing triangle
    filter, rows then columns, each pass rounded to 8 bits):
    ``Image.fromarray(frame[top:top + height, left:left + width])
    .resize((width, height), Image.BILINEAR)``. ``layout``: ``"hwc"``
    (``[N, H', W', 3]``) or ``"chw"`` (``[N, 3, H', W']``); ``dtype``:
    ``"uint8"`` or ``"float32"`` (levels divided by 255, LeRobot's frames).

    >>> import numpy as np, robocache
    >>> grey = np.repeat(np.array([0, 80, 160, 240], np.uint8), 3).reshape(1, 1, 4, 3)
    >>> robocache.convert_frames(grey, (1, 2))[0, 0, :, 0].tolist()
    [57, 183]
    """
    like_torch = _arrays.is_torch(frames)
    keep: list = []
    desc = _arrays.describe(frames, "frames", keep)
    stream = _arrays.current_stream(_device_of(desc))
    size = _int_tuple("size", size, "(height, width)")
    crop = _int_tuple("crop", crop, "(top, left, height, width)")
    out = _native_convert_frames(desc, size, crop, str(layout), str(dtype), stream)
    return _arrays.output(out, like_torch)


# ---- the seeds' names ------------------------------------------------------

def _as_f64(times):
    """Times as f64 (the seeds pass float32 ``torch.linspace``): a cast on
    the same device when needed."""
    if _arrays.is_torch(times):
        import torch

        return times if times.dtype == torch.float64 else times.to(torch.float64)
    return np.asarray(times, dtype=np.float64)


def resample_trajectories(source_data, source_times, target_times, method: str = "linear"):
    """The seeds' call: ``source_data [B, S, D]`` at ``source_times``
    (``[B, S]`` or ``[S]``) onto ``target_times`` (``[T]`` or ``[B, T]``);
    returns ``[B, T, D]`` (targets outside a row's samples take its edge
    values). Times of any float dtype."""
    out, _valid = resample(source_data, _as_f64(source_times), _as_f64(target_times), method=method)
    return out


def fuse_multimodal(*args, dtype: str = "f32"):
    """The seeds' fusion: any number of ``data, times`` pairs, then the
    target times; returns ``[B, T, ΣD]``."""
    if len(args) < 3 or len(args) % 2 != 1:
        raise InvalidInputError("fuse_multimodal(data_1, times_1, ..., data_k, times_k, target_times)")
    pairs = [(args[i], _as_f64(args[i + 1])) for i in range(0, len(args) - 1, 2)]
    out, _valids = fuse(pairs, _as_f64(args[-1]), dtype=dtype)
    return out


fuse_multimodal_alignment = fuse_multimodal


def voxelize_pointcloud(points, features=None, grid_min=(0.0, 0.0, 0.0), voxel_size=0.05,
                        grid_size=(64, 64, 64), mode: str = "occupancy"):
    """The seeds' voxelization: points ``[N, 3]`` (or ``[B, N, 3]``, one
    cloud per row) into ``[X, Y, Z]`` (``[B, X, Y, Z]``) occupancy or
    counts, or ``[..., F]`` mean/max of ``features``."""
    batched = len(points.shape) == 3
    clouds = num_clouds = None
    if batched:
        b, n = points.shape[0], points.shape[1]
        points = points.reshape(b * n, 3)
        if features is not None:
            features = features.reshape(b * n, -1)
        if _arrays.is_torch(points):
            import torch

            clouds = torch.arange(b, device=points.device, dtype=torch.int64).repeat_interleave(n)
        else:
            clouds = np.repeat(np.arange(b, dtype=np.int64), n)
        num_clouds = b
    grid, _counts, _dropped = voxelize(points, origin=grid_min, voxel_size=voxel_size, dims=grid_size, mode=mode,
                                       features=features, clouds=clouds, num_clouds=num_clouds)
    return grid if batched else grid[0]


def self_test(verbose: bool = False) -> bool:
    """Checks every operation on each available backend against NumPy
    (small inputs); returns True or raises ``AssertionError`` naming the
    failure."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal((3, 40, 5)).astype(np.float32)
    times = np.cumsum(rng.uniform(0.005, 0.02, (3, 40)), axis=1)
    targets = np.linspace(0.0, 0.5, 25)
    out, valid = resample(data, times, targets)
    for b in range(3):
        for d in range(5):
            want = np.interp(targets, times[b], data[b, :, d].astype(np.float64)).astype(np.float32)
            assert np.allclose(out[b, :, d], want, rtol=1e-5, atol=1e-6), f"resample row {b} channel {d}"
    assert valid.tolist() == ((targets >= times[:, :1]) & (targets <= times[:, -1:])).tolist(), "resample mask"
    fused, _ = fuse([(data, times), (np.ascontiguousarray(data[:, :, :2]), times)], targets)
    assert np.array_equal(fused[:, :, :5], out) and np.array_equal(fused[:, :, 5:], out[:, :, :2]), "fuse"
    points = rng.uniform(0, 1, (500, 3)).astype(np.float32)
    grid, _, dropped = voxelize(points, origin=(0, 0, 0), voxel_size=0.25, dims=(4, 4, 4), mode="count")
    want = np.zeros((4, 4, 4), np.uint32)
    np.add.at(want, tuple(np.minimum((points / 0.25).astype(int), 3).T), 1)
    assert np.array_equal(grid[0], want) and int(dropped[0]) == 0, "voxelize count"
    if verbose:
        print("robocache self-test: cpu ok")  # noqa: T201
    if cuda_available() and _arrays._torch() is not None:
        import torch

        cuda_out, cuda_valid = resample(torch.from_numpy(data).cuda(), torch.from_numpy(times).cuda(),
                                        torch.from_numpy(targets).cuda())
        assert np.array_equal(cuda_out.cpu().numpy(), out), "resample: CUDA differs from the CPU"
        assert np.array_equal(cuda_valid.cpu().numpy(), valid), "resample mask: CUDA differs from the CPU"
        if verbose:
            print("robocache self-test: cuda ok")  # noqa: T201
    return True


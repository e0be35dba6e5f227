"""Datasets and the loader from Python: :func:`open` and :class:`Loader`."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays
from ._errors import InvalidInputError, RobocacheWarning
from ._native import Dataset as _NativeDataset
from ._native import bag_point_clouds as _native_bag_point_clouds
from ._native import bag_decode_json as _native_bag_decode_json
from ._native import bag_messages as _native_bag_messages
from ._native import bag_topics_json as _native_bag_topics_json
from ._native import Loader as _NativeLoader
from ._native import augment_preview as _native_augment_preview
from ._native import take_warnings as _take_warnings


# LeRobot's own per-frame columns, in every LeRobot batch.
_LEROBOT_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")


def _warned(call):
    """``call()``, then the warnings it left (also where it raised)."""
    try:
        return call()
    finally:
        _warn(stacklevel=4)


def _warn(stacklevel: int = 3) -> None:
    """The Rust side's warnings since the last call, as RobocacheWarnings."""
    for message in _take_warnings():
        warnings.warn(message, RobocacheWarning, stacklevel=stacklevel)


class Dataset:
    """A RoboMimic, CALVIN or RT-X HDF5 file, an RLDS builder directory
    as TFDS writes it (an Open X-Embodiment download, ``bridge/0.1.0``), a
    LeRobot dataset root (codebase v3.0 or v2.1, as the Hugging Face Hub
    holds it), or ROS 2 bags (``.mcap``, rosbag2 ``.db3``, or a directory
    of them: one episode per bag file), read as episodes of streams (RLDS
    without TensorFlow, LeRobot without Python's parquet and video stack,
    bags without a ROS install).

    ``mapping`` (bags): which topics and fields become which keys, as a
    dict or the path of a TOML file::

        {"fps": 30, "streams": {
            "observation.state": {"topic": "/joint_states", "field": "position",
                                  "joints": ["j1", "j2", "j3"]},
            "observation.images.wrist": {"topic": "/wrist/image/compressed"},
            "action": {"topic": "/cmd", "field": "data", "time": "log"}}}

    Without it, every numeric field and camera of the first bag is a stream
    (``joint_states/position``, ``imu/orientation``, ``wrist/image/compressed``).

    ``info`` is the episode model (what ``robocache inspect --json``
    prints): ``format``, ``rate_hz``, ``episodes`` (each with its ``name``,
    ``length``, ``streams`` with shapes, dtypes, kinds and rates).
    """

    def __init__(self, path: Union[str, os.PathLike], *, format: Optional[str] = None, split: Optional[str] = None,
                 rate_hz: Optional[float] = None, cache_bytes: int = 0,
                 storage_options: Optional[Dict[str, Any]] = None, remote_cache_dir: Optional[str] = None,
                 remote_cache_bytes: Optional[int] = None,
                 mapping: Union[None, Dict[str, Any], str, os.PathLike] = None):
        path = os.fspath(path)
        self.path = path if "://" in path else os.path.expanduser(path)
        if storage_options is not None and not isinstance(storage_options, dict):
            raise InvalidInputError(f"storage_options must be a dict of str to str, not {type(storage_options).__name__}")
        options = None if storage_options is None else [(str(k), str(v)) for k, v in storage_options.items()]
        if remote_cache_bytes is not None and int(remote_cache_bytes) < 0:
            raise InvalidInputError(f"remote_cache_bytes must be 0 or more, not {remote_cache_bytes}")
        mapping_json = mapping_file = None
        if isinstance(mapping, dict):
            mapping_json = json.dumps(mapping)
        elif mapping is not None:
            if not isinstance(mapping, (str, os.PathLike)):
                raise InvalidInputError(f"mapping must be a dict or the path of a TOML file, not {type(mapping).__name__}")
            mapping_file = os.fspath(mapping)
        self._native = _NativeDataset(self.path, format, split, rate_hz, cache_bytes, options,
                                      None if remote_cache_dir is None else os.fspath(remote_cache_dir),
                                      None if remote_cache_bytes is None else int(remote_cache_bytes),
                                      mapping_json, mapping_file)
        _warn()
        self.info: Dict[str, Any] = json.loads(self._native.info_json())

    @property
    def format(self) -> str:
        return self._native.format

    @property
    def episodes(self) -> List[Dict[str, Any]]:
        return self.info["episodes"]

    @property
    def streams(self) -> List[str]:
        """The stream names of the first episode."""
        episodes = self.episodes
        return [s["name"] for s in episodes[0]["streams"]] if episodes else []

    def __len__(self) -> int:
        return len(self.episodes)

    def to_lerobot(self, out: Union[str, os.PathLike], *, fps: Optional[float] = None,
                   streams: Optional[Sequence[str]] = None, task: str = "",
                   robot_type: Optional[str] = None, cameras: str = "video",
                   key_frame_every: int = 2) -> Dict[str, int]:
        """Writes this dataset as a LeRobot v3.0 root at ``out`` (a new or empty
        directory) that ``LeRobotDataset(repo_id, root=out)`` loads: every
        episode resampled onto ``fps`` (default: the dataset's rate) by each
        stream's kind, over the span every stream covers; the task of an
        episode is its instruction, else ``task``. What ``robocache convert
        lerobot`` runs.

        Camera streams are ``video`` features (``cameras="video"``: H.264 MP4
        files encoded by OpenH264 at a constant quantiser of 26, lossy, a key
        frame every ``key_frame_every`` frames; even widths and heights only)
        or ``image`` features (``cameras="image"``: PNG in the data files,
        lossless, several times larger).

        Returns ``{"episodes", "frames", "data_files"}``."""
        fps = float(self.info["rate_hz"] if fps is None else fps)
        names = list(self.streams if streams is None else streams)
        try:
            episodes, frames, files = self._native.export_lerobot(os.fspath(out), fps, names, str(task), robot_type,
                                                                  str(cameras), int(key_frame_every))
        finally:
            _warn()
        return {"episodes": episodes, "frames": frames, "data_files": files}

    def verify(self, threads: Optional[int] = None) -> Dict[str, Any]:
        """Reads every row of every stream of every episode, as batches read
        them, and checks what has a check: TFRecord CRC32C and Example
        decoding (RLDS), parquet pages and every video frame decoded
        (LeRobot), every HDF5 dataset read (robomimic, CALVIN, RT-X). Run it
        before a long training run instead of finding a bad record mid-run.

        Returns ``{"episodes", "streams", "rows", "bytes", "problems"}``; each
        problem is ``{"episode", "stream", "error"}`` (the error names the
        file and the record, row or frame). ``threads``: every core when
        ``None``. What ``robocache inspect --verify`` runs."""
        if threads is None:
            threads = os.cpu_count() or 1
        if int(threads) < 1:
            raise InvalidInputError(f"threads must be 1 or more, not {threads}")
        return json.loads(self._native.verify_json(int(threads)))

    def write_index(self, path: Optional[Union[str, os.PathLike]] = None) -> str:
        """Writes the sidecar index of an RLDS split
        (``robocache-index.<split>.json``) beside its shards, local or in the
        bucket (or at ``path``), and returns where it went: every later open
        of the split, on every node, reads that one file instead of every
        record of every shard (an index that no longer matches the shards is
        not used). What ``robocache index`` runs. Other formats have no
        index: ``DatasetError``."""
        return self._native.write_index(None if path is None else os.fspath(path))

    def storage_usage(self) -> Dict[str, int]:
        """What remote reads did so far: ``requests`` (HEADs, ranged GETs,
        listings), ``bytes_fetched``, ``bytes_from_cache`` (read from the
        node-local cache without a request) and ``retries``. All 0 for a local dataset."""
        requests, fetched, cached, retries = self._native.storage_usage()
        return {"requests": requests, "bytes_fetched": fetched, "bytes_from_cache": cached, "retries": retries}

    def __repr__(self) -> str:
        return f"robocache.Dataset({self.path!r}, format={self.format!r}, episodes={len(self)})"


def open(path: Union[str, os.PathLike], **options) -> Dataset:  # noqa: A001
    """Opens a dataset file, an RLDS directory, a LeRobot root (a folder
    with ``meta/info.json``) or ROS 2 bags (``.mcap``, ``.db3``, a
    directory of them), local or remote: ``s3://bucket/...``,
    ``gs://...``, ``az://...``, ``http(s)://...`` or
    ``hf://datasets/<org>/<name>[@revision]`` (the Hugging Face Hub).

    ``options``: ``format`` (``robomimic``, ``calvin``, ``rtx``, ``rlds``,
    ``lerobot``, ``ros2``; detected when absent), ``mapping`` (ROS 2 bags:
    topics and fields to keys, a dict or a TOML file; see ``Dataset``), ``split`` (robomimic's
    ``mask/<split>``; RLDS: the TFDS split, default ``train``), ``rate_hz``
    (the step clock; RLDS datasets not in the Open X-Embodiment rate table
    need it), ``cache_bytes`` (low-dimensional streams kept in memory).
    Remote datasets: ``storage_options`` (a dict of ``object_store``
    configuration keys, e.g. ``{"aws_endpoint": "http://minio:9000",
    "aws_region": "us-east-1"}``, plus ``hf_token``, ``hf_endpoint``,
    ``max_retries``, ``retry_timeout``; credentials are otherwise found as
    each store's tools find them), ``remote_cache_dir`` (the node-local
    cache, default ``~/.cache/robocache/remote``) and ``remote_cache_bytes``
    (its budget, default 64 GiB; 0 turns it off)."""
    return Dataset(path, **options)


def _default_device() -> str:
    """The local rank's GPU when CUDA answers, else the CPU."""
    from . import cuda_available

    if cuda_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return "cpu"


def _resolve_device(device: Optional[str], without_torch: str) -> str:
    """``device``, or the default one; ``"cuda"``/``"gpu"`` as torch reads
    ``"cuda"`` (its current device). A CUDA device needs torch imported to
    hold what it gives (``without_torch``: the error otherwise)."""
    device = device or _default_device()
    if device in ("cuda", "gpu"):
        torch = _arrays._torch()
        device = f"cuda:{torch.cuda.current_device() if torch is not None else 0}"
    if device.startswith("cuda") and _arrays._torch() is None:
        raise InvalidInputError(without_torch)
    return device


def _int_tuple(name: str, value, form: str) -> Optional[Tuple[int, ...]]:
    """``value`` as a tuple of as many ints as ``form`` names (``None`` stays
    ``None``), or an :class:`InvalidInputError` naming ``name``."""
    if value is None:
        return None
    count = form.count(",") + 1
    try:
        ints = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} is {form}, not {value!r}") from None
    if len(ints) != count:
        raise InvalidInputError(f"{name} is {form}, not {value!r}")
    if any(v < 0 for v in ints):
        raise InvalidInputError(f"{name} is {form} of sizes 0 or more, not {value!r}")
    return ints


def _default_workers(video: bool) -> int:
    """The loader's workers when none are asked for: 2, or, where its batches
    decode camera video, one per core this process may run on, shared among
    the node's processes (``LOCAL_WORLD_SIZE``, as torchrun sets it)."""
    if not video:
        return 2
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    return max(2, cores // max(_env_int("LOCAL_WORLD_SIZE", 1), 1))


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise InvalidInputError(f"environment variable {name}={value!r} is not an integer") from None


def _shard(rank: Optional[int], world_size: Optional[int]) -> Tuple[int, int]:
    """``(rank, world_size)`` as given, or from ``RANK``/``WORLD_SIZE`` when neither is."""
    if rank is None and world_size is None:
        return _env_int("RANK", 0), _env_int("WORLD_SIZE", 1)
    if rank is None or world_size is None:
        raise InvalidInputError("pass both rank= and world_size=, or neither (then RANK/WORLD_SIZE)")
    return int(rank), int(world_size)


class _Resumable:
    """``set_epoch``, ``state_dict`` and ``load_state_dict`` of a loader
    that iterates epochs of batches: ``_epoch``, ``_next_batch``, ``rank``
    and ``world_size``; ``_what`` names it in errors."""

    _what = "loader"

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration yields (its shuffle); as ``DistributedSampler.set_epoch``."""
        self._epoch = int(epoch)
        self._next_batch = 0

    def state_dict(self) -> Dict[str, int]:
        """Where the loader is: resume with :meth:`load_state_dict` on a loader made the same way."""
        return {"epoch": self._epoch, "next_batch": self._next_batch, "rank": self.rank,
                "world_size": self.world_size}

    def load_state_dict(self, state: Dict[str, int]) -> None:
        if (state.get("rank"), state.get("world_size")) != (self.rank, self.world_size):
            raise InvalidInputError(
                f"the state was saved by rank {state.get('rank')} of {state.get('world_size')}, "
                f"this {self._what} is rank {self.rank} of {self.world_size}"
            )
        self._epoch, self._next_batch = int(state["epoch"]), int(state["next_batch"])


class Loader(_Resumable):
    """Batches of aligned windows of a dataset on a device, for a training loop.

    Each batch is a dict: ``batch[stream]`` ``[B, T, ...]`` on the device,
    ``batch[f"{stream}_is_pad"]`` ``[B, T]`` (True where the step is
    padding: outside the stream, as LeRobot names it), ``episode_index``,
    ``sample_index`` and ``anchor`` (seconds on the episode's clock; for
    step windows the anchor step over the dataset's rate). Torch tensors when torch is imported,
    NumPy arrays otherwise (CPU device only).

    ``windows``: ``{"hz": 50, "history": 2, "horizon": 16}`` (policy-clock
    time windows; ``"causal": True`` computes each step only from samples
    at or before it, held, so that :class:`robocache.Live` gives the same
    windows on the robot) or ``{"seq_length": 16, "frame_stack": 2}``
    (robomimic step windows; ``pad_seq_length``/``pad_frame_stack`` default
    True) or ``{"sequence_length": 16, "pad_before": 1, "pad_after": 7}``
    (diffusion policy's ``SequenceSampler``: every run of
    ``sequence_length`` steps starting at most ``pad_before`` steps before
    an episode and ending at most ``pad_after`` past it, edges repeated;
    both default 0). ``spec()`` returns the :class:`robocache.LoaderSpec` to save
    with a checkpoint.

    ``delta_timestamps={key: [offsets in s]}`` instead of ``windows`` gives
    LeRobot's batches, as ``LeRobotDataset(root, delta_timestamps=...)``
    with a ``DataLoader`` collates them: every frame is a sample; each key
    at ``frame + round(offset * fps)`` clamped to the episode, with
    ``<key>_is_pad``; ``streams`` (``None``: every feature of the dataset)
    at the sample's own frame; LeRobot's ``timestamp``, ``frame_index``,
    ``episode_index``, ``index``, ``task_index`` and ``task`` (a list of
    texts). Shapes and dtypes are LeRobot's: a key with offsets is ``[B, T,
    ...]``, one without ``[B, ...]``, shape-``[1]`` features lose that
    axis, float64 features come as float32, camera frames as float32
    ``[B, T, C, H, W]`` in [0, 1] (``return_uint8=True``: uint8, 4× less
    memory); a video key with one offset is ``[B, C, H, W]``, as LeRobot
    squeezes it. ``tolerance_s`` as LeRobot's. ``frame_crop=(top, left,
    height, width)`` and ``frame_size=(height, width)`` crop and resize every
    camera frame on the loader's device before it becomes float, as
    :func:`robocache.convert_frames` does (Pillow's bilinear resize of the
    crop, bit for bit), instead of a ``Resize`` transform on the batch.
    With ``windows=``, camera frames stored as images (robomimic, RLDS, bag
    cameras) come as uint8 ``[B, T, H, W, 3]``; ``frame_size``,
    ``frame_crop``, ``frame_layout="chw"`` and ``frame_dtype="float32"``
    convert them the same way on the loader's device (so that cameras of
    datasets of any format come at one size and layout in a mixture).

    Camera video is decoded in the loader's ``workers`` (Rust threads;
    by default one per core the process may run on, divided among the
    node's ``LOCAL_WORLD_SIZE`` processes, where the batches hold camera
    video, and 2 otherwise), each batch's frames together: a group of
    pictures is decoded once for every window of the batch that needs a
    frame of it. Frames go to the loader's device as the decoder's YUV
    4:2:0 planes (1.5 bytes a pixel)
    and are converted to RGB there, straight into ``[B, T, C, H, W]``
    float32 or uint8, bit for bit as FFmpeg (and so LeRobot) converts them. ``video_decoder``:
    ``"auto"`` (a CUDA loader decodes on its GPU's video engines, NVDEC,
    where the driver has them and they decode the codec, with the CPU
    decoders beside them; a CPU loader decodes on the CPU), ``"cpu"`` (AV1
    by rav1d, H.264 by OpenH264, HEVC by libde265) or ``"nvdec"`` (NVDEC
    only: an error where it cannot decode). NVDEC decodes H.264 and HEVC
    on every NVIDIA GPU that has it, AV1 on Ada and later (not the H100).
    ``nvdec_sessions`` (with ``"auto"``): at most that many of the
    process's decode requests use the GPU's NVDEC at once, the others
    decode on the CPU beside them (default 32; 0 decodes on the CPU only).
    A CPU loader given ``nvdec_sessions`` uses GPU 0's NVDEC, as
    ``"nvdec"`` does.
    ``frame_cache_bytes`` keeps decoded frames (YUV 4:2:0 as decoded, 1.5
    bytes a pixel, in host memory) up to that many bytes, the first ones decoded: every epoch after the
    first reads them instead of decoding them again (a cache holding part of
    the dataset serves that part). By default (``None``) the budget is a
    quarter of the host memory available when the loader is made (the
    container's limit included), divided among the node's
    ``LOCAL_WORLD_SIZE`` processes; ``0`` turns the cache off. Nothing is
    reserved: frames fill it as they are decoded. ``telemetry()`` reports its
    budget, whether it is the automatic one, and its hit rate
    (``frame_cache``), and the host cores the process kept busy
    (``host_cores_busy``). ``device_frame_cache_bytes`` keeps frames on the
    loader's device instead (GPU memory for a CUDA loader), as uint8 RGB
    already cropped and resized to ``frame_size``: a batch then takes the
    frames it holds in one pass on the device, with no decode, upload,
    conversion or resize, and decodes only the others
    (``device_frame_cache`` in ``telemetry()``). At 224×224 a frame takes
    147 KiB, a third of its YUV at 480×640.
    ``augment`` augments camera frames per sample on the loader's device,
    after ``frame_size``/``frame_crop``: each window's frames of each camera
    get their own parameters (the same across the window's time steps),
    drawn from ``seed``, the epoch and the sample, so an epoch's batches are
    reproducible, a resumed run draws the same ones and each rank its own.
    Values: ``"lerobot"`` (LeRobot's ``image_transforms`` defaults, turned
    on), ``"act"``, ``"openpi"``, ``"groot"``, ``"diffusion_policy"`` (the
    recipes' crops, rotations and colour jitter); LeRobot's
    ``ImageTransformsConfig`` (the dataclass, or its dict, which may add a
    ``"crop"``: ``{"fraction": 0.95}``, ``{"size": [h, w]}`` or
    ``{"scale": [0.08, 1], "ratio": [0.75, 1.33]}``, with ``"output"``:
    ``"crop"``, ``"frame"`` or ``[h, w]``); or per camera
    ``{"default": ..., "cameras": {"observation.images.wrist": None}}``.
    Operations are torchvision v2's functional ones on float frames
    (docs/semantics.md). ``loader.eval()`` switches to the evaluation
    transform (the recipe's centre crop, nothing random), which
    :class:`robocache.Live` applies at deployment; ``loader.train()`` back.
    **Several datasets at once**: ``Loader([member, ...], batch_size=...)``
    returns a :class:`robocache.MixtureLoader`. Each member is a dict:
    ``dataset`` (a path, URL or :class:`Dataset`, any format), ``weight``
    (default 1), ``keys`` (the mixture's name of each of the dataset's
    streams, ``{"action": "action/world_vector"}``: renames and selects),
    an optional ``name``, and the loader options that differ per dataset
    (``windows`` or ``delta_timestamps``, ``frame_size``, ...). The other
    keywords are the mixture's (``batch_size``, ``convention``,
    ``epoch_windows``, ``until_exhausted``, ``seed``, ``drop_last``,
    ``prefetch``, ``mixture_workers``, ``batches_together``, ``streams``)
    or shared by every member's loader
    (``device``, ``rank``, ``world_size``, ``shard_by``, ...)::

        loader = robocache.Loader([
            {"dataset": "hf://datasets/lerobot/aloha_sim_insertion_human", "weight": 1.0,
             "delta_timestamps": {"action": [i / 50 for i in range(16)]}, "keys": {"action": "action"}},
            {"dataset": "/data/oxe/bridge/0.1.0", "weight": 3.0, "windows": {"seq_length": 16},
             "keys": {"action": "action/world_vector"}},
        ], batch_size=64, device="cuda")

    Sharding defaults to ``RANK``/``WORLD_SIZE`` (torchrun); ``device``
    defaults to ``cuda:$LOCAL_RANK`` when a GPU answers. ``shard_by``:
    ``"windows"`` (every rank draws from every episode) or ``"episodes"``
    (each rank takes the windows of a contiguous run of whole episodes, so
    it reads, and from a remote dataset fetches, only those; every rank
    yields ``ceil(windows / world_size)`` an epoch, a shorter shard
    repeating some of its windows, a longer one leaving a few out).
    """

    def __new__(cls, dataset=None, *args, **kwargs):
        # A list of datasets is a mixture (see the class docs).
        if isinstance(dataset, (list, tuple)):
            from ._mixture import MixtureLoader

            return MixtureLoader.of_datasets(dataset, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, dataset: Union[Dataset, str, os.PathLike], streams: Optional[Sequence[str]] = None, *,
                 windows: Optional[Dict[str, Any]] = None,
                 delta_timestamps: Optional[Dict[str, Sequence[float]]] = None, tolerance_s: float = 1e-4,
                 return_uint8: bool = False, frame_size: Optional[Tuple[int, int]] = None,
                 frame_crop: Optional[Tuple[int, int, int, int]] = None, frame_layout: Optional[str] = None,
                 frame_dtype: Optional[str] = None, frame_cache_bytes: Optional[int] = None,
                 device_frame_cache_bytes: int = 0,
                 batch_size: int, device: Optional[str] = None, seed: int = 0, shuffle: bool = True,
                 drop_last: bool = False, workers: Optional[int] = None, prefetch: int = 4,
                 normalization: Optional[str] = None, mode: str = "auto",
                 rank: Optional[int] = None, world_size: Optional[int] = None, shard_by: str = "windows",
                 video_decoder: str = "auto", nvdec_sessions: Optional[int] = None, augment: Any = None):
        for name, value in (("frame_cache_bytes", 0 if frame_cache_bytes is None else frame_cache_bytes),
                            ("device_frame_cache_bytes", device_frame_cache_bytes)):
            if int(value) < 0:
                raise InvalidInputError(f"{name} must be 0 or more, not {value}")
        if nvdec_sessions is not None and int(nvdec_sessions) < 0:
            raise InvalidInputError(f"nvdec_sessions must be 0 or more, not {nvdec_sessions}")
        if int(device_frame_cache_bytes) > 0 and delta_timestamps is None:
            raise InvalidInputError("device_frame_cache_bytes keeps the camera frames of delta_timestamps= batches; "
                                    "windows= batches keep none")
        frame_size = _int_tuple("frame_size", frame_size, "(height, width)")
        frame_crop = _int_tuple("frame_crop", frame_crop, "(top, left, height, width)")
        if not isinstance(dataset, Dataset):
            dataset = Dataset(dataset)
        self.dataset = dataset
        self._lerobot = None
        if delta_timestamps is not None:
            if windows is not None:
                raise InvalidInputError("pass windows= or delta_timestamps=, not both")
            streams = _lerobot_streams(dataset, streams, delta_timestamps)
            deltas = [(str(k), [float(x) for x in v]) for k, v in delta_timestamps.items()]
            self._lerobot = _LeRobotBatches(dataset, streams, dict(deltas), bool(return_uint8))
        elif streams is None:
            raise InvalidInputError("streams are required with windows= (with delta_timestamps= None means every feature)")
        elif windows is None:
            raise InvalidInputError("pass windows= (time or step windows) or delta_timestamps= (LeRobot's)")
        self.streams = list(streams)
        self.batch_size = int(batch_size)
        self.device = _resolve_device(device, "a CUDA loader needs torch imported to hold its batches")
        self.rank, self.world_size = _shard(rank, world_size)
        if delta_timestamps is not None:
            spec = ("deltas", deltas, float(tolerance_s))
        elif "hz" in windows:
            spec = ("times", float(windows["hz"]), int(windows.get("history", 0)), int(windows["horizon"]),
                    bool(windows.get("causal", False)))
        elif "seq_length" in windows:
            spec = ("steps", int(windows["seq_length"]), int(windows.get("frame_stack", 1)),
                    bool(windows.get("pad_seq_length", True)), bool(windows.get("pad_frame_stack", True)))
        elif "sequence_length" in windows:
            spec = ("sequence", int(windows["sequence_length"]), int(windows.get("pad_before", 0)),
                    int(windows.get("pad_after", 0)))
        else:
            raise InvalidInputError("windows needs hz/history/horizon (time windows), seq_length/frame_stack "
                                    "(robomimic step windows) or sequence_length/pad_before/pad_after "
                                    "(diffusion policy's SequenceSampler)")
        # LeRobot's frames: channels first, float32 in [0, 1] (or uint8),
        # converted from the decoder's YUV on the loader's device.
        if self._lerobot is not None:
            if frame_layout is not None or frame_dtype is not None:
                raise InvalidInputError("frame_layout and frame_dtype are for windows= batches; delta_timestamps= "
                                        "batches give LeRobot's frames (channels first, float32 or return_uint8)")
            frame_layout, frame_dtype = "chw", "uint8" if return_uint8 else "float32"
        else:
            frame_layout = "hwc" if frame_layout is None else str(frame_layout)
            frame_dtype = "uint8" if frame_dtype is None else str(frame_dtype)
            if frame_layout not in ("hwc", "chw") or frame_dtype not in ("uint8", "float32"):
                raise InvalidInputError(f"frame_layout is 'hwc' or 'chw' and frame_dtype 'uint8' or 'float32', "
                                        f"not {frame_layout!r} and {frame_dtype!r}")
        if workers is None:
            video = self._lerobot is not None and any(key in self._lerobot._video for key in self.streams)
            workers = _default_workers(video)
        self.workers = int(workers)
        self._native = _NativeLoader(dataset._native, self.streams, spec, self.batch_size, self.device, int(seed),
                                     bool(shuffle), self.rank, self.world_size, bool(drop_last), self.workers, int(prefetch),
                                     normalization, mode,
                                     None if frame_cache_bytes is None else int(frame_cache_bytes), str(shard_by),
                                     str(video_decoder), frame_layout, frame_dtype, frame_size, frame_crop,
                                     int(device_frame_cache_bytes),
                                     None if nvdec_sessions is None else int(nvdec_sessions),
                                     max(_env_int("LOCAL_WORLD_SIZE", 1), 1), _augment_json(augment))
        _warn()
        self._epoch = 0
        self._next_batch = 0
        # What each batch holds, in the order the native loader hands it over.
        self._keys = [key for name in self.streams for key in (name, f"{name}_is_pad")]
        # The loader's own columns; LeRobot batches have their own
        # `episode_index` (a stream) and leave these out.
        self._columns = ["sample_index", "episode_index", "anchor"]
        if self._lerobot is not None:
            self._columns = ["_sample_index", "_episode", "_anchor"]
        self._keys += self._columns

    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        return self._native.batches_per_epoch()

    @property
    def samples_per_epoch(self) -> int:
        return self._native.samples_per_epoch()

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        # The native loader starts the next epoch while this one hands over
        # its last batches, and gives it here when it is the one asked for.
        epoch = self._native.epoch(self._epoch, self._next_batch)
        from_dlpack = _arrays.capsule_importer()
        stream_of = _arrays.stream_reader(self.device)
        keys = self._keys
        while True:
            try:
                parts = epoch.next_batch(stream_of(), from_dlpack is not None)
            finally:
                _warn()
            if parts is None:
                break
            if from_dlpack is not None:  # one DLPack capsule per tensor, in the order of the keys
                batch = dict(zip(keys, map(from_dlpack, parts)))
            else:
                batch = self._numpy_batch(parts)
            if self._lerobot is not None:
                batch = self._lerobot.convert(batch)
            self._next_batch += 1
            yield batch
        self._epoch += 1
        self._next_batch = 0

    def _numpy_batch(self, parts) -> Dict[str, Any]:
        """A batch as NumPy arrays (host memory; the columns come as one array)."""
        *streams, columns = parts
        batch = dict(zip(self._keys, map(np.asarray, streams)))
        columns = np.asarray(columns)
        batch[self._columns[0]] = columns[0]
        batch[self._columns[1]] = columns[1]
        batch[self._columns[2]] = columns[2].view(np.float64)
        return batch

    def spec(self):
        """What defines this loader's windows (streams, clock, masks,
        frames, normalization statistics), to save with a checkpoint and
        give :class:`robocache.Live` at deployment. Step windows are
        refused: live samples have no row numbers."""
        from ._live import LoaderSpec

        return LoaderSpec(self._native.spec_json())

    def telemetry(self) -> Dict[str, Any]:
        """Batches, waits, stall fraction, throughput, GPU utilization, host
        cores busy, the decoded-frame cache's use and hit rate."""
        return json.loads(self._native.telemetry_json())

    def eval(self) -> "Loader":
        """Evaluation mode (as ``torch.nn.Module.eval``): camera frames get
        the augmentation's evaluation transform (its centre crop where the
        recipe has one, nothing random) from the next batch assembled, as
        :class:`robocache.Live` applies it at deployment. Returns the loader."""
        self._native.set_evaluation(True)
        return self

    def train(self, mode: bool = True) -> "Loader":
        """Training mode (the default): random augmentations again
        (``train(False)`` is ``eval()``). Returns the loader."""
        self._native.set_evaluation(not mode)
        return self

    @property
    def training(self) -> bool:
        """False in evaluation mode."""
        return not self._native.evaluation()

    def reset_telemetry(self) -> None:
        self._native.reset_telemetry()


def augment_preview(dataset: Union[Dataset, str, os.PathLike], augment: Any, *, camera: Optional[str] = None,
                    samples: int = 4, draws: int = 5, seed: int = 0,
                    frame_size: Optional[Tuple[int, int]] = None,
                    out: Optional[Union[str, os.PathLike]] = None) -> np.ndarray:
    """A grid of ``samples`` camera frames (rows) of ``dataset`` under
    ``augment`` (anything ``Loader(augment=...)`` takes): each row the frame,
    its evaluation transform, then ``draws`` training draws (epochs 0 to
    ``draws - 1`` of ``seed``), to look at before a long run. Returns uint8
    ``[H, W, 3]``; ``out=`` also writes it as a PNG. ``camera``: the first
    camera stream unless named; ``frame_size=(height, width)`` resizes the
    frames first, as the loader's does."""
    if not isinstance(dataset, Dataset):
        dataset = Dataset(dataset)
    text = _augment_json(augment)
    if text is None:
        raise InvalidInputError("augment: None previews nothing (give a preset name, a dict or a config)")
    size = _int_tuple("frame_size", frame_size, "(height, width)")
    height, width, pixels, _ = _native_augment_preview(dataset._native, text, camera, int(samples), int(draws),
                                                       int(seed), size, None if out is None else os.fspath(out))
    return np.frombuffer(pixels, dtype=np.uint8).reshape(height, width, 3)


def _augment_json(augment: Any) -> Optional[str]:
    """``augment=`` as the JSON the native loader reads: a preset name, a
    dict (LeRobot's ``ImageTransformsConfig`` as a dict, with an optional
    ``crop``; or ``{"default": ..., "cameras": {...}}``), or LeRobot's
    ``ImageTransformsConfig`` itself (any dataclass, as its dict)."""
    if augment is None:
        return None
    if dataclasses.is_dataclass(augment) and not isinstance(augment, type):
        augment = dataclasses.asdict(augment)
    try:
        return json.dumps(augment)
    except TypeError as error:
        raise InvalidInputError(f"augment: {error} (a preset name, a dict or LeRobot's ImageTransformsConfig)") from None


def _lerobot_streams(dataset: Dataset, streams: Optional[Sequence[str]],
                     delta_timestamps: Dict[str, Sequence[float]]) -> List[str]:
    """The streams a LeRobot batch reads: the ones asked for (every feature
    when None), the keys with offsets, LeRobot's own columns."""
    available = dataset.streams
    wanted = list(available if streams is None else streams)
    for key in list(delta_timestamps) + [c for c in _LEROBOT_COLUMNS if c in available]:
        if key not in wanted:
            wanted.append(key)
    return wanted


class _LeRobotBatches:
    """Turns a loader batch into LeRobot's collated batch (see :class:`Loader`)."""

    def __init__(self, dataset: Dataset, streams: List[str], deltas: Dict[str, List[float]], return_uint8: bool):
        first = dataset.episodes[0]["streams"] if dataset.episodes else []
        self._streams = {s["name"]: s for s in first}
        self._deltas = deltas
        self._return_uint8 = return_uint8
        metadata = dataset.info.get("metadata", {})
        self._tasks = list(metadata.get("tasks", []))
        self._video = set(metadata.get("video_keys", []))
        self._camera = self._video | set(metadata.get("image_keys", []))
        self._keys = list(streams)
        self._side_streams: Dict[int, Any] = {}

    def convert(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for key in self._keys:
            value = batch[key]
            stream = self._streams.get(key, {})
            shape = stream.get("step_shape", [])
            if key not in self._deltas:
                value = value[:, 0]
            if key in self._video:
                # Already [B, T, C, H, W] in the asked dtype (converted on the
                # loader's device from the decoder's YUV).
                if key in self._deltas and len(self._deltas[key]) == 1:
                    value = value[:, 0]
            elif key in self._camera and not _rgb_images(stream):
                # Other images stored in parquet: [B, (T,) H, W, C] -> [B, (T,) C, H, W]
                value = _move_channels_first(value)
                if not self._return_uint8:
                    value = _to_float_frames(value)
            elif list(shape) == [1]:
                value = value[..., 0]
            if stream.get("dtype") == "f64" and key not in _LEROBOT_COLUMNS:
                value = _as_float32(value)
            out[key] = value
            if key in self._deltas:
                out[f"{key}_is_pad"] = batch[f"{key}_is_pad"]
        if "task_index" in out and self._tasks:
            out["task"] = [self._tasks[int(i)] for i in self._host_values(out["task_index"])]
        return out

    def _host_values(self, value) -> List[Any]:
        """A column's values on the host. A CUDA batch is complete when the
        loader hands it over, so its values are copied on a stream of their
        own: ``tolist()`` on the training stream would wait for every step
        queued there and leave the GPU idle while the next one is launched."""
        if isinstance(value, np.ndarray) or value.device.type != "cuda":
            return value.tolist()
        import torch

        stream = self._side_streams.get(value.device.index)
        if stream is None:
            stream = self._side_streams[value.device.index] = torch.cuda.Stream(device=value.device)
        with torch.cuda.stream(stream):
            return value.cpu().tolist()


def _rgb_images(stream: Dict[str, Any]) -> bool:
    """8-bit RGB images (``u8 [H, W, 3]``), which the loader converts on its
    device as it converts video (channels first, float32 or uint8)."""
    shape = stream.get("step_shape", [])
    return stream.get("dtype") == "u8" and len(shape) == 3 and shape[-1] == 3


def _move_channels_first(value):
    if isinstance(value, np.ndarray):
        return np.moveaxis(value, -1, -3)
    return value.movedim(-1, -3)


def _to_float_frames(value):
    """LeRobot's ``frames / 255.0`` in float32, bit for bit.

    LeRobot divides on the host (IEEE division). On a CUDA tensor, torch
    computes ``x / 255.0`` with a Python number as ``x * (1 / 255)``, which is
    one ulp off for about half the levels; dividing by a 0-dimensional tensor
    on the same device takes torch's true division instead.
    """
    if isinstance(value, np.ndarray):
        return value.astype(np.float32) / np.float32(255.0)
    import torch

    return torch.div(value.float(), torch.full((), 255.0, dtype=torch.float32, device=value.device))


def _as_float32(value):
    if isinstance(value, np.ndarray):
        return value.astype(np.float32)
    return value.float()


def bag_topics(path: Union[str, os.PathLike], *, storage_options: Optional[Dict[str, Any]] = None,
               remote_cache_dir: Optional[str] = None, remote_cache_bytes: Optional[int] = None) -> List[Dict[str, Any]]:
    """What ROS 2 bags hold, topic by topic (a ``.mcap`` or ``.db3`` file or
    a directory of them, local or remote): per bag file and topic, ``type_name``,
    ``messages``, ``rate_hz``, ``largest_gap_s``, ``first_s``/``last_s`` (from
    the bag's first message), ``out_of_order`` and ``not_decodable`` (why, if
    its messages cannot be decoded). What ``robocache inspect BAG`` lists;
    use it to write a mapping."""
    path = os.fspath(path)
    options = None if storage_options is None else [(str(k), str(v)) for k, v in storage_options.items()]
    return _warned(lambda: json.loads(_native_bag_topics_json(
        path if "://" in path else os.path.expanduser(path), options,
        None if remote_cache_dir is None else os.fspath(remote_cache_dir), remote_cache_bytes)))


def bag_decode(path: Union[str, os.PathLike], *, storage_options: Optional[Dict[str, Any]] = None,
               remote_cache_dir: Optional[str] = None, remote_cache_bytes: Optional[int] = None,
               threads: Optional[int] = None) -> List[Dict[str, Any]]:
    """Decodes every message of every topic of ROS 2 bags (a ``.mcap`` or
    ``.db3`` file or a directory of them) with the definitions the bags
    carry, an indexed MCAP's chunks side by side on ``threads`` threads
    (default: every core; a SQLite bag reads on one), and returns per bag
    file and topic ``messages`` and
    ``bytes`` decoded and ``error``: why its messages are not all decoded (no
    definition, not CDR, or the first message that failed, by its index), or
    None. A bag that cannot be read (a damaged chunk or record) raises an
    error naming the file. What ``robocache inspect BAG --decode`` runs: the
    check that a bag decodes whole before training on it."""
    path = os.fspath(path)
    options = None if storage_options is None else [(str(k), str(v)) for k, v in storage_options.items()]
    if threads is not None and int(threads) < 1:
        raise InvalidInputError(f"threads must be 1 or more, not {threads}")
    return _warned(lambda: json.loads(_native_bag_decode_json(
        path if "://" in path else os.path.expanduser(path), options,
        None if remote_cache_dir is None else os.fspath(remote_cache_dir), remote_cache_bytes,
        0 if threads is None else int(threads))))


def bag_messages(path: Union[str, os.PathLike], topic: str, *, storage_options: Optional[Dict[str, Any]] = None,
                 remote_cache_dir: Optional[str] = None, remote_cache_bytes: Optional[int] = None
                 ) -> List[Dict[str, Any]]:
    """Every message of ``topic`` in ROS 2 bags (a ``.mcap`` or ``.db3`` file
    or a directory of them), decoded by the reader the loader uses, in each
    file's order: per message a dict of ``file``, ``index`` (among the
    topic's messages in that file), ``log_time_ns``, ``publish_time_ns`` and
    ``value``, its fields by name (nested dicts; sequences and arrays as
    lists, ``uint8`` ones as ``bytes``; integers exact; floats as read, a
    ``float32`` widened exactly, NaN and infinities included). An empty type
    holds its one field, ``structure_needs_at_least_one_member``. A topic no
    bag has, or whose messages cannot be decoded, raises an error that says
    why, as does a message that does not decode, by its index: the check of
    a bag against another reader's values."""
    path = os.fspath(path)
    options = None if storage_options is None else [(str(k), str(v)) for k, v in storage_options.items()]
    return _warned(lambda: _native_bag_messages(path if "://" in path else os.path.expanduser(path), str(topic),
                                                options,
                                                None if remote_cache_dir is None else os.fspath(remote_cache_dir),
                                                remote_cache_bytes))


def bag_point_clouds(path: Union[str, os.PathLike], topic: str, features: Sequence[str] = (), *,
                     storage_options: Optional[Dict[str, Any]] = None, remote_cache_dir: Optional[str] = None,
                     remote_cache_bytes: Optional[int] = None) -> List[Dict[str, Any]]:
    """The ``sensor_msgs/PointCloud2`` messages of ``topic`` in ROS 2 bags (a
    ``.mcap`` or ``.db3`` file or a directory of them), as the voxelizer's
    input: per message a dict of ``positions`` (float32 ``[N, 3]``: ``x``,
    ``y``, ``z``), ``features`` (float32 ``[N, F]``: the fields named, in
    order, from any numeric type), ``stamp_ns`` (its header), ``log_time_ns``,
    ``frame_id`` and ``file``. Points of a cloud that is not dense keep their
    NaN coordinates (``robocache.voxelize`` drops them). A field or topic the
    bag lacks raises an error naming it."""
    path = os.fspath(path)
    options = None if storage_options is None else [(str(k), str(v)) for k, v in storage_options.items()]
    names = [str(f) for f in features]
    clouds = _warned(lambda: _native_bag_point_clouds(path if "://" in path else os.path.expanduser(path), str(topic),
                                                      names, options,
                                                      None if remote_cache_dir is None else os.fspath(remote_cache_dir),
                                                      remote_cache_bytes))
    return [{"file": file, "log_time_ns": log, "stamp_ns": stamp, "frame_id": frame,
             "positions": np.frombuffer(positions, np.float32).reshape(-1, 3),
             "features": np.frombuffer(values, np.float32).reshape(-1, len(names))}
            for file, log, stamp, frame, positions, values in clouds]

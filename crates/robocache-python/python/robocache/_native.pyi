"""Type stubs of the extension module ``robocache._native`` (the Rust
binding crate). Users call the ``robocache`` package, which wraps these."""

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__version__: str

# (address, shape, dtype name, "cpu" | "cuda:N")
ArrayDesc = Tuple[int, Tuple[int, ...], str, str]
# An f64 array, or ("uniform", start, hz)
TimesArg = Union[ArrayDesc, Tuple[str, float, float]]
# An f64 array, or ("uniform", start, hz, count)
TargetsArg = Union[ArrayDesc, Tuple[str, float, float, int]]

def cuda_available() -> bool: ...
def info() -> str: ...
def build_info() -> str: ...

class Array:
    """A result: robocache's memory, readable in place."""

    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def address(self) -> int: ...
    @property
    def __array_interface__(self) -> dict: ...
    @property
    def __cuda_array_interface__(self) -> dict: ...
    def to_dlpack(self) -> Any: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

def resample(
    data: ArrayDesc,
    times: TimesArg,
    targets: TargetsArg,
    channels: str,
    boundary: str,
    lengths: Optional[ArrayDesc],
    trusted: bool,
    stream: Optional[int],
) -> Tuple[Array, Array]: ...
def fuse(
    streams: Sequence[Tuple[ArrayDesc, TimesArg, Optional[ArrayDesc], str, str]],
    targets: TargetsArg,
    dtype: str,
    trusted: bool,
    stream: Optional[int],
) -> Tuple[Array, Array, List[int]]: ...
def convert_frames(
    frames: ArrayDesc,
    size: Optional[Tuple[int, int]],
    crop: Optional[Tuple[int, int, int, int]],
    layout: str,
    dtype: str,
    stream: Optional[int],
) -> Array: ...
def voxelize(
    points: ArrayDesc,
    features: Optional[ArrayDesc],
    clouds: Optional[ArrayDesc],
    num_clouds: int,
    origin: Tuple[float, float, float],
    voxel_size: Tuple[float, float, float],
    dims: Tuple[int, int, int],
    mode: str,
    budget_bytes: int,
    stream: Optional[int],
) -> Tuple[Array, Optional[Array], Array]: ...

class Dataset:
    def __init__(
        self,
        path: str,
        format: Optional[str] = None,
        split: Optional[str] = None,
        rate_hz: Optional[float] = None,
        cache_bytes: int = 0,
        storage_options: Optional[List[Tuple[str, str]]] = None,
        remote_cache_dir: Optional[str] = None,
        remote_cache_bytes: Optional[int] = None,
        mapping_json: Optional[str] = None,
        mapping_file: Optional[str] = None,
    ) -> None: ...
    @property
    def format(self) -> str: ...
    def storage_usage(self) -> Tuple[int, int, int, int]: ...
    def info_json(self) -> str: ...
    def export_lerobot(
        self,
        out: str,
        fps: float,
        streams: List[str],
        task: str,
        robot_type: Optional[str] = None,
        cameras: str = "video",
        key_frame_every: int = 2,
    ) -> Tuple[int, int, int]: ...
    def verify_json(self, threads: int) -> str:
        """Every row of every stream read on ``threads`` threads: what was
        read and every problem found, as JSON."""
        ...
    def write_index(self, path: Optional[str] = None) -> str:
        """Writes an RLDS split's sidecar index (beside the shards, or at
        ``path``) and returns where it went."""
        ...

class Epoch:
    def next_batch(self, stream: Optional[int], capsules: bool) -> Optional[Tuple[Any, ...]]:
        """Per stream its data and padding mask, then sample ids, episode ids
        and anchors: DLPack capsules with ``capsules``, else ``Array``s with
        the three columns as one ``i64 [3, B]`` array."""
        ...

class Loader:
    def __init__(
        self,
        dataset: Dataset,
        streams: List[str],
        windows: Tuple[Any, ...],
        batch_size: int,
        device: str,
        seed: int,
        shuffle: bool,
        rank: int,
        world_size: int,
        drop_last: bool,
        workers: int,
        prefetch: int,
        normalization: Optional[str],
        mode: str,
        frame_cache_bytes: Optional[int] = None,
        shard_by: str = "windows",
        video_decoder: str = "auto",
        frame_layout: str = "hwc",
        frame_dtype: str = "uint8",
        frame_size: Optional[Tuple[int, int]] = None,
        frame_crop: Optional[Tuple[int, int, int, int]] = None,
        device_frame_cache_bytes: int = 0,
        nvdec_sessions: Optional[int] = None,
        processes_per_node: int = 1,
        augment_json: Optional[str] = None,
    ) -> None: ...
    def batches_per_epoch(self) -> int: ...
    def samples_per_epoch(self) -> int: ...
    def windows(self) -> int: ...
    def epoch(self, epoch: int, first_batch: int) -> Epoch: ...
    def telemetry_json(self) -> str: ...
    def spec_json(self) -> str: ...
    def reset_telemetry(self) -> None: ...
    def set_evaluation(self, on: bool) -> None: ...
    def evaluation(self) -> bool: ...
    def time_rust_consumer(self, batches: int) -> float: ...

def augment_preview(dataset: Dataset, augment_json: str, camera: Optional[str] = None, samples: int = 4,
                    draws: int = 5, seed: int = 0, frame_size: Optional[Tuple[int, int]] = None,
                    out: Optional[str] = None) -> Tuple[int, int, bytes, str]: ...

def check_loader_spec(text: str) -> None:
    """Raises InvalidInputError for a spec this build cannot use (not a
    spec, a newer format version, an unknown or missing field, statistics
    missing or of the wrong width, a rate or size out of bounds)."""
    ...

class Live:
    def __init__(self, spec_json: str, device: str, streams: Optional[List[str]] = None,
                 message_origin_ns: int = 0, lookback_s: float = 1.0, ring_bytes: int = 268435456) -> None: ...
    def push_message(self, topic: str, log_ns: int, message: bytes, publish_ns: Optional[int] = None) -> None: ...
    def stream_names(self) -> List[str]: ...
    def window_names(self) -> List[str]: ...
    def push(self, stream: str, time: float, values: Tuple[int, Tuple[int, ...], str, str]) -> None: ...
    def push_encoded(self, stream: str, time: float, encoded: bytes) -> None: ...
    def reset(self, message_origin_ns: Optional[int] = None) -> None: ...
    def window(self, time: float, stream: Optional[int], capsules: bool) -> Tuple[Any, ...]:
        """Per stream its data ``[1, T, ...]`` and mask ``[1, T]``: DLPack
        capsules with ``capsules``, else ``Array``s."""
        ...

class MixtureSampler:
    def __init__(
        self,
        names: List[str],
        windows: List[int],
        weights: List[float],
        convention: str,
        epoch_windows: Optional[int],
        until_exhausted: Optional[int],
        seed: int,
        rank: int,
        world_size: int,
        episodes: Optional[List[List[int]]],
    ) -> None: ...
    def epoch(self, epoch: int, start: int = 0) -> List[Tuple[int, int]]: ...
    @property
    def shares(self) -> List[float]: ...
    @property
    def counts(self) -> List[int]: ...
    @property
    def epoch_len(self) -> int: ...
    def __len__(self) -> int: ...

class MixtureLoader:
    def __init__(
        self,
        loaders: List[Loader],
        names: List[str],
        weights: List[float],
        keys: List[List[Tuple[str, str, List[str], List[float]]]],
        streams: List[str],
        batch_size: int,
        convention: str,
        epoch_windows: Optional[int],
        until_exhausted: Optional[int],
        seed: int,
        rank: int,
        world_size: int,
        drop_last: bool,
        workers: int,
        prefetch: int,
        batches_together: Optional[int],
    ) -> None: ...
    def batches_per_epoch(self) -> int: ...
    def statistics_json(self, groups: List[Tuple[str, List[int]]], mode: str) -> str: ...
    def spec_json(self, member: int, statistics_json: Optional[str] = None) -> str: ...
    def telemetry_json(self) -> str: ...
    def epoch(self, epoch: int, first_batch: int) -> MixtureEpoch: ...
    @property
    def shares(self) -> List[float]: ...
    @property
    def fingerprint(self) -> str:
        """What a saved position is valid for: each member's weight and
        window count, the epoch's length, the seed and the sharding."""
        ...
    def batch(self, epoch: int, index: int, stream: Optional[int], capsules: bool) -> Tuple[Any, ...]:
        """Per stream its data, step padding mask and dim_is_pad, then each
        row's dataset and window: DLPack capsules with ``capsules``, else ``Array``s."""
        ...

class MixtureEpoch:
    def next_batch(self, stream: Optional[int], capsules: bool) -> Optional[Tuple[Any, ...]]:
        """The next batch as ``MixtureLoader.batch`` gives it, or None at the end."""
        ...

def bag_topics_json(
    path: str,
    storage_options: Optional[List[Tuple[str, str]]] = None,
    remote_cache_dir: Optional[str] = None,
    remote_cache_bytes: Optional[int] = None,
) -> str: ...

def take_warnings() -> List[str]:
    """The Rust side's warnings since the last take, oldest first."""
    ...
def bag_messages(
    path: str,
    topic: str,
    storage_options: Optional[List[Tuple[str, str]]] = None,
    remote_cache_dir: Optional[str] = None,
    remote_cache_bytes: Optional[int] = None,
) -> List[Dict[str, Any]]: ...
def bag_decode_json(
    path: str,
    storage_options: Optional[List[Tuple[str, str]]] = None,
    remote_cache_dir: Optional[str] = None,
    remote_cache_bytes: Optional[int] = None,
    threads: int = 0,
) -> str: ...

def bag_point_clouds(
    path: str,
    topic: str,
    features: List[str],
    storage_options: Optional[List[Tuple[str, str]]] = None,
    remote_cache_dir: Optional[str] = None,
    remote_cache_bytes: Optional[int] = None,
) -> List[Tuple[str, int, int, str, bytes, bytes]]: ...

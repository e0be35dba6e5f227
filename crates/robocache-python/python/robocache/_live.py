"""Deployment: the spec a loader's windows are defined by, saved with a
checkpoint, and the live windows a running policy gets from it."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from . import _arrays
from ._native import Live as _NativeLive


class LoaderSpec:
    """What defines a loader's windows (``Loader.spec()``): its streams,
    clock (time windows, causal or not, or ``delta_timestamps``), masks,
    camera frames (crop, size, layout, dtype) and normalization statistics,
    as one versioned JSON document with no path to the dataset in it. Save
    it with the checkpoint; :class:`Live` reads it at deployment.
    """

    def __init__(self, text: str):
        # Checked by `from_json` (the native reader): made from a loader's
        # own, or from text that passed it.
        self._text = text
        self._dict = json.loads(text)

    @classmethod
    def from_json(cls, text: str) -> "LoaderSpec":
        """A spec from its JSON text, checked."""
        from ._native import check_loader_spec

        check_loader_spec(text)
        return cls(text)

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "LoaderSpec":
        """A spec saved by :meth:`save`."""
        with open(path, encoding="utf-8") as file:
            return cls.from_json(file.read())

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the spec as JSON to ``path``."""
        with open(path, "w", encoding="utf-8") as file:
            file.write(self._text)

    def to_json(self) -> str:
        return self._text

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(self._text)

    @property
    def streams(self) -> List[str]:
        return [s["name"] for s in self._dict["streams"]]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LoaderSpec) and self._dict == other._dict

    def __repr__(self) -> str:
        clock = self._dict["clock"]
        return f"LoaderSpec({clock['kind']}, streams={self.streams})"


def _spec_of(spec: Union[LoaderSpec, str, os.PathLike, Dict[str, Any]]) -> LoaderSpec:
    if isinstance(spec, LoaderSpec):
        return spec
    if isinstance(spec, dict):
        return LoaderSpec.from_json(json.dumps(spec))
    if isinstance(spec, str) and spec.lstrip().startswith("{"):
        return LoaderSpec.from_json(spec)
    return LoaderSpec.load(spec)


class Live:
    """A running policy's observation windows, bit for bit what its loader
    gave in training (docs/loader.md, "Deployment").

    ``spec``: a :class:`LoaderSpec` (``loader.spec()``), its JSON text or
    dict, or the path it was saved to. ``device``: where windows are placed
    (``"cpu"``, ``"cuda:0"``; default as the loader's). ``streams``: the
    ones to keep (default: every stream of time windows; for
    ``delta_timestamps``, the keys whose offsets are all at or before the
    frame; for a mixture member's spec, ``mixture.spec(member)``, the
    mixture's streams, made from the member's own, which are the ones
    pushed, ``pushed_streams``, with ``{stream}_dim_is_pad``).

    ``push(stream, t, value)`` adds a sample as it arrives (from any
    thread): a NumPy array or tensor of one step (the dataset's dtype, or
    float32 for low-dimensional streams), a camera frame as uint8 ``[H, W,
    3]``, or JPEG/PNG ``bytes`` decoded on arrival. A sample at or before
    its stream's latest is refused; a push is whole or nothing.
    ``window(t)`` returns the observation part of the window at ``t``, as
    one row of a training batch: per stream ``[1, T, ...]`` and
    ``{stream}_is_pad`` (``T``: the history and ``t`` itself), normalized,
    cropped and resized as in training. Causal time windows are exact as
    soon as the samples up to ``t`` are pushed; non-causal ones raise until
    every stream has a sample at or after ``t`` (so run them the slowest
    stream's interval behind). ``reset()`` starts a new episode. For a spec
    of a ROS 2 bag dataset, ``push_message(topic, log_time_ns, cdr_bytes)``
    takes serialized messages instead, decoded by the bag reader's decoder
    with the spec's mapping; their times are seconds since
    ``message_origin_ns`` (``reset(message_origin_ns)`` sets the next
    episode's), and a sample at or before its stream's latest moves just
    after it, as the bag reader places ties.

    Each stream keeps the samples of the window's history plus
    ``lookback_s`` seconds (default 1) behind its latest, whatever rate they
    come at, up to ``ring_bytes`` bytes (default 256 MiB; frames on the
    device counted). A window that would read a sample no longer kept
    raises, naming the stream and the times; it never differs from
    training silently. On CUDA, the window's tensors are ordered on torch's
    current stream: they can be read there at once.
    """

    def __init__(self, spec, device: Optional[str] = None, streams: Optional[Sequence[str]] = None,
                 message_origin_ns: int = 0, lookback_s: Optional[float] = None, ring_bytes: Optional[int] = None):
        from ._data import _resolve_device

        self.spec = _spec_of(spec)
        self.device = _resolve_device(device, "live windows on CUDA need torch imported to hold them")
        # Unset, the defaults are the native ones (robocache::live::DEFAULT_*).
        limits = {}
        if lookback_s is not None:
            limits["lookback_s"] = float(lookback_s)
        if ring_bytes is not None:
            limits["ring_bytes"] = int(ring_bytes)
        self._native = _NativeLive(self.spec.to_json(), self.device, None if streams is None else list(streams),
                                   int(message_origin_ns), **limits)
        self.streams = self._native.window_names()
        self.pushed_streams = self._native.stream_names()
        spec = self.spec.to_dict()
        pad = spec["masks"] == "pad"
        self._mask_suffix = "_is_pad" if pad else "_valid"
        dims = ("_dim_is_pad",) if spec.get("mixture") else ()
        self._keys = [name + suffix for name in self.streams for suffix in ("", self._mask_suffix, *dims)]
        clock = spec["clock"]
        self._deltas = dict(clock["offsets"]) if clock["kind"] == "deltas" else None
        self._info = {s["name"]: s for s in spec["streams"]}
        # torch's DLPack import and the device's stream reader, looked up at
        # the first window rather than on every one.
        self._from_dlpack = self._stream_of = None

    def push(self, stream: str, t: float, value) -> None:
        """Adds a sample of ``stream`` at time ``t`` (seconds)."""
        if isinstance(value, (bytes, bytearray, memoryview)):
            self._native.push_encoded(stream, float(t), bytes(value))
            return
        keep: list = []
        self._native.push(stream, float(t), _arrays.describe(value, f"stream {stream!r}", keep))

    def push_message(self, topic: str, log_time_ns: int, message: bytes, publish_time_ns: Optional[int] = None) -> None:
        """Adds the samples of one serialized ROS 2 message (CDR bytes, as a
        subscription with raw messages or a bag gives them) of ``topic``,
        received at ``log_time_ns``: for a spec of a bag dataset, decoded
        as the bag reader decodes it (its mapping's fields, joints, header
        stamps), each sample at its time minus ``message_origin_ns``."""
        self._native.push_message(topic, int(log_time_ns), bytes(message),
                                  None if publish_time_ns is None else int(publish_time_ns))

    def window(self, t: float) -> Dict[str, Any]:
        """The observation window at ``t`` on the live device."""
        if self._stream_of is None:
            self._from_dlpack = _arrays.capsule_importer()
            self._stream_of = _arrays.stream_reader(self.device)
        from_dlpack = self._from_dlpack
        parts = self._native.window(float(t), self._stream_of(), from_dlpack is not None)
        if from_dlpack is not None:
            window = dict(zip(self._keys, map(from_dlpack, parts)))
        else:
            window = dict(zip(self._keys, map(np.asarray, parts)))
        if self._deltas is not None:
            window = self._as_lerobot(window)
        return window

    def reset(self, message_origin_ns: Optional[int] = None) -> None:
        """Forgets every sample: the next push starts a new episode.
        ``message_origin_ns``: the new episode's message origin for
        :meth:`push_message` (``None`` keeps the current one)."""
        self._native.reset(None if message_origin_ns is None else int(message_origin_ns))

    def _as_lerobot(self, window: Dict[str, Any]) -> Dict[str, Any]:
        """A ``delta_timestamps`` window as the loader's LeRobot batches
        hold it: keys without offsets lose the step axis (so does a camera
        with one offset), shape-``[1]`` features lose that axis, float64
        features come as float32; only keys with offsets have ``_is_pad``."""
        out: Dict[str, Any] = {}
        for name in self.streams:
            value = window[name]
            info = self._info[name]
            offsets = self._deltas.get(name)
            if offsets is None:
                value = value[:, 0]
            if info.get("video"):
                if offsets is not None and len(offsets) == 1:
                    value = value[:, 0]
            elif list(info["step_shape"]) == [1]:
                value = value[..., 0]
            if info["dtype"] == "f64":
                value = value.astype(np.float32) if isinstance(value, np.ndarray) else value.float()
            out[name] = value
            if offsets is not None:
                out[name + self._mask_suffix] = window[name + self._mask_suffix]
        return out

    def __repr__(self) -> str:
        return f"Live({self.streams}, device={self.device!r})"

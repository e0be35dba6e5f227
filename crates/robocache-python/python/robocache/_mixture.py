"""Weighted mixtures of datasets: which window of which dataset each
position of an epoch reads (docs/datasets.md, "Mixtures")."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays
from ._data import _Resumable, _shard, _warn
from ._errors import InvalidInputError
from ._native import MixtureLoader as _NativeMixtureLoader
from ._native import MixtureSampler as _NativeMixtureSampler


def _dataset_index(dataset: Union[int, str, None], names: List[str]) -> Optional[int]:
    """A dataset given by index or by name, as its index."""
    if not isinstance(dataset, str):
        return dataset
    if dataset not in names:
        raise InvalidInputError(f"until_exhausted={dataset!r} names no dataset of {names}")
    return names.index(dataset)


class MixtureSampler:
    """Epoch orders of a weighted mixture of datasets for one rank.

    ``sizes[i]`` is dataset ``i``'s window count (``len(loader_or_dataset)``),
    ``weights[i]`` its weight. With ``weights="sample"`` (Octo's
    ``sample_weights``) dataset ``i``'s share of an epoch is ``w_i / sum(w)``:
    weights 1:10 give the second dataset ten times as many windows as the
    first, whatever their sizes. With ``weights="balance"`` (Octo's
    ``balance_weights``) each weight is first multiplied by the dataset's
    size: 1:10 gives the second ``10 * N_2 / N_1`` times as many.

    An epoch is ``epoch_windows`` positions (all ranks together; default: the
    sum of the sizes), or, with ``until_exhausted`` (a dataset's index or
    name), as many as it takes that dataset to deliver each of its windows
    once. No window is repeated within a dataset's share of an epoch unless
    its share exceeds its size. Ranks (``rank``/``world_size``, default
    ``RANK``/``WORLD_SIZE``) partition every share; with ``episodes`` (per
    dataset, each window's episode) each rank reads only its own episodes.
    Epochs are a function of ``seed``, the epoch and the rank, so
    ``epoch(e, start)`` resumes exactly.

    >>> from robocache import MixtureSampler
    >>> mix = MixtureSampler([100, 400], [1.0, 3.0], epoch_windows=8, seed=0)
    >>> mix.counts, len(mix.epoch(0))
    ([2, 6], 8)
    """

    def __init__(self, sizes: Sequence[int], weights: Sequence[float], *, names: Optional[Sequence[str]] = None,
                 convention: str = "sample", epoch_windows: Optional[int] = None,
                 until_exhausted: Union[int, str, None] = None, seed: int = 0, rank: Optional[int] = None,
                 world_size: Optional[int] = None, episodes: Optional[Sequence[Sequence[int]]] = None):
        names = [str(n) for n in names] if names is not None else [f"dataset {i}" for i in range(len(sizes))]
        until_exhausted = _dataset_index(until_exhausted, names)
        self.names = names
        self.rank, self.world_size = _shard(rank, world_size)
        self._native = _NativeMixtureSampler(
            names, [int(n) for n in sizes], [float(w) for w in weights], convention, epoch_windows,
            until_exhausted, int(seed), self.rank, self.world_size,
            None if episodes is None else [[int(e) for e in part] for part in episodes])

    def epoch(self, epoch: int, start: int = 0) -> List[Tuple[int, int]]:
        """This rank's ``(dataset index, window)`` positions of epoch ``epoch``, from its ``start``-th on."""
        return self._native.epoch(int(epoch), int(start))

    @property
    def shares(self) -> List[float]:
        """Each dataset's share of an epoch (summing to 1)."""
        return self._native.shares

    @property
    def counts(self) -> List[int]:
        """Each dataset's positions per epoch, all ranks together."""
        return self._native.counts

    @property
    def epoch_len(self) -> int:
        """Positions per epoch, all ranks together."""
        return self._native.epoch_len

    def __len__(self) -> int:
        """Positions per epoch on this rank."""
        return len(self._native)

    def __repr__(self) -> str:
        shares = ", ".join(f"{n}: {s:.3f}" for n, s in zip(self.names, self.shares))
        return f"MixtureSampler({shares}; {self.epoch_len} a epoch, rank {self.rank} of {self.world_size})"


def _key_entry(mixed, source, member):
    """One entry of a member's key map as the native loader takes it:
    ``(name, kind, streams, values)``. ``source`` is a stream name, a list of
    stream names (side by side along the last dimension) or
    ``{"constant": value or values}``."""
    if isinstance(source, str):
        return (str(mixed), "stream", [source], [])
    if isinstance(source, dict):
        if set(source) != {"constant"}:
            raise InvalidInputError(f"mixture member {member!r}: key {mixed!r}: a dict source is "
                                    f"{{'constant': values}}, not {source!r}")
        values = source["constant"]
        values = [values] if isinstance(values, (int, float)) else list(values)
        return (str(mixed), "constant", [], [float(v) for v in values])
    if isinstance(source, (list, tuple)) and source and all(isinstance(s, str) for s in source):
        return (str(mixed), "concat", list(source), [])
    raise InvalidInputError(f"mixture member {member!r}: key {mixed!r} maps to {source!r}: a stream name, a list "
                            f"of stream names (concatenated) or {{'constant': values}} expected")


class MixtureLoader(_Resumable):
    """Batches of several datasets at once, each sampled with its weight.

    ``members`` are ``(loader, weight, keys)`` triples (or dicts with those
    keys and an optional ``name``): a :class:`robocache.Loader` per dataset,
    made with its own streams and windows (``delta_timestamps`` for a
    LeRobot root, step or time windows for the others), on one device; its
    weight; and ``keys``, the mixture's name of each of its streams
    (``{"action": "action/world_vector"}``), of several side by side along
    the last dimension (``{"state": ["joint_pos", "gripper"]}``: a step is
    padding where any part's is), or of a constant row at every step, valid
    throughout, for a key the dataset lacks (``{"mode": {"constant": [1.0]}}``;
    in the dtype the other datasets give the key). A batch is a dict: per
    mixture stream ``name`` its data ``[B, T, ..., D]`` (``D`` the widest of
    the datasets' last dimensions, zeros beyond a dataset's own; the same
    shape in every batch, whichever datasets it draws),
    ``name_is_pad`` ``[B, T]`` and ``name_dim_is_pad`` ``[B, D]`` (true on
    the padded dimensions; a stream a dataset lacks is zeros and padding
    everywhere), then ``dataset_index`` and ``window_index`` ``[B]``. Rows
    are grouped by dataset: the batch equals the concatenation of each
    dataset loader's own batches of the same windows. Values are robocache's
    ``[B, T, ...]`` layout (no LeRobot squeezing of single-offset keys).

    Weights, epochs and ranks are those of :class:`MixtureSampler`; the rank
    is the member loaders' (they must agree). ``workers`` threads assemble
    batches ahead (``prefetch`` waiting), in runs of ``batches_together``
    batches: every member loader is asked once for its windows of a whole
    run, which shares each call's fixed cost (on a GPU, its driver calls)
    among its batches. ``None`` (the default) chooses each epoch: runs of 4
    while batches take under 5 ms each to assemble (low-dimensional
    streams), of 1 where they take longer (video decoding, which a run
    would only delay) or before the first. The batches are the same
    whatever ``workers`` and ``batches_together`` are. ``set_epoch``, ``state_dict`` and ``load_state_dict`` resume
    exactly mid-epoch.
    """

    _what = "mixture"

    def __init__(self, members, *, streams: Optional[Sequence[str]] = None, batch_size: int = 64,
                 convention: str = "sample", epoch_windows: Optional[int] = None,
                 until_exhausted: Union[int, str, None] = None, seed: int = 0, drop_last: bool = False,
                 workers: int = 4, prefetch: int = 8, batches_together: Optional[int] = None):
        if batches_together is not None and int(batches_together) < 1:
            raise InvalidInputError(f"batches_together must be at least 1, not {batches_together}")
        loaders, weights, keys, names = [], [], [], []
        for i, member in enumerate(members):
            if isinstance(member, dict):
                loader, weight, key_map = member["loader"], member.get("weight", 1.0), member["keys"]
                name = member.get("name", f"dataset {i}")
            else:
                loader, weight, key_map = member
                name = f"dataset {i}"
            loaders.append(loader)
            weights.append(float(weight))
            keys.append([_key_entry(mixed, source, name) for mixed, source in dict(key_map).items()])
            names.append(str(name))
        if not loaders:
            raise InvalidInputError("a mixture needs at least one member")
        ranks = {(loader.rank, loader.world_size) for loader in loaders}
        if len(ranks) != 1:
            raise InvalidInputError(f"the member loaders are of different ranks: {sorted(ranks)}")
        devices = {loader.device for loader in loaders}
        if len(devices) != 1:
            raise InvalidInputError(f"the member loaders are on different devices: {sorted(devices)}")
        if streams is None:
            streams = list(dict.fromkeys(entry[0] for member in keys for entry in member))
        until_exhausted = _dataset_index(until_exhausted, names)
        self.names, self.streams = names, [str(s) for s in streams]
        (self.rank, self.world_size), self.device = ranks.pop(), devices.pop()
        self._native = _NativeMixtureLoader(
            [loader._native for loader in loaders], names, weights, keys, self.streams, int(batch_size), convention,
            epoch_windows, until_exhausted, int(seed), self.rank, self.world_size, bool(drop_last), int(workers),
            int(prefetch), None if batches_together is None else int(batches_together))
        self._keys = [key for name in self.streams for key in (name, f"{name}_is_pad", f"{name}_dim_is_pad")]
        self._keys += ["dataset_index", "window_index"]
        self._epoch = 0
        self._next_batch = 0
        self._statistics: Optional[Dict[str, Any]] = None

    @classmethod
    def of_datasets(cls, members, streams: Optional[Sequence[str]] = None, *, batch_size: int,
                    convention: str = "sample", epoch_windows: Optional[int] = None,
                    until_exhausted: Union[int, str, None] = None, seed: int = 0, drop_last: bool = False,
                    prefetch: int = 8, mixture_workers: int = 4, batches_together: Optional[int] = None,
                    **loader_options) -> "MixtureLoader":
        """The mixture ``robocache.Loader([member, ...])`` makes: a loader per
        member dict (``dataset``, ``weight``, ``keys``, ``name`` and its own
        loader options over the shared ``loader_options``), then the mixture."""
        from ._data import Dataset, Loader

        built = []
        for i, member in enumerate(members):
            if not isinstance(member, dict) or "dataset" not in member:
                raise InvalidInputError(f"mixture member {i} must be a dict with a `dataset` (and `weight`, `keys`, "
                                        f"loader options), not {type(member).__name__}")
            member = dict(member)
            dataset = member.pop("dataset")
            weight = float(member.pop("weight", 1.0))
            name = member.pop("name", None)
            keys = member.pop("keys", None)
            if not isinstance(dataset, Dataset):
                dataset = Dataset(dataset)
            if keys is None:
                own = member.pop("streams", None) or dataset.streams
                keys = {stream: stream for stream in own}
            keys = dict(keys)
            read = [own for mixed, source in keys.items() for own in _key_entry(mixed, source, name or i)[2]]
            own_streams = member.pop("streams", None) or list(dict.fromkeys(read))
            options = {**loader_options, **member}
            loader = Loader(dataset, own_streams, batch_size=batch_size, seed=seed, **options)
            if name is None:
                name = os.path.basename(os.path.normpath(str(dataset.path))) or f"dataset {i}"
            built.append({"loader": loader, "weight": weight, "keys": keys, "name": str(name)})
        return cls(built, streams=streams, batch_size=batch_size, convention=convention, epoch_windows=epoch_windows,
                   until_exhausted=until_exhausted, seed=seed, drop_last=drop_last, workers=mixture_workers,
                   prefetch=prefetch, batches_together=batches_together)

    @property
    def shares(self) -> List[float]:
        """Each dataset's share of an epoch."""
        return self._native.shares

    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        return self._native.batches_per_epoch()

    def statistics(self, groups: Optional[Dict[str, Sequence[Union[int, str]]]] = None,
                   mode: str = "zscore") -> Dict[str, Dict[str, Dict[str, Any]]]:
        """Normalisation statistics per group, under the mixture's stream
        names, available before training: ``groups`` maps a group (an
        embodiment) to its members (names or indices); by default each
        dataset is its own group. Each member's low-dimensional streams are
        computed over its whole dataset, then merged within the group
        (count-weighted means, pooled variances, extremes of extremes;
        p01/p99 approximated, exact for one member). A group's datasets must
        give each stream the same width (one embodiment). Returns ``{group:
        {"mode", "streams": {stream: {"count", "mean", "std", "min", "max",
        "p01", "p99"}}}}``, and keeps it in :meth:`state_dict` so a resumed
        run normalises as the first did."""
        if groups is None:
            groups = {name: [i] for i, name in enumerate(self.names)}
        resolved = []
        for group, members in dict(groups).items():
            indices = []
            for member in members:
                if isinstance(member, str):
                    if member not in self.names:
                        raise InvalidInputError(f"group {group!r} names no member {member!r} (members: {self.names})")
                    member = self.names.index(member)
                indices.append(int(member))
            resolved.append((str(group), indices))
        self._statistics = json.loads(self._native.statistics_json(resolved, mode))
        self._groups = {group: indices for group, indices in resolved}
        return self._statistics

    def spec(self, member: Union[int, str]):
        """The :class:`robocache.LoaderSpec` of one member (its index or
        name) as the mixture trained it: the member's own streams, clock,
        frames and statistics (what its robot pushes to
        :class:`robocache.Live`), and the mixture's streams as the member
        fills them — names, the widest last dimension with
        ``{stream}_dim_is_pad``, concatenations, constants, streams it lacks
        — with its group's merged statistics once :meth:`statistics`
        computed them (``spec.to_dict()["mixture"]["statistics"]``). A
        ``Live`` of it gives the member's rows of the mixture's batches."""
        from ._live import LoaderSpec

        if isinstance(member, str):
            if member not in self.names:
                raise InvalidInputError(f"no member {member!r} (members: {self.names})")
            index = self.names.index(member)
        else:
            index = int(member)
        statistics = None
        if self._statistics is not None:
            groups = getattr(self, "_groups", None) or {name: [i] for i, name in enumerate(self.names)}
            for group, members in groups.items():
                if index in members and group in self._statistics:
                    statistics = json.dumps(self._statistics[group])
        return LoaderSpec(self._native.spec_json(int(index), statistics))

    def state_dict(self) -> Dict[str, Any]:
        """Where the mixture is (:class:`Loader`'s), the mixture's
        ``fingerprint`` (its parts' weights and window counts, epoch length,
        seed and sharding) and its statistics once :meth:`statistics`
        computed them."""
        state: Dict[str, Any] = dict(super().state_dict())
        state["mixture"] = self._native.fingerprint
        if self._statistics is not None:
            state["statistics"] = self._statistics
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes where ``state`` was saved; a state saved by a mixture of
        other weights, sizes, seed or sharding is an error naming both (its
        position would mean other windows here)."""
        saved = state.get("mixture")
        if saved is not None and saved != self._native.fingerprint:
            raise InvalidInputError(
                f"the state was saved by another mixture: saved for {saved}; this mixture has "
                f"{self._native.fingerprint}"
            )
        super().load_state_dict(state)
        if "statistics" in state:
            self._statistics = state["statistics"]

    @property
    def saved_statistics(self) -> Optional[Dict[str, Any]]:
        """The statistics :meth:`statistics` computed or a state restored, if any."""
        return self._statistics

    def telemetry(self) -> Dict[str, Any]:
        """Per dataset (``members``): windows delivered, ``share`` against
        ``weight_share``, ``seconds`` its parts took (what the batches waited
        for it) and ``slowest_in`` (batches where its part took longest):
        which dataset starves the mixture; ``batches_per_run``: the batches
        a worker assembles together in the next epoch."""
        return json.loads(self._native.telemetry_json())

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        from_dlpack = _arrays.capsule_importer()
        stream_of = _arrays.stream_reader(self.device)
        convert = from_dlpack if from_dlpack is not None else np.asarray
        epoch = self._native.epoch(self._epoch, self._next_batch)
        while True:
            try:
                parts = epoch.next_batch(stream_of(), from_dlpack is not None)
            finally:
                _warn()
            if parts is None:
                break
            self._next_batch += 1
            yield dict(zip(self._keys, map(convert, parts)))
        self._epoch += 1
        self._next_batch = 0

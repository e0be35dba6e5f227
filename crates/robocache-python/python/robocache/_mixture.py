"""Weighted mixtures of datasets: which window of which dataset each
position of an epoch reads (docs/datasets.md, "Mixtures")."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

from ._data import _env_int
from ._errors import InvalidInputError
from ._native import MixtureSampler as _NativeMixtureSampler


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
        if isinstance(until_exhausted, str):
            if until_exhausted not in names:
                raise InvalidInputError(f"until_exhausted={until_exhausted!r} names no dataset of {names}")
            until_exhausted = names.index(until_exhausted)
        if rank is None and world_size is None:
            rank, world_size = _env_int("RANK", 0), _env_int("WORLD_SIZE", 1)
        elif rank is None or world_size is None:
            raise InvalidInputError("pass both rank= and world_size=, or neither (then RANK/WORLD_SIZE)")
        self.names = names
        self.rank, self.world_size = int(rank), int(world_size)
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

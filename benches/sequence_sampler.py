"""Diffusion policy's PushT image dataset against robocache's Loader on the
same replay buffer, side by side in one process.

Diffusion policy's loader is `PushTImageDataset` (its `SequenceSampler` over
a replay buffer copied into memory at start, `sample_sequence` per item, the
image moved to channels first and divided by 255, batched by a PyTorch
`DataLoader` with `--workers` processes), written out here as it reads:
the diffusion_policy package is not on PyPI. robocache's is
`robocache.Loader(..., windows={"sequence_length", "pad_before",
"pad_after"})` on the Zarr store itself (zarr-python's default Blosc
compression), frames as float32 channels first, pad masks.

    python benches/sequence_sampler.py /tmp/pusht.zarr --make --episodes 100 --steps 150
    python benches/sequence_sampler.py /tmp/pusht.zarr --workers 2 --batches 40 --json out.json
    python benches/sequence_sampler.py /tmp/pusht.zarr --workers 16 --device cuda --warmup 225 --batches 150

--make writes a PushT-shaped buffer with zarr-python 2 (`img` 96x96x3
uint8, `state` [5], `action` [2], `meta/episode_ends`). Windows are
PushT's: horizon 16, pad_before 1 (2 observation steps), pad_after 7 (8
actions). Each loader runs `--warmup` batches, then `--batches` timed
batches of `--batch`; samples/s and the ratio are printed last.
"""

import argparse
import json
import os
import time

import numpy as np

HORIZON, PAD_BEFORE, PAD_AFTER = 16, 1, 7
KEYS = ["img", "state", "action"]


def make(path, episodes, steps):
    import zarr

    rng = np.random.default_rng(0)
    lengths = rng.integers(steps // 2, steps + steps // 2, episodes)
    total = int(lengths.sum())
    root = zarr.open_group(path, mode="w")
    data, meta = root.create_group("data"), root.create_group("meta")
    data.array("img", rng.integers(0, 256, (total, 96, 96, 3), dtype=np.uint8), chunks=(100, 96, 96, 3))
    data.array("state", rng.standard_normal((total, 5)).astype(np.float32), chunks=(1000, 5))
    data.array("action", rng.standard_normal((total, 2)).astype(np.float32), chunks=(1000, 2))
    meta.array("episode_ends", np.cumsum(lengths).astype(np.int64))
    print(f"wrote {path}: {episodes} episodes, {total} steps")


class SequenceSampler:
    """SequenceSampler's create_indices and sample_sequence as they compute."""

    def __init__(self, arrays, ends, sequence_length, pad_before, pad_after):
        pad_before = min(max(pad_before, 0), sequence_length - 1)
        pad_after = min(max(pad_after, 0), sequence_length - 1)
        indices = []
        start = 0
        for end in ends:
            length = int(end) - start
            for idx in range(-pad_before, length - sequence_length + pad_after + 1):
                buffer_start = max(idx, 0) + start
                buffer_end = min(idx + sequence_length, length) + start
                sample_start = buffer_start - (idx + start)
                sample_end = sequence_length - ((idx + sequence_length + start) - buffer_end)
                indices.append((buffer_start, buffer_end, sample_start, sample_end))
            start = int(end)
        self.indices = np.asarray(indices)
        self.arrays, self.sequence_length = arrays, sequence_length

    def __len__(self):
        return len(self.indices)

    def sample_sequence(self, idx):
        buffer_start, buffer_end, sample_start, sample_end = self.indices[idx]
        result = {}
        for key, array in self.arrays.items():
            sample = array[buffer_start:buffer_end]
            data = sample
            if sample_start > 0 or sample_end < self.sequence_length:
                data = np.zeros((self.sequence_length,) + array.shape[1:], dtype=array.dtype)
                if sample_start > 0:
                    data[:sample_start] = sample[0]
                if sample_end < self.sequence_length:
                    data[sample_end:] = sample[-1]
                data[sample_start:sample_end] = sample
            result[key] = data
        return result


class PushTImageDataset:
    """PushTImageDataset.__getitem__: the sample, the image channels first in [0, 1]."""

    def __init__(self, path):
        import zarr

        root = zarr.open_group(path, mode="r")
        # ReplayBuffer.copy_from_path: the whole buffer into memory.
        self.arrays = {key: root["data"][key][...] for key in KEYS}
        self.sampler = SequenceSampler(self.arrays, root["meta"]["episode_ends"][...], HORIZON, PAD_BEFORE,
                                       PAD_AFTER)

    def __len__(self):
        return len(self.sampler)

    def __getitem__(self, idx):
        import torch

        sample = self.sampler.sample_sequence(idx)
        image = np.moveaxis(sample["img"], -1, 1) / 255
        data = {"obs": {"image": image.astype(np.float32), "agent_pos": sample["state"][:, :2]},
                "action": sample["action"]}
        return {"obs": {k: torch.from_numpy(v) for k, v in data["obs"].items()},
                "action": torch.from_numpy(data["action"])}


def timed(batches, warmup, count, batch_size, synchronize=lambda: None):
    for _ in range(warmup):
        next(batches)
    synchronize()
    started = time.perf_counter()
    for _ in range(count):
        next(batches)
    synchronize()
    return count * batch_size / (time.perf_counter() - started)


def forever(make_iterator):
    while True:
        yield from make_iterator()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path")
    parser.add_argument("--make", action="store_true")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--device", default="cpu", help="robocache's device (cuda: the frames converted there; the "
                        "baseline's batches stay on the CPU, its copy to the GPU not counted)")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.make:
        make(args.path, args.episodes, args.steps)
        return

    import torch
    import robocache

    started = time.perf_counter()
    theirs = PushTImageDataset(args.path)
    theirs_open_s = time.perf_counter() - started
    loader = torch.utils.data.DataLoader(theirs, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                         drop_last=True, persistent_workers=args.workers > 0)
    theirs_rate = timed(forever(lambda: iter(loader)), args.warmup, args.batches, args.batch)

    windows = {"sequence_length": HORIZON, "pad_before": PAD_BEFORE, "pad_after": PAD_AFTER}
    started = time.perf_counter()
    # PushT at 10 Hz (the bench buffer lacks the keypoint arrays robocache knows PushT by).
    ours = robocache.Loader(robocache.open(args.path, rate_hz=10.0), KEYS, windows=windows, batch_size=args.batch,
                            shuffle=True, device=args.device, workers=args.workers, frame_layout="chw",
                            frame_dtype="float32", drop_last=True)
    ours_open_s = time.perf_counter() - started
    synchronize = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    ours_rate = timed(forever(lambda: iter(ours)), args.warmup, args.batches, args.batch, synchronize)

    rows = {"diffusion policy PushTImageDataset + DataLoader": theirs_rate, "robocache Loader": ours_rate}
    meta = {"windows": len(theirs), "workers": args.workers, "device": args.device, "batch": args.batch,
            "cpus": os.cpu_count(),
            "open_s": {"diffusion policy (copy into memory)": theirs_open_s, "robocache": ours_open_s}}
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"meta": meta, "samples_per_s": rows}, out, indent=1)
    print(json.dumps(meta))
    for name, rate in rows.items():
        print(f"{name:<52} {rate:>10.1f} samples/s")
    print(f"{'ratio':<52} {ours_rate / theirs_rate:>10.2f}x")


if __name__ == "__main__":
    main()

"""ACT's own loader against robocache's on the same ALOHA episodes, side by
side in one process.

ACT's loader is act-plus-plus's `EpisodicDataset` (`utils.py`), re-implemented
here as it reads: per sample, open the episode's file with h5py, read the
whole `/action`, `qpos`/`qvel` at a random start step and one frame per
camera at that step (`cv2.imdecode` for compressed frames), pad the action
chunk to the episode's length, stack the cameras channels first as float in
[0, 1]; batched by a PyTorch `DataLoader` with `--workers` processes.
robocache's is `robocache.Loader` with `delta_timestamps`: the same camera
frames and state at the sample's step and the action chunk after it, padded
and masked, uint8 frames (a policy divides on the GPU).

    python benches/aloha_loader.py /tmp/act --make --episodes 50 --steps 200
    python benches/aloha_loader.py /tmp/act --workers 8 --batches 40 --json out.json

--make writes the episodes with ACT's recording code
(crates/robocache-datasets/tests/fixtures/make_aloha_fixtures.py: 480x640
cameras, JPEG quality 50, as act-plus-plus records real robots). Each loader
runs one warm-up pass of `--warmup` batches, then `--batches` timed batches;
samples/s and the ratio are printed last.
"""

import argparse
import importlib.util
import json
import os
import pathlib
import time

import numpy as np

CAMERAS = ["cam_high", "cam_left_wrist"]
FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "crates/robocache-datasets/tests/fixtures"


def make(directory, episodes, steps, compress):
    spec = importlib.util.spec_from_file_location("make_aloha_fixtures", FIXTURES / "make_aloha_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.HEIGHT, module.WIDTH = 480, 640
    module.write_real(directory, episodes, steps, compress)


class EpisodicDataset:
    """act-plus-plus's EpisodicDataset.__getitem__, as it reads and converts."""

    def __init__(self, directory, chunk):
        import h5py

        self.files = sorted((os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".hdf5")),
                            key=lambda p: int(pathlib.Path(p).stem.split("_")[-1]))
        self.lengths = []
        for path in self.files:
            with h5py.File(path, "r") as root:
                self.lengths.append(root["/action"].shape[0])
        self.starts = np.cumsum([0] + self.lengths[:-1])
        self.max_len = max(self.lengths)
        self.chunk = chunk

    def __len__(self):
        return int(sum(self.lengths))

    def __getitem__(self, index):
        import cv2
        import h5py
        import torch

        episode = int(np.searchsorted(self.starts, index, side="right") - 1)
        start_ts = index - int(self.starts[episode])
        with h5py.File(self.files[episode], "r") as root:
            compressed = root.attrs.get("compress", False)
            action = root["/action"][()]
            qpos = root["/observations/qpos"][start_ts]
            images = {}
            for cam in CAMERAS:
                images[cam] = root[f"/observations/images/{cam}"][start_ts]
                if compressed:
                    images[cam] = cv2.imdecode(images[cam], 1)
        action = action[start_ts:]
        padded = np.zeros((self.max_len, action.shape[1]), np.float32)
        padded[: len(action)] = action
        is_pad = np.zeros(self.max_len, bool)
        is_pad[len(action):] = True
        padded, is_pad = padded[: self.chunk], is_pad[: self.chunk]
        image_data = torch.from_numpy(np.stack([images[cam] for cam in CAMERAS]))
        image_data = torch.einsum("k h w c -> k c h w", image_data).float() / 255.0
        return image_data, torch.from_numpy(qpos).float(), torch.from_numpy(padded), torch.from_numpy(is_pad)


def time_batches(batches, count, warmup, batch_size):
    iterator = iter(batches)
    for _ in range(warmup):
        next(iterator)
    start = time.perf_counter()
    for _ in range(count):
        next(iterator)
    elapsed = time.perf_counter() - start
    return count * batch_size / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--make", action="store_true")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--raw", action="store_true", help="with --make: raw cameras, not JPEG")
    parser.add_argument("--batch", type=int, default=8, help="ACT's default batch size")
    parser.add_argument("--chunk", type=int, default=100, help="ACT's chunk_size")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--device", default=None)
    parser.add_argument("--second-epoch", action="store_true",
                        help="time robocache from its second epoch: one whole epoch read first (its decoded-frame "
                             "cache filled; ACT's loader has none)")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.make:
        make(args.dir, args.episodes, args.steps, not args.raw)

    import torch
    from torch.utils.data import DataLoader

    import robocache

    act = DataLoader(EpisodicDataset(args.dir, args.chunk), batch_size=args.batch, shuffle=True,
                     num_workers=args.workers, persistent_workers=args.workers > 0, prefetch_factor=2 if args.workers else None)
    act_rate = time_batches(act, args.batches, args.warmup, args.batch)

    fps = 50.0
    deltas = {f"observations/images/{cam}": [0.0] for cam in CAMERAS}
    deltas["observations/qpos"] = [0.0]
    deltas["action"] = [k / fps for k in range(args.chunk)]
    ours = robocache.Loader(args.dir, list(deltas), delta_timestamps=deltas, batch_size=args.batch, device=args.device)
    if args.second_epoch:
        ours.set_epoch(0)
        for _ in ours:
            pass
        ours.set_epoch(1)
    ours_rate = time_batches(ours, args.batches, args.warmup, args.batch)

    result = {
        "episodes": len(os.listdir(args.dir)),
        "batch": args.batch,
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "act_samples_per_s": act_rate,
        "robocache_samples_per_s": ours_rate,
        "ratio": ours_rate / act_rate,
        "robocache_device": str(ours.device),
        "robocache_from_second_epoch": args.second_epoch,
        "robocache_frame_cache": ours.telemetry().get("frame_cache"),
        "torch": torch.__version__,
    }
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=2))
    print(f"{'loader':<34}{'samples/s':>12}")
    print(f"{'ACT EpisodicDataset, ' + str(args.workers) + ' workers':<34}{act_rate:>12.1f}")
    print(f"{'robocache.Loader (' + str(ours.device) + ')':<34}{ours_rate:>12.1f}")
    print(f"ratio {ours_rate / act_rate:.2f}x")


if __name__ == "__main__":
    main()

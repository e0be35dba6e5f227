"""Augmentation on the GPU host, side by side in one process (docs/benchmarks.md, "Augmentation").

On one synthetic robomimic file (h5py: two 128x128 cameras, EPISODES x STEPS steps):

- robocache.Loader on CUDA, time windows of 2 frames, batch B: frames/s with
  ``augment=None``, ``"lerobot"`` and ``"act"`` (per sample, on the device);
- LeRobot's ``image_transforms`` as LeRobot applies them: torchvision v2 per
  sample on CPU tensors in DataLoader workers (8 and 16), the frames already
  decoded in shared memory (the transforms' cost alone, no decode);
- the approach of LeRobot's PR #4627: torchvision v2 on the whole GPU batch,
  one draw for the batch;
- kornia's per-sample augmentation (ColorJiggle + RandomAffine, not the same
  on the batch) on the same GPU batch.

Reports frames/s, ms per batch and, for the GPU paths, the share of the
wall time the GPU was busy (CUDA events around the work). Prints a table
last; ``--json`` writes the numbers.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

EPISODES, STEPS, SIDE = 24, 100, 128
CAMERAS = ["obs/agentview_image", "obs/robot0_eye_in_hand_image"]


def write_file(path):
    import h5py

    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift", "env_kwargs": {"control_freq": 20}})
        for e in range(EPISODES):
            demo = data.create_group(f"demo_{e}")
            demo.attrs["num_samples"] = STEPS
            demo.create_dataset("actions", data=rng.standard_normal((STEPS, 7)).astype(np.float32))
            obs = demo.create_group("obs")
            for camera in CAMERAS:
                frames = rng.integers(0, 256, (STEPS, SIDE, SIDE, 3), dtype=np.uint8)
                obs.create_dataset(camera.split("/")[1], data=frames, chunks=(1, SIDE, SIDE, 3))
        data.attrs["total"] = EPISODES * STEPS


def lerobot_root(robocache, path):
    """The LeRobot root (H.264 cameras) robocache writes from the HDF5 file at `path`, and its camera streams."""
    root = path.replace(".hdf5", "-lerobot")
    if not os.path.exists(root):
        robocache.open(path).to_lerobot(root, fps=20, task="lift", cameras="video")
    return root, [s for s in robocache.Dataset(root).streams if "image" in s]


def frame_cache_loader(robocache, root, video, batch, augment, workers=8):
    """A CUDA loader of `delta_timestamps` windows of 2 frames over `root`, its GPU frame cache filled: two epochs
    read (the first decodes)."""
    loader = robocache.Loader(root, video, delta_timestamps={camera: [-0.05, 0.0] for camera in video},
                              batch_size=batch, device="cuda", device_frame_cache_bytes=16 << 30, workers=workers,
                              prefetch=8, augment=augment, drop_last=True)
    for epoch in range(2):
        loader.set_epoch(epoch)
        for _ in loader:
            pass
    return loader


def lerobot_transforms():
    """LeRobot's ImageTransforms with its defaults turned on (its RandomSubsetApply, torchvision v2)."""
    from torchvision.transforms import v2

    class SharpnessJitter(v2.Transform):
        def __init__(self, sharpness):
            super().__init__()
            self.sharpness = sharpness

        def make_params(self, flat_inputs):
            return {"sharpness_factor": float(torch.empty(1).uniform_(*self.sharpness))}

        def transform(self, inpt, params):
            return self._call_kernel(v2.functional.adjust_sharpness, inpt, sharpness_factor=params["sharpness_factor"])

    class RandomSubsetApply(v2.Transform):
        def __init__(self, transforms, n_subset):
            super().__init__()
            self.transforms, self.n_subset = transforms, n_subset
            self.p = torch.ones(len(transforms)) / len(transforms)

        def forward(self, *inputs):
            chosen = torch.multinomial(self.p, self.n_subset).sort().values
            out = inputs[0]
            for i in chosen:
                out = self.transforms[i](out)
            return out

    return RandomSubsetApply([
        v2.ColorJitter(brightness=(0.8, 1.2)), v2.ColorJitter(contrast=(0.8, 1.2)),
        v2.ColorJitter(saturation=(0.5, 1.5)), v2.ColorJitter(hue=(-0.05, 0.05)), SharpnessJitter((0.5, 1.5)),
        v2.RandomAffine(degrees=(-5.0, 5.0), translate=(0.05, 0.05)),
    ], 3)


class FramesDataset(torch.utils.data.Dataset):
    """Windows of 2 frames of each camera, already decoded (shared memory), transformed per sample."""

    def __init__(self, frames, transform):
        self.frames, self.transform = frames, transform

    def __len__(self):
        return self.frames.shape[0] - 1

    def __getitem__(self, i):
        window = self.frames[i:i + 2].float() / 255  # [2, cameras, 3, H, W]
        return torch.stack([self.transform(window[:, c]) for c in range(window.shape[1])], 1)


def gpu_timed(fn, repeats):
    """(seconds of wall time, seconds the GPU worked) for `repeats` calls."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, start.elapsed_time(end) / 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", default="augment-bench.hdf5")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--workers", type=int, nargs="*", default=[8, 16])
    parser.add_argument("--json")
    args = parser.parse_args()
    import robocache

    if not os.path.exists(args.file):
        write_file(args.file)
    frames_per_batch = args.batch * 2 * len(CAMERAS)
    rows = []

    def loader(augment):
        return robocache.Loader(args.file, ["actions", *CAMERAS], windows={"hz": 20, "history": 1, "horizon": 1},
                                batch_size=args.batch, device="cuda", frame_layout="chw", frame_dtype="float32",
                                workers=8, prefetch=8, augment=augment, drop_last=True)

    for augment in [None, "lerobot", "act"]:
        ours = loader(augment)
        it = iter(ours)
        for _ in range(10):
            next(it)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        done = 0
        while done < args.batches:
            try:
                batch = next(it)
            except StopIteration:
                it = iter(ours)
                continue
            done += 1
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        busy = ours.telemetry().get("gpu_utilization_percent")
        busy = None if busy is None else busy / 100
        rows.append({"path": f"robocache Loader cuda, augment={augment}", "frames_per_s": done * frames_per_batch / wall,
                     "ms_per_batch": 1000 * wall / done, "gpu_busy": busy})

    # delta_timestamps windows on a LeRobot root (H.264, written by robocache's
    # writer), epochs 2 and 3 served by the frame cache on the GPU: what the
    # augmentation costs where frames cost least.
    root, video = lerobot_root(robocache, args.file)
    for augment in [None, "lerobot", "act"]:
        ours = frame_cache_loader(robocache, root, video, args.batch, augment)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        done = 0
        for epoch in range(2, 4):
            ours.set_epoch(epoch)
            for _ in ours:
                done += 1
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        busy = ours.telemetry().get("gpu_utilization_percent")
        rows.append({"path": f"robocache LeRobot root, GPU frame cache, augment={augment}",
                     "frames_per_s": done * frames_per_batch / wall, "ms_per_batch": 1000 * wall / done,
                     "gpu_busy": None if busy is None else busy / 100})

    # The same frames decoded once into shared memory, for the baselines.
    import h5py

    with h5py.File(args.file, "r") as f:
        stack = np.stack([np.stack([f[f"data/demo_{e}/obs/{c.split('/')[1]}"][...] for c in CAMERAS], 1)
                          for e in range(4)], 0).reshape(4 * STEPS, len(CAMERAS), SIDE, SIDE, 3)
    frames = torch.from_numpy(stack).permute(0, 1, 4, 2, 3).contiguous().share_memory_()
    transforms = lerobot_transforms()
    for workers in args.workers:
        dl = torch.utils.data.DataLoader(FramesDataset(frames, transforms), batch_size=args.batch, shuffle=True,
                                         num_workers=workers, drop_last=True, persistent_workers=True, prefetch_factor=4)
        it = iter(dl)
        for _ in range(5):
            next(it)
        t0 = time.perf_counter()
        done = 0
        while done < min(args.batches, 60):
            try:
                next(it)
            except StopIteration:
                it = iter(dl)
                continue
            done += 1
        wall = time.perf_counter() - t0
        rows.append({"path": f"LeRobot image_transforms, CPU, {workers} workers", "frames_per_s": done * frames_per_batch / wall,
                     "ms_per_batch": 1000 * wall / done, "gpu_busy": None})

    batch = (frames[:args.batch * 2].reshape(args.batch, 2, len(CAMERAS), 3, SIDE, SIDE).float() / 255).cuda()
    flat = batch.reshape(-1, 3, SIDE, SIDE)
    gpu_transforms = lerobot_transforms()
    wall, busy = gpu_timed(lambda: gpu_transforms(flat), args.batches)
    rows.append({"path": "torchvision v2 on the GPU batch (PR #4627: one draw a batch)",
                 "frames_per_s": args.batches * frames_per_batch / wall, "ms_per_batch": 1000 * wall / args.batches,
                 "gpu_busy": busy / wall})
    try:
        import kornia.augmentation as K

        aug = K.AugmentationSequential(
            K.ColorJiggle(0.2, 0.2, 0.5, 0.05, p=1.0), K.RandomSharpness((0.5, 1.5), p=1.0),
            K.RandomAffine(degrees=5.0, translate=(0.05, 0.05), p=1.0), same_on_batch=False)
        wall, busy = gpu_timed(lambda: aug(flat), args.batches)
        rows.append({"path": "kornia per sample on the GPU batch", "frames_per_s": args.batches * frames_per_batch / wall,
                     "ms_per_batch": 1000 * wall / args.batches, "gpu_busy": busy / wall})
    except ImportError as error:
        print(f"kornia left out: {error}", file=sys.stderr)

    meta = {"device": torch.cuda.get_device_name(), "batch": args.batch, "frames_per_batch": frames_per_batch,
            "frame": f"{SIDE}x{SIDE}", "cpus": os.cpu_count(), "robocache": robocache.__version__}
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"meta": meta, "rows": rows}, out, indent=1)
    print(json.dumps(meta))
    print(f"{'path':<66} {'frames/s':>10} {'ms/batch':>9} {'GPU busy':>9}")
    for row in rows:
        busy = "" if row["gpu_busy"] is None else f"{100 * row['gpu_busy']:.0f}%"
        print(f"{row['path']:<66} {row['frames_per_s']:>10.0f} {row['ms_per_batch']:>9.2f} {busy:>9}")


if __name__ == "__main__":
    main()

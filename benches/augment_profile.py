"""Where an augmented batch from the GPU frame cache spends its time (docs/benchmarks.md, "Augmentation").

The frame-cache rows of ``augment_gpu.py`` (a LeRobot root with two 128x128
H.264 cameras, ``delta_timestamps`` windows of 2 frames, batches of 64, the
frames served from the GPU frame cache from the third epoch), each
augmentation in turn: frames/s over ``--epochs`` timed epochs, then one more
epoch under PyTorch's profiler (CUPTI sees robocache's kernels, which run in
the same process on the same device), summed per kernel. Prints, per
augmentation, the wall time per batch, the GPU's kernel time per batch and
their ratio (the GPU's busy share: the kernels run on one stream, so their
sum is the time the GPU was busy), then each kernel's time and launches per
batch.

    python3 augment_profile.py --epochs 6
"""

import argparse
import os
import sys
import time

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from augment_gpu import CAMERAS, frame_cache_loader, lerobot_root, write_file  # noqa: E402


def kernel_times(prof):
    """{kernel name: (total us, launches)} of the profiled CUDA kernels."""
    totals = {}
    for event in prof.events():
        if event.device_type != DeviceType.CUDA:
            continue
        name = event.name
        if "memcpy" in name.lower() or "memset" in name.lower():
            name = "(" + name.split(" ")[0] + ")"
        us = event.device_time_total
        total, count = totals.get(name, (0.0, 0))
        totals[name] = (total + us, count + 1)
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", default="augment-bench.hdf5")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--augment", nargs="*", default=["none", "lerobot", "act"])
    args = parser.parse_args()
    import robocache

    if not os.path.exists(args.file):
        write_file(args.file)
    root, video = lerobot_root(robocache, args.file)
    frames_per_batch = args.batch * 2 * len(CAMERAS)
    rows = []
    for name in args.augment:
        augment = None if name == "none" else name
        ours = frame_cache_loader(robocache, root, video, args.batch, augment, workers=args.workers)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        done = 0
        for epoch in range(2, 2 + args.epochs):
            ours.set_epoch(epoch)
            for _ in ours:
                done += 1
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            ours.set_epoch(2 + args.epochs)
            profiled = 0
            t1 = time.perf_counter()
            for _ in ours:
                profiled += 1
            torch.cuda.synchronize()
            profiled_wall = time.perf_counter() - t1
        kernels = kernel_times(prof)
        gpu_us = sum(total for total, _ in kernels.values())
        rows.append((name, done * frames_per_batch / wall, 1000 * wall / done, profiled_wall * 1e6 / profiled,
                     gpu_us / profiled, kernels, profiled))
    print(f"{'augment':<10}{'frames/s':>12}{'ms/batch':>10}{'profiled us/batch':>19}{'GPU us/batch':>14}{'busy':>7}")
    for name, fps, ms, profiled_us, gpu_us, _, _ in rows:
        print(f"{name:<10}{fps:>12.0f}{ms:>10.3f}{profiled_us:>19.1f}{gpu_us:>14.1f}{gpu_us / profiled_us:>7.0%}")
    for name, _, _, _, _, kernels, batches in rows:
        print(f"-- {name}: us per batch, launches per batch")
        for kernel, (total, count) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[:8]:
            print(f"   {kernel[:60]:<60}{total / batches:>9.1f}{count / batches:>7.1f}")


if __name__ == "__main__":
    main()

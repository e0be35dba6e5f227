#!/usr/bin/env python3
"""robocache's CPU backend against NumPy, same workloads, same machine, one run.

NumPy is what users write today (docs/performance.md): per row, ``searchsorted`` + ``take``
+ a float32 lerp; fusion concatenates per-stream resamples; voxel counts and
means use ``bincount``. robocache is timed by ``robocache bench --json`` (median
of repeated calls after warm-up), with all threads and with one thread, and
the script first checks that both compute the same numbers on one workload.

Run through ``cargo xtask bench-numpy``, which installs NumPy into a tool
folder under target/ and builds the release binary.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def epoch_times(n, hz):
    return 1.7e9 + np.arange(n) / hz


def values(rng, shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def numpy_resample(data, source_times, target_times):
    """Linear resample with clamp, row by row, float32 lerp; returns data and mask."""
    batch, samples, channels = data.shape
    out = np.empty((batch, len(target_times), channels), np.float32)
    valid = np.empty((batch, len(target_times)), bool)
    for b in range(batch):
        s = source_times
        i = np.clip(np.searchsorted(s, target_times, side="right") - 1, 0, samples - 2)
        w = np.clip((target_times - s[i]) / (s[i + 1] - s[i]), 0.0, 1.0).astype(np.float32)
        x0 = data[b].take(i, axis=0)
        x1 = data[b].take(i + 1, axis=0)
        out[b] = x0 + w[:, None] * (x1 - x0)
        valid[b] = (target_times >= s[0]) & (target_times <= s[-1])
    return out, valid


def targets_for(samples, count):
    duration = (samples - 1) / 100.0
    return epoch_times(count, (count - 1) / duration)


def numpy_voxelize(points, features, dims, size):
    v = np.floor(points / np.float32(size)).astype(np.int64)
    inside = np.all((v >= 0) & (v < dims), axis=1)
    key = (v[inside, 0] * dims + v[inside, 1]) * dims + v[inside, 2]
    counts = np.bincount(key, minlength=dims**3).astype(np.uint32)
    if features is None:
        return counts
    f = features[inside]
    sums = np.stack([np.bincount(key, weights=f[:, c], minlength=dims**3) for c in range(f.shape[1])], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(counts[:, None] > 0, sums / counts[:, None], 0.0).astype(np.float32)
    return mean, counts


def workloads(rng):
    """(name, function) pairs with the names `robocache bench` uses."""
    out = []
    for batch, samples, count, channels in [(32, 500, 250, 256), (256, 500, 250, 256), (256, 500, 250, 14)]:
        data = values(rng, (batch, samples, channels))
        s, q = epoch_times(samples, 100.0), targets_for(samples, count)
        out.append((f"resample f32 {batch}x{samples}->{count} D={channels}", lambda d=data, s=s, q=q: numpy_resample(d, s, q)))
    streams = [(values(rng, (32, n, d)), epoch_times(n, hz)) for n, d, hz in [(150, 512, 30.0), (500, 14, 100.0), (50, 7, 10.0)]]
    q = epoch_times(250, 50.0)

    def fusion():
        parts = [numpy_resample(d, s, q) for d, s in streams]
        return np.concatenate([p[0] for p in parts], axis=2), np.stack([p[1] for p in parts])

    out.append(("fusion f32 B=32: 150x512, 500x14, 50x7 -> 250", fusion))
    points = ((values(rng, (1_000_000, 3)) + 1.0) * 0.5 * 6.4).astype(np.float32)
    features = values(rng, (1_000_000, 4))
    out.append(("voxelize count 1000000 points 128^3 F=0", lambda: numpy_voxelize(points, None, 128, 0.05)))
    out.append(("voxelize mean 1000000 points 128^3 F=4", lambda: numpy_voxelize(points, features, 128, 0.05)))
    return out


def median_us(function, repeats):
    function()
    function()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append((time.perf_counter() - start) * 1e6)
    return sorted(samples)[len(samples) // 2]


def check_same_numbers(robocache, rng):
    """robocache's CLI and NumPy agree on one workload (float32 rounding apart)."""
    data = values(rng, (4, 500, 9))
    s, q = epoch_times(500, 100.0), targets_for(500, 250)
    want, want_valid = numpy_resample(data, s, q)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {name: os.path.join(tmp, name + ".npy") for name in ["x", "t", "q", "out"]}
        np.save(paths["x"], data)
        np.save(paths["t"], s)
        np.save(paths["q"], q)
        subprocess.run([robocache, "resample", "--backend", "cpu", "--data", paths["x"], "--times", paths["t"],
                        "--targets", paths["q"], "--output", paths["out"]], check=True, capture_output=True)
        got = np.load(paths["out"])
        got_valid = np.load(os.path.join(tmp, "out.valid.npy"))
    assert np.array_equal(got_valid, want_valid), "valid masks differ"
    error = np.max(np.abs(got - want))
    assert error <= 1e-6, f"robocache and NumPy differ by {error}"
    return error


def robocache_bench(robocache, repeats, threads):
    env = dict(os.environ)
    if threads:
        env["RAYON_NUM_THREADS"] = str(threads)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.json")
        subprocess.run([robocache, "bench", "--backend", "cpu", "--repeats", str(repeats), "--json", path],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return {r["name"]: r["median_us"] for r in json.load(f)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robocache", required=True, help="path to the release robocache binary")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", help="write the table as JSON here")
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    error = check_same_numbers(args.robocache, rng)
    print(f"check: robocache and NumPy agree (max abs difference {error:.2e})")
    ours = robocache_bench(args.robocache, args.repeats, None)
    ours_one = robocache_bench(args.robocache, args.repeats, 1)
    theirs = {name: median_us(f, args.repeats) for name, f in workloads(rng)}

    cores = os.cpu_count()
    print(f"machine: {cores} cores; NumPy {np.__version__}; median of {args.repeats} calls after 2 warm-ups")
    header = f"{'workload':<48} {'NumPy µs':>11} {'robocache 1T':>13} {f'robocache {cores}T':>13} {'speedup':>8} {'scaling':>8}"
    print(header)
    rows = []
    for name, numpy_us in theirs.items():
        ours_us, one_us = ours[name], ours_one[name]
        rows.append({"workload": name, "numpy_us": numpy_us, "robocache_1_thread_us": one_us,
                     "robocache_us": ours_us, "speedup": numpy_us / ours_us, "threads": cores})
        print(f"{name:<48} {numpy_us:>11.0f} {one_us:>13.0f} {ours_us:>13.0f} {numpy_us / ours_us:>7.1f}x {one_us / ours_us:>7.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())

"""Live observation windows at deployment: robocache.Live against the code a
user writes today, in one process, on the same samples.

Workload (issue 57): 8 low-dimensional streams — joint positions,
velocities and efforts (7 each, 500 Hz), IMU orientation (quaternion),
angular velocity and linear acceleration (200 Hz), gripper (discrete,
10 Hz), a tf pair (translation + quaternion, 100 Hz) — on a 30 Hz policy
clock with history 2 (3 steps a window), causal, z-scored. Then the same
with two 480x640 cameras at 30 Hz, cropped to the centre 480x480 and
resized to 224x224, float32 channels first.

A pusher thread delivers every stream at its real rate (paced by
``time.perf_counter``) while the main thread calls ``window(now)`` at 30 Hz
for ``--seconds``, then in a tight loop ``--calls`` times. Each latency is
from the call until the tensors are ready (``torch.cuda.synchronize()`` on
CUDA). Compared:

- ``robocache.Live`` on the CPU (NumPy arrays) and on CUDA (torch tensors);
- ``python``: what a policy server does today — a ``collections.deque`` per
  stream, ``np.interp``/``searchsorted`` hold onto the window's times,
  z-scoring in NumPy, ``torch.from_numpy(...).to(device)``; cameras: the
  frames held, uploaded, cropped and resized with torchvision's
  ``v2.functional.resize`` (antialias), divided by 255.

    python3 live_windows.py --device cuda:0 --json live.json
"""
import argparse
import collections
import json
import os
import tempfile
import threading
import time

import numpy as np

LOW_DIM = [  # name, channels, rate, kind
    ("obs/joint_pos", 7, 500, "continuous"),
    ("obs/joint_vel", 7, 500, "continuous"),
    ("obs/joint_effort", 7, 500, "continuous"),
    ("obs/imu_quat", 4, 200, "quaternion-xyzw"),
    ("obs/imu_gyro", 3, 200, "continuous"),
    ("obs/imu_accel", 3, 200, "continuous"),
    ("obs/gripper", 1, 10, "discrete"),
    ("obs/tf", 7, 100, "0..3:continuous,3..7:quaternion-xyzw"),
]
CAMERAS = [("obs/left_image", 30), ("obs/right_image", 30)]
HZ, HISTORY = 30.0, 2


def write_dataset(path, seconds=3.0, cameras=True):
    """Two recorded episodes of the workload (robomimic layout, h5py)."""
    import h5py

    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Live", "env_kwargs": {"control_freq": HZ}})
        for e in range(2):
            demo = data.create_group(f"demo_{e}")
            demo.attrs["num_samples"] = int(seconds * HZ) + 1
            demo.create_dataset("actions", data=rng.standard_normal((int(seconds * HZ) + 1, 7)).astype(np.float32))
            for name, channels, rate, kind in LOW_DIM:
                n = int(seconds * rate) + 1
                values = rng.standard_normal((n, channels)).astype(np.float32)
                if "quat" in kind:
                    q = values[:, -4:]
                    values[:, -4:] = q / np.linalg.norm(q, axis=1, keepdims=True)
                if kind == "discrete":
                    values = (values > 0).astype(np.float32)
                d = demo.create_dataset(name, data=values)
                d.attrs["rate_hz"] = float(rate)
                d.attrs["robocache_kind"] = kind
            if cameras:
                for name, rate in CAMERAS:
                    n = int(seconds * rate) + 1
                    d = demo.create_dataset(name, data=rng.integers(0, 256, (n, 480, 640, 3), dtype=np.uint8))
                    d.attrs["rate_hz"] = float(rate)


class Pusher(threading.Thread):
    """Delivers every stream at its real rate until stopped."""

    def __init__(self, push, streams, frames):
        super().__init__(daemon=True)
        self.push, self.streams, self.frames = push, streams, frames
        self.stop = threading.Event()
        self.pushed = 0

    def run(self):
        rng = np.random.default_rng(1)
        rows = {name: rng.standard_normal(channels).astype(np.float32) for name, channels, _, _ in LOW_DIM}
        rows["obs/imu_quat"] /= np.linalg.norm(rows["obs/imu_quat"])
        rows["obs/tf"][3:] /= np.linalg.norm(rows["obs/tf"][3:])
        start = time.perf_counter()
        due = {name: start for name, _ in self.streams}
        period = dict(self.streams)
        while not self.stop.is_set():
            name = min(due, key=due.get)
            wait = due[name] - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            t = due[name]
            value = self.frames[self.pushed % len(self.frames)] if name in dict(CAMERAS) else rows[name]
            self.push(name, t, value)
            self.pushed += 1
            due[name] = t + 1.0 / period[name]


class PythonWindows:
    """What a policy server does today (module docs)."""

    def __init__(self, stats, device, cameras):
        import torch

        self.torch, self.device, self.cameras = torch, device, cameras
        self.stats = stats
        self.lock = threading.Lock()
        self.buffers = {name: collections.deque(maxlen=2 * rate) for name, _, rate, _ in LOW_DIM}
        for name, rate in CAMERAS if cameras else []:
            self.buffers[name] = collections.deque(maxlen=8)

    def push(self, name, t, value):
        with self.lock:
            self.buffers[name].append((t, np.array(value, copy=True)))

    def window(self, t):
        torch = self.torch
        targets = t + (np.arange(HISTORY + 1) - HISTORY) / HZ
        out = {}
        with self.lock:
            snap = {name: list(buffer) for name, buffer in self.buffers.items()}
        for name, _, _, kind in LOW_DIM:
            times = np.array([s[0] for s in snap[name]])
            values = np.stack([s[1] for s in snap[name]])
            at = np.clip(np.searchsorted(times, targets, side="right") - 1, 0, len(times) - 1)  # hold (causal)
            held = values[at]
            mean, std = self.stats[name]
            continuous = np.ones(held.shape[1], bool)
            if kind == "discrete":
                continuous[:] = False
            elif "quat" in kind:
                continuous[-4:] = False
            held = np.where(continuous, (held - mean) / std, held).astype(np.float32)
            out[name] = torch.from_numpy(held[None]).to(self.device, non_blocking=False)
            out[name + "_is_pad"] = torch.from_numpy((targets < times[0])[None]).to(self.device)
        if self.cameras:
            from torchvision.transforms.v2 import functional as F

            for name, _ in CAMERAS:
                times = np.array([s[0] for s in snap[name]])
                at = np.clip(np.searchsorted(times, targets, side="right") - 1, 0, len(times) - 1)
                frames = torch.from_numpy(np.stack([snap[name][i][1] for i in at])).to(self.device)
                crop = frames.permute(0, 3, 1, 2)[..., :, 80:560]
                resized = F.resize(crop, [224, 224], antialias=True)
                out[name] = (resized.float() / 255.0)[None]
        return out


def percentiles(seconds):
    us = np.array(seconds) * 1e6
    return {"p50_us": float(np.percentile(us, 50)), "p99_us": float(np.percentile(us, 99)),
            "p99.9_us": float(np.percentile(us, 99.9)), "calls": len(us)}


def measure(make, device, args, cameras, frames):
    import torch

    windows = make()
    streams = [(name, rate) for name, _, rate, _ in LOW_DIM] + (CAMERAS if cameras else [])
    pusher = Pusher(windows.push, streams, frames)
    pusher.start()
    time.sleep(0.5)  # every stream has samples, the rings fill
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def call():
        start = time.perf_counter()
        window = windows.window(time.perf_counter())
        sync()
        elapsed = time.perf_counter() - start
        del window
        return elapsed

    def wait_for(tick):
        # Sleeping leaves the core idle until the next tick; `--spin` waits
        # in a loop instead (a policy server's choice: one core kept busy).
        if args.spin:
            while time.perf_counter() < tick:
                pass
        else:
            time.sleep(max(0.0, tick - time.perf_counter()))

    for _ in range(20):
        call()
    paced, deadline = [], time.perf_counter() + args.seconds
    while time.perf_counter() < deadline:
        tick = time.perf_counter()
        paced.append(call())
        wait_for(tick + 1 / HZ)
    tight = [call() for _ in range(args.calls)]
    pusher.stop.set()
    pusher.join()
    # No pushes in flight: the window's own cost, without the pusher
    # thread's share of the GIL and the cores; at 30 Hz (a thread waking
    # from sleep each tick) and back to back.
    paced_quiet, deadline = [], time.perf_counter() + args.seconds
    while time.perf_counter() < deadline:
        tick = time.perf_counter()
        paced_quiet.append(call())
        wait_for(tick + 1 / HZ)
    quiet = [call() for _ in range(args.calls)]
    return {"paced_30hz": percentiles(paced), "tight": percentiles(tight), "paced_quiet": percentiles(paced_quiet),
            "quiet": percentiles(quiet), "pushed": pusher.pushed}


def copy_bandwidth(device):
    """Host-to-device bandwidth of a pinned 64 MiB copy (GB/s) and the
    latency of a 1 KiB pageable copy (us): the floor's terms."""
    import torch

    big = torch.empty(64 << 20, dtype=torch.uint8).pin_memory()
    gpu = torch.empty_like(big, device=device)
    for _ in range(3):
        gpu.copy_(big, non_blocking=True)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        gpu.copy_(big, non_blocking=True)
    torch.cuda.synchronize()
    bandwidth = 10 * big.numel() / (time.perf_counter() - start) / 1e9
    small, small_gpu = torch.zeros(1024, dtype=torch.uint8), torch.empty(1024, dtype=torch.uint8, device=device)
    times = []
    for _ in range(200):
        start = time.perf_counter()
        small_gpu.copy_(small)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return bandwidth, float(np.median(times) * 1e6)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--spin", action="store_true", help="wait for each 30 Hz tick in a loop, not asleep")
    parser.add_argument("--low-dim-only", action="store_true", help="leave the cameras' workload out")
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch

    import robocache

    results = {"device": args.device, "robocache": robocache.__version__, "spin": args.spin, "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "live.hdf5")
        write_dataset(path)
        low = [name for name, *_ in LOW_DIM]
        cams = [name for name, _ in CAMERAS]
        loader = robocache.Loader(path, low + cams, windows={"hz": HZ, "history": HISTORY, "horizon": 1, "causal": True},
                                  batch_size=8, device="cpu", normalization="zscore", frame_size=(224, 224),
                                  frame_crop=(0, 80, 480, 480), frame_layout="chw", frame_dtype="float32")
        spec = loader.spec()
        stats = {name: (np.array(s["mean"], np.float32), np.array(s["std"], np.float32))
                 for name, s in spec.to_dict()["normalization"]["streams"].items()}
    rng = np.random.default_rng(2)
    frames = [rng.integers(0, 256, (480, 640, 3), dtype=np.uint8) for _ in range(4)]
    devices = ["cpu"] + ([args.device] if args.device.startswith("cuda") else [])
    for cameras in (False,) if args.low_dim_only else (False, True):
        for device in devices:
            if cameras and device == "cpu":
                continue  # the cameras' crop and resize run on the GPU
            streams = low + (cams if cameras else [])
            cases = [("robocache.Live", lambda: robocache.Live(spec, device=device, streams=streams))]
            if device.startswith("cuda"):
                cases.append(("python (deque, np, torch)", lambda: PythonWindows(stats, device, cameras)))
            for name, make in cases:
                row = {"workload": "8 low-dim + 2 cameras" if cameras else "8 low-dim", "device": device, "code": name}
                row.update(measure(make, device, args, cameras, frames))
                results["rows"].append(row)
                print(json.dumps(row), flush=True)
    if args.device.startswith("cuda"):
        bandwidth, small = copy_bandwidth(args.device)
        results["h2d_pinned_gb_s"], results["h2d_1kib_us"] = bandwidth, small
    print(f"\nfloor: a 1 KiB host-to-device copy {results.get('h2d_1kib_us', float('nan')):.1f} us, "
          f"pinned bandwidth {results.get('h2d_pinned_gb_s', float('nan')):.1f} GB/s")
    print("us, p50/p99/p99.9. 30 Hz: window() at the policy rate while the pusher runs; tight: back to back "
          "while it runs; 30 Hz quiet and quiet: the same with no pushes in flight")
    columns = ("paced_30hz", "tight", "paced_quiet", "quiet")
    print(f"{'workload':<22}{'device':<7}{'code':<27}" + "".join(f"{c:>22}" for c in columns))
    for row in results["rows"]:
        cells = "".join(f"{row[k]['p50_us']:>8.0f}/{row[k]['p99_us']:.0f}/{row[k]['p99.9_us']:.0f}".rjust(22)
                        for k in columns)
        print(f"{row['workload']:<22}{row['device']:<7}{row['code']:<27}{cells}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

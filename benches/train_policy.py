"""End to end: a diffusion policy trained in PyTorch on batches from robomimic's
loader, from robocache's Loader, and from a synthetic in-GPU batch (no
loading: the ceiling), with the same model, optimizer, batch and windows;
and on a LeRobot root (camera video), from LeRobotDataset + DataLoader and
from robocache's Loader, with and without its decoded-frame cache.

The script writes its own robomimic-layout file at the scale of robomimic's
"can" task (200 demos, about 22k steps at 20 Hz; two 84x84 cameras, the
agent view and the wrist; end-effector position, quaternion, gripper; 7-D
actions; and a 100 Hz joint stream with a ``rate_hz`` attribute for the
time windows). Windows: observation history 2 and an action chunk of 16,
as robomimic step windows (``frame_stack=2, seq_length=16``: every stream
17 steps, the model reads the first two observation steps) and, for
robocache, as time windows on a 50 Hz clock (``history=1, horizon=16``).

Models (bf16 autocast, AdamW): a ResNet-18 image encoder per camera (group
norm, as diffusion policy), the low-dimensional observations, and a
denoiser over the action chunk: ``small`` a 1-D temporal U-Net with FiLM
conditioning (diffusion policy's CNN), ``large`` a transformer (about 100M
parameters with the encoders). One DDPM step of 100 noise levels.

Measured per configuration, after warm-up, over the same steps: steps/s,
samples/s, the host's wait for the next batch per step (LeRobot's
``dataloading_s``), the GPU's busy share (NVML utilization sampled by
``nvidia-smi`` in the background, and the share of wall time the steps'
CUDA work covers, from events), and the host's CPU use (/proc/stat).

    python benches/train_policy.py --out results/          # one GPU
    python benches/train_policy.py --lerobot-root ROOT --models small \
        --feeds lerobot-8,lerobot-16,robocache-lerobot-16,robocache-lerobot-cache-16

The LeRobot feeds read a root that ``benches/lerobot_loader.py write`` makes
(two 480x640 cameras, a 14-D state and action): windows of LeRobot's
``delta_timestamps`` (2 frames per camera and state, 16 actions), the frames
resized on the GPU to ``--lerobot-image`` inside the model's step (as a
policy's preprocessing would). ``robocache-lerobot-cache-N`` reads one whole
epoch first (the cache filled, its time reported as ``cache_fill_s``), then
trains on the epochs after it; ``robocache-lerobot-gpucache-N`` does the
same with the frame cache on the GPU (``device_frame_cache_bytes``), its
frames resized to ``--lerobot-image`` by the loader as they are first
decoded.
    torchrun --nproc_per_node 2 benches/train_policy.py --ddp --out results/

Under ``--ddp`` each rank trains with DistributedDataParallel on its local
GPU, robocache's Loader sharded from the torchrun environment and
robomimic's loader through ``DistributedSampler``; one epoch's sample ids
of every rank are gathered and each sample must be used exactly once.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lerobot_loader import CAMERAS as LEROBOT_CAMERAS, deltas  # noqa: E402 (LeRobot's windows, written once)

CAMERAS = ("agentview_image", "robot0_eye_in_hand_image")
LOW_DIM = ("robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos")
LOW_DIM_WIDTH = 3 + 4 + 2
ACTION_DIM = 7
OBS_STEPS = 2
CHUNK = 16
CONTROL_HZ = 20.0
# What the model sees: cameras, low-dimensional width per step, action width.
ROBOMIMIC_SPEC = {"cameras": len(CAMERAS), "low_dim": LOW_DIM_WIDTH + 7, "action": ACTION_DIM}
LEROBOT_SPEC = {"cameras": 2, "low_dim": 14, "action": 14}


# ---- the dataset --------------------------------------------------------------------------------------------------

def write_dataset(path, demos, mean_steps, image, seed=0):
    """A robomimic-layout file written with h5py (contiguous datasets, as
    robomimic's conversion scripts write them)."""
    import h5py

    rng = np.random.default_rng(seed)
    base = {cam: rng.integers(0, 256, size=(image, image, 3), dtype=np.uint8) for cam in CAMERAS}
    names, total = [], 0
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps(
            {"env_name": "PickPlaceCan", "type": 1, "env_kwargs": {"control_freq": CONTROL_HZ, "robots": ["Panda"]}})
        for d in range(demos):
            n = int(round(mean_steps * rng.uniform(0.75, 1.25)))
            demo = data.create_group(f"demo_{d}")
            demo.attrs["num_samples"] = n
            walk = lambda width: np.tanh(np.cumsum(rng.standard_normal((n, width)) * 0.05, axis=0)).astype(np.float32)
            demo["actions"] = walk(ACTION_DIM)
            demo["rewards"] = (np.arange(n) == n - 1).astype(np.float64)
            demo["dones"] = (np.arange(n) == n - 1).astype(np.int64)
            obs = demo.create_group("obs")
            obs["robot0_eef_pos"] = walk(3)
            q = walk(4) + np.array([0, 0, 0, 1.5], dtype=np.float32)
            obs["robot0_eef_quat"] = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
            obs["robot0_gripper_qpos"] = walk(2)
            for c, cam in enumerate(CAMERAS):
                shifts = (np.arange(n) * (c + 1)) % image
                obs[cam] = np.stack([np.roll(base[cam], int(s), axis=1) for s in shifts])
            joints = int(math.floor((n - 1) / CONTROL_HZ * 100.0)) + 1
            joint = obs.create_dataset("joint_pos", data=np.sin(
                np.arange(joints)[:, None] / 100.0 + np.arange(7)[None, :]).astype(np.float32))
            joint.attrs["rate_hz"] = 100.0
            names.append(f"demo_{d}")
            total += n
        data.attrs["total"] = total
        f.create_dataset("mask/train", data=np.array(names, dtype="S"))
    return total


# ---- the model ----------------------------------------------------------------------------------------------------

def build_model(size, image, spec):
    """The policy; it reads a batch as every feed yields it: ``images`` (one
    ``[B, OBS_STEPS, C, H, W]`` tensor per camera, uint8 or float in [0, 1],
    resized to ``image`` when larger), ``low_dim`` ``[B, OBS_STEPS, D]``,
    ``actions`` ``[B, CHUNK, A]``."""
    import torch
    from torch import nn

    def norm(channels):
        return nn.GroupNorm(channels // 16, channels)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.n1 = norm(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.n2 = norm(cout)
            self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), norm(cout))
                         if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):
            y = torch.relu(self.n1(self.conv1(x)))
            return torch.relu(self.n2(self.conv2(y)) + self.skip(x))

    class ResNet18(nn.Module):
        """torchvision's ResNet-18 layout with group norm; 512 features."""

        def __init__(self):
            super().__init__()
            layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), norm(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
            cin = 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
                cin = cout
            self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())

        def forward(self, x):
            return self.body(x)

    def timestep_embedding(t, dim):
        half = dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
        args = t.float()[:, None] * freqs[None]
        return torch.cat([args.sin(), args.cos()], dim=-1)

    class Conditioning(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.encoders = nn.ModuleList([ResNet18() for _ in range(spec["cameras"])])
            self.project = nn.Linear(OBS_STEPS * (512 * spec["cameras"] + spec["low_dim"]), width)

        def forward(self, images, low_dim):
            b = low_dim.shape[0]
            features = [enc(img.flatten(0, 1)).view(b, -1) for enc, img in zip(self.encoders, images)]
            return self.project(torch.cat(features + [low_dim.flatten(1)], dim=-1))

    class FiLMBlock(nn.Module):
        def __init__(self, cin, cout, cond):
            super().__init__()
            self.conv1 = nn.Sequential(nn.Conv1d(cin, cout, 5, padding=2), nn.GroupNorm(8, cout), nn.Mish())
            self.conv2 = nn.Sequential(nn.Conv1d(cout, cout, 5, padding=2), nn.GroupNorm(8, cout), nn.Mish())
            self.film = nn.Linear(cond, 2 * cout)
            self.skip = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x, c):
            scale, bias = self.film(c).unsqueeze(-1).chunk(2, dim=1)
            return self.conv2(self.conv1(x) * (1 + scale) + bias) + self.skip(x)

    class UNet1D(nn.Module):
        """Diffusion policy's conditional 1-D U-Net (two levels)."""

        def __init__(self, cond):
            super().__init__()
            self.down1 = FiLMBlock(spec["action"], 256, cond)
            self.down2 = FiLMBlock(256, 512, cond)
            self.mid = FiLMBlock(512, 512, cond)
            self.up2 = FiLMBlock(1024, 256, cond)
            self.up1 = FiLMBlock(512, 256, cond)
            self.out = nn.Conv1d(256, spec["action"], 1)

        def forward(self, x, c):
            x = x.transpose(1, 2)
            h1 = self.down1(x, c)
            h2 = self.down2(nn.functional.avg_pool1d(h1, 2), c)
            m = self.mid(h2, c)
            u2 = self.up2(torch.cat([m, h2], 1), c)
            u1 = self.up1(torch.cat([nn.functional.interpolate(u2, scale_factor=2), h1], 1), c)
            return self.out(u1).transpose(1, 2)

    class Transformer(nn.Module):
        def __init__(self, width, layers, heads):
            super().__init__()
            self.embed = nn.Linear(spec["action"], width)
            self.position = nn.Parameter(torch.zeros(1, CHUNK + 1, width))
            layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True,
                                               norm_first=True, activation="gelu")
            self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.out = nn.Linear(width, spec["action"])

        def forward(self, x, c):
            tokens = torch.cat([c.unsqueeze(1), self.embed(x)], dim=1) + self.position
            return self.out(self.body(tokens)[:, 1:])

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            width = 256 if size == "small" else 1024
            self.width = width
            self.condition = Conditioning(width)
            self.time = nn.Sequential(nn.Linear(width, width), nn.Mish(), nn.Linear(width, width))
            self.denoiser = UNet1D(width) if size == "small" else Transformer(width, 6, 16)
            steps = 100
            s = 0.008
            x = torch.linspace(0, steps, steps + 1)
            alphas = torch.cos(((x / steps) + s) / (1 + s) * math.pi * 0.5) ** 2
            alphas = (alphas / alphas[0]).clamp(min=1e-4)
            self.register_buffer("alpha_bar", alphas[1:])

        @staticmethod
        def preprocess(frames):
            """[B, T, C, H, W] frames: float in [0, 1], at most `image` pixels a side."""
            x = frames if frames.is_floating_point() else frames.float().div(255.0)
            b, t = x.shape[:2]
            if max(x.shape[-2:]) > image:
                x = nn.functional.interpolate(x.flatten(0, 1), size=(image, image), mode="bilinear",
                                              antialias=False).unflatten(0, (b, t))
            return x

        def forward(self, batch):
            """The DDPM loss of one batch: noise predicted at a random level."""
            images = [self.preprocess(x) for x in batch["images"]]
            low_dim = batch["low_dim"].float()
            actions = batch["actions"].float()
            b = actions.shape[0]
            t = torch.randint(0, self.alpha_bar.shape[0], (b,), device=actions.device)
            noise = torch.randn_like(actions)
            ab = self.alpha_bar[t].view(b, 1, 1)
            noisy = ab.sqrt() * actions + (1 - ab).sqrt() * noise
            c = self.condition(images, low_dim) + self.time(timestep_embedding(t, self.width))
            return nn.functional.mse_loss(self.denoiser(noisy, c).float(), noise)

    return Policy()


# ---- the feeds ----------------------------------------------------------------------------------------------------

def joint_columns(batch, key, steps):
    """A [B, T, 7] joint stream when the feed has one, else zeros (step windows)."""
    import torch

    value = batch.get(key)
    if value is None:
        any_tensor = batch["actions"]
        return torch.zeros(any_tensor.shape[0], steps, 7, device=any_tensor.device)
    return value.float()


def robomimic_batch(images, low_dim, actions):
    """The model's batch from robomimic-style step windows (``OBS_STEPS - 1 + CHUNK``
    steps, frames ``[B, T, H, W, C]``): the observation steps and the action
    chunk from the last of them (views, no copies)."""
    return {"images": [x[:, :OBS_STEPS].permute(0, 1, 4, 2, 3) for x in images], "low_dim": low_dim[:, :OBS_STEPS],
            "actions": actions[:, OBS_STEPS - 1:OBS_STEPS - 1 + CHUNK]}


def robomimic_feed(args, device, workers, cache_mode, rank, world_size, epoch_ids=None):
    import torch
    from torch.utils.data import DataLoader, DistributedSampler
    import robomimic.utils.obs_utils as ObsUtils
    from robomimic.utils.dataset import SequenceDataset

    ObsUtils.initialize_obs_modality_mapping_from_dict({"low_dim": list(LOW_DIM), "rgb": list(CAMERAS)})
    dataset = SequenceDataset(
        hdf5_path=args.file, obs_keys=list(LOW_DIM + CAMERAS), dataset_keys=["actions"],
        frame_stack=OBS_STEPS, seq_length=CHUNK, pad_frame_stack=True, pad_seq_length=True, get_pad_mask=True,
        goal_mode=None, hdf5_cache_mode=cache_mode, hdf5_use_swmr=True, hdf5_normalize_obs=False,
        filter_by_attribute=None, load_next_obs=False)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True) if world_size > 1 else None
    loader = DataLoader(dataset, batch_size=args.batch, shuffle=sampler is None, sampler=sampler,
                        num_workers=workers, drop_last=True, pin_memory=True, persistent_workers=workers > 0,
                        prefetch_factor=4 if workers > 0 else None)

    def batches():
        epoch = 0
        while True:
            if sampler is not None:
                sampler.set_epoch(epoch)
            for batch in loader:
                obs = batch["obs"]
                images = [obs[cam].to(device, non_blocking=True) for cam in CAMERAS]
                low = torch.cat([obs[k] for k in LOW_DIM], dim=-1).to(device, non_blocking=True)
                low_dim = torch.cat([low, torch.zeros(*low.shape[:2], 7, device=device)], dim=-1)
                yield robomimic_batch(images, low_dim, batch["actions"].to(device, non_blocking=True))
            epoch += 1

    # The indices one epoch visits on this rank.
    ids = list(iter(sampler)) if sampler is not None else list(range(len(dataset)))
    return batches(), len(dataset), ids


def robocache_feed(args, device, windows, rank, world_size, augment=None):
    import torch
    import robocache

    streams = [f"obs/{k}" for k in CAMERAS + LOW_DIM] + ["actions"]
    if "hz" in windows:
        streams.append("obs/joint_pos")
    loader = robocache.Loader(args.file, streams, windows=windows, batch_size=args.batch, device=device,
                              seed=0, drop_last=True, workers=args.robocache_workers, prefetch=4,
                              rank=rank, world_size=world_size, augment=augment)
    steps = OBS_STEPS - 1 + CHUNK

    def batches():
        epoch = 0
        while True:
            loader.set_epoch(epoch)
            for batch in loader:
                low = torch.cat([batch[f"obs/{k}"] for k in LOW_DIM], dim=-1)
                low_dim = torch.cat([low, joint_columns(batch, "obs/joint_pos", steps)], dim=-1)
                out = robomimic_batch([batch[f"obs/{cam}"] for cam in CAMERAS], low_dim, batch["actions"])
                out["sample_index"] = batch["sample_index"]
                yield out
            epoch += 1

    return batches(), loader


def lerobot_fps(root):
    with open(os.path.join(root, "meta", "info.json")) as f:
        return json.load(f)["fps"]


def lerobot_batch(batch, device):
    """The model's batch from a LeRobot-collated batch (frames ``[B, T, C, H, W]``)."""
    return {"images": [batch[cam].to(device, non_blocking=True) for cam in LEROBOT_CAMERAS],
            "low_dim": batch["observation.state"].to(device, non_blocking=True),
            "actions": batch["action"].to(device, non_blocking=True)}


def lerobot_feed(args, device, workers):
    """LeRobotDataset + DataLoader, LeRobot's default video backend (torchcodec)."""
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("robocache/bench", root=args.lerobot_root, delta_timestamps=deltas(
        lerobot_fps(args.lerobot_root)), video_backend=args.lerobot_backend)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=workers,
                                         pin_memory=True, drop_last=True, persistent_workers=workers > 0,
                                         prefetch_factor=4 if workers > 0 else None)

    def batches():
        while True:
            for batch in loader:
                yield lerobot_batch(batch, device)

    return batches()


def robocache_lerobot_feed(args, device, workers, cache_bytes, on_gpu=False):
    """robocache's Loader over the LeRobot root, uint8 frames; with a frame
    cache (in host memory, or `on_gpu` with the frames resized to
    `--lerobot-image` as they are first decoded), one epoch read first to
    fill it (its time returned)."""
    import torch  # noqa: F401 (a CUDA loader's batches are torch tensors)
    import robocache

    host_bytes, gpu_bytes = (0, cache_bytes) if on_gpu else (cache_bytes, 0)
    size = (args.lerobot_image, args.lerobot_image) if on_gpu else None
    loader = robocache.Loader(args.lerobot_root, None, delta_timestamps=deltas(lerobot_fps(args.lerobot_root)),
                              batch_size=args.batch, shuffle=True, workers=workers, prefetch=2 * workers,
                              device=device, drop_last=True, return_uint8=True, frame_cache_bytes=host_bytes,
                              device_frame_cache_bytes=gpu_bytes, frame_size=size)
    batches, fill_s = epochs_after_fill(loader, cache_bytes, lambda batch: lerobot_batch(batch, device))
    loader.reset_telemetry()  # the cache's hit rate over the training epochs only
    return batches, loader, fill_s


def epochs_after_fill(loader, cache_bytes, convert):
    """The model's batches (`convert` of each), epoch after epoch; with a
    frame cache, one whole epoch read first to fill it (its seconds returned)."""
    fill_s = None
    if cache_bytes:
        started = time.perf_counter()
        for _ in loader:
            pass
        fill_s = time.perf_counter() - started

    def batches():
        epoch = 1 if cache_bytes else 0
        while True:
            loader.set_epoch(epoch)
            for batch in loader:
                yield convert(batch)
            epoch += 1

    return batches(), fill_s


def robocache_mixture_feed(args, device, workers, cache_bytes):
    """A LeRobot root (camera video, its decoded-frame cache) and an RLDS
    directory (a JPEG camera) as one weighted mixture (`robocache.Loader([...])`,
    weights `--mixture-weights`): LeRobot's delta_timestamps in each
    dataset's own clock (2 frames of each camera and of the state, 16
    actions), every camera resized to `--lerobot-image` by its member's
    loader, state and action padded to the widest (14) with `*_dim_is_pad`;
    the RLDS dataset has no wrist camera (padding). An epoch runs until the
    LeRobot member's windows are used up, so the first one, read before
    training, fills its frame cache (its time returned)."""
    import torch  # noqa: F401 (a CUDA loader's batches are torch tensors)
    import robocache

    fps = lerobot_fps(args.lerobot_root)
    rlds = robocache.open(args.rlds, rate_hz=10.0)
    rlds_deltas = {"observation/image": [-0.1, 0.0], "observation/state": [-0.1, 0.0],
                   "action": [k / 10 for k in range(CHUNK)]}
    weights = [float(w) for w in args.mixture_weights.split(":")]
    loader = robocache.Loader([
        {"dataset": args.lerobot_root, "name": "lerobot", "weight": weights[0], "delta_timestamps": deltas(fps),
         "frame_cache_bytes": cache_bytes,
         "keys": {"front": LEROBOT_CAMERAS[0], "wrist": LEROBOT_CAMERAS[1], "state": "observation.state",
                  "action": "action"}},
        {"dataset": rlds, "name": "rlds", "weight": weights[1], "delta_timestamps": rlds_deltas,
         "keys": {"front": "observation/image", "state": "observation/state", "action": "action"}},
    ], batch_size=args.batch, device=device, return_uint8=True, frame_size=(args.lerobot_image, args.lerobot_image),
        until_exhausted="lerobot", drop_last=True, mixture_workers=workers, prefetch=2 * workers, workers=workers,
        **({} if args.mixture_batches_together is None else {"batches_together": args.mixture_batches_together}))
    batches, fill_s = epochs_after_fill(loader, cache_bytes, lambda batch: {
        "images": [batch["front"], batch["wrist"]], "low_dim": batch["state"], "actions": batch["action"]})
    return batches, loader, fill_s


def synthetic_feed(args, device):
    import torch

    steps = OBS_STEPS - 1 + CHUNK
    g = torch.Generator(device=device).manual_seed(0)
    images = [torch.randint(0, 256, (args.batch, steps, args.image, args.image, 3), generator=g, device=device,
                            dtype=torch.uint8) for _ in CAMERAS]
    batch = robomimic_batch(images, torch.randn(args.batch, steps, LOW_DIM_WIDTH + 7, generator=g, device=device),
                            torch.randn(args.batch, steps, ACTION_DIM, generator=g, device=device))

    def batches():
        while True:
            yield batch

    return batches()


# ---- measurement --------------------------------------------------------------------------------------------------

class Utilization:
    """NVML GPU utilization, sampled every 100 ms by nvidia-smi in the background."""

    def __init__(self, gpu):
        self.samples = []
        self.marks = []
        try:
            self.process = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100",
                 "-i", str(gpu)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self.process = None
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            try:
                self.samples.append((time.perf_counter(), float(line.strip())))
            except ValueError:
                pass

    def mean_between(self, start, end):
        values = [v for t, v in self.samples if start <= t <= end]
        return sum(values) / len(values) if values else float("nan")

    def stop(self):
        if self.process is not None:
            self.process.terminate()


def cpu_times():
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields), idle


def train(args, model, feed, device, utilization, label, world_size):
    """Warm-up, then `args.steps` measured steps; returns the figures."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-6)

    def step(batch):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(args.warmup):
        step(next(feed))
    torch.cuda.synchronize()
    events, waits = [], []
    cpu_start = cpu_times()
    start = time.perf_counter()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        batch = next(feed)
        waits.append(time.perf_counter() - t0)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        loss = step(batch)
        end.record()
        events.append((begin, end))
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    cpu_end = cpu_times()
    compute = sum(b.elapsed_time(e) for b, e in events) / 1e3
    total, idle = cpu_end[0] - cpu_start[0], cpu_end[1] - cpu_start[1]
    cores = os.cpu_count() or 1
    return {
        "config": label,
        "steps": args.steps,
        "steps_per_s": args.steps / wall,
        "samples_per_s": args.steps * args.batch * world_size / wall,
        "ms_per_step": wall * 1e3 / args.steps,
        "compute_ms_per_step": compute * 1e3 / args.steps,
        "wait_ms_per_step": sum(waits) * 1e3 / args.steps,
        "wait_ms_median": float(np.median(waits)) * 1e3,
        "wait_ms_max": max(waits) * 1e3,
        "stall_fraction": max(0.0, 1.0 - compute / wall),
        "gpu_event_busy": min(1.0, compute / wall),
        "nvml_utilization": utilization.mean_between(start, start + wall) / 100.0 if utilization else float("nan"),
        "host_cores_busy": (1 - idle / total) * cores if total > 0 else float("nan"),
        "loss": float(loss.detach()),
    }


def svg_plot(results, path):
    """Stacked bars, ms per step: GPU compute and the rest (waiting), per configuration."""
    width, bar, gap, left = 900, 22, 10, 360
    height = 40 + len(results) * (bar + gap)
    top = max(r["ms_per_step"] for r in results) or 1.0
    scale = (width - left - 40) / top
    rows = []
    for i, r in enumerate(results):
        y = 30 + i * (bar + gap)
        c = min(r["compute_ms_per_step"], r["ms_per_step"])
        rows.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end" font-size="12">{r["config"]}</text>')
        rows.append(f'<rect x="{left}" y="{y}" width="{c * scale:.1f}" height="{bar}" fill="#3b7dd8"/>')
        rows.append(f'<rect x="{left + c * scale:.1f}" y="{y}" width="{(r["ms_per_step"] - c) * scale:.1f}" '
                    f'height="{bar}" fill="#e0883a"/>')
        rows.append(f'<text x="{left + r["ms_per_step"] * scale + 4:.1f}" y="{y + 15}" font-size="11">'
                    f'{r["ms_per_step"]:.1f} ms</text>')
    legend = ('<text x="10" y="18" font-size="13">ms per training step: GPU compute (blue), '
              'GPU waiting for data and host (orange)</text>')
    with open(path, "w") as f:
        f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
                f'<rect width="100%" height="100%" fill="white"/>{legend}{"".join(rows)}</svg>\n')


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", default="train-can.hdf5", help="written when absent")
    parser.add_argument("--demos", type=int, default=200)
    parser.add_argument("--mean-steps", type=int, default=110)
    parser.add_argument("--image", type=int, default=84)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--models", default="small,large")
    parser.add_argument("--feeds", default="synthetic,robocache-steps,robocache-times,robomimic-4,robomimic-8",
                        help="synthetic, robocache-steps, robocache-times (each also +augment: --augment per "
                             "sample on the GPU), robocache-once (one robocache batch "
                             "repeated), robomimic-N (num_workers N); on --lerobot-root: lerobot-N (LeRobotDataset "
                             "+ DataLoader, N workers), robocache-lerobot-N (N workers), robocache-lerobot-cache-N "
                             "(with the frame cache, after one epoch that fills it), robocache-lerobot-gpucache-N (the "
                             "frame cache on the GPU, frames resized there to --lerobot-image); with --rlds too: "
                             "robocache-mixture-N and robocache-mixture-cache-N (the LeRobot root and the RLDS "
                             "dataset as one weighted mixture, N workers; with the frame cache)")
    parser.add_argument("--lerobot-root", help="a LeRobot root (benches/lerobot_loader.py write) for the LeRobot feeds")
    parser.add_argument("--lerobot-image", type=int, default=224, help="LeRobot frames resized to this on the GPU")
    parser.add_argument("--lerobot-backend", default="torchcodec", help="LeRobot's video backend (torchcodec, pyav)")
    parser.add_argument("--cache-gib", type=float, default=8.0,
                        help="the frame cache of robocache-lerobot-cache and robocache-lerobot-gpucache")
    parser.add_argument("--rlds", help="an RLDS directory (robocache bench write-rlds) for the mixture feeds")
    parser.add_argument("--mixture-weights", default="1:1", help="LeRobot:RLDS sample weights of the mixture feeds")
    parser.add_argument("--mixture-batches-together", type=int,
                        help="the mixture feeds' batches_together (default: the library's)")
    parser.add_argument("--robomimic-cache", default="low_dim", choices=["low_dim", "all"])
    parser.add_argument("--robocache-workers", type=int, default=4)
    parser.add_argument("--augment", default="lerobot",
                        help="the augmentation of the robocache-steps+augment and robocache-times+augment feeds "
                             "(a preset name: lerobot, act, openpi, groot, diffusion_policy)")
    parser.add_argument("--ddp", action="store_true", help="under torchrun: DDP, sharded loaders, exactly-once check")
    parser.add_argument("--out", default=".")
    args = parser.parse_args()

    import torch

    rank, world_size = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    if args.ddp:
        import torch.distributed as dist

        dist.init_process_group("nccl", device_id=device)
    os.makedirs(args.out, exist_ok=True)
    feeds = args.feeds.split(",")
    lerobot_feeds = [n for n in feeds if n.startswith(("lerobot-", "robocache-lerobot-", "robocache-mixture-"))]
    if any(n.startswith("robocache-mixture-") for n in feeds) and not args.rlds:
        raise SystemExit("the mixture feeds need --rlds: an RLDS directory (robocache bench write-rlds makes one)")
    if lerobot_feeds and not (args.lerobot_root and os.path.isdir(args.lerobot_root)):
        raise SystemExit(f"{', '.join(lerobot_feeds)} need --lerobot-root: a LeRobot root "
                         "(python benches/lerobot_loader.py write ROOT makes one)")
    if lerobot_feeds and args.ddp:
        raise SystemExit("the LeRobot feeds run on one GPU (no --ddp)")
    needs_file = any(n not in lerobot_feeds and n != "synthetic" for n in feeds) or args.ddp
    if rank == 0 and needs_file and not os.path.exists(args.file):
        started = time.perf_counter()
        steps = write_dataset(args.file, args.demos, args.mean_steps, args.image)
        print(f"wrote {args.file}: {args.demos} demos, {steps} steps ({time.perf_counter() - started:.1f} s)",
              flush=True)
    if args.ddp:
        dist.barrier()
    torch.backends.cudnn.benchmark = True
    utilization = Utilization(local_rank) if rank == 0 else None
    results = []
    for size in args.models.split(","):
        for name in feeds:
            torch.manual_seed(0)
            lerobot = name in lerobot_feeds
            model = build_model(size, args.lerobot_image if lerobot else args.image,
                                LEROBOT_SPEC if lerobot else ROBOMIMIC_SPEC).to(device)
            extra = {}
            if args.ddp:
                model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
            params = sum(p.numel() for p in model.parameters())
            if name == "synthetic":
                feed = synthetic_feed(args, device)
            elif name in ("robocache-steps", "robocache-steps+augment"):
                feed, _ = robocache_feed(args, f"cuda:{local_rank}", {"seq_length": CHUNK, "frame_stack": OBS_STEPS},
                                         rank, world_size, augment=args.augment if name.endswith("+augment") else None)
            elif name in ("robocache-times", "robocache-times+augment"):
                feed, _ = robocache_feed(args, f"cuda:{local_rank}", {"hz": 50.0, "history": OBS_STEPS - 1,
                                                                      "horizon": CHUNK}, rank, world_size,
                                         augment=args.augment if name.endswith("+augment") else None)
            elif name == "robocache-once":
                # One robocache batch, repeated: its tensors without any loading
                # going on (tells the loader's activity from its batches).
                loader_feed, _ = robocache_feed(args, f"cuda:{local_rank}",
                                                {"seq_length": CHUNK, "frame_stack": OBS_STEPS}, rank, world_size)
                first = next(loader_feed)
                del loader_feed
                feed = iter(lambda: first, None)
            elif name.startswith("lerobot-"):
                feed = lerobot_feed(args, device, int(name.split("-")[-1]))
            elif name.startswith("robocache-lerobot-"):
                cached = name.startswith(("robocache-lerobot-cache-", "robocache-lerobot-gpucache-"))
                cache = int(args.cache_gib * 2**30) if cached else 0
                feed, loader, fill_s = robocache_lerobot_feed(args, f"cuda:{local_rank}", int(name.split("-")[-1]),
                                                              cache, on_gpu=name.startswith("robocache-lerobot-gpucache-"))
                if cache:
                    extra["cache_fill_s"] = fill_s
            elif name.startswith("robocache-mixture-"):
                cached = name.startswith("robocache-mixture-cache-")
                cache = int(args.cache_gib * 2**30) if cached else 0
                feed, loader, fill_s = robocache_mixture_feed(args, f"cuda:{local_rank}", int(name.split("-")[-1]),
                                                              cache)
                if cache:
                    extra["cache_fill_s"] = fill_s
            elif name.startswith("robomimic-"):
                feed, _, _ = robomimic_feed(args, device, int(name.split("-")[1]), args.robomimic_cache, rank,
                                            world_size)
            else:
                raise SystemExit(f"unknown feed {name}")
            label = f"{size} ({params / 1e6:.0f}M) {name}"
            result = train(args, model, feed, device, utilization, label, world_size)
            if name.startswith("robocache-lerobot-cache-"):
                extra["frame_cache"] = loader.telemetry()["frame_cache"]
            if name.startswith("robocache-mixture-"):
                extra["mixture"] = loader.telemetry()
            if name.startswith("robocache-lerobot-gpucache-"):
                extra["device_frame_cache"] = loader.telemetry()["device_frame_cache"]
            result.update(extra)
            result.update({"model": size, "params": params, "feed": name, "world_size": world_size,
                           "batch_per_gpu": args.batch, "device": torch.cuda.get_device_name(device)})
            results.append(result)
            if rank == 0:
                print(json.dumps(result), flush=True)
            del feed, model
            loader = None  # a robocache loader's workers stop before the next feed starts
            torch.cuda.empty_cache()
    if args.ddp:
        check_exactly_once(args, device, rank, world_size)
    if utilization:
        utilization.stop()
    if rank == 0:
        tag = f"x{world_size}"
        with open(os.path.join(args.out, f"train-{tag}.json"), "w") as f:
            json.dump(results, f, indent=2)
        svg_plot(results, os.path.join(args.out, f"train-{tag}.svg"))
        print(f"\n{'configuration':<40} {'steps/s':>8} {'samples/s':>10} {'ms/step':>8} {'compute':>8} "
              f"{'wait':>7} {'stall':>6} {'nvml':>5} {'cores':>6}")
        for r in results:
            print(f"{r['config']:<40} {r['steps_per_s']:>8.1f} {r['samples_per_s']:>10.0f} {r['ms_per_step']:>8.2f} "
                  f"{r['compute_ms_per_step']:>8.2f} {r['wait_ms_per_step']:>7.2f} {r['stall_fraction']:>6.1%} "
                  f"{r['nvml_utilization']:>5.0%} {r['host_cores_busy']:>6.1f}")
    if args.ddp:
        dist.destroy_process_group()


def check_exactly_once(args, device, rank, world_size):
    """One epoch of robocache's Loader on every rank (no drop_last): each
    window exactly once across ranks; and what DistributedSampler does."""
    import torch.distributed as dist
    import robocache

    loader = robocache.Loader(args.file, ["actions"], windows={"seq_length": CHUNK, "frame_stack": OBS_STEPS},
                              batch_size=args.batch, device=f"cuda:{device.index}", seed=7, drop_last=False)
    loader.set_epoch(3)
    ids = [int(i) for batch in loader for i in batch["sample_index"].cpu().tolist()]
    gathered = [None] * world_size
    dist.all_gather_object(gathered, (len(loader), loader.samples_per_epoch, ids))
    _, sampler_total, sampler_ids = robomimic_feed(args, device, 0, "low_dim", rank, world_size)
    sampled = [None] * world_size
    dist.all_gather_object(sampled, sampler_ids)
    # Every window of the dataset: what one unsharded loader covers in an epoch.
    windows = robocache.Loader(args.file, ["actions"], windows={"seq_length": CHUNK, "frame_stack": OBS_STEPS},
                               batch_size=args.batch, device="cpu", rank=0, world_size=1).samples_per_epoch
    if rank == 0:
        every = [i for _, _, part in gathered for i in part]
        counts = np.bincount(every, minlength=windows)
        report = {
            "robocache_windows_seen": len(every),
            "robocache_distinct": int((counts > 0).sum()),
            "robocache_used_more_than_once": int((counts > 1).sum()),
            "robocache_batches_per_rank": [g[0] for g in gathered],
            "robomimic_sampler_indices": sum(len(s) for s in sampled),
            "robomimic_dataset_len": sampler_total,
            "robomimic_duplicates": sum(len(s) for s in sampled) - len(set(i for s in sampled for i in s)),
        }
        report["windows"] = windows
        ok = report["robocache_used_more_than_once"] == 0 and report["robocache_distinct"] == windows == len(every)
        report["robocache_exactly_once"] = ok
        print("exactly-once check:", json.dumps(report), flush=True)
        with open(os.path.join(args.out, f"exactly-once-x{world_size}.json"), "w") as f:
            json.dump(report, f, indent=2)
        if not ok:
            raise SystemExit("robocache's loader did not use every window exactly once across ranks")


if __name__ == "__main__":
    sys.exit(main())

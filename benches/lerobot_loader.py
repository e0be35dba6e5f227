"""LeRobot's loader against robocache's on the same LeRobot root, in one run
on one machine, with the host's decode ceiling beside them.

    python lerobot_loader.py write ROOT [--episodes 8 --frames 250 --vcodec libsvtav1]
    python lerobot_loader.py all ROOT [--batches 150] [--json out.json]

`write` makes a dataset with LeRobot itself (`LeRobotDataset.create`,
`add_frame`, `save_episode`): two 480x640 cameras at 30 fps (AV1 by
LeRobot's default encoder, or `--vcodec h264`), a 14-dim state and action,
episodes of `--frames` frames. The frames are synthetic but not flat: moving
gradients, a moving object and sensor noise, so the encoder has work to do.

`all` measures, each for `--batches` batches after warm-up, batches of 64
windows with 2 frames per camera (offsets -1/fps and 0) and 16 actions:

- ceiling: every MP4 of the root decoded by FFmpeg (PyAV, dav1d for AV1),
  one single-threaded process per core, frames/s to YUV;
- window ceiling: the same decoders doing only the decodes the windows
  need, batch by batch (each needed frame from its key frame, a frame two
  windows of a batch share once, nothing kept between batches), frames/s
  delivered: what a loader without a frame cache can reach on this root
  (with g=2 and windows of 2 frames, a window starting on the second frame
  of a group decodes its key frame for it: about 1.25 decodes per frame);
- lerobot: `LeRobotDataset(root, delta_timestamps=...)` + `DataLoader(batch_size=64,
  shuffle=True, num_workers=W)` for W in `--workers`, with its default video
  backend (torchcodec) and with pyav, each batch moved to the GPU;
- robocache: `robocache.Loader(root, None, delta_timestamps=..., batch_size=64,
  workers=W, video_decoder=D)` on the GPU, float32 frames and uint8 frames,
  for each D in `--video-decoders` (default `auto`: NVDEC beside the CPU
  decoders where the GPU decodes the codec; `--nvdec-sessions N ...` runs
  `auto` once per limit on the NVDEC sessions in use at once), with the
  share of samples NVDEC decoded;
- robocache with a decoded-frame cache of `--cache-gib` (YUV in host
  memory): its first epoch (cold: every frame decoded, the cache filled) and
  the epochs after it;
- robocache with every default, "two lines swapped, nothing tuned":
  `robocache.Loader(root, None, delta_timestamps=..., batch_size=64)`
  (float32 frames, the workers and the host frame cache it picks itself):
  its first epoch (cold) and the epochs after it;
- robocache with a frame cache of `--device-cache-gib` on the GPU
  (`device_frame_cache_bytes`: uint8 RGB at `--frame-size` when given),
  float32 frames: its first epoch and the epochs after it.

The output starts with `robocache.build_info()`: which decoders the
installed wheel has and whether each has its assembly.

Reported: frames/s and batches/s delivered to the training loop, host cores
busy (from /proc/stat over the timed batches), peak GPU memory, and each
figure as a fraction of the ceiling and of the window ceiling. Only the cached run keeps frames
between epochs: in every other run each batch decodes its frames.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

CAMERAS = ["observation.images.front", "observation.images.wrist"]
BATCH = 64


def deltas(fps):
    return {
        **{cam: [-1 / fps, 0.0] for cam in CAMERAS},
        "observation.state": [-1 / fps, 0.0],
        "action": [k / fps for k in range(16)],
    }


def write(args):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    features = {
        "observation.state": {"dtype": "float32", "shape": (14,), "names": None},
        "action": {"dtype": "float32", "shape": (14,), "names": None},
    }
    for cam in CAMERAS:
        features[cam] = {"dtype": "video", "shape": (args.height, args.width, 3),
                         "names": ["height", "width", "channels"]}
    kwargs = {}
    if args.vcodec != "libsvtav1":
        from lerobot.configs.video import RGBEncoderConfig
        kwargs["rgb_encoder"] = RGBEncoderConfig(vcodec=args.vcodec)
    dataset = LeRobotDataset.create(repo_id="robocache/bench", fps=args.fps, features=features, root=args.root,
                                    use_videos=True, image_writer_threads=8, **kwargs)
    rng = np.random.default_rng(0)
    h, w = args.height, args.width
    y, x = np.mgrid[0:h, 0:w]
    started = time.perf_counter()
    for episode in range(args.episodes):
        for step in range(args.frames):
            frame = {"observation.state": rng.standard_normal(14).astype(np.float32),
                     "action": rng.standard_normal(14).astype(np.float32), "task": f"task {episode % 3}"}
            for c, cam in enumerate(CAMERAS):
                img = np.empty((h, w, 3), np.float32)
                img[..., 0] = 120 + 80 * np.sin((x + 4 * step) / 37.0 + episode + c)
                img[..., 1] = 110 + 70 * np.cos((y - 3 * step) / 23.0)
                img[..., 2] = 90 + 60 * np.sin((x + y + 5 * step) / 51.0)
                cx, cy = (40 + 6 * step) % (w - 80), (60 + 3 * step) % (h - 80)
                img[cy:cy + 80, cx:cx + 80] = [200, 50 + 40 * c, 40]
                img += rng.normal(0, 6, (h, w, 1))
                frame[cam] = np.clip(img, 0, 255).astype(np.uint8)
            dataset.add_frame(frame)
        dataset.save_episode()
        print(f"episode {episode}: {time.perf_counter() - started:.1f} s", flush=True)
    dataset.finalize()


def cpu_jiffies():
    with open("/proc/stat") as f:
        parts = [int(v) for v in f.readline().split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts) - idle


def timed(batches, warmup, iterate, frames_per_batch):
    """Runs `iterate` (a generator of batches) for warm-up + timed batches."""
    it = iterate()
    for _ in range(warmup):
        next(it)
    hz = os.sysconf("SC_CLK_TCK")
    busy0, t0 = cpu_jiffies(), time.perf_counter()
    for _ in range(batches):
        next(it)
    elapsed = time.perf_counter() - t0
    cores = (cpu_jiffies() - busy0) / hz / elapsed
    del it
    return {"batches_per_s": batches / elapsed, "frames_per_s": batches * frames_per_batch / elapsed,
            "cores_busy": cores, "seconds": elapsed}


def decode_for(job):
    """Frames/s of one single-threaded FFmpeg decoder going through `path`
    (again from the start at its end) for `seconds`, to YUV."""
    import av
    path, seconds = job
    frames, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        with av.open(path) as container:
            stream = container.streams.video[0]
            stream.thread_type = "NONE"
            stream.codec_context.thread_count = 1
            for frame in container.decode(stream):
                frame.planes  # noqa: B018 (YUV planes, no conversion)
                frames += 1
                if frames % 64 == 0 and time.perf_counter() - t0 >= seconds:
                    break
    return frames / (time.perf_counter() - t0)


def ceiling(root, processes, seconds=10.0):
    """Frames/s of FFmpeg's software decoder, one single-threaded process per
    core, all decoding at once for `seconds` (the sum of their rates)."""
    files, rates = per_process(decode_for, root, processes, seconds)
    return {"frames_per_s": sum(rates), "processes": processes, "files": len(files)}


def per_process(decode, root, processes, seconds, extra=lambda i: ()):
    """`decode((file, seconds, *extra(i)))` in `processes` spawned processes
    at once, process i on the root's i-th MP4 (round robin), after a 0.5 s
    warm-up of each (imports); the root's MP4 files and the results."""
    import multiprocessing as mp
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(root, "videos")) for f in fs
                   if f.endswith(".mp4"))
    with mp.get_context("spawn").Pool(processes) as pool:
        pool.map(decode, [(files[0], 0.5, *extra(i)) for i in range(processes)])
        results = pool.map(decode, [(files[i % len(files)], seconds, *extra(i)) for i in range(processes)])
    return files, results


def window_decode_for(job):
    """Frames/s delivered by one single-threaded FFmpeg decoder doing the
    decodes the benchmark's windows need in `path`, for `seconds`: windows
    (frames t-1 and t, t in a shuffled epoch) in batches of 64, each batch
    decoding the frames it needs in order, each from its key frame, a frame
    shared by two windows of the batch once (as robocache's loader does per
    batch), nothing kept between batches. Returns (delivered, decoded)
    frames per second, or None where frames are reordered (B-frames)."""
    import random

    import av
    path, seconds, seed = job
    with av.open(path) as container:
        stream = container.streams.video[0]
        packets = [p for p in container.demux(stream) if p.size]
        pts = [p.pts for p in packets]
        if any(b <= a for a, b in zip(pts, pts[1:])):
            return None
        key, last_key = [], 0
        for i, p in enumerate(packets):
            last_key = i if p.is_keyframe else last_key
            key.append(last_key)
        ctx = stream.codec_context
        ctx.thread_type = "NONE"
        ctx.thread_count = 1
        rng = random.Random(seed)
        order, delivered, decoded, t0 = [], 0, 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            if len(order) < BATCH:
                order = list(range(len(packets)))
                rng.shuffle(order)
            batch, order = order[:BATCH], order[BATCH:]
            needed = sorted({f for t in batch for f in (max(t - 1, 0), t)})
            position = None
            for f in needed:
                if position is None or key[f] > position + 1:
                    if position is not None:
                        decoded += len(ctx.decode(None))
                        ctx.flush_buffers()
                    position = key[f] - 1
                for i in range(position + 1, f + 1):
                    decoded += len(ctx.decode(packets[i]))
                position = f
            decoded += len(ctx.decode(None))
            ctx.flush_buffers()
            delivered += 2 * len(batch)
        elapsed = time.perf_counter() - t0
    return delivered / elapsed, decoded / elapsed


def window_ceiling(root, processes, seconds=10.0):
    """The ceiling for the benchmark's windows without frames kept between
    batches: `window_decode_for` in one single-threaded process per core,
    all at once (sums of their rates); None where frames are reordered."""
    files, rates = per_process(window_decode_for, root, processes, seconds, lambda i: (i,))
    if any(r is None for r in rates):
        return None
    return {"frames_per_s": sum(r[0] for r in rates), "decoded_per_s": sum(r[1] for r in rates),
            "processes": processes, "files": len(files)}


def sync(device):
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def peak_gpu_bytes(device):
    import torch
    return torch.cuda.max_memory_allocated() if device.startswith("cuda") else 0


def reset_gpu_peak(device):
    import torch
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


def lerobot_run(root, workers, backend, batches, fps, device):
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("robocache/bench", root=root, delta_timestamps=deltas(fps), video_backend=backend)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=workers,
                                         pin_memory=True, drop_last=True, persistent_workers=False,
                                         prefetch_factor=2)

    def iterate():
        while True:
            for batch in loader:
                out = {k: v.to(device, non_blocking=True) for k, v in batch.items() if isinstance(v, torch.Tensor)}
                sync(device)
                yield out

    reset_gpu_peak(device)
    result = timed(batches, 3, iterate, BATCH * 4)
    result["gpu_peak_bytes"] = peak_gpu_bytes(device)
    return result


def epochs(loader, device, first):
    """A robocache loader's batches, epoch after epoch from `first`, each
    synchronised."""
    epoch = first
    while True:
        loader.set_epoch(epoch)
        for batch in loader:
            sync(device)
            yield batch
        epoch += 1


def robocache_run(root, workers, batches, fps, return_uint8, device, video_decoder="auto", frame_size=None,
                  nvdec_sessions=None):
    import torch  # noqa: F401 (a CUDA loader's batches are torch tensors)
    import robocache

    limit = {} if nvdec_sessions is None else {"nvdec_sessions": nvdec_sessions}
    # No frame cache: every batch decodes its frames (the cache is on by default).
    loader = robocache.Loader(root, None, delta_timestamps=deltas(fps), batch_size=BATCH, shuffle=True,
                              workers=workers, prefetch=2 * workers, device=device, drop_last=True,
                              return_uint8=return_uint8, video_decoder=video_decoder, frame_cache_bytes=0,
                              frame_size=None if frame_size is None else tuple(frame_size), **limit)

    reset_gpu_peak(device)
    result = timed(batches, 3, lambda: epochs(loader, device, 0), BATCH * 4)
    result["gpu_peak_bytes"] = peak_gpu_bytes(device)
    result["video_decode"] = loader.telemetry()["video_decode"]
    return result


def first_epoch(loader, device):
    """A robocache loader's first epoch (the frame cache filled) timed whole:
    batches and frames delivered per second (a last, shorter batch counted
    as what it holds), host cores busy."""
    hz = os.sysconf("SC_CLK_TCK")
    reset_gpu_peak(device)
    busy0, t0 = cpu_jiffies(), time.perf_counter()
    batches = frames = 0
    for batch in loader:
        sync(device)
        batches += 1
        frames += batch[CAMERAS[0]].shape[0] * 2 * len(CAMERAS)
    elapsed = time.perf_counter() - t0
    return {"batches_per_s": batches / elapsed, "frames_per_s": frames / elapsed, "seconds": elapsed,
            "cores_busy": (cpu_jiffies() - busy0) / hz / elapsed}


def robocache_cached_run(root, workers, batches, fps, device, cache_bytes=0, device_cache_bytes=0,
                         return_uint8=True, frame_size=None):
    """One loader with a decoded-frame cache (`cache_bytes`: YUV in host
    memory; `device_cache_bytes`: RGB on the loader's device): its first
    epoch (every frame decoded once, the cache filled) timed whole, then
    `batches` batches of the epochs after it."""
    import torch  # noqa: F401 (a CUDA loader's batches are torch tensors)
    import robocache

    loader = robocache.Loader(root, None, delta_timestamps=deltas(fps), batch_size=BATCH, shuffle=True,
                              workers=workers, prefetch=2 * workers, device=device, drop_last=True,
                              return_uint8=return_uint8, frame_cache_bytes=cache_bytes,
                              device_frame_cache_bytes=device_cache_bytes,
                              frame_size=None if frame_size is None else tuple(frame_size))
    cold = first_epoch(loader, device)
    telemetry = loader.telemetry()
    cold["frame_cache"], cold["device_frame_cache"] = telemetry["frame_cache"], telemetry["device_frame_cache"]
    loader.reset_telemetry()

    warm = timed(batches, 3, lambda: epochs(loader, device, 1), BATCH * 4)
    telemetry = loader.telemetry()
    warm["frame_cache"], warm["device_frame_cache"] = telemetry["frame_cache"], telemetry["device_frame_cache"]
    warm["host_cores_busy"] = telemetry["host_cores_busy"]
    warm["gpu_peak_bytes"] = cold["gpu_peak_bytes"] = peak_gpu_bytes(device)
    return cold, warm


def robocache_defaults_run(root, batches, fps):
    """`robocache.Loader` with every default, as a LeRobot user who swaps two
    lines gets it: its first epoch timed whole, then `batches` batches of
    the epochs after it."""
    import torch  # noqa: F401 (a CUDA loader's batches are torch tensors)
    import robocache

    loader = robocache.Loader(root, None, delta_timestamps=deltas(fps), batch_size=BATCH)
    device = loader.device
    cold = {**first_epoch(loader, device), "workers": loader.workers}
    cold["frame_cache"] = loader.telemetry()["frame_cache"]
    loader.reset_telemetry()
    warm = timed(batches, 3, lambda: epochs(loader, device, 1), BATCH * 4)
    warm["frame_cache"] = loader.telemetry()["frame_cache"]
    warm["gpu_peak_bytes"] = cold["gpu_peak_bytes"] = peak_gpu_bytes(device)
    return cold, warm


def all_runs(args):
    info = json.load(open(os.path.join(args.root, "meta", "info.json")))
    fps = info["fps"]
    codec = info["features"][CAMERAS[0]]["info"]["video.codec"]
    rows = []
    import robocache

    build = robocache.build_info()
    decoders = {codec: [f"{d['decoder']}{'+asm' if d['assembly'] else ''}" for d in found if d["device"] == "cpu"]
                for codec, found in build["video_decoders"].items()}
    print(f"robocache {build['version']}, CPU decoders: {decoders}", flush=True)
    ceil = ceiling(args.root, args.processes or os.cpu_count()) if args.ceilings else None
    if ceil is not None:
        print(f"ceiling: {ceil['frames_per_s']:.0f} frames/s ({ceil['processes']} processes)", flush=True)
        rows.append({"loader": f"ceiling: FFmpeg {codec} decode, 1 process/core",
                     "frames_per_s": ceil["frames_per_s"], "batches_per_s": ceil["frames_per_s"] / (BATCH * 4),
                     "cores_busy": float(ceil["processes"])})
    windows = window_ceiling(args.root, args.processes or os.cpu_count()) if args.ceilings else None
    if args.ceilings and windows is None:
        print("window ceiling: n/a (frames reordered)", flush=True)
    elif windows is not None:
        print(f"window ceiling: {windows['frames_per_s']:.0f} frames/s delivered, {windows['decoded_per_s']:.0f} "
              f"decoded ({windows['processes']} processes)", flush=True)
        rows.append({"loader": f"window ceiling: FFmpeg {codec}, batch decodes, 1 process/core",
                     "frames_per_s": windows["frames_per_s"],
                     "batches_per_s": windows["frames_per_s"] / (BATCH * 4), "cores_busy": float(windows["processes"])})
    for decoder in args.video_decoders:
        for workers in args.robocache_workers:
            for sessions in args.nvdec_sessions if decoder == "auto" else [None]:
                for uint8 in args.dtypes:
                    r = robocache_run(args.root, workers, args.batches, fps, uint8 == "uint8", args.device, decoder,
                                      nvdec_sessions=sessions)
                    share = r["video_decode"]["nvdec_share"]
                    limit = "" if sessions is None else f" sessions={sessions}"
                    rows.append({"loader": f"robocache.Loader {decoder}{limit} (nvdec {share:.2f}) workers={workers}"
                                           f"{' uint8' if uint8 == 'uint8' else ''}", **r})
                    print(rows[-1], flush=True)
    for decoder in args.video_decoders if args.frame_size else []:
        for workers in args.robocache_workers:
            r = robocache_run(args.root, workers, args.batches, fps, False, args.device, decoder, args.frame_size)
            share = r["video_decode"]["nvdec_share"]
            rows.append({"loader": f"robocache.Loader {decoder} (nvdec {share:.2f}) workers={workers} "
                                   f"{args.frame_size[0]}x{args.frame_size[1]}", **r})
            print(rows[-1], flush=True)
    for workers in args.robocache_workers:
        if args.cache_gib <= 0:
            break
        cold, warm = robocache_cached_run(args.root, workers, args.cached_batches or args.batches, fps, args.device,
                                          int(args.cache_gib * 2**30))
        rows.append({"loader": f"robocache.Loader workers={workers} uint8 cache, epoch 1", **cold})
        print(rows[-1], flush=True)
        rows.append({"loader": f"robocache.Loader workers={workers} uint8 cache, epoch 2+", **warm})
        print(rows[-1], flush=True)
    if args.defaults:
        cold, warm = robocache_defaults_run(args.root, args.cached_batches or args.batches, fps)
        budget = cold["frame_cache"]["budget_bytes"] / 2**30
        rows.append({"loader": f"robocache defaults (workers={cold['workers']}, cache {budget:.0f} GiB), epoch 1",
                     **cold})
        print(rows[-1], flush=True)
        rows.append({"loader": "robocache defaults, epoch 2+", **warm})
        print(rows[-1], flush=True)
    for workers in args.robocache_workers:
        if args.device_cache_gib <= 0:
            break
        cold, warm = robocache_cached_run(args.root, workers, args.cached_batches or args.batches, fps, args.device,
                                          device_cache_bytes=int(args.device_cache_gib * 2**30),
                                          return_uint8=False, frame_size=args.frame_size)
        size = "" if args.frame_size is None else f" {args.frame_size[0]}x{args.frame_size[1]}"
        rows.append({"loader": f"robocache.Loader workers={workers} f32{size} GPU cache, epoch 1", **cold})
        print(rows[-1], flush=True)
        rows.append({"loader": f"robocache.Loader workers={workers} f32{size} GPU cache, epoch 2+", **warm})
        print(rows[-1], flush=True)
    for backend in args.backends:
        for workers in args.workers:
            try:
                r = lerobot_run(args.root, workers, backend, args.batches, fps, args.device)
            except Exception as e:  # noqa: BLE001 (report and go on)
                print(f"lerobot {backend} workers={workers}: {e!r}", flush=True)
                continue
            rows.append({"loader": f"LeRobotDataset+DataLoader {backend} workers={workers}", **r})
            print(rows[-1], flush=True)
    print(f"\n{codec}, {info['total_episodes']} episodes x {info['total_frames'] // info['total_episodes']} frames, "
          f"2 cameras {info['features'][CAMERAS[0]]['shape']}, batch {BATCH} x (2 frames x 2 cameras + 16 actions)")
    print(f"{'loader':<52} {'frames/s':>9} {'batches/s':>9} {'cores':>6} {'of ceiling':>10} {'of window':>9} "
          f"{'GPU MiB':>8}")
    for r in rows:
        of_windows = "n/a" if windows is None else f"{r['frames_per_s'] / windows['frames_per_s']:.2f}"
        print(f"{r['loader']:<52} {r['frames_per_s']:>9.0f} {r['batches_per_s']:>9.1f} {r.get('cores_busy', 0):>6.1f} "
              f"{'n/a' if ceil is None else format(r['frames_per_s'] / ceil['frames_per_s'], '.2f'):>10} {of_windows:>9} "
              f"{r.get('gpu_peak_bytes', 0) / 2**20:>8.0f}")
    print(f"CPU decoders of this wheel: {decoders}")
    if args.json:
        json.dump({"codec": codec, "rows": rows, "ceiling": ceil, "window_ceiling": windows, "build": build},
                  open(args.json, "w"), indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("root")
    w.add_argument("--episodes", type=int, default=8)
    w.add_argument("--frames", type=int, default=250)
    w.add_argument("--height", type=int, default=480)
    w.add_argument("--width", type=int, default=640)
    w.add_argument("--fps", type=int, default=30)
    w.add_argument("--vcodec", default="libsvtav1")
    a = sub.add_parser("all")
    a.add_argument("root")
    a.add_argument("--batches", type=int, default=150,
                   help="timed batches per run (about 5 epochs of the default root: fewer overstate, the prefetched batches covering the timed span)")
    a.add_argument("--workers", type=int, nargs="+", default=[4, 8, 16])
    a.add_argument("--robocache-workers", type=int, nargs="*", default=[16])
    a.add_argument("--device", default="cuda:0")
    a.add_argument("--backends", nargs="*", default=["torchcodec", "pyav"], help="LeRobot decode backends (the flag alone: no LeRobot rows)")
    a.add_argument("--processes", type=int, help="decode ceiling processes (default: one per core)")
    a.add_argument("--video-decoders", nargs="+", default=["auto"],
                   help="robocache's video_decoder values to time (auto: NVDEC beside the CPU on a CUDA loader)")
    a.add_argument("--nvdec-sessions", type=int, nargs="+", default=[None],
                   help="with auto: the most NVDEC sessions in use at once, the other requests decoding on the CPU "
                        "(one run each; default robocache's)")
    a.add_argument("--dtypes", nargs="+", default=["float32", "uint8"], choices=["float32", "uint8"],
                   help="frame dtypes of the uncached robocache runs")
    a.add_argument("--cache-gib", type=float, default=8.0, help="frame cache of the cached robocache run (0: none)")
    a.add_argument("--cached-batches", type=int,
                   help="timed batches of the cached runs' later epochs (default --batches; a fast cache needs more "
                        "for the prefetched batches not to dominate)")
    a.add_argument("--device-cache-gib", type=float, default=0.0,
                   help="frame cache on the GPU of a float32 robocache run, RGB at --frame-size (0: no such run)")
    a.add_argument("--frame-size", type=int, nargs=2, metavar=("H", "W"),
                   help="also run robocache float32 loaders resizing every frame to H x W on the device")
    a.add_argument("--no-defaults", dest="defaults", action="store_false",
                   help="leave out the run of robocache.Loader with every default")
    a.add_argument("--no-ceilings", dest="ceilings", action="store_false",
                   help="leave out the FFmpeg ceilings (robocache rows only, e.g. to compare two builds; no PyAV needed)")
    a.add_argument("--json")
    args = parser.parse_args()
    {"write": write, "all": all_runs}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

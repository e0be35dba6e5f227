"""RLDS windows from a TFDS builder directory: robocache (no TensorFlow)
against TensorFlow's own tf.data pipeline and torchvision's JPEG decoders,
side by side in one script on one machine.

    # 1. a dataset written by tensorflow-datasets itself (needs TF + TFDS)
    target/tools/tfds/bin/python benches/rlds_read.py make target/bench-rlds --episodes 120 --steps 100
    # 2. robocache's Loader vs tf.data over the same directory, each in its own process
    python benches/rlds_read.py compare target/bench-rlds --tf-python target/tools/tfds/bin/python
    # 3. (where torchvision is: the GPU machine) robocache vs torchvision decode_jpeg, CPU and GPU
    python benches/rlds_read.py decode target/bench-rlds

robocache decodes JPEG with libjpeg-turbo's SIMD code only when NASM was on
PATH when it was built (docs/architecture.md); the numbers in
docs/benchmarks.md say which build they are from.

`make` writes `<out>/robocache_bench_rlds/1.0.0/` (a 256x256 JPEG camera,
a 128x128 JPEG wrist camera, 8-D state, 7-D action, language, 16 shards)
and `<out>/jpeg_frames.npz` (the encoded camera frames of the first
episodes, for the decoders).

Both pipelines cut the same windows: robomimic-style step windows of
`frame_stack` 2 and `seq_length` 8 (9 frames of each camera and 9 actions
per window), shuffled, in batches of 64, images decoded to u8 [H, W, 3]:

- robocache: `robocache.Loader(..., windows={"seq_length": 8, "frame_stack": 2})`
  on the CPU device with `--workers` threads (each decodes only its
  windows' frames);
- tf.data: `tfds.builder_from_directory(dir).as_dataset(split="train",
  shuffle_files=True, decoders={"steps": SkipDecoding()}, read_config=
  ReadConfig(interleave_cycle_length=16, num_parallel_calls_for_interleave_files=AUTOTUNE))`,
  then per episode the windows' step indices gathered, shuffled, the JPEGs
  of each window decoded with `tf.io.decode_jpeg` in a parallel `map`
  (AUTOTUNE), batched, prefetched (the Octo/dlimp recipe).

Reported: windows/s, JPEG MB/s decoded, frames/s, peak resident memory of
the process. `decode` times decoding the same JPEG bytes with
torchvision.io.decode_jpeg on the CPU (one call per frame, a list, and one
call per frame on a thread per core) and on the GPU (a list: batched
nvJPEG) against robocache's Loader with windows of 8 frames of that camera
only (batches on the CPU and on the GPU).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

FRAME_STACK, SEQ_LENGTH, BATCH = 2, 8, 64
T = FRAME_STACK - 1 + SEQ_LENGTH
NAME = "robocache_bench_rlds"


def make(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow_datasets as tfds

    class RobocacheBenchRlds(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            F = tfds.features
            return tfds.core.DatasetInfo(
                builder=self,
                features=F.FeaturesDict({"steps": F.Dataset({
                    "observation": F.FeaturesDict({
                        "image": F.Image(shape=(256, 256, 3), encoding_format="jpeg"),
                        "wrist_image": F.Image(shape=(128, 128, 3), encoding_format="jpeg"),
                        "state": F.Tensor(shape=(8,), dtype=np.float32),
                    }),
                    "action": F.Tensor(shape=(7,), dtype=np.float32),
                    "is_first": F.Scalar(dtype=np.bool_),
                    "is_last": F.Scalar(dtype=np.bool_),
                    "is_terminal": F.Scalar(dtype=np.bool_),
                    "reward": F.Scalar(dtype=np.float32),
                    "language_instruction": F.Text(),
                })}),
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            rng = np.random.default_rng(0)
            yy, xx = np.mgrid[0:256, 0:256]
            for e in range(args.episodes):
                n = int(args.steps * rng.uniform(0.75, 1.25))
                steps = []
                for i in range(n):
                    phase = e + i * 0.05
                    image = np.stack([127 + 120 * np.sin(0.03 * xx + 0.02 * yy + phase + c) for c in range(3)], -1)
                    image = (image + rng.normal(0, 6, image.shape)).clip(0, 255).astype(np.uint8)
                    steps.append({
                        "observation": {"image": image, "wrist_image": image[::2, ::2].copy(),
                                        "state": rng.standard_normal(8).astype(np.float32)},
                        "action": rng.standard_normal(7).astype(np.float32),
                        "is_first": i == 0, "is_last": i == n - 1, "is_terminal": i == n - 1,
                        "reward": np.float32(i == n - 1), "language_instruction": f"task {e % 7}",
                    })
                yield e, {"steps": steps}

    builder = RobocacheBenchRlds(data_dir=args.out)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=min(16, args.episodes)))
    # A sample of encoded frames for the decoders.
    import tensorflow as tf
    ds = tfds.builder_from_directory(builder.data_dir).as_dataset(
        split="train", decoders={"steps": tfds.decode.SkipDecoding()})
    frames = []
    for episode in ds.take(3):
        frames.extend(bytes(b) for b in episode["steps"]["observation"]["image"].numpy())
    lengths = np.array([len(f) for f in frames])
    np.savez(os.path.join(args.out, "jpeg_frames.npz"), data=np.frombuffer(b"".join(frames), np.uint8),
             lengths=lengths)
    size = sum(os.path.getsize(os.path.join(builder.data_dir, f)) for f in os.listdir(builder.data_dir))
    print(json.dumps({"dir": builder.data_dir, "bytes": size, "frames_sampled": len(frames)}))
    del tf


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def version_dir(out):
    return os.path.join(out, NAME, "1.0.0")


def mean_jpeg_bytes(out):
    import numpy as np
    return float(np.load(os.path.join(out, "jpeg_frames.npz"))["lengths"].mean())


def run_robocache(args):
    import torch  # noqa: F401 (batches are torch tensors: count its memory as imported)

    import robocache

    imported = rss_mb()
    dataset = robocache.open(version_dir(args.out), rate_hz=10.0)
    streams = ["observation/image", "observation/wrist_image", "observation/state", "action"]
    loader = robocache.Loader(dataset, streams, windows={"seq_length": SEQ_LENGTH, "frame_stack": FRAME_STACK},
                              batch_size=BATCH, device="cpu", workers=args.workers, prefetch=4, seed=0,
                              rank=0, world_size=1)
    return time_batches(iter_forever(loader), args.batches, imported)


def iter_forever(loader):
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        yield from loader
        epoch += 1


def run_tfdata(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tensorflow_datasets as tfds

    imported = rss_mb()
    builder = tfds.builder_from_directory(version_dir(args.out))
    read_config = tfds.ReadConfig(interleave_cycle_length=16,
                                  num_parallel_calls_for_interleave_files=tf.data.AUTOTUNE)
    ds = builder.as_dataset(split="train", shuffle_files=True, read_config=read_config,
                            decoders={"steps": tfds.decode.SkipDecoding()})

    def windows(episode):
        steps = episode["steps"]
        n = tf.shape(steps["action"])[0]
        index = tf.range(n)[:, None] + tf.range(-(FRAME_STACK - 1), SEQ_LENGTH)[None, :]
        index = tf.clip_by_value(index, 0, n - 1)
        return tf.data.Dataset.from_tensor_slices({
            "image": tf.gather(steps["observation"]["image"], index),
            "wrist_image": tf.gather(steps["observation"]["wrist_image"], index),
            "state": tf.gather(steps["observation"]["state"], index),
            "action": tf.gather(steps["action"], index),
        })

    def decode(window):
        window["image"] = tf.map_fn(tf.io.decode_jpeg, window["image"], fn_output_signature=tf.uint8)
        window["wrist_image"] = tf.map_fn(tf.io.decode_jpeg, window["wrist_image"], fn_output_signature=tf.uint8)
        return window

    ds = (ds.repeat().flat_map(windows).shuffle(2048).map(decode, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(BATCH).prefetch(tf.data.AUTOTUNE))
    return time_batches(iter(tfds.as_numpy(ds)), args.batches, imported)


def rss_mb():
    """Resident memory now (Linux)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def time_batches(batches, count, imported_rss):
    for _ in range(3):  # warm up: first reads, thread pools
        next(batches)
    start = time.perf_counter()
    for _ in range(count):
        next(batches)
    seconds = time.perf_counter() - start
    return {"batches": count, "seconds": seconds, "windows_per_s": count * BATCH / seconds,
            "peak_rss_mb": peak_rss_mb(), "imported_rss_mb": imported_rss}


def compare(args):
    here = os.path.abspath(__file__)
    jpeg = mean_jpeg_bytes(args.out)
    rows = []
    for name, python in (("robocache Loader (cpu)", sys.executable), ("tf.data (TFDS)", args.tf_python)):
        mode = "robocache" if name.startswith("robocache") else "tfdata"
        out = subprocess.run([python, here, mode, args.out, "--batches", str(args.batches), "--workers",
                              str(args.workers)], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{name} failed:\n{out.stderr[-3000:]}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        result["name"] = name
        # Both cameras: T frames of the 256x256 one and T of the 128x128 one (~1/3 the bytes).
        result["jpeg_mb_per_s"] = result["windows_per_s"] * T * jpeg * (1 + 1 / 3) / 1e6
        result["frames_per_s"] = result["windows_per_s"] * T * 2
        rows.append(result)
    base = rows[1]["windows_per_s"]
    lines = [f"RLDS step windows (frame_stack {FRAME_STACK}, seq_length {SEQ_LENGTH}, batch {BATCH}), "
             f"{os.cpu_count()} cores, {args.batches} batches",
             f"{'pipeline':<26}{'windows/s':>11}{'frames/s':>11}{'JPEG MB/s':>11}{'RSS MB: imports':>17}{'peak':>7}"
             f"{'vs tf.data':>12}"]
    for r in rows:
        lines.append(f"{r['name']:<26}{r['windows_per_s']:>11.0f}{r['frames_per_s']:>11.0f}{r['jpeg_mb_per_s']:>11.1f}"
                     f"{r['imported_rss_mb']:>17.0f}{r['peak_rss_mb']:>7.0f}{r['windows_per_s'] / base:>11.2f}x")
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def decode(args):
    import numpy as np
    import torch
    import torchvision
    from torchvision.io import decode_jpeg

    import robocache

    archive = np.load(os.path.join(args.out, "jpeg_frames.npz"))
    data, lengths = archive["data"], archive["lengths"]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    frames = [torch.from_numpy(data[offsets[i]:offsets[i + 1]].copy()) for i in range(len(lengths))]
    mb = lengths.sum() / 1e6
    rows = []

    def timed(name, fn, repeat=3):
        fn()
        best = min(timeit(fn) for _ in range(repeat))
        rows.append((name, len(frames) / best, mb / best))

    def timeit(fn):
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    torch.set_num_threads(os.cpu_count())
    timed("torchvision CPU, per frame", lambda: [decode_jpeg(f) for f in frames])
    timed("torchvision CPU, list", lambda: decode_jpeg(frames))
    if torch.cuda.is_available():
        def gpu():
            decode_jpeg(frames, device="cuda")
            torch.cuda.synchronize()
        timed("torchvision GPU (nvJPEG), list", gpu)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        timed(f"torchvision CPU, {os.cpu_count()} threads", lambda: list(pool.map(decode_jpeg, frames)))
    # robocache: windows of 8 frames of the camera alone, decoded by the Loader's workers.
    dataset = robocache.open(version_dir(args.out), rate_hz=10.0)
    for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        loader = robocache.Loader(dataset, ["observation/image"], windows={"seq_length": 8, "frame_stack": 1},
                                  batch_size=BATCH, device=device, workers=args.workers, seed=0, rank=0,
                                  world_size=1)
        result = time_batches(iter_forever(loader), args.batches, rss_mb())
        frames_per_s = result["windows_per_s"] * 8
        rows.append((f"robocache Loader -> {device}", frames_per_s, frames_per_s * lengths.mean() / 1e6))
    lines = [f"JPEG 256x256 decode, {len(frames)} frames ({mb:.1f} MB), {os.cpu_count()} cores, "
             f"torch {torch.__version__}, torchvision {torchvision.__version__}",
             f"{'decoder':<34}{'frames/s':>11}{'MB/s':>9}"]
    lines += [f"{n:<34}{f:>11.0f}{m:>9.1f}" for n, f, m in rows]
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"name": n, "frames_per_s": f, "mb_per_s": m} for n, f, m in rows], f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["make", "compare", "decode", "robocache", "tfdata"])
    parser.add_argument("out")
    parser.add_argument("--episodes", type=int, default=120)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--tf-python", default="target/tools/tfds/bin/python")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.mode == "make":
        make(args)
    elif args.mode == "compare":
        compare(args)
    elif args.mode == "decode":
        decode(args)
    else:
        result = run_robocache(args) if args.mode == "robocache" else run_tfdata(args)
        print(json.dumps(result))


if __name__ == "__main__":
    main()

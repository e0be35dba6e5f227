"""A weighted mixture of RLDS datasets: robocache's MixtureLoader against
tf.data's `sample_from_datasets` (Octo's `make_interleaved_dataset`
recipe), over the same TFDS directories, each in its own process on one
machine: batches/s and peak resident memory.

    # 1. three RLDS datasets in TFDS's format (robocache's writer: no TensorFlow)
    python benches/mixture_tfdata.py data target/bench-mix --cli target/release/robocache
    # 2. both loaders (TensorFlow and tensorflow-datasets in their own venv)
    python benches/mixture_tfdata.py compare target/bench-mix --tf-python target/tf-bench/bin/python

`data` writes three datasets of 64x64 JPEG cameras, an 8-D state and a 7-D
action (`robocache bench write-rlds`): 48, 96 and 192 episodes of about 100
steps, mixed with sample weights 1:2:4.

Both pipelines cut the same windows and batch them the same way:

- windows: every step of every episode anchors a window of `SEQ` steps of
  action, state and camera (robomimic's step windows: past an episode's
  end the last step repeats, with a pad mask), batches of 64, camera
  frames decoded to u8 [H, W, 3];
- robocache: `robocache.Loader([{"dataset": ..., "weight": w,
  "windows": {"seq_length": SEQ}, "keys": ...}, ...], device="cpu")`, the
  mixture's Rust workers decoding only the sampled windows' frames;
- tf.data, as Octo builds it (`octo/data/dataset.py`,
  `make_interleaved_dataset`): per dataset `builder.as_dataset(split="train",
  shuffle_files=True)` read with parallel interleave, each episode cut into
  its windows (a trajectory map) and flattened into windows, repeated; then
  `tf.data.Dataset.sample_from_datasets(datasets, weights)`, one shuffle
  buffer of `--shuffle-buffer` windows (Octo's configs: 256,000; its frames
  are still JPEG bytes there), the JPEGs decoded in a parallel map (Octo's
  frame transforms), batched, prefetched.

Reported per loader: batches/s over `--batches` batches after a warm-up
(the shuffle buffer filled first, as training does), and the peak resident
memory (ru_maxrss) of its process.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

SEQ, BATCH = 4, 64
DATASETS = [("mix_small", 48, 1.0), ("mix_medium", 96, 2.0), ("mix_large", 192, 4.0)]


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def version_dirs(root):
    return [os.path.join(root, name, "1.0.0") for name, _, _ in DATASETS]


def make_data(args):
    for name, episodes, _ in DATASETS:
        subprocess.run([args.cli, "bench", "write-rlds", args.root, "--episodes", str(episodes), "--steps", "100",
                        "--shards", "4", "--image", "64x64", "--name", name], check=True)


def timed(iterator, batches, warmup):
    for _ in range(warmup):
        next(iterator)
    started = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches / (time.perf_counter() - started)


def run_robocache(args):
    import robocache

    members = [{"dataset": robocache.open(path, rate_hz=10.0), "weight": weight, "windows": {"seq_length": SEQ},
                "keys": {"action": "action", "state": "observation/state", "image": "observation/image"}}
               for path, (_, _, weight) in zip(version_dirs(args.root), DATASETS)]
    mixture = robocache.Loader(members, batch_size=BATCH, device="cpu", convention="sample",
                               epoch_windows=BATCH * 1000, seed=0, mixture_workers=args.workers, workers=1)

    def forever():
        epoch = 0
        while True:
            mixture.set_epoch(epoch)
            for batch in mixture:
                yield batch
            epoch += 1

    rate = timed(forever(), args.batches, args.warmup)
    return {"loader": "robocache MixtureLoader", "batches_per_s": rate, "peak_rss_mib": peak_rss_mib(),
            "shares": mixture.shares}


def run_tfdata(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tensorflow_datasets as tfds

    tf.config.set_visible_devices([], "GPU")
    autotune = tf.data.AUTOTUNE

    def windows(episode):
        steps = episode["steps"]
        length = tf.shape(steps["action"])[0]
        start = tf.range(length)[:, None]
        index = start + tf.range(SEQ)[None, :]
        pad = index >= length
        index = tf.minimum(index, length - 1)
        return tf.data.Dataset.from_tensor_slices({
            "action": tf.gather(steps["action"], index),
            "state": tf.gather(steps["observation"]["state"], index),
            "image": tf.gather(steps["observation"]["image"], index),  # JPEG bytes until the frame map
            "is_pad": pad,
        })

    datasets, weights = [], []
    for path, (_, _, weight) in zip(version_dirs(args.root), DATASETS):
        builder = tfds.builder_from_directory(path)
        read = tfds.ReadConfig(interleave_cycle_length=4, num_parallel_calls_for_interleave_files=autotune)
        episodes = builder.as_dataset(split="train", shuffle_files=True, read_config=read,
                                      decoders={"steps": tfds.decode.SkipDecoding()})
        datasets.append(episodes.interleave(windows, cycle_length=4, num_parallel_calls=autotune).repeat())
        weights.append(weight)
    total = sum(weights)
    mixed = tf.data.Dataset.sample_from_datasets(datasets, [w / total for w in weights], seed=0)
    mixed = mixed.shuffle(args.shuffle_buffer, seed=0)

    def decode(window):
        images = tf.map_fn(tf.io.decode_jpeg, window["image"], fn_output_signature=tf.uint8)
        return {**window, "image": images}

    batches = mixed.map(decode, num_parallel_calls=autotune).batch(BATCH).prefetch(autotune)
    iterator = batches.as_numpy_iterator()
    # The shuffle buffer fills before the first batch (Octo's "Filling up shuffle buffer").
    filled = time.perf_counter()
    next(iterator)
    filled = time.perf_counter() - filled
    rate = timed(iterator, args.batches, args.warmup)
    return {"loader": f"tf.data sample_from_datasets, shuffle buffer {args.shuffle_buffer}",
            "batches_per_s": rate, "peak_rss_mib": peak_rss_mib(), "first_batch_s": filled,
            "tensorflow": tf.__version__}


def compare(args):
    me = os.path.abspath(__file__)
    common = [args.root, "--batches", str(args.batches), "--warmup", str(args.warmup), "--workers", str(args.workers)]
    runs = [("robocache", sys.executable, [])]
    for buffer in args.shuffle_buffers:
        runs.append(("tfdata", args.tf_python, ["--shuffle-buffer", str(buffer)]))
    rows = []
    for kind, python, extra in runs:
        done = subprocess.run([python, me, kind] + common + extra, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{kind} failed:\n{done.stderr[-3000:]}")
        row = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{row['loader']:55} {row['batches_per_s']:8.1f} batches/s  peak RSS {row['peak_rss_mib']:8.0f} MiB",
              flush=True)
    ours = rows[0]
    for row in rows[1:]:
        print(f"robocache vs {row['loader']}: {ours['batches_per_s'] / row['batches_per_s']:.2f}x the batches/s at "
              f"{ours['peak_rss_mib'] / row['peak_rss_mib']:.3f} of the memory")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    data = sub.add_parser("data")
    data.add_argument("root")
    data.add_argument("--cli", default="robocache")
    for name in ("robocache", "tfdata", "compare"):
        one = sub.add_parser(name)
        one.add_argument("root")
        one.add_argument("--batches", type=int, default=300)
        one.add_argument("--warmup", type=int, default=20)
        one.add_argument("--workers", type=int, default=os.cpu_count() or 2)
        one.add_argument("--shuffle-buffer", type=int, default=256_000)
        if name == "compare":
            one.add_argument("--tf-python", required=True)
            one.add_argument("--shuffle-buffers", type=int, nargs="+", default=[256_000, 10_000])
            one.add_argument("--json")
    args = parser.parse_args()
    if args.command == "data":
        make_data(args)
    elif args.command == "compare":
        compare(args)
    else:
        print(json.dumps(run_robocache(args) if args.command == "robocache" else run_tfdata(args)))


if __name__ == "__main__":
    sys.exit(main())

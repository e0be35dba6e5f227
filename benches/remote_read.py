"""Remote datasets against local ones: windows/s of robocache's Loader over
an RLDS directory and a LeRobot root served by a local S3-compatible server
(moto, started here), first epoch (cold node-local cache) and second
(warm), beside the same dataset read from local disk and beside what the
store gives on its own (`robocache bench storage`: ranged GETs of 4 MiB,
the same number in flight, no cache) — all in one run on one machine.

    python benches/remote_read.py --robocache target/release/robocache --out target/bench-remote \\
        [--rlds VERSION_DIR] [--lerobot ROOT] [--episodes 256 --steps 100 --image 128x128] [--workers 8]

Without `--rlds`, an RLDS directory is written with `robocache bench
write-rlds` (JPEG camera, state, action; TFDS's format). A LeRobot root is
read only when `--lerobot` names one (benches/lerobot_loader.py writes one
with LeRobot). Needs `moto[server]` and boto3 (`cargo xtask test` installs
them into target/tools/python).

Reported per dataset: the open time, windows/s of a local epoch, of the
remote cold epoch and of the remote warm epoch (each timed epoch on a new
loader, from its making to its last batch; local and warm: the best of
`--repeats`), the bytes fetched by each
(the warm one must fetch none), the cold epoch's bytes/s against the
store's own bytes/s; for RLDS, a new node's open once the sidecar index is
in the bucket (`Dataset.write_index()`); and what rank 0 of 2, sharded by
episode, fetches from a cold cache over one epoch (about half the
dataset). The last lines are a Markdown table.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

BUCKET = "bench"
BATCH = 64


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto():
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if server.poll() is not None or time.time() > deadline:
                sys.exit("moto's S3 server did not start (pip install 'moto[server]')")
            time.sleep(0.1)
    endpoint = f"http://127.0.0.1:{port}"
    options = {"aws_endpoint": endpoint, "aws_allow_http": "true", "aws_access_key_id": "testing",
               "aws_secret_access_key": "testing", "aws_region": "us-east-1"}
    return server, endpoint, options


def upload(endpoint, local_dir, prefix):
    from s3_upload import upload as upload_to

    return upload_to(endpoint, BUCKET, local_dir, prefix)


def store_ceiling(robocache_cli, url, options, in_flight):
    command = [robocache_cli, "bench", "storage", url, "--in-flight", str(in_flight), "--json",
               "--remote-cache-bytes", "0"]
    for key, value in options.items():
        command += ["--storage-option", f"{key}={value}"]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"robocache bench storage failed:\n{out.stderr}")
    return json.loads(out.stdout)


def loader_for(dataset, kind, workers, rank=0, world_size=1, shard_by="windows"):
    import robocache

    shard = dict(rank=rank, world_size=world_size, shard_by=shard_by)

    if kind == "rlds":
        streams = [s for s in ("observation/image", "observation/state", "action") if s in dataset.streams]
        return robocache.Loader(dataset, streams, windows={"seq_length": 8, "frame_stack": 2}, batch_size=BATCH,
                                device="cpu", workers=workers, prefetch=2 * workers, seed=0, **shard)
    meta = dataset.info["metadata"]
    fps = meta["fps"]
    cameras = meta.get("video_keys", []) + meta.get("image_keys", [])
    deltas = {**{cam: [-1 / fps, 0.0] for cam in cameras}, "action": [k / fps for k in range(16)]}
    features = set(dataset.streams)
    if "observation.state" in features:
        deltas["observation.state"] = [-1 / fps, 0.0]
    return robocache.Loader(dataset, None, delta_timestamps=deltas, batch_size=BATCH, shuffle=True, device="cpu",
                            workers=workers, prefetch=2 * workers, return_uint8=True, frame_cache_bytes=0,
                            **shard)  # every epoch reads and decodes (the frame cache is on by default)


def epoch(make_loader, number):
    """Windows of epoch `number` of a new loader, and the seconds from
    making the loader (its resident streams read) to its last batch."""
    t0 = time.perf_counter()
    loader = make_loader()
    loader.set_epoch(number)
    windows = 0
    for batch in loader:
        first = next(v for v in batch.values() if hasattr(v, "shape"))
        windows += first.shape[0]
    return windows, time.perf_counter() - t0


def best(make_loader, number, repeats):
    """The fastest of `repeats` epochs, each on a new loader."""
    runs = [epoch(make_loader, number) for _ in range(max(1, repeats))]
    return min(runs, key=lambda run: run[1])


def measure(kind, local, url, options, workers, cache_dir, repeats):
    import robocache

    open_kwargs = {"rate_hz": 10.0} if kind == "rlds" else {}
    t0 = time.perf_counter()
    dataset = robocache.open(local, **open_kwargs)
    local_open = time.perf_counter() - t0
    # Every timed epoch runs on a loader of its own: a loader starts its next
    # epoch while the last batches of one are handed over, which would time
    # a head start.
    epoch(lambda: loader_for(dataset, kind, workers), 0)  # the page cache warm: local disk at its best
    windows, local_s = best(lambda: loader_for(dataset, kind, workers), 1, repeats)
    del dataset

    shutil.rmtree(cache_dir, ignore_errors=True)
    t0 = time.perf_counter()
    remote = robocache.open(url, storage_options=options, remote_cache_dir=cache_dir, **open_kwargs)
    remote_open = time.perf_counter() - t0
    opened = remote.storage_usage()
    cold_windows, cold_s = epoch(lambda: loader_for(remote, kind, workers), 1)
    after_cold = remote.storage_usage()
    warm_windows, warm_s = best(lambda: loader_for(remote, kind, workers), 1, repeats)
    after_warm = remote.storage_usage()
    assert cold_windows == windows == warm_windows, (windows, cold_windows, warm_windows)

    # RLDS: the sidecar index written into the bucket, then a new node's open.
    index_open_s = index_open_bytes = None
    if kind == "rlds":
        remote.write_index()
        shutil.rmtree(cache_dir, ignore_errors=True)
        t0 = time.perf_counter()
        indexed = robocache.open(url, storage_options=options, remote_cache_dir=cache_dir, **open_kwargs)
        index_open_s = time.perf_counter() - t0
        index_open_bytes = indexed.storage_usage()["bytes_fetched"]
        del indexed
    # One node of two, sharded by episode, from a cold cache: what it fetches in all.
    shutil.rmtree(cache_dir, ignore_errors=True)
    half = robocache.open(url, storage_options=options, remote_cache_dir=cache_dir, **open_kwargs)
    half_windows, half_s = epoch(
        lambda: loader_for(half, kind, workers, rank=0, world_size=2, shard_by="episodes"), 1)
    half_bytes = half.storage_usage()["bytes_fetched"]
    return {
        "dataset": kind, "windows": windows, "workers": workers,
        "local_open_s": local_open, "remote_open_s": remote_open,
        "open_bytes_fetched": opened["bytes_fetched"],
        "local_windows_per_s": windows / local_s,
        "cold_windows_per_s": windows / cold_s,
        "warm_windows_per_s": windows / warm_s,
        "cold_bytes_fetched": after_cold["bytes_fetched"] - opened["bytes_fetched"],
        "cold_bytes_per_s": (after_cold["bytes_fetched"] - opened["bytes_fetched"]) / cold_s,
        "open_and_cold_bytes_per_s": after_cold["bytes_fetched"] / (remote_open + cold_s),
        "warm_bytes_fetched": after_warm["bytes_fetched"] - after_cold["bytes_fetched"],
        "requests": after_warm["requests"], "retries": after_warm["retries"],
        "index_open_s": index_open_s, "index_open_bytes": index_open_bytes,
        "rank0_of_2_windows": half_windows, "rank0_of_2_windows_per_s": half_windows / half_s,
        "rank0_of_2_bytes_fetched": half_bytes,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robocache", default="target/release/robocache", help="the robocache CLI")
    parser.add_argument("--out", default="target/bench-remote")
    parser.add_argument("--rlds", help="an RLDS version folder (default: one written here)")
    parser.add_argument("--lerobot", help="a LeRobot root (optional)")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--image", default="128x128")
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2, help="local and warm epochs: the best of this many")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()

    os.makedirs(args.out, exist_ok=True)
    rlds = args.rlds
    if rlds is None:
        target = os.path.join(args.out, "rlds")
        shutil.rmtree(target, ignore_errors=True)
        out = subprocess.run([args.robocache, "bench", "write-rlds", target, "--episodes", str(args.episodes),
                              "--steps", str(args.steps), "--shards", "16", "--image", args.image],
                             capture_output=True, text=True, check=True)
        rlds = out.stdout.strip().splitlines()[-1]

    server, endpoint, options = start_moto()
    rows = []
    try:
        datasets = [("rlds", rlds)] + ([("lerobot", args.lerobot)] if args.lerobot else [])
        for kind, local in datasets:
            size = upload(endpoint, local, kind)
            url = f"s3://{BUCKET}/{kind}"
            ceiling = store_ceiling(args.robocache, url, options, args.in_flight)
            with tempfile.TemporaryDirectory(dir=args.out) as cache_dir:
                row = measure(kind, local, url, options, args.workers, cache_dir, args.repeats)
            row.update(dataset_bytes=size, store_bytes_per_s=ceiling["bytes_per_second"], in_flight=args.in_flight)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        server.terminate()
        server.wait()

    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    print()
    print("| dataset | MB | open local / remote s | local win/s | cold win/s | warm win/s | warm / local "
          "| cold MB/s (open+epoch) | store alone MB/s | warm bytes fetched "
          "| open with index s / MB | rank 0 of 2 by episode: MB fetched |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        index_open = "-" if r["index_open_s"] is None else f"{r['index_open_s']:.2f} / {r['index_open_bytes'] / 1e6:.2f}"
        print(f"| {r['dataset']} | {r['dataset_bytes'] / 1e6:.0f} | {r['local_open_s']:.2f} / {r['remote_open_s']:.2f} "
              f"| {r['local_windows_per_s']:,.0f} | {r['cold_windows_per_s']:,.0f} | {r['warm_windows_per_s']:,.0f} "
              f"| {r['warm_windows_per_s'] / r['local_windows_per_s']:.2f} "
              f"| {r['open_and_cold_bytes_per_s'] / 1e6:.0f} | {r['store_bytes_per_s'] / 1e6:.0f} "
              f"| {r['warm_bytes_fetched']} "
              f"| {index_open} "
              f"| {r['rank0_of_2_bytes_fetched'] / 1e6:.0f} |")


if __name__ == "__main__":
    main()

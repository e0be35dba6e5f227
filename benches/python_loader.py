"""The Python Loader against the Rust one on the same file: batches per
second of 256 robomimic step windows (seq_length 16) of the streams
robomimic's SequenceDataset reads, on cuda, after 3 warm-up batches.

    python3 python_loader.py FILE [--rust-json bench-loader.json] [--json out.json]

The Rust figure comes from `robocache bench loader --keep FILE --json` run
just before on the same machine (its resident configuration)."""

import argparse
import json
import time

import torch

import robocache

STREAMS = ["actions", "rewards", "dones", "obs/robot0_eef_pos", "obs/robot0_eef_quat", "obs/gripper_closed"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--rust-json")
    parser.add_argument("--json")
    args = parser.parse_args()
    device = "cuda:0" if robocache.cuda_available() else "cpu"
    loader = robocache.Loader(args.file, STREAMS, windows={"seq_length": 16}, batch_size=256, device=device)
    results = {"device": device, "batches": 0}
    it = iter(loader)
    for _ in range(3):
        next(it)
    start = time.perf_counter()
    n = 0
    for _ in range(args.batches):
        try:
            batch = next(it)
        except StopIteration:
            loader.set_epoch(loader.state_dict()["epoch"])
            it = iter(loader)
            batch = next(it)
        n += 1
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    results.update(batches=n, batches_per_s=n / elapsed, ms_per_batch=1e3 * elapsed / n)
    line = f"python Loader on {device}: {results['batches_per_s']:.0f} batches/s ({results['ms_per_batch']:.3f} ms/batch)"
    if args.rust_json:
        rust = [r for r in json.load(open(args.rust_json)) if r.get("backend", "").startswith("cuda")]
        if rust:
            results["rust_batches_per_s"] = rust[0]["batches_per_s"]
            line += f"; Rust Loader {rust[0]['batches_per_s']:.0f} batches/s ({results['batches_per_s'] / rust[0]['batches_per_s']:.2f}x)"
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()

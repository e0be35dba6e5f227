"""The Python Loader against the Rust one on the same file: batches per
second of 256 robomimic step windows (seq_length 16) of the streams
robomimic's SequenceDataset reads, on cuda, after 3 warm-up batches.

    python3 python_loader.py FILE [--rust-json bench-loader.json ...] [--json out.json] [--profile]

The Rust figure comes from `robocache bench loader --keep FILE --json` run
just before on the same machine (its resident configuration; the median of
the files given).

The rate is the median of 5 rounds. `--profile` also times two pieces of
a Python batch apart, in µs per batch (medians of 5 rounds): the native
`next_batch` alone (the Rust loader's batch handed over as DLPack capsules,
the previous one freed) and turning one batch's capsules into the dict of
torch tensors, so a miss can be placed."""

import argparse
import json
import statistics
import time

import robocache

STREAMS = ["actions", "rewards", "dones", "obs/robot0_eef_pos", "obs/robot0_eef_quat", "obs/gripper_closed"]


def loader_for(file, device):
    return robocache.Loader(file, STREAMS, windows={"seq_length": 16}, batch_size=256, device=device)


def rate(file, device, batches, torch):
    """Batches/s of the Python Loader over `batches` batches after 3 warm-up ones
    (one round)."""
    loader = loader_for(file, device)
    it = iter(loader)
    for _ in range(3):
        next(it)
    start = time.perf_counter()
    for _ in range(batches):
        try:
            next(it)
        except StopIteration:
            loader.set_epoch(loader.state_dict()["epoch"])
            it = iter(loader)
            next(it)
    if torch is not None and device.startswith("cuda"):
        torch.cuda.synchronize()
    return batches / (time.perf_counter() - start)


def profile(file, device, batches, torch):
    """µs per batch of each piece, medians of 5 rounds."""
    from robocache import _arrays

    loader = loader_for(file, device)
    native = loader._native
    stream_of = _arrays.stream_reader(loader.device)

    def native_only():
        epoch = native.epoch(0, 0)
        for _ in range(3):
            epoch.next_batch(stream_of(), True)
        start = time.perf_counter()
        for _ in range(batches):
            parts = epoch.next_batch(stream_of(), True)
            if parts is None:
                epoch = native.epoch(1, 0)
                parts = epoch.next_batch(stream_of(), True)
            del parts
        return (time.perf_counter() - start) / batches * 1e6

    def convert():
        # Capsules are used up by the conversion: take 200 batches' worth first.
        epoch = native.epoch(2, 0)
        held = [epoch.next_batch(stream_of(), True) for _ in range(min(200, len(loader)))]
        from_dlpack = _arrays.capsule_importer()
        keys = loader._keys
        start = time.perf_counter()
        for parts in held:
            dict(zip(keys, map(from_dlpack, parts)))
        return (time.perf_counter() - start) / len(held) * 1e6

    pieces = {"native next_batch": native_only, "capsules to tensors": convert}
    return {name: statistics.median(f() for _ in range(5)) for name, f in pieces.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--rust-json", nargs="*", default=[], help="`robocache bench loader --json` outputs (median)")
    parser.add_argument("--json")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    import torch

    device = "cuda:0" if robocache.cuda_available() else "cpu"
    # The median of 5 rounds: host-bound rates vary between rounds on these machines.
    per_s = statistics.median(rate(args.file, device, args.batches, torch) for _ in range(5))
    results = {"device": device, "batches": args.batches, "batches_per_s": per_s, "ms_per_batch": 1e3 / per_s}
    line = f"python Loader on {device}: {per_s:.0f} batches/s ({1e3 / per_s:.3f} ms/batch)"
    if args.rust_json:
        rates = []
        for path in args.rust_json:
            rust = [r for r in json.load(open(path)) if r.get("backend", "").startswith(device[:4])]
            rust = [r for r in rust if r.get("mode") == "resident"] or rust
            rates += [r["batches_per_s"] for r in rust[:1]]
        if rates:
            results["rust_batches_per_s"] = rust_per_s = statistics.median(rates)
            line += f"; Rust Loader {rust_per_s:.0f} batches/s, median of {len(rates)} ({per_s / rust_per_s:.2f}x)"
    if args.profile:
        results["profile_us_per_batch"] = profile(args.file, device, args.batches, torch)
    print(line)
    for name, us in results.get("profile_us_per_batch", {}).items():
        print(f"  {name:<22} {us:8.1f} us/batch")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()

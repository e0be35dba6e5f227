"""The Python Loader against the Rust one on the same file: batches per
second of 256 robomimic step windows (seq_length 16) of the streams
robomimic's SequenceDataset reads, on cuda, after 3 warm-up batches.

    python3 python_loader.py FILE [--rust-json bench-loader.json ...] [--json out.json] [--profile]

Both run in this process, on one loader, in alternating rounds (7 of
each): the Rust consumer loop of `robocache bench loader` (each batch
dropped as it arrives, `Loader.time_rust_consumer`) and Python's
iteration (each batch a dict of torch tensors). The ratio is the median of
the rounds' ratios: the lent hosts' speed drifts between runs and
processes by more than the difference measured, so only side-by-side
rounds compare. `--rust-json` adds the figure of `robocache bench loader
--keep FILE --json` run before in its own process (its default
configuration: valid masks instead of padding masks), for reference.

`--profile` also times two pieces of a Python batch apart, in µs per batch
(medians of 5 rounds): the native `next_batch` alone (the Rust loader's
batch handed over as DLPack capsules, the previous one freed) and turning
one batch's capsules into the dict of torch tensors, so a miss can be
placed."""

import argparse
import json
import statistics
import time

import robocache

STREAMS = ["actions", "rewards", "dones", "obs/robot0_eef_pos", "obs/robot0_eef_quat", "obs/gripper_closed"]
ROUNDS = 7


def loader_for(file, device):
    return robocache.Loader(file, STREAMS, windows={"seq_length": 16}, batch_size=256, device=device)


def python_rate(loader, batches, torch):
    """Batches/s of Python's iteration over `batches` batches after 3 warm-up
    ones, from epoch 0 on (one round)."""
    loader.set_epoch(0)
    it = iter(loader)
    for _ in range(3):
        next(it)
    start = time.perf_counter()
    for _ in range(batches):
        try:
            next(it)
        except StopIteration:
            it = iter(loader)  # the next epoch
            next(it)
    if torch is not None and loader.device.startswith("cuda"):
        torch.cuda.synchronize()
    return batches / (time.perf_counter() - start)


def rust_rate(loader, batches):
    """Batches/s of the Rust consumer loop on the same loader (one round)."""
    return batches / loader._native.time_rust_consumer(batches)


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
    loader = loader_for(args.file, device)
    rust, python, ratios = [], [], []
    for _ in range(ROUNDS):
        rust.append(rust_rate(loader, args.batches))
        python.append(python_rate(loader, args.batches, torch))
        ratios.append(python[-1] / rust[-1])
    per_s, rust_per_s, ratio = (statistics.median(v) for v in (python, rust, ratios))
    results = {"device": device, "batches": args.batches, "rounds": ROUNDS, "batches_per_s": per_s,
               "ms_per_batch": 1e3 / per_s, "rust_batches_per_s": rust_per_s, "ratio": ratio,
               "rounds_python": python, "rounds_rust": rust}
    line = (f"python Loader on {device}: {per_s:.0f} batches/s; Rust consumer, same process and loader: "
            f"{rust_per_s:.0f} batches/s; ratio {ratio:.2f}x (median of {ROUNDS} alternating rounds, "
            f"range {min(ratios):.2f}-{max(ratios):.2f})")
    if args.rust_json:
        rates = []
        for path in args.rust_json:
            cli = [r for r in json.load(open(path)) if r.get("backend", "").startswith(device[:4])]
            cli = [r for r in cli if r.get("mode") == "resident"] or cli
            rates += [r["batches_per_s"] for r in cli[:1]]
        if rates:
            results["cli_batches_per_s"] = cli_per_s = statistics.median(rates)
            line += f"\n  robocache bench loader (own process), median of {len(rates)}: {cli_per_s:.0f} batches/s"
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

"""A weighted mixture of datasets in three formats against each dataset's
loader alone, in one run on one machine: batches/s, windows/s and peak RSS.

    python3 benches/mixture_loader.py --robomimic lift.hdf5 --rlds rlds/NAME/1.0.0 \\
        --lerobot crates/robocache-datasets/tests/fixtures/lerobot/av1 [--device cuda:0] [--json out.json]

Inputs: a robomimic file (``robocache bench loader --keep lift.hdf5``), an
RLDS directory (``robocache bench write-rlds DIR --image 0``) and a LeRobot
root (default: the committed AV1 fixture). Each is read with windows of 16
steps of two low-dimensional streams (an action and a state of 3, 8 and 6
dimensions), batches of ``--batch-size``:

- alone: ``robocache.Loader`` of one dataset, ``--batches`` batches timed
  after warm-up;
- mixture: ``robocache.MixtureLoader`` of the three, weights 1:1:1
  (``sample``), ``action`` and ``state`` padded to 7 and 8 dimensions.

The target (issue 48): the mixture's windows/s at least 0.9 of the weighted
harmonic mean of the parts' rates, ``1 / sum(share_i / rate_i)``: the rate a
mixture reaches when each part's windows cost what they cost alone. Each
configuration runs in its own process, so its peak RSS is its own.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

MEMBERS = ["robomimic", "rlds", "lerobot"]


def loaders(args):
    import torch  # noqa: F401 (a CUDA loader's batches are torch tensors)
    import robocache

    steps = {"seq_length": 16}
    offsets = [k / 10 for k in range(16)]
    common = dict(batch_size=args.batch_size, device=args.device, workers=args.workers)
    return {
        "robomimic": (robocache.Loader(args.robomimic, ["actions", "obs/robot0_eef_pos"], windows=steps, **common),
                      {"action": "actions", "state": "obs/robot0_eef_pos"}),
        "rlds": (robocache.Loader(robocache.open(args.rlds, rate_hz=10.0), ["action", "observation/state"],
                                  windows=steps, **common),
                 {"action": "action", "state": "observation/state"}),
        "lerobot": (robocache.Loader(args.lerobot, ["action", "observation.state"],
                                     delta_timestamps={"action": offsets, "observation.state": offsets}, **common),
                    {"action": "action", "state": "observation.state"}),
    }


def timed(batches, make_epoch, warmup=5):
    """Batches/s and windows/s over ``batches`` batches after ``warmup``, epochs cycled."""
    import torch

    def synchronize():
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    seen = windows = 0
    started = None
    epoch = 0
    while seen < batches + warmup:
        for batch in make_epoch(epoch):
            rows = len(next(iter(batch.values())))
            if seen == warmup:
                synchronize()
                started = time.perf_counter()
            elif seen > warmup:
                windows += rows
            seen += 1
            if seen >= batches + warmup:
                break
        epoch += 1
    synchronize()
    elapsed = time.perf_counter() - started
    return {"batches_per_s": (seen - warmup - 1) / elapsed, "windows_per_s": windows / elapsed}


def run_one(args, name):
    import robocache

    built = loaders(args)
    if name == "mixture":
        mixture = robocache.MixtureLoader([{"loader": loader, "weight": 1.0, "keys": keys, "name": member}
                                           for member, (loader, keys) in built.items()],
                                          batch_size=args.batch_size,
                                          epoch_windows=args.batch_size * args.epoch_batches,
                                          workers=args.workers, prefetch=2 * args.workers, seed=1,
                                          **({} if args.batches_together is None else
                                             {"batches_together": args.batches_together}))

        def epoch(e):
            mixture.set_epoch(e)
            return mixture

        result = timed(args.batches, epoch)
        result["shares"] = dict(zip(MEMBERS, mixture.shares))
        result["telemetry"] = mixture.telemetry()
    else:
        loader = built[name][0]

        def epoch(e):
            loader.set_epoch(e)
            return loader

        result = timed(args.batches, epoch)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robomimic", required=True)
    parser.add_argument("--rlds", required=True)
    parser.add_argument("--lerobot", default=os.path.join(os.path.dirname(__file__), "..", "crates",
                                                          "robocache-datasets", "tests", "fixtures", "lerobot", "av1"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--epoch-batches", type=int, default=50, help="the mixture's batches per epoch")
    parser.add_argument("--batches-together", type=int,
                        help="the mixture's batches_together (default: the library's; a wheel older than it "
                             "takes none)")
    parser.add_argument("--only", help=argparse.SUPPRESS)
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.only:
        print(json.dumps(run_one(args, args.only)))
        return
    rows = {}
    for name in MEMBERS + ["mixture"]:
        command = [sys.executable, __file__, "--only", name] + [a for a in sys.argv[1:] if a != "--json" and
                                                               a != args.json]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{name} failed:\n{done.stderr[-2000:]}")
        rows[name] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{name:10} {rows[name]['batches_per_s']:9.1f} batches/s {rows[name]['windows_per_s']:10.0f} windows/s "
              f"peak RSS {rows[name]['peak_rss_mib']:7.0f} MiB", flush=True)
    shares = rows["mixture"]["shares"]
    harmonic = 1.0 / sum(shares[m] / rows[m]["windows_per_s"] for m in MEMBERS)
    ratio = rows["mixture"]["windows_per_s"] / harmonic
    print(f"\ndevice {args.device}, batch {args.batch_size}, {args.workers} workers, "
          f"{args.epoch_batches} mixture batches an epoch, batches_together {args.batches_together or 'default'}")
    print(f"weighted harmonic mean of the parts: {harmonic:.0f} windows/s; mixture: "
          f"{rows['mixture']['windows_per_s']:.0f} ({ratio:.2f} of it; target 0.9)")
    telemetry = rows["mixture"]["telemetry"]
    if "batches_per_run" in telemetry:
        print(f"  batches per run at the end: {telemetry['batches_per_run']}")
    for member in rows["mixture"]["telemetry"]["members"]:
        print(f"  {member['name']:10} share {member['share']:.3f} (weights {member['weight_share']:.3f}), "
              f"{member['seconds']:.3f} s in its parts, slowest in {member['slowest_in']} batches")
    if args.json:
        json.dump({"rows": [{"name": k, **{f: v for f, v in r.items() if isinstance(v, (int, float))}}
                            for k, r in rows.items()], "harmonic_windows_per_s": harmonic, "ratio": ratio},
                  open(args.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())

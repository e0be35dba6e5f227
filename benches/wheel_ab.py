"""Two robocache wheels side by side on one machine, in one run: each
benchmark runs with wheel A, then B, then A, then B (``--rounds``), each
wheel installed in its own folder, so a change (a refactor that must not
regress, a fix that should help) is compared with its baseline under the
same load, clocks and caches. Prints one table: per benchmark row and
metric, the median of A's runs, of B's, and B / A.

    python3 benches/wheel_ab.py A.whl B.whl --out DIR \\
        --bench "lerobot: python3 benches/lerobot_loader.py all ROOT --no-ceilings --backends" \\
        --bench "calls: python3 benches/python_call_overhead.py --no-compile"

Each ``--bench`` is ``NAME: COMMAND``; ``--json FILE`` is appended to the
command, which writes ``{"rows": [...]}`` (each row a dict with a name
field, ``loader``/``workload``/``name``, and numeric metrics) or
``{"rows": [[name, value, ...], ...]}`` (``frame_resize.py``: the first
number is the metric). ``PYTHONPATH`` holds the wheel's folder, then
``--deps`` (folders of what the benchmarks import besides robocache).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

NAME_FIELDS = ("loader", "workload", "name")
SKIP_FIELDS = {"cores_busy", "gpu_peak_bytes", "seconds", "workers"}


def install(wheel, folder):
    if not os.path.isdir(folder):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
                        folder, wheel], check=True)
    return folder


def metrics(path):
    """{(row name, metric): value} of one benchmark's JSON."""
    found = {}
    for row in json.load(open(path)).get("rows", []):
        if isinstance(row, dict):
            name = next((row[f] for f in NAME_FIELDS if f in row), "?")
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and key not in SKIP_FIELDS:
                    found[(name, key)] = float(value)
        elif isinstance(row, (list, tuple)) and row and isinstance(row[1], (int, float)):
            found[(str(row[0]), "value")] = float(row[1])
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--out", required=True)
    parser.add_argument("--bench", action="append", required=True, help="NAME: COMMAND")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--deps", default="", help="PYTHONPATH entries after the wheel's folder")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    folders = {side: install(wheel, os.path.join(args.out, f"wheel-{side}"))
               for side, wheel in (("A", args.a), ("B", args.b))}
    runs = {}  # (bench, side) -> [metrics]
    for spec in args.bench:
        name, command = (part.strip() for part in spec.split(":", 1))
        for round_ in range(args.rounds):
            for side in ("A", "B"):
                out = os.path.join(args.out, f"{name}-{side}-{round_}.json")
                env = dict(os.environ, PYTHONPATH=":".join(p for p in (folders[side], args.deps) if p))
                log = open(os.path.join(args.out, f"{name}-{side}-{round_}.log"), "w")
                print(f"== {name} {side} round {round_}", flush=True)
                done = subprocess.run(f"{command} --json {out}", shell=True, env=env, stdout=log, stderr=subprocess.STDOUT)
                if done.returncode != 0:
                    sys.exit(f"{name} with wheel {side} failed: see {log.name}")
                runs.setdefault((name, side), []).append(metrics(out))
    print(f"\nA = {args.a}\nB = {args.b}\nmedian of {args.rounds} runs each, alternating A B\n")
    print(f"{'benchmark / row / metric':<80} {'A':>10} {'B':>10} {'B/A':>6}  {'A runs':>19} {'B runs':>19}")
    for spec in args.bench:
        name = spec.split(":", 1)[0].strip()
        keys = sorted(set().union(*runs[(name, "A")]))
        for key in keys:
            values_a = [m[key] for m in runs[(name, "A")] if key in m]
            values_b = [m[key] for m in runs[(name, "B")] if key in m]
            if not values_b:
                continue
            a, b = statistics.median(values_a), statistics.median(values_b)
            spread = lambda values: f"{min(values):.4g}..{max(values):.4g}"  # noqa: E731
            label = f"{name} / {key[0]} / {key[1]}"
            print(f"{label[:80]:<80} {a:>10.2f} {b:>10.2f} {b / a if a else float('nan'):>6.3f}  "
                  f"{spread(values_a):>19} {spread(values_b):>19}")


if __name__ == "__main__":
    sys.exit(main())

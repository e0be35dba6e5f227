"""Python-side cost of a call: wall time per call from Python (dispatch +
launch + device time, results ready) for small and large workloads,
robocache against the same operation written in PyTorch (eager and
torch.compile), called the same way, in one run on one GPU.

    python3 python_call_overhead.py [--json out.json]

Each figure: N back-to-back calls, then one torch.cuda.synchronize(), over
N; the median of 7 rounds. Inputs stay resident (a training step's case)."""

import argparse
import json
import statistics
import time

import torch

import robocache


def torch_resample(data, times, targets):
    """Linear interpolation with clamped edges and a valid mask, per row (the PyTorch baseline)."""
    b, s, d = data.shape
    idx = torch.searchsorted(times, targets.expand(b, -1).contiguous(), right=True).clamp(1, s - 1)
    t0, t1 = times.gather(1, idx - 1), times.gather(1, idx)
    w = ((targets - t0) / (t1 - t0)).clamp(0, 1).to(data.dtype).unsqueeze(-1)
    x0 = data.gather(1, (idx - 1).unsqueeze(-1).expand(-1, -1, d))
    x1 = data.gather(1, idx.unsqueeze(-1).expand(-1, -1, d))
    valid = (targets >= times[:, :1]) & (targets <= times[:, -1:])
    return x0 + w * (x1 - x0), valid


def torch_fuse(streams, targets):
    outs, valids = zip(*(torch_resample(x, t, targets) for x, t in streams))
    return torch.cat(outs, -1), torch.stack(valids)


def per_call_us(fn, calls=200, rounds=7):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def workloads(device):
    g = torch.Generator(device="cpu").manual_seed(0)

    def stream(b, s, d, hz):
        t = (torch.arange(s, dtype=torch.float64) / hz).repeat(b, 1)
        return torch.randn(b, s, d, generator=g).to(device), t.to(device)

    out = {}
    for b, s, t in [(32, 500, 250), (256, 500, 250), (1024, 1000, 500)]:
        x, times = stream(b, s, 32, 100.0)
        q = (torch.arange(t, dtype=torch.float64) / 50.0).to(device)
        out[f"resample {b}x{s}->{t} D=32"] = (
            lambda x=x, times=times, q=q: robocache.resample(x, times, q),
            lambda x=x, times=times, q=q: robocache.resample(x, times, q, trusted=True),
            lambda x=x, times=times, q=q: torch_resample(x, times, q),
        )
    for b in (4, 32, 256):
        streams = [stream(b, 500, 7, 100.0), stream(b, 150, 64, 30.0), stream(b, 50, 1, 10.0)]
        q = (torch.arange(250, dtype=torch.float64) / 50.0).to(device)
        out[f"fusion B={b} (3 streams, 250 targets)"] = (
            lambda streams=streams, q=q: robocache.fuse(streams, q),
            lambda streams=streams, q=q: robocache.fuse([(x, t, "linear") for x, t in streams], q, trusted=True),
            lambda streams=streams, q=q: torch_fuse(streams, q),
        )
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    device = "cuda:0"
    rows = []
    for name, (ours, trusted, eager) in workloads(device).items():
        a, b, c = ours(), eager(), trusted()
        assert torch.allclose(a[0], b[0], atol=1e-5) and torch.equal(a[0], c[0]), name  # same results first
        row = {"workload": name, "robocache_us": per_call_us(ours), "trusted_us": per_call_us(trusted),
               "eager_us": per_call_us(eager)}
        if not args.no_compile:
            compiled = torch.compile(eager, dynamic=False)
            row["compile_us"] = per_call_us(compiled)
        rows.append(row)
    print(f"{'workload (µs per call)':42} {'checked':>8} {'trusted':>8} {'eager':>8} {'compile':>8} "
          f"{'compile/checked':>15} {'compile/trusted':>15}")
    for r in rows:
        c = r.get("compile_us", float("nan"))
        print(f"{r['workload']:42} {r['robocache_us']:8.1f} {r['trusted_us']:8.1f} {r['eager_us']:8.1f} {c:8.1f} "
              f"{c / r['robocache_us']:14.1f}x {c / r['trusted_us']:14.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()

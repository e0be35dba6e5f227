"""The PyTorch baseline of docs/performance.md, run by ``robocache bench --baseline``.

For every workload the harness exported (``<inputs>/<id>/manifest.json``
with the inputs and robocache's outputs as ``.npy``; bf16 as uint16 bits),
this script

1. loads the same inputs onto the same GPU;
2. computes the baseline: batched ``searchsorted`` on ``[B, S]`` / ``[B, T]``
   times, ``gather``, weights in float64, ``lerp`` in float32, cast back;
   fusion as the per-stream resamples concatenated; voxels with
   ``index_add_`` (counts, feature sums) and a division;
3. checks that the baseline gives robocache's numbers: resample and fusion
   within one unit in the last place of the output dtype with equal valid
   masks (docs/semantics.md), computed with the reference's ``a + w * (b - a)``
   (``torch.lerp``, which is timed, computes ``b - (b - a) * (1 - w)`` for
   ``w >= 0.5``, which differs near zero where ``a ≈ -b``); counts exactly;
   means within 1e-5 relative (float32 atomics in PyTorch, float64 sums in
   robocache);
4. times eager PyTorch and ``torch.compile`` exactly as the harness times
   robocache: 3 warm-up calls, then per repeat a read of twice the L2 cache
   size (evicts the inputs and keeps the GPU busy while the host queues the
   call), a CUDA event, the call, a CUDA event; the median over repeats;
   inputs rotate over copies of at least 256 MiB in all (at most 8 copies).

Writes a JSON list: ``{id, eager_us, compile_us, check, max_difference,
torch_version}``.
"""

import argparse
import json
import os
import statistics
import sys

import numpy as np
import torch


def load(directory, entry, device):
    array = np.load(os.path.join(directory, entry["file"]))
    if entry["dtype"] == "bf16":
        return torch.from_numpy(array.view(np.int16)).to(device).view(torch.bfloat16)
    if array.dtype in (np.uint16, np.uint32, np.uint64):
        array = array.astype(np.int64)
    return torch.from_numpy(array).to(device)


def resample(x, s, q, exact=False):
    """Linear, clamp boundary: out [B, T, D] in x's dtype and valid [B, T].

    ``torch.lerp`` (the timed baseline) computes ``b - (b - a) * (1 - w)`` for
    ``w >= 0.5``; ``exact`` spells out the reference's ``a + w * (b - a)``
    in float32, the function the results are checked with.
    """
    samples, channels = x.shape[1], x.shape[2]
    i = (torch.searchsorted(s, q, right=True) - 1).clamp_(0, samples - 2)
    s0, s1 = s.gather(1, i), s.gather(1, i + 1)
    w = ((q - s0) / (s1 - s0)).clamp_(0.0, 1.0).to(torch.float32).unsqueeze(-1)
    gi = i.unsqueeze(-1).expand(-1, -1, channels)
    x0 = x.gather(1, gi).to(torch.float32)
    x1 = x.gather(1, gi + 1).to(torch.float32)
    out = (x0 + w * (x1 - x0) if exact else torch.lerp(x0, x1, w)).to(x.dtype)
    valid = (q >= s[:, :1]) & (q <= s[:, -1:])
    return out, valid


def fusion(*arrays, exact=False):
    *streams, q = arrays
    outs, valids = [], []
    for k in range(len(streams) // 2):
        out, valid = resample(streams[2 * k], streams[2 * k + 1], q, exact=exact)
        outs.append(out)
        valids.append(valid)
    return torch.cat(outs, dim=-1), torch.stack(valids)


class Grid:
    """The voxel grid's constants on the device, made once (not in the timed call)."""

    def __init__(self, params, device):
        self.origin = torch.tensor(params["origin"], dtype=torch.float32, device=device)
        self.size = torch.tensor(params["voxel_size"], dtype=torch.float32, device=device)
        self.limit = torch.tensor(params["dims"], dtype=torch.float32, device=device)
        self.dims = params["dims"]
        self.voxels = self.dims[0] * self.dims[1] * self.dims[2]


def voxel_index(points, grid):
    v = torch.floor((points - grid.origin) / grid.size)
    inside = ((v >= 0) & (v < grid.limit)).all(dim=1)
    vi = v.to(torch.int64)
    linear = (vi[:, 0] * grid.dims[1] + vi[:, 1]) * grid.dims[2] + vi[:, 2]
    # Points outside go to an extra slot, dropped afterwards (no boolean
    # indexing, which would synchronise).
    return torch.where(inside, linear, grid.voxels)


def voxel_count(points, grid):
    linear = voxel_index(points, grid)
    ones = torch.ones_like(linear, dtype=torch.int32)
    counts = torch.zeros(grid.voxels + 1, dtype=torch.int32, device=points.device).index_add_(0, linear, ones)
    return (counts[:grid.voxels].view(1, *grid.dims),)


def voxel_mean(points, features, grid):
    linear = voxel_index(points, grid)
    f = features.shape[1]
    sums = torch.zeros(grid.voxels + 1, f, dtype=torch.float32, device=points.device).index_add_(0, linear, features)
    ones = torch.ones_like(linear, dtype=torch.float32)
    counts = torch.zeros(grid.voxels + 1, dtype=torch.float32, device=points.device).index_add_(0, linear, ones)
    mean = sums[:grid.voxels] / counts[:grid.voxels].clamp(min=1.0).unsqueeze(1)
    return mean.view(1, *grid.dims, f), counts[:grid.voxels].to(torch.int32).view(1, *grid.dims)


def ulp_difference(got, want):
    """Largest |got - want| in units of the last place of want's dtype."""
    g, w = got.to(torch.float64), want.to(torch.float64)
    mantissa = {torch.bfloat16: 8, torch.float16: 11, torch.float32: 24, torch.float64: 53}[want.dtype]
    magnitude = torch.maximum(g.abs(), w.abs()).clamp(min=torch.finfo(want.dtype).tiny)
    ulp = torch.exp2(torch.floor(torch.log2(magnitude)) - (mantissa - 1))
    return ((g - w).abs() / ulp).max().item() if g.numel() else 0.0


def check(kind, ours, theirs):
    """(check, max_difference) comparing the baseline with robocache's outputs."""
    if kind in ("resample", "fusion"):
        out, valid = ours
        difference = ulp_difference(out, theirs["out"])
        if not torch.equal(valid.to(torch.bool), theirs["valid"].to(torch.bool)):
            return "valid masks differ", difference
        return ("ok" if difference <= 1.0 else f"values differ by {difference:.1f} ulp"), difference
    if kind == "copy":
        equal = torch.equal(ours, theirs["out"])
        return ("ok" if equal else "copies differ"), 0.0 if equal else None
    if kind == "voxel_count":
        equal = torch.equal(ours[0].to(torch.int64), theirs["grid"].to(torch.int64))
        return ("ok" if equal else "counts differ"), 0.0 if equal else None
    mean, counts = ours
    if not torch.equal(counts.to(torch.int64), theirs["counts"].to(torch.int64)):
        return "counts differ", None
    want = theirs["grid"]
    relative = ((mean - want).abs() / want.abs().clamp(min=1e-30)).max().item()
    return ("ok" if relative <= 1e-5 else f"means differ by {relative:.2e} relative"), relative


class Evictor:
    """Reads twice the L2 size: the same cache eviction the harness queues."""

    def __init__(self, device):
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)
        self.scratch = torch.zeros(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device=device)

    def __call__(self):
        self.scratch.sum()


def time_calls(fn, sets, repeats, evict):
    for i in range(3):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    pairs = []
    for i in range(repeats):
        evict()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn(*sets[i % len(sets)])
        end.record()
        del out
        pairs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) * 1000.0 for start, end in pairs)


def rotated(inputs, rotate_bytes=256 << 20):
    size = sum(t.numel() * t.element_size() for t in inputs)
    copies = max(1, min(8, -(-rotate_bytes // max(size, 1))))
    return [inputs] + [[t.clone() for t in inputs] for _ in range(copies - 1)]


def run_workload(directory, repeats, compile_too, evict, device):
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    kind, params = manifest["kind"], manifest["params"]
    inputs = [load(directory, entry, device) for entry in manifest["inputs"]]
    theirs = {entry["name"]: load(directory, entry, device) for entry in manifest["outputs"]}
    if kind == "resample":
        fn = resample
    elif kind == "fusion":
        fn = fusion
    elif kind == "copy":
        fn = torch.clone
    elif kind == "voxel_count":
        grid = Grid(params, device)
        fn = lambda p: voxel_count(p, grid)  # noqa: E731
    else:
        grid = Grid(params, device)
        fn = lambda p, f: voxel_mean(p, f, grid)  # noqa: E731
    ours = fn(*inputs, exact=True) if kind in ("resample", "fusion") else fn(*inputs)
    verdict, difference = check(kind, ours, theirs)
    del ours, theirs
    sets = rotated(inputs)
    result = {"id": manifest["id"], "check": verdict, "max_difference": difference,
              "torch_version": torch.__version__, "eager_us": time_calls(fn, sets, repeats, evict),
              "compile_us": None}
    # torch.compile of the scatter-based voxel functions is not part of the
    # project's baseline table (it has no compiled voxel numbers).
    if compile_too and kind in ("resample", "fusion"):
        compiled = torch.compile(fn, dynamic=False)
        result["compile_us"] = time_calls(compiled, sets, repeats, evict)
    print(f"{manifest['name']:<52} eager {result['eager_us']:>9.1f} µs  compile "
          f"{result['compile_us'] if result['compile_us'] is None else round(result['compile_us'], 1)!s:>9} µs  "
          f"check: {verdict}", flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", required=True, help="the directory the harness exported")
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--no-compile", action="store_true", help="time eager PyTorch only")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_baseline.py: PyTorch sees no CUDA device")
    torch._dynamo.config.cache_size_limit = 64
    device = torch.device("cuda")
    evict = Evictor(device)
    results = []
    for name in sorted(os.listdir(args.inputs)):
        directory = os.path.join(args.inputs, name)
        if os.path.exists(os.path.join(directory, "manifest.json")):
            results.append(run_workload(directory, args.repeats, not args.no_compile, evict, device))
            torch.cuda.empty_cache()
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

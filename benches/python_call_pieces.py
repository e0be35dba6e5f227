"""Where a call's time goes from Python on CUDA: a resample (32x500->250,
D=32) and a fusion (B=4, 3 streams, 250 targets, as python_call_overhead.py
times), the whole call (trusted and checked) and its pieces apart, each
the median of 7 rounds of 200 back-to-back calls, µs per call.

    python3 python_call_pieces.py

Pieces: describing the tensors, reading torch's current stream, the
native call with its results dropped at once and kept (then freeing them),
one result into torch through a DLPack capsule, and one eager torch launch
for scale. docs/performance.md ("From Python") holds the results."""
import statistics, time
import torch, robocache
from robocache import _arrays, _native
dev = "cuda:0"
B, S, T, D = 32, 500, 250, 32
data = torch.randn(B, S, D, device=dev)
times = torch.cumsum(torch.rand(B, S, device=dev, dtype=torch.float64) * 0.01 + 0.001, 1)
targets = torch.linspace(0.1, 2.0, T, device=dev, dtype=torch.float64).expand(B, T).contiguous()
N = 200
def med(f, per=1):
    r = []
    for _ in range(7):
        torch.cuda.synchronize(); t = time.perf_counter(); f(); torch.cuda.synchronize()
        r.append((time.perf_counter() - t) / N / per * 1e6)
    return statistics.median(r)
keep = []
d = _arrays.describe(data, "data", keep); tt = _arrays.describe(times, "t", keep); tg = _arrays.describe(targets, "g", keep)
s = _arrays.current_stream(dev)
rows = []
rows.append(("whole call, trusted", med(lambda: [robocache.resample(data, times, targets, trusted=True) for _ in range(N)])))
rows.append(("whole call, checked", med(lambda: [robocache.resample(data, times, targets) for _ in range(N)])))
rows.append(("describe x3", med(lambda: [(_arrays.describe(data, "data", keep), _arrays.describe(times, "t", keep), _arrays.describe(targets, "g", keep)) for _ in range(N)])))
rows.append(("current_stream", med(lambda: [_arrays.current_stream(dev) for _ in range(N)])))
rows.append(("native call, results dropped", med(lambda: [_native.resample(d, tt, tg, "linear", "clamp", None, True, s) for _ in range(N)])))
held = []
rows.append(("native call, results kept", med(lambda: held.extend(_native.resample(d, tt, tg, "linear", "clamp", None, True, s) for _ in range(N)))))
def free():
    for _ in range(N): held.pop()
held2 = [_native.resample(d, tt, tg, "linear", "clamp", None, True, s) for _ in range(7 * N)]
held = held2
rows.append(("dropping 2 results", med(free)))
arrs = [_native.resample(d, tt, tg, "linear", "clamp", None, True, s)[0] for _ in range(10)]
rows.append(("to_dlpack + from_dlpack x1", med(lambda: [_arrays.output(arrs[i % 10], True) for i in range(N)])))
def fusion_stream(s, d, hz):
    return torch.randn(4, s, d, device=dev), (torch.arange(s, dtype=torch.float64) / hz).repeat(4, 1).to(dev)
fstreams = [fusion_stream(500, 7, 100.0), fusion_stream(150, 64, 30.0), fusion_stream(50, 1, 10.0)]
fq = (torch.arange(250, dtype=torch.float64) / 50.0).to(dev)
ftrusted = [(x, t, "linear") for x, t in fstreams]
fparts = [(_arrays.describe(x, "d", keep), _arrays.describe(t, "t", keep), None, "linear", "clamp") for x, t in fstreams]
fqd = _arrays.describe(fq, "q", keep)
ftensors = [a for pair in fstreams for a in pair] + [fq]
rows.append(("fusion B=4: whole call, trusted", med(lambda: [robocache.fuse(ftrusted, fq, trusted=True) for _ in range(N)])))
rows.append(("fusion B=4: whole call, checked", med(lambda: [robocache.fuse(fstreams, fq) for _ in range(N)])))
rows.append(("fusion B=4: describe x7", med(lambda: [[_arrays.describe(a, "a", keep) for a in ftensors] for _ in range(N)])))
held = []
rows.append(("fusion B=4: native call, results kept", med(lambda: held.extend(_native.fuse(fparts, fqd, "f32", True, s) for _ in range(N)))))
held = []
x = torch.zeros(4, device=dev)
rows.append(("one eager torch launch (x.add_(1))", med(lambda: [x.add_(1) for _ in range(N)])))
for name, us in rows:
    print(f"{name:<40} {us:7.2f} us")

"""Same process, same Live: the CUDA window with the consumer's stream made
to wait for robocache's (what Live.window does now) against the window
handed over unordered (what it did before), each until the tensors are
ready (torch.cuda.synchronize), interleaved. On a GPU machine with the
wheel installed: python3 live_window_order_cost.py"""
import json, sys, tempfile, time
import h5py, numpy as np, torch, robocache

path = tempfile.mkdtemp() + "/f.hdf5"
rng = np.random.default_rng(0)
with h5py.File(path, "w") as f:
    d = f.create_group("data"); d.attrs["env_args"] = json.dumps({"env_kwargs": {"control_freq": 20}})
    for i in range(2):
        g = d.create_group(f"demo_{i}"); g.attrs["num_samples"] = 200
        g.create_dataset("actions", data=rng.standard_normal((200, 7)).astype(np.float32))
        o = g.create_group("obs")
        for k in range(8):
            o.create_dataset(f"s{k}", data=rng.standard_normal((200, 7)).astype(np.float32))
streams = [f"obs/s{k}" for k in range(8)]
loader = robocache.Loader(path, streams, windows={"hz": 30, "history": 2, "horizon": 1, "causal": True},
                          batch_size=8, device="cpu", normalization="zscore")
live = robocache.Live(loader.spec(), device="cuda:0")
for i in range(200):
    for s in streams:
        live.push(s, i / 100.0, rng.standard_normal(7).astype(np.float32))
stream = torch.cuda.current_stream().cuda_stream
times = {"ordered": [], "unordered": []}
for i in range(4000):
    kind = "ordered" if i % 2 else "unordered"
    t0 = time.perf_counter()
    parts = live._native.window(1.99, stream if kind == "ordered" else None, True)
    tensors = [torch.from_dlpack(p) for p in parts]
    torch.cuda.synchronize()
    times[kind].append((time.perf_counter() - t0) * 1e6)
for kind, v in times.items():
    v = np.array(v[100:])
    print(f"{kind:10s} p50 {np.percentile(v, 50):6.1f} us  p99 {np.percentile(v, 99):6.1f} us")

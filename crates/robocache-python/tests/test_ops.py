"""Every operation against NumPy oracles, with NumPy and torch (CPU) arrays
in and out; zero copy across the boundary; the seeds' functions; errors."""

import numpy as np
import pytest

import robocache
from robocache import _arrays, _native

torch = pytest.importorskip("torch")


def irregular(rng, batch, samples):
    return 1.7e9 + np.cumsum(rng.uniform(0.005, 0.02, (batch, samples)), axis=1)


def numpy_linear(data, times, targets):
    """The oracle: np.interp per row and channel in f64, clamped at the edges."""
    out = np.empty((data.shape[0], targets.shape[-1], data.shape[2]))
    for b in range(data.shape[0]):
        q = targets if targets.ndim == 1 else targets[b]
        t = times if times.ndim == 1 else times[b]
        for d in range(data.shape[2]):
            out[b, :, d] = np.interp(q, t, data[b, :, d].astype(np.float64))
    return out


def test_resample_linear_matches_numpy_with_numpy_and_torch():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((4, 200, 7)).astype(np.float32)
    times = irregular(rng, 4, 200)
    targets = np.linspace(times.min() - 0.1, times.max() + 0.1, 90)
    out, valid = robocache.resample(data, times, targets)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (4, 90, 7)
    np.testing.assert_allclose(out, numpy_linear(data, times, targets), rtol=2e-6, atol=2e-6)
    assert valid.dtype == np.bool_
    assert np.array_equal(valid, (targets >= times[:, :1]) & (targets <= times[:, -1:]))
    tout, tvalid = robocache.resample(torch.from_numpy(data), torch.from_numpy(times), torch.from_numpy(targets))
    assert isinstance(tout, torch.Tensor) and tout.dtype == torch.float32 and tout.device.type == "cpu"
    assert np.array_equal(tout.numpy(), out) and np.array_equal(tvalid.numpy(), valid)


def test_resample_methods_boundaries_lengths_and_uniform_times():
    data = np.arange(10, dtype=np.float64).reshape(1, 10, 1) * 10
    out, valid = robocache.resample(data, (0.0, 10.0), (0.04, 10.0, 12), method="previous")
    assert out[0, :, 0].tolist() == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 90, 90]
    assert valid[0].tolist() == [True] * 9 + [False] * 3
    out, _ = robocache.resample(data, (0.0, 10.0), (0.06, 10.0, 3), method="nearest")
    assert out[0, :, 0].tolist() == [10, 20, 30]
    out, valid = robocache.resample(data, (0.0, 10.0), (-0.1, 10.0, 3), boundary=-1.0)
    assert out[0, :, 0].tolist() == [-1.0, 0.0, 10.0] and valid[0].tolist() == [False, True, True]
    out, _ = robocache.resample(data, (0.0, 10.0), (1.0, 1.0, 1), boundary="extrapolate")
    assert out[0, 0, 0] == pytest.approx(100.0)
    two = np.repeat(data, 2, axis=0)
    out, valid = robocache.resample(two, (0.0, 10.0), (0.0, 10.0, 10), lengths=np.array([10, 4]))
    assert valid[1].tolist() == [True] * 4 + [False] * 6 and out[1, 9, 0] == 30.0
    out2d, valid2d = robocache.resample(data[0], (0.0, 10.0), (0.05, 10.0, 3))
    assert out2d.shape == (3, 1) and valid2d.shape == (3,) and out2d[:, 0].tolist() == [5.0, 15.0, 25.0]


def test_resample_slerp_channels_and_bf16():
    angle = np.linspace(0, np.pi / 2, 5)
    quats = np.stack([np.zeros(5), np.zeros(5), np.sin(angle / 2), np.cos(angle / 2)], -1)  # xyzw about z
    data = np.concatenate([quats, np.arange(5.0)[:, None]], -1)[None].astype(np.float32)
    out, _ = robocache.resample(data, (0.0, 1.0), (0.5, 1.0, 3), channels=[(0, 4, "slerp-xyzw"), (4, 5, "previous")])
    half = np.pi / 32  # halfway between rotations of 0 and pi/8 about z: pi/16, whose half-angle is pi/32
    assert out[0, 0, 2] == pytest.approx(np.sin(half), abs=1e-6) and out[0, 0, 3] == pytest.approx(np.cos(half), abs=1e-6)
    assert out[0, :, 4].tolist() == [0.0, 1.0, 2.0]
    x = torch.arange(12, dtype=torch.bfloat16).reshape(1, 12, 1)
    out, _ = robocache.resample(x, (0.0, 1.0), (0.0, 1.0, 12), method="nearest")
    assert out.dtype == torch.bfloat16 and torch.equal(out, x)


def test_zero_copy_across_the_boundary():
    rng = np.random.default_rng(2)
    data = rng.standard_normal((2, 50, 3)).astype(np.float32)
    tensor = torch.from_numpy(data)
    assert _arrays.describe(tensor, "x")[0] == tensor.data_ptr() == data.ctypes.data
    desc = _arrays.describe(data, "x")
    out, valid = _native.resample(desc, ("uniform", 0.0, 10.0), ("uniform", 0.0, 20.0, 40), "linear", "clamp",
                                  None, False, None)
    as_numpy = np.asarray(out)
    assert as_numpy.__array_interface__["data"][0] == out.address
    as_torch = _arrays.output(out, True)
    assert as_torch.data_ptr() == out.address
    del out
    assert as_numpy.base is not None  # the result keeps robocache's buffer alive
    assert np.array_equal(as_numpy, as_torch.numpy())


def test_results_through_dlpack_keep_their_memory():
    data = np.random.default_rng(3).standard_normal((3, 40, 2)).astype(np.float32)
    out, valid = _native.resample(_arrays.describe(data, "x"), ("uniform", 0.0, 10.0), ("uniform", 0.0, 20.0, 60),
                                  "linear", "clamp", None, False, None)
    assert out.__dlpack_device__() == (1, 0)
    by_protocol = torch.from_dlpack(out)  # __dlpack__ / __dlpack_device__
    by_capsule = torch.from_dlpack(out.to_dlpack())
    by_numpy = np.from_dlpack(out)
    assert by_protocol.data_ptr() == by_capsule.data_ptr() == out.address == by_numpy.ctypes.data
    mask = torch.from_dlpack(valid)
    assert mask.dtype == torch.bool and mask.shape == (3, 60)
    want = by_numpy.copy()
    del out, valid
    import gc

    gc.collect()
    scratch = [np.full((3, 60, 2), 7.0, np.float32) for _ in range(8)]  # reuse of freed memory would show
    assert np.array_equal(by_protocol.numpy(), want) and np.array_equal(by_capsule.numpy(), want)
    assert len(scratch) == 8
    with pytest.raises(BufferError):
        torch.utils.dlpack.from_dlpack(_native.resample(_arrays.describe(data, "x"), ("uniform", 0.0, 10.0),
                                                        ("uniform", 0.0, 20.0, 6), "linear", "clamp", None, False,
                                                        None)[0].__dlpack__(copy=True))
    # A capsule no consumer took is released by its destructor.
    unused = _native.resample(_arrays.describe(data, "x"), ("uniform", 0.0, 10.0), ("uniform", 0.0, 20.0, 6),
                              "linear", "clamp", None, False, None)[0].to_dlpack()
    del unused


def test_fuse_equals_resample_per_stream_and_casts():
    rng = np.random.default_rng(3)
    joints = rng.standard_normal((3, 100, 7)).astype(np.float32)
    joint_times = irregular(rng, 3, 100)
    gripper = (rng.uniform(size=(3, 10, 1)) > 0.5).astype(np.uint8)
    targets = np.linspace(joint_times.min(), joint_times.max(), 40)
    out, valids = robocache.fuse([(joints, joint_times), {"data": gripper, "times": (1.7e9, 10.0),
                                                          "method": "previous"}], targets)
    assert out.shape == (3, 40, 8) and valids.shape == (2, 3, 40)
    expected, valid = robocache.resample(joints, joint_times, targets)
    assert np.array_equal(out[:, :, :7], expected) and np.array_equal(valids[0], valid)
    g, _ = robocache.resample(gripper, (1.7e9, 10.0), targets, method="previous")
    assert np.array_equal(out[:, :, 7], g[:, :, 0].astype(np.float32))
    bf, _ = robocache.fuse([(torch.from_numpy(joints), torch.from_numpy(joint_times))], torch.from_numpy(targets),
                           dtype=torch.bfloat16)
    assert bf.dtype == torch.bfloat16 and torch.equal(bf, torch.from_numpy(expected).to(torch.bfloat16))


def test_voxelize_modes_against_numpy():
    rng = np.random.default_rng(4)
    points = rng.uniform(-0.2, 1.2, (5000, 3)).astype(np.float32)
    features = rng.standard_normal((5000, 2)).astype(np.float32)
    size, dims = 0.125, (8, 8, 8)
    index = np.floor(points / size).astype(int)
    inside = np.all((index >= 0) & (index < 8), axis=1)
    counts = np.zeros(dims, np.uint32)
    np.add.at(counts, tuple(index[inside].T), 1)
    grid, _, dropped = robocache.voxelize(points, origin=(0, 0, 0), voxel_size=size, dims=dims, mode="count")
    assert np.array_equal(grid[0], counts) and int(dropped[0]) == int((~inside).sum())
    occupancy, _, _ = robocache.voxelize(torch.from_numpy(points), origin=(0, 0, 0), voxel_size=size, dims=dims)
    assert occupancy.dtype == torch.uint8 and np.array_equal(occupancy[0].numpy(), (counts > 0).astype(np.uint8))
    mean, mean_counts, _ = robocache.voxelize(points, origin=(0, 0, 0), voxel_size=size, dims=dims, mode="mean",
                                              features=features)
    sums = np.zeros(dims + (2,))
    np.add.at(sums, tuple(index[inside].T), features[inside].astype(np.float64))
    with np.errstate(invalid="ignore"):
        want = np.where(counts[..., None] > 0, sums / np.maximum(counts, 1)[..., None], 0).astype(np.float32)
    np.testing.assert_allclose(mean[0], want, rtol=1e-6, atol=1e-6)
    assert np.array_equal(mean_counts[0], counts)


def test_seed_functions():
    rng = np.random.default_rng(5)
    vision = torch.from_numpy(rng.standard_normal((2, 30, 16)).astype(np.float32))
    vision_times = torch.linspace(0, 1, 30).repeat(2, 1)  # float32, as the seeds build them
    proprio = torch.from_numpy(rng.standard_normal((2, 100, 14)).astype(np.float32))
    proprio_times = torch.linspace(0, 1, 100)
    target_times = torch.linspace(0, 1, 50)
    v = robocache.resample_trajectories(vision, vision_times, target_times)
    p = robocache.resample_trajectories(proprio, proprio_times, target_times)
    assert v.shape == (2, 50, 16) and p.shape == (2, 50, 14)
    fused = robocache.fuse_multimodal(vision, vision_times, proprio, proprio_times, target_times)
    assert torch.equal(fused, torch.cat([v, p], -1))
    assert robocache.fuse_multimodal_alignment is robocache.fuse_multimodal
    points = torch.rand(2, 1000, 3)
    grid = robocache.voxelize_pointcloud(points, grid_min=(0, 0, 0), voxel_size=0.25, grid_size=(4, 4, 4), mode="count")
    assert grid.shape == (2, 4, 4, 4) and int(grid.sum()) == 2000
    assert robocache.is_cuda_available() == robocache.cuda_available()
    assert robocache.self_test() is True


@pytest.mark.parametrize("on", ["cpu", "cuda"])
def test_groot_loop_as_written(on, request):
    """The seeds' GR00T integration loop, with a small stand-in model and
    data; on "cuda" the seed's own lines (`.cuda()` target times, the model
    on the GPU, batches of CUDA tensors)."""
    if on == "cuda":
        request.getfixturevalue("cuda")
    class Stand(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(512 + 14 + 768, 7)

        def forward(self, vision, proprio, language):
            language = language[:, None].expand(-1, vision.shape[1], -1)
            return self.head(torch.cat([vision, proprio, language], -1)).mean(1)

    dataloader = [{key: value.to(on) for key, value in {
        "vision": torch.randn(2, 150, 512), "vision_times": torch.linspace(0, 5, 150).repeat(2, 1),
        "proprio": torch.randn(2, 500, 14), "proprio_times": torch.linspace(0, 5, 500).repeat(2, 1),
        "language": torch.randn(2, 768), "actions": torch.randn(2, 7),
    }.items()}]
    model, criterion = Stand().to(on), torch.nn.MSELoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for batch in dataloader:
        vision = batch['vision']
        vision_times = batch['vision_times']
        proprio = batch['proprio']
        proprio_times = batch['proprio_times']
        language = batch['language']
        target_times = torch.linspace(0, 5, 250).cuda() if on == "cuda" else torch.linspace(0, 5, 250)  # 50Hz policy
        vision_aligned = robocache.resample_trajectories(vision, vision_times, target_times)
        proprio_aligned = robocache.resample_trajectories(proprio, proprio_times, target_times)
        actions_pred = model(vision_aligned, proprio_aligned, language)
        loss = criterion(actions_pred, batch['actions'])
        loss.backward()
        optimizer.step()
    assert vision_aligned.shape == (2, 250, 512) and vision_aligned.device.type == on and torch.isfinite(loss)


@pytest.mark.parametrize("case", ["dtype", "noncontiguous", "expanded", "shapes", "times", "list", "spec", "device"])
def test_errors_raise_robocache_exceptions(case):
    data = np.zeros((2, 10, 3), np.float32)
    if case == "dtype":
        with pytest.raises(TypeError) as e:
            robocache.resample(data.astype(np.complex64), (0.0, 1.0), (0.0, 1.0, 4))
        assert isinstance(e.value, robocache.DTypeError) and "complex64" in str(e.value)
    elif case == "noncontiguous":
        with pytest.raises(robocache.InvalidInputError, match="not C-contiguous"):
            robocache.resample(data[:, ::2], (0.0, 1.0), (0.0, 1.0, 4))
    elif case == "expanded":  # the seed read out of bounds on expanded time tensors
        times = torch.linspace(0, 1, 10).expand(2, 10).to(torch.float64)
        with pytest.raises(ValueError, match="contiguous"):
            robocache.resample(torch.from_numpy(data), times.expand(2, 10)[:, :], torch.linspace(0, 1, 4, dtype=torch.float64).expand(2, 4))
    elif case == "shapes":
        with pytest.raises(ValueError, match="source times"):
            robocache.resample(data, np.linspace(0, 1, 9), (0.0, 1.0, 4))
    elif case == "times":
        times = np.tile(np.linspace(0, 1, 10), (2, 1))
        times[1, 5] = times[1, 4]
        with pytest.raises(robocache.InvalidInputError, match="row 1, index 5"):
            robocache.resample(data, times, (0.0, 1.0, 4))
    elif case == "list":
        with pytest.raises(robocache.InvalidInputError, match="NumPy array or a torch tensor"):
            robocache.resample(data.tolist(), (0.0, 1.0), (0.0, 1.0, 4))
    elif case == "spec":
        with pytest.raises(robocache.InvalidInputError, match="channels"):
            robocache.resample(data, (0.0, 1.0), (0.0, 1.0, 4), method="cubic")
    elif case == "device":
        if robocache.cuda_available():
            cuda = torch.zeros(2, 10, 3, device="cuda")
            with pytest.raises(robocache.DeviceMismatchError):
                robocache.resample(cuda, torch.linspace(0, 1, 10, dtype=torch.float64), (0.0, 1.0, 4))
        else:
            with pytest.raises(robocache.CudaUnavailableError):
                _native.resample((data.ctypes.data, (2, 10, 3), "f32", "cuda:0"), ("uniform", 0.0, 1.0),
                                 ("uniform", 0.0, 1.0, 4), "linear", "clamp", None, False, 0)


def test_native_stubs_name_what_the_module_has():
    """The .pyi stubs and the extension module list the same names (a stub
    for something removed, or a new function without a stub, fails)."""
    import ast
    import pathlib

    stubs = ast.parse((pathlib.Path(_native.__file__).parent / "_native.pyi").read_text())
    declared = {}
    for node in stubs.body:
        if isinstance(node, ast.FunctionDef):
            declared[node.name] = None
        elif isinstance(node, ast.ClassDef):
            declared[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} - {"__init__"}
    runtime = {n for n in dir(_native) if not n.startswith("_") and n not in ("ArrayDesc",)}
    assert set(declared) == runtime, set(declared) ^ runtime
    for cls, methods in declared.items():
        if methods is not None:
            public = {n for n in dir(getattr(_native, cls)) if not n.startswith("_")}
            public |= {n for n in methods if n.startswith("__") and hasattr(getattr(_native, cls), n)}
            assert methods == public, (cls, methods ^ public)

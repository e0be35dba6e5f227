"""On a GPU: torch CUDA tensors in and out, equal to the CPU backend, on
the default and on a non-default stream with work queued before the call."""

import numpy as np
import pytest

import robocache

torch = pytest.importorskip("torch")


def inputs(seed=0, batch=64, samples=2000, channels=16):
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((batch, samples, channels)).astype(np.float32)
    times = 1.7e9 + np.cumsum(rng.uniform(0.001, 0.02, (batch, samples)), axis=1)
    targets = np.linspace(times.min(), times.max(), 500)
    return data, times, targets


def test_cuda_results_equal_cpu(cuda):
    data, times, targets = inputs()
    want, want_valid = robocache.resample(data, times, targets)
    got, valid = robocache.resample(torch.from_numpy(data).to(cuda), torch.from_numpy(times).to(cuda),
                                    torch.from_numpy(targets).to(cuda))
    assert got.device.type == "cuda" and got.dtype == torch.float32
    assert np.array_equal(got.cpu().numpy(), want) and np.array_equal(valid.cpu().numpy(), want_valid)
    fused, valids = robocache.fuse([(torch.from_numpy(data).to(cuda), torch.from_numpy(times).to(cuda))],
                                   torch.from_numpy(targets).to(cuda), dtype="bf16")
    assert fused.dtype == torch.bfloat16 and torch.equal(fused.cpu(), torch.from_numpy(want).to(torch.bfloat16))
    points = torch.rand(100_000, 3, device=cuda)
    grid, _, dropped = robocache.voxelize(points, origin=(0, 0, 0), voxel_size=1 / 32, dims=(32, 32, 32), mode="count")
    cpu_grid, _, _ = robocache.voxelize(points.cpu(), origin=(0, 0, 0), voxel_size=1 / 32, dims=(32, 32, 32), mode="count")
    assert torch.equal(grid.cpu(), cpu_grid) and int(dropped.cpu()[0]) == 0


@pytest.mark.parametrize("stream", ["default", "side"])
def test_ordered_with_torchs_current_stream(cuda, stream):
    """Inputs written by a long kernel queued just before the call, and
    results read right after, with no synchronisation by the caller: wrong
    ordering on either side reads unwritten data."""
    data, times, targets = inputs(seed=1)
    want, _ = robocache.resample(data, times, targets)
    side = torch.cuda.Stream() if stream == "side" else torch.cuda.current_stream()
    with torch.cuda.stream(side):
        for _ in range(3):
            source = torch.zeros(data.shape, device=cuda)
            slow = torch.randn(4096, 4096, device=cuda)
            for _ in range(8):
                slow = torch.tanh(slow @ slow)  # keeps the stream busy; tanh keeps it finite
            source.copy_(torch.from_numpy(data).pin_memory(), non_blocking=True)
            source += slow[:1, :1] * 0  # the write ends after the matmuls
            out, _ = robocache.resample(source, torch.from_numpy(times).to(cuda), torch.from_numpy(targets).to(cuda))
            result = out * 1  # queued on the same stream right after
            del out, source
        host = result.cpu()
    assert np.array_equal(host.numpy(), want)


def test_checks_name_the_failing_stream_on_cuda_as_on_cpu(cuda):
    data, times, targets = inputs(batch=4, samples=100)
    bad = times.copy()
    bad[2, 40] = bad[2, 39]  # not increasing: row 2, index 40
    messages = []
    for device in ("cpu", cuda):
        as_tensor = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
        with pytest.raises(robocache.InvalidInputError) as error:
            robocache.fuse([(as_tensor(data), as_tensor(times)), (as_tensor(data), as_tensor(bad))],
                           as_tensor(targets))
        messages.append(str(error.value))
        out, _ = robocache.fuse([(as_tensor(data), as_tensor(times)), (as_tensor(data), as_tensor(bad))],
                                as_tensor(targets), trusted=True)  # no check, no out-of-bounds read
        assert out.shape == (4, 500, 32)
    assert messages[0] == messages[1] and "stream 1" in messages[0] and "row 2" in messages[0], messages

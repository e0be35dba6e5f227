"""Shared fixtures: a robomimic-layout file written with h5py (the format's
own writer library, independent of robocache's reader), and whether the
GPU tests must run (ROBOCACHE_REQUIRE_CUDA=1 on the GPU machine)."""

import json
import os

import numpy as np
import pytest

import robocache


def pytest_report_header(config):
    return f"robocache {robocache.__version__}, cuda available: {robocache.cuda_available()}"


@pytest.fixture(scope="session")
def cuda():
    """'cuda:0' when a GPU answers; a skip elsewhere, a failure where the run asks for the GPU."""
    if robocache.cuda_available():
        torch = pytest.importorskip("torch")
        assert torch.cuda.is_available()
        return "cuda:0"
    if os.environ.get("ROBOCACHE_REQUIRE_CUDA") == "1":
        pytest.fail(f"ROBOCACHE_REQUIRE_CUDA=1 but no CUDA device answers: {robocache.info()['cuda']}")
    pytest.skip("no CUDA device")


@pytest.fixture(scope="session")
def robomimic_file(tmp_path_factory):
    """12 demos of 30-60 steps at 20 Hz: actions [N, 7], obs/joint_pos [N, 7], obs/gripper [N, 1]."""
    h5py = pytest.importorskip("h5py")
    path = tmp_path_factory.mktemp("data") / "demo.hdf5"
    rng = np.random.default_rng(7)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift", "env_kwargs": {"control_freq": 20}})
        total = 0
        for i in range(12):
            n = int(rng.integers(30, 60))
            demo = data.create_group(f"demo_{i}")
            demo.attrs["num_samples"] = n
            demo.create_dataset("actions", data=rng.standard_normal((n, 7)).astype(np.float32))
            obs = demo.create_group("obs")
            obs.create_dataset("joint_pos", data=np.cumsum(rng.standard_normal((n, 7)), 0).astype(np.float32))
            obs.create_dataset("gripper", data=(rng.uniform(size=(n, 1)) > 0.5).astype(np.float32))
            total += n
        data.attrs["total"] = total
    return str(path)

"""The Loader from Python: batches as dicts of tensors, exactly-once across
simulated ranks, set_epoch, state_dict resume, datasets as Python objects."""

import numpy as np
import pytest

import robocache

torch = pytest.importorskip("torch")

STREAMS = ["actions", "obs/joint_pos", "obs/gripper"]
WINDOWS = {"hz": 50.0, "history": 2, "horizon": 8}


def make(path, **kwargs):
    options = dict(windows=WINDOWS, batch_size=16, device="cpu", seed=3)
    options.update(kwargs)
    return robocache.Loader(path, STREAMS, **options)


def test_open_gives_the_episode_model(robomimic_file):
    dataset = robocache.open(robomimic_file)
    assert dataset.format == "robomimic" and len(dataset) == 12
    assert dataset.info["rate_hz"] == 20.0
    assert {"actions", "obs/joint_pos", "obs/gripper"} <= set(dataset.streams)
    assert dataset.episodes[0]["name"] == "demo_0"
    with pytest.raises(robocache.DatasetError):
        robocache.open(robomimic_file + ".missing")


def test_batches_are_dicts_of_tensors(robomimic_file):
    loader = make(robomimic_file)
    batch = next(iter(loader))
    assert batch["obs/joint_pos"].shape == (16, 10, 7) and batch["obs/joint_pos"].dtype == torch.float32
    assert batch["obs/joint_pos_is_pad"].shape == (16, 10) and batch["obs/joint_pos_is_pad"].dtype == torch.bool
    assert batch["episode_index"].shape == (16,) and batch["sample_index"].dtype == torch.int64
    assert batch["anchor"].dtype == torch.float64
    # The first history step of a window anchored at an episode's start is padding.
    starts = batch["anchor"] == 0
    if bool(starts.any()):
        assert bool(batch["actions_is_pad"][starts, 0].all())
    assert len(loader) == -(-loader.samples_per_epoch // 16)
    telemetry = loader.telemetry()
    assert telemetry["batches"] >= 1


def test_exactly_once_across_ranks_and_epochs_differ(robomimic_file):
    seen = []
    for rank in range(3):
        loader = make(robomimic_file, rank=rank, world_size=3)
        seen += [int(i) for batch in loader for i in batch["sample_index"]]
    total = make(robomimic_file).samples_per_epoch
    assert sorted(seen) == list(range(total))
    loader = make(robomimic_file)
    loader.set_epoch(0)
    first = torch.cat([b["sample_index"] for b in loader])
    loader.set_epoch(1)
    second = torch.cat([b["sample_index"] for b in loader])
    assert sorted(first.tolist()) == sorted(second.tolist()) and not torch.equal(first, second)


def test_state_dict_resumes_where_it_stopped(robomimic_file):
    loader = make(robomimic_file)
    loader.set_epoch(4)
    full = [b["sample_index"].clone() for b in loader]
    loader.set_epoch(4)
    it = iter(loader)
    for _ in range(3):
        next(it)
    state = loader.state_dict()
    assert state["epoch"] == 4 and state["next_batch"] == 3
    resumed = make(robomimic_file)
    resumed.load_state_dict(state)
    rest = [b["sample_index"] for b in resumed]
    assert len(rest) == len(full) - 3 and all(torch.equal(a, b) for a, b in zip(rest, full[3:]))
    with pytest.raises(robocache.InvalidInputError, match="rank"):
        make(robomimic_file, rank=1, world_size=2).load_state_dict(state)


def test_the_next_epoch_starts_ahead_and_equals_a_fresh_one(robomimic_file):
    def epoch(loader):
        return [(b["sample_index"].clone(), b["actions"].clone()) for b in loader]

    def fresh(number):
        loader = make(robomimic_file, workers=2)
        loader.set_epoch(number)
        return epoch(loader)

    loader = make(robomimic_file, workers=2)
    loader.set_epoch(2)
    assert len(epoch(loader)) == len(loader)  # epoch 3 started while epoch 2 ended
    for want, got in [(fresh(3), epoch(loader)), (fresh(7), None)]:
        if got is None:  # another epoch asked for: the one started ahead (4) is dropped
            loader.set_epoch(7)
            got = epoch(loader)
        assert len(got) == len(want)
        for (ids, actions), (want_ids, want_actions) in zip(got, want):
            assert torch.equal(ids, want_ids) and torch.equal(actions, want_actions)


def test_step_windows_and_sharding_from_the_environment(robomimic_file, monkeypatch):
    loader = make(robomimic_file, windows={"seq_length": 4, "frame_stack": 2})
    batch = next(iter(loader))
    assert batch["actions"].shape == (16, 5, 7)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    half = make(robomimic_file)
    assert (half.rank, half.world_size) == (1, 2)
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(robocache.InvalidInputError, match="RANK"):
        make(robomimic_file)


def test_loader_errors(robomimic_file):
    with pytest.raises(robocache.DatasetError, match="no_such_stream"):
        robocache.Loader(robomimic_file, ["no_such_stream"], windows=WINDOWS, batch_size=4, device="cpu")
    with pytest.raises(ValueError):
        robocache.Loader(robomimic_file, STREAMS, windows=WINDOWS, batch_size=0, device="cpu")
    with pytest.raises(robocache.InvalidInputError, match="windows"):
        robocache.Loader(robomimic_file, STREAMS, windows={"fps": 3}, batch_size=4, device="cpu")
    if not robocache.cuda_available():
        with pytest.raises(robocache.CudaUnavailableError):
            robocache.Loader(robomimic_file, STREAMS, windows=WINDOWS, batch_size=4, device="cuda:0")


def test_sharded_by_episode_ranks_read_disjoint_episodes(robomimic_file):
    owners, seen, lengths = {}, set(), set()
    for rank in range(3):
        loader = make(robomimic_file, rank=rank, world_size=3, shard_by="episodes")
        count = 0
        for batch in loader:
            count += len(batch["sample_index"])
            for sample, episode in zip(batch["sample_index"].tolist(), batch["episode_index"].tolist()):
                assert owners.setdefault(episode, rank) == rank, f"episode {episode} on two ranks"
                seen.add(sample)
        lengths.add(count)
    total = make(robomimic_file).samples_per_epoch
    assert len(lengths) == 1 and lengths == {-(-total // 3)}
    # Every episode read, each by one rank (a rank whose episodes hold more
    # than its share of windows leaves a few of them out each epoch).
    assert sorted(owners) == list(range(12)) and len(set(owners.values())) == 3
    assert seen <= set(range(total))
    with pytest.raises(robocache.InvalidInputError, match="shard_by"):
        make(robomimic_file, shard_by="nodes")
    with pytest.raises(robocache.DatasetError, match="gets no window"):
        make(robomimic_file, rank=0, world_size=13, shard_by="episodes")


def test_without_shuffle_batches_come_in_order(robomimic_file):
    loader = make(robomimic_file, shuffle=False, rank=1, world_size=2)
    order = [int(i) for batch in loader for i in batch["sample_index"]]
    total = make(robomimic_file).samples_per_epoch
    assert order == list(range(1, total, 2))
    loader.set_epoch(5)
    assert [int(i) for batch in loader for i in batch["sample_index"]] == order


def test_batches_freed_while_the_loader_runs(robomimic_file):
    """Batches dropped as soon as they arrive (their memory reused by the
    next ones) and batches kept hold the same values as one clean epoch."""
    want = {int(b["sample_index"][0]): b["actions"].clone() for b in make(robomimic_file)}
    kept = {}
    for i, batch in enumerate(make(robomimic_file, prefetch=8, workers=3)):
        if i % 2:
            kept[int(batch["sample_index"][0])] = batch["actions"]
        del batch
    for key, actions in kept.items():
        assert torch.equal(actions, want[key])


def test_cuda_loader_equals_cpu(robomimic_file, cuda):
    cpu = make(robomimic_file)
    gpu = make(robomimic_file, device=cuda)
    for a, b in zip(cpu, gpu):
        assert b["obs/joint_pos"].device.type == "cuda" and b["sample_index"].device.type == "cuda"
        assert torch.equal(a["sample_index"], b["sample_index"].cpu())
        assert torch.equal(a["anchor"], b["anchor"].cpu())
        for name in STREAMS:
            assert torch.equal(a[name], b[name].cpu()), name
            assert torch.equal(a[f"{name}_is_pad"], b[f"{name}_is_pad"].cpu()), name
    # "cuda" without an index is torch's current device.
    batch = next(iter(make(robomimic_file, device="cuda")))
    assert batch["obs/joint_pos"].device == torch.device("cuda", torch.cuda.current_device())


def test_pad_masks_mark_targets_outside_the_stream(robomimic_file):
    """`_is_pad` is True exactly where a window's target lies outside its
    episode's samples (20 Hz streams: times 0 .. (n - 1) / 20)."""
    lengths = [e["len"] for e in robocache.open(robomimic_file).episodes]
    for batch in make(robomimic_file):
        targets = batch["anchor"][:, None] + (torch.arange(10, dtype=torch.float64) - 2) / 50.0
        ends = torch.tensor([(lengths[int(e)] - 1) / 20.0 for e in batch["episode_index"]], dtype=torch.float64)
        outside = (targets < 0) | (targets > ends[:, None])
        for name in STREAMS:
            assert torch.equal(batch[f"{name}_is_pad"], outside), name


def test_numpy_batches_without_torch(robomimic_file, monkeypatch):
    """Without torch the batches are NumPy arrays holding the same values."""
    want = list(make(robomimic_file))
    monkeypatch.setattr(robocache._arrays, "_torch", lambda: None)
    got = list(make(robomimic_file))
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert set(a) == set(b)
        for key, value in a.items():
            assert isinstance(value, np.ndarray), key
            assert value.dtype == b[key].numpy().dtype and np.array_equal(value, b[key].numpy()), key


FREED_WHILE_READ = """
import sys, torch, robocache
path, cuda = sys.argv[1], sys.argv[2]
kw = dict(windows={"hz": 50.0, "history": 2, "horizon": 8}, batch_size=16, seed=3, shuffle=False)
streams = ["actions", "obs/joint_pos", "obs/gripper"]
want = [b["actions"] for b in robocache.Loader(path, streams, device="cpu", **kw)]
it = iter(robocache.Loader(path, streams, device=cuda, prefetch=8, workers=3, **kw))
batch = next(it)
slow = torch.randn(4096, 4096, device=cuda)
for _ in range(8):
    slow = torch.tanh(slow @ slow)  # keeps torch's stream busy
copy = batch["actions"] + slow[:1, :1] * 0  # reads the batch after the matmuls
del batch  # freed now, in stream order
later = [b["actions"] * 1 for b in it]  # assembled meanwhile on robocache's stream, which never waits for torch's
assert torch.equal(copy.cpu(), want[0]), "the batch's memory was reused before torch read it"
assert all(torch.equal(a.cpu(), b) for a, b in zip(later, want[1:]))
print("ok")
"""


@pytest.mark.parametrize("process", ["this", "fresh"])
def test_cuda_batch_freed_while_torch_reads_it(robomimic_file, cuda, process):
    """A batch dropped while a long kernel on torch's stream still reads it:
    the later batches, assembled on robocache's own stream, must not reuse
    its memory before that read. In a fresh process every call has used one
    stream, so the batch is freed on torch's stream itself; in this one,
    after tests with side streams, robocache's stream waits for torch's."""
    if process == "this":
        exec(FREED_WHILE_READ.replace("sys.argv[1], sys.argv[2]", "robomimic_file, cuda"), {"robomimic_file": robomimic_file, "cuda": cuda})
        return
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FREED_WHILE_READ, str(robomimic_file), cuda], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_rust_consumer_timing_runs_on_the_same_loader(robomimic_file):
    # The bench's baseline (benches/python_loader.py): more batches than an
    # epoch holds go on into the next epochs; the Python iteration after it
    # still starts where its own state says.
    loader = make(robomimic_file)
    seconds = loader._native.time_rust_consumer(len(loader) + 2)
    assert isinstance(seconds, float) and seconds > 0.0
    assert len(list(loader)) == len(loader)

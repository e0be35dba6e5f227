"""Datasets read where they live: the LeRobot and RLDS fixtures uploaded to
moto's S3 server (started here, in-process), opened by URL and batched by
the Loader; every batch equals the one of the same fixture read local."""

import pathlib
import socket

import numpy as np
import pytest

import robocache

moto_server = pytest.importorskip("moto.server", reason="moto[server] (cargo xtask test installs it)")
boto3 = pytest.importorskip("boto3")

FIXTURES = next(
    (p / "crates" / "robocache-datasets" / "tests" / "fixtures"
     for p in pathlib.Path(__file__).resolve().parents
     if (p / "crates" / "robocache-datasets" / "tests" / "fixtures").is_dir()),
    pathlib.Path("no-fixtures"),
)


@pytest.fixture(scope="module")
def s3():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    client.create_bucket(Bucket="robots")
    for root in ("lerobot/av1", "lerobot/v21", "rlds/robocache_fixture_dict"):
        for path in (FIXTURES / root).rglob("*"):
            if path.is_file():
                client.upload_file(str(path), "robots", f"{root}/{path.relative_to(FIXTURES / root)}")
    options = {"aws_endpoint": endpoint, "aws_allow_http": "true", "aws_access_key_id": "testing",
               "aws_secret_access_key": "testing", "aws_region": "us-east-1"}
    yield options
    server.stop()


def _batches(dataset, **kwargs):
    loader = robocache.Loader(dataset, batch_size=4, shuffle=False, device="cpu", workers=2, **kwargs)
    return [{k: (v.numpy() if hasattr(v, "numpy") else v) for k, v in b.items()} for b in loader]


def test_a_lerobot_root_on_s3_batches_as_the_local_one(s3, tmp_path):
    deltas = {"action": [0.0, 0.1], "observation.images.front": [0.0]}
    remote = robocache.open("s3://robots/lerobot/av1", storage_options=s3, remote_cache_dir=str(tmp_path))
    local = robocache.open(FIXTURES / "lerobot" / "av1")
    assert remote.info["episodes"] == local.info["episodes"]
    got = _batches(remote, delta_timestamps=deltas)
    want = _batches(local, delta_timestamps=deltas)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for key in w:
            if isinstance(w[key], np.ndarray):
                np.testing.assert_array_equal(g[key], w[key], err_msg=key)
            else:
                assert g[key] == w[key], key
    usage = remote.storage_usage()
    assert usage["bytes_fetched"] > 0 and usage["requests"] > 0
    # A second open over the same cache fetches nothing.
    again = robocache.open("s3://robots/lerobot/av1", storage_options=s3, remote_cache_dir=str(tmp_path))
    _batches(again, delta_timestamps=deltas)
    assert again.storage_usage()["bytes_fetched"] == 0


def test_an_rlds_builder_on_s3_reads_as_the_local_one(s3, tmp_path):
    remote = robocache.open("s3://robots/rlds/robocache_fixture_dict", rate_hz=10.0, storage_options=s3,
                            remote_cache_dir=str(tmp_path))
    local = robocache.open(FIXTURES / "rlds" / "robocache_fixture_dict", rate_hz=10.0)
    assert [e["len"] for e in remote.episodes] == [e["len"] for e in local.episodes]
    assert remote.verify(threads=2)["problems"] == []


def test_remote_errors_name_the_url(s3, tmp_path):
    with pytest.raises(robocache.DatasetError, match="s3://robots/nothing"):
        robocache.open("s3://robots/nothing", storage_options=s3, remote_cache_dir=str(tmp_path))
    with pytest.raises(robocache.DatasetError, match="not_an_option"):
        robocache.open("s3://robots/lerobot/av1", storage_options={**s3, "not_an_option": "1"})
    with pytest.raises(robocache.DatasetError, match="ftp://"):
        robocache.open("ftp://host/data")
    with pytest.raises(robocache.InvalidInputError, match="storage_options"):
        robocache.open("s3://robots/lerobot/av1", storage_options=[("a", "b")])


def test_sharded_by_episode_a_rank_fetches_only_its_episodes(s3, tmp_path):
    """LeRobot v2.1 (one parquet file per episode): rank 0 of 2 sharded by
    episode fetches the metadata and its own episodes' files; sharded by
    window it fetches every file."""
    deltas = {"action": [-0.1, 0.0, 0.1]}
    files = FIXTURES / "lerobot" / "v21" / "data" / "chunk-000"

    def fetched(shard_by, cache):
        dataset = robocache.open("s3://robots/lerobot/v21", storage_options=s3, remote_cache_dir=str(cache))
        opened = dataset.storage_usage()["bytes_fetched"]
        loader = robocache.Loader(dataset, None, delta_timestamps=deltas, batch_size=4, device="cpu", workers=2,
                                  rank=0, world_size=2, shard_by=shard_by)
        episodes = {int(e) for batch in loader for e in batch["episode_index"]}
        return episodes, opened, dataset.storage_usage()["bytes_fetched"]

    own, opened, by_episode = fetched("episodes", tmp_path / "a")
    assert 0 < len(own) < 5
    size = sum((files / f"episode_{e:06d}.parquet").stat().st_size for e in own)
    assert by_episode - opened == size
    every, _, by_window = fetched("windows", tmp_path / "b")
    assert every == set(range(5))
    assert by_window - opened == sum(f.stat().st_size for f in files.glob("*.parquet"))

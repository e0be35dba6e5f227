"""robocache.MixtureSampler: weights, epochs, ranks and resuming from Python."""

import collections

import pytest

import robocache


def test_sample_weights_are_shares_whatever_the_sizes():
    mix = robocache.MixtureSampler([100, 4000], [1.0, 10.0], epoch_windows=1100, seed=3)
    assert mix.counts == [100, 1000]
    assert mix.shares == pytest.approx([1 / 11, 10 / 11])
    epoch = mix.epoch(0)
    assert collections.Counter(part for part, _ in epoch) == {0: 100, 1: 1000}
    assert len({w for part, w in epoch if part == 0}) == 100, "each window of the small dataset once"


def test_balance_weights_scale_by_size():
    mix = robocache.MixtureSampler([100, 400], [1.0, 1.0], convention="balance", seed=3)
    assert mix.epoch_len == 500 and mix.counts == [100, 400]


def test_until_exhausted_by_name_and_resume():
    mix = robocache.MixtureSampler([37, 500], [1.0, 3.0], names=["small", "large"], until_exhausted="small", seed=1)
    epoch = mix.epoch(2)
    assert sorted(w for part, w in epoch if part == 0) == list(range(37))
    assert mix.epoch(2, start=10) == epoch[10:]
    assert mix.epoch(2) != mix.epoch(3)
    assert "small" in repr(mix)


def test_ranks_partition_each_share():
    seen = collections.Counter()
    lengths = []
    for rank in range(3):
        mix = robocache.MixtureSampler([50, 1000], [1.0, 1.0], epoch_windows=400, seed=5, rank=rank, world_size=3)
        epoch = mix.epoch(1)
        lengths.append(len(epoch))
        assert len(epoch) == len(mix)
        seen.update(epoch)
    assert sum(lengths) == 400
    assert all(seen[(0, w)] == 4 for w in range(50)), "the small dataset's share needs four passes"
    assert all(n == 1 for (part, _), n in seen.items() if part == 1)


def test_sharded_by_episode_each_rank_reads_its_own_episodes():
    episodes = [[w // 10 for w in range(80)], [w // 50 for w in range(300)]]
    owners = collections.defaultdict(set)
    for rank in range(2):
        mix = robocache.MixtureSampler([80, 300], [1.0, 2.0], epoch_windows=150, seed=4, rank=rank, world_size=2,
                                       episodes=episodes)
        for part, window in mix.epoch(0):
            owners[(part, episodes[part][window])].add(rank)
    assert all(len(ranks) == 1 for ranks in owners.values())


def test_bad_mixtures_raise_clear_errors():
    with pytest.raises(robocache.InvalidInputError, match="one of each"):
        robocache.MixtureSampler([10, 20], [1.0])
    with pytest.raises(robocache.InvalidInputError, match="balance"):
        robocache.MixtureSampler([10], [1.0], convention="octo")
    with pytest.raises(robocache.DatasetError, match="weight 0"):
        robocache.MixtureSampler([10], [0.0])
    with pytest.raises(robocache.InvalidInputError, match="names no dataset"):
        robocache.MixtureSampler([10], [1.0], until_exhausted="nope")
    with pytest.raises(robocache.InvalidInputError, match="both rank"):
        robocache.MixtureSampler([10], [1.0], rank=0)

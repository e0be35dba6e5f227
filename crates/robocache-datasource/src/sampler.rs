//! Seeded shuffling with sharding: each epoch is a permutation of all
//! samples, the same on every rank for the same seed and epoch; rank `r` of
//! `w` takes positions `r, r + w, r + 2w, …`, so the shards partition the
//! samples (sizes differ by at most one; nothing is repeated or dropped).
//!
//! Sharded by episode ([`ShardBy::Episodes`], for datasets read remotely),
//! rank `r` takes every window of a contiguous run of episodes instead, so
//! it reads (and fetches) only those episodes' bytes. Episodes go to the
//! rank whose equal part of the windows holds their middle window; every
//! rank yields `⌈N / W⌉` windows an epoch (torch's `DistributedSampler`
//! count, so every rank steps the same number of batches): its own windows
//! shuffled, a rank with fewer repeating the first of them, a rank with
//! more leaving out its last few (different ones each epoch when
//! shuffled).
//!
//! The permutation is a Fisher–Yates shuffle driven by SplitMix64 seeded
//! with `(seed, epoch)`: defined here, so the order of a seed never changes
//! with a dependency's version.

use crate::{Error, Result};

/// This process's part of the data: rank `rank` of `world_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub rank: usize,
    pub world_size: usize,
}

impl Default for Shard {
    /// The whole data set (rank 0 of 1).
    fn default() -> Self {
        Shard { rank: 0, world_size: 1 }
    }
}

impl Shard {
    /// Rank `rank` of `world_size`, checked.
    pub fn new(rank: usize, world_size: usize) -> Result<Self> {
        if world_size == 0 || rank >= world_size {
            return Err(Error::Invalid(format!("rank {rank} is not in a world of size {world_size}")));
        }
        Ok(Shard { rank, world_size })
    }

    /// The shard torchrun or SLURM gave this process: `RANK`/`WORLD_SIZE`
    /// (torchrun, torch.distributed), else `SLURM_PROCID`/`SLURM_NTASKS`,
    /// else the whole data set. A malformed or inconsistent value is an error.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Shard::from_env`] over any variable lookup (for tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        for (rank_var, size_var) in [("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")] {
            match (var(rank_var), var(size_var)) {
                (None, None) => continue,
                (Some(rank), Some(size)) => {
                    let parse = |name: &str, value: &str| {
                        value.trim().parse::<usize>().map_err(|_| {
                            Error::Invalid(format!(
                                "environment variable {name}={value:?} is not a non-negative integer"
                            ))
                        })
                    };
                    let (rank, size) = (parse(rank_var, &rank)?, parse(size_var, &size)?);
                    return Shard::new(rank, size)
                        .map_err(|_| Error::Invalid(format!("{rank_var}={rank} is not below {size_var}={size}")));
                }
                (Some(_), None) => return Err(Error::Invalid(format!("{rank_var} is set but {size_var} is not"))),
                (None, Some(_)) => return Err(Error::Invalid(format!("{size_var} is set but {rank_var} is not"))),
            }
        }
        Ok(Shard::default())
    }
}

/// How the samples are split between ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShardBy {
    /// Every `W`-th window of each epoch's permutation: ranks see windows
    /// of every episode (each rank reads the whole dataset over an epoch).
    #[default]
    Windows,
    /// Whole episodes, a contiguous run of them per rank: each rank reads
    /// (and, remote, fetches) only its episodes' bytes.
    Episodes,
}

/// Epoch orders of `len` samples for one shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sampler {
    len: usize,
    seed: u64,
    shard: Shard,
    /// Sharded by episode: this rank's samples, ascending, and the number
    /// every rank yields an epoch.
    own: Option<(Vec<usize>, usize)>,
}

impl Sampler {
    /// A sampler of `len` samples, sharded by window.
    pub fn new(len: usize, seed: u64, shard: Shard) -> Result<Self> {
        Shard::new(shard.rank, shard.world_size)?;
        Ok(Sampler { len, seed, shard, own: None })
    }

    /// A sampler sharded by episode: `episode_of[s]` is sample `s`'s episode.
    /// An error when some rank would get no window (fewer episodes than
    /// ranks, or one episode holding most of the windows).
    pub fn by_episode(episode_of: &[usize], seed: u64, shard: Shard) -> Result<Self> {
        Shard::new(shard.rank, shard.world_size)?;
        let len = episode_of.len();
        let episodes = episode_of.iter().max().map_or(0, |&e| e + 1);
        let mut windows = vec![0usize; episodes];
        for &e in episode_of {
            windows[e] += 1;
        }
        // Episode `e` goes to the rank whose `len / W` part holds its middle window.
        let world = shard.world_size as u128;
        let mut rank_of = vec![0usize; episodes];
        let mut per_rank = vec![0usize; shard.world_size];
        let mut before = 0usize;
        for (e, &n) in windows.iter().enumerate() {
            if n > 0 {
                let middle = (before + n / 2) as u128;
                rank_of[e] = (middle * world / len as u128) as usize;
                per_rank[rank_of[e]] += n;
            }
            before += n;
        }
        if let Some(empty) = per_rank.iter().position(|&n| n == 0) {
            let nonempty = windows.iter().filter(|&&n| n > 0).count();
            return Err(Error::Invalid(format!(
                "sharding by episode: rank {empty} of {} gets no window ({len} windows in {nonempty} episodes); \
                 shard by windows, or use fewer ranks",
                shard.world_size
            )));
        }
        let own = (0..len).filter(|&s| rank_of[episode_of[s]] == shard.rank).collect();
        Ok(Sampler { len, seed, shard, own: Some((own, len.div_ceil(shard.world_size))) })
    }

    /// The shard.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// Samples this shard yields per epoch.
    pub fn shard_len(&self) -> usize {
        if let Some((_, count)) = &self.own {
            return *count;
        }
        let Shard { rank, world_size } = self.shard;
        self.len / world_size + usize::from(rank < self.len % world_size)
    }

    /// The samples this shard reads over its epochs: all of them sharded by
    /// window, its episodes' sharded by episode (ascending).
    pub fn own_samples(&self) -> Option<&[usize]> {
        self.own.as_ref().map(|(own, _)| own.as_slice())
    }

    /// This shard's samples in epoch `epoch`'s order.
    pub fn epoch(&self, epoch: u64) -> Vec<usize> {
        match &self.own {
            None => {
                let permutation = permutation(self.len, self.seed, epoch);
                permutation.into_iter().skip(self.shard.rank).step_by(self.shard.world_size).collect()
            }
            Some((own, count)) => {
                let order: Vec<usize> = permutation(own.len(), self.seed, epoch).into_iter().map(|i| own[i]).collect();
                order.iter().copied().cycle().take(*count).collect()
            }
        }
    }

    /// Samples in order, without shuffling (evaluation), sharded the same way.
    pub fn sequential(&self) -> Vec<usize> {
        match &self.own {
            None => (self.shard.rank..self.len).step_by(self.shard.world_size).collect(),
            Some((own, count)) => own.iter().copied().cycle().take(*count).collect(),
        }
    }
}

/// A permutation of `0..len` from `(seed, epoch)`.
pub(crate) fn permutation(len: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut state = seed ^ epoch.wrapping_mul(0xD1B5_4A32_D192_ED03);
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut order: Vec<usize> = (0..len).collect();
    for i in (1..len).rev() {
        // Lemire's multiply-shift: an unbiased-enough index in 0..=i for i < 2^32
        // and exact modulo for larger i.
        let bound = i as u64 + 1;
        let j = ((u128::from(next()) * u128::from(bound)) >> 64) as usize;
        order.swap(i, j);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_every_epoch() {
        for (len, world) in [(0, 1), (1, 3), (10, 3), (1000, 8), (17, 17), (5, 8)] {
            for epoch in 0..3 {
                let mut seen = vec![0u32; len];
                let mut sizes = Vec::new();
                for rank in 0..world {
                    let sampler = Sampler::new(len, 42, Shard::new(rank, world).unwrap()).unwrap();
                    let samples = sampler.epoch(epoch);
                    assert_eq!(samples.len(), sampler.shard_len());
                    sizes.push(samples.len());
                    for s in samples {
                        seen[s] += 1;
                    }
                }
                assert!(seen.iter().all(|&n| n == 1), "len {len} world {world}: {seen:?}");
                assert!(sizes.iter().max().unwrap_or(&0) - sizes.iter().min().unwrap_or(&0) <= 1);
            }
        }
    }

    #[test]
    fn epochs_and_seeds_differ_and_repeat() {
        let sampler = Sampler::new(100, 7, Shard::default()).unwrap();
        assert_eq!(sampler.epoch(1), sampler.epoch(1));
        assert_ne!(sampler.epoch(1), sampler.epoch(2));
        assert_ne!(sampler.epoch(1), Sampler::new(100, 8, Shard::default()).unwrap().epoch(1));
        assert_eq!(sampler.sequential(), (0..100).collect::<Vec<_>>());
    }

    /// Episodes of `lengths[e]` windows each, in order.
    fn episode_of(lengths: &[usize]) -> Vec<usize> {
        lengths.iter().enumerate().flat_map(|(e, &n)| std::iter::repeat_n(e, n)).collect()
    }

    #[test]
    fn sharded_by_episode_ranks_read_disjoint_episodes_and_step_together() {
        for (lengths, world) in
            [(vec![5, 5, 5, 5], 2), (vec![3, 9, 1, 7, 2, 8, 4], 3), (vec![10; 16], 16), (vec![1, 2, 3, 40, 5, 6], 2)]
        {
            let episodes = episode_of(&lengths);
            let mut owner = vec![None; lengths.len()];
            let mut read = vec![0u32; episodes.len()];
            for rank in 0..world {
                let sampler = Sampler::by_episode(&episodes, 3, Shard::new(rank, world).unwrap()).unwrap();
                assert_eq!(sampler.shard_len(), episodes.len().div_ceil(world));
                let own = sampler.own_samples().unwrap().to_vec();
                assert!(!own.is_empty());
                for &s in &own {
                    read[s] += 1;
                    // An episode belongs to one rank, with all its windows.
                    let e = episodes[s];
                    assert!(owner[e].is_none_or(|r| r == rank), "episode {e} on two ranks");
                    owner[e] = Some(rank);
                }
                // Contiguous runs of episodes.
                assert!(own.windows(2).all(|w| episodes[w[1]] - episodes[w[0]] <= 1));
                for epoch in 0..3 {
                    let order = sampler.epoch(epoch);
                    assert_eq!(order.len(), sampler.shard_len());
                    assert!(order.iter().all(|s| own.contains(s)));
                    // Each own window once before any repeats.
                    let distinct: std::collections::HashSet<_> = order.iter().collect();
                    assert_eq!(distinct.len(), own.len().min(order.len()));
                }
                let sequential = sampler.sequential();
                assert_eq!(&sequential[..own.len().min(sequential.len())], &own[..own.len().min(sequential.len())]);
                if own.len() > 5 {
                    assert_ne!(sampler.epoch(0), sampler.epoch(1));
                }
            }
            assert!(read.iter().all(|&n| n == 1), "{lengths:?} over {world}: {read:?}");
        }
    }

    #[test]
    fn sharding_by_episode_with_an_empty_rank_is_an_error() {
        for (lengths, world) in [(vec![4, 4], 3), (vec![1, 100], 3)] {
            let error = Sampler::by_episode(&episode_of(&lengths), 0, Shard::new(0, world).unwrap()).unwrap_err();
            assert!(error.to_string().contains("gets no window"), "{error}");
        }
    }

    #[test]
    fn shard_from_environment() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
        };
        assert_eq!(Shard::from_vars(vars(&[])).unwrap(), Shard::default());
        assert_eq!(Shard::from_vars(vars(&[("RANK", "3"), ("WORLD_SIZE", "4")])).unwrap(), Shard::new(3, 4).unwrap());
        assert_eq!(
            Shard::from_vars(vars(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2")])).unwrap(),
            Shard::new(1, 2).unwrap()
        );
        for bad in [
            &[("RANK", "4"), ("WORLD_SIZE", "4")][..],
            &[("RANK", "x"), ("WORLD_SIZE", "4")],
            &[("RANK", "0")],
            &[("WORLD_SIZE", "2")],
        ] {
            assert!(Shard::from_vars(vars(bad)).is_err(), "{bad:?}");
        }
    }
}

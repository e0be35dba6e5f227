//! Seeded shuffling with sharding: each epoch is a permutation of all
//! samples, the same on every rank for the same seed and epoch; rank `r` of
//! `w` takes positions `r, r + w, r + 2w, …`, so the shards partition the
//! samples (sizes differ by at most one; nothing is repeated or dropped).
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

/// Epoch orders of `len` samples for one shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampler {
    len: usize,
    seed: u64,
    shard: Shard,
}

impl Sampler {
    /// A sampler of `len` samples.
    pub fn new(len: usize, seed: u64, shard: Shard) -> Result<Self> {
        Shard::new(shard.rank, shard.world_size)?;
        Ok(Sampler { len, seed, shard })
    }

    /// The shard.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// Samples this shard yields per epoch.
    pub fn shard_len(&self) -> usize {
        let Shard { rank, world_size } = self.shard;
        self.len / world_size + usize::from(rank < self.len % world_size)
    }

    /// This shard's samples in epoch `epoch`'s order.
    pub fn epoch(&self, epoch: u64) -> Vec<usize> {
        let permutation = permutation(self.len, self.seed, epoch);
        permutation.into_iter().skip(self.shard.rank).step_by(self.shard.world_size).collect()
    }

    /// Samples in order, without shuffling (evaluation), sharded the same way.
    pub fn sequential(&self) -> Vec<usize> {
        (self.shard.rank..self.len).step_by(self.shard.world_size).collect()
    }
}

/// A permutation of `0..len` from `(seed, epoch)`.
fn permutation(len: usize, seed: u64, epoch: u64) -> Vec<usize> {
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

//! Weighted mixtures of datasets: which window of which dataset each
//! position of an epoch reads, seeded, deterministic and sharded by rank
//! (docs/datasets.md, "Mixtures").
//!
//! **Weights.** Each part (a dataset's windows) has a weight `w_i ≥ 0`.
//! [`MixtureWeights::Sample`] (Octo's `sample_weights`) makes part `i`'s
//! share of an epoch `w_i / Σ w`, whatever the sizes: weights 1:10 give the
//! second part ten times as many windows as the first. With
//! [`MixtureWeights::Balance`] (Octo's `balance_weights`), each weight is
//! first multiplied by the part's window count: 1:10 then gives the second
//! part `10 · N_2 / N_1` times as many windows as the first (equal weights
//! give every window of the mixture the same chance).
//!
//! **Epochs.** An epoch is [`EpochLength::Windows`] positions (all ranks
//! together), or [`EpochLength::UntilExhausted`]: as many as it takes for
//! one named part to deliver each of its windows once. Part `i` gets
//! exactly `c_i` positions, the epoch's length times its share rounded by
//! largest remainder (so the counts sum to the length and each is within
//! one of its exact share).
//!
//! **No repeats unless the weights require them.** Part `i` reads its `c_i`
//! windows from a permutation of its own windows (seeded by seed, part and
//! epoch): each window once while `c_i ≤ N_i`; a part whose share is larger
//! than its size goes through further permutations, each window then
//! `⌊c_i / N_i⌋` or `⌈c_i / N_i⌉` times. Which part each position reads is
//! itself a seeded shuffle of the `c_i` slots, so parts mix evenly through
//! the epoch.
//!
//! **Ranks.** Sharded by window ([`crate::ShardBy::Windows`]), every rank
//! computes the same epoch and takes positions `r, r + W, …`: the ranks
//! partition each part's share, nothing read twice. Sharded by episode
//! ([`crate::ShardBy::Episodes`], remote datasets), each part's windows are
//! split by episode as [`crate::Sampler::by_episode`] splits them and each
//! rank draws its part of every share (`c_i / W`, the remainder spread over
//! the ranks) from its own episodes only, so a node fetches only its
//! episodes; every rank yields `⌈T / W⌉` positions, the ranks with fewer
//! repeating their first ones, as the single-dataset sampler does.
//!
//! **Resuming.** An epoch is a pure function of the seed, the epoch number
//! and the shard: [`MixtureSampler::epoch_from`] gives the positions from
//! any point of it, so a loader resumes exactly mid-epoch.

use crate::sampler::{permutation, Shard, ShardBy};
use crate::{Error, Result, Sampler};

/// How the parts' weights are read (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MixtureWeights {
    /// Part `i`'s share is `w_i / Σ w` (Octo's `sample_weights`).
    #[default]
    Sample,
    /// Part `i`'s share is `w_i N_i / Σ w N` (Octo's `balance_weights`).
    Balance,
}

/// How long an epoch of a mixture is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpochLength {
    /// This many positions, all ranks together.
    Windows(usize),
    /// Until part `index` has delivered each of its windows once.
    UntilExhausted(usize),
}

/// The most positions an epoch may have, all ranks together: 2^28 (its
/// order, 16 bytes a position, is held in memory: 4 GiB). A longer epoch
/// (`epoch_windows`, or `until_exhausted` of a dataset with a tiny share)
/// is an error that says so, never an allocation of that size.
pub const MAX_EPOCH_POSITIONS: usize = 1 << 28;

/// One dataset of a mixture: its windows and its weight.
#[derive(Clone, Debug, PartialEq)]
pub struct MixturePart {
    /// Its name, for messages and telemetry.
    pub name: String,
    /// Its window count.
    pub windows: usize,
    /// Its weight (≥ 0; 0 leaves it out).
    pub weight: f64,
    /// Sharded by episode: each window's episode (`windows` entries).
    pub episode_of: Option<Vec<usize>>,
}

impl MixturePart {
    /// A part of `windows` windows weighing `weight`, sharded by window.
    pub fn new(name: impl Into<String>, windows: usize, weight: f64) -> Self {
        MixturePart { name: name.into(), windows, weight, episode_of: None }
    }
}

/// One position of a mixture's epoch: window `window` of part `part`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MixtureSample {
    pub part: usize,
    pub window: usize,
}

/// Epoch orders of a weighted mixture for one shard (see the module docs).
#[derive(Clone, Debug)]
pub struct MixtureSampler {
    parts: Vec<MixturePart>,
    shares: Vec<f64>,
    /// Positions per epoch, all ranks together, and each part's count.
    length: usize,
    counts: Vec<usize>,
    seed: u64,
    shard: Shard,
    shard_by: ShardBy,
    /// Sharded by episode: each part's sampler (its own windows).
    own: Vec<Option<Sampler>>,
}

impl MixtureSampler {
    /// A sampler of `parts` weighed as `weights` says, epochs of `length`.
    pub fn new(
        parts: Vec<MixturePart>,
        weights: MixtureWeights,
        length: EpochLength,
        seed: u64,
        shard: Shard,
        shard_by: ShardBy,
    ) -> Result<Self> {
        Shard::new(shard.rank, shard.world_size)?;
        if parts.is_empty() {
            return Err(Error::Invalid("a mixture needs at least one dataset".into()));
        }
        for part in &parts {
            if !(part.weight.is_finite() && part.weight >= 0.0) {
                return Err(Error::Invalid(format!(
                    "dataset `{}` of the mixture has weight {}: weights are finite and not negative",
                    part.name, part.weight
                )));
            }
            if part.weight > 0.0 && part.windows == 0 {
                return Err(Error::Invalid(format!(
                    "dataset `{}` of the mixture has weight {} but no window to read",
                    part.name, part.weight
                )));
            }
            if let Some(episodes) = &part.episode_of {
                if episodes.len() != part.windows {
                    return Err(Error::Invalid(format!(
                        "dataset `{}`: {} episode numbers for {} windows",
                        part.name,
                        episodes.len(),
                        part.windows
                    )));
                }
            }
        }
        let scaled: Vec<f64> = parts
            .iter()
            .map(|p| match weights {
                MixtureWeights::Sample => p.weight,
                MixtureWeights::Balance => p.weight * p.windows as f64,
            })
            .collect();
        let total: f64 = scaled.iter().sum();
        if !(total > 0.0 && total.is_finite()) {
            return Err(Error::Invalid("every dataset of the mixture has weight 0".into()));
        }
        let shares: Vec<f64> = scaled.iter().map(|w| w / total).collect();
        let length = match length {
            EpochLength::Windows(n) => n,
            EpochLength::UntilExhausted(index) => {
                let part = parts.get(index).ok_or_else(|| {
                    Error::Invalid(format!("the epoch ends with dataset {index}, but the mixture has {}", parts.len()))
                })?;
                if shares[index] == 0.0 {
                    return Err(Error::Invalid(format!(
                        "the epoch ends when dataset `{}` is exhausted, but its weight is 0",
                        part.name
                    )));
                }
                // The smallest length whose rounded share reaches the part's
                // size. A count is at most its exact share rounded up, so no
                // length at or below (windows - 1) / share reaches it: the
                // search starts there (largest remainders are not monotone in
                // the length, so it walks up rather than guessing).
                let below = (part.windows.saturating_sub(1) as f64 / shares[index]).floor();
                // The walk up ends by windows / share (plus a position a part).
                let enough = part.windows as f64 / shares[index] + parts.len() as f64;
                if !enough.is_finite() || enough >= MAX_EPOCH_POSITIONS as f64 {
                    return Err(Error::Invalid(format!(
                        "the epoch ends when dataset `{}` ({} windows, a share of {:e}) is exhausted: that takes \
                         more than {MAX_EPOCH_POSITIONS} positions; give it more weight, or epoch_windows",
                        part.name, part.windows, shares[index]
                    )));
                }
                let mut n = (below as usize).max(part.windows);
                while counts_of(&shares, n)[index] < part.windows {
                    n += 1;
                }
                n
            }
        };
        if length > MAX_EPOCH_POSITIONS {
            return Err(Error::Invalid(format!(
                "an epoch of {length} positions: at most {MAX_EPOCH_POSITIONS} (an epoch's order is held in memory)"
            )));
        }
        let counts = counts_of(&shares, length);
        let own = match shard_by {
            ShardBy::Windows => vec![None; parts.len()],
            ShardBy::Episodes => parts
                .iter()
                .map(|part| {
                    if part.windows == 0 {
                        return Ok(None);
                    }
                    let episodes = part.episode_of.as_ref().ok_or_else(|| {
                        Error::Invalid(format!(
                            "dataset `{}`: sharding by episode needs each window's episode",
                            part.name
                        ))
                    })?;
                    Sampler::by_episode(episodes, 0, shard)
                        .map(Some)
                        .map_err(|e| Error::Invalid(format!("dataset `{}` of the mixture: {e}", part.name)))
                })
                .collect::<Result<_>>()?,
        };
        Ok(MixtureSampler { parts, shares, length, counts, seed, shard, shard_by, own })
    }

    /// The parts.
    pub fn parts(&self) -> &[MixturePart] {
        &self.parts
    }

    /// Each part's share of an epoch (summing to 1).
    pub fn shares(&self) -> &[f64] {
        &self.shares
    }

    /// Positions per epoch, all ranks together.
    pub fn epoch_len(&self) -> usize {
        self.length
    }

    /// Each part's positions per epoch, all ranks together.
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// What a saved position in this mixture's epochs is valid for: each
    /// part's weight and window count, the epoch's length, the seed and how
    /// it is sharded (not the names, which follow paths). A position saved
    /// by one mixture means other windows in another: a resume compares
    /// fingerprints and refuses one that differs, naming both.
    pub fn fingerprint(&self) -> String {
        let parts: Vec<String> =
            self.parts.iter().map(|p| format!("weight {} × {} windows", p.weight, p.windows)).collect();
        let shard_by = match self.shard_by {
            ShardBy::Windows => "windows",
            ShardBy::Episodes => "episodes",
        };
        format!(
            "parts [{}]; {} positions an epoch; seed {}; sharded by {shard_by}",
            parts.join(", "),
            self.length,
            self.seed
        )
    }

    /// The shard.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// Positions this shard yields per epoch.
    pub fn shard_len(&self) -> usize {
        let Shard { rank, world_size } = self.shard;
        match self.shard_by {
            ShardBy::Windows => self.length / world_size + usize::from(rank < self.length % world_size),
            ShardBy::Episodes => self.length.div_ceil(world_size),
        }
    }

    /// This shard's positions of epoch `epoch`, in order.
    pub fn epoch(&self, epoch: u64) -> Vec<MixtureSample> {
        self.epoch_from(epoch, 0)
    }

    /// This shard's positions of epoch `epoch` from its `start`-th on (a
    /// loader resuming mid-epoch).
    pub fn epoch_from(&self, epoch: u64, start: usize) -> Vec<MixtureSample> {
        let Shard { rank, world_size } = self.shard;
        match self.shard_by {
            ShardBy::Windows => self
                .positions(&self.counts, epoch, u64::MAX)
                .into_iter()
                .skip(rank)
                .step_by(world_size)
                .skip(start)
                .collect(),
            ShardBy::Episodes => {
                // This rank's part of each share: c_i / W, the remainder to
                // the ranks after a rotation by part, so no rank takes all.
                let counts: Vec<usize> = self
                    .counts
                    .iter()
                    .enumerate()
                    .map(|(i, &c)| c / world_size + usize::from((rank + i) % world_size < c % world_size))
                    .collect();
                let own = self.positions(&counts, epoch, rank as u64);
                let want = self.shard_len();
                let cycled: Vec<MixtureSample> =
                    if own.is_empty() { Vec::new() } else { own.iter().copied().cycle().take(want).collect() };
                cycled.into_iter().skip(start).collect()
            }
        }
    }

    /// Which part each of `Σ counts` positions reads: `counts[i]` slots of
    /// part `i`, shuffled by `(seed, epoch, salt)`.
    fn interleave(&self, counts: &[usize], epoch: u64, salt: u64) -> Vec<usize> {
        let slots: Vec<usize> = counts.iter().enumerate().flat_map(|(i, &c)| std::iter::repeat_n(i, c)).collect();
        let seed = self.seed ^ salt.wrapping_mul(0xA24B_AED4_963E_E407) ^ 0x6D69_7874_7572_6521;
        permutation(slots.len(), seed, epoch).into_iter().map(|i| slots[i]).collect()
    }

    /// The `count` windows part `part` reads in epoch `epoch`, in order:
    /// passes over its windows (its own, sharded by episode), each pass a
    /// permutation seeded by `(seed, part, pass, epoch)`.
    fn part_windows(&self, part: usize, epoch: u64, count: usize, own: Option<&Sampler>) -> Vec<usize> {
        let own = own.and_then(Sampler::own_samples);
        let n = own.map_or(self.parts[part].windows, <[usize]>::len);
        let mut out = Vec::with_capacity(count);
        let mut pass = 0u64;
        while out.len() < count && n > 0 {
            let seed =
                self.seed ^ (part as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ pass.wrapping_mul(0x9E37_79B9);
            let take = n.min(count - out.len());
            out.extend(permutation(n, seed, epoch).into_iter().take(take).map(|i| own.map_or(i, |own| own[i])));
            pass += 1;
        }
        out
    }

    /// The positions `(part, window)` of `counts` in order: which part each
    /// reads (a shuffle of the parts' slots), and each part's windows.
    fn positions(&self, counts: &[usize], epoch: u64, salt: u64) -> Vec<MixtureSample> {
        let windows: Vec<Vec<usize>> = (0..self.parts.len())
            .map(|part| self.part_windows(part, epoch, counts[part], self.own[part].as_ref()))
            .collect();
        let mut next = vec![0usize; self.parts.len()];
        self.interleave(counts, epoch, salt)
            .into_iter()
            .map(|part| {
                let window = windows[part][next[part]];
                next[part] += 1;
                MixtureSample { part, window }
            })
            .collect()
    }
}

/// Each part's count of `length` positions: `length · share` rounded by
/// largest remainder (ties to the earlier part), summing to `length`.
fn counts_of(shares: &[f64], length: usize) -> Vec<usize> {
    let exact: Vec<f64> = shares.iter().map(|s| s * length as f64).collect();
    let mut counts: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let given: usize = counts.iter().sum();
    let mut order: Vec<usize> = (0..shares.len()).filter(|&i| shares[i] > 0.0).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b)));
    for &i in order.iter().cycle().take(length.saturating_sub(given)) {
        counts[i] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler(parts: Vec<MixturePart>, weights: MixtureWeights, length: EpochLength, shard: Shard) -> MixtureSampler {
        MixtureSampler::new(parts, weights, length, 9, shard, ShardBy::Windows).unwrap()
    }

    #[test]
    fn an_epoch_too_long_to_hold_is_refused_not_allocated() {
        let shard = Shard { rank: 0, world_size: 1 };
        // Until a one-window dataset of a tiny share is exhausted: 10^300 positions.
        let parts = vec![MixturePart::new("rare", 1, 1e-300), MixturePart::new("common", 10, 1.0)];
        let started = std::time::Instant::now();
        let error = MixtureSampler::new(
            parts,
            MixtureWeights::Sample,
            EpochLength::UntilExhausted(0),
            1,
            shard,
            ShardBy::Windows,
        )
        .unwrap_err()
        .to_string();
        assert!(started.elapsed().as_secs() < 1 && error.contains("`rare`") && error.contains("positions"), "{error}");
        let parts = vec![MixturePart::new("a", 10, 1.0)];
        let error = MixtureSampler::new(
            parts,
            MixtureWeights::Sample,
            EpochLength::Windows(1 << 40),
            1,
            shard,
            ShardBy::Windows,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("at most 268435456"), "{error}");
    }

    #[test]
    fn until_exhausted_is_the_shortest_epoch_that_reads_every_window() {
        for windows in [1usize, 2, 7, 100, 201, 403] {
            for weights in [[1.0, 1.0, 1.0], [3.0, 1.0, 1.0], [1.0, 2.0, 7.0], [0.5, 0.25, 0.25]] {
                for index in 0..3 {
                    let parts = (0..3).map(|i| MixturePart::new(format!("p{i}"), windows + i, weights[i])).collect();
                    let mixture = MixtureSampler::new(
                        parts,
                        MixtureWeights::Sample,
                        EpochLength::UntilExhausted(index),
                        1,
                        Shard { rank: 0, world_size: 1 },
                        ShardBy::Windows,
                    )
                    .unwrap();
                    let need = windows + index;
                    let shortest = (1..).find(|&n| counts_of(mixture.shares(), n)[index] >= need).unwrap();
                    assert_eq!(mixture.epoch_len(), shortest, "{windows} windows, weights {weights:?}, part {index}");
                }
            }
        }
    }

    #[test]
    fn counts_follow_the_shares_and_sum_to_the_length() {
        assert_eq!(counts_of(&[0.5, 0.5], 5), [3, 2]);
        assert_eq!(counts_of(&[1.0 / 11.0, 10.0 / 11.0], 110), [10, 100]);
        assert_eq!(counts_of(&[0.0, 1.0], 7), [0, 7]);
        for length in [0, 1, 7, 100, 1001] {
            let counts = counts_of(&[0.2, 0.3, 0.5], length);
            assert_eq!(counts.iter().sum::<usize>(), length);
        }
    }

    #[test]
    fn the_two_weight_conventions() {
        let parts = vec![MixturePart::new("a", 100, 1.0), MixturePart::new("b", 400, 10.0)];
        let sample = sampler(parts.clone(), MixtureWeights::Sample, EpochLength::Windows(1100), Shard::default());
        assert_eq!(sample.counts(), [100, 1000]);
        let balance = sampler(parts, MixtureWeights::Balance, EpochLength::Windows(4100), Shard::default());
        assert_eq!(balance.counts(), [100, 4000]);
    }

    #[test]
    fn until_exhausted_reads_the_named_part_once() {
        let parts = vec![MixturePart::new("a", 37, 1.0), MixturePart::new("b", 500, 3.0)];
        let mixture = sampler(parts, MixtureWeights::Sample, EpochLength::UntilExhausted(0), Shard::default());
        assert_eq!(mixture.counts()[0], 37);
        let mut seen: Vec<usize> = mixture.epoch(0).iter().filter(|s| s.part == 0).map(|s| s.window).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..37).collect::<Vec<_>>());
    }

    #[test]
    fn bad_mixtures_are_errors() {
        let shard = Shard::default();
        let err = |parts: Vec<MixturePart>, length| {
            MixtureSampler::new(parts, MixtureWeights::Sample, length, 0, shard, ShardBy::Windows)
                .unwrap_err()
                .to_string()
        };
        assert!(err(vec![], EpochLength::Windows(1)).contains("at least one"));
        assert!(err(vec![MixturePart::new("a", 5, -1.0)], EpochLength::Windows(1)).contains("`a`"));
        assert!(err(vec![MixturePart::new("a", 5, 0.0)], EpochLength::Windows(1)).contains("weight 0"));
        assert!(err(vec![MixturePart::new("a", 0, 1.0)], EpochLength::Windows(1)).contains("no window"));
        assert!(err(vec![MixturePart::new("a", 5, 1.0)], EpochLength::UntilExhausted(3)).contains("dataset 3"));
    }

    #[test]
    fn every_position_reads_its_part_at_the_weights_rate() {
        // Over many epochs and within batches of 64: each part's count in a
        // batch is hypergeometric around 64 · share, whose variance is below
        // the binomial's; the mean over all batches is within 4 standard errors.
        for weights in [MixtureWeights::Sample, MixtureWeights::Balance] {
            let parts = vec![
                MixturePart::new("small", 300, 1.0),
                MixturePart::new("mid", 2_000, 3.0),
                MixturePart::new("large", 9_000, 6.0),
            ];
            let mixture = sampler(parts, weights, EpochLength::Windows(6_400), Shard::default());
            let shares = mixture.shares().to_vec();
            let mut per_batch: Vec<Vec<f64>> = vec![Vec::new(); 3];
            for epoch in 0..20 {
                let order = mixture.epoch(epoch);
                assert_eq!(order.len(), 6_400);
                let mut total = [0usize; 3];
                for s in &order {
                    total[s.part] += 1;
                }
                assert_eq!(total.to_vec(), mixture.counts(), "epoch {epoch}: the counts exactly");
                for batch in order.chunks(64) {
                    let mut n = [0usize; 3];
                    batch.iter().for_each(|s| n[s.part] += 1);
                    (0..3).for_each(|i| per_batch[i].push(n[i] as f64));
                }
            }
            for i in 0..3 {
                let batches = per_batch[i].len() as f64;
                let mean = per_batch[i].iter().sum::<f64>() / batches;
                let binomial_sd = (64.0 * shares[i] * (1.0 - shares[i])).sqrt();
                let variance = per_batch[i].iter().map(|n| (n - mean).powi(2)).sum::<f64>() / batches;
                assert!(
                    (mean - 64.0 * shares[i]).abs() < 4.0 * binomial_sd / batches.sqrt(),
                    "{weights:?} part {i}: {mean}"
                );
                assert!(variance < 1.3 * binomial_sd * binomial_sd, "{weights:?} part {i}: variance {variance}");
            }
        }
    }

    #[test]
    fn ranks_partition_each_share_and_nothing_repeats_unless_required() {
        let parts = vec![MixturePart::new("a", 50, 1.0), MixturePart::new("b", 1_000, 1.0)];
        // 400 positions: `a` gets 200 of its 50 windows (4 passes), `b` 200 of 1,000.
        for world in [1, 3, 4] {
            for epoch in 0..3 {
                let mut reads = [vec![0u32; 50], vec![0u32; 1_000]];
                let mut sizes = Vec::new();
                for rank in 0..world {
                    let shard = Shard::new(rank, world).unwrap();
                    let mixture = sampler(parts.clone(), MixtureWeights::Sample, EpochLength::Windows(400), shard);
                    let order = mixture.epoch(epoch);
                    assert_eq!(order.len(), mixture.shard_len());
                    sizes.push(order.len());
                    order.iter().for_each(|s| reads[s.part][s.window] += 1);
                    // Resuming mid-epoch gives the rest of the same epoch.
                    assert_eq!(mixture.epoch_from(epoch, 7), order[7..]);
                }
                assert_eq!(sizes.iter().sum::<usize>(), 400);
                assert!(reads[0].iter().all(|&n| n == 4), "`a` four times each: {:?}", reads[0]);
                assert_eq!(reads[1].iter().filter(|&&n| n == 1).count(), 200, "`b`: 200 distinct windows");
                assert!(reads[1].iter().all(|&n| n <= 1));
            }
        }
        let one = sampler(parts, MixtureWeights::Sample, EpochLength::Windows(400), Shard::default());
        assert_eq!(one.epoch(5), one.epoch(5), "deterministic");
        assert_ne!(one.epoch(5), one.epoch(6), "a new order each epoch");
    }

    #[test]
    fn sharded_by_episode_each_rank_reads_its_own_episodes() {
        let episodes = |count: usize, length: usize| (0..count * length).map(|w| w / length).collect::<Vec<_>>();
        let parts = vec![
            MixturePart { episode_of: Some(episodes(8, 10)), ..MixturePart::new("a", 80, 1.0) },
            MixturePart { episode_of: Some(episodes(6, 50)), ..MixturePart::new("b", 300, 2.0) },
        ];
        let world = 2;
        let mut owner: [Vec<Option<usize>>; 2] = [vec![None; 8], vec![None; 6]];
        let mut lengths = Vec::new();
        for rank in 0..world {
            let mixture = MixtureSampler::new(
                parts.clone(),
                MixtureWeights::Sample,
                EpochLength::Windows(150),
                4,
                Shard::new(rank, world).unwrap(),
                ShardBy::Episodes,
            )
            .unwrap();
            let order = mixture.epoch(1);
            lengths.push(order.len());
            let mut seen = std::collections::HashSet::new();
            for s in &order {
                let episode = parts[s.part].episode_of.as_ref().unwrap()[s.window];
                assert!(owner[s.part][episode].is_none_or(|r| r == rank), "episode {episode} read by two ranks");
                owner[s.part][episode] = Some(rank);
                seen.insert(*s);
            }
            assert_eq!(seen.len(), order.len(), "rank {rank}: no window twice in its share");
            assert_eq!(mixture.epoch_from(1, 3), order[3..]);
        }
        assert_eq!(lengths, [75, 75], "every rank steps the same number of positions");
        let unsharded = parts.iter().map(|p| MixturePart { episode_of: None, ..p.clone() }).collect();
        let err = MixtureSampler::new(
            unsharded,
            MixtureWeights::Sample,
            EpochLength::Windows(10),
            0,
            Shard::default(),
            ShardBy::Episodes,
        )
        .unwrap_err();
        assert!(err.to_string().contains("each window's episode"), "{err}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]

        /// Any configuration: sizes (none, one, many), weights (zero,
        /// tiny, huge, not finite, negative), lengths (none, huge, until a
        /// dataset is exhausted), shards (bad ones too), by window or by
        /// episode. Built or refused, never a panic; built, every epoch's
        /// positions name a window of their dataset.
        #[test]
        fn any_mixture_configuration_is_built_or_refused(
            sizes in proptest::collection::vec(proptest::sample::select(vec![0usize, 1, 2, 7, 100, 5000]), 0..5),
            weights in proptest::collection::vec(
                proptest::sample::select(vec![0.0, 1e-300, 0.25, 1.0, 3.0, 1e300, f64::INFINITY, f64::NAN, -1.0]), 5),
            length in proptest::sample::select(vec![0usize, 1, 13, 1000, 1 << 40, usize::MAX]),
            exhausted in proptest::option::of(0usize..6),
            (rank, world_size) in (0usize..5, 0usize..4),
            by_episode in proptest::bool::ANY,
            episode_size in 1usize..9,
        ) {
            let parts: Vec<MixturePart> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let mut part = MixturePart::new(format!("p{i}"), n, weights[i]);
                    if by_episode {
                        part.episode_of = Some((0..n).map(|w| w / episode_size).collect());
                    }
                    part
                })
                .collect();
            let length = exhausted.map_or(EpochLength::Windows(length), EpochLength::UntilExhausted);
            let shard_by = if by_episode { ShardBy::Episodes } else { ShardBy::Windows };
            let shard = Shard { rank, world_size };
            let started = std::time::Instant::now();
            let built = MixtureSampler::new(parts, MixtureWeights::Sample, length, 3, shard, shard_by);
            proptest::prop_assert!(started.elapsed().as_secs() < 2, "new took {:?}: {sizes:?} {weights:?} {length:?}", started.elapsed());
            if let Ok(mixture) = built {
                proptest::prop_assert!(mixture.epoch_len() <= MAX_EPOCH_POSITIONS);
                for epoch in 0..2 {
                    for sample in mixture.epoch_from(epoch, 1) {
                        proptest::prop_assert!(sample.window < sizes[sample.part], "{sample:?} of {sizes:?}");
                    }
                }
            }
        }
    }
}

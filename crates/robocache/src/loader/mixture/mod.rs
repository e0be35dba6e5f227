//! [`MixtureLoader`]: one batch from several datasets, each sampled with a
//! weight ([`MixtureSampler`]), each read by its own [`Loader`] (its format,
//! its streams, its windows spec), and their streams renamed to the
//! mixture's names and padded to the widest (docs/loader.md, "Mixtures").
//!
//! A batch's rows are grouped by dataset, in the mixture's order of
//! datasets, each group in the order the sampler drew its windows: the
//! batch equals the concatenation of each dataset loader's own batch of the
//! same windows ([`Loader::batch`]), with
//!
//! - every stream's last dimension padded with zeros to the widest of the
//!   datasets that have it, and a `dim_is_pad` mask `[B, D]` (true on the
//!   padding: LeRobot's and GR00T's `action_dim_is_pad`): a stream's shape
//!   is the same in every batch, whichever datasets the batch draws;
//! - a stream a dataset lacks (a missing camera) zeros, its step mask
//!   saying padding everywhere and its `dim_is_pad` true;
//! - a dataset's key ([`MemberKey`]) one of its streams, several of them
//!   side by side along the last dimension (joint positions ++ gripper:
//!   a step is padding where any part's is), or a constant row at every
//!   step (a key the dataset lacks but whose value is known), valid
//!   throughout, in the dtype the other datasets give the stream;
//! - the dataset of each row (`datasets`) and its window (`windows`).
//!
//! Every dataset's version of a stream must have the same dtype, steps
//! and shape but for the last dimension (frames: resize them to one size
//! with the loaders' `frames`), and the same mask kind; the shapes are
//! found, and checked, with the first batches assembled.
//!
//! [`MixtureLoader::epoch`]'s workers assemble runs of
//! [`MixtureConfig::batches_together`] batches side by side, ahead of the
//! consumer ([`MixtureLoader::batches_together`]): each dataset's loader is
//! asked once for its windows of the whole run, then every part's rows and
//! masks, of every key and batch, are copied into the zeroed outputs by one
//! `copy_row_blocks` launch on a GPU (a table of the blocks of rows; plain
//! copies one after the other on the CPU), with no round trip through the
//! host (a concatenated key combines its masks on the host). A batch is the
//! same however many are assembled with it.
//!
//! ```
//! use robocache::loader::mixture::MemberKey;
//! // A dataset's `state` made of two of its streams side by side.
//! let key = MemberKey::Concat(vec!["obs/joint_pos".into(), "obs/gripper".into()]);
//! assert_eq!(key.streams().len(), 2);
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use robocache_datasets::{EpochLength, MixturePart, MixtureSampler, MixtureWeights, Shard, ShardBy};

use super::{invalid, MaskKind, Normalization, NormalizationMode, StreamStatistics};
use crate::{Device, Error, Result, Tensor};

mod assembly;
mod keys;
mod member;
mod report;
mod spec_of;

pub(crate) use self::keys::constant_row;
use self::keys::KeyShape;
pub use self::member::{MemberKey, MixtureMember};
use self::report::BatchCost;
pub use self::report::{MemberReport, MixtureReport};

/// How a mixture is sampled and batched.
#[derive(Clone, Debug)]
pub struct MixtureConfig {
    /// The mixture's stream names, in the batch's order.
    pub streams: Vec<String>,
    pub batch_size: usize,
    pub weights: MixtureWeights,
    pub epoch: EpochLength,
    pub seed: u64,
    pub shard: Shard,
    /// A last batch smaller than `batch_size` is dropped.
    pub drop_last: bool,
    /// Threads assembling batches ahead of the consumer ([`MixtureLoader::epoch`]).
    pub workers: usize,
    /// Batches assembled ahead, all workers together (at least a run of
    /// batches assembled together per worker).
    pub prefetch: usize,
    /// Batches a worker assembles together
    /// ([`MixtureLoader::batches_together`]): each dataset's loader asked
    /// once for its windows of all of them, which shares each call's fixed
    /// cost (on a GPU, its driver calls) among them. `Some(n)`: runs of
    /// `n` (at least 1). `None`: chosen each epoch from the last batches'
    /// cost ([`MixtureLoader::run_length`]). The batches are the same
    /// whatever it is.
    pub batches_together: Option<usize>,
}

/// Batches in a run where [`MixtureConfig::batches_together`] is `None`
/// and batches are light.
pub const AUTO_RUN_BATCHES: usize = 4;

/// The assembly time per batch under which a batch counts as light: bound
/// by the fixed cost of its calls, which a run shares (a batch of
/// low-dimensional streams takes about 0.2 to 2 ms on a GPU host). A batch
/// that decodes video takes tens of milliseconds or more: bound by its own
/// work, which a run would only delay (its first batch waits for the
/// whole run).
pub const LIGHT_BATCH_SECONDS: f64 = 0.005;

/// One stream of a mixture batch.
#[derive(Clone, Debug)]
pub struct MixtureStream {
    pub name: String,
    /// `[B, T, ..., D]`, `D` the widest of the datasets' last dimensions.
    pub data: Tensor,
    /// `[B, T]` as `mask_kind` says.
    pub mask: Tensor,
    pub mask_kind: MaskKind,
    /// `[B, D]` bool: true where the row's dataset has no such dimension.
    pub dim_is_pad: Tensor,
}

/// A batch of a mixture.
#[derive(Clone, Debug)]
pub struct MixtureBatch {
    /// In [`MixtureConfig::streams`] order.
    pub streams: Vec<MixtureStream>,
    /// Each row's dataset (index into the members).
    pub datasets: Vec<usize>,
    /// Each row's window in its dataset.
    pub windows: Vec<usize>,
}

impl MixtureBatch {
    /// The stream called `name`.
    pub fn stream(&self, name: &str) -> Option<&MixtureStream> {
        self.streams.iter().find(|s| s.name == name)
    }
}

/// The batches of one epoch of a mixture, in order ([`MixtureLoader::epoch`]).
#[derive(Debug)]
pub struct MixtureEpoch {
    queues: Vec<std::sync::mpsc::Receiver<Result<(MixtureBatch, BatchCost)>>>,
    /// Batches assembled together: the consumer reads that many from a
    /// worker's queue before the next worker's.
    together: usize,
    next: usize,
    left: usize,
    failed: Option<Error>,
    /// Its number (the sampler's seed).
    number: u64,
    /// The mixture, kept alive while the epoch is handed over; none while
    /// it waits in the mixture, started ahead (its workers hold the mixture
    /// only while they assemble, so a mixture dropped drops it).
    mixture: Option<Arc<MixtureLoader>>,
    started_next: bool,
}

impl Iterator for MixtureEpoch {
    type Item = Result<MixtureBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(error) = self.failed.take() {
            self.left = 0;
            return Some(Err(error));
        }
        if self.left == 0 || self.queues.is_empty() {
            return None;
        }
        let queue = &self.queues[(self.next / self.together) % self.queues.len()];
        self.next += 1;
        self.left -= 1;
        let batch = match queue.recv() {
            Ok(Ok((batch, cost))) => {
                if let Some(mixture) = &self.mixture {
                    mixture.record(&cost);
                }
                Ok(batch)
            }
            Ok(Err(error)) => Err(error),
            Err(_) => Err(invalid("a mixture's worker thread stopped".into())),
        };
        if !self.started_next && self.left <= self.queues.len() * self.together {
            // Every worker is on its last run of this epoch or done: the
            // next epoch's first batches are assembled while the consumer
            // finishes this one.
            self.started_next = true;
            if let Some(mixture) = &self.mixture {
                let next = mixture.start_epoch(self.number + 1, 0);
                *mixture.ahead.lock().unwrap_or_else(|p| p.into_inner()) = Some(next);
            }
        }
        Some(batch)
    }
}

/// Batches of a weighted mixture of datasets (see the module docs).
#[derive(Debug)]
pub struct MixtureLoader {
    members: Vec<MixtureMember>,
    sampler: MixtureSampler,
    config: MixtureConfig,
    device: Device,
    telemetry: Mutex<MixtureReport>,
    /// The last epoch's batches of positions (computing them permutes
    /// every member's windows: once per epoch, not per batch).
    last_epoch: Mutex<Option<(u64, Arc<EpochPositions>)>>,
    /// Every key's shape, found with the first batches ([`KeyShape`]).
    key_shapes: Mutex<Option<Arc<Vec<KeyShape>>>>,
    /// Seconds a batch took to assemble, a moving average over the last
    /// runs (none yet: `None`).
    batch_seconds: Mutex<Option<f64>>,
    /// The next epoch, started while the one before it handed over its
    /// last runs.
    ahead: Mutex<Option<MixtureEpoch>>,
}

/// The `(member, window)` positions of each batch of an epoch.
type EpochPositions = Vec<Vec<(usize, usize)>>;

impl MixtureLoader {
    /// A mixture of `members` on `device`. Each member's loader is asked
    /// for its windows ([`Loader::batch`]); its own sampler is not used.
    pub fn new(device: &Device, members: Vec<MixtureMember>, config: MixtureConfig) -> Result<Self> {
        if config.batch_size == 0 {
            return Err(invalid("batch_size must be at least 1".into()));
        }
        if config.batches_together == Some(0) {
            return Err(invalid("batches_together must be at least 1".into()));
        }
        for member in &members {
            if member.loader.device() != device {
                return Err(invalid(format!(
                    "dataset `{}` of the mixture is loaded on {}, the mixture on {device}",
                    member.name,
                    member.loader.device()
                )));
            }
            for (mixed, key) in &member.keys {
                match key {
                    MemberKey::Concat(parts) if parts.is_empty() => {
                        return Err(invalid(format!(
                            "dataset `{}`: stream `{mixed}` concatenates no stream",
                            member.name
                        )))
                    }
                    MemberKey::Constant(values) if values.is_empty() || values.iter().any(|v| !v.is_finite()) => {
                        return Err(invalid(format!(
                            "dataset `{}`: stream `{mixed}`: a constant needs finite values, not {values:?}",
                            member.name
                        )))
                    }
                    _ => {}
                }
            }
            for own in member.keys.iter().flat_map(|(_, key)| key.streams()) {
                if !member.loader.config.streams.contains(own) {
                    return Err(invalid(format!(
                        "dataset `{}`: the mixture maps its stream `{own}`, which its loader does not read (it reads {})",
                        member.name,
                        member.loader.config.streams.join(", ")
                    )));
                }
            }
        }
        for name in &config.streams {
            if !members.iter().any(|m| m.keys.iter().any(|(mixed, _)| mixed == name)) {
                return Err(invalid(format!("stream `{name}` of the mixture comes from none of its datasets")));
            }
        }
        // Members sharded by episode hold only their rank's episodes: the
        // mixture then draws each member's windows from those episodes only.
        let shard_by = members.first().map_or(ShardBy::Windows, |m| m.loader.config.shard_by);
        for member in &members {
            if member.loader.config.shard_by != shard_by {
                return Err(invalid(format!(
                    "dataset `{}` is sharded by {:?} and `{}` by {shard_by:?}: a mixture's datasets shard alike",
                    member.name, member.loader.config.shard_by, members[0].name
                )));
            }
            if shard_by == ShardBy::Episodes && member.loader.config.shard != config.shard {
                return Err(invalid(format!(
                    "dataset `{}` is shard {:?} and the mixture {:?}: sharded by episode, they must agree",
                    member.name, member.loader.config.shard, config.shard
                )));
            }
        }
        let parts = members
            .iter()
            .map(|m| {
                let mut part = MixturePart::new(m.name.clone(), m.loader.windows(), m.weight);
                if shard_by == ShardBy::Episodes {
                    part.episode_of = Some(m.loader.window_episodes()?);
                }
                Ok(part)
            })
            .collect::<Result<Vec<_>>>()?;
        let sampler = MixtureSampler::new(parts, config.weights, config.epoch, config.seed, config.shard, shard_by)?;
        let telemetry = MixtureReport {
            members: members
                .iter()
                .zip(sampler.shares())
                .map(|(m, &share)| MemberReport { name: m.name.clone(), weight_share: share, ..Default::default() })
                .collect(),
            ..Default::default()
        };
        Ok(MixtureLoader {
            members,
            sampler,
            config,
            device: device.clone(),
            telemetry: Mutex::new(telemetry),
            last_epoch: Mutex::new(None),
            key_shapes: Mutex::new(None),
            batch_seconds: Mutex::new(None),
            ahead: Mutex::new(None),
        })
    }

    /// The normalisation statistics of each group of members (`(group
    /// name, member indices)`: one embodiment's datasets, or each dataset
    /// alone), under the mixture's stream names: each member's
    /// low-dimensional streams computed over its whole dataset
    /// ([`Normalization::compute`]), then merged within the group
    /// ([`Normalization::merge`]: count-weighted means, pooled variances,
    /// extremes of extremes; a group's members must give a stream one width,
    /// as one embodiment's do). Camera streams have none.
    pub fn statistics(
        &self,
        groups: &[(String, Vec<usize>)],
        mode: NormalizationMode,
    ) -> Result<BTreeMap<String, Normalization>> {
        // Each member's statistics once, then each group's merge.
        let mut of_member: BTreeMap<usize, Normalization> = BTreeMap::new();
        for (group, members) in groups {
            if members.is_empty() {
                return Err(invalid(format!("normalisation group `{group}` has no member")));
            }
            for &index in members {
                let member = self.members.get(index).ok_or_else(|| {
                    invalid(format!(
                        "normalisation group `{group}`: no member {index} (the mixture has {})",
                        self.members.len()
                    ))
                })?;
                if of_member.contains_key(&index) {
                    continue;
                }
                let dataset = member.loader.dataset();
                let first = dataset.info().episodes.first();
                let mut own: Vec<&str> = member
                    .keys
                    .iter()
                    .flat_map(|(_, key)| key.streams())
                    .map(String::as_str)
                    .filter(|own| first.and_then(|e| e.stream(own)).is_some_and(|s| !s.is_image()))
                    .collect();
                own.sort_unstable();
                own.dedup();
                let computed = Normalization::compute(dataset, &own, mode)
                    .map_err(|e| invalid(format!("dataset `{}`: {e}", member.name)))?;
                // Under the mixture's names (a stream may give several): a
                // concatenation's are its parts' side by side, a constant's
                // its value with no spread, counted as the member's rows.
                let rows = computed.streams.values().map(|s| s.count).max().unwrap_or(0);
                let mut renamed = BTreeMap::new();
                for (mixed, key) in &member.keys {
                    let stats = match key {
                        MemberKey::Stream(own) => computed.streams.get(own).cloned(),
                        MemberKey::Concat(parts) => parts
                            .iter()
                            .map(|p| computed.streams.get(p))
                            .collect::<Option<Vec<_>>>()
                            .map(|parts| StreamStatistics::side_by_side(&parts)),
                        MemberKey::Constant(values) => Some(StreamStatistics::constant(values, rows)),
                    };
                    if let Some(stats) = stats {
                        renamed.insert(mixed.clone(), stats);
                    }
                }
                of_member.insert(index, Normalization { mode, streams: renamed });
            }
        }
        let mut out = BTreeMap::new();
        for (group, members) in groups {
            let parts: Vec<&Normalization> = members.iter().filter_map(|i| of_member.get(i)).collect();
            let merged =
                Normalization::merge(&parts).map_err(|e| invalid(format!("normalisation group `{group}`: {e}")))?;
            out.insert(group.clone(), merged);
        }
        Ok(out)
    }

    /// Per dataset: windows delivered, their share against the weights' and
    /// the time the batches spent on (and waiting for) its parts.
    pub fn telemetry(&self) -> MixtureReport {
        let mut report = self.telemetry.lock().unwrap_or_else(|p| p.into_inner()).clone();
        report.batches_per_run = self.run_length();
        let total: u64 = report.members.iter().map(|m| m.windows).sum();
        for member in &mut report.members {
            member.share = if total == 0 { 0.0 } else { member.windows as f64 / total as f64 };
        }
        report
    }

    /// Forgets the telemetry so far (after a warm-up).
    pub fn reset_telemetry(&self) {
        let mut report = self.telemetry.lock().unwrap_or_else(|p| p.into_inner());
        report.batches = 0;
        report.seconds = 0.0;
        for member in &mut report.members {
            *member =
                MemberReport { name: member.name.clone(), weight_share: member.weight_share, ..Default::default() };
        }
    }

    /// The sampler (shares, counts, epoch length).
    pub fn sampler(&self) -> &MixtureSampler {
        &self.sampler
    }

    /// The members.
    pub fn members(&self) -> &[MixtureMember] {
        &self.members
    }

    /// Batches per epoch on this rank.
    pub fn batches_per_epoch(&self) -> usize {
        let n = self.sampler.shard_len();
        match self.config.drop_last {
            true => n / self.config.batch_size,
            false => n.div_ceil(self.config.batch_size),
        }
    }

    /// The `(dataset, window)` positions of each batch of epoch `epoch` on
    /// this rank, computed once per epoch and shared.
    fn shared_batches(&self, epoch: u64) -> Arc<EpochPositions> {
        let mut last = self.last_epoch.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((number, batches)) = last.as_ref() {
            if *number == epoch {
                return Arc::clone(batches);
            }
        }
        let batches = Arc::new(self.epoch_batches(epoch));
        *last = Some((epoch, Arc::clone(&batches)));
        batches
    }

    /// The `(dataset, window)` positions of each batch of epoch `epoch` on this rank.
    pub fn epoch_batches(&self, epoch: u64) -> Vec<Vec<(usize, usize)>> {
        let positions: Vec<(usize, usize)> =
            self.sampler.epoch(epoch).into_iter().map(|s| (s.part, s.window)).collect();
        let mut batches: Vec<Vec<(usize, usize)>> =
            positions.chunks(self.config.batch_size).map(<[(usize, usize)]>::to_vec).collect();
        if self.config.drop_last && batches.last().is_some_and(|b| b.len() < self.config.batch_size) {
            batches.pop();
        }
        batches
    }

    /// Batches per run in the next epoch: [`MixtureConfig::batches_together`]
    /// where it is set; else [`AUTO_RUN_BATCHES`] where the batches so far
    /// took under [`LIGHT_BATCH_SECONDS`] each to assemble, and 1 where they
    /// took longer or none is assembled yet.
    pub fn run_length(&self) -> usize {
        if let Some(fixed) = self.config.batches_together {
            return fixed.max(1);
        }
        match *self.batch_seconds.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(seconds) if seconds < LIGHT_BATCH_SECONDS => AUTO_RUN_BATCHES,
            _ => 1,
        }
    }

    /// The batches of epoch `epoch` from batch `first_batch` on, in order,
    /// assembled by [`MixtureConfig::workers`] threads ahead of the
    /// consumer: runs of [`MixtureLoader::run_length`] batches, run `i` by
    /// worker `i mod workers` ([`MixtureLoader::batches_together`]; where
    /// that fails, each batch of the run alone, so that an error names the
    /// batch it is in).
    ///
    /// When an epoch has no more than a run per worker left to hand over,
    /// it starts epoch `epoch + 1` in the background, so that the next
    /// epoch's first batches are assembled while the training loop finishes
    /// this one. Asking for that epoch next (from its first batch) takes
    /// it; asking for any other drops it (its workers stop). The batches are
    /// the same either way.
    pub fn epoch(self: &Arc<Self>, epoch: u64, first_batch: usize) -> MixtureEpoch {
        let ahead = self.ahead.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut started = match ahead {
            Some(started) if started.number == epoch && first_batch == 0 => started,
            _ => self.start_epoch(epoch, first_batch),
        };
        started.mixture = Some(Arc::clone(self));
        started
    }

    /// The epoch's workers started (see [`MixtureLoader::epoch`]).
    fn start_epoch(self: &Arc<Self>, epoch: u64, first_batch: usize) -> MixtureEpoch {
        let batches = self.shared_batches(epoch);
        let total = batches.len();
        let together = self.run_length();
        let runs = total.saturating_sub(first_batch).div_ceil(together);
        let workers = self.config.workers.clamp(1, runs.max(1));
        let capacity = self.config.prefetch.max(1).div_ceil(workers).max(together);
        let mut queues = Vec::with_capacity(workers);
        let mut failed = None;
        for worker in 0..workers {
            let (sender, receiver) = std::sync::mpsc::sync_channel(capacity);
            let (mixture, batches) = (Arc::downgrade(self), Arc::clone(&batches));
            let spawned = std::thread::Builder::new().name(format!("robocache-mixture-{worker}")).spawn(move || {
                for run in (worker..runs).step_by(workers) {
                    // The mixture held only while a run is assembled.
                    let Some(mixture) = mixture.upgrade() else { return };
                    let start = first_batch + run * together;
                    let lists: Vec<&[(usize, usize)]> =
                        batches[start..(start + together).min(total)].iter().map(Vec::as_slice).collect();
                    let assembled: Vec<Result<(MixtureBatch, BatchCost)>> = match mixture.assemble_run(epoch, &lists) {
                        Ok(assembled) => assembled.into_iter().map(Ok).collect(),
                        Err(_) if lists.len() > 1 => lists
                            .iter()
                            .map(|list| {
                                let alone = mixture.assemble_run(epoch, &[list])?.pop();
                                alone.ok_or_else(|| Error::Internal("mixture: no batch assembled".into()))
                            })
                            .collect(),
                        Err(e) => vec![Err(e)],
                    };
                    drop(mixture);
                    for batch in assembled {
                        if sender.send(batch).is_err() {
                            return; // the consumer dropped the epoch
                        }
                    }
                }
            });
            match spawned {
                Ok(_) => queues.push(receiver),
                Err(e) => {
                    failed = Some(invalid(format!("cannot start a mixture thread: {e}")));
                    queues.clear();
                    break;
                }
            }
        }
        let left = if failed.is_some() { 0 } else { total.saturating_sub(first_batch) };
        MixtureEpoch { queues, together, next: 0, left, failed, number: epoch, mixture: None, started_next: false }
    }

    /// Batch `index` of epoch `epoch` (resuming mid-epoch: any batch, in any order).
    pub fn batch_of_epoch(&self, epoch: u64, index: usize) -> Result<MixtureBatch> {
        let batches = self.shared_batches(epoch);
        let positions = batches.get(index).ok_or_else(|| {
            invalid(format!("batch {index} of epoch {epoch}: the epoch has {} batches on this rank", batches.len()))
        })?;
        let mut batches = self.batches_together_in(epoch, &[positions])?;
        batches.pop().ok_or_else(|| Error::Internal("mixture: no batch assembled".into()))
    }

    /// The mixture batch of `positions` (`(dataset, window)` pairs): rows
    /// grouped by dataset (see the module docs).
    pub fn batch(&self, positions: &[(usize, usize)]) -> Result<MixtureBatch> {
        let mut batches = self.batches_together(&[positions])?;
        batches.pop().ok_or_else(|| Error::Internal("mixture: no batch assembled".into()))
    }

    /// The mixture batches of several lists of positions, each equal to
    /// [`MixtureLoader::batch`] of its list, assembled together: each
    /// dataset's loader is asked once for its windows of every batch, the
    /// outputs of every batch are zeroed in one allocation, every part's
    /// rows copied in by one launch on a GPU and every `dim_is_pad` put
    /// there in one upload. What a batch costs the driver is then shared by
    /// the batches assembled together ([`MixtureConfig::batches_together`]).
    /// The batches are counted in the telemetry as delivered.
    pub fn batches_together(&self, lists: &[&[(usize, usize)]]) -> Result<Vec<MixtureBatch>> {
        self.batches_together_in(0, lists)
    }

    /// [`MixtureLoader::batches_together`] with the members' augmentations
    /// drawn as epoch `epoch` draws them (the plain call draws epoch 0's).
    pub fn batches_together_in(&self, epoch: u64, lists: &[&[(usize, usize)]]) -> Result<Vec<MixtureBatch>> {
        let assembled = self.assemble_run(epoch, lists)?;
        Ok(assembled
            .into_iter()
            .map(|(batch, cost)| {
                self.record(&cost);
                batch
            })
            .collect())
    }

    /// Adds a delivered batch to the telemetry: its windows and its share
    /// of its run's seconds per member, and which member's part was the
    /// slowest.
    fn record(&self, cost: &BatchCost) {
        let mut report = self.telemetry.lock().unwrap_or_else(|p| p.into_inner());
        report.batches += 1;
        report.seconds += cost.seconds;
        for (m, (windows, seconds)) in cost.windows.iter().zip(&cost.part_seconds).enumerate() {
            if let Some(member) = report.members.get_mut(m) {
                member.windows += *windows as u64;
                member.seconds += seconds.unwrap_or(0.0);
            }
        }
        if let Some(member) = cost.slowest.and_then(|m| report.members.get_mut(m)) {
            member.slowest_in += 1;
        }
    }
}

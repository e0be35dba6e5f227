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
//!   padding: LeRobot's and GR00T's `action_dim_is_pad`);
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
//! with the loaders' `frames`), and the same mask kind. The member batches
//! of a mixture batch are assembled in turn, then padded where they are:
//! every part's rows and masks, of every key, copied into the zeroed
//! outputs by one `copy_row_blocks` launch on a GPU (a table of the blocks
//! of rows; plain copies one after the other on the CPU), with no round
//! trip through the host (a concatenated key combines its masks on the
//! host). [`MixtureLoader::epoch`]'s workers assemble batches
//! side by side, ahead of the consumer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use robocache_cpu::{DType, HostVec};
use robocache_datasets::{EpochLength, MixturePart, MixtureSampler, MixtureWeights, Shard, ShardBy};

use serde::Serialize;

use super::{invalid, Loader, MaskKind, Normalization, NormalizationMode, StreamStatistics};
use crate::batch_buffer::BatchUpload;
use crate::row_copies::{copy_rows_together, RowsCopy};
use crate::{Device, Error, Result, Tensor};

/// One dataset of a mixture: its loader (built with its own streams and
/// windows; its batch size, shuffling and sharding are the mixture's) and
/// its streams' names in the mixture.
pub struct MixtureMember {
    /// Its name, in errors and in the batch.
    pub name: String,
    /// The loader that reads it (shared: a Python `Loader` object may be
    /// a member too).
    pub loader: Arc<Loader>,
    /// Its weight (see [`MixtureWeights`]).
    pub weight: f64,
    /// `(name in the mixture, where its values come from)`: the streams it gives.
    pub keys: Vec<(String, MemberKey)>,
}

/// Where a mixture stream's values come from in one dataset.
#[derive(Clone, Debug, PartialEq)]
pub enum MemberKey {
    /// One of its loader's streams.
    Stream(String),
    /// Several of its loader's streams side by side along their last
    /// dimension (a stream without one counts as width 1): each must have
    /// the dtype, steps and other dimensions of the first and its mask kind.
    /// A step is padding where any part's is.
    Concat(Vec<String>),
    /// The same row `[D]` at every step, valid throughout: a key this
    /// dataset lacks whose value is known (a fixed gripper, a control-mode
    /// flag). Its dtype is the other datasets' (f32 where none gives it).
    Constant(Vec<f64>),
}

impl MemberKey {
    /// The loader streams it reads.
    pub fn streams(&self) -> &[String] {
        match self {
            MemberKey::Stream(name) => std::slice::from_ref(name),
            MemberKey::Concat(names) => names,
            MemberKey::Constant(_) => &[],
        }
    }
}

impl From<&str> for MemberKey {
    fn from(stream: &str) -> Self {
        MemberKey::Stream(stream.to_owned())
    }
}

impl std::fmt::Debug for MixtureMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixtureMember").field("name", &self.name).field("weight", &self.weight).finish_non_exhaustive()
    }
}

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
    /// Batches assembled ahead, all workers together.
    pub prefetch: usize,
}

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
    queues: Vec<std::sync::mpsc::Receiver<Result<MixtureBatch>>>,
    next: usize,
    left: usize,
    failed: Option<Error>,
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
        let queue = &self.queues[self.next % self.queues.len()];
        self.next += 1;
        self.left -= 1;
        Some(queue.recv().unwrap_or_else(|_| Err(invalid("a mixture's worker thread stopped".into()))))
    }
}

/// A dataset's version of a mixture stream, on the mixture's device:
/// `[B, T, ...]` data, its `[B, T]` step mask and the mask's kind.
#[derive(Debug)]
struct PartStream {
    data: Tensor,
    mask: Tensor,
    kind: MaskKind,
}

impl PartStream {
    fn shape(&self) -> &[usize] {
        self.data.shape()
    }

    /// The last dimension (1 for `[B, T]`).
    fn width(&self) -> usize {
        last_width(self.shape())
    }
}

/// A stream's last dimension: 1 for a `[B, T]` stream.
fn last_width(shape: &[usize]) -> usize {
    if shape.len() > 2 {
        shape[shape.len() - 1]
    } else {
        1
    }
}

/// What one dataset of a mixture delivered ([`MixtureLoader::telemetry`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemberReport {
    pub name: String,
    /// Its share of an epoch, as the weights give it.
    pub weight_share: f64,
    /// Windows it delivered into batches.
    pub windows: u64,
    /// `windows` over every member's windows: against `weight_share`.
    pub share: f64,
    /// Seconds its parts of the batches took to assemble: what the batches
    /// waited for it (a batch's parts are read one after the other).
    pub seconds: f64,
    /// Batches in which its part took the longest.
    pub slowest_in: u64,
}

/// A mixture's telemetry: per dataset, what it delivered and what the
/// batches waited for it (which dataset starves the loader).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MixtureReport {
    pub batches: u64,
    /// Seconds batches took to assemble, in all.
    pub seconds: f64,
    pub members: Vec<MemberReport>,
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
        let parts = members.iter().map(|m| MixturePart::new(m.name.clone(), m.loader.windows(), m.weight)).collect();
        let sampler =
            MixtureSampler::new(parts, config.weights, config.epoch, config.seed, config.shard, ShardBy::Windows)?;
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

    /// The batches of epoch `epoch` from batch `first_batch` on, in order,
    /// assembled by [`MixtureConfig::workers`] threads ahead of the consumer
    /// (batch `i` by worker `i mod workers`, at most `prefetch` waiting).
    pub fn epoch(self: &Arc<Self>, epoch: u64, first_batch: usize) -> MixtureEpoch {
        let batches = self.shared_batches(epoch);
        let total = batches.len();
        let workers = self.config.workers.clamp(1, total.saturating_sub(first_batch).max(1));
        let capacity = self.config.prefetch.max(1).div_ceil(workers);
        let mut queues = Vec::with_capacity(workers);
        for worker in 0..workers {
            let (sender, receiver) = std::sync::mpsc::sync_channel(capacity);
            let (mixture, batches) = (Arc::clone(self), Arc::clone(&batches));
            let spawned = std::thread::Builder::new().name(format!("robocache-mixture-{worker}")).spawn(move || {
                for index in (first_batch + worker..total).step_by(workers) {
                    if sender.send(mixture.batch(&batches[index])).is_err() {
                        return; // the consumer dropped the epoch
                    }
                }
            });
            match spawned {
                Ok(_) => queues.push(receiver),
                Err(e) => {
                    return MixtureEpoch {
                        queues: Vec::new(),
                        next: 0,
                        left: 0,
                        failed: Some(invalid(format!("cannot start a mixture thread: {e}"))),
                    }
                }
            }
        }
        MixtureEpoch { queues, next: 0, left: total.saturating_sub(first_batch), failed: None }
    }

    /// Batch `index` of epoch `epoch` (resuming mid-epoch: any batch, in any order).
    pub fn batch_of_epoch(&self, epoch: u64, index: usize) -> Result<MixtureBatch> {
        let batches = self.shared_batches(epoch);
        let positions = batches.get(index).ok_or_else(|| {
            invalid(format!("batch {index} of epoch {epoch}: the epoch has {} batches on this rank", batches.len()))
        })?;
        self.batch(positions)
    }

    /// The mixture batch of `positions` (`(dataset, window)` pairs): rows
    /// grouped by dataset (see the module docs).
    pub fn batch(&self, positions: &[(usize, usize)]) -> Result<MixtureBatch> {
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); self.members.len()];
        for &(member, window) in positions {
            groups
                .get_mut(member)
                .ok_or_else(|| invalid(format!("dataset {member}: the mixture has {}", self.members.len())))?
                .push(window);
        }
        // Each dataset's own batch, timed. In turn on this thread: the
        // epoch's workers assemble batches side by side (a thread per part
        // of every batch cost more than small parts take).
        let started = Instant::now();
        type Part = Option<(Result<crate::windows::WindowBatch>, f64)>;
        let timed: Vec<Part> = groups
            .iter()
            .zip(&self.members)
            .map(|(windows, member)| {
                (!windows.is_empty()).then(|| {
                    let at = Instant::now();
                    // Queued, not waited for: the padding below is queued
                    // after it on the same stream, and the batch waits once.
                    let batch = member.loader.batch_queued(windows);
                    (batch, at.elapsed().as_secs_f64())
                })
            })
            .collect();
        self.record(&groups, &timed, started.elapsed().as_secs_f64());
        let parts: Vec<Option<Result<crate::windows::WindowBatch>>> =
            timed.into_iter().map(|part| part.map(|(batch, _)| batch)).collect();
        let mut batches = Vec::with_capacity(parts.len());
        for (part, member) in parts.into_iter().zip(&self.members) {
            batches.push(match part {
                Some(batch) => Some(batch.map_err(|e| invalid(format!("dataset `{}`: {e}", member.name)))?),
                None => None,
            });
        }
        let rows: usize = groups.iter().map(Vec::len).sum();
        // Every key's output cleared in one allocation, its rows copied in,
        // and every key's `dim_is_pad` (built here) placed in one upload.
        let plans: Vec<MixPlan<'_>> =
            (self.config.streams.iter()).map(|name| self.plan_stream(name, &batches, rows)).collect::<Result<_>>()?;
        let specs: Vec<(DType, Vec<usize>)> = plans
            .iter()
            .flat_map(|plan| [(plan.dtype, plan.out_shape.clone()), (DType::Bool, vec![rows, plan.steps])])
            .collect();
        let mut outputs = Tensor::zeros_together(&self.device, &specs)?;
        if outputs.len() != 2 * plans.len() {
            return Err(Error::Internal("mixture: fewer zeroed outputs than keys".into()));
        }
        // The steps of a dataset without a stream are padding: their masks set.
        let paddings: Vec<Vec<Option<Tensor>>> =
            plans.iter().map(|plan| self.absent_masks(plan, &groups)).collect::<Result<_>>()?;
        // Every key's rows of every dataset copied in, all in one launch on a GPU.
        let mut copies = Vec::new();
        let mut filled = Vec::with_capacity(plans.len());
        for (k, (plan, paddings)) in plans.iter().zip(&paddings).enumerate() {
            filled.push(fill_copies(plan, 2 * k, &groups, paddings, &mut copies));
        }
        copy_rows_together(&self.device, &copies, &mut outputs)?;
        drop(copies);
        let mut outputs = outputs.into_iter();
        let mut filled: Vec<(Tensor, Tensor, Vec<bool>)> = filled
            .into_iter()
            .map(|dim_is_pad| match (outputs.next(), outputs.next()) {
                (Some(data), Some(mask)) => Ok((data, mask, dim_is_pad)),
                _ => Err(Error::Internal("mixture: fewer zeroed outputs than keys".into())),
            })
            .collect::<Result<_>>()?;
        let pads: Vec<(DType, usize)> = plans.iter().map(|plan| (DType::Bool, rows * plan.widest)).collect();
        let mut upload = BatchUpload::new(&self.device, &pads)?;
        let mut pad_shapes = Vec::with_capacity(plans.len());
        for (at, (plan, (_, _, dim_is_pad))) in plans.iter().zip(&mut filled).enumerate() {
            upload.set_flags(at, std::mem::take(dim_is_pad))?;
            pad_shapes.push(vec![rows, plan.widest]);
        }
        let names: Vec<&str> = plans.iter().map(|plan| plan.name).collect();
        let dim_is_pads = upload.into_tensors(&self.device, &pad_shapes, &names)?;
        let streams = (plans.iter().zip(filled).zip(dim_is_pads))
            .map(|((plan, (data, mask, _)), dim_is_pad)| MixtureStream {
                name: plan.name.to_owned(),
                data,
                mask,
                mask_kind: plan.kind,
                dim_is_pad,
            })
            .collect();
        let datasets = groups.iter().enumerate().flat_map(|(m, g)| std::iter::repeat_n(m, g.len())).collect();
        let windows = groups.iter().flatten().copied().collect();
        // Ready when its members' batches would be: one wait for them all.
        if self.members.iter().any(|m| m.loader.waits_until_ready()) {
            self.device.synchronize()?;
        }
        Ok(MixtureBatch { streams, datasets, windows })
    }

    /// Adds a batch's parts to the telemetry: windows and seconds per
    /// member, and which part took the longest.
    fn record(
        &self,
        groups: &[Vec<usize>],
        timed: &[Option<(Result<crate::windows::WindowBatch>, f64)>],
        seconds: f64,
    ) {
        let mut report = self.telemetry.lock().unwrap_or_else(|p| p.into_inner());
        report.batches += 1;
        report.seconds += seconds;
        let mut times: Vec<(f64, usize)> = Vec::new();
        for (m, (group, part)) in groups.iter().zip(timed).enumerate() {
            if let (Some(member), Some((_, took))) = (report.members.get_mut(m), part) {
                member.windows += group.len() as u64;
                member.seconds += took;
                times.push((*took, m));
            }
        }
        if let Some(&(_, m)) = times.iter().max_by(|a, b| a.0.total_cmp(&b.0)) {
            if let Some(member) = report.members.get_mut(m) {
                member.slowest_in += 1;
            }
        }
    }

    /// Stream `name` of the mixture batch: each group's rows, padded to
    /// the widest on the mixture's device (2-D copies on a GPU: no round
    /// trip through the host).
    /// What key `name` of a mixture batch is made of: each member's
    /// version of it (constants once the others say the dtype, steps and
    /// mask kind), checked to agree, and the output's shape.
    fn plan_stream<'n>(
        &self,
        name: &'n str,
        batches: &[Option<crate::windows::WindowBatch>],
        rows: usize,
    ) -> Result<MixPlan<'n>> {
        let mut found: Vec<Option<PartStream>> = Vec::with_capacity(batches.len());
        let mut constants: Vec<(usize, &[f64])> = Vec::new();
        for (m, (member, batch)) in self.members.iter().zip(batches).enumerate() {
            let key = member.keys.iter().find(|(mixed, _)| mixed == name).map(|(_, key)| key);
            found.push(match (key, batch) {
                (Some(MemberKey::Stream(own)), Some(batch)) => Some(member_stream(member, batch, own)?),
                (Some(MemberKey::Concat(parts)), Some(batch)) => {
                    Some(concatenated(&self.device, member, batch, name, parts)?)
                }
                (Some(MemberKey::Constant(values)), Some(_)) => {
                    constants.push((m, values));
                    None
                }
                _ => None,
            });
        }
        if !constants.is_empty() {
            let like = found.iter().flatten().next().map(|p| (p.data.dtype(), p.shape().to_vec(), p.kind));
            for (m, values) in constants {
                let (member, batch) = (&self.members[m], batches[m].as_ref());
                let rows_of = batch.map_or(0, |b| b.len());
                let part = constant_stream(&self.device, member, batch, name, values, rows_of, like.as_ref())?;
                found[m] = Some(part);
            }
        }
        let present: Vec<&PartStream> = found.iter().flatten().collect();
        let Some(first) = present.first() else {
            return Err(invalid(format!(
                "stream `{name}`: no dataset of this batch has it (a batch of only datasets without it)"
            )));
        };
        let (dtype, kind, shape) = (first.data.dtype(), first.kind, first.shape().to_vec());
        if shape.len() < 2 {
            return Err(invalid(format!("stream `{name}` has shape {shape:?}: [B, T, ...] expected")));
        }
        let widest = present.iter().map(|p| p.width()).max().unwrap_or(1);
        for (member, entry) in self.members.iter().zip(&found) {
            let Some(part) = entry else { continue };
            if part.data.dtype() != dtype || part.kind != kind || body(part.shape()) != body(&shape) {
                return Err(invalid(format!(
                    "stream `{name}`: dataset `{}` gives {} {:?} ({:?} masks), another {dtype} \
                     {shape:?} ({kind:?}): the same dtype, steps and shape but for the last dimension are needed",
                    member.name,
                    part.data.dtype(),
                    part.shape(),
                    part.kind
                )));
            }
        }
        let steps = shape[1];
        let vector = shape.len() > 2;
        let inner: usize = if vector { shape[2..shape.len() - 1].iter().product() } else { 1 };
        let mut out_shape = vec![rows];
        out_shape.extend(&shape[1..]);
        if vector {
            let last = out_shape.len() - 1;
            out_shape[last] = widest;
        }
        Ok(MixPlan { name, found, dtype, kind, steps, inner, widest, out_shape })
    }

    /// Per group of key `plan`: where the dataset lacks the stream and its
    /// mask marks padding, a mask of `true` for its rows (on the host; the
    /// copy puts it where it goes).
    fn absent_masks(&self, plan: &MixPlan<'_>, groups: &[Vec<usize>]) -> Result<Vec<Option<Tensor>>> {
        groups
            .iter()
            .zip(&plan.found)
            .map(|(group, entry)| match (entry, group.is_empty(), plan.kind) {
                (None, false, MaskKind::Pad) => {
                    let padding = vec![true; group.len() * plan.steps];
                    Tensor::from_host_vec(&Device::cpu(), HostVec::Bool(padding), &[group.len(), plan.steps]).map(Some)
                }
                _ => Ok(None),
            })
            .collect()
    }
}

/// Key `plan` of a mixture batch: the copies of each group's rows into the
/// zeroed outputs `data_at` (data) and `data_at + 1` (mask) at its place
/// (the steps of a dataset without the stream: its `paddings` mask), and
/// its `dim_is_pad` rows.
fn fill_copies<'a>(
    plan: &'a MixPlan<'_>,
    data_at: usize,
    groups: &[Vec<usize>],
    paddings: &'a [Option<Tensor>],
    copies: &mut Vec<RowsCopy<'a>>,
) -> Vec<bool> {
    let (steps, inner, widest) = (plan.steps, plan.inner, plan.widest);
    let rows: usize = groups.iter().map(Vec::len).sum();
    let mut dim_is_pad = Vec::with_capacity(rows * widest);
    let mut row = 0;
    for ((group, entry), padding) in groups.iter().zip(&plan.found).zip(paddings) {
        if group.is_empty() {
            continue;
        }
        let mask =
            |from: &'a Tensor| RowsCopy { from, to: data_at + 1, width: steps, dest_width: steps, row, column: 0 };
        match entry {
            Some(part) => {
                let width = part.width();
                copies.push(RowsCopy {
                    from: &part.data,
                    to: data_at,
                    width,
                    dest_width: widest,
                    row: row * steps * inner,
                    column: 0,
                });
                copies.push(mask(&part.mask));
                for _ in 0..group.len() {
                    dim_is_pad.extend((0..widest).map(|d| d >= width));
                }
            }
            None => {
                // A stream this dataset lacks: zeros, every step padding.
                if let Some(padding) = padding {
                    copies.push(mask(padding));
                }
                dim_is_pad.extend(std::iter::repeat_n(true, group.len() * widest));
            }
        }
        row += group.len();
    }
    dim_is_pad
}

/// One key of a mixture batch, planned: the members' parts, the output's
/// dtype, mask kind, steps, inner size (elements between a step and its
/// last dimension), widest last dimension and shape.
struct MixPlan<'n> {
    name: &'n str,
    found: Vec<Option<PartStream>>,
    dtype: DType,
    kind: MaskKind,
    steps: usize,
    inner: usize,
    widest: usize,
    out_shape: Vec<usize>,
}

/// A stream's steps and every dimension but the last (`[B, T]`: the steps).
fn body(shape: &[usize]) -> Vec<usize> {
    if shape.len() > 2 {
        shape[1..shape.len() - 1].to_vec()
    } else {
        shape[1..].to_vec()
    }
}

/// One of a member's loader streams in its batch.
fn member_stream(member: &MixtureMember, batch: &crate::windows::WindowBatch, own: &str) -> Result<PartStream> {
    let stream = batch
        .stream(own)
        .ok_or_else(|| invalid(format!("dataset `{}`: its batch has no stream `{own}`", member.name)))?;
    Ok(PartStream { data: stream.data.clone(), mask: stream.mask.clone(), kind: stream.mask_kind })
}

/// A member's streams `parts` side by side along the last dimension (see
/// [`MemberKey::Concat`]): the data on the device; the step masks combined
/// on the host (a wait for the device: concatenation is the slower key).
fn concatenated(
    device: &Device,
    member: &MixtureMember,
    batch: &crate::windows::WindowBatch,
    name: &str,
    parts: &[String],
) -> Result<PartStream> {
    let read: Vec<PartStream> = parts.iter().map(|own| member_stream(member, batch, own)).collect::<Result<_>>()?;
    let Some(first) = read.first() else {
        return Err(invalid(format!("dataset `{}`: stream `{name}` concatenates no stream", member.name)));
    };
    let (dtype, kind, rows) = (first.data.dtype(), first.kind, first.shape()[0]);
    for (own, part) in parts.iter().zip(&read) {
        if part.data.dtype() != dtype
            || part.kind != kind
            || part.shape()[0] != rows
            || body(part.shape()) != body(first.shape())
        {
            return Err(invalid(format!(
                "dataset `{}`: stream `{name}` concatenates `{own}`, {} {:?} ({:?} masks), with `{}`, {dtype} {:?} \
                 ({kind:?}): the same dtype, steps and shape but for the last dimension are needed",
                member.name,
                part.data.dtype(),
                part.shape(),
                part.kind,
                parts[0],
                first.shape()
            )));
        }
    }
    let total: usize = read.iter().map(PartStream::width).sum();
    let mut shape = first.shape().to_vec();
    if shape.len() > 2 {
        let last = shape.len() - 1;
        shape[last] = total;
    } else {
        shape.push(total);
    }
    let mut data = Tensor::zeros(device, dtype, &shape)?;
    let mut column = 0;
    for part in &read {
        part.data.copy_rows_into(&mut data, part.width(), total, 0, column)?;
        column += part.width();
    }
    // A step is padding where any part's is (valid where every part's is).
    let mut mask = first.mask.to_vec::<bool>()?;
    for part in &read[1..] {
        for (m, p) in mask.iter_mut().zip(part.mask.to_vec::<bool>()?) {
            *m = match kind {
                MaskKind::Pad => *m || p,
                MaskKind::Valid => *m && p,
            };
        }
    }
    let mask = Tensor::from_host_vec(device, HostVec::Bool(mask), first.mask.shape())?;
    Ok(PartStream { data, mask, kind })
}

/// A member's constant row at every step of its `rows` windows (see
/// [`MemberKey::Constant`]), shaped and typed `like` the other datasets'
/// version of the stream (`[B, T, D]` of f32 where none gives it).
fn constant_stream(
    device: &Device,
    member: &MixtureMember,
    batch: Option<&crate::windows::WindowBatch>,
    name: &str,
    values: &[f64],
    rows: usize,
    like: Option<&(DType, Vec<usize>, MaskKind)>,
) -> Result<PartStream> {
    let (dtype, steps, kind) = match like {
        Some((dtype, shape, kind)) => {
            if shape.len() > 3 {
                return Err(invalid(format!(
                    "dataset `{}`: stream `{name}` is {shape:?} in another dataset: a constant fills [B, T, D] only",
                    member.name
                )));
            }
            (*dtype, shape[1], *kind)
        }
        None => {
            let stream = batch.and_then(|b| b.streams.first()).ok_or_else(|| {
                invalid(format!("dataset `{}`: stream `{name}`: a constant needs another stream's steps", member.name))
            })?;
            (DType::F32, stream.data.shape()[1], stream.mask_kind)
        }
    };
    let template = HostVec::zeros(dtype, 0);
    let data = robocache_cpu::with_host_data!(HostVec, &template, |v: T| {
        let _ = v;
        let row: Option<Vec<T>> = values.iter().map(|&x| <T as robocache_cpu::Element>::from_f64_exact(x)).collect();
        let row = row.ok_or_else(|| {
            invalid(format!("dataset `{}`: stream `{name}`: the constant {values:?} does not fit {dtype}", member.name))
        })?;
        let all: Vec<T> = std::iter::repeat_n(row, rows * steps).flatten().collect();
        <T as robocache_cpu::Element>::vec(all)
    });
    let mask = vec![kind == MaskKind::Valid; rows * steps];
    Ok(PartStream {
        data: Tensor::from_host_vec(device, data, &[rows, steps, values.len()])?,
        mask: Tensor::from_host_vec(device, HostVec::Bool(mask), &[rows, steps])?,
        kind,
    })
}

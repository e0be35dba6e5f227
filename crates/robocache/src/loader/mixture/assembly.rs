//! A run of mixture batches assembled together: each member's loader asked
//! once for its windows of the whole run, every key's shape found once
//! ([`KeyShape`]), and every part's rows, padding and masks copied into the
//! zeroed outputs by one launch (`copy_rows_together`).

use std::sync::Arc;
use std::time::Instant;

use robocache_cpu::{DType, HostVec};

use super::keys::{
    body, concatenated, constant_stream, fill_copies, last_width, member_stream, KeyParts, KeyShape, MixPlan,
};
use super::member::MemberKey;
use super::report::BatchCost;
use super::{MixtureBatch, MixtureLoader, MixtureStream};
use crate::batch_buffer::BatchUpload;
use crate::loader::{invalid, MaskKind};
use crate::row_copies::copy_rows_together;
use crate::{Device, Error, Result, Tensor};

impl MixtureLoader {
    /// [`MixtureLoader::batches_together`], each batch with its share of
    /// the run's cost (for the telemetry, when it is delivered).
    pub(super) fn assemble_run(
        &self,
        epoch: u64,
        lists: &[&[(usize, usize)]],
    ) -> Result<Vec<(MixtureBatch, BatchCost)>> {
        let assembling = Instant::now();
        let members = self.members.len();
        // `groups[k][m]`: batch k's windows of dataset m, in the order drawn.
        let mut groups: Vec<Vec<Vec<usize>>> = Vec::with_capacity(lists.len());
        for positions in lists {
            let mut of_batch: Vec<Vec<usize>> = vec![Vec::new(); members];
            for &(member, window) in *positions {
                of_batch
                    .get_mut(member)
                    .ok_or_else(|| invalid(format!("dataset {member}: the mixture has {members}")))?
                    .push(window);
            }
            groups.push(of_batch);
        }
        // Each dataset's windows of every batch one after the other: batch
        // k's rows of dataset m start at row `starts[k][m]` of its batch.
        let mut combined: Vec<Vec<usize>> = vec![Vec::new(); members];
        let mut starts: Vec<Vec<usize>> = Vec::with_capacity(lists.len());
        for of_batch in &groups {
            starts.push(combined.iter().map(Vec::len).collect());
            for (all, group) in combined.iter_mut().zip(of_batch) {
                all.extend_from_slice(group);
            }
        }
        // Each dataset's own batch, timed. In turn on this thread: the
        // epoch's workers assemble batches side by side (a thread per part
        // of every batch cost more than small parts take).
        let started = Instant::now();
        type Part = Option<(Result<crate::windows::WindowBatch>, f64)>;
        let timed: Vec<Part> = combined
            .iter()
            .zip(&self.members)
            .map(|(windows, member)| {
                (!windows.is_empty()).then(|| {
                    let at = Instant::now();
                    // Queued, not waited for: the padding below is queued
                    // after it on the same stream, and the batches wait once.
                    let batch = member.loader.batch_queued_in_epoch(epoch, windows);
                    (batch, at.elapsed().as_secs_f64())
                })
            })
            .collect();
        // Each batch's share of the parts' time, and the run's slowest part.
        let share = 1.0 / lists.len().max(1) as f64;
        let part_seconds: Vec<Option<f64>> = timed.iter().map(|part| part.as_ref().map(|(_, t)| t * share)).collect();
        let parts_seconds = started.elapsed().as_secs_f64() * share;
        let slowest = (part_seconds.iter().enumerate())
            .filter_map(|(m, t)| t.map(|t| (t, m)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, m)| m);
        let mut parts = Vec::with_capacity(timed.len());
        for (part, member) in timed.into_iter().zip(&self.members) {
            parts.push(match part {
                Some((batch, _)) => Some(batch.map_err(|e| invalid(format!("dataset `{}`: {e}", member.name)))?),
                None => None,
            });
        }
        // Every key's shape (the same in every batch), its parts, and each
        // batch's plan of it.
        let shapes = self.key_shapes(&parts)?;
        let rows: Vec<usize> = lists.iter().map(|positions| positions.len()).collect();
        let most = rows.iter().copied().max().unwrap_or(0);
        let keys: Vec<KeyParts<'_>> = (self.config.streams.iter().zip(shapes.iter()))
            .map(|(name, shape)| {
                let lacking = groups.iter().any(|of_batch| self.lacks(name, of_batch));
                self.key_parts(name, shape, &parts, lacking.then_some(most))
            })
            .collect::<Result<_>>()?;
        let plans: Vec<Vec<MixPlan<'_>>> = groups
            .iter()
            .zip(&starts)
            .zip(&rows)
            .map(|((of_batch, starts), &rows)| {
                keys.iter().map(|key| key.plan(&self.members, of_batch, starts, rows)).collect::<Result<_>>()
            })
            .collect::<Result<_>>()?;
        // Every output of every batch cleared in one allocation, its rows
        // copied in by one launch on a GPU, every `dim_is_pad` in one upload.
        let specs: Vec<(DType, Vec<usize>)> = plans
            .iter()
            .flatten()
            .flat_map(|plan| {
                [(plan.shape.dtype, plan.out_shape.clone()), (DType::Bool, vec![plan.rows, plan.shape.steps])]
            })
            .collect();
        let mut outputs = Tensor::zeros_together(&self.device, &specs)?;
        if outputs.len() != specs.len() {
            return Err(Error::Internal("mixture: fewer zeroed outputs than keys".into()));
        }
        let mut copies = Vec::new();
        let mut dim_is_pads = Vec::with_capacity(specs.len() / 2);
        for (at, plan) in plans.iter().flatten().enumerate() {
            dim_is_pads.push(fill_copies(plan, 2 * at, &mut copies));
        }
        copy_rows_together(&self.device, &copies, &mut outputs)?;
        drop(copies);
        let pads: Vec<(DType, usize)> =
            plans.iter().flatten().map(|plan| (DType::Bool, plan.rows * plan.shape.widest)).collect();
        let mut upload = BatchUpload::new(&self.device, &pads)?;
        let mut pad_shapes = Vec::with_capacity(pads.len());
        for (at, (plan, dim_is_pad)) in plans.iter().flatten().zip(dim_is_pads).enumerate() {
            upload.set_flags(at, dim_is_pad)?;
            pad_shapes.push(vec![plan.rows, plan.shape.widest]);
        }
        let names: Vec<&str> = plans.iter().flatten().map(|plan| plan.name).collect();
        let mut dim_is_pads = upload.into_tensors(&self.device, &pad_shapes, &names)?.into_iter();
        let mut outputs = outputs.into_iter();
        let mut batches = Vec::with_capacity(plans.len());
        for (of_batch, plans) in groups.iter().zip(&plans) {
            let mut streams = Vec::with_capacity(plans.len());
            for plan in plans {
                let (Some(data), Some(mask), Some(dim_is_pad)) = (outputs.next(), outputs.next(), dim_is_pads.next())
                else {
                    return Err(Error::Internal("mixture: fewer outputs than keys".into()));
                };
                streams.push(MixtureStream {
                    name: plan.name.to_owned(),
                    data,
                    mask,
                    mask_kind: plan.shape.kind,
                    dim_is_pad,
                });
            }
            let datasets = of_batch.iter().enumerate().flat_map(|(m, g)| std::iter::repeat_n(m, g.len())).collect();
            let windows = of_batch.iter().flatten().copied().collect();
            let cost = BatchCost {
                windows: of_batch.iter().map(Vec::len).collect(),
                part_seconds: part_seconds.clone(),
                seconds: parts_seconds,
                slowest,
            };
            batches.push((MixtureBatch { streams, datasets, windows }, cost));
        }
        // Ready when its members' batches would be: one wait for them all.
        if self.members.iter().any(|m| m.loader.waits_until_ready()) {
            self.device.synchronize()?;
        }
        if !batches.is_empty() {
            let each = assembling.elapsed().as_secs_f64() / batches.len() as f64;
            let mut average = self.batch_seconds.lock().unwrap_or_else(|p| p.into_inner());
            *average = Some(average.map_or(each, |before| 0.75 * before + 0.25 * each));
        }
        Ok(batches)
    }

    /// Whether a member with windows in a batch of `groups` lacks key `name`.
    fn lacks(&self, name: &str, groups: &[Vec<usize>]) -> bool {
        (self.members.iter().zip(groups)).any(|(member, group)| !group.is_empty() && member.key(name).is_none())
    }

    /// Every key's shape, the same in every batch ([`KeyShape`]): found
    /// once, from the members' batches `parts` of the first batches
    /// assembled and, for a member without windows there, a batch of its
    /// first window.
    pub(super) fn key_shapes(&self, parts: &[Option<crate::windows::WindowBatch>]) -> Result<Arc<Vec<KeyShape>>> {
        let mut known = self.key_shapes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(shapes) = known.as_ref() {
            return Ok(Arc::clone(shapes));
        }
        let mut probes = Vec::with_capacity(self.members.len());
        for (member, part) in self.members.iter().zip(parts) {
            probes.push(match part {
                None if member.loader.windows() > 0 => Some(
                    member.loader.batch_queued(&[0]).map_err(|e| invalid(format!("dataset `{}`: {e}", member.name)))?,
                ),
                _ => None,
            });
        }
        let batches: Vec<Option<&crate::windows::WindowBatch>> =
            parts.iter().zip(&probes).map(|(part, probe)| part.as_ref().or(probe.as_ref())).collect();
        let shapes = (self.config.streams.iter()).map(|name| self.key_shape(name, &batches)).collect::<Result<_>>()?;
        let shapes = Arc::new(shapes);
        *known = Some(Arc::clone(&shapes));
        Ok(shapes)
    }

    /// Key `name`'s shape from every member's version of it in `batches`
    /// (checked to agree: dtype, steps, every dimension but the last, mask
    /// kind), its last dimension the widest.
    fn key_shape(&self, name: &str, batches: &[Option<&crate::windows::WindowBatch>]) -> Result<KeyShape> {
        // `(member, dtype, shape, mask kind)` of each member's stream.
        let mut streams: Vec<(usize, DType, Vec<usize>, MaskKind)> = Vec::new();
        let mut constants: Vec<(usize, &[f64])> = Vec::new();
        for (m, (member, batch)) in self.members.iter().zip(batches).enumerate() {
            let (Some(key), Some(batch)) = (member.key(name), batch) else { continue };
            let stream = |own: &str| {
                batch
                    .stream(own)
                    .ok_or_else(|| invalid(format!("dataset `{}`: its batch has no stream `{own}`", member.name)))
            };
            match key {
                MemberKey::Stream(own) => {
                    let s = stream(own)?;
                    streams.push((m, s.data.dtype(), s.data.shape().to_vec(), s.mask_kind));
                }
                MemberKey::Concat(parts) => {
                    let Some(first) = parts.first() else { continue };
                    let s = stream(first)?;
                    let mut total = 0;
                    for own in parts {
                        total += last_width(stream(own)?.data.shape());
                    }
                    let mut shape = s.data.shape().to_vec();
                    if shape.len() > 2 {
                        let last = shape.len() - 1;
                        shape[last] = total;
                    } else {
                        shape.push(total);
                    }
                    streams.push((m, s.data.dtype(), shape, s.mask_kind));
                }
                MemberKey::Constant(values) => constants.push((m, values)),
            }
        }
        let (dtype, shape, kind, like) = match streams.first() {
            Some((_, dtype, shape, kind)) => {
                (*dtype, shape.clone(), *kind, Some((*dtype, shape.len(), shape[1], *kind)))
            }
            None => {
                // Only constants: f32 `[B, T, D]`, the steps and mask kind of
                // the first such member's streams.
                let Some(&(m, values)) = constants.first() else {
                    return Err(invalid(format!("stream `{name}`: no dataset of the mixture with windows has it")));
                };
                let first = batches[m].and_then(|b| b.streams.first()).ok_or_else(|| {
                    invalid(format!(
                        "dataset `{}`: stream `{name}`: a constant needs another stream's steps",
                        self.members[m].name
                    ))
                })?;
                let steps = first.data.shape().get(1).copied().unwrap_or(0);
                (DType::F32, vec![0, steps, values.len()], first.mask_kind, None)
            }
        };
        if shape.len() < 2 {
            return Err(invalid(format!("stream `{name}` has shape {shape:?}: [B, T, ...] expected")));
        }
        for (m, other_dtype, other, other_kind) in &streams[1.min(streams.len())..] {
            if *other_dtype != dtype || *other_kind != kind || body(other) != body(&shape) {
                let first = streams.first().map_or("", |(f, ..)| self.members[*f].name.as_str());
                return Err(invalid(format!(
                    "stream `{name}`: dataset `{}` gives {other_dtype} {:?} ({other_kind:?} masks), dataset `{first}` \
                     {dtype} {:?} ({kind:?}): the same dtype, steps and shape but for the last dimension are needed",
                    self.members[*m].name,
                    &other[1..],
                    &shape[1..],
                )));
            }
        }
        let widest = (streams.iter().map(|(_, _, shape, _)| last_width(shape)))
            .chain(constants.iter().map(|(_, values)| values.len()))
            .max()
            .unwrap_or(1);
        let steps = shape[1];
        let vector = shape.len() > 2;
        let inner: usize = if vector { shape[2..shape.len() - 1].iter().product() } else { 1 };
        let mut body = shape[1..].to_vec();
        if vector {
            let last = body.len() - 1;
            body[last] = widest;
        }
        Ok(KeyShape { dtype, kind, body, steps, inner, widest, like })
    }

    /// Key `name`'s parts in the members' batches `batches` ([`KeyParts`]):
    /// constants made as `shape` says, and a padding mask of `padding_rows`
    /// rows where a member lacks the key.
    fn key_parts<'s>(
        &'s self,
        name: &'s str,
        shape: &'s KeyShape,
        batches: &[Option<crate::windows::WindowBatch>],
        padding_rows: Option<usize>,
    ) -> Result<KeyParts<'s>> {
        let mut own = Vec::with_capacity(batches.len());
        for (member, batch) in self.members.iter().zip(batches) {
            own.push(match (member.key(name), batch) {
                (Some(MemberKey::Stream(stream)), Some(batch)) => Some(member_stream(member, batch, stream)?),
                (Some(MemberKey::Concat(streams)), Some(batch)) => {
                    Some(concatenated(&self.device, member, batch, name, streams)?)
                }
                (Some(MemberKey::Constant(values)), Some(batch)) => {
                    Some(constant_stream(&self.device, member, Some(batch), name, values, batch.len(), shape.like)?)
                }
                _ => None,
            });
        }
        let absent_padding = match padding_rows {
            Some(rows) if shape.kind == MaskKind::Pad => Some(Tensor::from_host_vec(
                &Device::cpu(),
                HostVec::Bool(vec![true; rows * shape.steps]),
                &[rows, shape.steps],
            )?),
            _ => None,
        };
        Ok(KeyParts { name, shape, own, absent_padding })
    }
}

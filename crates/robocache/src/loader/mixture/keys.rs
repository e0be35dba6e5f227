//! A mixture key across its datasets: its one shape (the widest last
//! dimension of every member's version), each member's part of a run of
//! batches (one of its streams, several side by side, or a constant), and
//! the plan of copies that puts every part's rows, zero padding and masks
//! into the mixture's batch.

use robocache_cpu::{DType, HostVec};

use super::member::MixtureMember;
use crate::loader::{invalid, MaskKind};
use crate::row_copies::RowsCopy;
use crate::{Device, Result, Tensor};

/// A dataset's version of a mixture stream, on the mixture's device:
/// `[B, T, ...]` data, its `[B, T]` step mask and the mask's kind.
#[derive(Debug)]
pub(super) struct PartStream {
    pub(super) data: Tensor,
    pub(super) mask: Tensor,
    pub(super) kind: MaskKind,
}

impl PartStream {
    pub(super) fn shape(&self) -> &[usize] {
        self.data.shape()
    }

    /// The last dimension (1 for `[B, T]`).
    pub(super) fn width(&self) -> usize {
        last_width(self.shape())
    }
}

/// A stream's last dimension: 1 for a `[B, T]` stream.
pub(super) fn last_width(shape: &[usize]) -> usize {
    if shape.len() > 2 {
        shape[shape.len() - 1]
    } else {
        1
    }
}

/// What a constant takes from the other datasets' version of its stream:
/// dtype, dimensions, steps and mask kind.
pub(super) type Like = (DType, usize, usize, MaskKind);

/// A mixture key's shape, the same in every batch whichever datasets it
/// draws: the dtype, mask kind and shape after the rows (`[T, ..., D]`,
/// `D` the widest of every member's last dimension) of the members'
/// versions, their steps, inner size (elements between a step and the last
/// dimension) and widest last dimension, and what a constant is shaped
/// like (the first member with a stream's; none where only constants give it).
#[derive(Clone, Debug)]
pub(super) struct KeyShape {
    pub(super) dtype: DType,
    pub(super) kind: MaskKind,
    pub(super) body: Vec<usize>,
    pub(super) steps: usize,
    pub(super) inner: usize,
    pub(super) widest: usize,
    pub(super) like: Option<Like>,
}

/// Key `name` of batches assembled together: its shape, each member's
/// part (its rows of every batch, one batch's after the other) and, where
/// a dataset lacks the key and masks mark padding, rows of `true` (on the
/// host; the copy puts a part of it where it goes).
pub(super) struct KeyParts<'s> {
    pub(super) name: &'s str,
    pub(super) shape: &'s KeyShape,
    pub(super) own: Vec<Option<PartStream>>,
    pub(super) absent_padding: Option<Tensor>,
}

impl KeyParts<'_> {
    /// The key in one batch of `rows` rows: `groups` its windows per
    /// member, `starts` where they start in each member's part. Each part
    /// is checked against the key's shape.
    pub(super) fn plan(
        &self,
        members: &[MixtureMember],
        groups: &[Vec<usize>],
        starts: &[usize],
        rows: usize,
    ) -> Result<MixPlan<'_>> {
        let (name, shape) = (self.name, self.shape);
        let mut found: Vec<Option<(&PartStream, usize)>> = Vec::with_capacity(groups.len());
        for ((part, group), &start) in self.own.iter().zip(groups).zip(starts) {
            found.push(part.as_ref().filter(|_| !group.is_empty()).map(|part| (part, start)));
        }
        let mut expected = vec![0];
        expected.extend(&shape.body);
        for ((member, entry), group) in members.iter().zip(&found).zip(groups) {
            let Some((part, _)) = entry else { continue };
            if part.data.dtype() != shape.dtype || part.kind != shape.kind || body(part.shape()) != body(&expected) {
                return Err(invalid(format!(
                    "stream `{name}`: dataset `{}` gives {} {:?} ({:?} masks), another {} {:?} ({:?}): the same \
                     dtype, steps and shape but for the last dimension are needed",
                    member.name,
                    part.data.dtype(),
                    batch_shape(part.shape(), group.len()),
                    part.kind,
                    shape.dtype,
                    batch_shape(&expected, rows),
                    shape.kind,
                )));
            }
        }
        let padding = self.absent_padding.as_ref();
        let groups = groups.iter().map(Vec::len).collect();
        Ok(MixPlan { name, found, groups, padding, shape, rows, out_shape: batch_shape(&expected, rows) })
    }
}

/// `shape` with `rows` rows.
pub(super) fn batch_shape(shape: &[usize], rows: usize) -> Vec<usize> {
    let mut shape = shape.to_vec();
    if let Some(first) = shape.first_mut() {
        *first = rows;
    }
    shape
}

/// Key `plan` of a mixture batch: the copies of each group's rows into the
/// zeroed outputs `data_at` (data) and `data_at + 1` (mask) at its place
/// (the steps of a dataset without the stream: its padding mask), and
/// its `dim_is_pad` rows.
pub(super) fn fill_copies<'a>(plan: &MixPlan<'a>, data_at: usize, copies: &mut Vec<RowsCopy<'a>>) -> Vec<bool> {
    let (steps, inner, widest) = (plan.shape.steps, plan.shape.inner, plan.shape.widest);
    let mut dim_is_pad = Vec::with_capacity(plan.rows * widest);
    let mut row = 0;
    for (&rows, entry) in plan.groups.iter().zip(&plan.found) {
        if rows == 0 {
            continue;
        }
        let mask = |from: &'a Tensor, from_row: usize| RowsCopy {
            from,
            from_row,
            rows: Some(rows),
            to: data_at + 1,
            width: steps,
            dest_width: steps,
            row,
            column: 0,
        };
        match entry {
            Some((part, start)) => {
                let width = part.width();
                copies.push(RowsCopy {
                    from: &part.data,
                    from_row: start * steps * inner,
                    rows: Some(rows * steps * inner),
                    to: data_at,
                    width,
                    dest_width: widest,
                    row: row * steps * inner,
                    column: 0,
                });
                copies.push(mask(&part.mask, *start));
                for _ in 0..rows {
                    dim_is_pad.extend((0..widest).map(|d| d >= width));
                }
            }
            None => {
                // A stream this dataset lacks: zeros, every step padding.
                if let Some(padding) = plan.padding {
                    copies.push(mask(padding, 0));
                }
                dim_is_pad.extend(std::iter::repeat_n(true, rows * widest));
            }
        }
        row += rows;
    }
    dim_is_pad
}

/// One key of one mixture batch, planned: per member its part and the
/// row its windows of this batch start at, and how many; the padding mask
/// of a dataset without the stream; the key's shape; the batch's rows and
/// the output's shape.
pub(super) struct MixPlan<'a> {
    pub(super) name: &'a str,
    pub(super) found: Vec<Option<(&'a PartStream, usize)>>,
    pub(super) groups: Vec<usize>,
    pub(super) padding: Option<&'a Tensor>,
    pub(super) shape: &'a KeyShape,
    pub(super) rows: usize,
    pub(super) out_shape: Vec<usize>,
}

/// A stream's steps and every dimension but the last (`[B, T]`: the steps).
pub(super) fn body(shape: &[usize]) -> Vec<usize> {
    if shape.len() > 2 {
        shape[1..shape.len() - 1].to_vec()
    } else {
        shape[1..].to_vec()
    }
}

/// One of a member's loader streams in its batch.
pub(super) fn member_stream(
    member: &MixtureMember,
    batch: &crate::windows::WindowBatch,
    own: &str,
) -> Result<PartStream> {
    let stream = batch
        .stream(own)
        .ok_or_else(|| invalid(format!("dataset `{}`: its batch has no stream `{own}`", member.name)))?;
    Ok(PartStream { data: stream.data.clone(), mask: stream.mask.clone(), kind: stream.mask_kind })
}

/// A member's streams `parts` side by side along the last dimension (see
/// [`MemberKey::Concat`]): the data on the device; the step masks combined
/// on the host (a wait for the device: concatenation is the slower key).
pub(super) fn concatenated(
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
pub(super) fn constant_stream(
    device: &Device,
    member: &MixtureMember,
    batch: Option<&crate::windows::WindowBatch>,
    name: &str,
    values: &[f64],
    rows: usize,
    like: Option<Like>,
) -> Result<PartStream> {
    let (dtype, steps, kind) = match like {
        Some((dtype, dims, steps, kind)) => {
            if dims > 3 {
                return Err(invalid(format!(
                    "dataset `{}`: stream `{name}` has {dims} dimensions in another dataset: a constant fills \
                     [B, T, D] only",
                    member.name
                )));
            }
            (dtype, steps, kind)
        }
        None => {
            let stream = batch.and_then(|b| b.streams.first()).ok_or_else(|| {
                invalid(format!("dataset `{}`: stream `{name}`: a constant needs another stream's steps", member.name))
            })?;
            (DType::F32, stream.data.shape()[1], stream.mask_kind)
        }
    };
    let row = constant_row(dtype, values).ok_or_else(|| {
        invalid(format!("dataset `{}`: stream `{name}`: the constant {values:?} does not fit {dtype}", member.name))
    })?;
    let data = robocache_cpu::with_host_data!(HostVec, &row, |v: T| {
        let all: Vec<T> = std::iter::repeat_n(v.clone(), rows * steps).flatten().collect();
        <T as robocache_cpu::Element>::vec(all)
    });
    let mask = vec![kind == MaskKind::Valid; rows * steps];
    Ok(PartStream {
        data: Tensor::from_host_vec(device, data, &[rows, steps, values.len()])?,
        mask: Tensor::from_host_vec(device, HostVec::Bool(mask), &[rows, steps])?,
        kind,
    })
}

/// `values` as one row of `dtype`, or none where a value does not fit it
/// exactly (a constant key's row: the mixture's batches and live windows).
pub(crate) fn constant_row(dtype: DType, values: &[f64]) -> Option<HostVec> {
    let template = HostVec::zeros(dtype, 0);
    robocache_cpu::with_host_data!(HostVec, &template, |v: T| {
        let _ = v;
        let row: Option<Vec<T>> = values.iter().map(|&x| <T as robocache_cpu::Element>::from_f64_exact(x)).collect();
        row.map(<T as robocache_cpu::Element>::vec)
    })
}

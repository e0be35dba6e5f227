//! A mixture member's live window: the mixture's streams made from the
//! member's own, as the mixture's batches make them
//! (`loader::mixture::keys`) — one of its streams or several side by side
//! along the last dimension (a step valid where every part's is), zeros up
//! to the widest last dimension with `dim_is_pad` true there, a constant
//! row valid at every step, or zeros and padding throughout for a stream
//! the member lacks.

use super::entry::{Entry, Part};
use super::{Live, MixedSource, MixedStream};
use crate::{Error, Result};

/// The mixture's streams of `live` from its own streams' entries `own`
/// (in `Live::streams` order).
pub(super) fn compose(live: &Live, own: Vec<Entry>) -> Result<Vec<Entry>> {
    let steps = match live.clock {
        super::Clock::Times(spec) => spec.history + 1,
        super::Clock::Deltas { .. } => {
            return Err(Error::Internal("a mixture member's live windows are time windows".into()));
        }
    };
    let mut own: Vec<Option<Entry>> = own.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(live.mixture.len());
    for mixed in &live.mixture {
        out.push(match &mixed.source {
            MixedSource::Absent => Entry {
                name: mixed.name.clone(),
                step_shape: mixed.step_shape.clone(),
                part: Part::Rows { dtype: mixed.dtype, bytes: vec![0; steps * step_bytes(mixed)] },
                valid: vec![false; steps],
                dims: Some(vec![true; mixed.width]),
            },
            MixedSource::Constant(row) => {
                let row = row.as_slice().as_bytes();
                let mut bytes = Vec::with_capacity(steps * step_bytes(mixed));
                for _ in 0..steps {
                    bytes.extend_from_slice(row);
                    bytes.resize(bytes.len() + step_bytes(mixed) - row.len(), 0);
                }
                let given = row.len() / mixed.dtype.size_in_bytes();
                Entry {
                    name: mixed.name.clone(),
                    step_shape: mixed.step_shape.clone(),
                    part: Part::Rows { dtype: mixed.dtype, bytes },
                    valid: vec![true; steps],
                    dims: Some((0..mixed.width).map(|d| d >= given).collect()),
                }
            }
            MixedSource::Streams(parts) => side_by_side(mixed, parts, &mut own, steps)?,
        });
    }
    Ok(out)
}

/// Bytes of one step of `mixed`.
fn step_bytes(mixed: &MixedStream) -> usize {
    mixed.step_shape.iter().product::<usize>() * mixed.dtype.size_in_bytes()
}

/// The member's streams `parts` side by side along the last dimension,
/// padded with zeros to the mixture's width.
fn side_by_side(mixed: &MixedStream, parts: &[usize], own: &mut [Option<Entry>], steps: usize) -> Result<Entry> {
    let error = |problem: String| Error::Live { stream: mixed.name.clone(), problem };
    let entry =
        |i: usize| own.get(i).and_then(Option::as_ref).ok_or_else(|| error(format!("its part {i} is not kept")));
    // A camera (one part, on the device): as it is, when the mixture's shape is its own.
    if let [only] = parts {
        if let Part::Tensor(tensor) = &entry(*only)?.part {
            let mut shape = vec![1, steps];
            shape.extend(&mixed.step_shape);
            if tensor.shape() != shape.as_slice() {
                return Err(error(format!(
                    "its frames are {:?}, the mixture's {shape:?}: a camera of another size than the mixture's",
                    tensor.shape()
                )));
            }
            let taken = own[*only].take().ok_or_else(|| error("its frames were taken twice".into()))?;
            return Ok(Entry { name: mixed.name.clone(), dims: Some(vec![false; mixed.width]), ..taken });
        }
    }
    let size = mixed.dtype.size_in_bytes();
    let inner: usize = mixed.step_shape[..mixed.step_shape.len().saturating_sub(1)].iter().product();
    let mut rows: Vec<(&[u8], usize)> = Vec::with_capacity(parts.len());
    let mut valid = vec![true; steps];
    for &part in parts {
        let part = entry(part)?;
        let Part::Rows { dtype, bytes } = &part.part else {
            return Err(error(format!("`{}` is a camera, concatenated", part.name)));
        };
        let per_step = bytes.len() / steps.max(1);
        if *dtype != mixed.dtype
            || per_step * steps != bytes.len()
            || !per_step.is_multiple_of(inner * size)
            || part.valid.len() != steps
        {
            return Err(error(format!(
                "`{}` gives {dtype} steps of {per_step} bytes, the mixture {} [.., {inner}, D]",
                part.name, mixed.dtype
            )));
        }
        rows.push((bytes, per_step / (inner * size)));
        for (v, p) in valid.iter_mut().zip(&part.valid) {
            *v &= p;
        }
    }
    let total: usize = rows.iter().map(|(_, width)| width).sum();
    if total > mixed.width {
        return Err(error(format!("its parts are {total} wide, the mixture {}", mixed.width)));
    }
    let mut bytes = Vec::with_capacity(steps * inner * mixed.width * size);
    for t in 0..steps {
        for i in 0..inner {
            for (part, width) in &rows {
                let at = (t * inner + i) * width * size;
                bytes.extend_from_slice(&part[at..at + width * size]);
            }
            bytes.resize(bytes.len() + (mixed.width - total) * size, 0);
        }
    }
    Ok(Entry {
        name: mixed.name.clone(),
        step_shape: mixed.step_shape.clone(),
        part: Part::Rows { dtype: mixed.dtype, bytes },
        valid,
        dims: Some((0..mixed.width).map(|d| d >= total).collect()),
    })
}

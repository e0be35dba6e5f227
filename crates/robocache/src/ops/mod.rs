//! The operations on a [`Device`](crate::Device), one module each; this module
//! holds the conversions from tensors to the CPU reference's borrowed inputs.

pub(crate) mod augment;
pub(crate) mod descriptors;
mod frames;
mod fusion;
mod resample;
mod voxelize;

use descriptors::{expect_rank, expect_time_tensor};
pub use descriptors::{
    CropBox, FrameDType, FrameLayout, FrameOutput, FrameResize, Fused, FusionStreamInput, Resampled, StreamInput,
    TargetTimes, TimeAxis, VoxelInput, VoxelOutput,
};

use robocache_cpu::{HostSlice, Times};

use crate::{Result, Tensor};

/// An `f64` time tensor `[L]` (shared) or `[B, L]` (per row) as [`Times`].
fn host_times<'a>(what: &str, tensor: &'a Tensor) -> Result<Times<'a>> {
    expect_time_tensor(what, tensor)?;
    let HostSlice::F64(times) = tensor.host_slice() else { unreachable!("dtype checked above") };
    Ok(if tensor.shape().len() == 1 { Times::Shared(times) } else { Times::PerRow(times) })
}

/// The values of an integer tensor of any integer dtype, widened to `i128`
/// (which holds every u64 and i64); other dtypes are a dtype mismatch.
pub(crate) fn integer_values(what: &str, tensor: &Tensor) -> Result<Vec<i128>> {
    macro_rules! widen {
        ($v:expr) => {
            $v.iter().map(|&x| i128::from(x)).collect()
        };
    }
    Ok(match tensor.host_slice() {
        HostSlice::U8(v) => widen!(v),
        HostSlice::U16(v) => widen!(v),
        HostSlice::U32(v) => widen!(v),
        HostSlice::U64(v) => widen!(v),
        HostSlice::I8(v) => widen!(v),
        HostSlice::I16(v) => widen!(v),
        HostSlice::I32(v) => widen!(v),
        HostSlice::I64(v) => widen!(v),
        other => {
            return Err(robocache_cpu::Error::DTypeMismatch {
                what: what.to_owned(),
                expected: "an integer dtype".into(),
                actual: other.dtype(),
            }
            .into())
        }
    })
}

/// Valid lengths `[B]` of any integer dtype as `usize`; negative values are
/// reported as bad lengths of their row.
fn host_lengths(what: &str, tensor: &Tensor, samples: usize) -> Result<Vec<usize>> {
    expect_rank(what, tensor, &[1], "[B]")?;
    let bad = |row: usize, length: u64| robocache_cpu::Error::BadLength { what: what.to_owned(), row, length, samples };
    let lengths = integer_values(what, tensor)?
        .into_iter()
        .enumerate()
        .map(|(row, n)| usize::try_from(n).map_err(|_| bad(row, u64::try_from(n).unwrap_or(0))))
        .collect::<Result<Vec<usize>, _>>()?;
    Ok(lengths)
}

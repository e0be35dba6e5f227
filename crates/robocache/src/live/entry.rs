//! One stream of a live window between its computation (`window`) and its
//! place on the device: its data (rows, frames, or a tensor already there),
//! each step's validity and, for a mixture's stream (`mixed`), its
//! `dim_is_pad` row.

use robocache_cpu::DType;

use crate::Tensor;

/// One stream's part of a window, before it is placed on the device.
pub(super) enum Part {
    /// `T` rows of bytes in `dtype`.
    Rows { dtype: DType, bytes: Vec<u8> },
    /// `T` frames (`None`: the padding frame), stacked before placing.
    Frames(Vec<Option<Tensor>>),
    /// The data `[1, T, ...]`, already on the device (stacked frames).
    Tensor(Tensor),
}

/// One stream of a window, ready to place: its name, one step's shape (of
/// rows), its data, each step's validity and, for a mixture's stream, its
/// `dim_is_pad` row.
pub(super) struct Entry {
    pub name: String,
    pub step_shape: Vec<usize>,
    pub part: Part,
    pub valid: Vec<bool>,
    pub dims: Option<Vec<bool>>,
}

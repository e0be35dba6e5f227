//! What a batch assembly takes and returns: the window shape, the resident
//! streams (episodes concatenated on a device, with their table) and one
//! stream of a batch. The loader builds these; the backends (the CPU
//! reference in `loader::resident`, the CUDA kernel in `cuda::assemble`) see
//! only them, so the CUDA backend does not import the loader or the windows.

use robocache_cpu::ChannelSpec;

use robocache_cpu::HostVec;

use crate::{Device, Result, Tensor};

/// How each window of a batch is cut.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WindowShape {
    /// robomimic step windows: rows `anchor - history … anchor - history + len - 1`, edges repeated.
    Steps { history: usize, len: usize },
    /// Targets `anchor + (k - history) / hz`, `k < len`; `causal`: values
    /// held from samples at or before each target
    /// ([`robocache_datasets::TimeWindowSpec::causal`]).
    Times { hz: f64, history: usize, len: usize, causal: bool },
}

impl WindowShape {
    /// Steps or targets per window.
    pub fn len(&self) -> usize {
        match self {
            WindowShape::Steps { len, .. } | WindowShape::Times { len, .. } => *len,
        }
    }

    /// True for windows of no steps (never built by the loader).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Causal time windows.
    pub fn is_causal(&self) -> bool {
        matches!(self, WindowShape::Times { causal: true, .. })
    }

    /// The channels' methods a window of this shape resamples a stream by
    /// ([`window_methods`]).
    pub(crate) fn channel_spec(&self, kinds: &ChannelSpec) -> ChannelSpec {
        window_methods(kinds, self.is_causal())
    }

    pub(crate) fn history(&self) -> usize {
        match self {
            WindowShape::Steps { history, .. } | WindowShape::Times { history, .. } => *history,
        }
    }
}

/// The channels' methods a time window resamples a stream by: the
/// stream's own (`kinds`), or, causal, `Previous` for every channel. The
/// resident assembly, the streamed time windows and the live windows all
/// take them from here.
pub(crate) fn window_methods(kinds: &ChannelSpec, causal: bool) -> ChannelSpec {
    match causal {
        true => ChannelSpec::All(robocache_cpu::Method::Previous),
        false => kinds.clone(),
    }
}

/// Where one episode of a resident stream lives.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ResidentEpisode {
    pub row_offset: usize,
    pub rows: usize,
    /// Uniform `(start, hz)`, or `None` for explicit times at `row_offset` in the times tensor.
    pub uniform: Option<(f64, f64)>,
}

/// One resident stream.
#[derive(Debug)]
pub(crate) struct ResidentStream {
    pub name: String,
    pub step_shape: Vec<usize>,
    pub channels: usize,
    pub channel_spec: ChannelSpec,
    pub episodes: Vec<ResidentEpisode>,
    /// `[rows_total, channels]` f32 on the device.
    pub data: Tensor,
    /// `[rows_total]` f64 explicit times (zeros for uniform episodes), when any episode has them.
    pub times: Option<Tensor>,
    /// The episode table in the kernel's layout, on the device (CUDA only).
    pub table: Option<Tensor>,
}

/// What a batch stream's mask marks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaskKind {
    /// `true` where the step is real: inside its episode (step windows) or
    /// inside the stream's time range (time windows).
    #[default]
    Valid,
    /// `true` where the step is padding, the opposite: LeRobot's
    /// `{stream}_is_pad`, written as such by the assembly (no pass over the
    /// masks afterwards).
    Pad,
}

/// One batch for a backend to assemble from resident streams.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AssemblyRequest<'a> {
    pub shape: WindowShape,
    /// `(episode, anchor)` of each window.
    pub samples: &'a [(usize, f64)],
    pub masks: MaskKind,
    /// `i64 [3, B]`, row by row: the sample ids, the episode ids and the
    /// anchors' `f64` bits; placed on the device with the batch.
    pub columns: &'a [i64],
}

/// An assembled batch of resident streams and its columns on the device.
#[derive(Debug)]
pub(crate) struct Assembled {
    pub streams: Vec<BatchStream>,
    /// `i64 [3, B]`: [`AssemblyRequest::columns`] on the batch's device.
    pub columns: Tensor,
}

/// One stream of a batch.
#[derive(Clone, Debug)]
pub struct BatchStream {
    /// The stream's name in the dataset.
    pub name: String,
    /// `[B, T, ...step_shape]` in the stream's dtype.
    pub data: Tensor,
    /// `[B, T]` bool, marking what [`BatchStream::mask_kind`] says: the steps
    /// that are real (step windows: inside the episode; time windows: the
    /// target inside the stream's time range), or the steps that are padding.
    pub mask: Tensor,
    pub mask_kind: MaskKind,
}

impl BatchStream {
    /// A stream of `windows` windows of `steps` steps whose mask (`kind`)
    /// was built on the host, put on `device`.
    pub(crate) fn with_host_mask(
        device: &Device,
        name: &str,
        data: Tensor,
        mask: Vec<bool>,
        [windows, steps]: [usize; 2],
        kind: MaskKind,
    ) -> Result<Self> {
        let mask = Tensor::from_host_vec(device, HostVec::Bool(mask), &[windows, steps])?;
        Ok(BatchStream { name: name.to_owned(), data, mask, mask_kind: kind })
    }
}

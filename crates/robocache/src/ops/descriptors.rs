//! What an operation takes and returns, and the checks every backend makes
//! of it: the descriptors the CPU and CUDA backends both see. They sit below
//! the operations' dispatch (`ops::resample` and its siblings) and the CUDA
//! backend, so that neither imports the other's module.

use robocache_cpu::{DType, ResampleSpec};
use robocache_video::ResizePlan;
pub use robocache_video::{CropBox, FrameResize};

use crate::{Device, Error, Result, Tensor};

/// The times of a stream: an `f64` tensor (`[S]` shared or `[B, S]` per row)
/// or a uniform rate.
#[derive(Clone, Copy, Debug)]
pub enum TimeAxis<'a> {
    Tensor(&'a Tensor),
    /// Sample `i` at `start + i / hz`.
    Uniform {
        start: f64,
        hz: f64,
    },
}

/// The target times: an `f64` tensor (`[T]` shared or `[B, T]` per row) or
/// `len` uniform targets.
#[derive(Clone, Copy, Debug)]
pub enum TargetTimes<'a> {
    Tensor(&'a Tensor),
    /// Target `k` at `start + k / hz`, `k < len`.
    Uniform {
        start: f64,
        hz: f64,
        len: usize,
    },
}

/// A stream on a device: data `[B, S, D]`, its times and optional valid
/// lengths `[B]` (any integer dtype).
#[derive(Clone, Copy, Debug)]
pub struct StreamInput<'a> {
    pub data: &'a Tensor,
    pub times: TimeAxis<'a>,
    pub lengths: Option<&'a Tensor>,
}

impl<'a> StreamInput<'a> {
    /// A stream whose rows are all valid.
    pub fn new(data: &'a Tensor, times: TimeAxis<'a>) -> Self {
        StreamInput { data, times, lengths: None }
    }

    /// Sets the valid lengths.
    pub fn with_lengths(mut self, lengths: &'a Tensor) -> Self {
        self.lengths = Some(lengths);
        self
    }
}

/// Resampled data `[B, T, D]` (the input's dtype) and the valid mask `[B, T]` (bool).
#[derive(Clone, Debug)]
pub struct Resampled {
    pub data: Tensor,
    pub valid: Tensor,
}

/// One stream of a fusion and how to resample it.
#[derive(Clone, Debug)]
pub struct FusionStreamInput<'a> {
    pub stream: StreamInput<'a>,
    pub spec: ResampleSpec,
}

/// The fused output `[B, T, ΣD_k]`, one valid mask per stream `[K, B, T]`
/// (bool), and each stream's first channel (`offsets[k]..offsets[k + 1]`).
#[derive(Clone, Debug)]
pub struct Fused {
    pub data: Tensor,
    pub valid: Tensor,
    pub offsets: Vec<usize>,
}

/// Points `[N, 3]` f32, optional features `[N, F]` f32, optional cloud index
/// `[N]` (any integer dtype) with the number of clouds.
#[derive(Clone, Copy, Debug)]
pub struct VoxelInput<'a> {
    pub points: &'a Tensor,
    pub features: Option<&'a Tensor>,
    pub clouds: Option<(&'a Tensor, usize)>,
}

/// The grid (`[B, X, Y, Z]`: u8 occupancy or u32 counts; `[B, X, Y, Z, F]`
/// f32 for mean and max), the counts for mean, and the number of dropped
/// points (`[1]` u64, on the device like the grid: reading it with
/// [`VoxelOutput::dropped_count`] is a wait on a GPU, so the call itself never
/// waits).
#[derive(Clone, Debug)]
pub struct VoxelOutput {
    pub grid: Tensor,
    pub counts: Option<Tensor>,
    pub dropped: Tensor,
}

impl VoxelOutput {
    /// The number of points outside the grid or with a non-finite coordinate
    /// (waits for the voxelization on a GPU).
    pub fn dropped_count(&self) -> Result<u64> {
        Ok(self.dropped.to_vec::<u64>()?.first().copied().unwrap_or(0))
    }
}

impl VoxelInput<'_> {
    /// The checks every backend makes of a voxelization's tensors: all on
    /// `device`, points `[N, 3]` f32, features `[N, F]` f32, cloud index `[N]`.
    /// Returns `F` (0 without features).
    pub(crate) fn checked_feature_len(&self, device: &Device) -> Result<usize> {
        device.expect_same("points", self.points.device())?;
        expect_rank("points", self.points, &[2], "[N, 3]")?;
        if self.points.shape()[1] != 3 {
            return Err(Error::Rank {
                what: "points".into(),
                expected: "[N, 3]".into(),
                shape: self.points.shape().to_vec(),
            });
        }
        expect_dtype("points", self.points, DType::F32)?;
        let feature_len = match self.features {
            Some(features) => {
                device.expect_same("features", features.device())?;
                expect_rank("features", features, &[2], "[N, F]")?;
                expect_dtype("features", features, DType::F32)?;
                features.shape()[1]
            }
            None => 0,
        };
        if let Some((clouds, _)) = self.clouds {
            device.expect_same("cloud index", clouds.device())?;
            expect_rank("cloud index", clouds, &[1], "[N]")?;
        }
        Ok(feature_len)
    }
}

/// How [`Device::yuv420_to_rgb`] lays out a frame's RGB values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FrameLayout {
    /// `[H, W, 3]`, channels last: as decoders and LeRobot's stored images.
    #[default]
    Hwc,
    /// `[3, H, W]`, channels first: as LeRobot's batches and torchvision.
    Chw,
}

/// What camera frames become: their layout, their dtype (`U8` levels, or
/// `F32` levels divided by 255, LeRobot's float frames) and, optionally, a
/// crop and resize ([`FrameResize`], Pillow's bilinear resize of the crop;
/// docs/semantics.md) applied to the 8-bit RGB frames before the layout
/// and dtype.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FrameOutput {
    pub layout: FrameLayout,
    pub dtype: FrameDType,
    pub resize: Option<FrameResize>,
}

/// The dtype of converted frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FrameDType {
    /// Levels 0..=255.
    #[default]
    U8,
    /// Levels divided by 255 (IEEE division, round to nearest): in [0, 1].
    F32,
}

impl FrameDType {
    /// The tensor dtype.
    pub fn dtype(self) -> DType {
        match self {
            FrameDType::U8 => DType::U8,
            FrameDType::F32 => DType::F32,
        }
    }
}

impl FrameOutput {
    /// The shape of `frames` source frames of `width × height` once output
    /// (resized when [`Self::resize`] says so).
    pub fn shape(self, frames: usize, width: usize, height: usize) -> Vec<usize> {
        let (width, height) = self.resize.map_or((width, height), |r| (r.width, r.height));
        match self.layout {
            FrameLayout::Hwc => vec![frames, height, width, 3],
            FrameLayout::Chw => vec![frames, 3, height, width],
        }
    }
}

/// The checks of a [`Device::convert_frames`] call: `u8 [N, H, W, 3]` on
/// `device`, and a resize, if any, that applies to `W × H` frames (its
/// plan, which both backends follow).
pub(crate) fn check_rgb_frames(device: &Device, frames: &Tensor, output: &FrameOutput) -> Result<Option<ResizePlan>> {
    device.expect_same("RGB frames", frames.device())?;
    expect_rank("RGB frames", frames, &[4], "[N, H, W, 3] (8-bit RGB frames)")?;
    let shape = frames.shape();
    if shape[3] != 3 {
        return Err(Error::Rank {
            what: "RGB frames".into(),
            expected: "[N, H, W, 3] (8-bit RGB frames)".into(),
            shape: shape.to_vec(),
        });
    }
    expect_dtype("RGB frames", frames, DType::U8)?;
    let (width, height) = (shape[2], shape[1]);
    if width.checked_mul(height).is_none_or(|pixels| pixels > u32::MAX as usize) {
        return Err(Error::Limit {
            what: format!("{width}x{height} frames"),
            limit: "a frame converts on a device when it has fewer than 2^32 pixels".into(),
        });
    }
    output.resize.map(|resize| resize_plan(&resize, width, height)).transpose()
}

/// The checks every backend makes of a [`Device::stack_frames`] call: at
/// least one pick; each pick's tensor `u8 [N, H, W, 3]` on `device`, of the
/// first pick's `H` and `W`, and its index below `N`; fewer than 2³² pixels
/// a frame. Gives `(width, height)`.
pub(crate) fn check_frame_picks(device: &Device, picks: &[(&Tensor, usize)]) -> Result<(usize, usize)> {
    let Some(&(first, _)) = picks.first() else {
        return Err(robocache_cpu::Error::Empty {
            what: "frames to stack".into(),
            reason: "at least one frame is needed (its size is the batch's)".into(),
        }
        .into());
    };
    let plan = check_rgb_frames(device, first, &FrameOutput::default())?;
    debug_assert!(plan.is_none());
    let (width, height) = (first.shape()[2], first.shape()[1]);
    for (pick, &(tensor, index)) in picks.iter().enumerate() {
        let what = || format!("frames to stack, pick {pick}");
        if !std::ptr::eq(tensor, first) {
            device.expect_same(&what(), tensor.device())?;
            expect_dtype(&what(), tensor, DType::U8)?;
            let shape = tensor.shape();
            if shape.len() != 4 || shape[1] != height || shape[2] != width || shape[3] != 3 {
                return Err(Error::Rank {
                    what: what(),
                    expected: format!("[N, {height}, {width}, 3] (8-bit RGB frames of the first pick's size)"),
                    shape: shape.to_vec(),
                });
            }
        }
        let frames = tensor.shape()[0];
        if index >= frames {
            return Err(Error::FrameIndex { what: what(), index, frames });
        }
    }
    Ok((width, height))
}

/// The plan of `resize` for `width × height` frames, or what is wrong with it.
pub(crate) fn resize_plan(resize: &FrameResize, width: usize, height: usize) -> Result<ResizePlan> {
    let plan = resize
        .plan(width, height)
        .map_err(|problem| Error::Resize { what: format!("resize of {width}x{height} frames"), problem })?;
    let (out_width, out_height) = plan.output;
    if out_width.checked_mul(out_height).is_none_or(|pixels| pixels > u32::MAX as usize) {
        return Err(Error::Limit {
            what: format!("{out_width}x{out_height} frames"),
            limit: "a frame converts on a device when it has fewer than 2^32 pixels".into(),
        });
    }
    Ok(plan)
}

/// The checks every backend makes of a [`Device::yuv420_to_rgb`] call: the
/// planes `u8 [N, yuv420_len(width, height)]` on `device`, a frame of at
/// least one pixel and fewer than 2³² (the kernel's pixel index).
pub(crate) fn check_yuv_frames(device: &Device, planes: &Tensor, width: usize, height: usize) -> Result<()> {
    device.expect_same("YUV frames", planes.device())?;
    let frame_bytes = robocache_video::yuv420_len(width, height);
    let expected = format!("[N, {frame_bytes}] (YUV 4:2:0 planes of {width}x{height} frames)");
    expect_rank("YUV frames", planes, &[2], &expected)?;
    if planes.shape()[1] != frame_bytes {
        return Err(Error::Rank { what: "YUV frames".into(), expected, shape: planes.shape().to_vec() });
    }
    expect_dtype("YUV frames", planes, DType::U8)?;
    if width == 0 || height == 0 {
        return Err(robocache_cpu::Error::Empty {
            what: "frame size".into(),
            reason: format!("{width}x{height} frames have no pixels"),
        }
        .into());
    }
    if width.checked_mul(height).is_none_or(|pixels| pixels > u32::MAX as usize) {
        return Err(Error::Limit {
            what: format!("{width}x{height} frames"),
            limit: "a frame converts on a device when it has fewer than 2^32 pixels".into(),
        });
    }
    Ok(())
}

/// Checks the rank of a tensor.
pub(crate) fn expect_rank(what: &str, tensor: &Tensor, ranks: &[usize], expected: &str) -> Result<()> {
    if ranks.contains(&tensor.shape().len()) {
        Ok(())
    } else {
        Err(Error::Rank { what: what.to_owned(), expected: expected.to_owned(), shape: tensor.shape().to_vec() })
    }
}

/// Checks the dtype of a tensor.
pub(crate) fn expect_dtype(what: &str, tensor: &Tensor, dtype: DType) -> Result<()> {
    if tensor.dtype() == dtype {
        Ok(())
    } else {
        Err(robocache_cpu::Error::DTypeMismatch {
            what: what.to_owned(),
            expected: dtype.to_string(),
            actual: tensor.dtype(),
        }
        .into())
    }
}

/// Checks that a time tensor is `f64`, `[L]` (shared) or `[B, L]` (per row).
pub(crate) fn expect_time_tensor(what: &str, tensor: &Tensor) -> Result<()> {
    expect_rank(what, tensor, &[1, 2], "[L] (shared) or [B, L] (per row)")?;
    expect_dtype(what, tensor, DType::F64)
}

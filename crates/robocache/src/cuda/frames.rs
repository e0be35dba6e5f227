//! Camera frames on the device (see `kernels/video.cu`): decoded YUV to RGB,
//! one `yuv420_to_rgb` launch for a batch of frames; RGB frames cropped,
//! resized and laid out, a `resize_rows` and a `resize_columns` launch;
//! frames picked from several tensors stacked into a batch, a `gather_rgb`
//! launch.

use robocache_cpu::HostVec;
use robocache_cuda::abi::{DTypeCode, FrameArgs, FrameLayout as LayoutCode, GatherArgs, ResizeArgs};
use robocache_cuda::{entry, LaunchConfig};
use robocache_video::{ResizePlan, ResizeTaps};

use super::backend::{CudaDevice, DeviceStorage};
use super::error::cuda_error;
use super::resample::device_pointer;
use crate::ops::descriptors::{FrameDType, FrameLayout, FrameOutput};
use crate::{Device, Error, Result, Tensor};

/// Threads of a block: a pixel each.
const THREADS: u32 = 256;

impl CudaDevice {
    /// [`Device::yuv420_to_rgb`] on this device; the input is checked by the
    /// caller (`u8 [N, yuv420_len]`, fewer than 2³² pixels a frame).
    pub(super) fn run_yuv420_to_rgb(
        &self,
        device: &Device,
        planes: &Tensor,
        width: usize,
        height: usize,
        output: FrameOutput,
    ) -> Result<Tensor> {
        let frames = planes.shape()[0];
        let dtype = output.dtype.dtype();
        let shape = output.shape(frames, width, height);
        let out_bytes = frames * width * height * 3 * dtype.size_in_bytes();
        self.keep_frames_memory(out_bytes)?;
        let out = self.alloc(out_bytes)?;
        if frames > 0 {
            let config = frame_slots(frames, width * height)?;
            let args = FrameArgs {
                planes: device_pointer(planes),
                out: out.device_pointer(),
                frames: frames as u64,
                frame_bytes: planes.shape()[1] as u64,
                width: width as u32,
                height: height as u32,
                layout: layout_code(output.layout),
                dtype: dtype_code(output.dtype),
            };
            // SAFETY: `planes` is a live device tensor of `frames × frame_bytes`
            // bytes (checked by the caller), `out` a new allocation of every
            // output element; the grid is a whole number of frames' blocks, as
            // the kernel assumes. Both stay alive through the launch in stream
            // order (a dropped buffer is freed in stream order).
            unsafe { self.context.launch(entry::Yuv420ToRgb, config, (args,)) }.map_err(cuda_error)?;
        }
        Ok(Tensor::on_device(device, DeviceStorage::new(out), dtype, shape))
    }
}

impl CudaDevice {
    /// [`Device::convert_frames`] on this device; the input is checked and
    /// the resize planned by the caller (`u8 [N, H, W, 3]`, fewer than 2³²
    /// pixels a frame before and after).
    pub(super) fn run_convert_frames(
        &self,
        device: &Device,
        frames: &Tensor,
        resize: Option<&ResizePlan>,
        output: FrameOutput,
    ) -> Result<Tensor> {
        let shape = frames.shape();
        let (count, width, height) = (shape[0], shape[2], shape[1]);
        if width > i32::MAX as usize || height > i32::MAX as usize {
            return Err(Error::Limit {
                what: format!("{width}x{height} frames"),
                limit: "a frame converts on a device when each side is below 2^31 pixels".into(),
            });
        }
        if let Some(plan) = resize {
            if plan.rows.len().checked_mul(plan.output.0).is_none_or(|pixels| pixels > u32::MAX as usize) {
                return Err(Error::Limit {
                    what: format!("{width}x{height} frames resized to {}x{}", plan.output.0, plan.output.1),
                    limit: "the row pass of a resize on a device writes fewer than 2^32 pixels a frame".into(),
                });
            }
        }
        let out_shape = output.shape(count, width, height);
        let dtype = output.dtype.dtype();
        let out_bytes = out_shape.iter().product::<usize>() * dtype.size_in_bytes();
        self.keep_frames_memory(out_bytes + resize.map_or(0, |plan| count * plan.intermediate_len()))?;
        let out = self.alloc(out_bytes)?;
        if count == 0 {
            return Ok(Tensor::on_device(device, DeviceStorage::new(out), dtype, out_shape));
        }
        let Some(plan) = resize else {
            // The layout and dtype alone.
            let per_thread = pixels_per_thread(width * height, &[device_pointer(frames)], out.device_pointer());
            let args = ResizeArgs {
                src: device_pointer(frames),
                out: out.device_pointer(),
                table: 0,
                frames: count as u64,
                in_width: width as u32,
                in_rows: height as u32,
                out_width: width as u32,
                out_rows: height as u32,
                taps: 0,
                first_row: 0,
                layout: layout_code(output.layout),
                dtype: dtype_code(output.dtype),
                pixels_per_thread: per_thread as u32,
            };
            let config = frame_slots(count, width * height / per_thread)?;
            // SAFETY: `frames` is a live `u8 [count, height, width, 3]` tensor
            // (checked by the caller), `out` a new allocation of every output
            // element; both stay alive through the launch in stream order.
            unsafe { self.context.launch(entry::RgbLayout, config, (args,)) }.map_err(cuda_error)?;
            return Ok(Tensor::on_device(device, DeviceStorage::new(out), dtype, out_shape));
        };
        // Both passes' tables in one upload: the rows', then the columns'
        // (their first rows counted from the first row the row pass writes).
        let (across, down) = (&plan.horizontal, &plan.vertical);
        let mut table: Vec<i32> =
            Vec::with_capacity(across.outputs() * (2 + across.taps) + down.outputs() * (2 + down.taps));
        append_taps(&mut table, across, 0);
        let down_at = table.len();
        append_taps(&mut table, down, plan.rows.start);
        let entries = table.len();
        let table = Tensor::from_host_vec(device, HostVec::I32(table), &[entries])?;
        let table_at = |index: usize| device_pointer(&table) + 4 * index as u64;
        let ((out_width, out_height), rows) = (plan.output, plan.rows.len());
        let intermediate = self.alloc(count * plan.intermediate_len())?;
        let args = ResizeArgs {
            src: device_pointer(frames),
            out: intermediate.device_pointer(),
            table: table_at(0),
            frames: count as u64,
            in_width: width as u32,
            in_rows: height as u32,
            out_width: out_width as u32,
            out_rows: rows as u32,
            taps: across.taps as u32,
            first_row: plan.rows.start as u32,
            layout: LayoutCode::Hwc,
            dtype: DTypeCode::U8,
            pixels_per_thread: 1,
        };
        let config = frame_slots(count, out_width * rows)?;
        // SAFETY: `frames` is a live `u8 [count, height, width, 3]` tensor
        // (checked by the caller); the table's first positions and counts stay
        // inside each source row and the rows inside each frame (the plan's);
        // `intermediate` holds `count × rows × out_width × 3` bytes. All stay
        // alive through the launch in stream order.
        unsafe { self.context.launch(entry::ResizeRows, config, (args,)) }.map_err(cuda_error)?;
        let args = ResizeArgs {
            src: intermediate.device_pointer(),
            out: out.device_pointer(),
            table: table_at(down_at),
            frames: count as u64,
            in_width: out_width as u32,
            in_rows: rows as u32,
            out_width: out_width as u32,
            out_rows: out_height as u32,
            taps: down.taps as u32,
            first_row: 0,
            layout: layout_code(output.layout),
            dtype: dtype_code(output.dtype),
            pixels_per_thread: 1,
        };
        let config = frame_slots(count, out_width * out_height)?;
        // SAFETY: `intermediate` holds `count × rows × out_width × 3` bytes,
        // and the columns' table reads rows inside `rows` (shifted by the
        // first row the row pass wrote); `out` holds every output element.
        // All stay alive through the launch in stream order (a dropped buffer
        // is freed in stream order).
        unsafe { self.context.launch(entry::ResizeColumns, config, (args,)) }.map_err(cuda_error)?;
        Ok(Tensor::on_device(device, DeviceStorage::new(out), dtype, out_shape))
    }
}

impl CudaDevice {
    /// [`Device::stack_frames`] on this device; the picks are checked by the
    /// caller (u8 `[height, width, 3]` frames of live tensors on this
    /// device, fewer than 2³² pixels a frame). One `gather_rgb` launch reads
    /// each output frame from its source's address.
    pub(super) fn run_stack_frames(
        &self,
        device: &Device,
        picks: &[(&Tensor, usize)],
        width: usize,
        height: usize,
        output: FrameOutput,
    ) -> Result<Tensor> {
        let count = picks.len();
        let pixels = width * height;
        let out_shape = output.shape(count, width, height);
        let dtype = output.dtype.dtype();
        let out_bytes = count * pixels * 3 * dtype.size_in_bytes();
        self.keep_frames_memory(out_bytes)?;
        let out = self.alloc(out_bytes)?;
        if count == 0 {
            return Ok(Tensor::on_device(device, DeviceStorage::new(out), dtype, out_shape));
        }
        let sources: Vec<u64> =
            picks.iter().map(|&(tensor, index)| device_pointer(tensor) + (index * pixels * 3) as u64).collect();
        let per_thread = pixels_per_thread(pixels, &sources, out.device_pointer());
        let sources = Tensor::from_host_vec(device, HostVec::U64(sources), &[count])?;
        let args = GatherArgs {
            sources: device_pointer(&sources),
            out: out.device_pointer(),
            frames: count as u64,
            pixels: pixels as u32,
            pixels_per_thread: per_thread as u32,
            layout: layout_code(output.layout),
            dtype: dtype_code(output.dtype),
        };
        let config = frame_slots(count, pixels / per_thread)?;
        // SAFETY: every source address is frame `index` of a live u8
        // `[N, height, width, 3]` tensor on this device with `index < N`
        // (checked by the caller), so each reads `pixels × 3` bytes inside
        // it; `out` is a new allocation of every output element. The tensors
        // the picks borrow, the address table and `out` stay alive through
        // the launch in stream order (a dropped buffer is freed in stream
        // order).
        unsafe { self.context.launch(entry::GatherRgb, config, (args,)) }.map_err(cuda_error)?;
        Ok(Tensor::on_device(device, DeviceStorage::new(out), dtype, out_shape))
    }
}

impl CudaDevice {
    /// Lets the device's pool keep the `bytes` a frame conversion allocates
    /// once they are freed (its release threshold, never lowered): a training
    /// step that converts a batch of frames and synchronises would otherwise
    /// have the driver unmap them at each synchronisation and map them again
    /// for the next batch, which for a float32 batch of camera frames takes
    /// longer than the conversion (docs/architecture.md).
    pub(super) fn keep_frames_memory(&self, bytes: usize) -> Result<()> {
        self.context.keep_pool_memory(bytes as u64).map_err(cuda_error)
    }
}

/// Appends `taps` as the kernels read a table: first positions (less
/// `shift`), counts, then the weights.
fn append_taps(table: &mut Vec<i32>, taps: &ResizeTaps, shift: usize) {
    table.extend(taps.first.iter().map(|&f| (f as usize - shift) as i32));
    table.extend(taps.count.iter().map(|&c| c as i32));
    table.extend(&taps.weights);
}

/// Pixels a thread of `rgb_layout` and `gather_rgb` moves: 4 (word loads,
/// vector stores) when a frame is a multiple of 4 pixels, every source frame
/// starts 4-byte aligned and the output 16-byte aligned (every frame's
/// offset is then aligned too); else 1.
fn pixels_per_thread(pixels: usize, sources: &[u64], out: u64) -> usize {
    if pixels.is_multiple_of(4) && out.is_multiple_of(16) && sources.iter().all(|s| s.is_multiple_of(4)) {
        4
    } else {
        1
    }
}

/// The grid of a frame kernel: a whole number of frames' worth of
/// `THREADS`-thread blocks (`pixels` threads a frame, fewer than 2³²), as
/// many frame slots as frames up to 2³¹ − 1 blocks (each slot strides over
/// the frames past the grid).
pub(super) fn frame_slots(frames: usize, pixels: usize) -> Result<LaunchConfig> {
    let blocks_per_frame = (pixels as u64).div_ceil(THREADS as u64).max(1);
    let slots = (frames as u64).min((i32::MAX as u64 / blocks_per_frame).max(1));
    let grid = u32::try_from(slots * blocks_per_frame).map_err(|_| Error::Limit {
        what: format!("frames of {pixels} pixels"),
        limit: "too many pixels for one launch".into(),
    })?;
    Ok(LaunchConfig { grid, block: THREADS, shared_bytes: 0 })
}

pub(super) fn layout_code(layout: FrameLayout) -> LayoutCode {
    match layout {
        FrameLayout::Hwc => LayoutCode::Hwc,
        FrameLayout::Chw => LayoutCode::Chw,
    }
}

pub(super) fn dtype_code(dtype: FrameDType) -> DTypeCode {
    match dtype {
        FrameDType::U8 => DTypeCode::U8,
        FrameDType::F32 => DTypeCode::F32,
    }
}

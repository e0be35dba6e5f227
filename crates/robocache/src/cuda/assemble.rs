//! The loader's GPU-resident batch assembly: one `assemble_windows` launch
//! for every stream of a batch, reading the resident episodes through their
//! tables (see `loader::resident`).

use std::sync::Arc;

use robocache_cpu::{DType, HostVec};
use robocache_cuda::abi::{AssembleArgs, ResidentEpisode, ResidentStream as StreamEntry};
use robocache_cuda::{entry, LaunchConfig};

use super::backend::{CudaDevice, DeviceStorage};
use super::error::cuda_error;
use super::resample::{device_pointer, group_table, warp_launch};
use crate::assembly::{Assembled, AssemblyRequest, BatchStream, MaskKind, ResidentStream, WindowShape};
use crate::backend::RowBlock;
use crate::{Device, Result, Tensor};

impl CudaDevice {
    /// The episode table of a resident stream, on the device.
    pub(super) fn upload_resident_table(&self, device: &Device, stream: &ResidentStream) -> Result<Tensor> {
        let table: Vec<ResidentEpisode> = stream
            .episodes
            .iter()
            .map(|e| {
                let (start, hz, uniform) = e.uniform.map_or((0.0, 1.0, 0), |(s, h)| (s, h, 1));
                ResidentEpisode {
                    row_offset: e.row_offset as u64,
                    rows: e.rows as u64,
                    time_offset: e.row_offset as u64,
                    start,
                    hz,
                    uniform,
                    pad: 0,
                }
            })
            .collect();
        let bytes: Vec<u8> = bytemuck::cast_slice(&table).to_vec();
        Tensor::from_host_vec(device, HostVec::U8(bytes), &[table.len() * size_of::<ResidentEpisode>()])
    }

    pub(super) fn run_assembly(
        &self,
        device: &Device,
        streams: &[ResidentStream],
        request: &AssemblyRequest<'_>,
    ) -> Result<Assembled> {
        let AssemblyRequest { shape, samples, masks, columns } = *request;
        let batch = samples.len();
        let steps = shape.len();
        if columns.len() != 3 * batch {
            return Err(crate::Error::Internal(format!(
                "batch columns: {} values for {batch} windows (3 per window)",
                columns.len()
            )));
        }
        let episodes: Vec<u32> = samples.iter().map(|&(e, _)| e as u32).collect();
        let anchors: Vec<f64> = samples.iter().map(|&(_, a)| a).collect();
        let episode_count = streams.first().map_or(0, |s| s.episodes.len());
        // One allocation for every output of the batch (each tensor a part of
        // it, 256-byte aligned), then its columns, then what the kernel reads
        // (one upload): one stream-ordered alloc and free per batch.
        let align = |n: usize| n.next_multiple_of(256);
        let mut offsets = Vec::with_capacity(streams.len());
        let mut total = 0;
        for stream in streams {
            let out_at = total;
            total += align(batch * steps * stream.channels * 4);
            offsets.push((out_at, total));
            total += align(batch * steps);
        }
        // Then, filled by one upload: the columns, the stream table, the
        // episodes (u32, padded to 8 bytes), the anchors (f64).
        let columns_at = total;
        let table_at = columns_at + align(columns.len() * 8);
        let episodes_at = table_at + streams.len() * size_of::<StreamEntry>();
        let anchors_at = episodes_at + (batch * 4).next_multiple_of(8);
        let end = anchors_at + batch * 8;
        let mut outputs = self.alloc(end)?;
        let base_out = outputs.device_pointer();
        let mut table = Vec::with_capacity(streams.len());
        for (stream, &(out_at, valid_at)) in streams.iter().zip(&offsets) {
            let (group_count, groups) =
                group_table(&stream.name, &shape.channel_spec(&stream.channel_spec), stream.channels)?;
            table.push(StreamEntry {
                data: device_pointer(&stream.data),
                times: stream.times.as_ref().map_or(0, device_pointer),
                episodes: stream.table.as_ref().map_or(0, device_pointer),
                out: base_out + out_at as u64,
                valid: base_out + valid_at as u64,
                channels: stream.channels as u64,
                group_count,
                groups,
                pad: 0,
            });
        }
        let mut packed = vec![0u8; end - columns_at];
        for (at, bytes) in [
            (columns_at, bytemuck::cast_slice::<i64, u8>(columns)),
            (table_at, bytemuck::cast_slice(&table)),
            (episodes_at, bytemuck::cast_slice(&episodes)),
            (anchors_at, bytemuck::cast_slice(&anchors)),
        ] {
            packed[at - columns_at..][..bytes.len()].copy_from_slice(bytes);
        }
        self.context.upload_into(&mut outputs, columns_at, &packed).map_err(cuda_error)?;
        let (hz, step_windows) = match shape {
            WindowShape::Steps { .. } => (1.0, 1),
            WindowShape::Times { hz, .. } => (hz, 0),
        };
        let args = AssembleArgs {
            batch: batch as u64,
            targets: steps as u64,
            episode_count: episode_count as u64,
            sample_episode: base_out + episodes_at as u64,
            sample_anchor: base_out + anchors_at as u64,
            hz,
            history: shape.history() as i64,
            step_windows,
            pad_masks: i32::from(masks == MaskKind::Pad),
            causal: i32::from(shape.is_causal()),
            stream_count: streams.len() as u64,
            streams: base_out + table_at as u64,
        };
        if batch > 0 && episode_count > 0 {
            // SAFETY: every pointer in the table and the arguments is a live
            // allocation of the size the kernel reads (episodes clamped to the
            // table, rows to the episode); the table and sample arrays are
            // part of the outputs, freed in stream order.
            unsafe { self.context.launch(entry::AssembleWindows, warp_launch(streams.len() * batch * steps), (args,)) }
                .map_err(cuda_error)?;
        }
        let outputs = Arc::new(outputs);
        let streams = streams
            .iter()
            .zip(offsets)
            .map(|(stream, (out_at, valid_at))| {
                let mut full = vec![batch, steps];
                full.extend(&stream.step_shape);
                BatchStream {
                    name: stream.name.clone(),
                    data: Tensor::on_device(device, DeviceStorage::part(&outputs, out_at), DType::F32, full),
                    mask: Tensor::on_device(
                        device,
                        DeviceStorage::part(&outputs, valid_at),
                        DType::Bool,
                        vec![batch, steps],
                    ),
                    mask_kind: masks,
                }
            })
            .collect();
        let columns = Tensor::on_device(device, DeviceStorage::part(&outputs, columns_at), DType::I64, vec![3, batch]);
        Ok(Assembled { streams, columns })
    }

    /// Flips a bool mask in place on the stream (valid to padding).
    pub(super) fn flip_mask(&self, mask: &mut Tensor) -> Result<()> {
        if mask.dtype() != DType::Bool {
            return Err(crate::Error::Internal(format!("a mask of {} to flip (bool expected)", mask.dtype())));
        }
        let n = mask.len();
        if n == 0 {
            return Ok(());
        }
        let threads = 256;
        let grid = u32::try_from(n.div_ceil(threads))
            .map_err(|_| crate::Error::Internal(format!("a mask of {n} bytes is too large to flip in one launch")))?;
        let config = LaunchConfig { grid, block: threads as u32, shared_bytes: 0 };
        // SAFETY: the mask is a live device allocation of `n` bytes, written
        // by the kernel in stream order; `grid * block` covers `n`.
        unsafe { self.context.launch(entry::FlipMasks, config, (device_pointer(mask), n as u64)) }.map_err(cuda_error)
    }
}

impl CudaDevice {
    /// [`CudaOperations::copy_row_blocks`](crate::backend::operations::CudaOperations::copy_row_blocks):
    /// the blocks' addresses and sizes in one table, uploaded, and one
    /// `copy_row_blocks` launch (up to 64 thread blocks of 256 threads per
    /// block of rows, as its bytes need).
    pub(super) fn run_copy_row_blocks(&self, device: &Device, blocks: &[(&Tensor, &Tensor, RowBlock)]) -> Result<()> {
        let blocks: Vec<&(&Tensor, &Tensor, RowBlock)> =
            blocks.iter().filter(|(_, _, b)| b.rows * b.width > 0).collect();
        if blocks.is_empty() {
            return Ok(());
        }
        let mut table = Vec::with_capacity(6 * blocks.len());
        let mut largest = 0usize;
        for (from, to, block) in &blocks {
            let (Some(from_at), Some(to_at)) = (from.device_pointer(), to.device_pointer()) else {
                return Err(crate::Error::Internal("copy_row_blocks: a tensor not on this device".into()));
            };
            table.extend([
                from_at + block.from_offset as u64,
                to_at + block.to_offset as u64,
                block.rows as u64,
                block.width as u64,
                block.from_pitch as u64,
                block.to_pitch as u64,
            ]);
            largest = largest.max(block.rows * block.width);
        }
        let threads = 256usize;
        let parts = largest.div_ceil(threads).clamp(1, 64);
        let grid = u32::try_from(blocks.len() * parts)
            .map_err(|_| crate::Error::Internal(format!("{} blocks of rows in one launch", blocks.len())))?;
        let count = blocks.len();
        let table = Tensor::from_host_vec(device, HostVec::U64(table), &[count, 6])?;
        let config = LaunchConfig { grid, block: threads as u32, shared_bytes: 0 };
        // SAFETY: every block lies inside its live source and destination
        // tensors on this device (checked by the caller), and no two
        // destinations overlap; the table and the tensors stay alive through
        // the launch in stream order (a dropped buffer is freed in stream
        // order). The grid covers `blocks × parts` thread blocks.
        unsafe {
            self.context.launch(entry::CopyRowBlocks, config, (device_pointer(&table), count as u64, parts as u64))
        }
        .map_err(cuda_error)
    }
}

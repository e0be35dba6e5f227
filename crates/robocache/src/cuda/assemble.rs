//! The loader's GPU-resident batch assembly: one `assemble_windows` launch
//! for every stream of a batch, reading the resident episodes through their
//! tables (see `loader::resident`).

use std::sync::Arc;

use robocache_cpu::{DType, HostVec};
use robocache_cuda::abi::{AssembleArgs, ResidentEpisode, ResidentStream as StreamEntry};
use robocache_cuda::entry;

use super::backend::{CudaDevice, DeviceStorage};
use super::error::cuda_error;
use super::resample::{device_pointer, group_table, warp_launch};
use crate::assembly::{BatchStream, ResidentStream, WindowShape};
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
        shape: &WindowShape,
        samples: &[(usize, f64)],
    ) -> Result<Vec<BatchStream>> {
        let batch = samples.len();
        let steps = shape.len();
        let episodes: Vec<u32> = samples.iter().map(|&(e, _)| e as u32).collect();
        let anchors: Vec<f64> = samples.iter().map(|&(_, a)| a).collect();
        let episode_count = streams.first().map_or(0, |s| s.episodes.len());
        // One allocation for every output of the batch (each tensor a part of
        // it, 256-byte aligned): one stream-ordered alloc and free per batch.
        let align = |n: usize| n.next_multiple_of(256);
        let mut offsets = Vec::with_capacity(streams.len());
        let mut total = 0;
        for stream in streams {
            let out_at = total;
            total += align(batch * steps * stream.channels * 4);
            offsets.push((out_at, total));
            total += align(batch * steps);
        }
        let outputs = Arc::new(self.alloc(total)?);
        let base_out = outputs.device_pointer();
        let mut table = Vec::with_capacity(streams.len());
        for (stream, &(out_at, valid_at)) in streams.iter().zip(&offsets) {
            let (group_count, groups) = group_table(&stream.name, &stream.channel_spec, stream.channels)?;
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
        // One upload per batch: the stream table, then the episodes (u32,
        // padded to 8 bytes), then the anchors (f64).
        let mut packed: Vec<u8> = bytemuck::cast_slice(&table).to_vec();
        let episodes_at = packed.len();
        packed.extend_from_slice(bytemuck::cast_slice(&episodes));
        packed.resize(packed.len().next_multiple_of(8), 0);
        let anchors_at = packed.len();
        packed.extend_from_slice(bytemuck::cast_slice(&anchors));
        let packed = self.context.upload(&packed).map_err(cuda_error)?;
        let base = packed.device_pointer();
        let (hz, step_windows) = match shape {
            WindowShape::Steps { .. } => (1.0, 1),
            WindowShape::Times { hz, .. } => (*hz, 0),
        };
        let args = AssembleArgs {
            batch: batch as u64,
            targets: steps as u64,
            episode_count: episode_count as u64,
            sample_episode: base + episodes_at as u64,
            sample_anchor: base + anchors_at as u64,
            hz,
            history: shape.history() as i64,
            step_windows,
            pad: 0,
            stream_count: streams.len() as u64,
            streams: base,
        };
        if batch > 0 && episode_count > 0 {
            // SAFETY: every pointer in the table and the arguments is a live
            // allocation of the size the kernel reads (episodes clamped to the
            // table, rows to the episode); the table and sample arrays are
            // freed in stream order.
            unsafe { self.context.launch(entry::AssembleWindows, warp_launch(streams.len() * batch * steps), (args,)) }
                .map_err(cuda_error)?;
        }
        Ok(streams
            .iter()
            .zip(offsets)
            .map(|(stream, (out_at, valid_at))| {
                let mut full = vec![batch, steps];
                full.extend(&stream.step_shape);
                BatchStream {
                    name: stream.name.clone(),
                    data: Tensor::on_device(device, DeviceStorage::part(&outputs, out_at), DType::F32, full),
                    valid: Tensor::on_device(
                        device,
                        DeviceStorage::part(&outputs, valid_at),
                        DType::Bool,
                        vec![batch, steps],
                    ),
                }
            })
            .collect())
    }
}

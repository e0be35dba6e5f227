use robocache_cpu::{DType, FusionInput, FusionStream};

use super::descriptors::{Fused, FusionStreamInput, TargetTimes};
use super::resample::{host_targets, HostStream};
use crate::backend::operations::CudaOperations;
use crate::{Device, Result, Tensor};

impl Device {
    /// Aligns `streams` onto one timeline and concatenates them along the
    /// channels in `dtype` (docs/semantics.md).
    ///
    /// ```
    /// use robocache::{DType, Device, FusionStreamInput, Method, ResampleSpec, StreamInput, TargetTimes, Tensor, TimeAxis};
    ///
    /// let device = Device::cpu();
    /// let joints = Tensor::from_slice(&device, &[0.0f32; 2 * 100 * 7], &[2, 100, 7])?; // 100 Hz
    /// let gripper = Tensor::from_slice(&device, &[1u8; 2 * 10], &[2, 10, 1])?; // 10 Hz
    /// let fused = device.fuse(
    ///     &[
    ///         FusionStreamInput { stream: StreamInput::new(&joints, TimeAxis::Uniform { start: 0.0, hz: 100.0 }),
    ///                             spec: ResampleSpec::new(Method::Linear) },
    ///         FusionStreamInput { stream: StreamInput::new(&gripper, TimeAxis::Uniform { start: 0.0, hz: 10.0 }),
    ///                             spec: ResampleSpec::new(Method::Previous) },
    ///     ],
    ///     &TargetTimes::Uniform { start: 0.0, hz: 50.0, len: 16 },
    ///     DType::F32,
    /// )?;
    /// assert_eq!(fused.data.shape(), [2, 16, 8]);
    /// assert_eq!(fused.valid.shape(), [2, 2, 16]);
    /// # Ok::<(), robocache::Error>(())
    /// ```
    pub fn fuse(&self, streams: &[FusionStreamInput<'_>], targets: &TargetTimes<'_>, dtype: DType) -> Result<Fused> {
        match self {
            Device::Cpu => {
                let hosts = streams
                    .iter()
                    .enumerate()
                    .map(|(k, s)| HostStream::new(&format!("stream {k}"), self, &s.stream))
                    .collect::<Result<Vec<_>>>()?;
                let input = FusionInput {
                    streams: hosts
                        .iter()
                        .zip(streams)
                        .map(|(h, s)| FusionStream {
                            data: h.data,
                            shape: h.shape,
                            times: h.times,
                            lengths: h.lengths.as_deref(),
                            spec: s.spec.clone(),
                        })
                        .collect(),
                    targets: host_targets(self, targets)?,
                    dtype,
                };
                let fused = robocache_cpu::fuse(&input)?;
                let [b, t, _] = fused.shape;
                Ok(Fused {
                    data: Tensor::host(self, fused.data, fused.shape.to_vec()),
                    valid: Tensor::host(self, robocache_cpu::HostVec::Bool(fused.valid), vec![streams.len(), b, t]),
                    offsets: fused.offsets,
                })
            }
            Device::Cuda(cuda) => cuda.fuse(self, streams, targets, dtype),
        }
    }
}

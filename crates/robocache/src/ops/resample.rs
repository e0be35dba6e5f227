use robocache_cpu::{with_host_data, Element, HostSlice, ResampleSpec, Stream, Targets, Times};

use super::descriptors::{expect_rank, Resampled, StreamInput, TargetTimes, TimeAxis};
use super::{host_lengths, host_times};
use crate::backend::operations::CudaOperations;
use crate::{Device, Result, Tensor};

/// Host-side views of a stream's tensors, for the CPU backend.
pub(super) struct HostStream<'a> {
    pub data: HostSlice<'a>,
    pub shape: [usize; 3],
    pub times: Times<'a>,
    pub lengths: Option<Vec<usize>>,
}

impl<'a> HostStream<'a> {
    pub fn new(what: &str, device: &Device, stream: &StreamInput<'a>) -> Result<Self> {
        device.expect_same(&format!("{what} data"), stream.data.device())?;
        expect_rank(&format!("{what} data"), stream.data, &[3], "[B, S, D]")?;
        let shape = [stream.data.shape()[0], stream.data.shape()[1], stream.data.shape()[2]];
        let times = match stream.times {
            TimeAxis::Tensor(t) => {
                device.expect_same(&format!("{what} source times"), t.device())?;
                host_times(&format!("{what} source times"), t)?
            }
            TimeAxis::Uniform { start, hz } => Times::Uniform { start, hz },
        };
        let lengths = match stream.lengths {
            Some(l) => {
                device.expect_same(&format!("{what} valid lengths"), l.device())?;
                Some(host_lengths(&format!("{what} valid lengths"), l, shape[1])?)
            }
            None => None,
        };
        Ok(HostStream { data: stream.data.host_slice(), shape, times, lengths })
    }
}

/// Host-side view of the targets.
pub(super) fn host_targets<'a>(device: &Device, targets: &TargetTimes<'a>) -> Result<Targets<'a>> {
    Ok(match *targets {
        TargetTimes::Tensor(t) => {
            device.expect_same("target times", t.device())?;
            let times = host_times("target times", t)?;
            Targets { times, len: *t.shape().last().unwrap_or(&0) }
        }
        TargetTimes::Uniform { start, hz, len } => Targets::uniform(start, hz, len),
    })
}

impl Device {
    /// Resamples `stream` at `targets` (docs/semantics.md) on this device.
    ///
    /// ```
    /// use robocache::{Device, Method, ResampleSpec, StreamInput, TargetTimes, Tensor, TimeAxis};
    ///
    /// let device = Device::cpu();
    /// let data = Tensor::from_slice(&device, &[0.0f32, 10.0, 20.0], &[1, 3, 1])?;
    /// let stream = StreamInput::new(&data, TimeAxis::Uniform { start: 0.0, hz: 10.0 });
    /// let targets = TargetTimes::Uniform { start: 0.05, hz: 20.0, len: 5 };
    /// let out = device.resample(&stream, &targets, &ResampleSpec::new(Method::Linear))?;
    /// assert_eq!(out.data.to_vec::<f32>()?, [5.0, 10.0, 15.0, 20.0, 20.0]);
    /// assert_eq!(out.valid.to_vec::<bool>()?, [true, true, true, true, false]);
    /// # Ok::<(), robocache::Error>(())
    /// ```
    pub fn resample(
        &self,
        stream: &StreamInput<'_>,
        targets: &TargetTimes<'_>,
        spec: &ResampleSpec,
    ) -> Result<Resampled> {
        match self {
            Device::Cpu => {
                let host = HostStream::new("resample", self, stream)?;
                let targets = host_targets(self, targets)?;
                let (data, valid, shape) = with_host_data!(HostSlice, host.data, |slice: T| {
                    let typed =
                        Stream { data: slice, shape: host.shape, times: host.times, lengths: host.lengths.as_deref() };
                    let out = robocache_cpu::resample(&typed, &targets, spec)?;
                    (<T as Element>::vec(out.data), out.valid, out.shape)
                });
                Ok(Resampled {
                    data: Tensor::host(self, data, shape.to_vec()),
                    valid: Tensor::host(self, <bool as Element>::vec(valid), vec![shape[0], shape[1]]),
                })
            }
            Device::Cuda(cuda) => cuda.resample(self, stream, targets, spec),
        }
    }
}

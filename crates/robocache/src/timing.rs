//! Timing queued work, for benchmark harnesses: a [`Mark`] is a point in a
//! device's queue (a CUDA event, or the wall clock on the CPU, whose
//! operations return finished), and [`Device::evict_caches`] queues work that
//! leaves no input of the next call in the device's caches.
//!
//! The pattern, which `robocache bench` uses for every workload:
//!
//! ```
//! use robocache::{Device, Tensor};
//!
//! # fn main() -> robocache::Result<()> {
//! let device = Device::cpu();
//! let data = Tensor::from_slice(&device, &[1.0f32; 1024], &[1024])?;
//! device.evict_caches()?;       // and keeps a GPU busy while the host queues the call
//! let start = device.mark()?;
//! let copy = data.duplicate()?; // the work being timed
//! let end = device.mark()?;
//! let elapsed = start.elapsed_until(&end)?; // waits for `end` on a GPU
//! assert_eq!(copy.to_vec::<f32>()?, vec![1.0; 1024]);
//! assert!(elapsed.as_secs() < 60);
//! # Ok(())
//! # }
//! ```

use std::time::{Duration, Instant};

use crate::backend::CudaBackend;
use crate::cuda::{CudaDevice, DeviceEvent};
use crate::{Device, Result};

/// A point in a device's queue of work.
#[derive(Debug)]
pub struct Mark {
    point: Point,
}

#[derive(Debug)]
enum Point {
    Host(Instant),
    Cuda(DeviceEvent),
}

impl Mark {
    fn device_name(&self) -> &'static str {
        match self.point {
            Point::Host(_) => "the CPU",
            Point::Cuda(_) => "a CUDA device",
        }
    }

    /// The time between this mark and a later one of the same device: GPU
    /// time between the two events on CUDA (waiting for `later` to be
    /// reached), wall time on the CPU.
    pub fn elapsed_until(&self, later: &Mark) -> Result<Duration> {
        match (&self.point, &later.point) {
            (Point::Host(start), Point::Host(end)) => Ok(end.saturating_duration_since(*start)),
            (Point::Cuda(start), Point::Cuda(end)) => CudaDevice::elapsed(start, end),
            _ => Err(crate::Error::DeviceMismatch {
                what: "Mark::elapsed_until's later mark".into(),
                tensor_device: later.device_name().into(),
                device: self.device_name().into(),
            }),
        }
    }
}

impl Device {
    /// Marks the current end of the device's queue.
    pub fn mark(&self) -> Result<Mark> {
        Ok(Mark {
            point: match self {
                Device::Cpu => Point::Host(Instant::now()),
                Device::Cuda(cuda) => Point::Cuda(cuda.record_event()?),
            },
        })
    }

    /// Queues a read of a scratch buffer of twice the L2 cache size, so that
    /// the next operation finds none of its inputs cached and the host is
    /// ahead of the device (launch overhead is not timed). Nothing on the
    /// CPU, whose operations run when called.
    pub fn evict_caches(&self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(cuda) => cuda.evict_caches(),
        }
    }
}

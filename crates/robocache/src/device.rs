//! [`Device`]: where operations run, and how `auto` chooses.

use std::fmt;
use std::str::FromStr;

use crate::backend::CudaBackend;
use crate::cuda::{self, CudaDevice};
use crate::{Error, Result};

/// Where tensors live and operations run.
///
/// The CUDA variant always exists; without a CUDA backend compiled in,
/// [`Device::cuda`] returns [`Error::CudaNotCompiled`], so code that uses
/// robocache needs no `cfg`.
#[derive(Clone, Debug, PartialEq)]
pub enum Device {
    /// The CPU reference backend (rayon).
    Cpu,
    /// A CUDA GPU.
    Cuda(CudaDevice),
}

/// The kind of a device, without its handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    Cpu,
    Cuda,
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
        })
    }
}

/// What a user asks for: `auto`, `cpu`, or `cuda` (optionally `cuda:N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendRequest {
    /// CUDA when compiled in and a device answers, else the CPU.
    #[default]
    Auto,
    Cpu,
    /// CUDA device with this ordinal; an error if it cannot be had.
    Cuda(usize),
}

impl FromStr for BackendRequest {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendRequest::Auto),
            "cpu" => Ok(BackendRequest::Cpu),
            "cuda" | "gpu" => Ok(BackendRequest::Cuda(0)),
            other => match other.strip_prefix("cuda:") {
                Some(n) => n.parse().map(BackendRequest::Cuda).map_err(|_| format!("bad CUDA ordinal in '{other}'")),
                None => Err(format!("unknown backend '{other}' (expected auto, cpu, cuda or cuda:N)")),
            },
        }
    }
}

impl Device {
    /// Waits until every operation queued on the device is done (nothing to
    /// wait for on the CPU, whose operations return finished).
    pub fn synchronize(&self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(cuda) => cuda.synchronize(),
        }
    }

    /// Orders robocache's work after the work queued so far on `stream`, a
    /// raw `CUstream` handle of another library on this device (PyTorch's
    /// `torch.cuda.current_stream().cuda_stream`; 0 is the legacy default
    /// stream): this handle's stream (robocache's own, or the one an
    /// [`Device::on_external_stream`] handle queues on) waits for it on the
    /// device, the host does not wait. Nothing to do on the CPU.
    pub fn wait_for_external_stream(&self, stream: u64) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(cuda) => cuda.wait_for_external_stream(stream),
        }
    }

    /// Orders the work queued later on `stream` (another library's raw
    /// `CUstream` on this device) after the work queued so far on this
    /// handle's stream, so results can be used there without a host
    /// synchronisation. Nothing to do on the CPU.
    pub fn make_external_stream_wait(&self, stream: u64) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(cuda) => cuda.make_external_stream_wait(stream),
        }
    }

    /// A handle of this device whose operations queue all their work
    /// (allocations of results, launches, checks, frees of what they
    /// allocate) on `stream`, another library's raw `CUstream` on this
    /// device (0: the legacy default stream), instead of robocache's own
    /// stream: results are ordered with that library's work as if it had
    /// launched them itself, without events between the streams. It is the
    /// same device (tensors of either handle are accepted by the other's
    /// operations); the CPU's handle is the CPU.
    ///
    /// # Safety
    ///
    /// `stream` must be a live stream of this device while the handle, or
    /// memory allocated through it, lives. Memory allocated through it is
    /// freed on `stream` when dropped (unless told otherwise), so every use
    /// of it on another stream must be ordered before the work queued on
    /// `stream` by then; inputs the work reads must be ready in `stream`'s
    /// order.
    pub unsafe fn on_external_stream(&self, stream: u64) -> Device {
        match self {
            Device::Cpu => Device::Cpu,
            // SAFETY: forwarded to the caller.
            Device::Cuda(cuda) => Device::Cuda(unsafe { CudaBackend::on_external_stream(cuda, stream) }),
        }
    }

    /// The CPU backend.
    pub fn cpu() -> Self {
        Device::Cpu
    }

    /// CUDA device `ordinal`, or an error saying why it cannot be had
    /// ([`Error::CudaNotCompiled`], [`Error::NoCudaDevice`]).
    pub fn cuda(ordinal: usize) -> Result<Self> {
        <CudaDevice as CudaBackend>::open(ordinal).map(Device::Cuda)
    }

    /// CUDA device 0 when compiled in and it answers, else the CPU. Logs the
    /// choice (and why CUDA was not taken) at `info` level.
    pub fn auto() -> Self {
        match Device::cuda(0) {
            Ok(device) => {
                tracing::info!(device = %device, "auto backend: using CUDA");
                device
            }
            Err(reason) => {
                tracing::info!(%reason, "auto backend: using the CPU");
                Device::Cpu
            }
        }
    }

    /// The device a [`BackendRequest`] asks for. `Auto` never fails; an
    /// explicit CUDA request that cannot be met is an error, never a silent
    /// fallback.
    pub fn from_request(request: BackendRequest) -> Result<Self> {
        match request {
            BackendRequest::Auto => Ok(Device::auto()),
            BackendRequest::Cpu => Ok(Device::Cpu),
            BackendRequest::Cuda(ordinal) => Device::cuda(ordinal),
        }
    }

    /// Whether this build has the CUDA backend.
    pub const fn cuda_compiled() -> bool {
        cuda::COMPILED
    }

    /// The kind of device.
    pub fn kind(&self) -> BackendKind {
        match self {
            Device::Cpu => BackendKind::Cpu,
            Device::Cuda(_) => BackendKind::Cuda,
        }
    }

    pub(crate) fn expect_same(&self, what: &str, other: &Device) -> Result<()> {
        if self == other {
            Ok(())
        } else {
            Err(Error::DeviceMismatch {
                what: what.to_owned(),
                tensor_device: other.to_string(),
                device: self.to_string(),
            })
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu ({} threads)", rayon::current_num_threads()),
            Device::Cuda(cuda) => {
                let (major, minor) = cuda.compute_capability();
                write!(
                    f,
                    "cuda:{} ({}, compute capability {major}.{minor}, PTX {})",
                    cuda.ordinal(),
                    cuda.name(),
                    cuda.arch_name()
                )
            }
        }
    }
}

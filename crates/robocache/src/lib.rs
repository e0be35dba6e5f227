//! robocache: multi-rate robot data onto one policy clock, on the GPU or the CPU.
//!
//! One [`Device`] type runs every operation: [`Device::Cpu`], the reference
//! (rayon), or [`Device::Cuda`]. The CUDA variant always exists; in a build
//! without the CUDA backend [`Device::cuda`] returns
//! [`Error::CudaNotCompiled`], and [`Device::auto`] takes the CPU and says
//! so, so code using robocache needs no `cfg`.
//!
//! Data goes onto a device once as a [`Tensor`]; operations take tensors on
//! their device and return tensors there; only [`Tensor::to_host`] /
//! [`Tensor::to_vec`] bring results back.
//!
//! - [`Device::resample`]: `[B, S, D]` rows with their own times onto target
//!   times, per channel group ([`Method`]), with a [`Boundary`] rule and a
//!   valid mask.
//! - [`Device::fuse`]: several streams at different rates onto one timeline,
//!   concatenated along the channels.
//! - [`Device::voxelize`]: point clouds into occupancy, count, mean or max grids.
//! - [`Device::yuv420_to_rgb`]: decoded camera frames (YUV 4:2:0) to RGB,
//!   u8 or f32, channels last or first, as FFmpeg converts them.
//! - [`Device::step_window_batch`] / [`Device::time_window_batch`]: windows of a
//!   RoboMimic, CALVIN or RT-X file ([`datasets`]) as one tensor per stream.
//!
//! ```
//! use robocache::{Device, Method, ResampleSpec, StreamInput, TargetTimes, Tensor, TimeAxis};
//!
//! let device = Device::auto(); // CUDA if available, else the CPU
//! // 2 episodes of a 100 Hz joint stream, 7 joints, 50 samples each (absolute times).
//! let t0 = 1.7e9;
//! let times: Vec<f64> = (0..2).flat_map(|e| (0..50).map(move |i| t0 + e as f64 + i as f64 / 100.0)).collect();
//! let joints: Vec<f32> = (0..2 * 50 * 7).map(|v| v as f32).collect();
//! let joints = Tensor::from_slice(&device, &joints, &[2, 50, 7])?;
//! let times = Tensor::from_slice(&device, &times, &[2, 50])?;
//! // A 30 Hz policy clock from the start of the first episode.
//! let stream = StreamInput::new(&joints, TimeAxis::Tensor(&times));
//! let targets = TargetTimes::Uniform { start: t0, hz: 30.0, len: 16 };
//! let out = device.resample(&stream, &targets, &ResampleSpec::new(Method::Linear))?;
//! assert_eq!(out.data.shape(), [2, 16, 7]);
//! let valid = out.valid.to_vec::<bool>()?;
//! assert!(valid[..15].iter().all(|&v| v)); // episode 0 covers 0..0.49 s
//! assert!(valid[16..].iter().all(|&v| !v)); // episode 1 starts 1 s later
//! # Ok::<(), robocache::Error>(())
//! ```

mod assembly;
pub mod augment_preview;
mod backend;
mod batch_buffer;
mod build_info;
mod cuda;
mod device;
mod device_frame_cache;
mod error;
pub mod lerobot_export;
pub mod live;
pub mod loader;
mod ops;
mod row_copies;
pub mod spec;
mod tensor;
pub mod timing;
mod windows;

pub use build_info::{build_info, BuildInfo, VideoDecoderReport};
pub use cuda::{ptx_archs, CudaDevice};
pub use device::{BackendKind, BackendRequest, Device};
pub use device_frame_cache::DeviceFrameCache;
pub use error::{Error, Result};
pub use loader::{
    nvdec_device, Epoch, FrameCacheBudget, FrameCacheReport, Loader, LoaderConfig, LoaderMode, MaskKind, Normalization,
    NormalizationMode, TelemetryReport, VideoDecodeReport, WindowSpec,
};
pub use ops::{
    CropBox, FrameDType, FrameLayout, FrameOutput, FrameResize, Fused, FusionStreamInput, Resampled, StreamInput,
    TargetTimes, TimeAxis, VoxelInput, VoxelOutput,
};
pub use robocache_cpu::half;
pub use robocache_cpu::noise;
pub use robocache_cpu::{
    Boundary, ChannelGroup, ChannelSpec, DType, Element, HostSlice, HostVec, Method, QuaternionOrder, ResampleSpec,
    VoxelGrid, VoxelMode, DEFAULT_GRID_BUDGET_BYTES,
};
pub use spec::{LoaderSpec, SpecClock, SpecStream};
pub use tensor::Tensor;
pub use windows::{BatchStream, WindowBatch};

/// The dataset readers, windows and sampler (the `robocache-datasets` crate).
pub use robocache_datasets as datasets;

/// Per-sample image augmentation (the `robocache-augment` crate).
pub use robocache_augment as augment;
pub use robocache_datasets::DecoderChoice;

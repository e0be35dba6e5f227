//! What this build of robocache has: its version, whether the CUDA backend
//! is compiled and for which PTX archs, and for each video codec the
//! decoders it has and whether each has its SIMD code (a CPU decoder
//! without it is several times slower). `robocache info` and
//! `robocache.build_info()` print it; the benchmarks print it beside every
//! figure.

use serde::Serialize;

/// One decoder of a codec.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VideoDecoderReport {
    /// `rav1d`, `openh264`, `libde265` or `nvdec`.
    pub decoder: &'static str,
    /// `cpu` or `gpu`.
    pub device: &'static str,
    /// Whether its hand-written SIMD code (assembly, intrinsics) is built
    /// in; `None` for NVDEC (hardware, found in the driver at run time) and
    /// for a CPU decoder with no SIMD code for this architecture (libde265
    /// on aarch64).
    pub assembly: Option<bool>,
}

/// What this build has.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BuildInfo {
    pub version: &'static str,
    pub cuda_compiled: bool,
    pub ptx_archs: Vec<&'static str>,
    /// By codec (`av1`, `h264`, `hevc`), the CPU's decoder first.
    pub video_decoders: std::collections::BTreeMap<&'static str, Vec<VideoDecoderReport>>,
    /// Whether every CPU video decoder has its SIMD code: false in a build
    /// made without NASM on x86-64 (it then decodes several times slower).
    pub cpu_video_decoders_have_assembly: bool,
}

/// What this build has.
///
/// ```
/// let info = robocache::build_info();
/// assert_eq!(info.video_decoders["av1"][0].decoder, "rav1d");
/// assert_eq!(info.video_decoders["h264"][0].device, "cpu");
/// ```
pub fn build_info() -> BuildInfo {
    let mut video_decoders = std::collections::BTreeMap::<&'static str, Vec<VideoDecoderReport>>::new();
    for decoder in robocache_video::decoders() {
        video_decoders.entry(decoder.codec.name()).or_default().push(VideoDecoderReport {
            decoder: decoder.name,
            device: decoder.device,
            assembly: decoder.assembly,
        });
    }
    BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        cuda_compiled: crate::Device::cuda_compiled(),
        ptx_archs: crate::ptx_archs(),
        video_decoders,
        cpu_video_decoders_have_assembly: robocache_video::cpu_decoders_have_assembly(),
    }
}

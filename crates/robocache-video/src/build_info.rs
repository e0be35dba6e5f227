//! Which decoders this build has for each codec, and whether each was
//! built with its SIMD code: the difference between a CPU decode at the
//! speed the benchmarks measure and one several times slower.

use crate::mp4::Codec;

/// One decoder of a codec in this build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderInfo {
    pub codec: Codec,
    /// `rav1d`, `openh264`, `libde265` or `nvdec`.
    pub name: &'static str,
    /// `cpu`, or `gpu` (NVDEC, found in the driver at run time).
    pub device: &'static str,
    /// Whether its hand-written SIMD code is built in (rav1d's and
    /// OpenH264's assembly, libde265's SSE intrinsics); `None` for a
    /// hardware decoder, and for a CPU decoder that has no SIMD code for
    /// this architecture (libde265 on aarch64: its NEON code is 32-bit ARM).
    pub assembly: Option<bool>,
}

/// rav1d's assembly: the `asm` feature (x86-64 and aarch64 have it).
const RAV1D_ASSEMBLY: bool = cfg!(feature = "asm") && cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));
/// OpenH264's assembly: NASM found when this crate was built (x86-64,
/// as OpenH264's own build script looks for it), NEON on aarch64.
const OPENH264_ASSEMBLY: bool = cfg!(openh264_asm);
/// libde265's SSE4.1 code, which its CMake build compiles on x86; on
/// other architectures (aarch64) libde265 has none to build.
const LIBDE265_SIMD: Option<bool> =
    if cfg!(any(target_arch = "x86_64", target_arch = "x86")) { Some(true) } else { None };

/// Every decoder this build has, by codec (AV1, H.264, HEVC), the CPU's
/// first. NVDEC is listed for H.264 and HEVC (and AV1, which only Ada and
/// later GPUs decode); whether a GPU's driver has it is known at run time.
pub fn decoders() -> Vec<DecoderInfo> {
    let cpu = |codec, name, assembly| DecoderInfo { codec, name, device: "cpu", assembly };
    let nvdec = |codec| DecoderInfo { codec, name: "nvdec", device: "gpu", assembly: None };
    vec![
        cpu(Codec::Av1, "rav1d", Some(RAV1D_ASSEMBLY)),
        nvdec(Codec::Av1),
        cpu(Codec::H264, "openh264", Some(OPENH264_ASSEMBLY)),
        nvdec(Codec::H264),
        cpu(Codec::Hevc, "libde265", LIBDE265_SIMD),
        nvdec(Codec::Hevc),
    ]
}

/// Whether every CPU decoder of this build has the SIMD code it has for
/// this architecture.
pub fn cpu_decoders_have_assembly() -> bool {
    decoders().iter().all(|d| d.assembly != Some(false))
}

/// Says once per process, at the first CPU decode, that this build's CPU
/// decoders lack their assembly (a build made without NASM opted out).
pub(crate) fn warn_once_if_slow() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        for decoder in decoders().iter().filter(|d| d.assembly == Some(false)) {
            tracing::warn!(
                decoder = decoder.name,
                codec = decoder.codec.name(),
                "this build of robocache has no assembly for this CPU decoder: it decodes several times slower \
                 (built without NASM; docs/architecture.md, \"NASM\")"
            );
        }
    });
}

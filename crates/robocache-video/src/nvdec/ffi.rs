//! The parts of the CUDA driver API and of NVDEC's `nvcuvid` API that
//! robocache calls, declared by hand (from NVIDIA's Video Codec SDK 13.0
//! headers, whose structures have been stable since SDK 9) and loaded at run
//! time: `libcuda.so.1` and `libnvcuvid.so.1` ship with the NVIDIA driver,
//! so a build (and a wheel) that never links them runs on machines without
//! them and finds them where they are. The `abi` test checks each
//! structure's size and field offsets against the headers' (measured with a
//! C compiler).

#![allow(non_camel_case_types, non_snake_case, dead_code, clippy::upper_case_acronyms)]

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_ulonglong, c_void, CStr};
use std::sync::OnceLock;

use crate::error::CodecError;

pub type CUresult = c_int;
pub type CUdevice = c_int;
pub type CUcontext = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUdeviceptr = c_ulonglong;
pub type CUvideodecoder = *mut c_void;
pub type CUvideoparser = *mut c_void;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CU_STREAM_NON_BLOCKING: c_uint = 1;
pub const CU_MEMORYTYPE_HOST: c_uint = 1;
pub const CU_MEMORYTYPE_DEVICE: c_uint = 2;

/// `cudaVideoCodec`.
pub const CODEC_H264: c_int = 4;
pub const CODEC_HEVC: c_int = 8;
pub const CODEC_AV1: c_int = 11;
/// `cudaVideoChromaFormat_420`.
pub const CHROMA_420: c_int = 1;
/// `cudaVideoSurfaceFormat_NV12`.
pub const SURFACE_NV12: c_int = 0;
/// `cudaVideoDeinterlaceMode_Weave`: progressive frames as they are.
pub const DEINTERLACE_WEAVE: c_int = 0;
/// `cudaVideoCreate_PreferCUVID`: the video engines, NVIDIA's recommended mode.
pub const CREATE_PREFER_CUVID: c_ulong = 4;
/// `CUvideopacketflags`.
pub const PKT_ENDOFSTREAM: c_ulong = 0x01;
pub const PKT_TIMESTAMP: c_ulong = 0x02;
pub const PKT_DISCONTINUITY: c_ulong = 0x04;
pub const PKT_ENDOFPICTURE: c_ulong = 0x08;
/// With `PKT_ENDOFSTREAM`: one more display callback, with no picture, at the end.
pub const PKT_NOTIFY_EOS: c_ulong = 0x10;
/// `cuvidDecodeStatus`.
pub const DECODE_STATUS_ERROR: c_int = 8;
pub const DECODE_STATUS_ERROR_CONCEALED: c_int = 9;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Rect32 {
    pub left: c_int,
    pub top: c_int,
    pub right: c_int,
    pub bottom: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Rect16 {
    pub left: i16,
    pub top: i16,
    pub right: i16,
    pub bottom: i16,
}

/// `CUVIDEOFORMAT`: what the parser's sequence callback reports.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUVIDEOFORMAT {
    pub codec: c_int,
    pub frame_rate: [c_uint; 2],
    pub progressive_sequence: u8,
    pub bit_depth_luma_minus8: u8,
    pub bit_depth_chroma_minus8: u8,
    pub min_num_decode_surfaces: u8,
    pub coded_width: c_uint,
    pub coded_height: c_uint,
    pub display_area: Rect32,
    pub chroma_format: c_int,
    pub bitrate: c_uint,
    pub display_aspect_ratio: [c_int; 2],
    pub video_signal_description: [u8; 4],
    pub seqhdr_data_length: c_uint,
}

/// `CUVIDSOURCEDATAPACKET`.
#[repr(C)]
pub struct CUVIDSOURCEDATAPACKET {
    pub flags: c_ulong,
    pub payload_size: c_ulong,
    pub payload: *const u8,
    pub timestamp: i64,
}

/// `CUVIDPARSERDISPINFO`.
#[repr(C)]
pub struct CUVIDPARSERDISPINFO {
    pub picture_index: c_int,
    pub progressive_frame: c_int,
    pub top_field_first: c_int,
    pub repeat_first_field: c_int,
    pub timestamp: i64,
}

/// The first fields of `CUVIDPICPARAMS` (a large union follows; only
/// these are read, through a pointer the parser passes).
#[repr(C)]
pub struct PicParamsHead {
    pub PicWidthInMbs: c_int,
    pub FrameHeightInMbs: c_int,
    pub CurrPicIdx: c_int,
    pub field_pic_flag: c_int,
    pub bottom_field_flag: c_int,
    pub second_field: c_int,
}

pub type SequenceCallback = unsafe extern "C" fn(*mut c_void, *mut CUVIDEOFORMAT) -> c_int;
/// The picture parameters are opaque here: the parser fills them, the decoder reads them.
pub type DecodeCallback = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
pub type DisplayCallback = unsafe extern "C" fn(*mut c_void, *mut CUVIDPARSERDISPINFO) -> c_int;

/// `CUVIDPARSERPARAMS`. The two bit fields (`bAnnexb`, `bMemoryOptimize`)
/// and their reserved bits are one `u32`, zero here.
#[repr(C)]
pub struct CUVIDPARSERPARAMS {
    pub CodecType: c_int,
    pub ulMaxNumDecodeSurfaces: c_uint,
    pub ulClockRate: c_uint,
    pub ulErrorThreshold: c_uint,
    pub ulMaxDisplayDelay: c_uint,
    pub flags: c_uint,
    pub uReserved1: [c_uint; 4],
    pub pUserData: *mut c_void,
    pub pfnSequenceCallback: Option<SequenceCallback>,
    pub pfnDecodePicture: Option<DecodeCallback>,
    pub pfnDisplayPicture: Option<DisplayCallback>,
    pub pfnGetOperatingPoint: *mut c_void,
    pub pfnGetSEIMsg: *mut c_void,
    pub pvReserved2: [*mut c_void; 5],
    pub pExtVideoInfo: *mut c_void,
}

/// `CUVIDDECODECREATEINFO`.
#[repr(C)]
pub struct CUVIDDECODECREATEINFO {
    pub ulWidth: c_ulong,
    pub ulHeight: c_ulong,
    pub ulNumDecodeSurfaces: c_ulong,
    pub CodecType: c_int,
    pub ChromaFormat: c_int,
    pub ulCreationFlags: c_ulong,
    pub bitDepthMinus8: c_ulong,
    pub ulIntraDecodeOnly: c_ulong,
    pub ulMaxWidth: c_ulong,
    pub ulMaxHeight: c_ulong,
    pub Reserved1: c_ulong,
    pub display_area: Rect16,
    pub OutputFormat: c_int,
    pub DeinterlaceMode: c_int,
    pub ulTargetWidth: c_ulong,
    pub ulTargetHeight: c_ulong,
    pub ulNumOutputSurfaces: c_ulong,
    pub vidLock: *mut c_void,
    pub target_rect: Rect16,
    pub enableHistogram: c_ulong,
    pub Reserved2: [c_ulong; 4],
}

/// `CUVIDPROCPARAMS`.
#[repr(C)]
pub struct CUVIDPROCPARAMS {
    pub progressive_frame: c_int,
    pub second_field: c_int,
    pub top_field_first: c_int,
    pub unpaired_field: c_int,
    pub reserved_flags: c_uint,
    pub reserved_zero: c_uint,
    pub raw_input_dptr: c_ulonglong,
    pub raw_input_pitch: c_uint,
    pub raw_input_format: c_uint,
    pub raw_output_dptr: c_ulonglong,
    pub raw_output_pitch: c_uint,
    pub Reserved1: c_uint,
    pub output_stream: CUstream,
    pub Reserved: [c_uint; 46],
    pub histogram_dptr: *mut c_ulonglong,
    pub Reserved2: [*mut c_void; 1],
}

/// `CUVIDDECODECAPS`.
#[repr(C)]
pub struct CUVIDDECODECAPS {
    pub eCodecType: c_int,
    pub eChromaFormat: c_int,
    pub nBitDepthMinus8: c_uint,
    pub reserved1: [c_uint; 3],
    pub bIsSupported: u8,
    pub nNumNVDECs: u8,
    pub nOutputFormatMask: u16,
    pub nMaxWidth: c_uint,
    pub nMaxHeight: c_uint,
    pub nMaxMBCount: c_uint,
    pub nMinWidth: u16,
    pub nMinHeight: u16,
    pub bIsHistogramSupported: u8,
    pub nCounterBitDepth: u8,
    pub nMaxHistogramBins: u16,
    pub reserved3: [c_uint; 10],
}

/// `CUVIDGETDECODESTATUS`.
#[repr(C)]
pub struct CUVIDGETDECODESTATUS {
    pub decodeStatus: c_int,
    pub reserved: [c_uint; 31],
    pub pReserved: [*mut c_void; 8],
}

/// `CUDA_MEMCPY2D`.
#[repr(C)]
pub struct CUDA_MEMCPY2D {
    pub srcXInBytes: usize,
    pub srcY: usize,
    pub srcMemoryType: c_uint,
    pub srcHost: *const c_void,
    pub srcDevice: CUdeviceptr,
    pub srcArray: *mut c_void,
    pub srcPitch: usize,
    pub dstXInBytes: usize,
    pub dstY: usize,
    pub dstMemoryType: c_uint,
    pub dstHost: *mut c_void,
    pub dstDevice: CUdeviceptr,
    pub dstArray: *mut c_void,
    pub dstPitch: usize,
    pub WidthInBytes: usize,
    pub Height: usize,
}

macro_rules! zeroed_default {
    ($($name:ident),*) => {$(
        impl Default for $name {
            fn default() -> Self {
                // SAFETY: a C structure of integers and pointers: all zeros
                // is its documented "unset" value.
                unsafe { std::mem::zeroed() }
            }
        }
    )*};
}
zeroed_default!(
    CUVIDPARSERPARAMS,
    CUVIDDECODECREATEINFO,
    CUVIDPROCPARAMS,
    CUVIDDECODECAPS,
    CUVIDGETDECODESTATUS,
    CUDA_MEMCPY2D
);

/// The driver functions robocache calls, resolved from the two libraries.
pub struct Api {
    pub cuInit: unsafe extern "C" fn(c_uint) -> CUresult,
    pub cuDeviceGet: unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult,
    pub cuDevicePrimaryCtxRetain: unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult,
    pub cuCtxPushCurrent: unsafe extern "C" fn(CUcontext) -> CUresult,
    pub cuCtxPopCurrent: unsafe extern "C" fn(*mut CUcontext) -> CUresult,
    pub cuStreamCreate: unsafe extern "C" fn(*mut CUstream, c_uint) -> CUresult,
    pub cuStreamDestroy: unsafe extern "C" fn(CUstream) -> CUresult,
    pub cuStreamSynchronize: unsafe extern "C" fn(CUstream) -> CUresult,
    pub cuMemcpy2DAsync: unsafe extern "C" fn(*const CUDA_MEMCPY2D, CUstream) -> CUresult,
    pub cuMemHostAlloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CUresult,
    pub cuMemFreeHost: unsafe extern "C" fn(*mut c_void) -> CUresult,
    pub cuGetErrorString: unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult,
    pub cuvidGetDecoderCaps: unsafe extern "C" fn(*mut CUVIDDECODECAPS) -> CUresult,
    pub cuvidCreateDecoder: unsafe extern "C" fn(*mut CUvideodecoder, *mut CUVIDDECODECREATEINFO) -> CUresult,
    pub cuvidDestroyDecoder: unsafe extern "C" fn(CUvideodecoder) -> CUresult,
    pub cuvidDecodePicture: unsafe extern "C" fn(CUvideodecoder, *mut c_void) -> CUresult,
    pub cuvidGetDecodeStatus: unsafe extern "C" fn(CUvideodecoder, c_int, *mut CUVIDGETDECODESTATUS) -> CUresult,
    pub cuvidMapVideoFrame64:
        unsafe extern "C" fn(CUvideodecoder, c_int, *mut CUdeviceptr, *mut c_uint, *mut CUVIDPROCPARAMS) -> CUresult,
    pub cuvidUnmapVideoFrame64: unsafe extern "C" fn(CUvideodecoder, CUdeviceptr) -> CUresult,
    pub cuvidCreateVideoParser: unsafe extern "C" fn(*mut CUvideoparser, *mut CUVIDPARSERPARAMS) -> CUresult,
    pub cuvidParseVideoData: unsafe extern "C" fn(CUvideoparser, *mut CUVIDSOURCEDATAPACKET) -> CUresult,
    pub cuvidDestroyVideoParser: unsafe extern "C" fn(CUvideoparser) -> CUresult,
    /// Kept open for the process's life: the function pointers point into them.
    _libraries: [libloading::Library; 2],
}

impl Api {
    /// The loaded API, or why it is not there (loaded once per process).
    pub fn get() -> Result<&'static Api, CodecError> {
        static API: OnceLock<Result<Api, CodecError>> = OnceLock::new();
        API.get_or_init(Api::load).as_ref().map_err(Clone::clone)
    }

    fn load() -> Result<Api, CodecError> {
        // SAFETY: the NVIDIA driver's libraries; loading them runs their
        // initialisers, which are safe to run in any process.
        let open = |name: &str| unsafe {
            libloading::Library::new(name)
                .map_err(|error| CodecError::Unavailable(format!("{name} does not load: {error}")))
        };
        let cuda = open("libcuda.so.1")?;
        let nvcuvid = open("libnvcuvid.so.1")?;
        macro_rules! resolve {
            ($library:ident, $symbol:literal) => {
                // SAFETY: the symbol's type is the one declared in the SDK's
                // headers for this name (the fields above).
                *unsafe { $library.get($symbol) }.map_err(|error| {
                    CodecError::Unavailable(format!(
                        "{} lacks {}: {error}",
                        stringify!($library),
                        String::from_utf8_lossy(&$symbol[..$symbol.len() - 1])
                    ))
                })?
            };
        }
        let api = Api {
            cuInit: resolve!(cuda, b"cuInit\0"),
            cuDeviceGet: resolve!(cuda, b"cuDeviceGet\0"),
            cuDevicePrimaryCtxRetain: resolve!(cuda, b"cuDevicePrimaryCtxRetain\0"),
            cuCtxPushCurrent: resolve!(cuda, b"cuCtxPushCurrent_v2\0"),
            cuCtxPopCurrent: resolve!(cuda, b"cuCtxPopCurrent_v2\0"),
            cuStreamCreate: resolve!(cuda, b"cuStreamCreate\0"),
            cuStreamDestroy: resolve!(cuda, b"cuStreamDestroy_v2\0"),
            cuStreamSynchronize: resolve!(cuda, b"cuStreamSynchronize\0"),
            cuMemcpy2DAsync: resolve!(cuda, b"cuMemcpy2DAsync_v2\0"),
            cuMemHostAlloc: resolve!(cuda, b"cuMemHostAlloc\0"),
            cuMemFreeHost: resolve!(cuda, b"cuMemFreeHost\0"),
            cuGetErrorString: resolve!(cuda, b"cuGetErrorString\0"),
            cuvidGetDecoderCaps: resolve!(nvcuvid, b"cuvidGetDecoderCaps\0"),
            cuvidCreateDecoder: resolve!(nvcuvid, b"cuvidCreateDecoder\0"),
            cuvidDestroyDecoder: resolve!(nvcuvid, b"cuvidDestroyDecoder\0"),
            cuvidDecodePicture: resolve!(nvcuvid, b"cuvidDecodePicture\0"),
            cuvidGetDecodeStatus: resolve!(nvcuvid, b"cuvidGetDecodeStatus\0"),
            cuvidMapVideoFrame64: resolve!(nvcuvid, b"cuvidMapVideoFrame64\0"),
            cuvidUnmapVideoFrame64: resolve!(nvcuvid, b"cuvidUnmapVideoFrame64\0"),
            cuvidCreateVideoParser: resolve!(nvcuvid, b"cuvidCreateVideoParser\0"),
            cuvidParseVideoData: resolve!(nvcuvid, b"cuvidParseVideoData\0"),
            cuvidDestroyVideoParser: resolve!(nvcuvid, b"cuvidDestroyVideoParser\0"),
            _libraries: [cuda, nvcuvid],
        };
        // SAFETY: cuInit takes flags 0.
        api.check(unsafe { (api.cuInit)(0) }, "cuInit")?;
        Ok(api)
    }

    /// `Ok` for `CUDA_SUCCESS`, else the driver's message for `result`.
    pub fn check(&self, result: CUresult, call: &'static str) -> Result<(), CodecError> {
        if result == CUDA_SUCCESS {
            return Ok(());
        }
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorString writes a pointer to a static string, or leaves it null.
        let message = if unsafe { (self.cuGetErrorString)(result, &mut text) } == CUDA_SUCCESS && !text.is_null() {
            // SAFETY: a NUL-terminated static string of the driver.
            unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
        } else {
            "unknown error".into()
        };
        Err(CodecError::Cuda { call, code: result.unsigned_abs(), message })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Sizes and offsets as gcc lays out the Video Codec SDK 13.0 headers
    /// (nv-codec-headers' `dynlink_cuviddec.h`, `dynlink_nvcuvid.h`) on x86-64 Linux.
    #[test]
    fn abi_matches_the_sdk_headers() {
        assert_eq!(size_of::<CUVIDEOFORMAT>(), 64);
        assert_eq!(offset_of!(CUVIDEOFORMAT, coded_width), 16);
        assert_eq!(offset_of!(CUVIDEOFORMAT, display_area), 24);
        assert_eq!(offset_of!(CUVIDEOFORMAT, chroma_format), 40);
        assert_eq!(offset_of!(CUVIDEOFORMAT, video_signal_description), 56);
        assert_eq!(size_of::<CUVIDPARSERPARAMS>(), 136);
        assert_eq!(offset_of!(CUVIDPARSERPARAMS, pUserData), 40);
        assert_eq!(offset_of!(CUVIDPARSERPARAMS, pExtVideoInfo), 128);
        assert_eq!(size_of::<CUVIDSOURCEDATAPACKET>(), 32);
        assert_eq!(size_of::<CUVIDPARSERDISPINFO>(), 24);
        assert_eq!(size_of::<CUVIDDECODECREATEINFO>(), 176);
        assert_eq!(offset_of!(CUVIDDECODECREATEINFO, display_area), 80);
        assert_eq!(offset_of!(CUVIDDECODECREATEINFO, OutputFormat), 88);
        assert_eq!(offset_of!(CUVIDDECODECREATEINFO, vidLock), 120);
        assert_eq!(offset_of!(CUVIDDECODECREATEINFO, target_rect), 128);
        assert_eq!(offset_of!(CUVIDDECODECREATEINFO, enableHistogram), 136);
        assert_eq!(size_of::<CUVIDPROCPARAMS>(), 264);
        assert_eq!(offset_of!(CUVIDPROCPARAMS, output_stream), 56);
        assert_eq!(offset_of!(CUVIDPROCPARAMS, histogram_dptr), 248);
        assert_eq!(size_of::<CUVIDDECODECAPS>(), 88);
        assert_eq!(offset_of!(CUVIDDECODECAPS, bIsSupported), 24);
        assert_eq!(offset_of!(CUVIDDECODECAPS, nMaxWidth), 28);
        assert_eq!(size_of::<CUVIDGETDECODESTATUS>(), 192);
        assert_eq!(size_of::<CUDA_MEMCPY2D>(), 128);
    }
}

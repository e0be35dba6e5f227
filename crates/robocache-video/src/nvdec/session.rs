//! A session: a stream and a hardware decoder of one GPU, and the state
//! the parser's callbacks work on (the format, the picture copied to the host).

use std::collections::VecDeque;
use std::ffi::{c_int, c_uint, c_ulong, c_void};
use std::ptr::null_mut;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::ffi::*;
use super::gpu::Gpu;
use crate::error::{corrupt, CodecError};
use crate::yuv::Yuv420;

/// A stream and a hardware decoder of one GPU, used by one request at a time.
pub struct Session {
    pub(super) gpu: Arc<Gpu>,
    /// The parser's callbacks hold this address: the state is reached
    /// through this one raw pointer (`Box::into_raw`, freed in `Drop`), and
    /// a `&mut State` is made only for a short step outside the parser's
    /// calls (never one that lives across `cuvidParseVideoData`, while the
    /// callbacks make their own).
    pub(super) state: std::ptr::NonNull<State>,
    /// Counted in its GPU's sessions in use (false while idle in its pool).
    pub(super) in_use: bool,
}

impl Session {
    /// The state, for one step while no parser call runs.
    ///
    /// # Safety
    ///
    /// No parser call of this session may run while the reference lives
    /// (the callbacks make their own `&mut State` from the raw pointer).
    pub(super) unsafe fn state(&mut self) -> &mut State {
        // SAFETY: the pointer is from `Box::into_raw` and freed only in
        // `Drop`; `&mut self` and the caller's promise make this the only reference.
        unsafe { self.state.as_mut() }
    }
}

// SAFETY: the handles inside are used by one thread at a time (the owner's),
// with the GPU's context pushed around every call.
unsafe impl Send for Session {}

/// What the parser's callbacks work on.
pub(super) struct State {
    pub(super) api: &'static Api,
    pub(super) stream: CUstream,
    pub(super) decoder: CUvideodecoder,
    /// The format the hardware decoder was made for, and its surfaces.
    pub(super) made_for: Option<(DecoderFormat, c_uint)>,
    /// Display size (cropped) and the even size NVDEC writes.
    pub(super) size: (usize, usize),
    pub(super) target: (usize, usize),
    /// One NV12 picture on the host, page-locked (the copy from the GPU
    /// goes straight into it), and its size; null before the first format.
    pub(super) host: *mut u8,
    pub(super) host_len: usize,
    pub(super) shown: Vec<(usize, Yuv420)>,
    pub(super) error: Option<CodecError>,
    /// Decode indices of the samples sent whose picture is not decoded
    /// yet, and whether their frame is wanted on the host.
    pub(super) pending: VecDeque<(usize, bool)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DecoderFormat {
    pub(super) codec: c_int,
    pub(super) coded: (c_uint, c_uint),
    /// Left, top, and the even width and height NVDEC writes.
    pub(super) area: (c_int, c_int, usize, usize),
    pub(super) min_surfaces: u8,
}

impl Session {
    pub(super) fn new(gpu: Arc<Gpu>) -> Result<Session, CodecError> {
        let api = gpu.api;
        let mut stream: CUstream = null_mut();
        // SAFETY: writes one stream handle; the context is current.
        let result = gpu.with_context(|| unsafe { (api.cuStreamCreate)(&mut stream, CU_STREAM_NON_BLOCKING) })?;
        api.check(result, "cuStreamCreate")?;
        let state = Box::into_raw(Box::new(State {
            api,
            stream,
            decoder: null_mut(),
            made_for: None,
            size: (0, 0),
            target: (0, 0),
            host: null_mut(),
            host_len: 0,
            shown: Vec::new(),
            error: None,
            pending: VecDeque::new(),
        }));
        // SAFETY: `Box::into_raw` never returns null.
        Ok(Session { gpu, state: unsafe { std::ptr::NonNull::new_unchecked(state) }, in_use: true })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: the pointer is from `Box::into_raw`, freed here once; the
        // parser that held it was destroyed before (`NvdecDecoder::drop`).
        let state = unsafe { Box::from_raw(self.state.as_ptr()) };
        let api = self.gpu.api;
        let _ = self.gpu.with_context(|| {
            // SAFETY: handles this session made and no one else holds.
            unsafe {
                if !state.decoder.is_null() {
                    (api.cuvidDestroyDecoder)(state.decoder);
                }
                if !state.host.is_null() {
                    (api.cuMemFreeHost)(state.host.cast());
                }
                (api.cuStreamDestroy)(state.stream);
            }
        });
        // A session in use is dropped by a request that failed; an idle
        // one by its GPU's release of idle sessions (not counted in use).
        if self.in_use {
            self.gpu.busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl State {
    /// The sequence callback: a hardware decoder for `format` (the last
    /// one kept where the format is the same); the number of decode surfaces.
    pub(super) fn configure(&mut self, format: &CUVIDEOFORMAT) -> Result<c_int, CodecError> {
        if format.chroma_format != CHROMA_420
            || format.bit_depth_luma_minus8 != 0
            || format.bit_depth_chroma_minus8 != 0
        {
            return Err(CodecError::Unsupported(format!(
                "the stream is {}-bit with chroma format {} (NVDEC's numbering); robocache reads 8-bit 4:2:0 video",
                8 + format.bit_depth_luma_minus8,
                format.chroma_format
            )));
        }
        if format.progressive_sequence == 0 {
            return Err(CodecError::Unsupported("interlaced video: robocache reads progressive video".into()));
        }
        let area = format.display_area;
        let (width, height) = ((area.right - area.left).max(0) as usize, (area.bottom - area.top).max(0) as usize);
        // NVDEC writes even sizes; an odd display size takes one more
        // column or row of the coded picture, cut off on copy.
        let (target_w, target_h) = (width + width % 2, height + height % 2);
        let fits = |start: c_int, size: usize, coded: c_uint| start >= 0 && start as usize + size <= coded as usize;
        if width == 0
            || height == 0
            || !fits(area.left, target_w, format.coded_width)
            || !fits(area.top, target_h, format.coded_height)
        {
            return Err(corrupt(format!(
                "a display area of {area:?} in a coded picture of {}x{}",
                format.coded_width, format.coded_height
            )));
        }
        let wanted = DecoderFormat {
            codec: format.codec,
            coded: (format.coded_width, format.coded_height),
            area: (area.left, area.top, target_w, target_h),
            min_surfaces: format.min_num_decode_surfaces,
        };
        self.size = (width, height);
        self.target = (target_w, target_h);
        if let Some((made, surfaces)) = self.made_for {
            if made == wanted {
                return Ok(surfaces as c_int);
            }
        }
        if !self.decoder.is_null() {
            // SAFETY: this state's decoder, idle between pictures.
            self.api.check(unsafe { (self.api.cuvidDestroyDecoder)(self.decoder) }, "cuvidDestroyDecoder")?;
            self.decoder = null_mut();
            self.made_for = None;
        }
        let surfaces = c_uint::from(format.min_num_decode_surfaces.max(1)) + 3;
        let short = |v: usize| v as i16;
        let rect = Rect16 {
            left: short(area.left as usize),
            top: short(area.top as usize),
            right: short(area.left as usize + target_w),
            bottom: short(area.top as usize + target_h),
        };
        let mut info = CUVIDDECODECREATEINFO {
            ulWidth: format.coded_width.into(),
            ulHeight: format.coded_height.into(),
            ulNumDecodeSurfaces: surfaces.into(),
            CodecType: format.codec,
            ChromaFormat: CHROMA_420,
            ulCreationFlags: CREATE_PREFER_CUVID,
            ulMaxWidth: format.coded_width.into(),
            ulMaxHeight: format.coded_height.into(),
            display_area: rect,
            OutputFormat: SURFACE_NV12,
            DeinterlaceMode: DEINTERLACE_WEAVE,
            ulTargetWidth: target_w as c_ulong,
            ulTargetHeight: target_h as c_ulong,
            ulNumOutputSurfaces: 2,
            ..Default::default()
        };
        // SAFETY: `info` is valid; the context is current (the parser runs inside `with_context`).
        self.api.check(unsafe { (self.api.cuvidCreateDecoder)(&mut self.decoder, &mut info) }, "cuvidCreateDecoder")?;
        self.made_for = Some((wanted, surfaces));
        let host_len = target_w * target_h * 3 / 2;
        if host_len != self.host_len {
            if !self.host.is_null() {
                // SAFETY: this state's buffer; no copy into it is in flight (each is waited for).
                self.api.check(unsafe { (self.api.cuMemFreeHost)(self.host.cast()) }, "cuMemFreeHost")?;
                (self.host, self.host_len) = (null_mut(), 0);
            }
            let mut host: *mut c_void = null_mut();
            // SAFETY: writes one pointer to `host_len` page-locked bytes; the context is current.
            self.api.check(unsafe { (self.api.cuMemHostAlloc)(&mut host, host_len, 0) }, "cuMemHostAlloc")?;
            (self.host, self.host_len) = (host.cast(), host_len);
        }
        Ok(surfaces as c_int)
    }

    /// Decoded picture `picture` (of sample `tag`) copied to the host as YUV 4:2:0.
    pub(super) fn show(&mut self, picture: c_int, tag: usize) -> Result<(), CodecError> {
        let mut status = CUVIDGETDECODESTATUS::default();
        // SAFETY: this state's decoder and a picture it decoded.
        let known = unsafe { (self.api.cuvidGetDecodeStatus)(self.decoder, picture, &mut status) };
        if known == CUDA_SUCCESS && matches!(status.decodeStatus, DECODE_STATUS_ERROR | DECODE_STATUS_ERROR_CONCEALED) {
            return Err(corrupt(format!("NVDEC failed to decode sample {tag}: corrupt data")));
        }
        let mut params = CUVIDPROCPARAMS { progressive_frame: 1, output_stream: self.stream, ..Default::default() };
        let (mut frame, mut pitch): (CUdeviceptr, c_uint) = (0, 0);
        // SAFETY: a decoded picture of this decoder; writes the pointer and pitch.
        let mapped =
            unsafe { (self.api.cuvidMapVideoFrame64)(self.decoder, picture, &mut frame, &mut pitch, &mut params) };
        self.api.check(mapped, "cuvidMapVideoFrame")?;
        let copied = self.copy_to_host(frame, pitch as usize);
        // SAFETY: the frame mapped above.
        let unmapped = unsafe { (self.api.cuvidUnmapVideoFrame64)(self.decoder, frame) };
        copied?;
        self.api.check(unmapped, "cuvidUnmapVideoFrame")?;
        let picture = self.planes()?;
        self.shown.push((tag, picture));
        Ok(())
    }

    /// The mapped NV12 picture (luma rows, then interleaved chroma rows, at
    /// `pitch`) into `self.host`, packed.
    pub(super) fn copy_to_host(&mut self, frame: CUdeviceptr, pitch: usize) -> Result<(), CodecError> {
        let (w, h) = self.target;
        let host = self.host;
        if host.is_null() || self.host_len < w * h * 3 / 2 {
            return Err(corrupt("NVDEC showed a picture before the stream's format"));
        }
        for (offset, src, rows) in [(0, frame, h), (w * h, frame + (pitch * h) as u64, h / 2)] {
            let copy = CUDA_MEMCPY2D {
                srcMemoryType: CU_MEMORYTYPE_DEVICE,
                srcDevice: src,
                srcPitch: pitch,
                dstMemoryType: CU_MEMORYTYPE_HOST,
                // SAFETY: `host` holds `w · h · 3/2` bytes.
                dstHost: unsafe { host.add(offset) }.cast(),
                dstPitch: w,
                WidthInBytes: w,
                Height: rows,
                ..Default::default()
            };
            // SAFETY: both ends hold `rows` rows of `w` bytes; the stream is this session's.
            self.api.check(unsafe { (self.api.cuMemcpy2DAsync)(&copy, self.stream) }, "cuMemcpy2DAsync")?;
        }
        // SAFETY: this session's stream.
        self.api.check(unsafe { (self.api.cuStreamSynchronize)(self.stream) }, "cuStreamSynchronize")
    }

    /// `self.host` (NV12, the even target size) as YUV 4:2:0 planes of the display size.
    pub(super) fn planes(&self) -> Result<Yuv420, CodecError> {
        let ((w, h), (tw, th)) = (self.size, self.target);
        if self.host.is_null() {
            return Err(corrupt("NVDEC showed a picture before the stream's format"));
        }
        // SAFETY: `host` holds `host_len` bytes, written by the copy waited for above.
        let host = unsafe { std::slice::from_raw_parts(self.host, self.host_len) };
        Yuv420::from_nv12(w, h, host, tw, th)
            .ok_or_else(|| corrupt(format!("NVDEC's {tw}×{th} picture is smaller than the video's {w}×{h} frames")))
    }
}

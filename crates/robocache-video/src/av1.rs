//! AV1 decoding on the CPU with rav1d (the Rust port of dav1d, the decoder
//! FFmpeg, PyAV and torchcodec use for AV1): one temporal unit (one MP4
//! sample) in, its shown frame out, as 8-bit YUV planes.
//!
//! rav1d exposes dav1d's C API; every `unsafe` call is in this module.
//!
//! **Two frame contexts, not one.** rav1d 1.1 panics inside its
//! `extern "C"` API when a frame fails to decode with a single frame
//! context (its error path unwraps a frame header that the same error path
//! already took: memorysafety/rav1d#1497, open). A panic cannot unwind out
//! of `extern "C"`: the process aborts, and a training run or a Python
//! interpreter with it; a single flipped bit in an MP4's `mdat` reached it
//! (found by the fuzz harness, `tests/fuzz.rs`). With two frame contexts
//! (two task threads, a frame delay of 2) a decode error takes the other
//! path and comes back as an error. Each sample is still decoded before
//! the next goes in: after sending it, the decoder is drained, so its
//! frame comes out at once, as with one context.

use std::mem::MaybeUninit;
use std::ptr::NonNull;

use rav1d::include::dav1d::data::Dav1dData;
use rav1d::include::dav1d::dav1d::{Dav1dContext, Dav1dSettings};
use rav1d::include::dav1d::headers::{DAV1D_PIXEL_LAYOUT_I400, DAV1D_PIXEL_LAYOUT_I420};
use rav1d::include::dav1d::picture::Dav1dPicture;
use rav1d::src::lib::{
    dav1d_close, dav1d_data_create, dav1d_data_unref, dav1d_default_settings, dav1d_flush, dav1d_get_picture,
    dav1d_open, dav1d_picture_unref, dav1d_send_data,
};

use crate::error::{corrupt, CodecError};
use crate::yuv::Yuv420;

/// dav1d's "try again": `-EAGAIN`.
const EAGAIN: i32 = -11;
/// Frame contexts (and task threads) per decoder: more than one keeps
/// rav1d's single-context error path, which aborts, out of reach.
const FRAME_CONTEXTS: i32 = 2;

/// An open AV1 decoder: two frame contexts (see the module docs), drained
/// after every temporal unit, so that a sample's picture comes out before
/// the next sample goes in.
pub struct Av1Decoder {
    context: Option<Dav1dContext>,
}

impl std::fmt::Debug for Av1Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Av1Decoder").field("open", &self.context.is_some()).finish()
    }
}

// SAFETY: the dav1d context is used from one thread at a time (`&mut self`);
// dav1d contexts may move between threads.
unsafe impl Send for Av1Decoder {}

impl Av1Decoder {
    pub fn new() -> Result<Self, CodecError> {
        let mut settings = MaybeUninit::<Dav1dSettings>::uninit();
        // SAFETY: dav1d_default_settings writes every field of `settings`.
        let mut settings = unsafe {
            dav1d_default_settings(NonNull::new_unchecked(settings.as_mut_ptr()));
            settings.assume_init()
        };
        settings.n_threads = FRAME_CONTEXTS;
        settings.max_frame_delay = FRAME_CONTEXTS;
        let mut context: Option<Dav1dContext> = None;
        // SAFETY: both pointers are valid for the call.
        let result = unsafe { dav1d_open(Some(NonNull::from(&mut context)), Some(NonNull::from(&mut settings))) };
        if result.0 < 0 || context.is_none() {
            return Err(rav1d(result.0, format!("rav1d failed to open a decoder (error {})", result.0)));
        }
        Ok(Av1Decoder { context })
    }

    /// Forgets every reference frame: the next sample must be a key frame.
    pub fn flush(&mut self) {
        if let Some(context) = self.context {
            // SAFETY: `context` is open.
            unsafe { dav1d_flush(context) };
        }
    }

    /// Decodes one temporal unit; returns its shown frame, if it has one
    /// and it is `wanted` (a frame decoded only as a reference for the
    /// next is released inside rav1d, never copied out).
    pub fn decode(&mut self, sample: &[u8], wanted: bool) -> Result<Option<Yuv420>, CodecError> {
        let context = self.context.ok_or_else(|| corrupt("the decoder is closed"))?;
        if sample.is_empty() {
            return Err(corrupt("an empty sample"));
        }
        let mut data = SampleData(Dav1dData::default());
        // SAFETY: `data` is valid; dav1d_data_create allocates `sample.len()` bytes it owns.
        let buffer = unsafe { dav1d_data_create(Some(NonNull::from(&mut data.0)), sample.len()) };
        if buffer.is_null() {
            return Err(CodecError::OutOfMemory(format!("rav1d could not allocate {} bytes", sample.len())));
        }
        // SAFETY: `buffer` holds `sample.len()` writable bytes.
        unsafe { std::ptr::copy_nonoverlapping(sample.as_ptr(), buffer, sample.len()) };
        let mut frame = None;
        // Send until dav1d holds every byte, taking pictures out whenever
        // it asks for room (EAGAIN); bounded, so corrupt data cannot spin.
        for _ in 0..1024 {
            // SAFETY: `context` is open, `data` holds our reference to the bytes.
            let sent = unsafe { dav1d_send_data(Some(context), Some(NonNull::from(&mut data.0))) };
            if sent.0 < 0 && sent.0 != EAGAIN {
                return Err(rav1d(sent.0, format!("rav1d rejected the sample (error {}): corrupt AV1 data", sent.0)));
            }
            while let Some(picture) = picture(context, wanted)? {
                frame = picture;
            }
            if data.0.sz == 0 {
                // Drained: the second call after a `try again` waits for
                // the frames in flight (this sample's) and hands them out.
                while let Some(picture) = picture(context, wanted)? {
                    frame = picture;
                }
                return Ok(frame);
            }
        }
        Err(corrupt("rav1d did not take the sample (corrupt AV1 data)"))
    }
}

/// Our reference to a sample's bytes inside rav1d, released on every path
/// out, errors included (a no-op once rav1d took them all).
struct SampleData(Dav1dData);

impl Drop for SampleData {
    fn drop(&mut self) {
        if self.0.sz > 0 {
            // SAFETY: the data is ours to release.
            unsafe { dav1d_data_unref(Some(NonNull::from(&mut self.0))) };
        }
    }
}

/// The next decoded picture, if one is ready: `Some(None)` where it is
/// not `wanted` (released without a copy).
fn picture(context: Dav1dContext, wanted: bool) -> Result<Option<Option<Yuv420>>, CodecError> {
    let mut picture = Dav1dPicture::default();
    // SAFETY: `context` is open and `picture` is writable.
    let got = unsafe { dav1d_get_picture(Some(context), Some(NonNull::from(&mut picture))) };
    if got.0 == EAGAIN {
        return Ok(None);
    }
    if got.0 < 0 {
        return Err(rav1d(got.0, format!("rav1d failed to decode a frame (error {}): corrupt AV1 data", got.0)));
    }
    let copied = if wanted { copy_picture(&picture).map(Some) } else { Ok(None) };
    // SAFETY: the picture is ours to release.
    unsafe { dav1d_picture_unref(Some(NonNull::from(&mut picture))) };
    copied.map(Some)
}

/// The picture's planes copied out (8-bit 4:2:0, or 4:0:0 with grey chroma).
fn copy_picture(picture: &Dav1dPicture) -> Result<Yuv420, CodecError> {
    let (w, h) = (picture.p.w as usize, picture.p.h as usize);
    if picture.p.bpc != 8 {
        return Err(CodecError::Unsupported(format!(
            "a {}-bit AV1 frame: robocache decodes 8-bit video",
            picture.p.bpc
        )));
    }
    let layout = picture.p.layout;
    if layout != DAV1D_PIXEL_LAYOUT_I420 && layout != DAV1D_PIXEL_LAYOUT_I400 {
        return Err(CodecError::Unsupported(format!("AV1 chroma layout {layout}: robocache decodes 4:2:0 video")));
    }
    let mut out = Yuv420::new(w, h);
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let planes = [(0usize, w, h, 0usize), (1, cw, ch, 1), (2, cw, ch, 1)];
    for (plane, pw, ph, stride_index) in planes {
        let dst = out.plane_mut(plane);
        if plane > 0 && layout == DAV1D_PIXEL_LAYOUT_I400 {
            dst.fill(128);
            continue;
        }
        let Some(src) = picture.data[plane] else { return Err(corrupt(format!("an AV1 frame without plane {plane}"))) };
        let stride = picture.stride[stride_index];
        for row in 0..ph {
            // SAFETY: dav1d's plane `plane` holds `ph` rows of at least `pw`
            // bytes, `stride` apart (the stride may be negative).
            let line =
                unsafe { std::slice::from_raw_parts((src.as_ptr() as *const u8).offset(row as isize * stride), pw) };
            dst[row * pw..(row + 1) * pw].copy_from_slice(line);
        }
    }
    Ok(out)
}

impl Drop for Av1Decoder {
    fn drop(&mut self) {
        if self.context.is_some() {
            // SAFETY: the context is open and closed once.
            unsafe { dav1d_close(Some(NonNull::from(&mut self.context))) };
        }
    }
}

/// A rav1d status code as a [`CodecError::Library`].
fn rav1d(code: i32, message: String) -> CodecError {
    CodecError::Library { decoder: "rav1d", code: code.into(), message }
}

//! HEVC (H.265) decoding on the CPU with libde265 (compiled from its
//! source by cargo and cmake, statically linked: nothing installed by
//! hand). HEVC decoding is exact by the standard, so its frames equal
//! FFmpeg's bit for bit; the fixtures check it.
//!
//! MP4 stores HEVC as size-prefixed NAL units with the parameter sets in
//! the `hvcC` record; libde265 reads Annex B. [`NalConfig`] converts.
//! Pictures come out in presentation order after the stream's reordering
//! delay: each sample goes in tagged with its decode-order index as its
//! presentation time stamp, and each picture comes out with the tag of the
//! sample it was decoded from.
//!
//! A jump to a sample that does not follow the last one decoded resets the
//! decoder (`de265_reset`), as a seek in FFmpeg does: a CRA key frame then starts the
//! stream, and its leading pictures (which refer to frames before it) are
//! not decoded. A warning from libde265 (a reference it could not find, a
//! header it could not parse) fails the sample instead of showing a
//! concealed picture.
//!
//! Every `unsafe` call into libde265 is in this module.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr::NonNull;

use libde265_sys2::{
    de265_chroma, de265_decode, de265_decoder_context, de265_error, de265_free_decoder, de265_get_bits_per_pixel,
    de265_get_chroma_format, de265_get_error_text, de265_get_image_PTS, de265_get_image_height, de265_get_image_plane,
    de265_get_image_width, de265_get_next_picture, de265_get_warning, de265_image, de265_isOK, de265_new_decoder,
    de265_param, de265_push_data, de265_push_end_of_frame, de265_reset, de265_set_parameter_bool,
};

use crate::error::{corrupt, CodecError};
use crate::nal::{AnnexBFeed, NalConfig};
use crate::yuv::Yuv420;

/// A libde265 decoder for one track (no worker threads: decoding runs in
/// the loader's own threads).
pub struct HevcDecoder {
    /// Samples as Annex B; the parameter sets once per decoder start.
    feed: AnnexBFeed,
    context: Context,
}

impl std::fmt::Debug for HevcDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HevcDecoder").field("feed", &self.feed).finish_non_exhaustive()
    }
}

/// An open libde265 decoder context, freed on drop.
struct Context(NonNull<de265_decoder_context>);

// SAFETY: a context without worker threads is used from one thread at a time
// (`&mut self`) and may move between threads.
unsafe impl Send for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the context is open, and freed once.
        unsafe { de265_free_decoder(self.0.as_ptr()) };
    }
}

impl Context {
    fn open() -> Result<Self, CodecError> {
        // SAFETY: a plain constructor; null is its failure.
        let context = NonNull::new(unsafe { de265_new_decoder() }).ok_or_else(|| CodecError::Library {
            decoder: "libde265",
            code: -1,
            message: "libde265 failed to open a decoder".into(),
        })?;
        // SAFETY: the context is open. A picture with errors is not shown:
        // its sample then fails, where FFmpeg would show a concealed picture.
        unsafe {
            de265_set_parameter_bool(context.as_ptr(), de265_param::DE265_DECODER_PARAM_SUPPRESS_FAULTY_PICTURES, 1)
        };
        Ok(Context(context))
    }

    fn as_ptr(&self) -> *mut de265_decoder_context {
        self.0.as_ptr()
    }
}

impl HevcDecoder {
    /// A decoder for the track whose `hvcC` record is `record`.
    pub fn new(record: &[u8]) -> Result<Self, CodecError> {
        let config = NalConfig::from_hvcc(record)?;
        Ok(HevcDecoder { feed: AnnexBFeed::new(config), context: Context::open()? })
    }

    /// Decodes sample `tag` (its decode-order index); returns the pictures
    /// this sample let out, each with the tag of the sample it shows (also
    /// pictures of an earlier group of pictures).
    pub fn decode(&mut self, tag: usize, sample: &[u8]) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        if self.feed.start(tag, sample)? {
            // A jump: start over as after a seek (see `finish`).
            // SAFETY: the context is open.
            unsafe { de265_reset(self.context.as_ptr()) };
            self.feed.decoder_restarted();
        }
        let mut shown = Vec::new();
        let pts = i64::try_from(tag).map_err(|_| corrupt(format!("sample {tag} has no HEVC time stamp")))?;
        if let Some(parameter_sets) = self.feed.parameter_sets_once() {
            push(&self.context, parameter_sets, pts)?;
        }
        push(&self.context, self.feed.annex_b(), pts)?;
        // SAFETY: the context is open.
        unsafe { de265_push_end_of_frame(self.context.as_ptr()) };
        self.run(&mut shown)?;
        Ok(shown)
    }

    /// The pictures still held back, at the end of a request (none: each
    /// sample is pushed as a whole frame, and libde265 lets every picture
    /// out once its frame's NAL units are decoded); the decoder starts
    /// over, so the next sample must be a key frame.
    pub fn finish(&mut self) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        let mut shown = Vec::new();
        self.run(&mut shown)?;
        // Every picture and the position in the stream forgotten, as after
        // a seek: a CRA key frame decoded next starts the stream, its
        // leading pictures skipped. The parameter sets go in again.
        // SAFETY: the context is open.
        unsafe { de265_reset(self.context.as_ptr()) };
        self.feed.reset();
        Ok(shown)
    }

    /// Decodes what was pushed, as far as it goes; pictures it lets out go to `shown`.
    fn run(&mut self, shown: &mut Vec<(usize, Yuv420)>) -> Result<(), CodecError> {
        // Bounded: each round decodes a NAL unit or lets a picture out; a
        // sample holds a few NAL units, and the picture buffer 16 pictures.
        for _ in 0..4096 {
            let mut more: c_int = 0;
            // SAFETY: the context is open; `more` is writable.
            let status = unsafe { de265_decode(self.context.as_ptr(), &mut more) };
            self.check_warnings()?;
            // SAFETY: the context is open; the picture is read before the next call.
            while let Some(image) = NonNull::new(unsafe { de265_get_next_picture(self.context.as_ptr()) }.cast_mut()) {
                shown.push(picture(image)?);
            }
            match status {
                de265_error::DE265_ERROR_WAITING_FOR_INPUT_DATA => return Ok(()),
                de265_error::DE265_ERROR_IMAGE_BUFFER_FULL => continue,
                status => check(status)?,
            }
            if more == 0 {
                return Ok(());
            }
        }
        Err(corrupt("libde265 kept decoding without end: corrupt HEVC data"))
    }

    /// A warning libde265 raised while decoding fails the sample.
    fn check_warnings(&mut self) -> Result<(), CodecError> {
        // SAFETY: the context is open.
        let warning = unsafe { de265_get_warning(self.context.as_ptr()) };
        if warning == de265_error::DE265_OK {
            return Ok(());
        }
        Err(problem(warning))
    }
}

/// Pushes Annex B bytes tagged `pts`.
fn push(context: &Context, annex_b: &[u8], pts: i64) -> Result<(), CodecError> {
    let size = i32::try_from(annex_b.len()).map_err(|_| corrupt(format!("a sample of {} bytes", annex_b.len())))?;
    // SAFETY: the context is open; `annex_b` holds `size` bytes, copied by the call.
    check(unsafe { de265_push_data(context.as_ptr(), annex_b.as_ptr().cast(), size, pts, std::ptr::null_mut()) })
}

fn check(status: de265_error::Type) -> Result<(), CodecError> {
    // SAFETY: a pure function of the code.
    if unsafe { de265_isOK(status) } != 0 {
        return Ok(());
    }
    Err(problem(status))
}

/// An error or warning code of libde265 as the sample's problem.
fn problem(status: de265_error::Type) -> CodecError {
    // SAFETY: libde265 returns a static string for every code.
    let text = unsafe { de265_get_error_text(status) };
    let text = if text.is_null() {
        format!("error {status}")
    } else {
        // SAFETY: a NUL-terminated static string.
        unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
    };
    let message = format!("libde265: {text}: corrupt or unsupported HEVC data");
    CodecError::Library { decoder: "libde265", code: i64::from(status), message }
}

/// The picture libde265 let out, copied (it lives until the next call).
fn picture(image: NonNull<de265_image>) -> Result<(usize, Yuv420), CodecError> {
    let image = image.as_ptr().cast_const();
    // SAFETY: `image` is the picture just taken from an open decoder.
    let (format, depth) = unsafe { (de265_get_chroma_format(image), de265_get_bits_per_pixel(image, 0)) };
    if format != de265_chroma::de265_chroma_420 || depth != 8 {
        return Err(CodecError::Unsupported(format!(
            "an HEVC frame of chroma format {format} at {depth} bits: robocache decodes 8-bit 4:2:0 video"
        )));
    }
    // SAFETY: as above; widths and heights are those of the cropped picture.
    let (w, h) = unsafe { (de265_get_image_width(image, 0), de265_get_image_height(image, 0)) };
    let (w, h) = (w.max(0) as usize, h.max(0) as usize);
    let mut out = Yuv420::new(w, h);
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    for (plane, (pw, ph)) in [(w, h), (cw, ch), (cw, ch)].into_iter().enumerate() {
        let mut stride: c_int = 0;
        // SAFETY: as above; the channel is 0, 1 or 2.
        let (data, width, height) = unsafe {
            let data = de265_get_image_plane(image, plane as c_int, &mut stride);
            (data, de265_get_image_width(image, plane as c_int), de265_get_image_height(image, plane as c_int))
        };
        let stride = stride.max(0) as usize;
        if data.is_null() || (width.max(0) as usize, height.max(0) as usize) != (pw, ph) || stride < pw {
            return Err(corrupt(format!("libde265 showed a {w}x{h} frame whose plane {plane} is not {pw}x{ph}")));
        }
        let dst = out.plane_mut(plane);
        for row in 0..ph {
            // SAFETY: the plane holds `ph` rows of `pw` bytes, `stride` apart.
            let line = unsafe { std::slice::from_raw_parts(data.add(row * stride), pw) };
            dst[row * pw..(row + 1) * pw].copy_from_slice(line);
        }
    }
    // SAFETY: as above.
    let pts = unsafe { de265_get_image_PTS(image) };
    let tag =
        usize::try_from(pts).map_err(|_| corrupt(format!("an HEVC frame of time stamp {pts}, which no sample has")))?;
    Ok((tag, out))
}

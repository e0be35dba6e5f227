//! H.264 decoding on the CPU with OpenH264 (Cisco's decoder, compiled from
//! source by cargo: nothing installed by hand). H.264 decoding is exact by
//! the standard, so its frames equal FFmpeg's (what LeRobot decodes) bit for
//! bit; the fixtures check it.
//!
//! MP4 stores H.264 as length-prefixed NAL units with the parameter sets in
//! the `avcC` record; OpenH264 reads Annex B (start codes). [`NalConfig`]
//! converts. Pictures come out in presentation order, after a reordering
//! delay when the stream has B-frames: every sample goes in tagged with its
//! decode-order index, and every picture comes out with the tag of the
//! sample it was decoded from.
//!
//! Every `unsafe` call into OpenH264 is in this module.

use std::ptr::null_mut;

use openh264::decoder::{Decoder, DecoderConfig, Flush};
use openh264::OpenH264API;
use openh264_sys2::{
    dsErrorFree, videoFormatI420, SBufferInfo, DECODER_OPTION, DECODER_OPTION_NUM_OF_FRAMES_REMAINING_IN_BUFFER,
};

use crate::error::{corrupt, CodecError};
use crate::nal::{AnnexBFeed, NalConfig};
use crate::yuv::Yuv420;

/// An OpenH264 decoder for one track (single-threaded: decoding runs in the
/// loader's own threads).
pub struct H264Decoder {
    /// Samples as Annex B; the parameter sets once per decoder (sent again,
    /// OpenH264 reallocates its pictures each time and runs out of memory
    /// after a few dozen groups).
    feed: AnnexBFeed,
    decoder: Decoder,
}

impl std::fmt::Debug for H264Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H264Decoder").field("feed", &self.feed).finish_non_exhaustive()
    }
}

impl H264Decoder {
    /// A decoder for the track whose `avcC` record is `record`.
    pub fn new(record: &[u8]) -> Result<Self, CodecError> {
        let config = NalConfig::from_avcc(record)?;
        Ok(H264Decoder { feed: AnnexBFeed::new(config), decoder: open()? })
    }

    /// Decodes sample `tag` (its decode-order index); returns the pictures
    /// this sample let out, each with the tag of the sample it shows. They
    /// may be pictures of earlier samples, also of an earlier group of
    /// pictures: a jump to the next group's IDR frame needs no flush, and
    /// lets the last picture of the group before out.
    pub fn decode(&mut self, tag: usize, sample: &[u8]) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        // A group that starts at an I frame that is not an IDR (streams with
        // open GOPs mark these as sync samples), reached by a jump: OpenH264
        // takes the gap in frame numbers for lost frames and fails, so it
        // starts over with a new decoder, as a seek in FFmpeg does.
        let jumped = self.feed.start(tag, sample)?;
        let mut shown = Vec::new();
        if jumped && !has_idr(self.feed.annex_b()) {
            shown = self.flush()?;
            self.decoder = open()?;
            self.feed.decoder_restarted();
        }
        if let Some(parameter_sets) = self.feed.parameter_sets_once() {
            send(&mut self.decoder, parameter_sets, u64::MAX, &mut shown)?;
        }
        send(&mut self.decoder, self.feed.annex_b(), tag as u64, &mut shown)?;
        Ok(shown)
    }

    /// The pictures still held back (for reordering, or one sample late as
    /// OpenH264 lets pictures of Main and High profile streams out), at the
    /// end of a request; the next sample must be a key frame.
    pub fn finish(&mut self) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        let shown = self.flush()?;
        if !shown.is_empty() {
            // OpenH264 2.6 keeps a reference to every picture FlushFrame lets
            // out (single-threaded, without B-frames: its release does not
            // find the picture buffer), and fails with "out of memory" a few
            // groups later. A new decoder frees them: once per request, as
            // groups of pictures follow each other without a flush.
            self.decoder = open()?;
            self.feed.reset();
        }
        Ok(shown)
    }

    /// Every picture held back, through FlushFrame.
    fn flush(&mut self) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        let mut shown = Vec::new();
        // Bounded: the reorder buffer holds at most 16 frames.
        for _ in 0..32 {
            if self.frames_held()? == 0 {
                break;
            }
            let mut planes = [null_mut::<u8>(); 3];
            let mut info = SBufferInfo::default();
            // SAFETY: the decoder is open; `planes` and `info` are writable.
            let state = unsafe { self.decoder.raw_api().flush_frame(planes.as_mut_ptr(), &mut info) };
            if state != dsErrorFree {
                return Err(openh264(
                    state,
                    format!("OpenH264 failed to flush a frame (state {state:#x}): corrupt H.264 data"),
                ));
            }
            if info.iBufferStatus == 1 {
                shown.push(picture(&planes, &info)?);
            }
        }
        Ok(shown)
    }

    fn frames_held(&mut self) -> Result<usize, CodecError> {
        let mut held: DECODER_OPTION = 0;
        // SAFETY: the decoder is open; the option writes one int.
        let status = unsafe {
            self.decoder.raw_api().get_option(DECODER_OPTION_NUM_OF_FRAMES_REMAINING_IN_BUFFER, (&raw mut held).cast())
        };
        if status != 0 {
            return Err(openh264(status, format!("OpenH264 did not say how many frames it holds (error {status})")));
        }
        Ok(held.max(0) as usize)
    }
}

/// Sends Annex B bytes tagged `tag`; a picture this lets out goes to `shown`.
fn send(decoder: &mut Decoder, annex_b: &[u8], tag: u64, shown: &mut Vec<(usize, Yuv420)>) -> Result<(), CodecError> {
    let size = i32::try_from(annex_b.len()).map_err(|_| corrupt(format!("a sample of {} bytes", annex_b.len())))?;
    let mut planes = [null_mut::<u8>(); 3];
    let mut info = SBufferInfo { uiInBsTimeStamp: tag, ..SBufferInfo::default() };
    // SAFETY: the decoder is open; `annex_b` holds `size` bytes; `planes`
    // and `info` are writable.
    let state =
        unsafe { decoder.raw_api().decode_frame_no_delay(annex_b.as_ptr(), size, planes.as_mut_ptr(), &mut info) };
    if state != dsErrorFree {
        return Err(openh264(
            state,
            format!("OpenH264 failed to decode (state {state:#x}): corrupt or unsupported H.264 data"),
        ));
    }
    if info.iBufferStatus == 1 {
        shown.push(picture(&planes, &info)?);
    }
    Ok(())
}

/// A decoder whose wrapper never flushes on its own: robocache flushes once, at the end of a request.
fn open() -> Result<Decoder, CodecError> {
    let settings = DecoderConfig::new().flush_after_decode(Flush::NoFlush);
    Decoder::with_api_config(OpenH264API::from_source(), settings).map_err(|error| CodecError::Library {
        decoder: "OpenH264",
        code: -1,
        message: format!("OpenH264 failed to open a decoder: {error}"),
    })
}

/// Whether an Annex B sample holds an IDR slice (NAL unit type 5).
fn has_idr(annex_b: &[u8]) -> bool {
    annex_b.windows(4).any(|w| w[..3] == [0, 0, 1] && w[3] & 0x1f == 5)
}

/// The picture OpenH264 let out, copied (its planes live until the next call).
fn picture(planes: &[*mut u8; 3], info: &SBufferInfo) -> Result<(usize, Yuv420), CodecError> {
    // SAFETY: with iBufferStatus 1, OpenH264 filled the system-buffer member.
    let buffer = unsafe { info.UsrData.sSystemBuffer };
    if buffer.iFormat != videoFormatI420 {
        return Err(CodecError::Unsupported(format!(
            "an H.264 frame in OpenH264 format {}: robocache decodes 4:2:0 video",
            buffer.iFormat
        )));
    }
    let (w, h) = (buffer.iWidth.max(0) as usize, buffer.iHeight.max(0) as usize);
    let strides = [buffer.iStride[0] as usize, buffer.iStride[1] as usize, buffer.iStride[1] as usize];
    if planes.iter().any(|p| p.is_null()) || w == 0 || h == 0 || strides[0] < w || strides[1] < w.div_ceil(2) {
        return Err(corrupt("OpenH264 showed a frame without its planes"));
    }
    let mut out = Yuv420::new(w, h);
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    for (plane, (pw, ph)) in [(w, h), (cw, ch), (cw, ch)].into_iter().enumerate() {
        let dst = out.plane_mut(plane);
        for row in 0..ph {
            // SAFETY: OpenH264's plane holds `ph` rows of `pw` bytes, `stride` apart.
            let line = unsafe { std::slice::from_raw_parts(planes[plane].add(row * strides[plane]), pw) };
            dst[row * pw..(row + 1) * pw].copy_from_slice(line);
        }
    }
    let tag = usize::try_from(info.uiOutYuvTimeStamp).map_err(|_| corrupt("a frame of no sample"))?;
    Ok((tag, out))
}

/// An OpenH264 state or status code as a [`CodecError::Library`].
fn openh264(code: impl Into<i64>, message: String) -> CodecError {
    CodecError::Library { decoder: "OpenH264", code: code.into(), message }
}

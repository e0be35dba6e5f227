//! Decoding on the GPU's video engines (NVDEC), through the NVIDIA
//! driver's `libnvcuvid.so.1`, loaded at run time ([`ffi`]): H.264 and HEVC
//! on every NVDEC GPU, AV1 where the GPU decodes it (Ada, Blackwell; the
//! H100 does not). Decoding is exact by each codec's standard, so the frames
//! equal the CPU decoders' (and FFmpeg's) bit for bit.
//!
//! NVDEC's parser reads Annex B (H.264, HEVC) or AV1's OBUs and calls back
//! when it knows the stream's format (the hardware decoder is created then,
//! or the last one kept when the format is the same) and for each picture
//! to decode. Each sample goes in as one packet marked as one whole
//! picture, so its picture is decoded in decode order, while the packet is
//! parsed. Right after its decode, the picture is mapped (NV12, in GPU
//! memory), copied to the host on the session's own stream and split into
//! YUV 4:2:0 planes, cropped to the display area, tagged with its sample's
//! decode index, which the callers key frames by. The parser's display
//! callback (pictures in presentation order) is not used: it hands back the
//! packets' timestamps sorted, not the picture's own, and shows a stream's
//! last picture only at a later end of stream. Samples sent and pictures
//! decoded are counted one for one: a sample without a picture, or with
//! two, is an error, never a frame given another sample's tag.
//!
//! Sessions (a stream, a hardware decoder and its surfaces in GPU memory)
//! belong to the GPU, not to a file: a request takes an idle one, sets it
//! to its file's codec and parameter sets, and gives it back. A request of
//! [`crate::DecoderChoice::Auto`] takes one only while fewer than its
//! `nvdec_sessions` are in use on the GPU; past that, it decodes on the
//! CPU beside them. A session idle for [`IDLE_SESSION_RELEASE`] is
//! released (a thread runs while any are idle), so a process that stopped
//! decoding holds no decoder memory.
//!
//! Every `unsafe` call into the driver is in this module and [`ffi`].

mod ffi;
mod gpu;
mod session;

use gpu::nvdec_codec;
pub use gpu::{Gpu, DEFAULT_SESSIONS, IDLE_SESSION_RELEASE};
pub use session::Session;
use session::State;

use std::ffi::{c_int, c_ulong, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;

use ffi::*;

use crate::error::{corrupt, CodecError};
use crate::mp4::Codec;
use crate::nal::NalConfig;
use crate::yuv::Yuv420;

/// What a track feeds the parser: Annex B with its parameter sets, or AV1
/// OBUs with the sequence header of its `av1C` record.
#[derive(Clone, Debug)]
pub enum Input {
    Nal(NalConfig),
    Av1 { config_obus: Vec<u8> },
}

impl Input {
    /// The input of a track of `codec` whose configuration record is `record`.
    pub fn new(codec: Codec, record: &[u8]) -> Result<Input, CodecError> {
        Ok(match codec {
            Codec::H264 => Input::Nal(NalConfig::from_avcc(record)?),
            Codec::Hevc => Input::Nal(NalConfig::from_hvcc(record)?),
            // av1C: 4 bytes of fields, then the configuration OBUs.
            Codec::Av1 => Input::Av1 { config_obus: record.get(4..).unwrap_or_default().to_vec() },
        })
    }
}

/// A session decoding one track's samples for one request.
pub struct NvdecDecoder {
    session: Option<Session>,
    codec: Codec,
    input: Input,
    parser: CUvideoparser,
    packet: Vec<u8>,
    last_tag: Option<usize>,
    /// The parameter sets go in before the next sample.
    group_start: bool,
}

// SAFETY: the parser handle is used only by the owning thread.
unsafe impl Send for NvdecDecoder {}

impl std::fmt::Debug for NvdecDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvdecDecoder").field("codec", &self.codec).finish_non_exhaustive()
    }
}

impl NvdecDecoder {
    pub fn new(session: Session, codec: Codec, input: Input) -> NvdecDecoder {
        NvdecDecoder {
            session: Some(session),
            codec,
            input,
            parser: null_mut(),
            packet: Vec::new(),
            last_tag: None,
            group_start: true,
        }
    }

    /// Gives the session back to its GPU's idle list (after a request that succeeded).
    pub fn give_back(mut self) {
        self.destroy_parser();
        if let Some(session) = self.session.take() {
            session.gpu.clone().put_session(session);
        }
    }

    /// The next sample is a key frame.
    pub fn start_group(&mut self) {
        self.group_start = true;
    }

    /// Decodes sample `tag` (its decode index); returns the pictures
    /// decoded so far of the samples `wanted` (the others are decoded as
    /// references and never leave the GPU).
    pub fn decode(&mut self, tag: usize, wanted: bool, sample: &[u8]) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        // A jump (to the key frame of a later group): the pictures held back
        // come out at an end of stream, and a new parser starts the group
        // (the hardware decoder is kept), as after a seek.
        let mut shown = Vec::new();
        if self.last_tag.is_some_and(|last| last + 1 != tag) {
            shown = self.finish()?;
        }
        self.packet.clear();
        if self.group_start {
            match &self.input {
                Input::Nal(config) => self.packet.extend_from_slice(config.parameter_sets()),
                Input::Av1 { config_obus } => self.packet.extend_from_slice(config_obus),
            }
            self.group_start = false;
        }
        match &self.input {
            Input::Nal(config) => config.append_annex_b(sample, &mut self.packet)?,
            Input::Av1 { .. } => self.packet.extend_from_slice(sample),
        }
        self.last_tag = Some(tag);
        // SAFETY: no parser call runs here.
        unsafe { self.session()?.state() }.pending.push_back((tag, wanted));
        let timestamp = i64::try_from(tag).map_err(|_| corrupt(format!("sample {tag}")))?;
        shown.extend(self.parse(PKT_TIMESTAMP | PKT_ENDOFPICTURE, timestamp)?);
        Ok(shown)
    }

    /// Every picture still held back, at the end of a request.
    pub fn finish(&mut self) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        if self.parser.is_null() {
            return Ok(Vec::new());
        }
        self.packet.clear();
        let mut shown = self.parse(PKT_ENDOFSTREAM | PKT_NOTIFY_EOS, 0);
        if let (Ok(_), Ok(session)) = (&shown, self.session()) {
            // SAFETY: no parser call runs here.
            if let Some(&(tag, _)) = unsafe { session.state() }.pending.front() {
                shown = Err(corrupt(format!("NVDEC decoded no picture for sample {tag}: corrupt or unsupported data")));
            }
        }
        self.destroy_parser();
        self.last_tag = None;
        self.group_start = true;
        shown
    }

    fn session(&mut self) -> Result<&mut Session, CodecError> {
        self.session.as_mut().ok_or_else(|| corrupt("the NVDEC session was given back"))
    }

    /// Sends `self.packet` to the parser (made first if there is none).
    fn parse(&mut self, flags: c_ulong, timestamp: i64) -> Result<Vec<(usize, Yuv420)>, CodecError> {
        let codec = nvdec_codec(self.codec);
        let (packet, parser) = (&self.packet, &mut self.parser);
        let session = self.session.as_mut().ok_or_else(|| corrupt("the NVDEC session was given back"))?;
        let (gpu, state) = (&session.gpu, session.state.as_ptr());
        let api = gpu.api;
        let result = gpu.with_context(|| -> Result<(), CodecError> {
            if parser.is_null() {
                let mut params = CUVIDPARSERPARAMS {
                    CodecType: codec,
                    ulMaxNumDecodeSurfaces: 1,
                    // Pictures shown as soon as their order allows.
                    ulMaxDisplayDelay: 0,
                    pUserData: state.cast(),
                    pfnSequenceCallback: Some(on_sequence),
                    pfnDecodePicture: Some(on_decode),
                    pfnDisplayPicture: Some(on_display),
                    ..Default::default()
                };
                // SAFETY: `params` is valid; `state` outlives the parser
                // (the parser is destroyed before the session is given back or dropped).
                api.check(unsafe { (api.cuvidCreateVideoParser)(parser, &mut params) }, "cuvidCreateVideoParser")?;
            }
            let mut data = CUVIDSOURCEDATAPACKET {
                flags,
                payload_size: packet.len() as c_ulong,
                payload: if packet.is_empty() { std::ptr::null() } else { packet.as_ptr() },
                timestamp,
            };
            // SAFETY: the parser is live; the payload is `packet`, alive for the call.
            let result = unsafe { (api.cuvidParseVideoData)(*parser, &mut data) };
            api.check(result, "cuvidParseVideoData")
        })?;
        // SAFETY: the parser call is over; this is the only reference now.
        let state = unsafe { session.state() };
        let error = state.error.take();
        let shown = std::mem::take(&mut state.shown);
        match (result, error) {
            (_, Some(error)) | (Err(error), None) => Err(error),
            (Ok(()), None) => Ok(shown),
        }
    }

    fn destroy_parser(&mut self) {
        if self.parser.is_null() {
            return;
        }
        let parser = std::mem::replace(&mut self.parser, null_mut());
        if let Ok(session) = self.session() {
            let api = session.gpu.api;
            // SAFETY: the parser is live and used by no one else.
            let _ = session.gpu.with_context(|| unsafe { (api.cuvidDestroyVideoParser)(parser) });
            // SAFETY: the parser is destroyed: no call of it runs.
            let state = unsafe { session.state() };
            state.shown.clear();
            state.error = None;
            state.pending.clear();
        }
    }
}

impl Drop for NvdecDecoder {
    fn drop(&mut self) {
        self.destroy_parser();
    }
}

/// Runs a callback's body, turning an error (or a panic) into the state's
/// error and a 0 (stop) for the parser.
///
/// # Safety
/// `user` is the `State` the parser was made with.
unsafe fn callback(user: *mut c_void, body: impl FnOnce(&mut State) -> Result<c_int, CodecError>) -> c_int {
    // SAFETY: the caller's contract.
    let state = unsafe { &mut *user.cast::<State>() };
    if state.error.is_some() {
        return 0;
    }
    match catch_unwind(AssertUnwindSafe(|| body(&mut *state))) {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) => {
            state.error = Some(error);
            0
        }
        Err(_) => {
            state.error = Some(corrupt("robocache's NVDEC callback panicked"));
            0
        }
    }
}

unsafe extern "C" fn on_sequence(user: *mut c_void, format: *mut CUVIDEOFORMAT) -> c_int {
    // SAFETY: the parser passes its state and a valid format.
    unsafe { callback(user, |state| state.configure(&*format)) }
}

unsafe extern "C" fn on_decode(user: *mut c_void, picture: *mut c_void) -> c_int {
    // SAFETY: the parser passes its state and the picture's parameters.
    unsafe {
        callback(user, |state| {
            if state.decoder.is_null() {
                return Err(corrupt("NVDEC's parser gave a picture before the stream's format"));
            }
            state.api.check((state.api.cuvidDecodePicture)(state.decoder, picture), "cuvidDecodePicture")?;
            let head = &*picture.cast::<PicParamsHead>();
            if head.field_pic_flag != 0 {
                return Err(CodecError::Unsupported(
                    "a field picture (interlaced video): robocache reads progressive video".into(),
                ));
            }
            let (tag, wanted) = state.pending.pop_front().ok_or_else(|| {
                corrupt("NVDEC decoded more pictures than samples were sent (a sample holding two pictures)")
            })?;
            if wanted {
                state.show(head.CurrPicIdx, tag)?;
            }
            Ok(1)
        })
    }
}

/// Pictures were copied out at their decode: showing them is done.
unsafe extern "C" fn on_display(_user: *mut c_void, _info: *mut CUVIDPARSERDISPINFO) -> c_int {
    1
}

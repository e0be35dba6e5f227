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
//! CPU beside them.
//!
//! Every `unsafe` call into the driver is in this module and [`ffi`].

mod ffi;

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_int, c_uint, c_ulong, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use ffi::*;

use crate::mp4::Codec;
use crate::nal::NalConfig;
use crate::yuv::Yuv420;

/// The most NVDEC sessions in use at once on a GPU for requests that may
/// also decode on the CPU, unless they say otherwise
/// ([`crate::DecoderChoice::Auto`]). Each session holds its decode surfaces
/// in GPU memory (about 10 MB for 480×640 H.264).
pub const DEFAULT_SESSIONS: usize = 32;

/// Whether NVDEC decodes a codec: its smallest and largest width and height, or why not.
type Caps = Result<[(u32, u32); 2], String>;

/// One GPU's primary context (the one the CUDA runtime and robocache's
/// kernels use), its idle sessions and what its NVDEC decodes.
pub struct Gpu {
    api: &'static Api,
    device: u32,
    context: CUcontext,
    idle: Mutex<Vec<Session>>,
    /// Sessions handed out and not given back.
    busy: AtomicUsize,
    /// Per codec: `Ok` where NVDEC decodes it (8-bit 4:2:0), with its largest size.
    caps: Mutex<HashMap<Codec, Caps>>,
}

// SAFETY: a CUDA context handle may be made current on any thread; the
// sessions inside are used by one thread at a time (taken out of the mutex).
unsafe impl Send for Gpu {}
// SAFETY: as above; the shared state is behind mutexes and atomics.
unsafe impl Sync for Gpu {}

impl Gpu {
    /// GPU `device`, opened once per process.
    pub fn get(device: u32) -> Result<Arc<Gpu>, String> {
        static GPUS: OnceLock<Mutex<HashMap<u32, Arc<Gpu>>>> = OnceLock::new();
        let mut gpus = GPUS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
        if let Some(gpu) = gpus.get(&device) {
            return Ok(gpu.clone());
        }
        let api = Api::get()?;
        let mut handle: CUdevice = 0;
        let ordinal = c_int::try_from(device).map_err(|_| format!("no GPU {device}"))?;
        // SAFETY: writes one device handle.
        api.check(unsafe { (api.cuDeviceGet)(&mut handle, ordinal) }, "cuDeviceGet")?;
        let mut context: CUcontext = null_mut();
        // SAFETY: writes one context handle; the primary context is retained
        // for the process's life (never released: other users share it).
        api.check(unsafe { (api.cuDevicePrimaryCtxRetain)(&mut context, handle) }, "cuDevicePrimaryCtxRetain")?;
        let gpu = Arc::new(Gpu {
            api,
            device,
            context,
            idle: Mutex::new(Vec::new()),
            busy: AtomicUsize::new(0),
            caps: Mutex::new(HashMap::new()),
        });
        gpus.insert(device, gpu.clone());
        Ok(gpu)
    }

    /// Runs `f` with this GPU's context current on the calling thread.
    /// The context is popped on every path out, a panic in `f` included.
    fn with_context<T>(&self, f: impl FnOnce() -> T) -> Result<T, String> {
        /// Pops the context pushed with it when dropped (on a panic's unwind).
        struct Pushed<'a>(&'a Api);
        impl Drop for Pushed<'_> {
            fn drop(&mut self) {
                let mut popped: CUcontext = null_mut();
                // SAFETY: pops the context pushed when this guard was made.
                unsafe { (self.0.cuCtxPopCurrent)(&mut popped) };
            }
        }
        // SAFETY: the context is retained for the process's life.
        self.api.check(unsafe { (self.api.cuCtxPushCurrent)(self.context) }, "cuCtxPushCurrent")?;
        let pushed = Pushed(self.api);
        let result = f();
        // The normal path pops here, to report the driver's answer.
        std::mem::forget(pushed);
        let mut popped: CUcontext = null_mut();
        // SAFETY: pops the context pushed above.
        self.api.check(unsafe { (self.api.cuCtxPopCurrent)(&mut popped) }, "cuCtxPopCurrent")?;
        Ok(result)
    }

    /// `Ok` where this GPU's NVDEC decodes `codec` (8-bit 4:2:0) at `width × height`.
    pub fn supports(&self, codec: Codec, width: u32, height: u32) -> Result<(), String> {
        let caps = {
            let mut known = self.caps.lock().unwrap_or_else(|p| p.into_inner());
            match known.get(&codec) {
                Some(caps) => caps.clone(),
                None => {
                    let caps = self.query_caps(codec)?;
                    known.insert(codec, caps.clone());
                    caps
                }
            }
        };
        let [(min_width, min_height), (max_width, max_height)] = caps?;
        if width < min_width || height < min_height || width > max_width || height > max_height {
            return Err(format!(
                "GPU {}'s NVDEC decodes {} from {min_width}x{min_height} to {max_width}x{max_height}, the video is {width}x{height}",
                self.device,
                codec.name()
            ));
        }
        Ok(())
    }

    fn query_caps(&self, codec: Codec) -> Result<Caps, String> {
        let mut caps =
            CUVIDDECODECAPS { eCodecType: nvdec_codec(codec), eChromaFormat: CHROMA_420, ..Default::default() };
        let api = self.api;
        // SAFETY: `caps` is a valid CUVIDDECODECAPS; the context is current.
        let result = self.with_context(|| unsafe { (api.cuvidGetDecoderCaps)(&mut caps) })?;
        api.check(result, "cuvidGetDecoderCaps")?;
        Ok(if caps.bIsSupported == 0 {
            Err(format!("GPU {}'s NVDEC does not decode {} (8-bit 4:2:0)", self.device, codec.name()))
        } else {
            Ok([(caps.nMinWidth.into(), caps.nMinHeight.into()), (caps.nMaxWidth, caps.nMaxHeight)])
        })
    }

    /// An idle session, or a new one: always where there is no `limit`,
    /// else only while fewer than `limit` are in use (`Ok(None)` past that).
    pub fn take_session(self: &Arc<Self>, limit: Option<usize>) -> Result<Option<Session>, String> {
        let claimed = self.busy.fetch_update(Ordering::AcqRel, Ordering::Acquire, |busy| {
            limit.is_none_or(|limit| busy < limit).then_some(busy + 1)
        });
        if claimed.is_err() {
            return Ok(None);
        }
        if let Some(session) = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(Some(session));
        }
        // A session that is never made is not in use.
        Session::new(self.clone()).map(Some).inspect_err(|_| {
            self.busy.fetch_sub(1, Ordering::AcqRel);
        })
    }

    /// Gives a session back for the next request.
    fn put_session(&self, session: Session) {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).push(session);
        self.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

fn nvdec_codec(codec: Codec) -> c_int {
    match codec {
        Codec::Av1 => CODEC_AV1,
        Codec::H264 => CODEC_H264,
        Codec::Hevc => CODEC_HEVC,
    }
}

/// A stream and a hardware decoder of one GPU, used by one request at a time.
pub struct Session {
    gpu: Arc<Gpu>,
    /// The parser's callbacks hold this address: the state is reached
    /// through this one raw pointer (`Box::into_raw`, freed in `Drop`), and
    /// a `&mut State` is made only for a short step outside the parser's
    /// calls (never one that lives across `cuvidParseVideoData`, while the
    /// callbacks make their own).
    state: std::ptr::NonNull<State>,
}

impl Session {
    /// The state, for one step while no parser call runs.
    ///
    /// # Safety
    ///
    /// No parser call of this session may run while the reference lives
    /// (the callbacks make their own `&mut State` from the raw pointer).
    unsafe fn state(&mut self) -> &mut State {
        // SAFETY: the pointer is from `Box::into_raw` and freed only in
        // `Drop`; `&mut self` and the caller's promise make this the only reference.
        unsafe { self.state.as_mut() }
    }
}

// SAFETY: the handles inside are used by one thread at a time (the owner's),
// with the GPU's context pushed around every call.
unsafe impl Send for Session {}

/// What the parser's callbacks work on.
struct State {
    api: &'static Api,
    stream: CUstream,
    decoder: CUvideodecoder,
    /// The format the hardware decoder was made for, and its surfaces.
    made_for: Option<(DecoderFormat, c_uint)>,
    /// Display size (cropped) and the even size NVDEC writes.
    size: (usize, usize),
    target: (usize, usize),
    /// One NV12 picture on the host, page-locked (the copy from the GPU
    /// goes straight into it), and its size; null before the first format.
    host: *mut u8,
    host_len: usize,
    shown: Vec<(usize, Yuv420)>,
    error: Option<String>,
    /// Decode indices of the samples sent whose picture is not decoded
    /// yet, and whether their frame is wanted on the host.
    pending: VecDeque<(usize, bool)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DecoderFormat {
    codec: c_int,
    coded: (c_uint, c_uint),
    /// Left, top, and the even width and height NVDEC writes.
    area: (c_int, c_int, usize, usize),
    min_surfaces: u8,
}

impl Session {
    fn new(gpu: Arc<Gpu>) -> Result<Session, String> {
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
        Ok(Session { gpu, state: unsafe { std::ptr::NonNull::new_unchecked(state) } })
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
        // Only sessions in use are dropped (a request that failed); idle
        // ones stay with their GPU for the process's life.
        self.gpu.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a track feeds the parser: Annex B with its parameter sets, or AV1
/// OBUs with the sequence header of its `av1C` record.
#[derive(Clone, Debug)]
pub enum Input {
    Nal(NalConfig),
    Av1 { config_obus: Vec<u8> },
}

impl Input {
    /// The input of a track of `codec` whose configuration record is `record`.
    pub fn new(codec: Codec, record: &[u8]) -> Result<Input, String> {
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
    pub fn decode(&mut self, tag: usize, wanted: bool, sample: &[u8]) -> Result<Vec<(usize, Yuv420)>, String> {
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
        let timestamp = i64::try_from(tag).map_err(|_| format!("sample {tag}"))?;
        shown.extend(self.parse(PKT_TIMESTAMP | PKT_ENDOFPICTURE, timestamp)?);
        Ok(shown)
    }

    /// Every picture still held back, at the end of a request.
    pub fn finish(&mut self) -> Result<Vec<(usize, Yuv420)>, String> {
        if self.parser.is_null() {
            return Ok(Vec::new());
        }
        self.packet.clear();
        let mut shown = self.parse(PKT_ENDOFSTREAM | PKT_NOTIFY_EOS, 0);
        if let (Ok(_), Ok(session)) = (&shown, self.session()) {
            // SAFETY: no parser call runs here.
            if let Some(&(tag, _)) = unsafe { session.state() }.pending.front() {
                shown = Err(format!("NVDEC decoded no picture for sample {tag}: corrupt or unsupported data"));
            }
        }
        self.destroy_parser();
        self.last_tag = None;
        self.group_start = true;
        shown
    }

    fn session(&mut self) -> Result<&mut Session, String> {
        self.session.as_mut().ok_or_else(|| "the NVDEC session was given back".to_string())
    }

    /// Sends `self.packet` to the parser (made first if there is none).
    fn parse(&mut self, flags: c_ulong, timestamp: i64) -> Result<Vec<(usize, Yuv420)>, String> {
        let codec = nvdec_codec(self.codec);
        let (packet, parser) = (&self.packet, &mut self.parser);
        let session = self.session.as_mut().ok_or_else(|| "the NVDEC session was given back".to_string())?;
        let (gpu, state) = (&session.gpu, session.state.as_ptr());
        let api = gpu.api;
        let result = gpu.with_context(|| -> Result<(), String> {
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
unsafe fn callback(user: *mut c_void, body: impl FnOnce(&mut State) -> Result<c_int, String>) -> c_int {
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
            state.error = Some("robocache's NVDEC callback panicked".into());
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
                return Err("NVDEC's parser gave a picture before the stream's format".into());
            }
            state.api.check((state.api.cuvidDecodePicture)(state.decoder, picture), "cuvidDecodePicture")?;
            let head = &*picture.cast::<PicParamsHead>();
            if head.field_pic_flag != 0 {
                return Err("a field picture (interlaced video): robocache reads progressive video".into());
            }
            let (tag, wanted) = state.pending.pop_front().ok_or_else(|| {
                "NVDEC decoded more pictures than samples were sent (a sample holding two pictures)".to_string()
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

impl State {
    /// The sequence callback: a hardware decoder for `format` (the last
    /// one kept where the format is the same); the number of decode surfaces.
    fn configure(&mut self, format: &CUVIDEOFORMAT) -> Result<c_int, String> {
        if format.chroma_format != CHROMA_420
            || format.bit_depth_luma_minus8 != 0
            || format.bit_depth_chroma_minus8 != 0
        {
            return Err(format!(
                "the stream is {}-bit with chroma format {} (NVDEC's numbering); robocache reads 8-bit 4:2:0 video",
                8 + format.bit_depth_luma_minus8,
                format.chroma_format
            ));
        }
        if format.progressive_sequence == 0 {
            return Err("interlaced video: robocache reads progressive video".into());
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
            return Err(format!(
                "a display area of {area:?} in a coded picture of {}x{}",
                format.coded_width, format.coded_height
            ));
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
    fn show(&mut self, picture: c_int, tag: usize) -> Result<(), String> {
        let mut status = CUVIDGETDECODESTATUS::default();
        // SAFETY: this state's decoder and a picture it decoded.
        let known = unsafe { (self.api.cuvidGetDecodeStatus)(self.decoder, picture, &mut status) };
        if known == CUDA_SUCCESS && matches!(status.decodeStatus, DECODE_STATUS_ERROR | DECODE_STATUS_ERROR_CONCEALED) {
            return Err(format!("NVDEC failed to decode sample {tag}: corrupt data"));
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
    fn copy_to_host(&mut self, frame: CUdeviceptr, pitch: usize) -> Result<(), String> {
        let (w, h) = self.target;
        let host = self.host;
        if host.is_null() || self.host_len < w * h * 3 / 2 {
            return Err("NVDEC showed a picture before the stream's format".into());
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
    fn planes(&self) -> Result<Yuv420, String> {
        let ((w, h), (tw, th)) = (self.size, self.target);
        if self.host.is_null() {
            return Err("NVDEC showed a picture before the stream's format".into());
        }
        // SAFETY: `host` holds `host_len` bytes, written by the copy waited for above.
        let host = unsafe { std::slice::from_raw_parts(self.host, self.host_len) };
        Yuv420::from_nv12(w, h, host, tw, th)
            .ok_or_else(|| format!("NVDEC's {tw}×{th} picture is smaller than the video's {w}×{h} frames"))
    }
}

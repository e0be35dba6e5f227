//! One GPU's NVDEC: its primary context, what its engines decode, and its
//! pool of sessions (taken by a request, given back after it).

use std::collections::HashMap;
use std::ffi::c_int;
use std::ptr::null_mut;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::ffi::*;
use super::session::Session;
use crate::error::CodecError;
use crate::mp4::Codec;

/// The most NVDEC sessions in use at once on a GPU for requests that may
/// also decode on the CPU, unless they say otherwise
/// ([`crate::DecoderChoice::Auto`]). Each session holds its decode surfaces
/// in GPU memory (about 10 MB for 480×640 H.264).
pub const DEFAULT_SESSIONS: usize = 32;

/// How long a session stays idle in its GPU's pool before it is released
/// (its decoder, stream and surfaces freed). A loader between epochs keeps
/// its sessions; a process that stopped decoding gives the memory back.
pub const IDLE_SESSION_RELEASE: Duration = Duration::from_secs(10);

/// Whether NVDEC decodes a codec: its smallest and largest width and height, or why not.
pub(super) type Caps = Result<[(u32, u32); 2], CodecError>;

/// One GPU's primary context (the one the CUDA runtime and robocache's
/// kernels use), its idle sessions and what its NVDEC decodes.
pub struct Gpu {
    pub(super) api: &'static Api,
    pub(super) device: u32,
    pub(super) context: CUcontext,
    /// Sessions given back, and since when (oldest first).
    pub(super) idle: Mutex<Vec<(Instant, Session)>>,
    /// Whether the thread releasing idle sessions runs (while any are idle).
    releasing: AtomicBool,
    /// Sessions handed out and not given back.
    pub(super) busy: AtomicUsize,
    /// Per codec: `Ok` where NVDEC decodes it (8-bit 4:2:0), with its largest size.
    pub(super) caps: Mutex<HashMap<Codec, Caps>>,
}

// SAFETY: a CUDA context handle may be made current on any thread; the
// sessions inside are used by one thread at a time (taken out of the mutex).
unsafe impl Send for Gpu {}
// SAFETY: as above; the shared state is behind mutexes and atomics.
unsafe impl Sync for Gpu {}

impl Gpu {
    /// GPU `device`, opened once per process.
    pub fn get(device: u32) -> Result<Arc<Gpu>, CodecError> {
        static GPUS: OnceLock<Mutex<HashMap<u32, Arc<Gpu>>>> = OnceLock::new();
        let mut gpus = GPUS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
        if let Some(gpu) = gpus.get(&device) {
            return Ok(gpu.clone());
        }
        let api = Api::get()?;
        let mut handle: CUdevice = 0;
        let ordinal = c_int::try_from(device).map_err(|_| CodecError::Unavailable(format!("no GPU {device}")))?;
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
            releasing: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            caps: Mutex::new(HashMap::new()),
        });
        gpus.insert(device, gpu.clone());
        Ok(gpu)
    }

    /// Runs `f` with this GPU's context current on the calling thread.
    /// The context is popped on every path out, a panic in `f` included.
    pub(super) fn with_context<T>(&self, f: impl FnOnce() -> T) -> Result<T, CodecError> {
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
    pub fn supports(&self, codec: Codec, width: u32, height: u32) -> Result<(), CodecError> {
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
            return Err(CodecError::Unsupported(format!(
                "GPU {}'s NVDEC decodes {} from {min_width}x{min_height} to {max_width}x{max_height}, the video is {width}x{height}",
                self.device,
                codec.name()
            )));
        }
        Ok(())
    }

    pub(super) fn query_caps(&self, codec: Codec) -> Result<Caps, CodecError> {
        let mut caps =
            CUVIDDECODECAPS { eCodecType: nvdec_codec(codec), eChromaFormat: CHROMA_420, ..Default::default() };
        let api = self.api;
        // SAFETY: `caps` is a valid CUVIDDECODECAPS; the context is current.
        let result = self.with_context(|| unsafe { (api.cuvidGetDecoderCaps)(&mut caps) })?;
        api.check(result, "cuvidGetDecoderCaps")?;
        Ok(if caps.bIsSupported == 0 {
            Err(CodecError::Unsupported(format!(
                "GPU {}'s NVDEC does not decode {} (8-bit 4:2:0)",
                self.device,
                codec.name()
            )))
        } else {
            Ok([(caps.nMinWidth.into(), caps.nMinHeight.into()), (caps.nMaxWidth, caps.nMaxHeight)])
        })
    }

    /// An idle session, or a new one: always where there is no `limit`,
    /// else only while fewer than `limit` are in use (`Ok(None)` past that).
    pub fn take_session(self: &Arc<Self>, limit: Option<usize>) -> Result<Option<Session>, CodecError> {
        let claimed = self.busy.fetch_update(Ordering::AcqRel, Ordering::Acquire, |busy| {
            limit.is_none_or(|limit| busy < limit).then_some(busy + 1)
        });
        if claimed.is_err() {
            return Ok(None);
        }
        // The most recently used: the oldest idle ones are the ones released.
        if let Some((_, mut session)) = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            session.in_use = true;
            return Ok(Some(session));
        }
        // A session that is never made is not in use.
        Session::new(self.clone()).map(Some).inspect_err(|_| {
            self.busy.fetch_sub(1, Ordering::AcqRel);
        })
    }

    /// Gives a session back for the next request; it is released after
    /// [`IDLE_SESSION_RELEASE`] unused.
    pub(super) fn put_session(self: &Arc<Self>, mut session: Session) {
        session.in_use = false;
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).push((Instant::now(), session));
        self.busy.fetch_sub(1, Ordering::AcqRel);
        if !self.releasing.swap(true, Ordering::AcqRel) {
            let gpu = self.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("robocache-nvdec-release-{}", self.device))
                .spawn(move || gpu.release_while_idle());
            if spawned.is_err() {
                // Without the thread, sessions are released at the next give-back.
                self.releasing.store(false, Ordering::Release);
                self.release_idle(IDLE_SESSION_RELEASE);
            }
        }
    }

    /// Sessions idle in the pool.
    pub fn idle_sessions(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Releases the sessions idle for at least `older_than`; returns how many.
    pub fn release_idle(&self, older_than: Duration) -> usize {
        let released: Vec<(Instant, Session)> = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            let stale = idle.iter().take_while(|(since, _)| since.elapsed() >= older_than).count();
            idle.drain(..stale).collect()
        };
        // Destroyed outside the lock (each pushes the context).
        released.len()
    }

    /// The releasing thread: wakes while sessions are idle, and ends when none are.
    fn release_while_idle(&self) {
        loop {
            std::thread::sleep(IDLE_SESSION_RELEASE / 4);
            self.release_idle(IDLE_SESSION_RELEASE);
            if self.idle_sessions() == 0 {
                self.releasing.store(false, Ordering::Release);
                // A session given back since the count: keep going unless
                // that give-back started a thread of its own.
                if self.idle_sessions() == 0 || self.releasing.swap(true, Ordering::AcqRel) {
                    return;
                }
            }
        }
    }
}

pub(super) fn nvdec_codec(codec: Codec) -> c_int {
    match codec {
        Codec::Av1 => CODEC_AV1,
        Codec::H264 => CODEC_H264,
        Codec::Hevc => CODEC_HEVC,
    }
}

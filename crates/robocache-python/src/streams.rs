//! The CUDA streams robocache's work has been ordered with in this process,
//! to decide how a result's memory may be freed.
//!
//! Every call orders the caller's stream (torch's current stream) after
//! robocache's work on its result and on its inputs, and a loader batch is
//! finished before it is handed over. So while every call and batch of the
//! process has used one stream C, every use of a result's memory on
//! robocache's stream is ordered before the work queued on C: the memory can
//! be freed on C itself (one `cuMemFreeAsync`, and robocache's stream, on
//! which the loader's workers run, never waits for the training step).
//! Once two streams have been seen (a side stream, a second device), the
//! free goes back to robocache's stream after a wait for every consumer.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// No stream seen yet.
const NONE: u64 = u64::MAX;

/// `CU_STREAM_PER_THREAD`: each thread's own default stream, which names a
/// different stream on every thread, so it never counts as the one stream.
const PER_THREAD: u64 = 2;

static ONE_STREAM: AtomicU64 = AtomicU64::new(NONE);
static MANY_STREAMS: AtomicBool = AtomicBool::new(false);

/// Notes that robocache's work was ordered with `stream` (a raw `CUstream`).
pub(crate) fn note(stream: u64) {
    if stream == PER_THREAD {
        MANY_STREAMS.store(true, Ordering::Relaxed);
        return;
    }
    match ONE_STREAM.compare_exchange(NONE, stream, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {}
        Err(seen) if seen == stream => {}
        Err(_) => MANY_STREAMS.store(true, Ordering::Relaxed),
    }
}

/// Whether `stream` is the only stream robocache's work has been ordered
/// with so far in this process.
pub(crate) fn only(stream: u64) -> bool {
    stream != PER_THREAD && !MANY_STREAMS.load(Ordering::Relaxed) && ONE_STREAM.load(Ordering::Acquire) == stream
}

/// Frees go back to robocache's stream for the rest of the process (a call
/// failed after queuing work, which may then be ordered before no stream).
pub(crate) fn distrust() {
    MANY_STREAMS.store(true, Ordering::Relaxed);
}

//! The CUDA streams robocache's work has been ordered with in this process,
//! to decide how a result's memory may be freed.
//!
//! A call queues its work on the caller's stream itself (torch's current
//! stream), and a loader batch is finished before it is handed over. So
//! while every call and batch of the process has used one stream C, every
//! use of a result's memory is ordered before the work queued on C: the
//! memory can be freed on C itself (one `cuMemFreeAsync`; robocache's own
//! stream, on which the loader's workers run, never waits for the training
//! step). Once two streams have been seen (a side stream, a second device),
//! the free goes back to the stream the memory was made on (the call's
//! stream, or robocache's for a batch) after that stream has waited for
//! every consumer's.

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

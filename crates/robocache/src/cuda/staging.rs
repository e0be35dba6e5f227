//! Pinned staging of host data on its way to the device, within a byte budget.
//!
//! A streamed batch (image rows read from a file) is copied into page-locked
//! host memory and uploaded on the context's copy stream, so the reading
//! thread goes on at once and the copy overlaps the kernels queued before
//! it; the stream's later work waits for the copy. A staging buffer comes
//! back to the pool when its copy has completed. The pool never holds more
//! than its budget of page-locked memory, except one buffer for a single
//! upload larger than the whole budget: an upload that does not fit waits
//! for earlier copies to complete, then frees idle buffers to make room.

use std::sync::{Condvar, Mutex, MutexGuard};

use robocache_cuda::{CudaContext, DeviceBytes, Event, PinnedBuffer};

use super::backend::cuda_error;
use crate::{Error, Result};

#[derive(Debug, Default)]
struct State {
    budget: usize,
    /// Bytes of every buffer the pool holds (idle, lent or copying).
    held: usize,
    /// The most `held` has been.
    peak: usize,
    idle: Vec<PinnedBuffer>,
    /// Buffers whose copy may still run, oldest first.
    copying: Vec<(PinnedBuffer, Event)>,
}

/// Page-locked staging buffers of one device.
#[derive(Debug)]
pub(crate) struct StagingPool {
    state: Mutex<State>,
    returned: Condvar,
}

fn poisoned() -> Error {
    Error::Cuda("staging pool: poisoned by a panic on another thread".into())
}

impl StagingPool {
    pub(crate) fn new(budget: usize) -> Self {
        StagingPool { state: Mutex::new(State { budget, ..State::default() }), returned: Condvar::new() }
    }

    pub(crate) fn set_budget(&self, budget: usize) -> Result<()> {
        self.state.lock().map_err(|_| poisoned())?.budget = budget;
        Ok(())
    }

    /// The budget and the most page-locked bytes held at once so far.
    pub(crate) fn usage(&self) -> Result<(usize, usize)> {
        let state = self.state.lock().map_err(|_| poisoned())?;
        Ok((state.budget, state.peak))
    }

    /// `bytes` on the device: staged in page-locked memory, copied on the
    /// copy stream, ordered before the stream's later work.
    pub(crate) fn upload(&self, context: &CudaContext, bytes: &[u8]) -> Result<DeviceBytes> {
        let mut buffer = self.acquire(context, bytes.len())?;
        buffer.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
        let queued = context.alloc(bytes.len()).and_then(|mut dest| {
            // SAFETY: `buffer` stays in the pool's `copying` list, neither
            // written nor dropped, until the returned event has completed.
            let event = unsafe { context.upload_on_copy_stream(&buffer, &mut dest) }?;
            Ok((dest, event))
        });
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        let result = match queued {
            Ok((dest, event)) => {
                state.copying.push((buffer, event));
                Ok(dest)
            }
            Err(e) => {
                state.idle.push(buffer); // nothing was queued from it
                Err(cuda_error(e))
            }
        };
        self.returned.notify_all();
        result
    }

    /// A buffer of at least `len` bytes, within the budget.
    fn acquire(&self, context: &CudaContext, len: usize) -> Result<PinnedBuffer> {
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        loop {
            reclaim(&mut state)?;
            if let Some(at) = state.idle.iter().position(|b| b.len() >= len) {
                return Ok(state.idle.swap_remove(at));
            }
            // Free idle buffers too small to serve, while that makes room.
            while state.held + len > state.budget && !state.idle.is_empty() {
                let freed = state.idle.pop().map_or(0, |b| b.len());
                state.held -= freed;
            }
            if state.held + len <= state.budget || state.held == 0 {
                state.held += len;
                state.peak = state.peak.max(state.held);
                drop(state);
                let made = context.pinned(len).map_err(cuda_error);
                if made.is_err() {
                    let mut state = self.state.lock().map_err(|_| poisoned())?;
                    state.held -= len;
                }
                return made;
            }
            state = self.wait_for_a_buffer(state)?;
        }
    }

    /// Waits for the oldest copy (or, when every buffer is lent, for one to
    /// come back).
    fn wait_for_a_buffer<'a>(&'a self, mut state: MutexGuard<'a, State>) -> Result<MutexGuard<'a, State>> {
        if state.copying.is_empty() {
            return self.returned.wait(state).map_err(|_| poisoned());
        }
        let (buffer, event) = state.copying.remove(0);
        drop(state);
        let waited = event.wait().map_err(cuda_error);
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        match waited {
            Ok(()) => state.idle.push(buffer),
            Err(e) => {
                // The copy's fate is unknown: keep the buffer out of use.
                state.copying.insert(0, (buffer, event));
                return Err(e);
            }
        }
        Ok(state)
    }
}

/// Moves buffers whose copy has completed back to the idle list.
fn reclaim(state: &mut State) -> Result<()> {
    let mut at = 0;
    while at < state.copying.len() {
        if state.copying[at].1.is_complete().map_err(cuda_error)? {
            let (buffer, _) = state.copying.remove(at);
            state.idle.push(buffer);
        } else {
            at += 1;
        }
    }
    Ok(())
}

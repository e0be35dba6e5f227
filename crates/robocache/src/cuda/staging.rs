//! Pinned staging of host data on its way to the device, within a byte budget.
//!
//! A streamed batch (image rows read from a file) is assembled in
//! page-locked host memory lent by the pool ([`StagingPool::lend`]: the
//! reader writes the rows straight into it) and uploaded from there on the
//! context's copy stream ([`StagingPool::upload_lent`]), so the reading
//! thread goes on at once and the copy overlaps the kernels queued before
//! it; the stream's later work waits for the copy. A staging buffer comes
//! back to the pool when its copy has completed, or at once when it is
//! dropped without an upload. The pool never holds more
//! than its budget of page-locked memory, except one buffer for a single
//! upload larger than the whole budget: an upload that does not fit waits
//! for earlier copies to complete, then frees idle buffers to make room.
//! Buffers a caller needs at once are lent together
//! ([`StagingPool::lend_together`]): all of them or none, so that no caller
//! holds some while it waits for the others.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use robocache_cuda::{CudaContext, DeviceBytes, Event, PinnedBuffer};

use super::error::cuda_error;
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

impl Drop for StagingPool {
    /// Waits for every copy still reading a buffer before the page-locked
    /// memory is freed: `cuMemFreeHost` under a copy in flight is not
    /// defined by the driver's documentation, so nothing relies on it. (A
    /// device's pool lives as long as the process in practice, since devices
    /// are cached per ordinal, but a pool made and dropped in a test or a
    /// later refactor must be safe too.)
    fn drop(&mut self) {
        let state = match self.state.get_mut() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        for (_, event) in &state.copying {
            // A failed wait means the context is gone, and its copies with it.
            let _ = event.wait();
        }
    }
}

fn poisoned() -> Error {
    Error::Internal("staging pool: poisoned by a panic on another thread".into())
}

impl StagingPool {
    pub(crate) fn new(budget: usize) -> Self {
        StagingPool { state: Mutex::new(State { budget, ..State::default() }), returned: Condvar::new() }
    }

    /// Sets the budget (each loader made on the device does), frees idle
    /// buffers while the pool holds more than it, and restarts the peak
    /// from what the pool holds now: the peak a loader reports is then its
    /// own, not that of an earlier loader with a larger budget.
    pub(crate) fn set_budget(&self, budget: usize) -> Result<()> {
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        state.budget = budget;
        reclaim(&mut state)?;
        while state.held > budget {
            let Some(buffer) = state.idle.pop() else { break };
            state.held -= buffer.len();
        }
        state.peak = state.held;
        Ok(())
    }

    /// The budget and the most page-locked bytes held at once since the
    /// budget was last set.
    pub(crate) fn usage(&self) -> Result<(usize, usize)> {
        let state = self.state.lock().map_err(|_| poisoned())?;
        Ok((state.budget, state.peak))
    }

    /// `len` bytes of page-locked memory to assemble an upload in, within
    /// the budget (waiting for earlier copies when it is spent).
    pub(crate) fn lend(self: &Arc<Self>, context: &CudaContext, len: usize) -> Result<StagingBuffer> {
        let mut lent = self.lend_together(context, &[len])?;
        lent.pop().ok_or_else(|| Error::Internal("staging pool: no buffer lent".into()))
    }

    /// Buffers of `lens` bytes, lent together: all of them or, while the
    /// budget lacks room for all, none. A caller that needs several
    /// buffers at once (a batch's cameras, decoded at once) takes them so,
    /// never holding some while it waits for the others: two such callers,
    /// or one and a loader whose budget shrank, would otherwise wait for
    /// each other for ever.
    pub(crate) fn lend_together(self: &Arc<Self>, context: &CudaContext, lens: &[usize]) -> Result<Vec<StagingBuffer>> {
        let buffers = self.acquire(context, lens)?;
        Ok(buffers
            .into_iter()
            .zip(lens)
            .map(|(buffer, &len)| StagingBuffer { pool: self.clone(), buffer: Some(buffer), len })
            .collect())
    }

    /// The bytes of `lent` on the device: copied on the copy stream, ordered
    /// before the stream's later work; the buffer returns to the pool once
    /// the copy has completed.
    pub(crate) fn upload_lent(&self, context: &CudaContext, mut lent: StagingBuffer) -> Result<DeviceBytes> {
        let Some(buffer) = lent.buffer.take() else {
            return Err(Error::Internal("staging pool: a lent buffer was uploaded twice".into()));
        };
        let queued = context.alloc(lent.len).and_then(|mut dest| {
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

    /// Buffers of at least `lens` bytes, all within the budget at once (or
    /// beyond it when the pool holds nothing else), else none while it
    /// waits: idle buffers that serve first, then new ones, after idle
    /// buffers too small to serve are freed while that makes room.
    fn acquire(&self, context: &CudaContext, lens: &[usize]) -> Result<Vec<PinnedBuffer>> {
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        loop {
            reclaim(&mut state)?;
            // Idle buffers that serve, taken out while this thread holds the lock.
            let mut reused: Vec<Option<PinnedBuffer>> = Vec::with_capacity(lens.len());
            for &len in lens {
                let at = state.idle.iter().position(|b| b.len() >= len);
                reused.push(at.map(|at| state.idle.swap_remove(at)));
            }
            let reused_bytes: usize = reused.iter().flatten().map(PinnedBuffer::len).sum();
            let new: usize = lens.iter().zip(&reused).filter(|(_, b)| b.is_none()).map(|(&len, _)| len).sum();
            while new > 0 && state.held + new > state.budget && !state.idle.is_empty() {
                let freed = state.idle.pop().map_or(0, |b| b.len());
                state.held -= freed;
            }
            // Idle buffers serve every length (nothing new to hold), the
            // budget has room, or the pool holds nothing else.
            if new == 0 || state.held + new <= state.budget || state.held == reused_bytes {
                state.held += new;
                state.peak = state.peak.max(state.held);
                drop(state);
                let mut made = Vec::new();
                for (&len, _) in lens.iter().zip(&reused).filter(|(_, reused)| reused.is_none()) {
                    match context.pinned(len) {
                        Ok(buffer) => made.push(buffer),
                        Err(e) => {
                            // Nothing lent: the buffers in hand go back idle
                            // (counted), the ones not made are not counted.
                            let made_bytes: usize = made.iter().map(PinnedBuffer::len).sum();
                            let mut state = self.state.lock().map_err(|_| poisoned())?;
                            state.held -= new - made_bytes;
                            state.idle.extend(made);
                            state.idle.extend(reused.into_iter().flatten());
                            drop(state);
                            self.returned.notify_all();
                            return Err(cuda_error(e));
                        }
                    }
                }
                let mut made = made.into_iter();
                return reused
                    .into_iter()
                    .map(|reused| reused.or_else(|| made.next()))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| Error::Internal("staging pool: fewer buffers made than asked for".into()));
            }
            state.idle.extend(reused.into_iter().flatten());
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

/// Page-locked memory lent by a [`StagingPool`]: written by the caller,
/// then uploaded with [`StagingPool::upload_lent`]; dropped unused, it goes
/// back to the pool.
#[derive(Debug)]
pub(crate) struct StagingBuffer {
    pool: Arc<StagingPool>,
    buffer: Option<PinnedBuffer>,
    len: usize,
}

impl StagingBuffer {
    /// The `len` bytes asked for.
    pub(crate) fn as_mut_bytes(&mut self) -> &mut [u8] {
        match &mut self.buffer {
            Some(buffer) => &mut buffer.as_mut_slice()[..self.len],
            None => &mut [],
        }
    }
}

impl Drop for StagingBuffer {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            if let Ok(mut state) = self.pool.state.lock() {
                state.idle.push(buffer);
            }
            self.pool.returned.notify_all();
        }
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

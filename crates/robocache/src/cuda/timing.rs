//! Events, cache eviction and device copies for [`crate::timing`].

use std::time::Duration;

use robocache_cuda::{entry, Event, LaunchConfig};

use super::backend::{CudaDevice, DeviceStorage};
use super::error::cuda_error;
use crate::Result;

/// A CUDA event recorded on the device's stream.
#[derive(Debug)]
pub(crate) struct DeviceEvent(Event);

impl DeviceEvent {
    /// GPU time from `start` to this event (waits for this event).
    pub(super) fn elapsed_since(&self, start: &DeviceEvent) -> Result<Duration> {
        let ms = self.0.elapsed_ms_since(&start.0).map_err(cuda_error)?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }
}

impl CudaDevice {
    pub(super) fn record(&self) -> Result<DeviceEvent> {
        self.context.record_event().map(DeviceEvent).map_err(cuda_error)
    }

    /// Queues `evict_caches` over a scratch buffer of twice the L2 size (kept
    /// for the device's lifetime).
    pub(super) fn queue_cache_eviction(&self) -> Result<()> {
        let scratch = {
            let mut slot = self.scratch.lock().map_err(|_| crate::Error::Internal("scratch lock poisoned".into()))?;
            match &*slot {
                Some(scratch) => scratch.clone(),
                None => {
                    let bytes = (2 * self.context.l2_cache_bytes().map_err(cuda_error)?).max(64 << 20);
                    let mut buffer = self.alloc(bytes)?;
                    self.context.fill(&mut buffer, 0).map_err(cuda_error)?;
                    let scratch = std::sync::Arc::new(buffer);
                    *slot = Some(scratch.clone());
                    scratch
                }
            }
        };
        let (pointer, count) = (scratch.device_pointer(), (scratch.len() / 16) as u64);
        let config = LaunchConfig { grid: 4 * self.context.multiprocessors(), block: 512, shared_bytes: 0 };
        // SAFETY: the scratch buffer holds `count` 16-byte words (the sink is
        // its first word) and lives as long as the device.
        unsafe { self.context.launch(entry::EvictCaches, config, (pointer, count, pointer)) }.map_err(cuda_error)
    }

    /// A device-to-device copy of `len` bytes of `storage`, queued.
    pub(super) fn copy_storage(&self, storage: &DeviceStorage, len: usize) -> Result<DeviceStorage> {
        let out = self.alloc(len)?;
        self.context.copy_range(&storage.bytes, storage.offset, &out, len).map_err(cuda_error)?;
        Ok(DeviceStorage::new(out))
    }
}

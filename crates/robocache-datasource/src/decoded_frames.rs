//! Frames a format decodes itself (JPEG rows of an HDF5 file, not video),
//! kept in host memory within the frame cache's budget: the video frame
//! cache's store ([`robocache_video::FrameCache`]: filled, never churned),
//! keyed by a number the format gives each camera of each episode and the
//! row.

use std::sync::Arc;

use robocache_video::{FrameCache, FrameCacheUsage, FrameKey};

/// Decoded frames by (camera of an episode, row).
#[derive(Debug)]
pub struct DecodedFrames {
    cache: FrameCache,
}

impl Default for DecodedFrames {
    /// No budget: nothing kept until [`DecodedFrames::set_budget`].
    fn default() -> Self {
        DecodedFrames { cache: FrameCache::new(0) }
    }
}

impl DecodedFrames {
    /// The byte budget (0: none kept; lowering it drops what no longer fits).
    pub fn set_budget(&self, bytes: usize) {
        self.cache.set_budget(bytes);
    }

    /// Whether frames are kept at all (skip the lookups otherwise).
    pub fn is_enabled(&self) -> bool {
        self.cache.is_enabled()
    }

    /// Row `row` of camera `camera` (the format's number for an episode's
    /// camera), counted as a hit or a miss.
    pub fn get(&self, camera: usize, row: usize) -> Option<Arc<[u8]>> {
        self.cache.get(FrameKey { file: camera, frame: row })
    }

    /// Keeps a decoded frame where it fits in the budget.
    pub fn insert(&self, camera: usize, row: usize, frame: Arc<[u8]>) {
        self.cache.insert(FrameKey { file: camera, frame: row }, frame);
    }

    /// What is held, and the hits and misses since the last reset.
    pub fn usage(&self) -> FrameCacheUsage {
        self.cache.usage()
    }

    /// Forgets the hit and miss counts.
    pub fn reset_counts(&self) {
        self.cache.reset_counts();
    }
}

//! The video files a LeRobot root holds open: at most [`MAX_OPEN_VIDEOS`],
//! the least recently used closed first. A v2.1 root has one MP4 per
//! episode and camera; with 10,000 episodes, keeping every file open would
//! run out of file descriptors and keep each file's idle decoders. A file
//! closed here stays open for the readers still holding it, and is opened
//! again (its sample table read again) when next needed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use robocache_video::VideoFile;

/// The most video files a LeRobot root keeps open.
pub const MAX_OPEN_VIDEOS: usize = 256;

/// Open video files by path, each with the number its frames have in the
/// frame cache (kept for the dataset's life, also once the file is closed).
#[derive(Debug, Default)]
pub(crate) struct OpenVideos {
    numbers: HashMap<PathBuf, usize>,
    open: HashMap<PathBuf, (Arc<VideoFile>, u64)>,
    clock: u64,
}

impl OpenVideos {
    /// The open file at `path` and its number, marked as just used.
    pub fn get(&mut self, path: &Path) -> Option<(usize, Arc<VideoFile>)> {
        self.clock += 1;
        let clock = self.clock;
        let (video, used) = self.open.get_mut(path)?;
        *used = clock;
        Some((self.numbers[path], video.clone()))
    }

    /// Keeps `video` open (or the one another reader opened first), closing
    /// the least recently used file past [`MAX_OPEN_VIDEOS`].
    pub fn insert(&mut self, path: &Path, video: Arc<VideoFile>) -> (usize, Arc<VideoFile>) {
        if let Some(found) = self.get(path) {
            return found;
        }
        if self.open.len() >= MAX_OPEN_VIDEOS {
            if let Some(oldest) = self.open.iter().min_by_key(|(_, (_, used))| *used).map(|(p, _)| p.clone()) {
                self.open.remove(&oldest);
            }
        }
        let next = self.numbers.len();
        let number = *self.numbers.entry(path.to_path_buf()).or_insert(next);
        self.clock += 1;
        self.open.insert(path.to_path_buf(), (video.clone(), self.clock));
        (number, video)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_limit_stay_open_and_numbers_never_change() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../robocache-datasets/tests/fixtures/lerobot/av1/videos/observation.images.front/chunk-000/file-000.mp4",
        );
        let video = Arc::new(VideoFile::open(&fixture).unwrap());
        let mut open = OpenVideos::default();
        let path = |i: usize| PathBuf::from(format!("videos/episode_{i:06}.mp4"));
        for i in 0..MAX_OPEN_VIDEOS + 50 {
            assert_eq!(open.insert(&path(i), video.clone()).0, i);
            // The first file is used all along: never the least recently used.
            assert_eq!(open.get(&path(0)).map(|(n, _)| n), Some(0));
        }
        assert_eq!(open.open.len(), MAX_OPEN_VIDEOS);
        assert!(open.get(&path(1)).is_none(), "the least recently used file was closed");
        assert!(open.get(&path(MAX_OPEN_VIDEOS + 49)).is_some());
        // Opened again, a file keeps its number in the frame cache.
        assert_eq!(open.insert(&path(1), video.clone()).0, 1);
        assert_eq!(open.open.len(), MAX_OPEN_VIDEOS);
        assert_eq!(Arc::strong_count(&video), MAX_OPEN_VIDEOS + 1);
    }
}

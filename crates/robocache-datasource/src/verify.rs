//! Reading a whole dataset to check it, before a long run rather than when
//! a batch reaches a bad record ([`DatasetReader::verify`]; `robocache inspect
//! --verify`, Python `Dataset.verify()`).
//!
//! Every row of every stream of every episode is read through the same
//! path batches take, without any cache, so every check the readers make
//! runs: TFRecord CRC32C of each record's length and payload and the
//! Example decoding (RLDS); parquet pages decoded and every video frame
//! decoded (LeRobot); every HDF5 dataset read and decompressed (robomimic,
//! CALVIN, RT-X). Each stream's timeline is read too. A problem is kept
//! with the episode and stream it was found in, and the check goes on
//! with the next stream, so one run lists every bad part.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::{DatasetReader, EpisodeInfo, StreamInfo};

/// At most this many bytes are read in one request (a video stream is read
/// a few dozen frames at a time, not whole).
const CHUNK_BYTES: usize = 64 << 20;

/// One part of a dataset that could not be read.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VerifyProblem {
    /// The episode's name in the dataset (`demo_3`, `episode_000012`).
    pub episode: String,
    /// The stream (`actions`, `observation.images.front`).
    pub stream: String,
    /// What went wrong, naming the file and the record, row or frame.
    pub error: String,
}

/// What [`DatasetReader::verify`] read and found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VerifyReport {
    pub episodes: usize,
    /// Streams read whole, one per episode and stream.
    pub streams: usize,
    /// Rows read, over every stream.
    pub rows: usize,
    /// Bytes those rows hold in memory.
    pub bytes: u64,
    /// Every problem found, in episode order.
    pub problems: Vec<VerifyProblem>,
}

impl VerifyReport {
    /// True when nothing was wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl DatasetReader {
    /// Reads every row of every stream of every episode, on `threads`
    /// threads (at least one), and reports what could not be read. See the
    /// [module docs](crate::verify) for what is checked.
    pub fn verify(&self, threads: usize) -> VerifyReport {
        let episodes = &self.info().episodes;
        let next = AtomicUsize::new(0);
        let parts: Mutex<Vec<(usize, VerifyReport)>> = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..threads.clamp(1, episodes.len().max(1)) {
                scope.spawn(|| loop {
                    let episode = next.fetch_add(1, Ordering::Relaxed);
                    let Some(info) = episodes.get(episode) else { break };
                    let report = self.verify_episode(episode, info);
                    if let Ok(mut parts) = parts.lock() {
                        parts.push((episode, report));
                    }
                });
            }
        });
        let mut parts = parts.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        parts.sort_by_key(|(episode, _)| *episode);
        let mut total = VerifyReport { episodes: episodes.len(), ..VerifyReport::default() };
        for (_, part) in parts {
            total.streams += part.streams;
            total.rows += part.rows;
            total.bytes += part.bytes;
            total.problems.extend(part.problems);
        }
        total
    }

    fn verify_episode(&self, episode: usize, info: &EpisodeInfo) -> VerifyReport {
        let mut report = VerifyReport::default();
        for stream in &info.streams {
            report.streams += 1;
            if let Err(error) = self.verify_stream(episode, stream, &mut report) {
                report.problems.push(VerifyProblem {
                    episode: info.name.clone(),
                    stream: stream.name.clone(),
                    error: error.to_string(),
                });
            }
        }
        report
    }

    fn verify_stream(&self, episode: usize, stream: &StreamInfo, report: &mut VerifyReport) -> crate::Result<()> {
        self.times(episode, &stream.name)?;
        let row_bytes = stream.step_bytes().max(1);
        let rows_per_chunk = (CHUNK_BYTES / row_bytes).max(1);
        let mut buffer = vec![0u8; rows_per_chunk.min(stream.len) * stream.step_bytes()];
        let mut start = 0;
        while start < stream.len {
            let end = (start + rows_per_chunk).min(stream.len);
            let out = &mut buffer[..(end - start) * stream.step_bytes()];
            self.read_source_rows_into(episode, stream, start..end, out)?;
            report.rows += end - start;
            report.bytes += out.len() as u64;
            start = end;
        }
        Ok(())
    }
}

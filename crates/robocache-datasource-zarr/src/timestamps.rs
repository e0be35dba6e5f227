//! A replay buffer's `data/timestamp` as its streams' clock: real robots'
//! buffers (diffusion policy's real-world recorder) store each step's time
//! in seconds beside the data, at a rate that is not exactly the nominal
//! one. Read whole at open (8 bytes a step), checked finite and strictly
//! increasing within each episode.

use std::ops::Range;
use std::sync::Arc;

use robocache_datasource::{Error, Result};
use zarrs::array::{Array, DataType};
use zarrs::array_subset::ArraySubset;

use crate::store::ZarrStore;

/// The array whose values are the steps' times.
pub(crate) const TIMESTAMP: &str = "timestamp";

fn error(store: &ZarrStore, problem: String) -> Error {
    Error::Layout { file: store.path().to_path_buf(), path: format!("data/{TIMESTAMP}"), problem }
}

/// Each episode's times (`ends`: the episodes' exclusive last rows), from
/// a 1-D `f64` or `f32` array.
pub(crate) fn read(store: &ZarrStore, array: &Array<ZarrStore>, ends: &[u64]) -> Result<Vec<Arc<[f64]>>> {
    let total = ends.last().copied().unwrap_or(0);
    if array.shape().len() != 1 {
        return Err(error(store, format!("has shape {:?}; a step's time is one number", array.shape())));
    }
    let rows: Range<u64> = 0..total;
    let subset = ArraySubset::new_with_ranges(std::slice::from_ref(&rows));
    let times: Vec<f64> = match array.data_type() {
        DataType::Float64 => array.retrieve_array_subset_elements::<f64>(&subset),
        DataType::Float32 => {
            array.retrieve_array_subset_elements::<f32>(&subset).map(|v| v.into_iter().map(f64::from).collect())
        }
        other => return Err(error(store, format!("is {other}; times are seconds as f64 or f32"))),
    }
    .map_err(|e| error(store, format!("cannot be read: {e}")))?;
    let mut episodes = Vec::with_capacity(ends.len());
    let mut start = 0usize;
    for (episode, &end) in ends.iter().enumerate() {
        let end = end as usize;
        let steps = &times[start..end];
        if let Some(at) = steps.iter().position(|t| !t.is_finite()) {
            return Err(error(store, format!("episode {episode}, row {}: {} is not a time", start + at, steps[at])));
        }
        for (step, pair) in steps.windows(2).enumerate() {
            if pair[1] <= pair[0] {
                return Err(error(
                    store,
                    format!(
                        "episode {episode}, row {}: {} s after {} s; an episode's times must increase",
                        start + step + 1,
                        pair[1],
                        pair[0]
                    ),
                ));
            }
        }
        episodes.push(Arc::from(steps));
        start = end;
    }
    Ok(episodes)
}

/// The rate the times keep: one over the median interval between steps,
/// for a buffer whose arrays name no known rate and none was given.
pub(crate) fn rate(episodes: &[Arc<[f64]>]) -> Option<f64> {
    let mut intervals: Vec<f64> = episodes.iter().flat_map(|t| t.windows(2).map(|p| p[1] - p[0])).collect();
    if intervals.is_empty() {
        return None;
    }
    let middle = intervals.len() / 2;
    let (_, median, _) = intervals.select_nth_unstable_by(middle, f64::total_cmp);
    Some(1.0 / *median)
}

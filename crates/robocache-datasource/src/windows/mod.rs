//! Cutting episodes into training samples: by steps ([`step`]), on a
//! policy clock ([`time`]) or by LeRobot's `delta_timestamps` ([`delta`]).

pub mod delta;
pub mod step;
pub mod time;

/// The most windows (anchors) one episode may have on a policy clock:
/// 2^25, 9.3 hours at 1 kHz. The count comes from the episode's timestamps,
/// so a stamp decades off would otherwise size the epoch's allocations.
pub const MAX_EPISODE_WINDOWS: usize = 1 << 25;

/// A dataset of episodes of `lengths` steps at `fps`, one `action` stream
/// each, for the window tests.
#[cfg(test)]
pub(crate) fn test_info(lengths: &[usize], fps: f64) -> crate::model::DatasetInfo {
    use crate::model::{ChannelKind, DatasetInfo, EpisodeInfo, FormatName, StreamInfo, StreamKind, Timeline};

    let stream = |len| StreamInfo {
        name: "action".into(),
        dtype: robocache_cpu::DType::F32,
        step_shape: vec![2],
        len,
        kind: StreamKind::All(ChannelKind::Continuous),
        timeline: Timeline::Uniform { start: 0.0, hz: fps },
        source: "action".into(),
    };
    DatasetInfo {
        path: "x".into(),
        format: FormatName::new("test"),
        rate_hz: fps,
        episodes: lengths
            .iter()
            .enumerate()
            .map(|(i, &len)| EpisodeInfo {
                name: format!("episode_{i}"),
                len,
                duration_s: 0.0,
                streams: vec![stream(len)],
                instruction: None,
                metadata: Default::default(),
            })
            .collect(),
        splits: vec![],
        metadata: Default::default(),
    }
}

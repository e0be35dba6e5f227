//! Cutting episodes into training samples: by steps ([`step`]), on a
//! policy clock ([`time`]) or by LeRobot's `delta_timestamps` ([`delta`]).

pub mod delta;
pub mod step;
pub mod time;

/// The most windows (anchors) one episode may have on a policy clock:
/// 2^25, 9.3 hours at 1 kHz. The count comes from the episode's timestamps,
/// so a stamp decades off would otherwise size the epoch's allocations.
pub const MAX_EPISODE_WINDOWS: usize = 1 << 25;

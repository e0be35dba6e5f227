//! Cutting episodes into training samples: by steps ([`step`]), on a
//! policy clock ([`time`]) or by LeRobot's `delta_timestamps` ([`delta`]).

pub mod delta;
pub mod step;
pub mod time;

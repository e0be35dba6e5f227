//! Cutting episodes into training samples: by steps ([`step`]) or on a
//! policy clock ([`time`]).

pub mod step;
pub mod time;

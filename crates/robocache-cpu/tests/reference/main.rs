//! Property tests of the CPU reference against a plain f64 oracle, and the
//! errors of every kind of bad input.

mod errors;
mod fusion;
mod oracle;
mod resample;
mod voxelize;

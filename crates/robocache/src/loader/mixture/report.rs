//! A mixture's telemetry: what each dataset delivered and what its parts
//! cost the batches (which dataset starves the mixture).

use serde::Serialize;

/// What one dataset of a mixture delivered ([`MixtureLoader::telemetry`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemberReport {
    pub name: String,
    /// Its share of an epoch, as the weights give it.
    pub weight_share: f64,
    /// Windows it delivered into batches.
    pub windows: u64,
    /// `windows` over every member's windows: against `weight_share`.
    pub share: f64,
    /// Seconds its parts of the batches took to assemble: what the batches
    /// waited for it (a batch's parts are read one after the other; a run
    /// of batches assembled together shares its part's time evenly).
    pub seconds: f64,
    /// Batches in which its part (its run's) took the longest.
    pub slowest_in: u64,
}

/// A mixture's telemetry: per dataset, what it delivered and what the
/// batches waited for it (which dataset starves the loader).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MixtureReport {
    /// Batches delivered (to [`MixtureLoader::batch`] and its like, or by
    /// an epoch: batches assembled ahead count when they are handed over).
    pub batches: u64,
    /// Batches per run of the next epoch ([`MixtureLoader::run_length`]).
    pub batches_per_run: usize,
    /// Seconds the delivered batches' parts took to assemble, in all.
    pub seconds: f64,
    pub members: Vec<MemberReport>,
}

/// A batch's share of what its run cost ([`MixtureLoader::telemetry`]
/// counts it when the batch is delivered): per member its windows and
/// seconds, the seconds of the parts in all, and the run's slowest member.
#[derive(Clone, Debug)]
pub(super) struct BatchCost {
    pub(super) windows: Vec<usize>,
    pub(super) part_seconds: Vec<Option<f64>>,
    pub(super) seconds: f64,
    pub(super) slowest: Option<usize>,
}

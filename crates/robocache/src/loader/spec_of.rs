//! [`Loader::spec`]: the [`LoaderSpec`] of a loader, what a running policy
//! needs to get its windows live ([`crate::live`]).

use robocache_datasets::Dataset;

use super::{Loader, MaskKind, WindowSpec};
use crate::spec::{LoaderSpec, SpecStream};
use crate::{Error, Result};

impl Loader {
    /// What defines this loader's windows: its streams, clock, masks,
    /// frames and normalization statistics, with no path to the dataset
    /// ([`LoaderSpec`]; save it with the checkpoint). Step windows count
    /// rows, which a live robot's samples do not have: they are refused
    /// (use time windows, causal, or `delta_timestamps`).
    pub fn spec(&self) -> Result<LoaderSpec> {
        let dataset = self.dataset();
        let config = self.config();
        let (clock, masks) = match &config.windows {
            WindowSpec::Times(spec) => (LoaderSpec::times(spec), config.masks),
            WindowSpec::Deltas(spec) => (LoaderSpec::deltas(spec, dataset.info().rate_hz), MaskKind::Pad),
            WindowSpec::Steps(_) => {
                return Err(Error::Spec {
                    what: "clock".into(),
                    problem: "step windows count a dataset's rows, which samples on a running robot do not have: \
                              train with time windows ({hz, history, horizon}, causal) or delta_timestamps to deploy"
                        .into(),
                })
            }
        };
        let resident = self.resident_names();
        let streams = config
            .streams
            .iter()
            .map(|name| spec_stream(dataset, name, resident.contains(&name.as_str())))
            .collect::<Result<_>>()?;
        let mut spec = LoaderSpec::new(clock, streams, masks, config.frames, config.normalization.clone());
        if let Some(augmentation) = self.augmentation() {
            spec.evaluation_crops = augmentation.evaluation_crops();
        }
        let metadata = &dataset.info().metadata;
        spec.bag_mapping = metadata.get("bag_mapping").cloned();
        if let Some(topics) = metadata.get("bag_topics") {
            spec.bag_topics = serde_json::from_value(topics.clone())
                .map_err(|e| Error::Spec { what: "bag_topics".into(), problem: e.to_string() })?;
        }
        // What a deployment will load: checked now, not found at the robot.
        spec.check()?;
        Ok(spec)
    }
}

/// Stream `name` as a spec holds it.
fn spec_stream(dataset: &Dataset, name: &str, resident: bool) -> Result<SpecStream> {
    let (_, info) = dataset.stream(0, name)?;
    let camera = dataset.video_frame_size(name).or(crate::windows::rgb_image_size(info));
    // One over the median of the episodes' median intervals: one odd
    // episode (two samples a nanosecond apart) cannot move it.
    let mut medians = Vec::with_capacity(dataset.len());
    for episode in 0..dataset.len() {
        let times = dataset.times(episode, name)?;
        let mut intervals: Vec<f64> =
            (1..times.len()).map(|i| times.time(i) - times.time(i - 1)).filter(|d| *d > 0.0 && d.is_finite()).collect();
        if let Some(median) = median(&mut intervals) {
            medians.push(median);
        }
    }
    let rate_hz = median(&mut medians).map_or(0.0, |interval| (1.0 / interval).min(crate::spec::MAX_RATE_HZ));
    Ok(SpecStream {
        name: name.to_owned(),
        dtype: info.dtype.name().to_owned(),
        step_shape: info.step_shape.clone(),
        kind: info.kind.to_string(),
        camera,
        video: dataset.video_frame_size(name).is_some(),
        resident,
        rate_hz,
    })
}

/// The median of `values` (the lower of the middle two), reordering them.
fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let middle = (values.len() - 1) / 2;
    Some(*values.select_nth_unstable_by(middle, f64::total_cmp).1)
}

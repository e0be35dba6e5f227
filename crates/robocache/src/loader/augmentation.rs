//! A loader's augmentation of its camera streams ([`LoaderConfig::augment`]):
//! parameters drawn per window and camera from (seed, epoch, sample), or
//! the evaluation transform in evaluation mode, applied on the loader's
//! device after the frames are converted, or, for the frames its device
//! frame cache serves, as they are stacked from it.

use std::sync::atomic::{AtomicBool, Ordering};

use robocache_augment::{AugmentConfig, Crop, FrameAugment, SampleKey};
use robocache_datasets::Dataset;

use super::LoaderConfig;
use crate::ops::augment::in_stream;
use crate::windows::{rgb_image_size, BatchStream};
use crate::{Device, Error, FrameLayout, Result};

/// The camera streams of a loader and what they get.
#[derive(Debug)]
pub(crate) struct Augmentation {
    config: AugmentConfig,
    seed: u64,
    /// Each camera stream's place among the loader's streams and its
    /// frames' size before augmentation.
    cameras: Vec<(String, u64, (usize, usize))>,
    layout: FrameLayout,
    evaluation: AtomicBool,
}

impl Augmentation {
    /// The augmentation `config` asks for, checked against the dataset's
    /// camera streams (a crop larger than the frames fails here, not in
    /// the first batch); `None` without one.
    pub(crate) fn new(dataset: &Dataset, config: &LoaderConfig) -> Result<Option<Self>> {
        let Some(augment) = &config.augment else { return Ok(None) };
        augment.check()?;
        let mut cameras = Vec::new();
        for (place, name) in config.streams.iter().enumerate() {
            let (_, info) = dataset.stream(0, name)?;
            let Some(size) = dataset.video_frame_size(name).or(rgb_image_size(info)) else { continue };
            let size = config.frames.resize.map_or(size, |r| (r.width, r.height));
            check_crop_fits(name, augment, size)?;
            cameras.push((name.clone(), place as u64, size));
        }
        if let Some(name) = augment.cameras.keys().find(|c| !cameras.iter().any(|(n, _, _)| n == *c)) {
            return Err(Error::Augment(robocache_augment::Error::Config(format!(
                "cameras: `{name}` is not a camera stream of the loader (cameras: {})",
                cameras.iter().map(|(n, _, _)| n.as_str()).collect::<Vec<_>>().join(", ")
            ))));
        }
        Ok(Some(Augmentation {
            config: augment.clone(),
            seed: config.seed,
            cameras,
            layout: config.frames.layout,
            evaluation: AtomicBool::new(false),
        }))
    }

    /// Evaluation mode: the evaluation transform instead of random draws.
    pub(crate) fn set_evaluation(&self, on: bool) {
        self.evaluation.store(on, Ordering::Relaxed);
    }

    pub(crate) fn evaluation(&self) -> bool {
        self.evaluation.load(Ordering::Relaxed)
    }

    /// Each camera's evaluation crop, for the loader's spec (cameras whose
    /// evaluation transform is nothing are left out).
    pub(crate) fn evaluation_crops(&self) -> Vec<crate::spec::SpecEvaluationCrop> {
        self.cameras
            .iter()
            .filter_map(|(name, _, size)| {
                let params = self.config.for_camera(name).evaluation().parameters(*size);
                params.crop.map(|c| crate::spec::SpecEvaluationCrop {
                    stream: name.clone(),
                    crop: (c.left, c.top, c.width, c.height),
                    output: c.output,
                })
            })
            .collect()
    }

    /// The parameters of camera stream `stream`'s windows in a batch of
    /// `samples` of epoch `epoch`, frames of `frame` (width, height): one
    /// set per sample, drawn from (seed, epoch, sample, camera), or the
    /// evaluation transform in evaluation mode; `None` for a stream that is
    /// not a camera or whose windows all get nothing.
    pub(crate) fn draw(
        &self,
        epoch: u64,
        samples: &[usize],
        stream: &str,
        frame: (usize, usize),
    ) -> Option<Vec<FrameAugment>> {
        let &(_, place, _) = self.cameras.iter().find(|(name, _, _)| name == stream)?;
        let augment = self.config.for_camera(stream);
        let camera = if self.config.same_across_cameras { 0 } else { place };
        let evaluation = self.evaluation();
        let params: Vec<FrameAugment> = samples
            .iter()
            .map(|&sample| {
                if evaluation {
                    augment.evaluation().parameters(frame)
                } else {
                    augment.draw(SampleKey { seed: self.seed, epoch, sample: sample as u64, camera }, frame)
                }
            })
            .collect();
        (!params.iter().all(FrameAugment::is_identity)).then_some(params)
    }

    /// The camera streams of a batch of `samples` of epoch `epoch`
    /// augmented in place on `device`, but those named in `done` (augmented
    /// as their frames were stacked from the device frame cache, with
    /// [`Augmentation::draw`]'s parameters).
    pub(crate) fn apply(
        &self,
        device: &Device,
        epoch: u64,
        samples: &[usize],
        streams: &mut [BatchStream],
        done: &[String],
    ) -> Result<()> {
        for stream in streams.iter_mut().filter(|stream| !done.contains(&stream.name)) {
            let shape = stream.data.shape().to_vec();
            let (batch, steps, frame) = match (self.layout, &shape[..]) {
                (FrameLayout::Hwc, &[b, t, h, w, 3]) => (b, t, (w, h)),
                (FrameLayout::Chw, &[b, t, 3, h, w]) => (b, t, (w, h)),
                _ if !self.cameras.iter().any(|(name, _, _)| *name == stream.name) => continue,
                _ => {
                    return Err(Error::Internal(format!(
                        "camera stream `{}` came as {shape:?}, not frames in the loader's layout",
                        stream.name
                    )))
                }
            };
            let Some(params) = self.draw(epoch, samples, &stream.name, frame) else { continue };
            let mut frames_shape = vec![batch * steps];
            frames_shape.extend(&shape[2..]);
            let frames = stream.data.clone().reshape(&frames_shape)?;
            let out =
                device.augment_frames(&frames, self.layout, steps, &params).map_err(|e| in_stream(e, &stream.name))?;
            let mut out_shape = vec![batch, steps];
            out_shape.extend(&out.shape()[1..]);
            stream.data = out.reshape(&out_shape)?;
        }
        Ok(())
    }
}

/// A fixed-size crop within `camera`'s frames of `size`, for every
/// camera's augmentation.
fn check_crop_fits(camera: &str, config: &AugmentConfig, (width, height): (usize, usize)) -> Result<()> {
    let crop = config.for_camera(camera).crop;
    if let Some(spec) = crop {
        if let Crop::Size { width: w, height: h } = spec.crop {
            if w > width || h > height {
                return Err(Error::Augment(robocache_augment::Error::Config(format!(
                    "camera `{camera}`: a crop of {w}x{h} does not fit its {width}x{height} frames"
                ))));
            }
        }
    }
    Ok(())
}

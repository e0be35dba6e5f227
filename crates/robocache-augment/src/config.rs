//! What a camera's frames get: a crop, then a random subset of transforms
//! ([`Augment`]), per camera ([`AugmentConfig`]); each checked against the
//! bounds torchvision's operations accept.

use std::collections::BTreeMap;

use crate::error::{config, Result};

/// A closed range `[low, high]` a parameter is drawn from uniformly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub low: f64,
    pub high: f64,
}

impl Range {
    /// `[low, high]`.
    pub const fn new(low: f64, high: f64) -> Self {
        Range { low, high }
    }

    /// torchvision's factor range around 1: `[max(0, 1 - amount), 1 + amount]`
    /// (ColorJitter's `brightness=0.3`).
    pub fn around_one(amount: f64) -> Self {
        Range { low: (1.0 - amount).max(0.0), high: 1.0 + amount }
    }

    /// Errors unless `low <= high`, both finite and within `[min, max]`;
    /// the message names `field`.
    pub(crate) fn check(&self, field: &str, min: f64, max: f64) -> Result<()> {
        let Range { low, high } = *self;
        if !(low.is_finite() && high.is_finite() && low <= high && low >= min && high <= max) {
            return Err(config(format!("{field}: [{low}, {high}] is not a range within [{min}, {max}]")));
        }
        Ok(())
    }
}

/// How an affine transform samples its source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Interpolation {
    /// torchvision's default for `RandomAffine` (and LeRobot's).
    #[default]
    Nearest,
    Bilinear,
}

/// One random transform: the ranges it draws its parameters from. Each is
/// torchvision v2's functional operation on float images in `[0, 1]`.
#[derive(Clone, Debug, PartialEq)]
pub enum Transform {
    /// `adjust_brightness(factor)`: `x * factor`.
    Brightness(Range),
    /// `adjust_contrast(factor)`: blended with the frame's mean grey.
    Contrast(Range),
    /// `adjust_saturation(factor)`: blended with each pixel's grey.
    Saturation(Range),
    /// `adjust_hue(shift)`, shift in `[-0.5, 0.5]` turns.
    Hue(Range),
    /// `adjust_sharpness(factor)`: blended with a 3x3 blur (borders kept).
    Sharpness(Range),
    /// `adjust_gamma(gamma)`: `x ^ gamma`.
    Gamma(Range),
    /// `ColorJitter`: each present factor drawn, the four applied in a
    /// random order (torchvision draws a permutation per call).
    ColorJitter { brightness: Option<Range>, contrast: Option<Range>, saturation: Option<Range>, hue: Option<Range> },
    /// `RandomAffine`: a rotation in degrees, a translation of up to the
    /// given fractions of the width and height (whole pixels, as
    /// torchvision rounds them), a scale; the frame's size is kept and
    /// what comes from outside it is black.
    Affine { degrees: Range, translate: Option<(f64, f64)>, scale: Option<Range>, interpolation: Interpolation },
    /// `GaussianNoise(mean, sigma)`, clipped to `[0, 1]`: a normal value per
    /// pixel and channel, different for each frame of a window.
    GaussianNoise { mean: f64, sigma: f64 },
    /// `GaussianBlur(kernel, sigma)`: odd kernel sizes `(width, height)`,
    /// sigma drawn from the range, reflected borders.
    GaussianBlur { kernel: (usize, usize), sigma: Range },
}

impl Transform {
    fn check(&self, field: &str) -> Result<()> {
        let factor = |name: &str, range: &Range| range.check(&format!("{field}.{name}"), 0.0, f64::MAX);
        let hue = |range: &Range| range.check(&format!("{field}.hue"), -0.5, 0.5);
        match self {
            Transform::Brightness(r) => factor("brightness", r),
            Transform::Contrast(r) => factor("contrast", r),
            Transform::Saturation(r) => factor("saturation", r),
            Transform::Hue(r) => hue(r),
            Transform::Sharpness(r) => factor("sharpness", r),
            Transform::Gamma(r) => factor("gamma", r),
            Transform::ColorJitter { brightness, contrast, saturation, hue: shift } => {
                brightness.iter().try_for_each(|r| factor("brightness", r))?;
                contrast.iter().try_for_each(|r| factor("contrast", r))?;
                saturation.iter().try_for_each(|r| factor("saturation", r))?;
                shift.iter().try_for_each(hue)
            }
            Transform::Affine { degrees, translate, scale, .. } => {
                degrees.check(&format!("{field}.degrees"), -360.0, 360.0)?;
                if let Some((x, y)) = translate {
                    if !((0.0..=1.0).contains(x) && (0.0..=1.0).contains(y)) {
                        return Err(config(format!("{field}.translate: ({x}, {y}) are not fractions in [0, 1]")));
                    }
                }
                match scale {
                    Some(scale) if scale.low <= 0.0 => {
                        Err(config(format!("{field}.scale: {} is not a positive scale", scale.low)))
                    }
                    Some(scale) => factor("scale", scale),
                    None => Ok(()),
                }
            }
            Transform::GaussianNoise { mean, sigma } => {
                if !(mean.is_finite() && sigma.is_finite() && *sigma >= 0.0) {
                    return Err(config(format!("{field}: noise of mean {mean} and sigma {sigma}")));
                }
                Ok(())
            }
            Transform::GaussianBlur { kernel: (w, h), sigma } => {
                if *w == 0 || *h == 0 || w % 2 == 0 || h % 2 == 0 || *w > 255 || *h > 255 {
                    return Err(config(format!("{field}.kernel_size: ({w}, {h}) are not odd sizes up to 255")));
                }
                if sigma.low <= 0.0 {
                    return Err(config(format!("{field}.sigma: {} is not positive", sigma.low)));
                }
                factor("sigma", sigma)
            }
        }
    }
}

/// A transform with its name and its weight in a [`RandomSubset`].
#[derive(Clone, Debug, PartialEq)]
pub struct Weighted {
    pub name: String,
    pub weight: f64,
    pub transform: Transform,
}

/// LeRobot's `RandomSubsetApply`: `max_num_transforms` of the transforms
/// (all of them when there are fewer) chosen without replacement with
/// probabilities proportional to their weights, applied in the listed order
/// or, with `random_order`, in the order drawn. [`RandomSubset::all`]:
/// every transform in order (the recipes' `Compose`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RandomSubset {
    pub transforms: Vec<Weighted>,
    pub max_num_transforms: usize,
    pub random_order: bool,
}

impl RandomSubset {
    /// Every transform, in this order (torchvision's `Compose`).
    pub fn all(transforms: Vec<(&str, Transform)>) -> Self {
        let max_num_transforms = transforms.len();
        let transforms = transforms
            .into_iter()
            .map(|(name, transform)| Weighted { name: name.into(), weight: 1.0, transform })
            .collect();
        RandomSubset { transforms, max_num_transforms, random_order: false }
    }

    /// How many transforms a frame gets.
    pub fn subset_len(&self) -> usize {
        self.max_num_transforms.min(self.transforms.iter().filter(|t| t.weight > 0.0).count())
    }
}

/// Where a random crop is cut.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Crop {
    /// A crop of `floor(side * fraction)` of each side at a random place
    /// (ACT, openpi and GR00T crop 0.95).
    Fraction(f64),
    /// A crop of `width x height` at a random place (diffusion policy:
    /// 216x288 of 240x320).
    Size { width: usize, height: usize },
    /// torchvision's `RandomResizedCrop(scale, ratio)`: a share of the
    /// frame's area and an aspect ratio, drawn (ten tries, then the centre).
    RandomResized { scale: Range, ratio: Range },
}

/// The size a crop is brought to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CropOutput {
    /// The crop's own size (a plain crop).
    #[default]
    CropSize,
    /// The frame's size before the crop (crop and resize back).
    FrameSize,
    /// `width x height`.
    Size { width: usize, height: usize },
}

/// A random crop and the size it is resized to (antialiased bilinear, as
/// torchvision's `resized_crop`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CropSpec {
    pub crop: Crop,
    pub output: CropOutput,
    /// Evaluation cuts the same crop at the centre (diffusion policy,
    /// GR00T); off: evaluation takes the whole frame, brought to the same
    /// output size (ACT and openpi, whose crops are resized back).
    pub centre_in_evaluation: bool,
}

/// What a camera's frames get in training: a crop, then a random subset of
/// transforms. Evaluation ([`Augment::evaluation`]) takes the centre crop
/// of the same size instead and nothing random.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Augment {
    pub crop: Option<CropSpec>,
    pub transforms: RandomSubset,
}

impl Augment {
    /// Nothing: frames as they are.
    pub fn none() -> Self {
        Augment::default()
    }

    /// True when it changes nothing.
    pub fn is_identity(&self) -> bool {
        self.crop.is_none() && self.transforms.subset_len() == 0
    }

    /// Errors name the first field out of torchvision's bounds.
    pub fn check(&self) -> Result<()> {
        if let Some(spec) = &self.crop {
            match spec.crop {
                Crop::Fraction(f) if !(f > 0.0 && f <= 1.0) => {
                    return Err(config(format!("crop: fraction {f} is not in (0, 1]")))
                }
                Crop::Size { width: 0, .. } | Crop::Size { height: 0, .. } => {
                    return Err(config("crop: a crop of zero pixels"))
                }
                Crop::RandomResized { scale, ratio } => {
                    if spec.output == CropOutput::CropSize {
                        return Err(config(
                            "crop: a random resized crop needs an output size (the frame's or given): its crops differ in size",
                        ));
                    }
                    scale.check("crop.scale", 0.0, 1.0)?;
                    ratio.check("crop.ratio", f64::MIN_POSITIVE, f64::MAX)?;
                }
                _ => {}
            }
            if let CropOutput::Size { width: 0, .. } | CropOutput::Size { height: 0, .. } = spec.output {
                return Err(config("crop: an output of zero pixels"));
            }
        }
        for t in &self.transforms.transforms {
            if !(t.weight.is_finite() && t.weight >= 0.0) {
                return Err(config(format!("tfs.{}.weight: {} is not a weight", t.name, t.weight)));
            }
            t.transform.check(&format!("tfs.{}.kwargs", t.name))?;
        }
        Ok(())
    }

    /// What evaluation applies instead: nothing random; the centre crop
    /// of the training crop's size when the crop says so
    /// ([`CropSpec::centre_in_evaluation`]), else the whole frame (a random
    /// resized crop: always the whole frame), brought to the crop's output
    /// size.
    pub fn evaluation(&self) -> Evaluation {
        Evaluation { crop: self.crop }
    }
}

/// The transform evaluation and deployment ([`Augment::evaluation`]) apply:
/// nothing random.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Evaluation {
    /// Cut at the centre.
    pub crop: Option<CropSpec>,
}

/// Augmentation for every camera of a loader: `default` unless `cameras`
/// names the stream (wrist cameras often get no crop).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AugmentConfig {
    pub default: Augment,
    pub cameras: BTreeMap<String, Augment>,
    /// Draw one set of parameters per window for all its cameras (off:
    /// each camera its own, as LeRobot transforms each camera separately).
    pub same_across_cameras: bool,
}

impl AugmentConfig {
    /// `augment` for every camera.
    pub fn uniform(augment: Augment) -> Self {
        AugmentConfig { default: augment, cameras: BTreeMap::new(), same_across_cameras: false }
    }

    /// What `camera`'s frames get.
    pub fn for_camera(&self, camera: &str) -> &Augment {
        self.cameras.get(camera).unwrap_or(&self.default)
    }

    /// Errors name the camera and the field out of bounds.
    pub fn check(&self) -> Result<()> {
        self.default.check()?;
        for (camera, augment) in &self.cameras {
            augment.check().map_err(|e| config(format!("camera `{camera}`: {e}")))?;
        }
        Ok(())
    }
}

//! The recipes' augmentations by name ([`preset`]): LeRobot's
//! `image_transforms` defaults and the ACT, openpi, GR00T and diffusion
//! policy training recipes, each with its evaluation transform.

use crate::config::{
    Augment, AugmentConfig, Crop, CropOutput, CropSpec, Interpolation, RandomSubset, Range, Transform, Weighted,
};
use crate::error::{config, Result};

/// The names [`preset`] knows.
pub const PRESETS: [&str; 5] = ["lerobot", "act", "openpi", "groot", "diffusion_policy"];

/// The preset `name` for cameras named `cameras` (openpi leaves wrist
/// cameras, those whose name holds `wrist`, without crop and rotation).
///
/// - `lerobot`: LeRobot's `ImageTransformsConfig` defaults turned on: up to
///   3 of brightness [0.8, 1.2], contrast [0.8, 1.2], saturation [0.5, 1.5],
///   hue [-0.05, 0.05], sharpness [0.5, 1.5], affine ±5° and 5% translation,
///   equally weighted, in that order.
/// - `act`: act-plus-plus: a random 95% crop resized back, rotation ±5°,
///   ColorJitter(brightness 0.3, contrast 0.4, saturation 0.5).
/// - `openpi`: a random 95% crop resized back and rotation ±5° (not on wrist
///   cameras), then ColorJitter(0.3, 0.4, 0.5) on every camera.
/// - `groot`: a random 95% crop resized to 224x224, ColorJitter(0.3, 0.4,
///   0.5, hue 0.08); evaluation: the centre crop.
/// - `diffusion_policy`: a random crop of 90% of each side (216x288 of
///   240x320), no resize; evaluation: the centre crop.
pub fn preset(name: &str, cameras: &[&str]) -> Result<AugmentConfig> {
    let jitter = |hue: Option<f64>| Transform::ColorJitter {
        brightness: Some(Range::around_one(0.3)),
        contrast: Some(Range::around_one(0.4)),
        saturation: Some(Range::around_one(0.5)),
        hue: hue.map(|h| Range::new(-h, h)),
    };
    let rotation = Transform::Affine {
        degrees: Range::new(-5.0, 5.0),
        translate: None,
        scale: None,
        interpolation: Interpolation::Nearest,
    };
    let crop = |fraction: f64, output: CropOutput, centre_in_evaluation: bool| {
        Some(CropSpec { crop: Crop::Fraction(fraction), output, centre_in_evaluation })
    };
    let config = match name {
        "lerobot" => AugmentConfig::uniform(lerobot_default()),
        "act" => AugmentConfig::uniform(Augment {
            crop: crop(0.95, CropOutput::FrameSize, false),
            transforms: RandomSubset::all(vec![("rotation", rotation), ("color_jitter", jitter(None))]),
        }),
        "openpi" => {
            let mut config = AugmentConfig::uniform(Augment {
                crop: crop(0.95, CropOutput::FrameSize, false),
                transforms: RandomSubset::all(vec![("rotation", rotation), ("color_jitter", jitter(None))]),
            });
            for camera in cameras.iter().filter(|c| c.contains("wrist")) {
                let wrist = Augment { crop: None, transforms: RandomSubset::all(vec![("color_jitter", jitter(None))]) };
                config.cameras.insert((*camera).to_owned(), wrist);
            }
            config
        }
        "groot" => AugmentConfig::uniform(Augment {
            crop: crop(0.95, CropOutput::Size { width: 224, height: 224 }, true),
            transforms: RandomSubset::all(vec![("color_jitter", jitter(Some(0.08)))]),
        }),
        "diffusion_policy" => AugmentConfig::uniform(Augment {
            crop: crop(0.9, CropOutput::CropSize, true),
            transforms: RandomSubset::default(),
        }),
        other => return Err(config(format!("no preset `{other}` (presets: {})", PRESETS.join(", ")))),
    };
    config.check()?;
    Ok(config)
}

/// LeRobot's `ImageTransformsConfig()` defaults with `enable=True`.
pub fn lerobot_default() -> Augment {
    let weighted = |name: &str, transform| Weighted { name: name.to_owned(), weight: 1.0, transform };
    Augment {
        crop: None,
        transforms: RandomSubset {
            transforms: vec![
                weighted("brightness", Transform::Brightness(Range::new(0.8, 1.2))),
                weighted("contrast", Transform::Contrast(Range::new(0.8, 1.2))),
                weighted("saturation", Transform::Saturation(Range::new(0.5, 1.5))),
                weighted("hue", Transform::Hue(Range::new(-0.05, 0.05))),
                weighted("sharpness", Transform::Sharpness(Range::new(0.5, 1.5))),
                weighted(
                    "affine",
                    Transform::Affine {
                        degrees: Range::new(-5.0, 5.0),
                        translate: Some((0.05, 0.05)),
                        scale: None,
                        interpolation: Interpolation::Nearest,
                    },
                ),
            ],
            max_num_transforms: 3,
            random_order: false,
        },
    }
}

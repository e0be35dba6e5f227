//! Per-sample image augmentation for robocache's loader: torchvision v2's
//! functional operations on float frames in `[0, 1]` (crop and resize,
//! affine, brightness, contrast, saturation, hue, sharpness, gamma, noise,
//! blur) with parameters drawn per window and camera from (seed, epoch,
//! sample), LeRobot's `image_transforms` ([`Augment::from_lerobot`]) and
//! the policy recipes' presets ([`preset`]).
//!
//! A window's frames share one draw ([`FrameAugment`]), as LeRobot and the
//! recipes transform a window's frame stack; [`reference`] applies it on
//! the CPU, and robocache's CUDA backend applies the same parameters on
//! the GPU.
//!
//! ```
//! use robocache_augment::{preset, reference, SampleKey};
//!
//! let config = preset("lerobot", &["observation.images.top"])?;
//! let augment = config.for_camera("observation.images.top");
//! let key = SampleKey { seed: 0, epoch: 3, sample: 41, camera: 0 };
//! let params = augment.draw(key, (64, 48));
//! assert_eq!(params, augment.draw(key, (64, 48))); // reproducible
//! assert_eq!(params.ops.len(), 3); // LeRobot's max_num_transforms
//! // Two frames of one window, mid grey, augmented alike.
//! let frames = vec![0.5_f32; 2 * 64 * 48 * 3];
//! let (out, size) = reference::augment_windows(&frames, 2, (64, 48), &[params])?;
//! assert_eq!(size, (64, 48));
//! assert_eq!(out[..64 * 48 * 3], out[64 * 48 * 3..]);
//! // Evaluation: nothing random.
//! assert!(augment.evaluation().parameters((64, 48)).is_identity());
//! # Ok::<(), robocache_augment::Error>(())
//! ```

mod config;
mod draw;
mod error;
mod from_json;
mod lerobot;
mod params;
mod presets;
pub mod reference;

pub use config::{
    Augment, AugmentConfig, Crop, CropOutput, CropSpec, Evaluation, Interpolation, RandomSubset, Range, Transform,
    Weighted,
};
pub use draw::{mix64, Draws, SampleKey};
pub use error::{Error, Result};
pub use params::{AffineParams, CropWindow, FrameAugment, Op};
pub use presets::{lerobot_default, preset, PRESETS};

//! The parameters one window of one camera was drawn ([`FrameAugment`]):
//! what the CPU reference and the GPU kernel apply, the same for every
//! frame of the window.

use crate::config::Interpolation;

/// A crop of the frame, brought to `output` (width, height).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CropWindow {
    pub left: usize,
    pub top: usize,
    pub width: usize,
    pub height: usize,
    pub output: (usize, usize),
}

impl CropWindow {
    /// The whole `(width, height)` frame brought to `output`.
    pub fn whole(frame: (usize, usize), output: (usize, usize)) -> Self {
        CropWindow { left: 0, top: 0, width: frame.0, height: frame.1, output }
    }
}

/// An affine transform's drawn parameters (torchvision's `affine` with a
/// centre of `None` and no shear).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AffineParams {
    /// Degrees, counter-clockwise as torchvision turns.
    pub angle: f64,
    /// Whole pixels.
    pub translate: (i64, i64),
    pub scale: f64,
    pub interpolation: Interpolation,
}

/// One drawn operation, applied in order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    Brightness(f64),
    Contrast(f64),
    Saturation(f64),
    Hue(f64),
    Sharpness(f64),
    Gamma(f64),
    Affine(AffineParams),
    /// Normal values of `mean` and `sigma` from a counter-based generator
    /// keyed by `key`, the frame's place in its window, its pixel and
    /// channel.
    Noise {
        mean: f64,
        sigma: f64,
        key: u64,
    },
    /// Separable Gaussian blur: odd kernel sizes, sigmas along x and y.
    Blur {
        kernel: (usize, usize),
        sigma: (f64, f64),
    },
}

/// What every frame of one window of one camera gets: a crop (resized to
/// its output), then `ops` in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameAugment {
    pub crop: Option<CropWindow>,
    pub ops: Vec<Op>,
}

impl FrameAugment {
    /// The size of a frame of `(width, height)` after the crop.
    pub fn output_size(&self, frame: (usize, usize)) -> (usize, usize) {
        self.crop.map_or(frame, |c| c.output)
    }

    /// True when it changes nothing.
    pub fn is_identity(&self) -> bool {
        self.crop.is_none() && self.ops.is_empty()
    }
}

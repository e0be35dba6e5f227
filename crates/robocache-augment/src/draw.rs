//! Parameters drawn from (seed, epoch, sample, camera): a counter-based
//! generator (SplitMix64 over a key), so that a batch's augmentations do
//! not depend on which worker assembled it or in what order, a resumed run
//! draws the same ones, and each rank's samples (different sample numbers)
//! get their own. Distributions are torchvision's and LeRobot's.

use crate::config::{Augment, Crop, CropOutput, CropSpec, Evaluation, RandomSubset, Range, Transform};
use crate::params::{AffineParams, CropWindow, FrameAugment, Op};

/// Whose parameters: the loader's seed, the epoch, the sample (window)
/// number and the camera (its place among the loader's streams; 0 for all
/// when cameras share their parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SampleKey {
    pub seed: u64,
    pub epoch: u64,
    pub sample: u64,
    pub camera: u64,
}

/// SplitMix64's finaliser: a bijection of 64-bit values with good mixing.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A stream of uniform draws for one key.
#[derive(Clone, Debug)]
pub struct Draws {
    state: u64,
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

impl Draws {
    /// The draws of `key`.
    pub fn new(key: SampleKey) -> Self {
        let mut state = mix64(key.seed ^ 0x6175_676d_656e_7421);
        for part in [key.epoch, key.sample, key.camera] {
            state = mix64(state.wrapping_add(GOLDEN) ^ mix64(part.wrapping_add(GOLDEN)));
        }
        Draws { state }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix64(self.state)
    }

    /// Uniform in `[0, 1)`, 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[low, high]` (torch's `uniform_`).
    pub fn uniform(&mut self, range: Range) -> f64 {
        range.low + (range.high - range.low) * self.unit()
    }

    /// Uniform integer in `[0, n)` (`n > 0`), without modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

impl Augment {
    /// The parameters of the frames of `(width, height)` of the window
    /// `key` names.
    pub fn draw(&self, key: SampleKey, frame: (usize, usize)) -> FrameAugment {
        let mut draws = Draws::new(key);
        let crop = self.crop.map(|spec| random_crop(&spec, frame, &mut draws));
        let size = crop.map_or(frame, |c| c.output);
        let ops = draw_ops(&self.transforms, size, &mut draws);
        FrameAugment { crop, ops }
    }
}

impl Evaluation {
    /// The parameters evaluation applies to frames of `(width, height)`.
    pub fn parameters(&self, frame: (usize, usize)) -> FrameAugment {
        FrameAugment { crop: self.crop.map(|spec| centre_crop(&spec, frame)), ops: Vec::new() }
    }
}

/// The crop's size in a frame of `(width, height)`, for fixed-size crops.
fn fixed_crop_size(crop: &Crop, (width, height): (usize, usize)) -> Option<(usize, usize)> {
    match *crop {
        Crop::Fraction(f) => Some((
            ((width as f64 * f) as usize).clamp(1, width.max(1)),
            ((height as f64 * f) as usize).clamp(1, height.max(1)),
        )),
        Crop::Size { width: w, height: h } => Some((w, h)),
        Crop::RandomResized { .. } => None,
    }
}

fn output_of(spec: &CropSpec, frame: (usize, usize), crop: (usize, usize)) -> (usize, usize) {
    match spec.output {
        CropOutput::CropSize => crop,
        CropOutput::FrameSize => frame,
        CropOutput::Size { width, height } => (width, height),
    }
}

/// A crop of `spec` at a random place in a frame of `frame` (crops larger
/// than the frame are clamped to it; the loader checks sizes first).
fn random_crop(spec: &CropSpec, frame: (usize, usize), draws: &mut Draws) -> CropWindow {
    let (width, height) = frame;
    let (w, h, left, top) = match fixed_crop_size(&spec.crop, frame) {
        Some((w, h)) => {
            let (w, h) = (w.min(width), h.min(height));
            // torchvision's RandomCrop: top, then left.
            let top = draws.below((height - h + 1) as u64) as usize;
            let left = draws.below((width - w + 1) as u64) as usize;
            (w, h, left, top)
        }
        None => {
            let Crop::RandomResized { scale, ratio } = spec.crop else { unreachable!("fixed crops handled") };
            random_resized_crop(frame, scale, ratio, draws)
        }
    };
    CropWindow { left, top, width: w, height: h, output: output_of(spec, frame, (w, h)) }
}

/// torchvision's `RandomResizedCrop.get_params`: ten tries at an area and
/// an aspect ratio, else the centre crop closest to the ratio range.
fn random_resized_crop(
    (width, height): (usize, usize),
    scale: Range,
    ratio: Range,
    draws: &mut Draws,
) -> (usize, usize, usize, usize) {
    let area = (width * height) as f64;
    let log_ratio = Range::new(ratio.low.ln(), ratio.high.ln());
    for _ in 0..10 {
        let target = area * draws.uniform(scale);
        let aspect = draws.uniform(log_ratio).exp();
        let w = (target * aspect).sqrt().round_ties_even() as usize;
        let h = (target / aspect).sqrt().round_ties_even() as usize;
        if 0 < w && w <= width && 0 < h && h <= height {
            let top = draws.below((height - h + 1) as u64) as usize;
            let left = draws.below((width - w + 1) as u64) as usize;
            return (w, h, left, top);
        }
    }
    let in_ratio = width as f64 / height as f64;
    let (w, h) = if in_ratio < ratio.low {
        (width, ((width as f64 / ratio.low).round_ties_even() as usize).clamp(1, height))
    } else if in_ratio > ratio.high {
        (((height as f64 * ratio.high).round_ties_even() as usize).clamp(1, width), height)
    } else {
        (width, height)
    };
    (w, h, (width - w) / 2, (height - h) / 2)
}

/// The crop evaluation takes for `spec`: the centre crop (torchvision's
/// `CenterCrop`: offsets rounded half to even) or the whole frame, brought
/// to the crop's output size.
fn centre_crop(spec: &CropSpec, frame: (usize, usize)) -> CropWindow {
    let (width, height) = frame;
    let trained = fixed_crop_size(&spec.crop, frame).map(|(w, h)| (w.min(width), h.min(height)));
    let output = output_of(spec, frame, trained.unwrap_or(frame));
    let (w, h) = if spec.centre_in_evaluation { trained.unwrap_or(frame) } else { frame };
    let left = ((width - w) as f64 / 2.0).round_ties_even() as usize;
    let top = ((height - h) as f64 / 2.0).round_ties_even() as usize;
    CropWindow { left, top, width: w, height: h, output }
}

/// The subset's operations for frames of `size` (after the crop).
fn draw_ops(subset: &RandomSubset, size: (usize, usize), draws: &mut Draws) -> Vec<Op> {
    let chosen = subset.choose(draws);
    let mut ops = Vec::new();
    for index in chosen {
        draw_transform(&subset.transforms[index].transform, size, draws, &mut ops);
    }
    ops
}

impl RandomSubset {
    /// Indices of the transforms applied, in the order applied:
    /// `subset_len` drawn without replacement by weight (each draw
    /// proportional to the weights left, as `torch.multinomial` without
    /// replacement), sorted unless `random_order`.
    pub fn choose(&self, draws: &mut Draws) -> Vec<usize> {
        choose_subset(self, draws)
    }
}

fn choose_subset(subset: &RandomSubset, draws: &mut Draws) -> Vec<usize> {
    let count = subset.subset_len();
    let mut weights: Vec<f64> = subset.transforms.iter().map(|t| t.weight.max(0.0)).collect();
    if count == weights.iter().filter(|&&w| w > 0.0).count() && !subset.random_order {
        return (0..weights.len()).filter(|&i| weights[i] > 0.0).collect();
    }
    let mut chosen = Vec::with_capacity(count);
    for _ in 0..count {
        let total: f64 = weights.iter().sum();
        let mut target = draws.unit() * total;
        let mut pick = weights.iter().rposition(|&w| w > 0.0).unwrap_or(0);
        for (i, &w) in weights.iter().enumerate() {
            if w > 0.0 && target < w {
                pick = i;
                break;
            }
            target -= w;
        }
        chosen.push(pick);
        weights[pick] = 0.0;
    }
    if !subset.random_order {
        chosen.sort_unstable();
    }
    chosen
}

fn draw_transform(transform: &Transform, (width, height): (usize, usize), draws: &mut Draws, ops: &mut Vec<Op>) {
    match transform {
        Transform::Brightness(r) => ops.push(Op::Brightness(draws.uniform(*r))),
        Transform::Contrast(r) => ops.push(Op::Contrast(draws.uniform(*r))),
        Transform::Saturation(r) => ops.push(Op::Saturation(draws.uniform(*r))),
        Transform::Hue(r) => ops.push(Op::Hue(draws.uniform(*r))),
        Transform::Sharpness(r) => ops.push(Op::Sharpness(draws.uniform(*r))),
        Transform::Gamma(r) => ops.push(Op::Gamma(draws.uniform(*r))),
        Transform::ColorJitter { brightness, contrast, saturation, hue } => {
            // torchvision: a permutation of the four, then each factor.
            let mut order = [0usize, 1, 2, 3];
            for i in (1..4).rev() {
                order.swap(i, draws.below(i as u64 + 1) as usize);
            }
            let b = brightness.map(|r| Op::Brightness(draws.uniform(r)));
            let c = contrast.map(|r| Op::Contrast(draws.uniform(r)));
            let s = saturation.map(|r| Op::Saturation(draws.uniform(r)));
            let h = hue.map(|r| Op::Hue(draws.uniform(r)));
            let factors = [b, c, s, h];
            ops.extend(order.iter().filter_map(|&i| factors[i]));
        }
        Transform::Affine { degrees, translate, scale, interpolation } => {
            let angle = draws.uniform(*degrees);
            let translate = match translate {
                Some((fx, fy)) => {
                    let (max_x, max_y) = (fx * width as f64, fy * height as f64);
                    let tx = draws.uniform(Range::new(-max_x, max_x)).round_ties_even() as i64;
                    let ty = draws.uniform(Range::new(-max_y, max_y)).round_ties_even() as i64;
                    (tx, ty)
                }
                None => (0, 0),
            };
            let scale = scale.map_or(1.0, |r| draws.uniform(r));
            ops.push(Op::Affine(AffineParams { angle, translate, scale, interpolation: *interpolation }));
        }
        Transform::GaussianNoise { mean, sigma } => {
            ops.push(Op::Noise { mean: *mean, sigma: *sigma, key: draws.next_u64() })
        }
        Transform::GaussianBlur { kernel, sigma } => {
            // torchvision draws one sigma for both axes.
            let s = draws.uniform(*sigma);
            ops.push(Op::Blur { kernel: *kernel, sigma: (s, s) });
        }
    }
}

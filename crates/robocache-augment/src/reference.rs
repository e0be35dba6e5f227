//! The operations on the CPU: float RGB frames `[H, W, 3]` with values in
//! `[0, 1]`, each operation torchvision v2's functional one on a float
//! image, step for step (docs/semantics.md states the order of each sum and
//! where a result may differ from torchvision's by rounding).

use rayon::prelude::*;

use crate::config::Interpolation;
use crate::draw::mix64;
use crate::error::{Error, Result};
use crate::params::{AffineParams, CropWindow, FrameAugment, Op};

/// Float levels to 8 bits as torchvision's `to_dtype(uint8, scale=True)`:
/// `x * 255.999`, truncated.
pub fn level_to_u8(x: f32) -> u8 {
    (x * 255.999_f32) as u8
}

/// Frames of `windows x steps` frames each (`[windows * steps, H, W, 3]`,
/// `frame` = `(W, H)`), window `w`'s frames augmented by `params[w]`. Every
/// window's output has one size, which is returned with the frames.
pub fn augment_windows(
    frames: &[f32],
    steps: usize,
    frame: (usize, usize),
    params: &[FrameAugment],
) -> Result<(Vec<f32>, (usize, usize))> {
    let (width, height) = frame;
    let frame_len = width * height * 3;
    if frames.len() != params.len() * steps * frame_len {
        return Err(Error::Frames(format!(
            "{} values for {} windows of {steps} frames of {width}x{height}",
            frames.len(),
            params.len()
        )));
    }
    let output = check_outputs(params, frame)?;
    let out_len = output.0 * output.1 * 3;
    let mut out = vec![0f32; params.len() * steps * out_len];
    if out_len == 0 || frame_len == 0 {
        return Ok((out, output));
    }
    out.par_chunks_mut(out_len).zip(frames.par_chunks(frame_len)).enumerate().for_each(|(i, (out, source))| {
        let (augment, step) = (&params[i / steps.max(1)], i % steps.max(1));
        let done = augment_frame(augment, source, frame, step);
        out.copy_from_slice(&done);
    });
    Ok((out, output))
}

/// The one output size of `params` for frames of `frame`, every crop
/// within the frame.
pub fn check_outputs(params: &[FrameAugment], frame: (usize, usize)) -> Result<(usize, usize)> {
    let mut output = None;
    for (window, augment) in params.iter().enumerate() {
        if let Some(crop) = augment.crop {
            if crop.width == 0
                || crop.height == 0
                || crop.left + crop.width > frame.0
                || crop.top + crop.height > frame.1
                || crop.output.0 == 0
                || crop.output.1 == 0
            {
                return Err(Error::Frames(format!(
                    "window {window}: a crop of {}x{} at ({}, {}) to {}x{} does not fit a {}x{} frame",
                    crop.width, crop.height, crop.left, crop.top, crop.output.0, crop.output.1, frame.0, frame.1
                )));
            }
        }
        let size = augment.output_size(frame);
        match output {
            None => output = Some(size),
            Some(first) if first != size => {
                return Err(Error::Frames(format!(
                    "window {window} comes out {}x{}, window 0 {}x{}: one batch, one frame size",
                    size.0, size.1, first.0, first.1
                )))
            }
            Some(_) => {}
        }
    }
    Ok(output.unwrap_or(frame))
}

/// One frame (the `step`th of its window) augmented.
pub fn augment_frame(augment: &FrameAugment, frame: &[f32], size: (usize, usize), step: usize) -> Vec<f32> {
    let (mut image, mut size) = match augment.crop {
        Some(crop) => (resized_crop(frame, size, &crop), crop.output),
        None => (frame.to_vec(), size),
    };
    for op in &augment.ops {
        apply_op(op, &mut image, &mut size, step);
    }
    image
}

fn apply_op(op: &Op, image: &mut Vec<f32>, size: &mut (usize, usize), step: usize) {
    match *op {
        Op::Brightness(f) => {
            let f = f as f32;
            image.iter_mut().for_each(|x| *x = (*x * f).clamp(0.0, 1.0));
        }
        Op::Contrast(f) => {
            let mean = mean_grey(image);
            let (ratio, alpha) = blend_ratios(f);
            image.iter_mut().for_each(|x| *x = blend(*x, mean, ratio, alpha));
        }
        Op::Saturation(f) => {
            let (ratio, alpha) = blend_ratios(f);
            for pixel in image.chunks_exact_mut(3) {
                let grey = grey(pixel);
                for x in pixel.iter_mut() {
                    *x = blend(*x, grey, ratio, alpha);
                }
            }
        }
        Op::Hue(shift) => {
            let shift = shift as f32;
            for pixel in image.chunks_exact_mut(3) {
                let rgb = shift_hue([pixel[0], pixel[1], pixel[2]], shift);
                pixel.copy_from_slice(&rgb);
            }
        }
        Op::Sharpness(f) => sharpen(image, *size, (1.0 - f) as f32),
        Op::Gamma(g) => {
            let g = g as f32;
            image.iter_mut().for_each(|x| *x = x.powf(g));
        }
        Op::Affine(params) => *image = affine(image, *size, &params),
        Op::Noise { mean, sigma, key } => {
            let (mean, sigma) = (mean as f32, sigma as f32);
            let per_frame = image.len() as u64;
            for (i, x) in image.iter_mut().enumerate() {
                let n = standard_normal(key, step as u64 * per_frame + i as u64);
                *x = (*x + (mean + n * sigma)).clamp(0.0, 1.0);
            }
        }
        Op::Blur { kernel, sigma } => *image = gaussian_blur(image, *size, kernel, sigma),
    }
}

/// torchvision's grey: `r * 0.2989 + g * 0.587 + b * 0.114` in f32.
pub fn grey(pixel: &[f32]) -> f32 {
    pixel[0] * 0.2989 + pixel[1] * 0.587 + pixel[2] * 0.114
}

/// A grey level in 32-bit fixed point (truncated): the terms of a frame's
/// mean, summed as integers so that every order of summation (the GPU's
/// atomics) gives the same mean.
pub fn grey_fixed_point(pixel: &[f32]) -> u64 {
    (grey(pixel) * 4_294_967_296.0_f32) as u64
}

/// The mean of a frame's greys from the sum of their fixed-point values
/// over `pixels` pixels.
pub fn mean_of_fixed_point(sum: u64, pixels: usize) -> f32 {
    (sum as f64 / 4_294_967_296.0 / pixels.max(1) as f64) as f32
}

/// The frame's mean grey (torchvision's `mean` of the grey image; here in
/// 32-bit fixed point, within 2^-32 of it).
fn mean_grey(image: &[f32]) -> f32 {
    let sum: u64 = image.chunks_exact(3).map(grey_fixed_point).sum();
    mean_of_fixed_point(sum, image.len() / 3)
}

/// A blend's `ratio` and `1 - ratio` (computed in f64, as Python does,
/// then f32).
fn blend_ratios(ratio: f64) -> (f32, f32) {
    (ratio as f32, (1.0 - ratio) as f32)
}

/// torchvision's `_blend`: `x * ratio + other * (1 - ratio)`, clamped.
fn blend(x: f32, other: f32, ratio: f32, alpha: f32) -> f32 {
    (x * ratio + other * alpha).clamp(0.0, 1.0)
}

/// One pixel's hue turned by `shift` (torchvision's `_rgb_to_hsv`, the
/// shift modulo 1, `_hsv_to_rgb`).
pub fn shift_hue([r, g, b]: [f32; 3], shift: f32) -> [f32; 3] {
    let maxc = r.max(g).max(b);
    let minc = r.min(g).min(b);
    let eqc = maxc == minc;
    let range = maxc - minc;
    let s = range / if eqc { 1.0 } else { maxc };
    let divisor = if eqc { 1.0 } else { range };
    let (rc, gc, bc) = ((maxc - r) / divisor, (maxc - g) / divisor, (maxc - b) / divisor);
    let h = if maxc == r {
        bc - gc
    } else if maxc == g {
        (rc + 2.0) - bc
    } else {
        (gc + 4.0) - rc
    };
    let h = (h * (1.0 / 6.0) + 1.0) % 1.0;
    let h = python_remainder(h + shift);
    let v = maxc;
    let h6 = h * 6.0;
    let i = h6.floor();
    let f = h6 - i;
    let sxf = s * f;
    let one_minus_s = 1.0 - s;
    let q = ((1.0 - sxf) * v).clamp(0.0, 1.0);
    let t = ((sxf + one_minus_s) * v).clamp(0.0, 1.0);
    let p = (one_minus_s * v).clamp(0.0, 1.0);
    match (i as i32).rem_euclid(6) {
        0 => [v, t, p],
        1 => [q, v, p],
        2 => [p, v, t],
        3 => [p, q, v],
        4 => [t, p, v],
        _ => [v, p, q],
    }
}

/// `x % 1` with the sign of the divisor (torch's `remainder`).
fn python_remainder(x: f32) -> f32 {
    let r = x % 1.0;
    if r < 0.0 {
        r + 1.0
    } else {
        r
    }
}

/// torchvision's `adjust_sharpness`: the interior blended with its 3x3
/// blur (weights 1/13, centre 5/13) as `x + (1 - factor) * (blur - x)`
/// (`alpha` is `1 - factor`), the border kept, then clamped.
fn sharpen(image: &mut [f32], (width, height): (usize, usize), alpha: f32) {
    if width <= 2 || height <= 2 {
        return;
    }
    let source = image.to_vec();
    let (a, b) = (1.0_f32 / 13.0, 5.0_f32 / 13.0);
    let at = |x: usize, y: usize, c: usize| source[(y * width + x) * 3 + c];
    for y in 1..height - 1 {
        for x in 1..width - 1 {
            for c in 0..3 {
                let mut blurred = 0.0_f32;
                for dy in 0..3 {
                    for dx in 0..3 {
                        let w = if dx == 1 && dy == 1 { b } else { a };
                        blurred += at(x + dx - 1, y + dy - 1, c) * w;
                    }
                }
                let v = at(x, y, c);
                image[(y * width + x) * 3 + c] = v + (blurred - v) * alpha;
            }
        }
    }
    image.iter_mut().for_each(|x| *x = x.clamp(0.0, 1.0));
}

/// torchvision's inverse affine matrix (centre at the frame's middle, no
/// shear), in f64 as it computes it.
pub fn inverse_affine_matrix(params: &AffineParams) -> [f64; 6] {
    let rot = params.angle.to_radians();
    let (tx, ty) = (params.translate.0 as f64, params.translate.1 as f64);
    let (a, b, c, d) = (rot.cos(), -rot.sin(), rot.sin(), rot.cos());
    let scale = params.scale;
    let mut m = [d / scale, -b / scale, 0.0, -c / scale, a / scale, 0.0];
    m[2] += -m[0] * tx - m[1] * ty;
    m[5] += -m[3] * tx - m[4] * ty;
    m
}

/// torchvision's `affine` of a float image: each output pixel's source
/// from the inverse matrix on a grid centred on the frame (`grid_sample`,
/// `align_corners=False`, zeros outside), nearest or bilinear; with its
/// default fill (0), a bilinear value is scaled by the share of its taps
/// inside the frame, as torchvision's fill mask does.
fn affine(image: &[f32], (width, height): (usize, usize), params: &AffineParams) -> Vec<f32> {
    let m = inverse_affine_matrix(params).map(|v| v as f32);
    let (w, h) = (width as f32, height as f32);
    let (half_w, half_h) = (0.5 * w, 0.5 * h);
    let theta = [m[0] / half_w, m[1] / half_w, m[2] / half_w, m[3] / half_h, m[4] / half_h, m[5] / half_h];
    let mut out = vec![0f32; image.len()];
    let at = |x: i64, y: i64, c: usize| -> f32 {
        if x < 0 || y < 0 || x >= width as i64 || y >= height as i64 {
            0.0
        } else {
            image[(y as usize * width + x as usize) * 3 + c]
        }
    };
    let inside =
        |x: i64, y: i64| -> f32 { f32::from(u8::from(x >= 0 && y >= 0 && x < width as i64 && y < height as i64)) };
    for oy in 0..height {
        let gy_base = linspace_at(height, oy);
        for ox in 0..width {
            let gx_base = linspace_at(width, ox);
            let gx = gx_base * theta[0] + gy_base * theta[1] + theta[2];
            let gy = gx_base * theta[3] + gy_base * theta[4] + theta[5];
            let ix = ((gx + 1.0) * w - 1.0) / 2.0;
            let iy = ((gy + 1.0) * h - 1.0) / 2.0;
            let pixel = &mut out[(oy * width + ox) * 3..][..3];
            match params.interpolation {
                Interpolation::Nearest => {
                    let (x, y) = (ix.round_ties_even() as i64, iy.round_ties_even() as i64);
                    for c in 0..3 {
                        pixel[c] = at(x, y, c);
                    }
                }
                Interpolation::Bilinear => {
                    let (x0, y0) = (ix.floor(), iy.floor());
                    let (fx, fy) = (ix - x0, iy - y0);
                    let (x0, y0) = (x0 as i64, y0 as i64);
                    let weights = [(1.0 - fx) * (1.0 - fy), fx * (1.0 - fy), (1.0 - fx) * fy, fx * fy];
                    let taps = [(x0, y0), (x0 + 1, y0), (x0, y0 + 1), (x0 + 1, y0 + 1)];
                    // Summed in tap order from +0.0 (the kernel's order).
                    let mut mask = 0.0_f32;
                    for (&(x, y), w) in taps.iter().zip(weights) {
                        mask += inside(x, y) * w;
                    }
                    for c in 0..3 {
                        let mut v = 0.0_f32;
                        for (&(x, y), w) in taps.iter().zip(weights) {
                            v += at(x, y, c) * w;
                        }
                        pixel[c] = v * mask;
                    }
                }
            }
        }
    }
    out
}

/// `torch.linspace((1 - n) / 2, (n - 1) / 2, n)[i]` in f32 (its two halves
/// stepped from either end).
fn linspace_at(n: usize, i: usize) -> f32 {
    linspace_between((1.0 - n as f32) * 0.5, (n as f32 - 1.0) * 0.5, n, i)
}

/// A normal value for `index` of the generator `key` (Box-Muller over two
/// 26-bit uniforms of one 64-bit hash, in f64).
pub fn standard_normal(key: u64, index: u64) -> f32 {
    let bits = mix64(key ^ mix64(index.wrapping_add(0x9e37_79b9_7f4a_7c15)));
    let u1 = ((bits >> 38) + 1) as f64 * (1.0 / (1u64 << 26) as f64);
    let u2 = (bits & ((1 << 26) - 1)) as f64 * (1.0 / (1u64 << 26) as f64);
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

/// torchvision's Gaussian kernel of `size` taps and `sigma`, normalised.
pub fn gaussian_kernel(size: usize, sigma: f64) -> Vec<f32> {
    let half = (size as f32 - 1.0) * 0.5;
    let sigma = sigma as f32;
    let pdf: Vec<f32> = (0..size)
        .map(|i| {
            let x = linspace_between(-half, half, size, i) / sigma;
            (-0.5 * x * x).exp()
        })
        .collect();
    let sum: f32 = pdf.iter().sum();
    pdf.iter().map(|p| p / sum).collect()
}

/// `torch.linspace(start, end, n)[i]` in f32 (its two halves stepped from
/// either end).
fn linspace_between(start: f32, end: f32, n: usize, i: usize) -> f32 {
    if n <= 1 {
        return start;
    }
    let step = (end - start) / (n - 1) as f32;
    if i < n / 2 {
        start + step * i as f32
    } else {
        end - step * (n - 1 - i) as f32
    }
}

/// Index `i` reflected into `0..n` (torch's `reflect` padding: the edge
/// not repeated).
fn reflect(i: i64, n: usize) -> usize {
    let n = n as i64;
    if n == 1 {
        return 0;
    }
    let period = 2 * (n - 1);
    let i = i.rem_euclid(period);
    (if i >= n { period - i } else { i }) as usize
}

/// torchvision's `gaussian_blur` (reflected borders), as two passes.
fn gaussian_blur(
    image: &[f32],
    (width, height): (usize, usize),
    kernel: (usize, usize),
    sigma: (f64, f64),
) -> Vec<f32> {
    let (kx, ky) = (gaussian_kernel(kernel.0, sigma.0), gaussian_kernel(kernel.1, sigma.1));
    let (hx, hy) = ((kernel.0 / 2) as i64, (kernel.1 / 2) as i64);
    let mut rows = vec![0f32; image.len()];
    for y in 0..height {
        for x in 0..width {
            for c in 0..3 {
                let mut sum = 0.0_f32;
                for (k, w) in kx.iter().enumerate() {
                    let sx = reflect(x as i64 + k as i64 - hx, width);
                    sum += image[(y * width + sx) * 3 + c] * w;
                }
                rows[(y * width + x) * 3 + c] = sum;
            }
        }
    }
    let mut out = vec![0f32; image.len()];
    for y in 0..height {
        for x in 0..width {
            for c in 0..3 {
                let mut sum = 0.0_f32;
                for (k, w) in ky.iter().enumerate() {
                    let sy = reflect(y as i64 + k as i64 - hy, height);
                    sum += rows[(sy * width + x) * 3 + c] * w;
                }
                out[(y * width + x) * 3 + c] = sum;
            }
        }
    }
    out
}

/// One axis of an antialiased bilinear resize (torch's `_upsample_*_aa`
/// and Pillow's triangle filter): for each output position, its first
/// input and normalised weights.
pub fn resize_taps(input: usize, output: usize) -> Vec<(usize, Vec<f32>)> {
    let scale = input as f64 / output as f64;
    let support = if scale >= 1.0 { scale } else { 1.0 };
    let inv = if scale >= 1.0 { 1.0 / scale } else { 1.0 };
    (0..output)
        .map(|i| {
            let centre = scale * (i as f64 + 0.5);
            let min = ((centre - support + 0.5).trunc() as i64).max(0) as usize;
            let max = ((centre + support + 0.5).trunc() as i64).min(input as i64) as usize;
            let raw: Vec<f64> =
                (min..max.max(min)).map(|j| (1.0 - ((j as f64 - centre + 0.5) * inv).abs()).max(0.0)).collect();
            let total: f64 = raw.iter().sum();
            let weights = raw.iter().map(|w| if total != 0.0 { (w / total) as f32 } else { 0.0 }).collect();
            (min, weights)
        })
        .collect()
}

/// torchvision's `resized_crop(antialias=True)` of a float frame: the crop
/// cut out, then resized (rows, then columns).
fn resized_crop(frame: &[f32], (width, _): (usize, usize), crop: &CropWindow) -> Vec<f32> {
    let (out_w, out_h) = crop.output;
    let (tx, ty) = (resize_taps(crop.width, out_w), resize_taps(crop.height, out_h));
    let mut rows = vec![0f32; crop.height * out_w * 3];
    for y in 0..crop.height {
        let source = &frame[((crop.top + y) * width + crop.left) * 3..];
        for (x, (first, weights)) in tx.iter().enumerate() {
            for c in 0..3 {
                let mut sum = 0.0_f32;
                for (k, w) in weights.iter().enumerate() {
                    sum += source[(first + k) * 3 + c] * w;
                }
                rows[(y * out_w + x) * 3 + c] = sum;
            }
        }
    }
    let mut out = vec![0f32; out_w * out_h * 3];
    for (y, (first, weights)) in ty.iter().enumerate() {
        for x in 0..out_w {
            for c in 0..3 {
                let mut sum = 0.0_f32;
                for (k, w) in weights.iter().enumerate() {
                    sum += rows[((first + k) * out_w + x) * 3 + c] * w;
                }
                out[(y * out_w + x) * 3 + c] = sum;
            }
        }
    }
    out
}

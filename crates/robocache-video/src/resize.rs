//! Crop and resize of 8-bit RGB frames: the crop cut out first, then
//! resized bit for bit as Pillow 10 to 12 resize an RGB image with
//! `Image.BILINEAR` (`Image.fromarray(frame[top:top + h, left:left + w])
//! .resize((width, height), Image.BILINEAR)`): a separable triangle filter
//! whose support widens with the downscale factor (a downscale averages
//! every source pixel it covers instead of aliasing), applied along rows
//! first, then along columns, each pass rounded to 8 bits.
//!
//! For each axis of the crop, `size` source pixels to `outputs`:
//!
//! - `scale = size / outputs`, `filterscale = max(scale, 1)`,
//!   `support = filterscale` (the triangle's half-width, in source pixels);
//! - output `i` is centred at `c = (i + 0.5) · scale` and reads the source
//!   pixels from `lo = max(trunc(c − support + 0.5), 0)` to
//!   `hi = min(trunc(c + support + 0.5), size)` (exclusive), pixel `j`
//!   weighing `max(0, 1 − |(j − c + 0.5) · (1 / filterscale)|)`; the
//!   weights are divided by their sum (f64, in that order of operations),
//!   then kept as `trunc(0.5 + w · 2²²)` in i32;
//! - a pass sums `level · weight` in i32 from `2²¹` and keeps the sum
//!   `>> 22`, clamped to 0..=255.
//!
//! The horizontal pass runs over the rows the vertical pass reads
//! ([`ResizePlan::rows`]); a pass at scale 1 is an exact copy, so a crop of
//! the output's size is a plain crop. Pillow 13 runs the vertical pass first
//! when the height shrinks much more than the width (its pull request 9549),
//! which can move a level by one; torchvision's uint8 antialiased resize
//! rounds its weights differently and differs by a level here and there.

use std::ops::Range;

/// The fixed-point bits of the weights (Pillow's `PRECISION_BITS`).
const PRECISION_BITS: u32 = 22;

/// The most weights one output position may have: it bounds every pass's
/// i32 sum below 2³¹ (`255 · (2²² + taps / 2) + 2²¹`).
pub const MAX_RESIZE_TAPS: usize = 1 << 16;

/// A crop and resize of camera frames: the output size, and the rectangle
/// of the source frame it is taken from (the whole frame when `crop` is
/// `None`). A crop of the output's size is a plain crop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameResize {
    /// Output width, pixels.
    pub width: usize,
    /// Output height, pixels.
    pub height: usize,
    /// The source rectangle; `None`: the whole frame.
    pub crop: Option<CropBox>,
}

/// A rectangle of a frame, in pixels: `left..left + width` by
/// `top..top + height`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CropBox {
    pub left: usize,
    pub top: usize,
    pub width: usize,
    pub height: usize,
}

impl FrameResize {
    /// A resize of the whole frame to `width × height`.
    pub fn to(width: usize, height: usize) -> Self {
        FrameResize { width, height, crop: None }
    }

    /// The plan of this resize for frames of `width × height`, or what is
    /// wrong with it: an empty output or crop, a crop past the frame, a
    /// downscale so steep that one output pixel would weigh more than
    /// [`MAX_RESIZE_TAPS`] source pixels.
    pub fn plan(&self, width: usize, height: usize) -> Result<ResizePlan, String> {
        let crop = self.crop.unwrap_or(CropBox { left: 0, top: 0, width, height });
        if self.width == 0 || self.height == 0 {
            return Err(format!("a resize to {}x{} has no pixels", self.width, self.height));
        }
        if crop.width == 0 || crop.height == 0 {
            return Err(format!("the crop {}x{} has no pixels", crop.width, crop.height));
        }
        let (right, bottom) = (crop.left.checked_add(crop.width), crop.top.checked_add(crop.height));
        if right.is_none_or(|r| r > width) || bottom.is_none_or(|b| b > height) {
            return Err(format!(
                "the crop {}x{} at ({}, {}) (left, top) is past the {width}x{height} frame",
                crop.width, crop.height, crop.left, crop.top
            ));
        }
        if width > u32::MAX as usize || height > u32::MAX as usize {
            return Err(format!("{width}x{height} frames: a resized frame is narrower and lower than 2^32 pixels"));
        }
        let horizontal = ResizeTaps::bilinear(crop.width, self.width)?.shifted(crop.left);
        let vertical = ResizeTaps::bilinear(crop.height, self.height)?.shifted(crop.top);
        let rows = vertical.reach();
        Ok(ResizePlan { source: (width, height), output: (self.width, self.height), horizontal, vertical, rows })
    }
}

/// One axis of a resize: for each output position, the first source
/// position it reads, how many, and their weights (fixed point, 22 bits).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResizeTaps {
    /// Weights kept per output position (runs shorter than this end in zeros).
    pub taps: usize,
    /// The first source position of each output position.
    pub first: Vec<u32>,
    /// The source positions each output position reads.
    pub count: Vec<u32>,
    /// `[outputs, taps]` weights.
    pub weights: Vec<i32>,
}

impl ResizeTaps {
    /// `outputs` positions over an axis of `size` source positions, by the
    /// module's formula.
    fn bilinear(size: usize, outputs: usize) -> Result<ResizeTaps, String> {
        let scale = size as f64 / outputs as f64;
        let filterscale = scale.max(1.0);
        let support = filterscale; // the triangle's support, 1, widened
        let taps = support.ceil() as usize * 2 + 1;
        if taps > MAX_RESIZE_TAPS {
            return Err(format!(
                "{size} source pixels to {outputs}: one output pixel would weigh {taps} source pixels, more than {MAX_RESIZE_TAPS}"
            ));
        }
        let (mut first, mut count) = (Vec::with_capacity(outputs), Vec::with_capacity(outputs));
        let mut weights = vec![0i32; outputs * taps];
        let mut kept = vec![0f64; taps];
        for (i, out) in weights.chunks_exact_mut(taps).enumerate() {
            let center = (i as f64 + 0.5) * scale;
            let inverse = 1.0 / filterscale;
            // `as` truncates toward zero, as C's (int) does.
            let lo = ((center - support + 0.5) as i64).max(0);
            let hi = ((center + support + 0.5) as i64).min(size as i64);
            let run = (hi - lo).max(0) as usize;
            let mut sum = 0.0;
            for (x, w) in kept[..run].iter_mut().enumerate() {
                *w = triangle(((x as i64 + lo) as f64 - center + 0.5) * inverse);
                sum += *w;
            }
            for (w, out) in kept[..run].iter().zip(out.iter_mut()) {
                let w = if sum != 0.0 { w / sum } else { *w };
                *out = (0.5 + w * f64::from(1u32 << PRECISION_BITS)) as i32;
            }
            first.push(lo as u32);
            count.push(run as u32);
        }
        Ok(ResizeTaps { taps, first, count, weights })
    }

    /// The same taps reading `offset` positions further (a crop's origin).
    fn shifted(mut self, offset: usize) -> Self {
        // The crop was checked to end inside the frame, which is narrower than 2^32.
        self.first.iter_mut().for_each(|f| *f += offset as u32);
        self
    }

    /// Output positions.
    pub fn outputs(&self) -> usize {
        self.first.len()
    }

    /// The source positions some output reads.
    fn reach(&self) -> Range<usize> {
        let start = self.first.first().map_or(0, |&f| f as usize);
        let end = self.first.iter().zip(&self.count).map(|(&f, &c)| (f + c) as usize).max().unwrap_or(start);
        start..end.max(start)
    }

    /// Output position `i`: its first source position and weights.
    fn run(&self, i: usize) -> (usize, &[i32]) {
        let weights = &self.weights[i * self.taps..][..self.count[i] as usize];
        (self.first[i] as usize, weights)
    }
}

/// Pillow's bilinear filter: a triangle of half-width 1.
fn triangle(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - x
    } else {
        0.0
    }
}

/// Where every weighted sum starts: a half, so that the shift rounds.
const HALF: i32 = 1 << (PRECISION_BITS - 1);

/// A weighted sum (from [`HALF`]) as a level: shifted and clamped, as both
/// passes round.
#[inline]
fn rounded(sum: i32) -> u8 {
    (sum >> PRECISION_BITS).clamp(0, 255) as u8
}

/// A resize planned for one source size ([`FrameResize::plan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResizePlan {
    /// Source width and height.
    pub source: (usize, usize),
    /// Output width and height.
    pub output: (usize, usize),
    /// Along each row: output columns from source columns.
    pub horizontal: ResizeTaps,
    /// Along each column: output rows from source rows.
    pub vertical: ResizeTaps,
    /// The source rows the vertical pass reads (the horizontal pass's rows).
    pub rows: Range<usize>,
}

impl ResizePlan {
    /// Bytes of the horizontal pass's result: [`Self::rows`] rows of the
    /// output's width.
    pub fn intermediate_len(&self) -> usize {
        self.rows.len() * self.output.0 * 3
    }

    /// Crops and resizes one RGB frame, `[height, width, 3]` row-major,
    /// into `out` (`[out_height, out_width, 3]`), using `rows` (at least
    /// [`Self::intermediate_len`] bytes) for the horizontal pass.
    ///
    /// # Panics
    /// If a slice is shorter than the plan's sizes say.
    pub fn resize_rgb_into(&self, frame: &[u8], rows: &mut [u8], out: &mut [u8]) {
        let ((width, _), (out_width, out_height)) = (self.source, self.output);
        let rows = &mut rows[..self.intermediate_len()];
        // Along rows: each output pixel's three sums over its taps' pixels.
        for (row, line) in self.rows.clone().zip(rows.chunks_exact_mut(out_width * 3)) {
            let source = &frame[row * width * 3..(row + 1) * width * 3];
            for (x, pixel) in line.chunks_exact_mut(3).enumerate() {
                let (first, weights) = self.horizontal.run(x);
                let taps = &source[first * 3..(first + weights.len()) * 3];
                let mut sums = [HALF; 3];
                for (levels, &weight) in taps.chunks_exact(3).zip(weights) {
                    sums[0] += i32::from(levels[0]) * weight;
                    sums[1] += i32::from(levels[1]) * weight;
                    sums[2] += i32::from(levels[2]) * weight;
                }
                for (level, sum) in pixel.iter_mut().zip(sums) {
                    *level = rounded(sum);
                }
            }
        }
        // Along columns: a whole output row at once, each tap's source row
        // added into one line of sums (integer sums: the order changes no
        // bit, and the inner loop runs over contiguous bytes).
        let line_bytes = out_width * 3;
        let mut sums = vec![0i32; line_bytes];
        for (y, line) in out[..out_height * line_bytes].chunks_exact_mut(line_bytes).enumerate() {
            let (first, weights) = self.vertical.run(y);
            let first = first - self.rows.start;
            sums.fill(HALF);
            for (k, &weight) in weights.iter().enumerate() {
                let source = &rows[(first + k) * line_bytes..(first + k + 1) * line_bytes];
                for (sum, &level) in sums.iter_mut().zip(source) {
                    *sum += i32::from(level) * weight;
                }
            }
            for (level, &sum) in line.iter_mut().zip(&sums) {
                *level = rounded(sum);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crop_at_scale_one_copies_the_pixels() {
        let frame: Vec<u8> = (0..5 * 4 * 3).map(|i| (i * 7 % 256) as u8).collect();
        let crop = CropBox { left: 1, top: 2, width: 3, height: 2 };
        let plan = FrameResize { width: 3, height: 2, crop: Some(crop) }.plan(5, 4).unwrap();
        let (mut rows, mut out) = (vec![0; plan.intermediate_len()], vec![0; 3 * 2 * 3]);
        plan.resize_rgb_into(&frame, &mut rows, &mut out);
        let expected: Vec<u8> = (2..4).flat_map(|y| frame[(y * 5 + 1) * 3..(y * 5 + 4) * 3].to_vec()).collect();
        assert_eq!(out, expected);
    }

    #[test]
    fn halving_averages_each_pair_as_pillow_does() {
        // Output 0 is centred at 1.0 and reads columns 0..3 (the triangle of
        // half-width 2 clipped at the edge): weights 3/7, 3/7, 1/7.
        let frame = [0u8, 0, 0, 80, 80, 80, 160, 160, 160, 240, 240, 240];
        let plan = FrameResize::to(2, 1).plan(4, 1).unwrap();
        assert_eq!(plan.horizontal.count, [3, 3]);
        let (mut rows, mut out) = (vec![0; plan.intermediate_len()], vec![0; 6]);
        plan.resize_rgb_into(&frame, &mut rows, &mut out);
        assert_eq!(out[..3], [57, 57, 57]); // (3·0 + 3·80 + 160) / 7 = 57.1
        assert_eq!(out[3..], [183, 183, 183]); // (80 + 3·160 + 3·240) / 7 = 182.9
    }

    #[test]
    fn bad_resizes_say_what_is_wrong() {
        assert!(FrameResize::to(0, 4).plan(8, 8).unwrap_err().contains("no pixels"));
        let past = FrameResize { width: 2, height: 2, crop: Some(CropBox { left: 6, top: 0, width: 4, height: 2 }) };
        assert!(past.plan(8, 8).unwrap_err().contains("past the 8x8 frame"));
        assert!(FrameResize::to(1, 1).plan(1 << 20, 1).unwrap_err().contains("more than"));
    }
}

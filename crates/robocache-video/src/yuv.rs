//! 8-bit YUV 4:2:0 frames and their conversion to RGB exactly as FFmpeg's
//! swscale converts `yuv420p` to `rgb24` on x86-64 (the conversion PyAV,
//! torchcodec and therefore LeRobot's decode return; docs/datasets.md):
//!
//! - BT.601 coefficients, limited range (swscale's default for video that
//!   does not signal its colour space, as LeRobot's encodes);
//! - chroma repeated over each 2×2 block (no interpolation);
//! - 16-bit fixed point as swscale's SIMD code computes it: every term is
//!   `(value · 8 · coefficient) >> 16` (`pmulhw`), the sum saturated to
//!   0..=255, coefficients `round(c · 2^13)`: luma 9539 (255/219), V→R
//!   13075, U→B 16525, U→G −3209, V→G −6660.
//!
//! The fixtures' frames (LeRobot's own decode) equal this conversion bit
//! for bit.

/// A decoded frame: three planes, chroma at half resolution (rounded up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Yuv420 {
    pub width: usize,
    pub height: usize,
    /// `Y` (`width × height`), then `U` and `V` (`⌈w/2⌉ × ⌈h/2⌉` each).
    pub data: Vec<u8>,
}

const Y_COEFF: i32 = 9539;
const V_TO_R: i32 = 13075;
const U_TO_B: i32 = 16525;
const U_TO_G: i32 = -3209;
const V_TO_G: i32 = -6660;

/// `pmulhw`: the high 16 bits of the signed product.
#[inline]
fn mulhw(a: i32, b: i32) -> i32 {
    (a * b) >> 16
}

impl Yuv420 {
    /// A black frame of the given size.
    pub fn new(width: usize, height: usize) -> Self {
        let chroma = width.div_ceil(2) * height.div_ceil(2);
        let mut data = vec![16u8; width * height + 2 * chroma];
        data[width * height..].fill(128);
        Yuv420 { width, height, data }
    }

    fn chroma_len(&self) -> usize {
        self.width.div_ceil(2) * self.height.div_ceil(2)
    }

    /// Plane 0 (Y), 1 (U) or 2 (V).
    pub fn plane(&self, plane: usize) -> &[u8] {
        let (y, c) = (self.width * self.height, self.chroma_len());
        match plane {
            0 => &self.data[..y],
            1 => &self.data[y..y + c],
            _ => &self.data[y + c..y + 2 * c],
        }
    }

    /// Plane 0 (Y), 1 (U) or 2 (V), writable.
    pub fn plane_mut(&mut self, plane: usize) -> &mut [u8] {
        let (y, c) = (self.width * self.height, self.chroma_len());
        match plane {
            0 => &mut self.data[..y],
            1 => &mut self.data[y..y + c],
            _ => &mut self.data[y + c..y + 2 * c],
        }
    }

    /// The frame as RGB, `[height, width, 3]` row-major, into `out`
    /// (see [`yuv420_to_rgb_into`]).
    ///
    /// # Panics
    /// If `out` is shorter than `width × height × 3`.
    pub fn to_rgb_into(&self, out: &mut [u8]) {
        yuv420_to_rgb_into(self.width, self.height, &self.data, out);
    }

    /// The frame as RGB, `[height, width, 3]` row-major.
    pub fn to_rgb(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.width * self.height * 3];
        self.to_rgb_into(&mut out);
        out
    }
}

/// Bytes of one `width × height` frame as YUV 4:2:0 planes (`Y`, then `U`
/// and `V` at half resolution, rounded up): the layout of [`Yuv420::data`].
pub const fn yuv420_len(width: usize, height: usize) -> usize {
    width * height + 2 * width.div_ceil(2) * height.div_ceil(2)
}

/// The YUV 4:2:0 planes of a `width × height` frame (laid out as
/// [`Yuv420::data`], [`yuv420_len`] bytes) as RGB, `[height, width, 3]`
/// row-major, into `out`: the conversion [`mod@self`] describes.
///
/// Written for the compiler to vectorise: each chroma row's three
/// colour terms are computed once for the two luma rows that share
/// it, each luma row's term once, then every pixel is two additions
/// and a clamp per channel (the same arithmetic as [`mod@self`]
/// describes, in the same order).
///
/// # Panics
/// If `planes` is shorter than [`yuv420_len`] or `out` than `width × height × 3`.
pub fn yuv420_to_rgb_into(width: usize, height: usize, planes: &[u8], out: &mut [u8]) {
    let (w, h) = (width, height);
    let cw = w.div_ceil(2);
    let chroma = cw * h.div_ceil(2);
    let y_plane = &planes[..w * h];
    let (u_plane, v_plane) = planes[w * h..w * h + 2 * chroma].split_at(chroma);
    let out = &mut out[..w * h * 3];
    // Per chroma column: V→R, U→G + V→G and U→B, repeated for both pixels.
    let (mut red, mut green, mut blue) = (vec![0i16; 2 * cw], vec![0i16; 2 * cw], vec![0i16; 2 * cw]);
    // One row's channels, planar, before they are interleaved.
    let mut planar = vec![[0u8; 3]; w];
    let (mut r_row, mut g_row, mut b_row) = (vec![0u8; w], vec![0u8; w], vec![0u8; w]);
    for (row, out_line) in out.chunks_exact_mut(w * 3).enumerate() {
        if row % 2 == 0 {
            let c = row / 2;
            let u_line = &u_plane[c * cw..(c + 1) * cw];
            let v_line = &v_plane[c * cw..(c + 1) * cw];
            for (x, (&u, &v)) in u_line.iter().zip(v_line).enumerate() {
                let (u, v) = (u as i32 * 8 - 1024, v as i32 * 8 - 1024);
                let (r, g, b) = (mulhw(v, V_TO_R), mulhw(u, U_TO_G) + mulhw(v, V_TO_G), mulhw(u, U_TO_B));
                red[2 * x..2 * x + 2].fill(r as i16);
                green[2 * x..2 * x + 2].fill(g as i16);
                blue[2 * x..2 * x + 2].fill(b as i16);
            }
        }
        let y_line = &y_plane[row * w..(row + 1) * w];
        for (x, &y) in y_line.iter().enumerate() {
            let y = mulhw(y as i32 * 8 - 128, Y_COEFF) as i16;
            r_row[x] = (y + red[x]).clamp(0, 255) as u8;
            g_row[x] = (y + green[x]).clamp(0, 255) as u8;
            b_row[x] = (y + blue[x]).clamp(0, 255) as u8;
        }
        for (((pixel, &r), &g), &b) in planar.iter_mut().zip(&r_row).zip(&g_row).zip(&b_row) {
            *pixel = [r, g, b];
        }
        out_line.copy_from_slice(planar.as_flattened());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The conversion pixel by pixel, as the module's docs state it.
    fn to_rgb_per_pixel(frame: &Yuv420) -> Vec<u8> {
        let (w, h, cw) = (frame.width, frame.height, frame.width.div_ceil(2));
        let mut out = Vec::with_capacity(w * h * 3);
        for row in 0..h {
            for x in 0..w {
                let u = frame.plane(1)[(row / 2) * cw + x / 2] as i32 * 8 - 1024;
                let v = frame.plane(2)[(row / 2) * cw + x / 2] as i32 * 8 - 1024;
                let y = mulhw(frame.plane(0)[row * w + x] as i32 * 8 - 128, Y_COEFF);
                let rgb = [y + mulhw(v, V_TO_R), y + mulhw(u, U_TO_G) + mulhw(v, V_TO_G), y + mulhw(u, U_TO_B)];
                out.extend(rgb.map(|c| c.clamp(0, 255) as u8));
            }
        }
        out
    }

    proptest! {
        #[test]
        fn row_by_row_conversion_equals_the_per_pixel_arithmetic(
            width in 1usize..40, height in 1usize..12, seed in any::<u64>()
        ) {
            let mut frame = Yuv420::new(width, height);
            let mut state = seed | 1;
            for byte in frame.data.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *byte = (state >> 56) as u8;
            }
            prop_assert_eq!(frame.to_rgb(), to_rgb_per_pixel(&frame));
        }
    }

    #[test]
    fn limited_range_grey_black_and_white_map_as_swscale_maps_them() {
        let mut frame = Yuv420::new(2, 2);
        frame.plane_mut(0).copy_from_slice(&[16, 235, 126, 128]);
        assert_eq!(frame.to_rgb(), [0, 0, 0, 255, 255, 255, 128, 128, 128, 130, 130, 130]);
        // Saturated red: Y 81, U 90, V 240 (BT.601 limited).
        let mut red = Yuv420::new(1, 1);
        red.data.copy_from_slice(&[81, 90, 240]);
        let rgb = red.to_rgb();
        assert!(rgb[0] >= 253 && rgb[1] <= 2 && rgb[2] <= 2, "{rgb:?}");
    }

    #[test]
    fn odd_sizes_use_the_last_chroma_sample() {
        let mut frame = Yuv420::new(3, 3);
        assert_eq!(frame.plane(1).len(), 4);
        frame.plane_mut(1).copy_from_slice(&[128, 200, 128, 200]);
        let rgb = frame.to_rgb();
        assert_eq!(rgb.len(), 27);
        assert_eq!(rgb[2 * 3..3 * 3], rgb[8 * 3..9 * 3]);
    }
}

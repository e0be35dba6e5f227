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

    /// The frame as RGB, `[height, width, 3]` row-major, into `out`.
    pub fn to_rgb_into(&self, out: &mut [u8]) {
        let (w, h) = (self.width, self.height);
        let cw = w.div_ceil(2);
        let (y_plane, u_plane, v_plane) = (self.plane(0), self.plane(1), self.plane(2));
        for row in 0..h {
            let y_line = &y_plane[row * w..(row + 1) * w];
            let u_line = &u_plane[(row / 2) * cw..(row / 2 + 1) * cw];
            let v_line = &v_plane[(row / 2) * cw..(row / 2 + 1) * cw];
            let out_line = &mut out[row * w * 3..(row + 1) * w * 3];
            for x in 0..w {
                let u = u_line[x / 2] as i32 * 8 - 1024;
                let v = v_line[x / 2] as i32 * 8 - 1024;
                let y = mulhw(y_line[x] as i32 * 8 - 128, Y_COEFF);
                let r = y + mulhw(v, V_TO_R);
                let g = y + mulhw(u, U_TO_G) + mulhw(v, V_TO_G);
                let b = y + mulhw(u, U_TO_B);
                out_line[x * 3] = r.clamp(0, 255) as u8;
                out_line[x * 3 + 1] = g.clamp(0, 255) as u8;
                out_line[x * 3 + 2] = b.clamp(0, 255) as u8;
            }
        }
    }

    /// The frame as RGB, `[height, width, 3]` row-major.
    pub fn to_rgb(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.width * self.height * 3];
        self.to_rgb_into(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

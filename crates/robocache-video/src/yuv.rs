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

    /// The top-left `width × height` of an NV12 picture as planes: NV12 is
    /// a luma plane of `luma_rows` rows, then rows of interleaved `U, V`
    /// pairs at half resolution, every row `pitch` bytes from the last (the
    /// layout NVDEC's pictures come in). `None` where `nv12` is too short
    /// for that, or a row (`pitch`) narrower than the frame.
    ///
    /// NVDEC decodes at up to 20,000 pictures a second, and each one's
    /// chroma is split here on a loader thread: the pairs are read 16 at
    /// a time as 16-bit words, whose low and high bytes are `U` and `V`,
    /// a form the compiler turns into vector instructions (3× fewer
    /// cycles than a byte at a time, measured on x86-64).
    pub fn from_nv12(width: usize, height: usize, nv12: &[u8], pitch: usize, luma_rows: usize) -> Option<Yuv420> {
        if width == 0 || height == 0 {
            return Some(Yuv420::new(width, height));
        }
        let (cw, ch) = (width.div_ceil(2), height.div_ceil(2));
        let chroma_start = pitch.checked_mul(luma_rows)?;
        let needed = chroma_start.checked_add(pitch.checked_mul(ch - 1)?)?.checked_add(2 * cw)?;
        if pitch < 2 * cw || luma_rows < height || nv12.len() < needed {
            return None;
        }
        let chroma_len = cw * ch;
        let mut data = Vec::with_capacity(width * height + 2 * chroma_len);
        for row in nv12.chunks(pitch).take(height) {
            data.extend_from_slice(&row[..width]);
        }
        data.resize(width * height + 2 * chroma_len, 0);
        let (u_plane, v_plane) = data[width * height..].split_at_mut(chroma_len);
        let rows = u_plane.chunks_exact_mut(cw).zip(v_plane.chunks_exact_mut(cw));
        for ((u_row, v_row), pairs) in rows.zip(nv12[chroma_start..].chunks(pitch)) {
            let (blocks, pairs_left) = pairs[..2 * cw].as_chunks::<32>();
            let (u_blocks, u_left) = u_row.as_chunks_mut::<16>();
            let (v_blocks, v_left) = v_row.as_chunks_mut::<16>();
            for ((block, u), v) in blocks.iter().zip(u_blocks).zip(v_blocks) {
                let words: [u16; 16] = std::array::from_fn(|i| u16::from_le_bytes([block[2 * i], block[2 * i + 1]]));
                *u = words.map(|word| word as u8);
                *v = words.map(|word| (word >> 8) as u8);
            }
            for ((u, v), pair) in u_left.iter_mut().zip(v_left).zip(pairs_left.chunks_exact(2)) {
                (*u, *v) = (pair[0], pair[1]);
            }
        }
        Some(Yuv420 { width, height, data })
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

    /// An RGB frame (`[height, width, 3]` row-major) as YUV 4:2:0, the
    /// inverse of the decode conversion: BT.601, limited range, in the
    /// integer form of the standard (`Y = ((66 R + 129 G + 25 B + 128) >>
    /// 8) + 16`, `U = ((−38 R − 74 G + 112 B + 128) >> 8) + 128`, `V =
    /// ((112 R − 94 G − 18 B + 128) >> 8) + 128`), chroma from the rounded
    /// mean of each 2×2 block's RGB (the pixels of a block the frame has,
    /// at an odd edge). What robocache's encoder is given; a round trip
    /// through [`Yuv420::to_rgb`] differs by a few levels, the loss of
    /// limited range and of chroma at half resolution.
    ///
    /// `None` where `rgb` is not `width × height × 3` bytes.
    pub fn from_rgb(width: usize, height: usize, rgb: &[u8]) -> Option<Yuv420> {
        if width.checked_mul(height).and_then(|n| n.checked_mul(3)) != Some(rgb.len()) {
            return None;
        }
        let mut frame = Yuv420::new(width, height);
        let (luma, chroma) = frame.data.split_at_mut(width * height);
        for (y_row, rgb_row) in luma.chunks_exact_mut(width.max(1)).zip(rgb.chunks_exact(3 * width.max(1))) {
            for (y, p) in y_row.iter_mut().zip(rgb_row.chunks_exact(3)) {
                let (r, g, b) = (i32::from(p[0]), i32::from(p[1]), i32::from(p[2]));
                *y = (((66 * r + 129 * g + 25 * b + 128) >> 8) + 16) as u8;
            }
        }
        let (cw, ch) = (width.div_ceil(2), height.div_ceil(2));
        let (u_plane, v_plane) = chroma.split_at_mut(cw * ch);
        for cy in 0..ch {
            for cx in 0..cw {
                let (mut sum, mut n) = ([0i32; 3], 0i32);
                for y in 2 * cy..(2 * cy + 2).min(height) {
                    for x in 2 * cx..(2 * cx + 2).min(width) {
                        let p = &rgb[3 * (y * width + x)..3 * (y * width + x) + 3];
                        sum.iter_mut().zip(p).for_each(|(s, &v)| *s += i32::from(v));
                        n += 1;
                    }
                }
                let [r, g, b] = sum.map(|s| (s + n / 2) / n);
                u_plane[cy * cw + cx] = (((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128) as u8;
                v_plane[cy * cw + cx] = (((112 * r - 94 * g - 18 * b + 128) >> 8) + 128) as u8;
            }
        }
        Some(frame)
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

    use robocache_cpu::noise::bytes as noise;

    #[test]
    fn rgb_to_yuv_and_back_is_within_the_levels_limited_range_loses() {
        // Flat colours over the gamut: 4:2:0 loses nothing, limited range
        // (219 luma and 224 chroma levels for 256) at most 2 levels.
        for rgb in [[0u8, 0, 0], [255, 255, 255], [255, 0, 0], [0, 255, 0], [0, 0, 255], [12, 200, 77], [128, 128, 128]]
        {
            let frame: Vec<u8> = rgb.iter().copied().cycle().take(6 * 4 * 3).collect();
            let back = Yuv420::from_rgb(6, 4, &frame).unwrap().to_rgb();
            for (a, b) in back.iter().zip(&frame) {
                assert!(a.abs_diff(*b) <= 2, "{rgb:?}: {back:?}");
            }
        }
        // A smooth gradient of an odd size, from black: within 6 levels
        // (a 2×2 block's one chroma, clamped at the gamut's edge).
        let (w, h) = (17, 9);
        let frame: Vec<u8> = (0..w * h).flat_map(|i| [(i % w * 3) as u8, (i / w * 5) as u8, 90]).collect();
        let back = Yuv420::from_rgb(w, h, &frame).unwrap().to_rgb();
        let worst = back.iter().zip(&frame).map(|(a, b)| a.abs_diff(*b)).max();
        assert!(worst <= Some(6), "{worst:?}");
        assert!(Yuv420::from_rgb(w, h, &frame[1..]).is_none());
    }

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
            frame.data = noise(seed, frame.data.len());
            prop_assert_eq!(frame.to_rgb(), to_rgb_per_pixel(&frame));
        }
    }

    /// NV12 to planes a byte at a time, as [`Yuv420::from_nv12`] documents it.
    fn nv12_per_byte(width: usize, height: usize, nv12: &[u8], pitch: usize, luma_rows: usize) -> Yuv420 {
        let mut frame = Yuv420::new(width, height);
        let cw = width.div_ceil(2);
        for row in 0..height {
            for x in 0..width {
                frame.plane_mut(0)[row * width + x] = nv12[row * pitch + x];
            }
        }
        for row in 0..height.div_ceil(2) {
            for x in 0..cw {
                let pair = pitch * luma_rows + row * pitch + 2 * x;
                frame.plane_mut(1)[row * cw + x] = nv12[pair];
                frame.plane_mut(2)[row * cw + x] = nv12[pair + 1];
            }
        }
        frame
    }

    proptest! {
        /// Widths past 32 pairs reach the 16-pair blocks and their remainder.
        #[test]
        fn nv12_splits_into_the_planes_byte_by_byte(
            width in 1usize..90, height in 1usize..9, pad in 0usize..40, extra_rows in 0usize..3, seed in any::<u64>()
        ) {
            let pitch = 2 * width.div_ceil(2) + pad;
            let luma_rows = height + extra_rows;
            let nv12 = noise(seed, pitch * (luma_rows + height.div_ceil(2)));
            let frame = Yuv420::from_nv12(width, height, &nv12, pitch, luma_rows);
            prop_assert_eq!(frame, Some(nv12_per_byte(width, height, &nv12, pitch, luma_rows)));
        }
    }

    #[test]
    fn nv12_too_small_for_the_frame_is_refused() {
        let nv12 = vec![0u8; 64 * 48 * 3 / 2];
        assert!(Yuv420::from_nv12(64, 48, &nv12, 64, 48).is_some());
        assert!(Yuv420::from_nv12(63, 47, &nv12, 64, 48).is_some());
        assert_eq!(Yuv420::from_nv12(64, 48, &nv12[1..], 64, 48), None, "short by a byte");
        assert_eq!(Yuv420::from_nv12(66, 48, &nv12, 64, 48), None, "rows narrower than the frame");
        assert_eq!(Yuv420::from_nv12(64, 50, &nv12, 64, 48), None, "fewer luma rows than the frame");
        assert_eq!(Yuv420::from_nv12(64, 48, &nv12, usize::MAX, 48), None, "a pitch that overflows");
        assert_eq!(Yuv420::from_nv12(0, 0, &[], 0, 0).map(|f| f.data.len()), Some(0));
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

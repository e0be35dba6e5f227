//! Encoded images (PNG, JPEG) into a stream's rows, as TensorFlow's
//! `decode_image` decodes them: JPEG by libjpeg-turbo's decoder with the
//! integer-fast IDCT and fancy upsampling (TensorFlow's defaults; mozjpeg
//! crate), so frames equal TFDS's bit for bit, PNG by the `image` crate
//! (lossless, so equal to what PIL gives too). RLDS image features and
//! LeRobot image columns read through it. [`decode_jpeg_as_opencv`]
//! decodes as OpenCV's `cv2.imdecode(bytes, IMREAD_COLOR)` does instead
//! (the accurate integer IDCT, channels in the order they were encoded):
//! how ACT's `EpisodicDataset` reads ALOHA's compressed frames.

use robocache_cpu::DType;

/// Decodes one encoded image into `out`: `dtype` `[H, W, C]` as `shape`
/// declares (`f32 [H, W, 1]` is stored by TFDS as a 4-channel 8-bit PNG of
/// the floats' bytes).
pub fn decode_image(bytes: &[u8], dtype: DType, shape: &[usize], out: &mut [u8]) -> Result<(), String> {
    let format = image::guess_format(bytes).map_err(|_| {
        format!(
            "{} bytes that are neither PNG nor JPEG (first bytes {:02x?})",
            bytes.len(),
            &bytes[..bytes.len().min(4)]
        )
    })?;
    if format == image::ImageFormat::Jpeg && dtype == DType::U8 {
        return decode_jpeg(bytes, shape, out);
    }
    let decoded = image::load_from_memory_with_format(bytes, format)
        .map_err(|e| format!("{} bytes of {format:?} do not decode: {e}", bytes.len()))?;
    let (h, w, c) = (shape[0], shape[1], shape[2]);
    if (decoded.height() as usize, decoded.width() as usize) != (h, w) {
        return Err(format!(
            "the {format:?} image is {}x{} (HxW), the dataset declares {h}x{w}",
            decoded.height(),
            decoded.width()
        ));
    }
    let pixels: Vec<u8> = match (dtype, c) {
        (DType::U8, 1) => decoded.to_luma8().into_raw(),
        (DType::U8, 3) => decoded.to_rgb8().into_raw(),
        (DType::U8, 4) | (DType::F32, 1) => decoded.to_rgba8().into_raw(),
        (DType::U16, 1) => decoded.to_luma16().into_raw().iter().flat_map(|v| v.to_le_bytes()).collect(),
        (DType::U16, 3) => decoded.to_rgb16().into_raw().iter().flat_map(|v| v.to_le_bytes()).collect(),
        (DType::U16, 4) => decoded.to_rgba16().into_raw().iter().flat_map(|v| v.to_le_bytes()).collect(),
        _ => return Err(format!("images of dtype {} with {c} channels are not read", dtype.name())),
    };
    if pixels.len() != out.len() {
        return Err(format!("decoded {} bytes, expected {}", pixels.len(), out.len()));
    }
    out.copy_from_slice(&pixels);
    Ok(())
}

/// How a JPEG decoder of another tool decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JpegLike {
    /// `tf.io.decode_jpeg` (integer-fast IDCT, fancy upsampling, RGB).
    TensorFlow,
    /// `cv2.imdecode(bytes, IMREAD_COLOR)` (accurate integer IDCT, fancy
    /// upsampling, BGR: the channels of the array `cv2.imencode` was given).
    OpenCv,
}

/// `(height, width)` of a JPEG from its header, without decoding it.
pub fn jpeg_size(bytes: &[u8]) -> Result<(usize, usize), String> {
    let header = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        mozjpeg::Decompress::new_mem(bytes).map(|jpeg| (jpeg.height(), jpeg.width()))
    }));
    match header {
        Ok(Ok(size)) => Ok(size),
        Ok(Err(e)) => Err(format!("{} bytes are not a JPEG: {e}", bytes.len())),
        Err(_) => Err(format!("{} bytes are not a JPEG (libjpeg failed on the header)", bytes.len())),
    }
}

/// A JPEG (trailing zero padding allowed, as ALOHA pads its frames) into
/// `u8 [H, W, 3]` as OpenCV's `cv2.imdecode(bytes, cv2.IMREAD_COLOR)`
/// gives it: libjpeg-turbo with the accurate integer IDCT and fancy
/// upsampling, channels in the order they were encoded (`cv2.imencode`
/// takes BGR, so an array encoded by OpenCV comes back as it was). A
/// grayscale JPEG gives three equal channels, as OpenCV's does.
pub fn decode_jpeg_as_opencv(bytes: &[u8], shape: &[usize], out: &mut [u8]) -> Result<(), String> {
    if shape.len() != 3 || shape[2] != 3 {
        return Err(format!("OpenCV decodes colour JPEGs to [H, W, 3], not {shape:?}"));
    }
    decode_jpeg_like(bytes, shape, out, JpegLike::OpenCv)
}

/// A JPEG into `u8 [H, W, C]` as `tf.io.decode_jpeg(bytes, channels=C)`
/// with its default flags (integer-fast IDCT, fancy upsampling).
fn decode_jpeg(bytes: &[u8], shape: &[usize], out: &mut [u8]) -> Result<(), String> {
    decode_jpeg_like(bytes, shape, out, JpegLike::TensorFlow)
}

fn decode_jpeg_like(bytes: &[u8], shape: &[usize], out: &mut [u8], like: JpegLike) -> Result<(), String> {
    // libjpeg pads a truncated stream with gray and only warns; TensorFlow
    // fails on it. A complete JPEG ends with its end-of-image marker.
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    if end < 2 || bytes[end - 2..end] != [0xff, 0xd9] {
        return Err(format!("{} bytes of Jpeg without the end-of-image marker (truncated or corrupt)", bytes.len()));
    }
    let (h, w, c) = (shape[0], shape[1], shape[2]);
    // Decode straight into `out`; libjpeg errors unwind out of the C code.
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> std::io::Result<()> {
        let mut jpeg = mozjpeg::Decompress::new_mem(bytes)?;
        jpeg.dct_method(match like {
            JpegLike::TensorFlow => mozjpeg::DctMethod::IntegerFast,
            JpegLike::OpenCv => mozjpeg::DctMethod::IntegerSlow,
        });
        jpeg.do_fancy_upsampling(true);
        if (jpeg.height(), jpeg.width()) != (h, w) {
            return Err(std::io::Error::other(format!(
                "the Jpeg image is {}x{} (HxW), the dataset declares {h}x{w}",
                jpeg.height(),
                jpeg.width()
            )));
        }
        let mut started = match c {
            1 => jpeg.grayscale()?,
            3 => jpeg.rgb()?,
            _ => jpeg.rgba()?,
        };
        if started.min_flat_buffer_size() != out.len() {
            return Err(std::io::Error::other(format!(
                "decodes to {} bytes, not the {} of [{h}, {w}, {c}]",
                started.min_flat_buffer_size(),
                out.len()
            )));
        }
        started.read_scanlines_into::<u8>(out)?;
        started.finish()?;
        if like == JpegLike::OpenCv {
            // libjpeg gives RGB; OpenCV asks libjpeg-turbo for BGR, the
            // same values with the outer channels swapped.
            out.chunks_exact_mut(3).for_each(|pixel| pixel.swap(0, 2));
        }
        Ok(())
    }));
    match decoded {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if e.to_string().contains("the dataset declares") => Err(e.to_string()),
        Ok(Err(e)) => Err(format!("{} bytes of Jpeg do not decode: {e}", bytes.len())),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "libjpeg failed".into());
            Err(format!("{} bytes of Jpeg do not decode: {message}", bytes.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_decode_to_the_declared_shape() {
        let rgb: Vec<u8> = (0..2 * 3 * 3).map(|v| v as u8 * 10).collect();
        let mut png = Vec::new();
        image::RgbImage::from_raw(3, 2, rgb.clone())
            .unwrap()
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let mut out = vec![0u8; rgb.len()];
        decode_image(&png, DType::U8, &[2, 3, 3], &mut out).unwrap();
        assert_eq!(out, rgb);
        let err = decode_image(&png, DType::U8, &[3, 2, 3], &mut out).unwrap_err();
        assert!(err.contains("2x3") && err.contains("3x2"), "{err}");
        let err = decode_image(&png[..png.len() / 2], DType::U8, &[2, 3, 3], &mut out).unwrap_err();
        assert!(err.contains("do not decode"), "{err}");
    }
}

//! Values of one feature into the bytes of a stream's rows: numeric lists
//! converted to the declared dtype as TFDS does (`tf.cast`: f32 widened to
//! f64, int64 truncated to narrower integers, nonzero to `true`), encoded
//! tensors (`bytes`, `zlib`) copied, images decoded as TensorFlow's
//! `decode_image` does: JPEG by libjpeg-turbo's decoder with the
//! integer-fast IDCT and fancy upsampling (TensorFlow's defaults; mozjpeg
//! crate), so frames equal TFDS's bit for bit, PNG by the `image` crate
//! (lossless, so equal too).

use std::io::Read;

use half::{bf16, f16};
use robocache_cpu::DType;

use super::features::TensorEncoding;

/// Writes `values` (f32 from a `float_list`) as `dtype` into `out`.
pub fn store_floats(values: &[f32], dtype: DType, out: &mut [u8]) -> Result<(), String> {
    let size = dtype.size_in_bytes();
    debug_assert_eq!(out.len(), values.len() * size);
    for (v, o) in values.iter().zip(out.chunks_exact_mut(size)) {
        match dtype {
            DType::F32 => o.copy_from_slice(&v.to_le_bytes()),
            DType::F64 => o.copy_from_slice(&f64::from(*v).to_le_bytes()),
            DType::F16 => o.copy_from_slice(&f16::from_f32(*v).to_le_bytes()),
            DType::BF16 => o.copy_from_slice(&bf16::from_f32(*v).to_le_bytes()),
            other => return Err(format!("holds floats (float_list) but its features.json dtype is {}", other.name())),
        }
    }
    Ok(())
}

/// Writes `values` (from an `int64_list`) as `dtype` into `out`.
pub fn store_ints(values: &[i64], dtype: DType, out: &mut [u8]) -> Result<(), String> {
    let size = dtype.size_in_bytes();
    debug_assert_eq!(out.len(), values.len() * size);
    for (&v, o) in values.iter().zip(out.chunks_exact_mut(size)) {
        match dtype {
            DType::Bool => o[0] = u8::from(v != 0),
            DType::U8 => o[0] = v as u8,
            DType::I8 => o[0] = v as i8 as u8,
            DType::U16 => o.copy_from_slice(&(v as u16).to_le_bytes()),
            DType::I16 => o.copy_from_slice(&(v as i16).to_le_bytes()),
            DType::U32 => o.copy_from_slice(&(v as u32).to_le_bytes()),
            DType::I32 => o.copy_from_slice(&(v as i32).to_le_bytes()),
            DType::U64 => o.copy_from_slice(&(v as u64).to_le_bytes()),
            DType::I64 => o.copy_from_slice(&v.to_le_bytes()),
            other => {
                return Err(format!("holds integers (int64_list) but its features.json dtype is {}", other.name()))
            }
        }
    }
    Ok(())
}

/// One value of a `bytes`/`zlib`-encoded tensor into `out` (its exact size).
pub fn store_encoded(bytes: &[u8], encoding: TensorEncoding, dtype: DType, out: &mut [u8]) -> Result<(), String> {
    let raw;
    let bytes = match encoding {
        TensorEncoding::Zlib => {
            let mut decoded = Vec::with_capacity(out.len());
            flate2::read::ZlibDecoder::new(bytes)
                .take(out.len() as u64 + 1)
                .read_to_end(&mut decoded)
                .map_err(|e| format!("zlib-encoded tensor does not decompress: {e}"))?;
            raw = decoded;
            &raw[..]
        }
        _ => bytes,
    };
    if bytes.len() != out.len() {
        return Err(format!(
            "encoded tensor has {} bytes, not the {} of one value ({} elements of {})",
            bytes.len(),
            out.len(),
            out.len() / dtype.size_in_bytes(),
            dtype.name()
        ));
    }
    if dtype == DType::Bool {
        for (o, b) in out.iter_mut().zip(bytes) {
            *o = u8::from(*b != 0);
        }
    } else {
        out.copy_from_slice(bytes);
    }
    Ok(())
}

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
            "the {format:?} image is {}x{} (HxW), features.json declares {h}x{w}",
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

/// A JPEG into `u8 [H, W, C]` as `tf.io.decode_jpeg(bytes, channels=C)`
/// with its default flags (integer-fast IDCT, fancy upsampling).
fn decode_jpeg(bytes: &[u8], shape: &[usize], out: &mut [u8]) -> Result<(), String> {
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
        jpeg.dct_method(mozjpeg::DctMethod::IntegerFast);
        jpeg.do_fancy_upsampling(true);
        if (jpeg.height(), jpeg.width()) != (h, w) {
            return Err(std::io::Error::other(format!(
                "the Jpeg image is {}x{} (HxW), features.json declares {h}x{w}",
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
        started.finish()
    }));
    match decoded {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if e.to_string().contains("features.json") => Err(e.to_string()),
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
    fn numbers_convert_as_tf_cast_does() {
        let mut out = [0u8; 8];
        store_floats(&[1.5], DType::F64, &mut out).unwrap();
        assert_eq!(f64::from_le_bytes(out), 1.5);
        let mut out = [0u8; 3];
        store_ints(&[0, 2, -1], DType::Bool, &mut out).unwrap();
        assert_eq!(out, [0, 1, 1]);
        store_ints(&[255, 256, -1], DType::U8, &mut out).unwrap();
        assert_eq!(out, [255, 0, 255]);
        assert!(store_floats(&[1.0], DType::I32, &mut [0u8; 4]).unwrap_err().contains("dtype is i32"));
    }

    #[test]
    fn encoded_tensors_and_images_round_trip() {
        use std::io::Write;
        let values: Vec<u8> = [1.0f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&values).unwrap();
        let mut out = [0u8; 8];
        store_encoded(&z.finish().unwrap(), TensorEncoding::Zlib, DType::F32, &mut out).unwrap();
        assert_eq!(out.as_slice(), values.as_slice());
        assert!(store_encoded(&values[..4], TensorEncoding::Bytes, DType::F32, &mut out)
            .unwrap_err()
            .contains("4 bytes"));

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

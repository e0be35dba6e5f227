//! Values of one feature into the bytes of a stream's rows: numeric lists
//! converted to the declared dtype as TFDS does (`tf.cast`: f32 widened to
//! f64, int64 truncated to narrower integers, nonzero to `true`), encoded
//! tensors (`bytes`, `zlib`) copied. Images are decoded by
//! [`robocache_datasource::image_decode`], which LeRobot's image columns share.

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
    fn encoded_tensors_round_trip() {
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
    }
}

//! Reading and writing `.npy` files as robocache host vectors.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

use anyhow::{bail, Context, Result};
use npyz::WriterBuilder;
use robocache::half::f16;
use robocache::{DType, HostVec};

/// An array read from a `.npy` file.
pub use robocache::datasets::npy::NpyArray as Array;

/// Reads a C-order `.npy` file of bool, integer or float (16/32/64-bit) elements.
pub fn read(path: &Path) -> Result<Array> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let file_len = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    let npy = npyz::NpyFile::new(BufReader::new(file))
        .with_context(|| format!("{} is not a valid .npy file", path.display()))?;
    robocache::datasets::npy::read_array(npy, file_len).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Writes `data` with `shape` as a C-order `.npy` file (bf16 is written as
/// float32, which holds every bf16 value exactly: NumPy has no bf16).
pub fn write(path: &Path, data: &HostVec, shape: &[usize]) -> Result<()> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    macro_rules! write_all {
        ($values:expr, $ty:ty) => {{
            let mut writer = npyz::WriteOptions::<$ty>::new()
                .default_dtype()
                .shape(&shape)
                .writer(BufWriter::new(file))
                .begin_nd()?;
            writer.extend($values)?;
            writer.finish()?;
        }};
    }
    match data {
        HostVec::Bool(v) => write_all!(v.iter().copied(), bool),
        HostVec::U8(v) => write_all!(v.iter().copied(), u8),
        HostVec::U16(v) => write_all!(v.iter().copied(), u16),
        HostVec::U32(v) => write_all!(v.iter().copied(), u32),
        HostVec::U64(v) => write_all!(v.iter().copied(), u64),
        HostVec::I8(v) => write_all!(v.iter().copied(), i8),
        HostVec::I16(v) => write_all!(v.iter().copied(), i16),
        HostVec::I32(v) => write_all!(v.iter().copied(), i32),
        HostVec::I64(v) => write_all!(v.iter().copied(), i64),
        HostVec::F16(v) => write_all!(v.iter().copied(), f16),
        HostVec::BF16(v) => write_all!(v.iter().map(|x| x.to_f32()), f32),
        HostVec::F32(v) => write_all!(v.iter().copied(), f32),
        HostVec::F64(v) => write_all!(v.iter().copied(), f64),
    }
    Ok(())
}

/// The values of a time array as `f64` (floats and integers are widened;
/// bool is rejected).
pub fn times_f64(path: &Path, array: Array) -> Result<(Vec<f64>, Vec<usize>)> {
    let values: Vec<f64> = match array.data {
        HostVec::F64(v) => v,
        HostVec::Bool(_) => bail!("{}: times must be numbers, not bool", path.display()),
        other => other.as_slice().to_f64_vec(),
    };
    Ok((values, array.shape))
}

/// Checks that an array has `dtype`.
pub fn expect_dtype(path: &Path, array: &Array, dtype: DType, hint: &str) -> Result<()> {
    if array.data.dtype() != dtype {
        bail!("{}: expected {dtype} data, got {}{hint}", path.display(), array.data.dtype());
    }
    Ok(())
}

//! `.npy` arrays (plain or inside `.npz` archives) as [`HostVec`]s, and the
//! pickled object arrays NumPy writes for `np.save(path, some_dict)`.

use std::io::Read;

use half::f16;
use npyz::{NpyFile, TypeChar};
use robocache_cpu::HostVec;

/// An array read from `.npy` data.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    pub data: HostVec,
    pub shape: Vec<usize>,
}

/// Reads a C-order array of bool, integer or float (16/32/64-bit) elements.
/// `available` bounds what the header may declare (the file's size), so a
/// corrupt header fails before anything is allocated.
pub fn read_array<R: Read>(npy: NpyFile<R>, available: u64) -> Result<NpyArray, String> {
    if npy.order() == npyz::Order::Fortran {
        return Err("Fortran-order arrays are not supported (save with numpy.ascontiguousarray)".into());
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let npyz::DType::Plain(type_str) = npy.dtype() else {
        return Err("structured arrays are not supported; expected a plain numeric array".into());
    };
    let size = type_str.size_field();
    let elements = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
    if elements.and_then(|e| e.checked_mul(size)).is_none_or(|bytes| bytes > available) {
        return Err(format!(
            "the header declares shape {shape:?} of {type_str}, more than the {available} bytes available (truncated or corrupt)"
        ));
    }
    let read_error = |e: std::io::Error| format!("cannot read the data ({e}; is the file truncated?)");
    let data = match (type_str.type_char(), size) {
        (TypeChar::Bool, 1) => HostVec::Bool(npy.into_vec().map_err(read_error)?),
        (TypeChar::Uint, 1) => HostVec::U8(npy.into_vec().map_err(read_error)?),
        (TypeChar::Uint, 2) => HostVec::U16(npy.into_vec().map_err(read_error)?),
        (TypeChar::Uint, 4) => HostVec::U32(npy.into_vec().map_err(read_error)?),
        (TypeChar::Uint, 8) => HostVec::U64(npy.into_vec().map_err(read_error)?),
        (TypeChar::Int, 1) => HostVec::I8(npy.into_vec().map_err(read_error)?),
        (TypeChar::Int, 2) => HostVec::I16(npy.into_vec().map_err(read_error)?),
        (TypeChar::Int, 4) => HostVec::I32(npy.into_vec().map_err(read_error)?),
        (TypeChar::Int, 8) => HostVec::I64(npy.into_vec().map_err(read_error)?),
        (TypeChar::Float, 2) => HostVec::F16(npy.into_vec::<f16>().map_err(read_error)?),
        (TypeChar::Float, 4) => HostVec::F32(npy.into_vec().map_err(read_error)?),
        (TypeChar::Float, 8) => HostVec::F64(npy.into_vec().map_err(read_error)?),
        _ => return Err(format!("dtype '{type_str}' is not supported (bool, integers and float16/32/64 are)")),
    };
    let elements = elements.unwrap_or(0) as usize;
    if data.len() != elements {
        return Err(format!("the data is truncated ({} of {elements} elements)", data.len()));
    }
    Ok(NpyArray { data, shape })
}

/// The pickle inside a `.npy` file of dtype object (`np.save(path, dict)`),
/// decoded without running any code: NumPy globals become opaque values and
/// a pickled `ndarray` appears as its state tuple
/// `(version, shape, dtype, fortran, data)`.
pub fn read_pickled_object(bytes: &[u8]) -> Result<serde_pickle::Value, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (no \\x93NUMPY magic)".into());
    }
    let (header_len, header_start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        version => return Err(format!(".npy format version {version} is not supported")),
    };
    let data_start = header_start + header_len;
    let header = bytes.get(header_start..data_start).ok_or("the .npy header is truncated")?;
    let header = String::from_utf8_lossy(header);
    if !header.contains("'|O'") {
        return Err(format!("expected a pickled object array (descr '|O'), the header says {}", header.trim()));
    }
    let options = serde_pickle::DeOptions::new().replace_unresolved_globals();
    serde_pickle::value_from_slice(&bytes[data_start..], options).map_err(|e| format!("cannot unpickle: {e}"))
}

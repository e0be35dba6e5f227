//! Writing HDF5: what the CALVIN converter and the synthetic datasets share.

use std::path::Path;

use half::f16;
use hdf5::types::VarLenUnicode;
use hdf5::{Dataset, Group, H5Type};
use ndarray::{ArrayView, IxDyn};
use robocache_cpu::HostVec;

use robocache_datasource::{Error, Result};

/// Creates `path` (replacing it) with the strong close degree: every handle
/// into the file closes with it, so it can be reopened as soon as the writer returns.
pub(crate) fn create_file(path: &Path) -> Result<hdf5::File> {
    hdf5::silence_errors(true);
    hdf5::File::with_options()
        .with_fapl(|fapl| fapl.fclose_degree(hdf5::file::FileCloseDegree::Strong))
        .create(path)
        .map_err(|e| write_error(path, "/", e))
}

pub(crate) fn write_error(file: &Path, location: &str, error: hdf5::Error) -> Error {
    Error::Hdf5 { file: file.to_path_buf(), location: location.to_owned(), message: error.to_string() }
}

pub(crate) fn write_string_attr(location: &hdf5::Location, name: &str, value: &str) -> hdf5::Result<()> {
    let value: VarLenUnicode = value.parse().map_err(|e| hdf5::Error::from(format!("{e}")))?;
    location.new_attr::<VarLenUnicode>().create(name)?.write_scalar(&value)
}

pub(crate) fn write_integer_attr(location: &hdf5::Location, name: &str, value: i64) -> hdf5::Result<()> {
    location.new_attr::<i64>().create(name)?.write_scalar(&value)
}

pub(crate) fn write_number_attr(location: &hdf5::Location, name: &str, value: f64) -> hdf5::Result<()> {
    location.new_attr::<f64>().create(name)?.write_scalar(&value)
}

/// A dataset `name` in `group` holding `data` with `shape`, chunked by
/// `chunk_rows` rows.
pub(crate) fn write_dataset(
    group: &Group,
    name: &str,
    data: &HostVec,
    shape: &[usize],
    chunk_rows: usize,
) -> hdf5::Result<Dataset> {
    fn write<T: H5Type>(
        group: &Group,
        name: &str,
        data: &[T],
        shape: &[usize],
        chunk_rows: usize,
    ) -> hdf5::Result<Dataset> {
        let view = ArrayView::from_shape(IxDyn(shape), data).map_err(|e| hdf5::Error::from(e.to_string()))?;
        let mut chunk = shape.to_vec();
        if let Some(rows) = chunk.first_mut() {
            *rows = chunk_rows.clamp(1, (*rows).max(1));
        }
        group.new_dataset_builder().chunk(chunk).with_data(view).create(name)
    }
    match data {
        HostVec::Bool(v) => write(group, name, v, shape, chunk_rows),
        HostVec::U8(v) => write(group, name, v, shape, chunk_rows),
        HostVec::U16(v) => write(group, name, v, shape, chunk_rows),
        HostVec::U32(v) => write(group, name, v, shape, chunk_rows),
        HostVec::U64(v) => write(group, name, v, shape, chunk_rows),
        HostVec::I8(v) => write(group, name, v, shape, chunk_rows),
        HostVec::I16(v) => write(group, name, v, shape, chunk_rows),
        HostVec::I32(v) => write(group, name, v, shape, chunk_rows),
        HostVec::I64(v) => write(group, name, v, shape, chunk_rows),
        HostVec::F16(v) => write::<f16>(group, name, v, shape, chunk_rows),
        HostVec::F32(v) => write(group, name, v, shape, chunk_rows),
        HostVec::F64(v) => write(group, name, v, shape, chunk_rows),
        HostVec::BF16(_) => Err(hdf5::Error::from("bf16 has no HDF5 type".to_owned())),
    }
}

//! Columns of a LeRobot parquet file as robocache reads them: one top-level
//! column at a time (a feature name may hold dots, so columns are chosen by
//! their position, never by a dotted path), flattened into row-major bytes
//! of the feature's dtype, or into one encoded image per row.
//!
//! The shapes LeRobot (through Hugging Face `datasets`) writes:
//! - a feature of shape `[1]` as a plain column (`int64`, `bool`, `float`);
//! - shape `[n]` as `fixed_size_list<n>` (older writers: `list`);
//! - shape `[a, b, ...]` as nested lists;
//! - `image` features as `struct<bytes: binary, path: string>`.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use robocache_cpu::DType;
use robocache_storage::Storage;

use super::parquet_blob::ParquetBlob;

use robocache_datasource::{Error, Result};

/// One column of a whole parquet file.
#[derive(Debug)]
pub(crate) enum ColumnData {
    /// Row-major values, `rows * channels` elements of the dtype,
    /// little-endian (bool as one byte 0 or 1).
    Values { bytes: Vec<u8>, rows: usize },
    /// One encoded image (PNG, JPEG) per row.
    Encoded(Vec<Vec<u8>>),
}

impl ColumnData {
    pub fn rows(&self) -> usize {
        match self {
            ColumnData::Values { rows, .. } => *rows,
            ColumnData::Encoded(images) => images.len(),
        }
    }
}

/// What a column should hold.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Expect {
    /// Values of `dtype`, `channels` of them a row.
    Values { dtype: DType, channels: usize },
    /// Encoded images (`struct<bytes, path>` or `binary`).
    Encoded,
}

fn parquet_error(file: &Path, column: &str, error: impl std::fmt::Display) -> Error {
    Error::Layout { file: file.to_path_buf(), path: column.to_owned(), problem: format!("parquet: {error}") }
}

/// Runs one read of the parquet crate. It panics on some damaged files (a
/// data page that names a dictionary its column chunk lacks: "Decoder for
/// dict should have been set", found by the fuzz harness, `tests/fuzz.rs`);
/// such a panic is caught here and becomes an error naming the file and
/// the column, so a damaged file never takes the process down.
pub(crate) fn guarded<T>(file: &Path, column: &str, read: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)) {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(parquet_error(file, column, format!("the reader failed on damaged data ({message})")))
        }
    }
}

/// The column called `column` of every row group of `file`, as arrays.
/// Its callers run it, and what they do with the arrays, inside [`guarded`].
pub(crate) fn read_arrays(storage: &Storage, file: &Path, column: &str) -> Result<Vec<ArrayRef>> {
    let handle = ParquetBlob(storage.open(file)?);
    let builder = ParquetRecordBatchReaderBuilder::try_new(handle).map_err(|e| parquet_error(file, "", e))?;
    let schema = builder.schema().clone();
    let Some((position, _)) = schema.fields().find(column) else {
        return Err(Error::Missing { file: file.to_path_buf(), what: "parquet column", path: column.to_owned() });
    };
    let mask = ProjectionMask::roots(builder.parquet_schema(), [position]);
    let reader =
        builder.with_projection(mask).with_batch_size(64 * 1024).build().map_err(|e| parquet_error(file, column, e))?;
    let mut arrays = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| parquet_error(file, column, e))?;
        arrays.push(batch.column(0).clone());
    }
    Ok(arrays)
}

/// The names of the top-level columns of `file`.
pub(crate) fn column_names(storage: &Storage, file: &Path) -> Result<Vec<String>> {
    guarded(file, "", || {
        let handle = ParquetBlob(storage.open(file)?);
        let builder = ParquetRecordBatchReaderBuilder::try_new(handle).map_err(|e| parquet_error(file, "", e))?;
        Ok(builder.schema().fields().iter().map(|f| f.name().clone()).collect())
    })
}

/// Reads `column` of `file` as `expect` says (arrow's own checks included
/// in the guard: a damaged page may give arrays arrow then refuses by a panic).
pub(crate) fn read_column(storage: &Storage, file: &Path, column: &str, expect: Expect) -> Result<ColumnData> {
    guarded(file, column, || read_column_unguarded(storage, file, column, expect))
}

fn read_column_unguarded(storage: &Storage, file: &Path, column: &str, expect: Expect) -> Result<ColumnData> {
    let arrays = read_arrays(storage, file, column)?;
    let layout = |problem: String| Error::Layout { file: file.to_path_buf(), path: column.to_owned(), problem };
    match expect {
        Expect::Values { dtype, channels } => {
            let mut bytes = Vec::new();
            let mut rows = 0;
            for array in &arrays {
                let before = bytes.len();
                flatten(array.as_ref(), dtype, &mut bytes).map_err(|p| layout(format!("row {rows}: {p}")))?;
                let row_bytes = channels * dtype.size_in_bytes();
                let added = bytes.len() - before;
                if added != array.len() * row_bytes {
                    return Err(layout(format!(
                        "rows {rows}..{} hold {} values, not the {channels} a row of the feature's shape asks for",
                        rows + array.len(),
                        added / dtype.size_in_bytes().max(1)
                    )));
                }
                rows += array.len();
            }
            Ok(ColumnData::Values { bytes, rows })
        }
        Expect::Encoded => {
            let mut images = Vec::new();
            for array in &arrays {
                encoded(array.as_ref(), images.len(), &mut images).map_err(layout)?;
            }
            Ok(ColumnData::Encoded(images))
        }
    }
}

/// A string column (task texts).
pub(crate) fn read_strings(storage: &Storage, file: &Path, column: &str) -> Result<Vec<String>> {
    guarded(file, column, || read_strings_unguarded(storage, file, column))
}

fn read_strings_unguarded(storage: &Storage, file: &Path, column: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for array in read_arrays(storage, file, column)? {
        let strings: Vec<Option<&str>> = match array.data_type() {
            DataType::Utf8 => array.as_string::<i32>().iter().collect(),
            DataType::LargeUtf8 => array.as_string::<i64>().iter().collect(),
            DataType::Utf8View => array.as_string_view().iter().collect(),
            other => {
                return Err(Error::Layout {
                    file: file.to_path_buf(),
                    path: column.to_owned(),
                    problem: format!("is {other}, not a string column"),
                })
            }
        };
        for s in strings {
            out.push(s.unwrap_or_default().to_owned());
        }
    }
    Ok(out)
}

/// An integer column as `i64` (indices, lengths); nulls are an error.
pub(crate) fn read_i64(storage: &Storage, file: &Path, column: &str) -> Result<Vec<i64>> {
    let data = read_column(storage, file, column, Expect::Values { dtype: DType::I64, channels: 1 })?;
    match data {
        ColumnData::Values { bytes, .. } => {
            Ok(bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default())).collect())
        }
        ColumnData::Encoded(_) => unreachable_encoded(file, column),
    }
}

/// A float column as `f64` (timestamps, written as float32 or float64).
pub(crate) fn read_f64(storage: &Storage, file: &Path, column: &str) -> Result<Vec<f64>> {
    guarded(file, column, || read_f64_unguarded(storage, file, column))
}

fn read_f64_unguarded(storage: &Storage, file: &Path, column: &str) -> Result<Vec<f64>> {
    let arrays = read_arrays(storage, file, column)?;
    let mut out = Vec::new();
    for array in arrays {
        let array = leaf_of_one(array.as_ref());
        if array.null_count() > 0 {
            return Err(Error::Layout {
                file: file.to_path_buf(),
                path: column.to_owned(),
                problem: "holds nulls".into(),
            });
        }
        match array.data_type() {
            DataType::Float32 => out.extend(array.as_primitive::<Float32Type>().values().iter().map(|&v| v as f64)),
            DataType::Float64 => out.extend(array.as_primitive::<Float64Type>().values().iter().copied()),
            other => {
                return Err(Error::Layout {
                    file: file.to_path_buf(),
                    path: column.to_owned(),
                    problem: format!("is {other}, not a float column"),
                })
            }
        }
    }
    Ok(out)
}

fn unreachable_encoded<T>(file: &Path, column: &str) -> Result<T> {
    Err(Error::Layout { file: file.to_path_buf(), path: column.to_owned(), problem: "is not a value column".into() })
}

/// A column of one-element lists (`[1]` features written as lists) as its values.
fn leaf_of_one(array: &dyn Array) -> &dyn Array {
    match array.data_type() {
        DataType::FixedSizeList(_, 1) => array.as_fixed_size_list().values().as_ref(),
        _ => array,
    }
}

/// Appends the values of `array` (any nesting of lists over a primitive) to
/// `out` as little-endian `dtype` elements.
fn flatten(array: &dyn Array, dtype: DType, out: &mut Vec<u8>) -> std::result::Result<(), String> {
    if array.null_count() > 0 {
        let row = (0..array.len()).find(|&i| array.is_null(i)).unwrap_or(0);
        return Err(format!("row {row} is null"));
    }
    match array.data_type() {
        DataType::FixedSizeList(_, size) => {
            let list = array.as_fixed_size_list();
            let size = *size as usize;
            let values = list.values().slice(list.offset() * size, list.len() * size);
            flatten(values.as_ref(), dtype, out)
        }
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let offsets: Vec<usize> = list.value_offsets().iter().map(|&o| o as usize).collect();
            let (start, end) = uniform_rows(&offsets)?;
            flatten(list.values().slice(start, end - start).as_ref(), dtype, out)
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            let offsets: Vec<usize> = list.value_offsets().iter().map(|&o| o as usize).collect();
            let (start, end) = uniform_rows(&offsets)?;
            flatten(list.values().slice(start, end - start).as_ref(), dtype, out)
        }
        leaf => primitive(array, leaf, dtype, out),
    }
}

/// The value range of a list column's rows, every row as long as the
/// first: a feature has one shape, so rows of different lengths (ragged
/// rows) are an error rather than values realigned across rows.
fn uniform_rows(offsets: &[usize]) -> std::result::Result<(usize, usize), String> {
    let (Some(&start), Some(&end)) = (offsets.first(), offsets.last()) else { return Ok((0, 0)) };
    let first = offsets.get(1).map_or(0, |&next| next.saturating_sub(start));
    if let Some(row) = offsets.windows(2).position(|pair| pair[1].saturating_sub(pair[0]) != first) {
        let len = offsets[row + 1].saturating_sub(offsets[row]);
        return Err(format!(
            "its row +{row} holds {len} values where the rows before it hold {first} (ragged rows; a feature has one shape)"
        ));
    }
    Ok((start, end.max(start)))
}

fn primitive(array: &dyn Array, leaf: &DataType, dtype: DType, out: &mut Vec<u8>) -> std::result::Result<(), String> {
    macro_rules! copy {
        ($arrow:ty) => {
            for v in array.as_primitive::<$arrow>().values().iter() {
                out.extend_from_slice(&v.to_le_bytes());
            }
        };
    }
    match (leaf, dtype) {
        (DataType::Boolean, DType::Bool) => out.extend(array.as_boolean().values().iter().map(u8::from)),
        (DataType::Float32, DType::F32) => copy!(Float32Type),
        (DataType::Float64, DType::F64) => copy!(Float64Type),
        (DataType::Float16, DType::F16) => copy!(Float16Type),
        (DataType::Int8, DType::I8) => copy!(Int8Type),
        (DataType::Int16, DType::I16) => copy!(Int16Type),
        (DataType::Int32, DType::I32) => copy!(Int32Type),
        (DataType::Int64, DType::I64) => copy!(Int64Type),
        (DataType::UInt8, DType::U8) => copy!(UInt8Type),
        (DataType::UInt16, DType::U16) => copy!(UInt16Type),
        (DataType::UInt32, DType::U32) => copy!(UInt32Type),
        (DataType::UInt64, DType::U64) => copy!(UInt64Type),
        // Indices written as int32 by some converters, read as the int64 info.json declares.
        (DataType::Int32, DType::I64) => {
            for v in array.as_primitive::<Int32Type>().values().iter() {
                out.extend_from_slice(&i64::from(*v).to_le_bytes());
            }
        }
        (leaf, dtype) => return Err(format!("holds {leaf} values, but the feature is {}", dtype.name())),
    }
    Ok(())
}

/// Appends one encoded image per row of `array` (`struct<bytes, path>` or binary).
fn encoded(array: &dyn Array, first_row: usize, out: &mut Vec<Vec<u8>>) -> std::result::Result<(), String> {
    let bytes: ArrayRef = match array.data_type() {
        DataType::Struct(fields) => {
            let Some((position, _)) = fields.find("bytes") else {
                return Err("is a struct without a `bytes` field (an image column holds struct<bytes, path>)".into());
            };
            array.as_struct().column(position).clone()
        }
        _ => arrow_array::make_array(array.to_data()),
    };
    let row_error = |i: usize| format!("row {}: no image bytes (null)", first_row + i);
    match bytes.data_type() {
        DataType::Binary => {
            for (i, v) in bytes.as_binary::<i32>().iter().enumerate() {
                out.push(v.ok_or_else(|| row_error(i))?.to_vec());
            }
        }
        DataType::LargeBinary => {
            for (i, v) in bytes.as_binary::<i64>().iter().enumerate() {
                out.push(v.ok_or_else(|| row_error(i))?.to_vec());
            }
        }
        DataType::BinaryView => {
            for (i, v) in bytes.as_binary_view().iter().enumerate() {
                out.push(v.ok_or_else(|| row_error(i))?.to_vec());
            }
        }
        other => return Err(format!("image bytes are {other}, not binary")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use arrow_array::types::Float32Type;
    use arrow_array::ListArray;

    use super::*;

    fn list(rows: Vec<Vec<f32>>) -> ListArray {
        ListArray::from_iter_primitive::<Float32Type, _, _>(rows.into_iter().map(|r| Some(r.into_iter().map(Some))))
    }

    #[test]
    fn list_rows_of_one_length_flatten_in_order() {
        let mut out = Vec::new();
        flatten(&list(vec![vec![1.0, 2.0], vec![3.0, 4.0]]), DType::F32, &mut out).unwrap();
        let values: Vec<f32> = out.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(values, [1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn ragged_list_rows_are_an_error_not_realigned() {
        // 3 + 1 values: the total of two rows of 2, but not their shape.
        let mut out = Vec::new();
        let error = flatten(&list(vec![vec![1.0, 2.0, 3.0], vec![4.0]]), DType::F32, &mut out).unwrap_err();
        assert!(error.contains("ragged") && error.contains("+1"), "{error}");
        // Each level of a nested list is checked the same way: its offsets.
        assert_eq!(uniform_rows(&[4, 6, 8, 10]), Ok((4, 10)));
        assert_eq!(uniform_rows(&[0]), Ok((0, 0)));
        assert!(uniform_rows(&[0, 2, 3, 5]).unwrap_err().contains("+1"));
    }
}

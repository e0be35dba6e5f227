//! An HDF5 file with its path, so every failure names the file and the
//! object; typed reads of row ranges (hyperslabs) into [`HostVec`]s.

use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

use half::f16;
use hdf5::types::{FixedAscii, FixedUnicode, FloatSize, IntSize, TypeDescriptor, VarLenAscii, VarLenUnicode};
use hdf5::{Dataset, Group, H5Type, Hyperslab, Selection, SliceOrIndex};
use ndarray::IxDyn;
use robocache_cpu::{DType, HostVec};
use serde_json::{Map, Value};

use robocache_datasource::{Error, Result};

/// The 8-byte signature that starts an HDF5 superblock.
const SIGNATURE: [u8; 8] = [0x89, b'H', b'D', b'F', b'\r', b'\n', 0x1a, b'\n'];

/// Longest fixed-length string read (longer ones are truncated by HDF5).
const MAX_FIXED_STRING: usize = 4096;

/// An open HDF5 file (read-only).
#[derive(Debug, Clone)]
pub(crate) struct Hdf5File {
    path: PathBuf,
    file: hdf5::File,
}

impl Hdf5File {
    /// Opens `path` read-only, without HDF5's file lock, after checking the
    /// HDF5 signature, so a file of another kind gets [`Error::NotHdf5`]
    /// rather than a library message.
    pub fn open(path: &Path) -> Result<Self> {
        check_signature(path)?;
        hdf5::silence_errors(true);
        // No file lock: robocache only reads, and HDF5's locks fail on many
        // network file systems and while any other process (even a child
        // that inherited a writer's descriptor) holds the file.
        let file = hdf5::File::with_options()
            .with_fapl(|fapl| fapl.file_locking(false))
            .open(path)
            .map_err(|e| Error::Hdf5 { file: path.to_path_buf(), location: "/".into(), message: e.to_string() })?;
        Ok(Hdf5File { path: path.to_path_buf(), file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn hdf5_error(&self, location: &str, error: hdf5::Error) -> Error {
        Error::Hdf5 { file: self.path.clone(), location: location.into(), message: error.to_string() }
    }

    pub fn layout_error(&self, path: &str, problem: impl Into<String>) -> Error {
        Error::Layout { file: self.path.clone(), path: path.into(), problem: problem.into() }
    }

    pub fn missing(&self, what: &'static str, path: &str) -> Error {
        Error::Missing { file: self.path.clone(), what, path: path.into() }
    }

    /// True when a link (group or dataset) exists at `path`, checking each level.
    pub fn exists(&self, path: &str) -> bool {
        if path.trim_matches('/').is_empty() {
            return true;
        }
        let mut prefix = String::new();
        for part in path.trim_matches('/').split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if !self.file.link_exists(&prefix) {
                return false;
            }
        }
        true
    }

    pub fn group(&self, path: &str) -> Result<Group> {
        if !self.exists(path) {
            return Err(self.missing("group", path));
        }
        self.file.group(path).map_err(|_| self.layout_error(path, "is not a group"))
    }

    pub fn dataset(&self, path: &str) -> Result<Dataset> {
        if !self.exists(path) {
            return Err(self.missing("dataset", path));
        }
        self.file.dataset(path).map_err(|_| self.layout_error(path, "is not a dataset"))
    }

    /// The names in a group, in HDF5's order (alphabetical).
    pub fn member_names(&self, group: &Group, path: &str) -> Result<Vec<String>> {
        group.member_names().map_err(|e| self.hdf5_error(path, e))
    }

    /// The robocache dtype of a dataset's elements.
    pub fn dtype(&self, dataset: &Dataset, path: &str) -> Result<DType> {
        let descriptor = dataset.dtype().and_then(|t| t.to_descriptor()).map_err(|e| self.hdf5_error(path, e))?;
        dtype_of(&descriptor).ok_or_else(|| {
            self.layout_error(path, format!("element type {descriptor} is not a number or bool robocache can read"))
        })
    }

    /// Reads rows `rows` of a dataset `[N, ...]` (a hyperslab: only those rows
    /// leave the file) as `dtype`, row-major.
    pub fn read_rows(&self, dataset: &Dataset, path: &str, dtype: DType, rows: Range<usize>) -> Result<HostVec> {
        fn rows_of<T: H5Type>(dataset: &Dataset, rows: Range<usize>) -> hdf5::Result<Vec<T>> {
            let array = dataset.as_reader().read_slice::<T, _, IxDyn>(row_selection(rows, dataset.ndim()))?;
            let (data, _) = array.into_raw_vec_and_offset();
            Ok(data)
        }
        let read = match dtype {
            DType::Bool => rows_of::<bool>(dataset, rows.clone()).map(HostVec::Bool),
            DType::U8 => rows_of::<u8>(dataset, rows.clone()).map(HostVec::U8),
            DType::U16 => rows_of::<u16>(dataset, rows.clone()).map(HostVec::U16),
            DType::U32 => rows_of::<u32>(dataset, rows.clone()).map(HostVec::U32),
            DType::U64 => rows_of::<u64>(dataset, rows.clone()).map(HostVec::U64),
            DType::I8 => rows_of::<i8>(dataset, rows.clone()).map(HostVec::I8),
            DType::I16 => rows_of::<i16>(dataset, rows.clone()).map(HostVec::I16),
            DType::I32 => rows_of::<i32>(dataset, rows.clone()).map(HostVec::I32),
            DType::I64 => rows_of::<i64>(dataset, rows.clone()).map(HostVec::I64),
            DType::F16 => rows_of::<f16>(dataset, rows.clone()).map(HostVec::F16),
            DType::F32 => rows_of::<f32>(dataset, rows.clone()).map(HostVec::F32),
            DType::F64 => rows_of::<f64>(dataset, rows.clone()).map(HostVec::F64),
            DType::BF16 => return Err(self.layout_error(path, "bf16 is not an HDF5 type")),
        };
        read.map_err(|e| self.hdf5_error(&format!("{path} rows {}..{}", rows.start, rows.end), e))
    }

    /// A whole dataset as `f64` (timestamps), converted by HDF5 from any numeric type.
    pub fn read_f64(&self, dataset: &Dataset, path: &str) -> Result<Vec<f64>> {
        dataset.read_raw::<f64>().map_err(|e| self.hdf5_error(path, e))
    }

    /// A whole dataset or attribute of strings (fixed or variable length,
    /// ASCII or UTF-8), as `String`s with trailing NULs removed.
    pub fn read_strings(&self, container: &hdf5::Container, path: &str) -> Result<Vec<String>> {
        let descriptor = container.dtype().and_then(|t| t.to_descriptor()).map_err(|e| self.hdf5_error(path, e))?;
        let strings: hdf5::Result<Vec<String>> = match descriptor {
            TypeDescriptor::FixedAscii(_) => container
                .read_raw::<FixedAscii<MAX_FIXED_STRING>>()
                .map(|v| v.iter().map(|s| s.as_str().to_owned()).collect()),
            TypeDescriptor::FixedUnicode(_) => container
                .read_raw::<FixedUnicode<MAX_FIXED_STRING>>()
                .map(|v| v.iter().map(|s| s.as_str().to_owned()).collect()),
            TypeDescriptor::VarLenAscii => {
                container.read_raw::<VarLenAscii>().map(|v| v.iter().map(|s| s.as_str().to_owned()).collect())
            }
            TypeDescriptor::VarLenUnicode => {
                container.read_raw::<VarLenUnicode>().map(|v| v.iter().map(|s| s.as_str().to_owned()).collect())
            }
            other => return Err(self.layout_error(path, format!("holds {other}, not strings"))),
        };
        let strings = strings.map_err(|e| self.hdf5_error(path, e))?;
        Ok(strings.into_iter().map(|s| s.trim_end_matches('\0').to_owned()).collect())
    }

    /// The attribute `name` of `location` as one string.
    pub fn attr_string(&self, location: &hdf5::Location, name: &str) -> Result<Option<String>> {
        let path = format!("{}@{name}", location.name());
        let Ok(attr) = location.attr(name) else { return Ok(None) };
        let strings = self.read_strings(&attr, &path)?;
        match strings.as_slice() {
            [one] => Ok(Some(one.clone())),
            _ => Err(self.layout_error(&path, format!("holds {} strings, expected one", strings.len()))),
        }
    }

    /// The attribute `name` of `location` as one number.
    pub fn attr_f64(&self, location: &hdf5::Location, name: &str) -> Result<Option<f64>> {
        let path = format!("{}@{name}", location.name());
        let Ok(attr) = location.attr(name) else { return Ok(None) };
        let values = attr.read_raw::<f64>().map_err(|_| self.layout_error(&path, "is not a number"))?;
        match values.as_slice() {
            [one] => Ok(Some(*one)),
            _ => Err(self.layout_error(&path, format!("holds {} values, expected one", values.len()))),
        }
    }

    /// Every attribute of `location` as JSON (numbers, strings, arrays of
    /// them; strings that hold JSON objects are parsed). Attributes of other
    /// types are described rather than read.
    pub fn attrs_json(&self, location: &hdf5::Location) -> Map<String, Value> {
        let mut map = Map::new();
        for name in location.attr_names().unwrap_or_default() {
            let Ok(attr) = location.attr(&name) else { continue };
            let value = self.json_of(&attr, &format!("{}@{name}", location.name()));
            map.insert(name, value);
        }
        map
    }

    fn json_of(&self, container: &hdf5::Container, path: &str) -> Value {
        let descriptor = match container.dtype().and_then(|t| t.to_descriptor()) {
            Ok(d) => d,
            Err(e) => return Value::String(format!("<unreadable: {e}>")),
        };
        let scalar = container.is_scalar() || container.size() == 1;
        let values: Vec<Value> = match descriptor {
            TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_) => {
                container.read_raw::<i64>().unwrap_or_default().into_iter().map(Value::from).collect()
            }
            TypeDescriptor::Float(_) => container
                .read_raw::<f64>()
                .unwrap_or_default()
                .into_iter()
                .map(|v| serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
                .collect(),
            TypeDescriptor::Boolean => {
                container.read_raw::<bool>().unwrap_or_default().into_iter().map(Value::from).collect()
            }
            TypeDescriptor::FixedAscii(_)
            | TypeDescriptor::FixedUnicode(_)
            | TypeDescriptor::VarLenAscii
            | TypeDescriptor::VarLenUnicode => self
                .read_strings(container, path)
                .unwrap_or_default()
                .into_iter()
                .map(|s| match serde_json::from_str::<Value>(&s) {
                    Ok(v @ (Value::Object(_) | Value::Array(_))) => v,
                    _ => Value::String(s),
                })
                .collect(),
            other => return Value::String(format!("<{other}>")),
        };
        if scalar && values.len() == 1 {
            values.into_iter().next().unwrap_or(Value::Null)
        } else {
            Value::Array(values)
        }
    }
}

/// Rows `rows` of the first dimension and everything of the others.
pub(crate) fn row_selection(rows: Range<usize>, ndim: usize) -> Selection {
    let mut slices = vec![SliceOrIndex::from(rows)];
    slices.extend((1..ndim).map(|_| SliceOrIndex::from(..)));
    Selection::from(Hyperslab::from(slices))
}

/// The robocache dtype of an HDF5 element type, if it has one.
fn dtype_of(descriptor: &TypeDescriptor) -> Option<DType> {
    Some(match descriptor {
        TypeDescriptor::Boolean => DType::Bool,
        TypeDescriptor::Unsigned(IntSize::U1) => DType::U8,
        TypeDescriptor::Unsigned(IntSize::U2) => DType::U16,
        TypeDescriptor::Unsigned(IntSize::U4) => DType::U32,
        TypeDescriptor::Unsigned(IntSize::U8) => DType::U64,
        TypeDescriptor::Integer(IntSize::U1) => DType::I8,
        TypeDescriptor::Integer(IntSize::U2) => DType::I16,
        TypeDescriptor::Integer(IntSize::U4) => DType::I32,
        TypeDescriptor::Integer(IntSize::U8) => DType::I64,
        TypeDescriptor::Float(FloatSize::U2) => DType::F16,
        TypeDescriptor::Float(FloatSize::U4) => DType::F32,
        TypeDescriptor::Float(FloatSize::U8) => DType::F64,
        _ => return None,
    })
}

/// Fails unless the HDF5 signature is at offset 0 or at a user-block
/// boundary (512, 1024, 2048, ... bytes, up to 8 MiB) as the format allows;
/// reads 8 bytes at each.
fn check_signature(path: &Path) -> Result<()> {
    use std::io::{Seek, SeekFrom};
    let io = |error| Error::Io { file: path.to_path_buf(), error };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut head = [0u8; 8];
    let mut offset = 0u64;
    while offset + 8 <= len && offset <= 8 << 20 {
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        file.read_exact(&mut head).map_err(io)?;
        if head == SIGNATURE {
            return Ok(());
        }
        offset = if offset == 0 { 512 } else { offset * 2 };
    }
    Err(Error::NotHdf5 { file: path.to_path_buf() })
}

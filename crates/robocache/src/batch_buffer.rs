//! [`BatchBuffer`]: where a streamed batch's rows are assembled before they
//! become a tensor; [`BatchUpload`]: several tensors of one batch (its
//! streams' rows, their masks, its columns) assembled in one buffer.
//!
//! On a CUDA device the buffer is page-locked staging memory lent by the
//! device's staging pool: reader threads write the rows straight into it,
//! and it is uploaded from there on the copy stream, so a batch's bytes are
//! copied once from the file and once to the device. On the CPU it is the
//! tensor's own host memory. Either way the rows are written as bytes
//! (elements as in memory, bool as one byte 0 or 1).

use robocache_cpu::{DType, HostVec};

use crate::backend::CudaBackend;
use crate::cuda::{CudaDevice, StagingBuffer};
use crate::{Device, Error, Result, Tensor};

/// The bytes of one streamed tensor while it is being assembled.
pub(crate) struct BatchBuffer {
    dtype: DType,
    storage: Storage,
}

enum Storage {
    /// Host elements; bool assembled as `U8` and checked at the end.
    Host(HostVec),
    Staged(StagingBuffer),
}

impl BatchBuffer {
    /// Room for `elements` elements of `dtype` on `device`'s side of the copy.
    pub(crate) fn new(device: &Device, dtype: DType, elements: usize) -> Result<Self> {
        let storage = match device {
            Device::Cpu if dtype == DType::Bool => Storage::Host(HostVec::zeros(DType::U8, elements)),
            Device::Cpu => Storage::Host(HostVec::zeros(dtype, elements)),
            Device::Cuda(cuda) => Storage::Staged(cuda.lend_staging(elements * dtype.size_in_bytes())?),
        };
        Ok(BatchBuffer { dtype, storage })
    }

    /// Buffers of `elements[i]` elements of `dtype` each, made together: on
    /// a CUDA device the staging pool lends them all at once (a caller that
    /// held some while it waited for the others could wait for ever on
    /// another that does the same).
    pub(crate) fn new_together(device: &Device, dtype: DType, elements: &[usize]) -> Result<Vec<Self>> {
        match device {
            Device::Cpu => elements.iter().map(|&n| BatchBuffer::new(device, dtype, n)).collect(),
            Device::Cuda(cuda) => {
                let lens: Vec<usize> = elements.iter().map(|&n| n * dtype.size_in_bytes()).collect();
                let lent = cuda.lend_staging_together(&lens)?;
                Ok(lent.into_iter().map(|lent| BatchBuffer { dtype, storage: Storage::Staged(lent) }).collect())
            }
        }
    }

    /// The buffer's bytes.
    pub(crate) fn as_mut_bytes(&mut self) -> &mut [u8] {
        match &mut self.storage {
            // Every host dtype but bool has bytes; bool is held as U8.
            Storage::Host(data) => data.as_bytes_mut().unwrap_or_default(),
            Storage::Staged(lent) => CudaDevice::staging_bytes(lent),
        }
    }

    /// The assembled bytes as a tensor of `shape` on `device` (the one the
    /// buffer was made for); staged bytes are uploaded on the copy stream.
    pub(crate) fn into_tensor(self, device: &Device, shape: &[usize], name: &str) -> Result<Tensor> {
        match (self.storage, device) {
            (Storage::Host(data), Device::Cpu) => host_tensor(device, self.dtype, data, shape, name),
            (Storage::Staged(lent), Device::Cuda(cuda)) => {
                Ok(Tensor::from_device_storage(device, cuda.upload_staging(lent)?, self.dtype, shape))
            }
            (storage, _) => Err(Error::DeviceMismatch {
                what: format!("the batch buffer of stream `{name}`"),
                tensor_device: if matches!(storage, Storage::Host(_)) { "the host" } else { "a CUDA device" }.into(),
                device: device.to_string(),
            }),
        }
    }
}

/// A host part assembled as bytes becomes a tensor of `dtype`: bool parts
/// (held as `U8`) are checked to be 0 or 1, byte by byte.
fn host_tensor(device: &Device, dtype: DType, data: HostVec, shape: &[usize], name: &str) -> Result<Tensor> {
    match data {
        HostVec::U8(bytes) if dtype == DType::Bool => {
            let mut flags = Vec::with_capacity(bytes.len());
            for (at, &byte) in bytes.iter().enumerate() {
                match byte {
                    0 | 1 => flags.push(byte == 1),
                    other => {
                        return Err(Error::Dataset(robocache_datasets::Error::Invalid(format!(
                            "stream `{name}`: element {at} of a bool batch is byte {other}, not 0 or 1"
                        ))))
                    }
                }
            }
            Tensor::from_host_vec(device, HostVec::Bool(flags), shape)
        }
        data => Tensor::from_host_vec(device, data, shape),
    }
}

/// Where each part of a [`BatchUpload`] starts: a multiple of this, so any
/// part is aligned for any dtype (and for the kernels' vector loads).
const PART_ALIGN: usize = 256;

/// One part of a [`BatchUpload`].
#[derive(Clone, Copy, Debug)]
struct UploadPart {
    dtype: DType,
    elements: usize,
    /// Bytes from the start of the staging buffer (CUDA).
    offset: usize,
}

/// Several tensors of one batch assembled side by side in one buffer: on a
/// CUDA device one page-locked staging buffer, put on the device with one
/// allocation and one copy, each tensor a part of that allocation; on the
/// CPU each part its own host memory. A streamed batch's fixed cost on a
/// GPU is its driver calls (an allocation, a copy and two events per
/// upload), so a batch of `S` streams, their masks and its columns costs
/// one upload instead of `2S + 1`.
pub(crate) struct BatchUpload {
    parts: Vec<UploadPart>,
    storage: UploadStorage,
}

enum UploadStorage {
    /// One host vector per part (bool parts filled as bytes are `U8`).
    Host(Vec<HostVec>),
    Staged(StagingBuffer),
}

impl BatchUpload {
    /// Room for parts of `(dtype, elements)` on `device`'s side of the copy,
    /// zeroed on the CPU (staged bytes are whatever the reader writes).
    pub(crate) fn new(device: &Device, parts: &[(DType, usize)]) -> Result<Self> {
        let mut planned = Vec::with_capacity(parts.len());
        let mut end = 0usize;
        for &(dtype, elements) in parts {
            let offset = end.next_multiple_of(PART_ALIGN);
            let bytes = elements
                .checked_mul(dtype.size_in_bytes())
                .and_then(|bytes| offset.checked_add(bytes))
                .ok_or_else(|| Error::Internal(format!("a batch of {elements} elements of {dtype} overflows")))?;
            planned.push(UploadPart { dtype, elements, offset });
            end = bytes;
        }
        let storage = match device {
            Device::Cpu => UploadStorage::Host(
                parts
                    .iter()
                    .map(|&(dtype, n)| HostVec::zeros(if dtype == DType::Bool { DType::U8 } else { dtype }, n))
                    .collect(),
            ),
            Device::Cuda(cuda) => UploadStorage::Staged(cuda.lend_staging(end.max(1))?),
        };
        Ok(BatchUpload { parts: planned, storage })
    }

    /// The bytes of part `at`, to fill (elements as in memory, bool as one
    /// byte 0 or 1, checked on the CPU).
    pub(crate) fn part_mut(&mut self, at: usize) -> &mut [u8] {
        let part = self.parts[at];
        match &mut self.storage {
            // Every host dtype but bool has bytes; bool is held as U8.
            UploadStorage::Host(data) => data[at].as_bytes_mut().unwrap_or_default(),
            UploadStorage::Staged(lent) => {
                let len = part.elements * part.dtype.size_in_bytes();
                &mut CudaDevice::staging_bytes(lent)[part.offset..part.offset + len]
            }
        }
    }

    /// Part `at` (a bool part) set to `flags`, which must be its length.
    pub(crate) fn set_flags(&mut self, at: usize, flags: Vec<bool>) -> Result<()> {
        let part = self.parts[at];
        if part.dtype != DType::Bool || flags.len() != part.elements {
            return Err(Error::Internal(format!(
                "batch upload: part {at} is {} of {} elements, given {} flags",
                part.dtype,
                part.elements,
                flags.len()
            )));
        }
        match &mut self.storage {
            UploadStorage::Host(data) => data[at] = HostVec::Bool(flags),
            UploadStorage::Staged(_) => {
                for (byte, flag) in self.part_mut(at).iter_mut().zip(flags) {
                    *byte = u8::from(flag);
                }
            }
        }
        Ok(())
    }

    /// Part `at` (an `i64` part) set to `values`, which must be its length.
    pub(crate) fn set_i64(&mut self, at: usize, values: &[i64]) -> Result<()> {
        let part = self.parts[at];
        if part.dtype != DType::I64 || values.len() != part.elements {
            return Err(Error::Internal(format!(
                "batch upload: part {at} is {} of {} elements, given {} i64 values",
                part.dtype,
                part.elements,
                values.len()
            )));
        }
        self.part_mut(at).copy_from_slice(bytemuck::cast_slice(values));
        Ok(())
    }

    /// Every part as a tensor of `shapes[i]` on `device` (the one the upload
    /// was made for), in one copy on a GPU; `names[i]` names part `i` in an
    /// error.
    pub(crate) fn into_tensors(self, device: &Device, shapes: &[Vec<usize>], names: &[&str]) -> Result<Vec<Tensor>> {
        if shapes.len() != self.parts.len() || names.len() != self.parts.len() {
            return Err(Error::Internal(format!(
                "batch upload: {} parts, given {} shapes and {} names",
                self.parts.len(),
                shapes.len(),
                names.len()
            )));
        }
        for ((part, shape), name) in self.parts.iter().zip(shapes).zip(names) {
            if shape.iter().product::<usize>() != part.elements {
                return Err(Error::Internal(format!(
                    "batch upload: part `{name}` holds {} elements, not shape {shape:?}",
                    part.elements
                )));
            }
        }
        match (self.storage, device) {
            (UploadStorage::Host(data), Device::Cpu) => (data.into_iter().zip(&self.parts))
                .zip(shapes.iter().zip(names))
                .map(|((data, part), (shape, name))| host_tensor(device, part.dtype, data, shape, name))
                .collect(),
            (UploadStorage::Staged(lent), Device::Cuda(cuda)) => {
                let offsets: Vec<usize> = self.parts.iter().map(|part| part.offset).collect();
                let storages = CudaDevice::storage_parts(cuda.upload_staging(lent)?, &offsets);
                Ok((storages.into_iter().zip(&self.parts).zip(shapes))
                    .map(|((storage, part), shape)| Tensor::from_device_storage(device, storage, part.dtype, shape))
                    .collect())
            }
            (storage, _) => Err(Error::DeviceMismatch {
                what: format!("the batch upload of {}", names.join(", ")),
                tensor_device: if matches!(storage, UploadStorage::Host(_)) { "the host" } else { "a CUDA device" }
                    .into(),
                device: device.to_string(),
            }),
        }
    }
}

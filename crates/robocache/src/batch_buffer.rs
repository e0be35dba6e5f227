//! [`BatchBuffer`]: where a streamed batch's rows are assembled before they
//! become a tensor.
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
            (Storage::Host(HostVec::U8(bytes)), Device::Cpu) if self.dtype == DType::Bool => {
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
            (Storage::Host(data), Device::Cpu) => Tensor::from_host_vec(device, data, shape),
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

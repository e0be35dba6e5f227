//! [`Tensor`]: an owned buffer on a device, with its shape and dtype. Not a
//! tensor library: it carries data in and out of operations, nothing more.

use robocache_cpu::{DType, Element, HostSlice, HostVec};

use crate::backend::CudaBackend;
use crate::cuda::{CudaDevice, DeviceStorage};
use crate::{Device, Error, Result};

/// An owned, contiguous, row-major array on a [`Device`].
#[derive(Clone, Debug)]
pub struct Tensor {
    device: Device,
    shape: Vec<usize>,
    dtype: DType,
    storage: Storage,
}

#[derive(Clone, Debug)]
pub(crate) enum Storage {
    Host(HostVec),
    /// Host memory of another owner ([`Tensor::from_external`]).
    External(ExternalHost),
    Device(DeviceStorage),
}

/// Another owner's host memory: `len` elements of `dtype` at `address`.
#[derive(Clone, Debug)]
pub(crate) struct ExternalHost {
    address: usize,
    len: usize,
    dtype: DType,
}

impl Tensor {
    /// Copies `data` with `shape` onto `device`.
    pub fn from_slice<T: Element>(device: &Device, data: &[T], shape: &[usize]) -> Result<Self> {
        Tensor::from_host(device, T::slice(data), shape)
    }

    /// Copies a type-erased slice with `shape` onto `device`.
    pub fn from_host(device: &Device, data: HostSlice<'_>, shape: &[usize]) -> Result<Self> {
        check_elements("tensor", shape, data.len())?;
        let storage = match device {
            Device::Cpu => Storage::Host(data.to_host_vec()),
            Device::Cuda(cuda) => Storage::Device(cuda.upload(data)?),
        };
        Ok(Tensor { device: device.clone(), shape: shape.to_vec(), dtype: data.dtype(), storage })
    }

    /// Moves a host vector onto `device` (no copy on the CPU).
    pub fn from_host_vec(device: &Device, data: HostVec, shape: &[usize]) -> Result<Self> {
        check_elements("tensor", shape, data.len())?;
        match device {
            Device::Cpu => Ok(Tensor::host(device, data, shape.to_vec())),
            Device::Cuda(_) => Tensor::from_host(device, data.as_slice(), shape),
        }
    }

    /// A tensor over memory that another library owns (a NumPy array, a
    /// PyTorch tensor), without a copy: host memory on [`Device::Cpu`],
    /// device memory of that device on [`Device::Cuda`]. robocache never
    /// writes or frees it. The data must be contiguous, row-major, of
    /// `dtype` and `shape`, and aligned to its element size (checked).
    ///
    /// # Safety
    ///
    /// `address` must point to `shape`'s product of elements of `dtype`
    /// (for bool, bytes that are 0 or 1), on the device, that stay valid and
    /// unwritten while the tensor or a clone of it lives and, on a GPU, until
    /// the work queued with it on the device's stream has completed (order
    /// the owner's stream after it with
    /// [`Device::make_external_stream_wait`]).
    pub unsafe fn from_external(device: &Device, address: u64, dtype: DType, shape: &[usize]) -> Result<Self> {
        let len = shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| robocache_cpu::Error::Overflow("Tensor::from_external".into()))?;
        if !address.is_multiple_of(dtype.size_in_bytes() as u64) {
            return Err(Error::Layout {
                what: "Tensor::from_external".into(),
                reason: format!(
                    "the {dtype} data at {address:#x} is not aligned to its {} bytes",
                    dtype.size_in_bytes()
                ),
            });
        }
        let storage = match device {
            Device::Cpu => Storage::External(ExternalHost { address: address as usize, len, dtype }),
            // SAFETY: forwarded to the caller.
            Device::Cuda(cuda) => Storage::Device(unsafe { cuda.borrow(address, len * dtype.size_in_bytes()) }?),
        };
        Ok(Tensor { device: device.clone(), shape: shape.to_vec(), dtype, storage })
    }

    /// The address of the data: host memory on the CPU, device memory on a
    /// GPU (for consumers that read results in place, such as the Python
    /// package's array interfaces).
    pub fn data_address(&self) -> u64 {
        match &self.storage {
            Storage::Host(v) => v.as_slice().as_bytes().as_ptr() as u64,
            Storage::External(e) => e.address as u64,
            Storage::Device(d) => CudaDevice::storage_pointer(d),
        }
    }

    /// A tensor over device memory already filled (a staged upload).
    pub(crate) fn from_device_storage(device: &Device, storage: DeviceStorage, dtype: DType, shape: &[usize]) -> Self {
        Tensor { device: device.clone(), shape: shape.to_vec(), dtype, storage: Storage::Device(storage) }
    }

    pub(crate) fn host(device: &Device, data: HostVec, shape: Vec<usize>) -> Self {
        Tensor { device: device.clone(), shape, dtype: data.dtype(), storage: Storage::Host(data) }
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn on_device(device: &Device, storage: DeviceStorage, dtype: DType, shape: Vec<usize>) -> Self {
        Tensor { device: device.clone(), shape, dtype, storage: Storage::Device(storage) }
    }

    /// Zeros (false for bool) of `dtype` and `shape` on `device` (a queued
    /// memset on a GPU).
    pub(crate) fn zeros(device: &Device, dtype: DType, shape: &[usize]) -> Result<Tensor> {
        let len = shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| robocache_cpu::Error::Overflow("Tensor::zeros".into()))?;
        let storage = match device {
            Device::Cpu => Storage::Host(HostVec::zeros(dtype, len)),
            Device::Cuda(cuda) => Storage::Device(cuda.zeros(len * dtype.size_in_bytes())?),
        };
        Ok(Tensor { device: device.clone(), shape: shape.to_vec(), dtype, storage })
    }

    /// Zeros of each `(dtype, shape)` on `device`: on a GPU parts of one
    /// allocation cleared by one queued memset (each part at a multiple of
    /// 256 bytes), so a batch of many outputs costs two driver calls.
    pub(crate) fn zeros_together(device: &Device, specs: &[(DType, Vec<usize>)]) -> Result<Vec<Tensor>> {
        let Device::Cuda(cuda) = device else {
            return specs.iter().map(|(dtype, shape)| Tensor::zeros(device, *dtype, shape)).collect();
        };
        let mut offsets = Vec::with_capacity(specs.len());
        let mut end = 0usize;
        for (dtype, shape) in specs {
            let bytes = shape
                .iter()
                .try_fold(dtype.size_in_bytes(), |acc, &d| acc.checked_mul(d))
                .ok_or_else(|| robocache_cpu::Error::Overflow("Tensor::zeros_together".into()))?;
            let at = end.next_multiple_of(256);
            offsets.push(at);
            end =
                at.checked_add(bytes).ok_or_else(|| robocache_cpu::Error::Overflow("Tensor::zeros_together".into()))?;
        }
        let parts = CudaDevice::storage_parts(cuda.zeros(end.max(1))?, &offsets);
        Ok(parts
            .into_iter()
            .zip(specs)
            .map(|(storage, (dtype, shape))| Tensor {
                device: device.clone(),
                shape: shape.clone(),
                dtype: *dtype,
                storage: Storage::Device(storage),
            })
            .collect())
    }

    /// The block of rows [`Tensor::copy_row_range_into`] copies (in bytes),
    /// after checking that it lies inside both tensors.
    pub(crate) fn row_block(
        &self,
        from_rows: std::ops::Range<usize>,
        dest: &Tensor,
        width: usize,
        dest_width: usize,
        row: usize,
        column: usize,
    ) -> Result<crate::backend::RowBlock> {
        let layout = |reason: String| Error::Layout { what: "copy_rows_into".into(), reason };
        if self.dtype != dest.dtype {
            return Err(layout(format!("{} rows into a {} tensor", self.dtype, dest.dtype)));
        }
        if width == 0 || !self.len().is_multiple_of(width) || column + width > dest_width {
            return Err(layout(format!(
                "{} elements as rows of {width} from column {column} of rows of {dest_width}",
                self.len()
            )));
        }
        if from_rows.start > from_rows.end || from_rows.end > self.len() / width {
            return Err(layout(format!("rows {from_rows:?} of a tensor of {} rows", self.len() / width)));
        }
        let rows = from_rows.end - from_rows.start;
        if (row + rows) * dest_width > dest.len() {
            return Err(layout(format!("rows {row}..{} of a tensor of {} rows", row + rows, dest.len() / dest_width)));
        }
        let size = self.dtype.size_in_bytes();
        Ok(crate::backend::RowBlock {
            rows,
            width: width * size,
            from_offset: from_rows.start * width * size,
            from_pitch: width * size,
            to_offset: (row * dest_width + column) * size,
            to_pitch: dest_width * size,
        })
    }

    /// Copies this tensor, seen as rows of `width` elements, into `dest`,
    /// seen as rows of `dest_width`, from row `row` and column `column`:
    /// element `(i, j)` to `(row + i, column + j)`. Pads rows into wider
    /// ones or places them side by side; on a GPU one queued 2-D copy
    /// (host data is put on the device first). Dtypes must agree.
    pub(crate) fn copy_rows_into(
        &self,
        dest: &mut Tensor,
        width: usize,
        dest_width: usize,
        row: usize,
        column: usize,
    ) -> Result<()> {
        let rows = self.len().checked_div(width).unwrap_or(0);
        self.copy_row_range_into(0..rows, dest, width, dest_width, row, column)
    }

    /// [`Tensor::copy_rows_into`] of rows `from_rows` of this tensor only:
    /// element `(from_rows.start + i, j)` to `(row + i, column + j)`.
    pub(crate) fn copy_row_range_into(
        &self,
        from_rows: std::ops::Range<usize>,
        dest: &mut Tensor,
        width: usize,
        dest_width: usize,
        row: usize,
        column: usize,
    ) -> Result<()> {
        let layout = |reason: String| Error::Layout { what: "copy_rows_into".into(), reason };
        let block = self.row_block(from_rows.clone(), dest, width, dest_width, row, column)?;
        let size = self.dtype.size_in_bytes();
        match (&mut dest.storage, &dest.device) {
            (Storage::Device(to), Device::Cuda(cuda)) => {
                let uploaded;
                let from = match &self.storage {
                    Storage::Device(from) => from,
                    _ => {
                        uploaded = cuda.upload(self.to_host()?.as_slice())?;
                        &uploaded
                    }
                };
                cuda.copy_rows(from, to, &block)
            }
            (Storage::Host(to), _) => {
                let downloaded;
                let from = match &self.storage {
                    Storage::Device(_) => {
                        downloaded = self.to_host()?;
                        downloaded.as_slice()
                    }
                    _ => self.host_slice(),
                };
                let place = |i: usize| (row + i) * dest_width + column;
                match (to, from) {
                    (HostVec::Bool(to), HostSlice::Bool(from)) => {
                        let lines = from.chunks_exact(width).skip(from_rows.start).take(block.rows);
                        for (i, line) in lines.enumerate() {
                            to[place(i)..place(i) + width].copy_from_slice(line);
                        }
                    }
                    (to, from) => {
                        let to = to.as_bytes_mut().ok_or_else(|| layout("bool rows".into()))?;
                        let lines = from.as_bytes().chunks_exact(width * size).skip(from_rows.start).take(block.rows);
                        for (i, line) in lines.enumerate() {
                            to[place(i) * size..(place(i) + width) * size].copy_from_slice(line);
                        }
                    }
                }
                Ok(())
            }
            _ => Err(layout("into memory robocache does not own".into())),
        }
    }

    /// The device the data lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The shape, outermost dimension first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same data with another shape of the same number of elements (no copy).
    pub fn reshape(mut self, shape: &[usize]) -> Result<Tensor> {
        check_elements("Tensor::reshape", shape, self.len())?;
        self.shape = shape.to_vec();
        Ok(self)
    }

    /// The bytes the data takes.
    pub fn size_in_bytes(&self) -> usize {
        self.len() * self.dtype.size_in_bytes()
    }

    /// The raw device address of the data on a GPU (`None` on the CPU), for
    /// consumers that use results in place: the data is row-major, of
    /// [`Tensor::dtype`], ready once the device's stream
    /// ([`CudaDevice::stream_handle`](crate::CudaDevice::stream_handle)) has
    /// reached it.
    pub fn device_pointer(&self) -> Option<u64> {
        match &self.storage {
            Storage::Host(_) | Storage::External(_) => None,
            Storage::Device(d) => Some(CudaDevice::storage_pointer(d)),
        }
    }

    /// Copies the data to the host (waits for queued work on a GPU).
    pub fn to_host(&self) -> Result<HostVec> {
        match (&self.storage, &self.device) {
            (Storage::Host(v), _) => Ok(v.clone()),
            (Storage::External(_), _) => Ok(self.host_slice().to_host_vec()),
            (Storage::Device(d), Device::Cuda(cuda)) => cuda.download(d, self.dtype, self.len()),
            (Storage::Device(_), Device::Cpu) => unreachable!("device storage belongs to a CUDA device"),
        }
    }

    /// The data on the host, taken without a copy where it is there already
    /// (a CPU tensor robocache owns); copied otherwise, as [`Tensor::to_host`].
    pub fn into_host(self) -> Result<HostVec> {
        match self.storage {
            Storage::Host(v) => Ok(v),
            _ => self.to_host(),
        }
    }

    /// A copy of the tensor on the same device (queued on a GPU: a
    /// device-to-device copy that does not wait).
    pub fn duplicate(&self) -> Result<Tensor> {
        let storage = match (&self.storage, &self.device) {
            (Storage::Host(v), _) => Storage::Host(v.clone()),
            (Storage::External(_), _) => Storage::Host(self.host_slice().to_host_vec()),
            (Storage::Device(d), Device::Cuda(cuda)) => {
                Storage::Device(cuda.duplicate(d, self.len() * self.dtype.size_in_bytes())?)
            }
            (Storage::Device(_), Device::Cpu) => unreachable!("device storage belongs to a CUDA device"),
        };
        Ok(Tensor { device: self.device.clone(), shape: self.shape.clone(), dtype: self.dtype, storage })
    }

    /// Copies the data to a host `Vec<T>`; an error if the dtype is not `T`'s.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype != T::DTYPE {
            return Err(Error::Invalid(robocache_cpu::Error::DTypeMismatch {
                what: "Tensor::to_vec".into(),
                expected: T::DTYPE.to_string(),
                actual: self.dtype,
            }));
        }
        T::from_host_vec(self.to_host()?).map_err(|v| {
            Error::Invalid(robocache_cpu::Error::DTypeMismatch {
                what: "Tensor::to_vec".into(),
                expected: T::DTYPE.to_string(),
                actual: v.dtype(),
            })
        })
    }

    /// The data as a host slice, for the CPU backend (which only sees host tensors).
    pub(crate) fn host_slice(&self) -> HostSlice<'_> {
        match &self.storage {
            Storage::Host(v) => v.as_slice(),
            // SAFETY: `from_external`'s caller keeps `len` aligned elements
            // of `dtype` valid and unwritten while the tensor lives.
            Storage::External(e) => unsafe { HostSlice::from_raw_parts(e.dtype, e.address as *const u8, e.len) },
            Storage::Device(_) => unreachable!("the CPU backend checks that its tensors are on the CPU"),
        }
    }

    /// Frees this tensor's device memory, once the last tensor sharing it is
    /// dropped, in stream order on `stream` (a raw `CUstream` of another
    /// library on the tensor's device, 0 the legacy default stream) instead
    /// of robocache's stream: for memory handed to a consumer whose stream
    /// is ordered after every use of it, so that robocache's stream never
    /// waits for the consumer's work. Nothing for host memory or memory
    /// robocache does not own.
    ///
    /// # Safety
    ///
    /// When the memory is dropped, `stream` must be a live stream of the
    /// tensor's device, and every use of the memory queued on any stream
    /// (robocache's included) must be ordered before the work queued on
    /// `stream` by then.
    pub unsafe fn free_on_external_stream(&self, stream: u64) {
        match &self.storage {
            // SAFETY: forwarded to the caller.
            Storage::Device(storage) => unsafe { CudaDevice::free_storage_on_stream(storage, stream) },
            Storage::Host(_) | Storage::External(_) => {}
        }
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn device_storage(&self) -> Option<&DeviceStorage> {
        match &self.storage {
            Storage::Device(d) => Some(d),
            Storage::Host(_) | Storage::External(_) => None,
        }
    }
}

fn check_elements(what: &str, shape: &[usize], actual: usize) -> Result<()> {
    let expected = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| robocache_cpu::Error::Overflow(what.to_owned()))?;
    if expected == actual {
        Ok(())
    } else {
        Err(robocache_cpu::Error::ShapeMismatch { what: what.to_owned(), shape: shape.to_vec(), expected, actual }
            .into())
    }
}

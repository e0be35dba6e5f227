//! Results out through DLPack: a `dltensor` capsule over memory that an
//! owner keeps alive (an `Array`'s tensors, a loader batch's), which
//! PyTorch (`torch.from_dlpack`), NumPy and JAX take in place. This module
//! knows no owner type: the array module calls it, never the reverse.
//!
//! The capsule holds a `DLManagedTensor` (the DLPack 0.x ABI, which every
//! consumer reads) whose manager context keeps the result alive: the
//! consumer calls its deleter when its own tensor is freed, which releases
//! robocache's memory in stream order after the consumer's stream (see
//! [`crate::arrays`]). A capsule never consumed is released by its
//! destructor.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use pyo3::prelude::*;
use robocache::{DType, Device};

/// What keeps a capsule's memory alive until its consumer releases it.
pub(crate) type Owner = Arc<dyn Send + Sync>;

/// `DLDevice`.
#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

/// `DLDataType`.
#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `DLTensor`.
#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// `DLManagedTensor`.
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// The managed tensor and what it points into, in one allocation
/// (`managed` first, so a pointer to it is a pointer to this).
#[repr(C)]
struct Managed {
    managed: DlManagedTensor,
    shape: Vec<i64>,
    _owner: Owner,
}

const CAPSULE_NAME: &CStr = c"dltensor";
const USED_CAPSULE_NAME: &CStr = c"used_dltensor";

/// `kDLCPU`, `kDLCUDA`.
const DL_CPU: i32 = 1;
const DL_CUDA: i32 = 2;

/// DLPack's device of `device`: `(device_type, device_id)`.
pub(crate) fn device_of(device: &Device) -> (i32, i32) {
    match device {
        Device::Cpu => (DL_CPU, 0),
        Device::Cuda(cuda) => (DL_CUDA, cuda.ordinal() as i32),
    }
}

/// DLPack's type of `dtype`: `(code, bits)` with kDLInt 0, kDLUInt 1,
/// kDLFloat 2, kDLBfloat 4, kDLBool 6.
fn data_type(dtype: DType) -> DlDataType {
    let (code, bits) = match dtype {
        DType::Bool => (6, 8),
        DType::U8 => (1, 8),
        DType::U16 => (1, 16),
        DType::U32 => (1, 32),
        DType::U64 => (1, 64),
        DType::I8 => (0, 8),
        DType::I16 => (0, 16),
        DType::I32 => (0, 32),
        DType::I64 => (0, 64),
        DType::F16 => (2, 16),
        DType::BF16 => (4, 16),
        DType::F32 => (2, 32),
        DType::F64 => (2, 64),
    };
    DlDataType { code, bits, lanes: 1 }
}

/// Where a capsule points: the memory of a tensor `owner` holds, or a part
/// of it (a row of a loader batch's columns).
pub(crate) struct View<'a> {
    pub address: u64,
    pub shape: &'a [usize],
    pub dtype: DType,
}

/// A `dltensor` capsule over `view`, memory on `device` that `owner` keeps
/// alive (the caller checks that the view lies inside it).
pub(crate) fn capsule_of(py: Python<'_>, owner: Owner, device: &Device, view: &View<'_>) -> PyResult<Py<PyAny>> {
    let (device_type, device_id) = device_of(device);
    let mut managed = Box::new(Managed {
        managed: DlManagedTensor {
            dl_tensor: DlTensor {
                data: view.address as *mut c_void,
                device: DlDevice { device_type, device_id },
                ndim: view.shape.len() as i32,
                dtype: data_type(view.dtype),
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(), // C-contiguous
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_managed),
        },
        shape: view.shape.iter().map(|&d| d as i64).collect(),
        _owner: owner,
    });
    managed.managed.dl_tensor.shape = managed.shape.as_mut_ptr();
    let raw = Box::into_raw(managed);
    // SAFETY: `raw` is a live `Managed` whose first field is the managed tensor.
    unsafe { (*raw).managed.manager_ctx = raw.cast() };
    // SAFETY: the capsule takes `raw` (released by its destructor unless a
    // consumer renames it and takes over the deleter); the name is static.
    let capsule = unsafe { pyo3::ffi::PyCapsule_New(raw.cast(), CAPSULE_NAME.as_ptr(), Some(destroy_capsule)) };
    if capsule.is_null() {
        // SAFETY: the capsule was not made, so `raw` is still ours.
        drop(unsafe { Box::from_raw(raw) });
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference, just checked non-null.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
}

/// The deleter a consumer calls once it no longer needs the memory.
unsafe extern "C" fn delete_managed(managed: *mut DlManagedTensor) {
    if managed.is_null() {
        return;
    }
    // Dropping waits (on the device) for the consumer's stream and frees in
    // stream order; a panic must not cross the C boundary.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `managed` came from `capsule` (Box::into_raw of a
        // `Managed`), and DLPack calls the deleter once.
        drop(unsafe { Box::from_raw((*managed).manager_ctx.cast::<Managed>()) });
    }));
}

/// The capsule's destructor: releases the tensor if no consumer took it.
unsafe extern "C" fn destroy_capsule(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by Python with the capsule; a consumed capsule is
    // renamed `used_dltensor` and its tensor belongs to the consumer.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, USED_CAPSULE_NAME.as_ptr()) == 1 {
            return;
        }
        let pointer = pyo3::ffi::PyCapsule_GetPointer(capsule, CAPSULE_NAME.as_ptr());
        if pointer.is_null() {
            pyo3::ffi::PyErr_Clear();
            return;
        }
        delete_managed(pointer.cast());
    }
}

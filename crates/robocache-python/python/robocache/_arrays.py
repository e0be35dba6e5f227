"""Arrays in and out of the native module, without copies.

In: a NumPy array or torch tensor becomes a descriptor ``(address, shape,
dtype, device)``; it must be C-contiguous (a non-contiguous array is an
error that says how to fix it: robocache never reads past an array's
memory, as a view's strides would require). Out: a native ``Array`` becomes
the caller's kind, a torch tensor (through a DLPack capsule) or a NumPy
array (``__array_interface__``), sharing robocache's memory, which lives
as long as the result does.
"""

from __future__ import annotations

import sys
from typing import Any, Optional, Tuple

import numpy as np

from ._errors import DTypeError, InvalidInputError

_NUMPY_DTYPES = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.uint8): "u8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64",
    np.dtype(np.int8): "i8",
    np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
}


def _torch():
    """torch if the caller has imported it (robocache never imports it first)."""
    return sys.modules.get("torch")


_TORCH_DTYPES: dict = {}


def _torch_dtypes(torch) -> dict:
    """torch's dtypes by robocache's names (built once)."""
    if not _TORCH_DTYPES:
        names = {
            torch.bool: "bool",
            torch.uint8: "u8",
            getattr(torch, "uint16", None): "u16",
            getattr(torch, "uint32", None): "u32",
            getattr(torch, "uint64", None): "u64",
            torch.int8: "i8",
            torch.int16: "i16",
            torch.int32: "i32",
            torch.int64: "i64",
            torch.float16: "f16",
            torch.bfloat16: "bf16",
            torch.float32: "f32",
            torch.float64: "f64",
        }
        names.pop(None, None)
        _TORCH_DTYPES.update(names)
    return _TORCH_DTYPES


_CUDA_NAMES = [f"cuda:{i}" for i in range(64)]

_TENSOR_TYPE = None


def _torch_tensor_type():
    """``torch.Tensor`` once torch is imported (then kept, with the dtype
    names), else None."""
    global _TENSOR_TYPE
    torch = _torch()
    if torch is not None:
        _torch_dtypes(torch)
        _TENSOR_TYPE = torch.Tensor
    return _TENSOR_TYPE


def is_torch(x: Any) -> bool:
    tensor_type = _TENSOR_TYPE or _torch_tensor_type()
    return tensor_type is not None and isinstance(x, tensor_type)


def describe(x: Any, what: str, keep: Optional[list] = None) -> Tuple[int, Tuple[int, ...], str, str]:
    """The descriptor of a contiguous NumPy array or torch tensor. A list or
    scalar becomes a NumPy array first (a copy), appended to ``keep`` so the
    caller holds it for the length of the call: the descriptor is only an
    address. A torch tensor's shape stays its ``torch.Size`` (a tuple)."""
    tensor_type = _TENSOR_TYPE or _torch_tensor_type()
    if tensor_type is not None and isinstance(x, tensor_type):
        # Every training step describes its tensors: the common case (a
        # supported dtype, contiguous, on the CPU or a GPU) is one pass.
        dtype = _TORCH_DTYPES.get(x.dtype)
        if dtype is not None and x.is_contiguous():
            if x.is_cuda:
                index = x.get_device()
                return (x.data_ptr(), x.shape, dtype, _CUDA_NAMES[index] if index < len(_CUDA_NAMES) else f"cuda:{index}")
            if x.is_cpu:
                return (x.data_ptr(), x.shape, dtype, "cpu")
        if dtype is None:
            raise DTypeError(f"{what}: torch dtype {x.dtype} is not supported")
        if not x.is_contiguous():
            raise InvalidInputError(
                f"{what}: the tensor of shape {tuple(x.shape)} and strides {tuple(x.stride())} is not contiguous "
                "(an expanded or sliced view); pass x.contiguous()"
            )
        raise InvalidInputError(f"{what}: tensors on {x.device} are not supported (cpu or cuda)")
    if not isinstance(x, np.ndarray):
        if keep is None:
            raise InvalidInputError(f"{what}: expected a NumPy array or a torch tensor, got {type(x).__name__}")
        x = np.asarray(x)
        keep.append(x)
    dtype = _NUMPY_DTYPES.get(x.dtype)
    if dtype is None:
        raise DTypeError(f"{what}: NumPy dtype {x.dtype} is not supported")
    if not x.flags.c_contiguous:
        raise InvalidInputError(
            f"{what}: the array of shape {x.shape} and strides {x.strides} is not C-contiguous; "
            "pass np.ascontiguousarray(x)"
        )
    if x.dtype.byteorder == ">":
        raise DTypeError(f"{what}: big-endian arrays are not supported")
    return (x.__array_interface__["data"][0], tuple(x.shape), dtype, "cpu")


def current_stream(device: str) -> Optional[int]:
    """The caller's CUDA stream on ``device`` (torch's current stream), or
    None on the CPU."""
    reader = _STREAM_READERS.get(device)
    if reader is None:
        reader = stream_reader(device)
        if _torch() is not None:  # CuPy's callers read the default stream until torch is imported
            _STREAM_READERS[device] = reader
    return reader()


_STREAM_READERS: dict = {}


def _read_current_stream(device: str) -> Optional[int]:
    """:func:`current_stream` without the cache."""
    if not device.startswith("cuda"):
        return None
    torch = _torch()
    if torch is None:
        return 0  # the legacy default stream, as CuPy's default
    return torch.cuda.current_stream(int(device[5:])).cuda_stream


def stream_reader(device: str):
    """A function of no arguments giving the caller's current CUDA stream on
    ``device`` as :func:`current_stream` does (None on the CPU), with the
    device parsed once (calls and the loader read it on every call and
    batch)."""
    if not device.startswith("cuda"):
        return lambda: None
    torch = _torch()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None) if torch is not None else None
    if raw is not None:  # the raw handle without building a Stream object (as Triton reads it)
        index = int(device[5:])
        return lambda: raw(index)
    return lambda: _read_current_stream(device)


def capsule_importer():
    """torch's DLPack import of a capsule (the C function where torch has it:
    ``torch.utils.dlpack.from_dlpack`` checks first for ``__dlpack__``,
    which a capsule lacks), or None without torch."""
    torch = _torch()
    if torch is None:
        return None
    return getattr(torch._C, "_from_dlpack", None) or torch.utils.dlpack.from_dlpack


def output(array, like_torch: bool):
    """A native ``Array`` as a torch tensor (``like_torch``, through a
    DLPack capsule: the call already ordered torch's current stream after
    robocache's work) or a NumPy / CuPy array, sharing its memory."""
    if like_torch:
        return (_IMPORTER or _capsule_importer_cached())(array.to_dlpack())
    if array.device.startswith("cuda"):
        cupy = sys.modules.get("cupy")
        if cupy is None:
            raise InvalidInputError("a CUDA result needs torch or CuPy to hold it")
        return cupy.asarray(array)
    return np.asarray(array)


_IMPORTER = None


def _capsule_importer_cached():
    """:func:`capsule_importer`, looked up once (``output`` runs only once
    torch holds a result, so torch is imported)."""
    global _IMPORTER
    _IMPORTER = capsule_importer()
    return _IMPORTER

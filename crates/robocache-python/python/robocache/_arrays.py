"""Arrays in and out of the native module, without copies.

In: a NumPy array or torch tensor becomes a descriptor ``(address, shape,
dtype, device)``; it must be C-contiguous (a non-contiguous array is an
error that says how to fix it: robocache never reads past an array's
memory, as a view's strides would require). Out: a native ``Array`` becomes
the caller's kind, a torch tensor (``torch.as_tensor`` over
``__cuda_array_interface__`` or ``torch.from_numpy``) or a NumPy array,
sharing robocache's memory, which lives as long as the result does.
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
_TO_NUMPY = {name: dtype for dtype, name in _NUMPY_DTYPES.items()}
_TO_NUMPY["bf16"] = np.dtype(np.int16)  # viewed as torch.bfloat16 by torch callers


def _torch():
    """torch if the caller has imported it (robocache never imports it first)."""
    return sys.modules.get("torch")


def _torch_dtypes(torch) -> dict:
    return {
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


def is_torch(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def describe(x: Any, what: str, keep: Optional[list] = None) -> Tuple[int, Tuple[int, ...], str, str]:
    """The descriptor of a contiguous NumPy array or torch tensor. A list or
    scalar becomes a NumPy array first (a copy), appended to ``keep`` so the
    caller holds it for the length of the call: the descriptor is only an
    address."""
    torch = _torch()
    if torch is not None and isinstance(x, torch.Tensor):
        dtype = _torch_dtypes(torch).get(x.dtype)
        if dtype is None:
            raise DTypeError(f"{what}: torch dtype {x.dtype} is not supported")
        if not x.is_contiguous():
            raise InvalidInputError(
                f"{what}: the tensor of shape {tuple(x.shape)} and strides {tuple(x.stride())} is not contiguous "
                "(an expanded or sliced view); pass x.contiguous()"
            )
        if x.device.type == "cuda":
            device = f"cuda:{x.device.index if x.device.index is not None else torch.cuda.current_device()}"
        elif x.device.type == "cpu":
            device = "cpu"
        else:
            raise InvalidInputError(f"{what}: tensors on {x.device} are not supported (cpu or cuda)")
        return (x.data_ptr(), tuple(x.shape), dtype, device)
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
    if not device.startswith("cuda"):
        return None
    torch = _torch()
    if torch is None:
        return 0  # the legacy default stream, as CuPy's default
    return torch.cuda.current_stream(int(device.split(":")[1])).cuda_stream


def output(array, like_torch: bool):
    """A native ``Array`` as a torch tensor (``like_torch``) or a NumPy array, sharing its memory."""
    dtype = array.dtype
    if like_torch:
        torch = _torch()
        if array.device.startswith("cuda"):
            tensor = torch.as_tensor(array, device=array.device)
        else:
            tensor = torch.from_numpy(np.asarray(array))
        if dtype == "bf16":
            tensor = tensor.view(torch.bfloat16)
        return tensor
    if array.device.startswith("cuda"):
        cupy = sys.modules.get("cupy")
        if cupy is None:
            raise InvalidInputError("a CUDA result needs torch or CuPy to hold it")
        return cupy.asarray(array)
    return np.asarray(array)

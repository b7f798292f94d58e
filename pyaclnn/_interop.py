"""torch_npu tensors as DeviceArrays, without importing torch.

:func:`from_torch` reads the tensor interface every torch tensor has
(``untyped_storage().data_ptr()`` or ``data_ptr()``, ``storage_offset()``,
``shape``, ``stride()``, ``dtype``, ``device``) and returns a
:meth:`DeviceArray.from_ptr` view that keeps the tensor alive. Strides and the
storage offset are in elements in torch as in ``aclCreateTensor``, and the
storage base is the aligned address CANN wants, as torch_npu's op-plugin
passes it. Untested on real torch_npu (no NPU here): tested with objects of
that interface over memory from ``acl.rt.malloc``.
"""

from __future__ import annotations

from typing import Any

from ._array import DeviceArray

#: torch dtype names (``str(torch.float32)`` is "torch.float32") that ACL has.
_DTYPES = {
    "float32": "float32",
    "float": "float32",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "float64": "float64",
    "double": "float64",
    "int32": "int32",
    "int": "int32",
    "int64": "int64",
    "long": "int64",
    "int16": "int16",
    "short": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "bool": "bool",
}


def from_torch(tensor: Any, *, backend: str | None = None) -> DeviceArray:
    """A DeviceArray over the memory of an NPU tensor (torch_npu), keeping the tensor alive.

    Parameters
    ----------
    tensor : torch.Tensor on an NPU device
        Or any object with torch's tensor interface (``data_ptr()``, ``shape``,
        ``stride()``, ``dtype``, ``device`` with ``type`` "npu" and ``index``).
    backend : {"numpy", "npu"}, optional
        The active backend by default.

    Raises
    ------
    TypeError
        For an object without that interface, a CPU tensor (pass ``tensor.numpy()``)
        or a dtype ACL has no name for.
    """
    for attribute in ("data_ptr", "shape", "stride", "dtype"):
        if not hasattr(tensor, attribute):
            raise TypeError(f"tensor must be a torch tensor on an NPU device, got {type(tensor).__name__}")
    device = getattr(tensor, "device", None)
    kind = getattr(device, "type", "npu")
    if kind != "npu":
        raise TypeError(
            f"tensor is on device type {kind!r}, not an NPU: pass tensor.numpy() for a CPU tensor"
        )
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise TypeError(f"tensor has dtype {tensor.dtype}, which has no aclDataType")
    base, offset = _storage(tensor)
    return DeviceArray.from_ptr(
        base,
        tuple(int(d) for d in tensor.shape),
        _DTYPES[name],
        strides=tuple(int(s) for s in tensor.stride()),
        offset=offset,
        owner=tensor,
        device=getattr(device, "index", None),
        backend=backend,
    )


def _storage(tensor: Any) -> tuple[int, int]:
    """The storage base address and the tensor's offset in it (elements)."""
    storage = getattr(tensor, "untyped_storage", None)
    offset = getattr(tensor, "storage_offset", None)
    if callable(storage) and callable(offset):
        return int(storage().data_ptr()), int(offset())
    return int(tensor.data_ptr()), 0

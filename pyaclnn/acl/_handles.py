"""Handles as the emulations name them in their messages and device records."""

from __future__ import annotations

from typing import Any


def label(handle: Any, backend: str) -> str:
    """A stream, event or graph handle of ``backend`` as the emulations name it: on the numpy
    backend a stream's worker label, else hex of ``id()``; on npu the handle's address as
    ``"0x%lx"`` (``"0x0"`` for NULL, a device's default stream), as the C emulator prints it."""
    if backend == "numpy":
        worker = getattr(handle, "worker", None)
        return str(worker.label) if worker is not None else f"{id(handle):#x}"
    from ..backends.npu._ffi import ffi  # only cffi reads a handle's address

    return f"{int(ffi.cast('uintptr_t', handle)):#x}"

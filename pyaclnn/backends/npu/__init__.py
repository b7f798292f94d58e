"""The npu backend: CANN's shared libraries through cffi (ABI mode).

Importing this package opens nothing and parses no declarations; the cffi
declarations are read on first use of :class:`NpuBackend`, :func:`probe` or
:func:`load`, and the libraries are opened once per process by :func:`load`.

Public names
------------
NpuBackend
    The backend (``name = "npu"``); constructing it loads CANN.
probe() -> ProbeResult
    Never raises: are the libraries loadable, how many devices, which SoC.
discover(environ=None) -> Discovery
    The library search alone (no loading).
LibraryNotFoundError
    Raised (an ImportError) when no usable CANN is found or it fails to open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._discovery import Candidate, Discovery, LibraryNotFoundError, discover

if TYPE_CHECKING:
    from ._backend import NpuBackend
    from ._loading import Loaded, load
    from ._probe import ProbeResult, probe

__all__ = [
    "Candidate",
    "Discovery",
    "LibraryNotFoundError",
    "Loaded",
    "NpuBackend",
    "ProbeResult",
    "discover",
    "load",
    "probe",
]

#: name -> the module (loading, the C API wrappers, the probe) that defines it, imported on first use.
_LAZY = {
    "Loaded": "_loading",
    "load": "_loading",
    "NpuBackend": "_backend",
    "ProbeResult": "_probe",
    "probe": "_probe",
}


def __getattr__(name: str) -> Any:
    # The cffi declarations (tens of ms to parse) are only read when needed.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

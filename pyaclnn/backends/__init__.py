"""Backend selection: which implementation of the C API the library calls.

``PYACLNN_BACKEND`` (auto | npu | numpy) picks the active backend on first use;
:func:`set_backend` changes it. ``auto`` picks npu only when CANN's libraries
load and report at least one device, and records why it did not otherwise.
"""

from __future__ import annotations

import os
import threading

from ._interface import Backend

BACKEND_NAMES = ("numpy", "npu")
_lock = threading.RLock()
_instances: dict[str, Backend] = {}
_active: str | None = None
_reason = ""


def _create(name: str) -> Backend:
    if name == "numpy":
        from .numpy import NumpyBackend

        return NumpyBackend()
    from .npu import NpuBackend

    return NpuBackend()


def get(name: str | None = None) -> Backend:
    """The backend object called ``name`` (None: the active one), created on first use.

    Raises
    ------
    ValueError
        For a name other than "numpy", "npu" or None.
    pyaclnn.backends.npu.LibraryNotFoundError
        When "npu" is asked for and CANN's libraries cannot be loaded.
    """
    if name is None:
        name = _active or _select()
    backend = _instances.get(name)
    if backend is not None:
        return backend
    if name not in BACKEND_NAMES:
        raise ValueError(f"backend must be one of {', '.join(BACKEND_NAMES)} or None, got {name!r}")
    with _lock:
        if name not in _instances:
            _instances[name] = _create(name)
        return _instances[name]


def _select() -> str:
    global _active, _reason
    with _lock:
        if _active is not None:
            return _active
        wanted = os.environ.get("PYACLNN_BACKEND", "auto").strip().lower() or "auto"
        if wanted in BACKEND_NAMES:
            _active, _reason = wanted, f"PYACLNN_BACKEND={wanted}"
        elif wanted == "auto":
            _active, _reason = _auto()
        else:
            raise ValueError(f"PYACLNN_BACKEND must be auto, npu or numpy, got {wanted!r}")
        return _active


def _auto() -> tuple[str, str]:
    from .npu import probe

    result = probe()
    if result.ok:
        return "npu", f"auto: CANN loaded from {result.home}, {result.device_count} device(s)"
    return "numpy", f"auto: npu not usable: {result.reason}"


def active_name() -> str:
    """Name of the active backend ("numpy" or "npu"), selecting it if needed."""
    return _active or _select()


def set_active(name: str) -> None:
    """Make ``name`` the active backend; "auto" selects again as at start-up."""
    global _active, _reason
    if name == "auto":
        with _lock:
            _active, _reason = _auto()
        return
    get(name)  # fail now, not at the next call, if it cannot load
    with _lock:
        _active, _reason = name, f"set_backend({name!r})"


def selection_reason() -> str:
    """Why the active backend was chosen."""
    active_name()
    return _reason


__all__ = ["Backend", "BACKEND_NAMES", "get", "active_name", "set_active", "selection_reason"]

"""Backend selection: which implementation of the C API the library calls.

``PYACLNN_BACKEND`` (auto | npu | numpy) picks the active backend on first use;
:func:`set_backend` changes it. ``auto`` picks npu only when CANN's libraries
load and report at least one device, and records why it did not otherwise.
"""

from __future__ import annotations

import os
import threading

from .. import _env
from ._interface import Backend

BACKEND_NAMES = ("numpy", "npu")
_lock = threading.RLock()
_instances: dict[str, Backend] = {}
_active: str | None = None
_reason = ""
# Backends whose runtime this process started (aclInit). A finalize does not take a name
# out: the runtime's threads (the emulations' stream workers, CANN's own) outlive it.
_started: set[str] = set()


def mark_started(name: str) -> None:
    """Record that ``name``'s runtime was started (aclInit succeeded): forked children refuse it."""
    _started.add(name)


class ForkedChildError(RuntimeError):
    """pyaclnn was called in a process forked after its runtime had started in the parent."""


class _Forked:
    """Stands for a backend in a child forked after that backend's runtime started.

    The parent's streams, worker threads, device memory and locks did not come along
    (a lock held at the fork stays held), so every call is refused at once, as
    torch_npu and CUDA refuse a forked child, instead of hanging or reading the
    parent's memory.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attr: str) -> object:
        raise ForkedChildError(
            f"pyaclnn cannot use its {self.name!r} backend in a process forked after the runtime "
            f"had started in the parent ({attr} called): the parent's streams, threads and device "
            "memory are not in the child. Start the worker processes with the 'spawn' start method "
            "(multiprocessing.get_context('spawn'), or torch.multiprocessing.set_start_method('spawn'))"
        )


def _refuse_in_forked_child() -> None:
    for name in _started:
        _instances[name] = _Forked(name)  # type: ignore[assignment]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_refuse_in_forked_child)


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
        names = {"auto": "auto", **{name: name for name in sorted(BACKEND_NAMES)}}
        wanted = _env.choice("PYACLNN_BACKEND", names, "auto", strict=True)  # a wrong guess is worse
        if wanted == "auto":
            _active, _reason = _auto()
        else:
            _active, _reason = wanted, f"PYACLNN_BACKEND={wanted}"
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


__all__ = [
    "Backend",
    "BACKEND_NAMES",
    "ForkedChildError",
    "get",
    "active_name",
    "set_active",
    "selection_reason",
    "mark_started",
]

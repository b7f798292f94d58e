"""The captures in progress, and the checks the runtime makes against them.

A low-level module (it imports nothing of the runtime) so that streams, arrays
and launches can ask "is a capture in progress, and does it forbid this?"
without depending on :mod:`pyaclnn._graph`, which builds on all of them. A
capture registers itself in :data:`active` while it runs; each entry has
``backend``, ``device``, ``mode`` (an ``ACL_MODEL_RI_CAPTURE_MODE_*``),
``thread`` (the capturing thread's id), ``stream`` (the StreamState it
captures) and ``refuse(what, why)``, which abandons the capture and raises
:class:`GraphCaptureError`.

The rule for calls that wait for the device or copy from pageable host memory
(``aclrtMemcpy``, a NumPy array copied in or read out) is CANN's
(Context::IsCaptureModeSupport, emulated in pyaclnn/backends/numpy/_capture.py):
a GLOBAL capture forbids them to every thread, a THREAD_LOCAL one to its own
thread, a RELAXED one to none. pyaclnn refuses them before CANN would, with a
message naming the call; a copy onto the capturing stream itself is refused in
every mode (CANN cannot record a pageable copy and invalidates the capture).
"""

from __future__ import annotations

import threading
from typing import Any, NoReturn

from ._decl import constant

GLOBAL = constant("ACL_MODEL_RI_CAPTURE_MODE_GLOBAL")
THREAD_LOCAL = constant("ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL")
RELAXED = constant("ACL_MODEL_RI_CAPTURE_MODE_RELAXED")

#: Why a copy from a NumPy array cannot be captured (the message of the refusals).
PAGEABLE = (
    "a NumPy array is pageable host memory, whose copy CANN cannot record in a graph (and a GLOBAL "
    "capture forbids it in every thread); copy new data into the captured DeviceArrays with "
    "DeviceArray.copy_ before a replay, outside the capture"
)

#: Captures in progress, in every thread (read without the lock on hot paths: empty is the norm).
active: list[Any] = []
lock = threading.Lock()


class GraphCaptureError(RuntimeError):
    """A call that cannot be captured was made while a :class:`pyaclnn.Graph` captured.

    The message names the call and the rule. When the call was made on the
    capturing stream or in the capturing thread, the capture was abandoned
    first (ended, its graph destroyed, its memory and executors given back):
    the Graph can capture again.
    """


def register(capture: Any) -> None:
    with lock:
        active.append(capture)


def unregister(capture: Any) -> None:
    with lock:
        if capture in active:
            active.remove(capture)


def _forbidding(backend: str, device: int) -> list[Any]:
    """The captures of ``backend``'s ``device`` that forbid the calling thread a synchronous call."""
    me = threading.get_ident()
    with lock:
        return [
            c
            for c in active
            if c.backend == backend
            and c.device == device
            and (c.mode == GLOBAL or (c.mode == THREAD_LOCAL and c.thread == me))
        ]


def refuse(stream: Any, backend: str, device: int, what: str, why: str) -> None:
    """Raise GraphCaptureError for ``what`` if a capture forbids it now; otherwise return.

    ``stream`` is the StreamState the call queues on or waits for (None: none):
    if it captures, that capture is refused and abandoned. Otherwise a capture
    whose mode forbids the call (see the module) refuses it: abandoned if it is
    the calling thread's, left running (as CANN leaves it) if another thread's.
    """
    capture = getattr(stream, "capture", None) if stream is not None else None
    if capture is not None:
        capture.refuse(what, why)
    forbidding = _forbidding(backend, device)
    if not forbidding:
        return
    me = threading.get_ident()
    own = [c for c in forbidding if c.thread == me]
    if own:
        own[0].refuse(what, why)
    other = forbidding[0]
    raise GraphCaptureError(
        f"{what} cannot run while {other.stream.name} captures a graph in another thread in GLOBAL "
        f"mode: {why}. Call it before or after the capture, or capture with "
        "capture_error_mode='thread_local' or 'relaxed'"
    )


def fail(what: str, why: str, abandoned: str) -> NoReturn:
    """Raise the GraphCaptureError of a refused ``what`` (``abandoned``: what happened to the capture)."""
    raise GraphCaptureError(f"{what} cannot be captured: {why}. {abandoned}")

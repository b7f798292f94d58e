"""Low-level API of stream capture (``aclmdlRI*``): record a stream's work once, replay it.

One function per C function, named after it without the ``aclmdlRI`` prefix, as
:mod:`pyaclnn.acl.rt` does for ``aclrt*``. Between :func:`capture_begin` and
:func:`capture_end` the work queued on the stream (operator launches, async copies
and memsets, event records and waits) is recorded into a graph instead of run;
:func:`execute_async` queues the recorded work on a stream, in order, as often as
wanted; :func:`destroy` releases the graph. The memory the recorded work uses
must stay allocated until then.
"""

from __future__ import annotations

from typing import Any

from ..constants import ACL_MODEL_RI_CAPTURE_MODE_GLOBAL
from ._call import call as _call

__all__ = [
    "capture_begin",
    "capture_get_info",
    "capture_end",
    "capture_thread_exchange_mode",
    "execute_async",
    "destroy",
]


def capture_begin(
    stream: Any, mode: int = ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, *, backend: str | None = None
) -> None:
    """``aclmdlRICaptureBegin``: record the work queued on ``stream`` from now on instead of running it.

    ``stream`` must be a stream from :func:`pyaclnn.acl.rt.create_stream` (the
    default stream cannot be captured). ``mode`` (``ACL_MODEL_RI_CAPTURE_MODE_*``)
    says which threads may still call aclrtMemcpy / aclrtMemset meanwhile.
    """
    _call(backend, "aclmdlRICaptureBegin", stream, mode)


def capture_get_info(stream: Any, *, backend: str | None = None) -> tuple[int, Any]:
    """``aclmdlRICaptureGetInfo``: ``(status, graph)`` of ``stream``.

    ``status`` is ``ACL_MODEL_RI_CAPTURE_STATUS_NONE`` (0), ``..._ACTIVE`` (1) or
    ``..._INVALIDATED`` (2); ``graph`` is the graph being recorded, None when the
    stream is not capturing.
    """
    status, graph = _call(backend, "aclmdlRICaptureGetInfo", stream)
    return int(status), graph


def capture_end(stream: Any, *, backend: str | None = None) -> Any:
    """``aclmdlRICaptureEnd``: stop recording ``stream``; returns the graph (release it with :func:`destroy`).

    Raises ``AclError`` ``ACL_ERROR_RT_STREAM_NOT_CAPTURED`` when ``stream`` is not
    capturing and ``ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED`` when the capture
    failed (the recorded work is then dropped and the stream no longer captures).
    """
    return _call(backend, "aclmdlRICaptureEnd", stream)


def capture_thread_exchange_mode(mode: int, *, backend: str | None = None) -> int:
    """``aclmdlRICaptureThreadExchangeMode``: set the calling thread's capture mode; returns the old one."""
    return int(_call(backend, "aclmdlRICaptureThreadExchangeMode", mode))


def execute_async(graph: Any, stream: Any, *, backend: str | None = None) -> None:
    """``aclmdlRIExecuteAsync``: queue the work recorded in ``graph`` on ``stream``, in order."""
    _call(backend, "aclmdlRIExecuteAsync", graph, stream)


def destroy(graph: Any, *, backend: str | None = None) -> None:
    """``aclmdlRIDestroy``: release ``graph``."""
    _call(backend, "aclmdlRIDestroy", graph)

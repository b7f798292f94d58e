"""Low-level API of the ACL runtime (``aclrt*``): devices, streams, memory, system options.

One function per C function, named after it without the ``aclrt`` prefix.
Device pointers are ints; host buffers are ints from :func:`malloc_host` or
objects with the buffer protocol (NumPy arrays; a destination must be writable).
"""

from __future__ import annotations

from typing import Any

from .. import backends as _backends
from .._status import check as _check
from ..constants import ACL_HBM_MEM, ACL_MEM_MALLOC_HUGE_FIRST

__all__ = [
    "set_device",
    "reset_device",
    "get_device",
    "get_device_count",
    "synchronize_device",
    "create_stream",
    "destroy_stream",
    "synchronize_stream",
    "create_event",
    "create_event_with_flag",
    "destroy_event",
    "record_event",
    "query_event_status",
    "synchronize_event",
    "event_elapsed_time",
    "stream_wait_event",
    "malloc",
    "free",
    "malloc_host",
    "free_host",
    "memcpy",
    "memcpy_async",
    "memset",
    "memset_async",
    "get_mem_info",
    "ctx_set_sys_param_opt",
    "ctx_get_sys_param_opt",
    "set_sys_param_opt",
    "get_sys_param_opt",
    "get_soc_name",
]


def set_device(device_id: int, *, backend: str | None = None) -> None:
    """``aclrtSetDevice``."""
    b = _backends.get(backend)
    _check(b, b.aclrtSetDevice(device_id), "aclrtSetDevice")


def reset_device(device_id: int, *, backend: str | None = None) -> None:
    """``aclrtResetDevice``."""
    b = _backends.get(backend)
    _check(b, b.aclrtResetDevice(device_id), "aclrtResetDevice")


def get_device(*, backend: str | None = None) -> int:
    """``aclrtGetDevice``: the calling thread's device."""
    b = _backends.get(backend)
    status, device = b.aclrtGetDevice()
    _check(b, status, "aclrtGetDevice")
    return device


def get_device_count(*, backend: str | None = None) -> int:
    """``aclrtGetDeviceCount``."""
    b = _backends.get(backend)
    status, count = b.aclrtGetDeviceCount()
    _check(b, status, "aclrtGetDeviceCount")
    return count


def synchronize_device(*, backend: str | None = None) -> None:
    """``aclrtSynchronizeDevice``."""
    b = _backends.get(backend)
    _check(b, b.aclrtSynchronizeDevice(), "aclrtSynchronizeDevice")


def create_stream(*, backend: str | None = None) -> Any:
    """``aclrtCreateStream``: a new stream handle (destroy it with :func:`destroy_stream`)."""
    b = _backends.get(backend)
    status, stream = b.aclrtCreateStream()
    _check(b, status, "aclrtCreateStream")
    return stream


def destroy_stream(stream: Any, *, backend: str | None = None) -> None:
    """``aclrtDestroyStream``."""
    b = _backends.get(backend)
    _check(b, b.aclrtDestroyStream(stream), "aclrtDestroyStream")


def synchronize_stream(stream: Any, *, backend: str | None = None) -> None:
    """``aclrtSynchronizeStream``: wait until the stream's work is done."""
    b = _backends.get(backend)
    status = b.aclrtSynchronizeStream(stream)
    if status:  # tested here: this runs after every launch
        _check(b, status, "aclrtSynchronizeStream")


def create_event(*, backend: str | None = None) -> Any:
    """``aclrtCreateEvent``: an event for stream waits and timing (destroy it with :func:`destroy_event`)."""
    b = _backends.get(backend)
    status, event = b.aclrtCreateEvent()
    _check(b, status, "aclrtCreateEvent")
    return event


def create_event_with_flag(flag: int, *, backend: str | None = None) -> Any:
    """``aclrtCreateEventWithFlag``: ``flag`` is an OR of ``ACL_EVENT_*`` values.

    Without ``ACL_EVENT_SYNC`` the event cannot be waited on by :func:`stream_wait_event`;
    without ``ACL_EVENT_TIME_LINE`` it has no timestamps for :func:`event_elapsed_time`.
    """
    b = _backends.get(backend)
    status, event = b.aclrtCreateEventWithFlag(flag)
    _check(b, status, "aclrtCreateEventWithFlag")
    return event


def destroy_event(event: Any, *, backend: str | None = None) -> None:
    """``aclrtDestroyEvent`` (allowed while the event is pending: CANN frees it once complete)."""
    b = _backends.get(backend)
    _check(b, b.aclrtDestroyEvent(event), "aclrtDestroyEvent")


def record_event(event: Any, stream: Any, *, backend: str | None = None) -> None:
    """``aclrtRecordEvent``: the event now stands for the work queued on ``stream`` so far."""
    b = _backends.get(backend)
    _check(b, b.aclrtRecordEvent(event, stream), "aclrtRecordEvent")


def query_event_status(event: Any, *, backend: str | None = None) -> int:
    """``aclrtQueryEventStatus``: ``ACL_EVENT_RECORDED_STATUS_COMPLETE`` (1) or ``..._NOT_READY`` (0)."""
    b = _backends.get(backend)
    status, recorded = b.aclrtQueryEventStatus(event)
    _check(b, status, "aclrtQueryEventStatus")
    return recorded


def synchronize_event(event: Any, *, backend: str | None = None) -> None:
    """``aclrtSynchronizeEvent``: wait until the work the event stands for is done."""
    b = _backends.get(backend)
    _check(b, b.aclrtSynchronizeEvent(event), "aclrtSynchronizeEvent")


def event_elapsed_time(start: Any, end: Any, *, backend: str | None = None) -> float:
    """``aclrtEventElapsedTime``: milliseconds from ``start`` to ``end`` (both recorded and complete)."""
    b = _backends.get(backend)
    status, ms = b.aclrtEventElapsedTime(start, end)
    _check(b, status, "aclrtEventElapsedTime")
    return ms


def stream_wait_event(stream: Any, event: Any, *, backend: str | None = None) -> None:
    """``aclrtStreamWaitEvent``: later work on ``stream`` waits for the work ``event`` stands for."""
    b = _backends.get(backend)
    _check(b, b.aclrtStreamWaitEvent(stream, event), "aclrtStreamWaitEvent")


def malloc(size: int, policy: int = ACL_MEM_MALLOC_HUGE_FIRST, *, backend: str | None = None) -> int:
    """``aclrtMalloc``: ``size`` bytes of device memory, 32-byte aligned.

    Raises
    ------
    AclOutOfMemoryError
        When the memory is not there (also a MemoryError).
    """
    b = _backends.get(backend)
    status, ptr = b.aclrtMalloc(size, policy)
    _check(b, status, "aclrtMalloc")
    return ptr


def free(ptr: int, *, backend: str | None = None) -> None:
    """``aclrtFree``."""
    b = _backends.get(backend)
    _check(b, b.aclrtFree(ptr), "aclrtFree")


def malloc_host(size: int, *, backend: str | None = None) -> int:
    """``aclrtMallocHost``: page-locked host memory."""
    b = _backends.get(backend)
    status, ptr = b.aclrtMallocHost(size)
    _check(b, status, "aclrtMallocHost")
    return ptr


def free_host(ptr: int, *, backend: str | None = None) -> None:
    """``aclrtFreeHost``."""
    b = _backends.get(backend)
    _check(b, b.aclrtFreeHost(ptr), "aclrtFreeHost")


def memcpy(dst: Any, dest_max: int, src: Any, count: int, kind: int, *, backend: str | None = None) -> None:
    """``aclrtMemcpy``: copy ``count`` bytes (at most ``dest_max``) in direction ``kind``."""
    b = _backends.get(backend)
    _check(b, b.aclrtMemcpy(dst, dest_max, src, count, kind), "aclrtMemcpy")


def memcpy_async(
    dst: Any, dest_max: int, src: Any, count: int, kind: int, stream: Any, *, backend: str | None = None
) -> None:
    """``aclrtMemcpyAsync``: host buffers must stay alive until the stream is synchronized."""
    b = _backends.get(backend)
    _check(b, b.aclrtMemcpyAsync(dst, dest_max, src, count, kind, stream), "aclrtMemcpyAsync")


def memset(ptr: int, max_count: int, value: int, count: int, *, backend: str | None = None) -> None:
    """``aclrtMemset``: set ``count`` bytes to ``value``."""
    b = _backends.get(backend)
    _check(b, b.aclrtMemset(ptr, max_count, value, count), "aclrtMemset")


def memset_async(
    ptr: int, max_count: int, value: int, count: int, stream: Any, *, backend: str | None = None
) -> None:
    """``aclrtMemsetAsync``."""
    b = _backends.get(backend)
    _check(b, b.aclrtMemsetAsync(ptr, max_count, value, count, stream), "aclrtMemsetAsync")


def get_mem_info(attr: int = ACL_HBM_MEM, *, backend: str | None = None) -> tuple[int, int]:
    """``aclrtGetMemInfo``: ``(free, total)`` bytes."""
    b = _backends.get(backend)
    status, free_bytes, total = b.aclrtGetMemInfo(attr)
    _check(b, status, "aclrtGetMemInfo")
    return free_bytes, total


def ctx_set_sys_param_opt(opt: int, value: int, *, backend: str | None = None) -> None:
    """``aclrtCtxSetSysParamOpt`` (e.g. ACL_OPT_DETERMINISTIC) for the current context."""
    b = _backends.get(backend)
    _check(b, b.aclrtCtxSetSysParamOpt(opt, value), "aclrtCtxSetSysParamOpt")


def ctx_get_sys_param_opt(opt: int, *, backend: str | None = None) -> int:
    """``aclrtCtxGetSysParamOpt``."""
    b = _backends.get(backend)
    status, value = b.aclrtCtxGetSysParamOpt(opt)
    _check(b, status, "aclrtCtxGetSysParamOpt")
    return value


def set_sys_param_opt(opt: int, value: int, *, backend: str | None = None) -> None:
    """``aclrtSetSysParamOpt`` for the process."""
    b = _backends.get(backend)
    _check(b, b.aclrtSetSysParamOpt(opt, value), "aclrtSetSysParamOpt")


def get_sys_param_opt(opt: int, *, backend: str | None = None) -> int:
    """``aclrtGetSysParamOpt``."""
    b = _backends.get(backend)
    status, value = b.aclrtGetSysParamOpt(opt)
    _check(b, status, "aclrtGetSysParamOpt")
    return value


def get_soc_name(*, backend: str | None = None) -> str | None:
    """``aclrtGetSocName``: e.g. "Ascend910B3", None when unknown."""
    return _backends.get(backend).aclrtGetSocName()

"""Low-level API of the ACL runtime (``aclrt*``): devices, streams, memory, system options.

One function per C function, named after it without the ``aclrt`` prefix.
Device pointers are ints; host buffers are ints from :func:`malloc_host` or
objects with the buffer protocol (NumPy arrays; a destination must be writable).
"""

from __future__ import annotations

from typing import Any

from .. import backends as _backends
from ..constants import ACL_HBM_MEM, ACL_HOST_REGISTER_MAPPED, ACL_MEM_MALLOC_HUGE_FIRST
from ._call import call as _call

__all__ = [
    "set_device",
    "reset_device",
    "get_device",
    "get_device_count",
    "synchronize_device",
    "create_stream",
    "create_stream_with_config",
    "set_stream_failure_mode",
    "destroy_stream",
    "synchronize_stream",
    "stream_query",
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
    "host_register",
    "host_unregister",
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
    _call(backend, "aclrtSetDevice", device_id)


def reset_device(device_id: int, *, backend: str | None = None) -> None:
    """``aclrtResetDevice``."""
    _call(backend, "aclrtResetDevice", device_id)


def get_device(*, backend: str | None = None) -> int:
    """``aclrtGetDevice``: the calling thread's device."""
    return int(_call(backend, "aclrtGetDevice"))


def get_device_count(*, backend: str | None = None) -> int:
    """``aclrtGetDeviceCount``."""
    return int(_call(backend, "aclrtGetDeviceCount"))


def synchronize_device(*, backend: str | None = None) -> None:
    """``aclrtSynchronizeDevice``."""
    _call(backend, "aclrtSynchronizeDevice")


def create_stream(*, backend: str | None = None) -> Any:
    """``aclrtCreateStream``: a new stream handle (destroy it with :func:`destroy_stream`)."""
    return _call(backend, "aclrtCreateStream")


def create_stream_with_config(priority: int, flag: int = 0, *, backend: str | None = None) -> Any:
    """``aclrtCreateStreamWithConfig``: a new stream of ``priority`` (0 to 7); ``flag`` an OR of
    ``ACL_STREAM_FAST_LAUNCH`` and ``ACL_STREAM_FAST_SYNC`` (0: neither)."""
    return _call(backend, "aclrtCreateStreamWithConfig", priority, flag)


def set_stream_failure_mode(stream: Any, mode: int, *, backend: str | None = None) -> None:
    """``aclrtSetStreamFailureMode``: ``ACL_STOP_ON_FAILURE`` (the tasks queued after a failed one
    do not run) or ``ACL_CONTINUE_ON_FAILURE`` (CANN's default)."""
    _call(backend, "aclrtSetStreamFailureMode", stream, mode)


def destroy_stream(stream: Any, *, backend: str | None = None) -> None:
    """``aclrtDestroyStream``."""
    _call(backend, "aclrtDestroyStream", stream)


def synchronize_stream(stream: Any, *, backend: str | None = None) -> None:
    """``aclrtSynchronizeStream``: wait until the stream's work is done."""
    _call(backend, "aclrtSynchronizeStream", stream)


def stream_query(stream: Any, *, backend: str | None = None) -> int:
    """``aclrtStreamQuery``: ``ACL_STREAM_STATUS_COMPLETE`` (0) when every task queued on the
    stream has finished, else ``ACL_STREAM_STATUS_NOT_READY`` (1); the host does not wait."""
    return int(_call(backend, "aclrtStreamQuery", stream))


def create_event(*, backend: str | None = None) -> Any:
    """``aclrtCreateEvent``: an event for stream waits and timing (destroy it with :func:`destroy_event`)."""
    return _call(backend, "aclrtCreateEvent")


def create_event_with_flag(flag: int, *, backend: str | None = None) -> Any:
    """``aclrtCreateEventWithFlag``: ``flag`` is an OR of ``ACL_EVENT_*`` values.

    Without ``ACL_EVENT_SYNC`` the event cannot be waited on by :func:`stream_wait_event`;
    without ``ACL_EVENT_TIME_LINE`` it has no timestamps for :func:`event_elapsed_time`.
    """
    return _call(backend, "aclrtCreateEventWithFlag", flag)


def destroy_event(event: Any, *, backend: str | None = None) -> None:
    """``aclrtDestroyEvent`` (allowed while the event is pending: CANN frees it once complete)."""
    _call(backend, "aclrtDestroyEvent", event)


def record_event(event: Any, stream: Any, *, backend: str | None = None) -> None:
    """``aclrtRecordEvent``: the event now stands for the work queued on ``stream`` so far."""
    _call(backend, "aclrtRecordEvent", event, stream)


def query_event_status(event: Any, *, backend: str | None = None) -> int:
    """``aclrtQueryEventStatus``: ``ACL_EVENT_RECORDED_STATUS_COMPLETE`` (1) or ``..._NOT_READY`` (0)."""
    return int(_call(backend, "aclrtQueryEventStatus", event))


def synchronize_event(event: Any, *, backend: str | None = None) -> None:
    """``aclrtSynchronizeEvent``: wait until the work the event stands for is done."""
    _call(backend, "aclrtSynchronizeEvent", event)


def event_elapsed_time(start: Any, end: Any, *, backend: str | None = None) -> float:
    """``aclrtEventElapsedTime``: milliseconds from ``start`` to ``end`` (both recorded and complete)."""
    return float(_call(backend, "aclrtEventElapsedTime", start, end))


def stream_wait_event(stream: Any, event: Any, *, backend: str | None = None) -> None:
    """``aclrtStreamWaitEvent``: later work on ``stream`` waits for the work ``event`` stands for."""
    _call(backend, "aclrtStreamWaitEvent", stream, event)


def malloc(size: int, policy: int = ACL_MEM_MALLOC_HUGE_FIRST, *, backend: str | None = None) -> int:
    """``aclrtMalloc``: ``size`` bytes of device memory, 32-byte aligned.

    Raises
    ------
    AclOutOfMemoryError
        When the memory is not there (also a MemoryError).
    """
    return int(_call(backend, "aclrtMalloc", size, policy))


def free(ptr: int, *, backend: str | None = None) -> None:
    """``aclrtFree``."""
    _call(backend, "aclrtFree", ptr)


def malloc_host(size: int, *, backend: str | None = None) -> int:
    """``aclrtMallocHost``: page-locked host memory."""
    return int(_call(backend, "aclrtMallocHost", size))


def free_host(ptr: int, *, backend: str | None = None) -> None:
    """``aclrtFreeHost``."""
    _call(backend, "aclrtFreeHost", ptr)


def host_register(
    ptr: Any, size: int, type: int = ACL_HOST_REGISTER_MAPPED, *, backend: str | None = None
) -> int:
    """``aclrtHostRegister``: map ``size`` bytes of host memory at ``ptr`` for the current device.

    ``ptr`` must be 4 KiB aligned (CANN's rule); on the numpy backend it is a
    buffer object (a NumPy array) or an int from :func:`malloc_host`. Returns the
    device address of the mapping: operators may read and write the memory
    through it (an aclTensor's data), memcpy and memset may not, and it is not
    freed with :func:`free`. :func:`host_unregister` ends the mapping, once no
    queued work uses it.
    """
    return int(_call(backend, "aclrtHostRegister", ptr, size, type))


def host_unregister(ptr: Any, *, backend: str | None = None) -> None:
    """``aclrtHostUnregister``: end the mapping :func:`host_register` made of ``ptr``."""
    _call(backend, "aclrtHostUnregister", ptr)


def memcpy(dst: Any, dest_max: int, src: Any, count: int, kind: int, *, backend: str | None = None) -> None:
    """``aclrtMemcpy``: copy ``count`` bytes (at most ``dest_max``) in direction ``kind``."""
    _call(backend, "aclrtMemcpy", dst, dest_max, src, count, kind)


def memcpy_async(
    dst: Any, dest_max: int, src: Any, count: int, kind: int, stream: Any, *, backend: str | None = None
) -> None:
    """``aclrtMemcpyAsync``: host buffers must stay alive until the stream is synchronized."""
    _call(backend, "aclrtMemcpyAsync", dst, dest_max, src, count, kind, stream)


def memset(ptr: int, max_count: int, value: int, count: int, *, backend: str | None = None) -> None:
    """``aclrtMemset``: set ``count`` bytes to ``value``."""
    _call(backend, "aclrtMemset", ptr, max_count, value, count)


def memset_async(
    ptr: int, max_count: int, value: int, count: int, stream: Any, *, backend: str | None = None
) -> None:
    """``aclrtMemsetAsync``."""
    _call(backend, "aclrtMemsetAsync", ptr, max_count, value, count, stream)


def get_mem_info(attr: int = ACL_HBM_MEM, *, backend: str | None = None) -> tuple[int, int]:
    """``aclrtGetMemInfo``: ``(free, total)`` bytes."""
    free_bytes, total = _call(backend, "aclrtGetMemInfo", attr)
    return free_bytes, total


def ctx_set_sys_param_opt(opt: int, value: int, *, backend: str | None = None) -> None:
    """``aclrtCtxSetSysParamOpt`` (e.g. ACL_OPT_DETERMINISTIC) for the current context."""
    _call(backend, "aclrtCtxSetSysParamOpt", opt, value)


def ctx_get_sys_param_opt(opt: int, *, backend: str | None = None) -> int:
    """``aclrtCtxGetSysParamOpt``."""
    return int(_call(backend, "aclrtCtxGetSysParamOpt", opt))


def set_sys_param_opt(opt: int, value: int, *, backend: str | None = None) -> None:
    """``aclrtSetSysParamOpt`` for the process."""
    _call(backend, "aclrtSetSysParamOpt", opt, value)


def get_sys_param_opt(opt: int, *, backend: str | None = None) -> int:
    """``aclrtGetSysParamOpt``."""
    return int(_call(backend, "aclrtGetSysParamOpt", opt))


def get_soc_name(*, backend: str | None = None) -> str | None:
    """``aclrtGetSocName``: e.g. "Ascend910B3", None when unknown."""
    return _backends.get(backend).aclrtGetSocName()

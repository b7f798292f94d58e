"""Low-level API of CANN's profiler (``aclprof*``, libmsprofiler.so): record what ran where.

One function per C function, named after it without the ``aclprof`` prefix, as
:mod:`pyaclnn.acl.mdl` does for ``aclmdlRI*``. The order CANN requires:
:func:`init` (once, with the result directory), :func:`create_config`,
:func:`start` ... :func:`stop` (as often as wanted), :func:`destroy_config`,
:func:`finalize`. On an NPU, CANN writes its own data (``PROF_*`` directories) into
the directory for ``msprof`` to read. The emulations (the numpy backend and the C
emulator) check the same calls with CANN's codes and, for a configuration with
``ACL_PROF_TASK_TIME``, record every device task that finishes between start and
stop; :func:`finalize` appends them, one JSON object per line, to
``<path>/pyaclnn_emulated_device.jsonl``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import backends as _backends
from .._status import created as _created
from ..constants import ACL_AICORE_NONE, ACL_ERROR_INVALID_PARAM, ACL_PROF_ACL_API, ACL_PROF_TASK_TIME
from ._call import call as _call

__all__ = ["init", "create_config", "start", "stop", "destroy_config", "finalize"]


def init(path: str, *, backend: str | None = None) -> None:
    """``aclprofInit``: profile into directory ``path`` (made if missing).

    Raises ``AclError`` ``ACL_ERROR_REPEAT_INITIALIZE`` when profiling is already
    initialized, ``ACL_ERROR_INVALID_PARAM`` for an empty path or one of 4096 bytes
    or more, ``ACL_ERROR_INVALID_FILE`` when the directory cannot be made.
    """
    _call(backend, "aclprofInit", path, len(path.encode("utf-8")))


def create_config(
    device_ids: Sequence[int],
    aicore_metrics: int = ACL_AICORE_NONE,
    data_type_config: int = ACL_PROF_ACL_API | ACL_PROF_TASK_TIME,
    *,
    backend: str | None = None,
) -> Any:
    """``aclprofCreateConfig``: what to profile, on which devices; release it with :func:`destroy_config`.

    ``device_ids`` are distinct devices below the device count (empty only with
    ``ACL_PROF_MSPROFTX``); ``aicore_metrics`` is an ``ACL_AICORE_*`` value;
    ``data_type_config`` ORs ``ACL_PROF_*`` bits.

    Raises
    ------
    AclError
        ACL_ERROR_INVALID_PARAM when the C function returns NULL, with its reason.
    """
    b = _backends.get(backend)
    handle = b.aclprofCreateConfig(list(device_ids), aicore_metrics, None, data_type_config)
    return _created(b, handle, "aclprofCreateConfig", ACL_ERROR_INVALID_PARAM)


def start(config: Any, *, backend: str | None = None) -> None:
    """``aclprofStart``: profile as ``config`` says, after :func:`init`.

    Raises ``AclError`` ``ACL_ERROR_PROF_NOT_RUN`` before :func:`init`,
    ``ACL_ERROR_PROF_MODULES_UNSUPPORTED`` for a data type bit CANN does not support,
    ``ACL_ERROR_INVALID_PROFILING_CONFIG`` while another configuration runs (the same
    one again changes nothing).
    """
    _call(backend, "aclprofStart", config)


def stop(config: Any, *, backend: str | None = None) -> None:
    """``aclprofStop``: stop what ``config`` started (nothing running is no error)."""
    _call(backend, "aclprofStop", config)


def destroy_config(config: Any, *, backend: str | None = None) -> None:
    """``aclprofDestroyConfig``: release ``config``."""
    _call(backend, "aclprofDestroyConfig", config)


def finalize(*, backend: str | None = None) -> None:
    """``aclprofFinalize``: stop what still runs and write the results; :func:`init` may follow."""
    _call(backend, "aclprofFinalize")

"""Exceptions for failing ACL runtime and aclnn calls, and the status-name table."""

from __future__ import annotations

import functools

from . import _decl

# The codes pyaclnn raises itself, under their C names; kept here for code
# written against pyaclnn.errors before pyaclnn.constants held every code.
from .constants import (  # noqa: F401  (re-exports)
    ACL_ERROR_API_NOT_SUPPORT,
    ACL_ERROR_BAD_ALLOC,
    ACL_ERROR_INVALID_DEVICE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_INVALID_RESOURCE_HANDLE,
    ACL_ERROR_MEMORY_ADDRESS_UNALIGNED,
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_RT_DEVICE_OOM,
    ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_RT_MEMORY_ALLOCATION,
    ACL_ERROR_RT_MEMORY_FREE,
    ACL_ERROR_RT_NO_DEVICE,
    ACL_ERROR_RT_PARAM_INVALID,
    ACL_ERROR_UNINITIALIZE,
    ACL_SUCCESS,
    ACLNN_ERR_INNER_FIND_KERNEL_ERROR,
    ACLNN_ERR_INNER_NULLPTR,
    ACLNN_ERR_INNER_TILING_ERROR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    ACLNN_SUCCESS,
)


@functools.cache
def _names_by_code() -> dict[int, str]:
    names: dict[int, str] = {}
    for name, code in _decl.status_codes().items():
        # ACL_SUCCESS and ACLNN_SUCCESS share 0; the first declared name wins.
        names.setdefault(code, name)
    return names


def status_name(status: int) -> str:
    """C name of a status code, e.g. ``161002 -> "ACLNN_ERR_PARAM_INVALID"``.

    Unknown codes give ``"UNKNOWN_STATUS"`` rather than an exception, so an error
    path never fails while it reports another failure.
    """
    return _names_by_code().get(int(status), "UNKNOWN_STATUS")


_OUT_OF_MEMORY = frozenset({ACL_ERROR_BAD_ALLOC, ACL_ERROR_RT_MEMORY_ALLOCATION, ACL_ERROR_RT_DEVICE_OOM})


class AclError(RuntimeError):
    """A failing ACL runtime call (``aclrt*``, ``aclInit``, ...).

    Attributes
    ----------
    status : int
        The status code the call returned.
    status_name : str
        Its C name, e.g. ``"ACL_ERROR_RT_MEMORY_ALLOCATION"``.
    api : str
        The C function that failed, e.g. ``"aclrtMalloc"``.
    message : str
        What went wrong: ``aclGetRecentErrMsg()`` on the npu backend, the
        emulator's text on the numpy backend.
    """

    def __init__(self, status: int, message: str = "", api: str = "") -> None:
        self.status = int(status)
        self.status_name = status_name(self.status)
        self.api = api
        self.message = message
        head = f"{api} failed: " if api else ""
        text = f"{head}{self.status_name} ({self.status})"
        super().__init__(f"{text}: {message}" if message else text)

    def __reduce__(self) -> tuple[type[AclError], tuple[int, str, str]]:
        # keep (status, message, api) through pickling
        return (type(self), (self.status, self.message, self.api))


class AclnnError(AclError):
    """A failing aclnn call: a descriptor, an array or one of the operators."""


class AclOutOfMemoryError(AclError, MemoryError):
    """A device (or emulated device) allocation that could not be satisfied."""


class ArgumentOverflowError(OverflowError, ValueError):
    """A Python int that does not fit the C parameter it is passed to (before any C call)."""


def make_error(status: int, message: str = "", api: str = "") -> AclError:
    """The exception for ``status`` returned by C function ``api``."""
    if int(status) in _OUT_OF_MEMORY:
        return AclOutOfMemoryError(status, message, api)
    if api.startswith("aclnn") or status_name(status).startswith("ACLNN_"):
        return AclnnError(status, message, api)
    return AclError(status, message, api)

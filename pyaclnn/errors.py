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


#: The longest text :func:`describe` gives for a value a message quotes.
DESCRIBE_LIMIT = 80


def describe(value: object, limit: int = DESCRIBE_LIMIT) -> str:
    """A user's value as an error message quotes it: short, whatever the value.

    An array (anything with ``shape`` and ``dtype``: NumPy, DeviceArray, torch) is
    named by its type, shape and dtype, never by its elements (a 64x64x64 array's
    repr is 1,596 characters); a tuple or list by its items so described; any
    other value by its repr, cut to ``limit`` characters.

    Parameters
    ----------
    value : object
        What the caller passed.
    limit : int, optional
        The longest repr kept whole.

    Returns
    -------
    str
        At most about ``limit`` characters for a value, a few per item of a sequence
        (of at most 4 items shown).
    """
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None and not isinstance(value, type):
        try:
            dims = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            dims = shape
        return f"{type(value).__name__} of shape {dims} and dtype {dtype}"
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
        items = [describe(v, limit // 2) for v in value[:4]]
        if len(value) > 4:
            items.append(f"... {len(value) - 4} more")
        if type(value) is list:
            return f"[{', '.join(items)}]"
        return f"({', '.join(items)}{',' if len(value) == 1 else ''})"
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."

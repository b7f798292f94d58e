"""Marshaling for the npu backend: Python values to the C types of include/decl.

Device/host pointers are Python ints; handles are cffi pointers of the C
type (streams are typed ``struct pyaclnnStream *`` so that cffi itself
rejects a stream passed as a tensor, and vice versa); ``None`` is NULL.
A value that cannot be passed raises ``TypeError`` naming the C function and
parameter; a host buffer smaller than the byte count given for it raises
``ValueError`` (C would read or write past its end).
"""

from __future__ import annotations

import numbers
import os
from typing import Any

from ... import errors
from ._ffi import ffi

NULL = ffi.NULL
_VOIDP = ffi.typeof("void *")
_VOIDPP = ffi.typeof("void **")
_UINTPTR = ffi.typeof("uintptr_t")
_I64ARR = ffi.typeof("int64_t[]")
_BOOLARR = ffi.typeof("bool[]")
_U64P = ffi.typeof("uint64_t *")
_EXECPP = ffi.typeof("aclOpExecutor **")
# aclrtStream is void *, which cffi lets through for any pointer parameter;
# a private tag type for the streams we hand out keeps them apart from tensors.
_STREAM = ffi.typeof("struct pyaclnnStream *")
_STREAMP = ffi.typeof("aclrtStream *")
_EVENT = ffi.typeof("struct pyaclnnEvent *")  # the same for events (aclrtEvent is void * too)
_EVENTP = ffi.typeof("aclrtEvent *")
_RECORDEDP = ffi.typeof("aclrtEventRecordedStatus *")
_GRAPH = ffi.typeof("struct pyaclnnModelRI *")  # and for capture graphs (aclmdlRI is void * too)
_GRAPHP = ffi.typeof("aclmdlRI *")
_CAPTURE_STATUSP = ffi.typeof("aclmdlRICaptureStatus *")
_CAPTURE_MODEP = ffi.typeof("aclmdlRICaptureMode *")
_FLOATP = ffi.typeof("float *")
_CDATA = type(ffi.cast(_STREAM, 0))  # the class of non-owning cdata, as returned by C


# -- argument conversion ------------------------------------------------------


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


_ADDRESS_LIMIT = 1 << 64


def _pointer(value: Any, api: str, param: str) -> Any:
    """An int address (or None) as ``void *``; an int outside [0, 2**64) is refused, never wrapped."""
    if type(value) is not int:
        if value is None:
            return NULL
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{api}: {param} must be an int address (or None), got {_describe(value)}")
        value = int(value)
    if not 0 <= value < _ADDRESS_LIMIT:
        raise ValueError(f"{api}: {param} = {value:#x} is not an address: it must be in [0, 2**64)")
    return ffi.cast(_VOIDP, value)


def _host(value: Any, nbytes: int, writable: bool, api: str, param: str) -> Any:
    """A host or device address (int) or a host buffer-protocol object, as ``void *``."""
    if type(value) is int or value is None:
        return _pointer(value, api, param)
    if isinstance(value, (numbers.Number, str)):  # an address, or a clear TypeError
        return _pointer(value, api, param)
    try:
        buf = ffi.from_buffer(value, require_writable=writable)
    except (TypeError, ValueError, BufferError) as exc:
        need = "a writable C-contiguous buffer" if writable else "a C-contiguous buffer"
        raise TypeError(
            f"{api}: {param} must be an int address or {need}, got {_describe(value)}: {exc}"
        ) from None
    if isinstance(nbytes, numbers.Integral) and int(nbytes) > len(buf):
        raise ValueError(f"{api}: {param} holds {len(buf)} bytes but the call would access {nbytes}")
    return buf


def _int64s(values: Any, api: str, param: str) -> Any:
    if type(values) is not tuple and type(values) is not list:
        try:
            values = [v.__index__() for v in values]
        except (TypeError, AttributeError):
            raise TypeError(f"{api}: {param} must be a sequence of ints, got {_describe(values)}") from None
    try:
        return ffi.new(_I64ARR, values)
    except (TypeError, OverflowError) as exc:
        raise _reraised(exc)(
            f"{api}: {param} must be a sequence of int64 values, got {_describe(values)}: {exc}"
        ) from None


def _reraised(exc: Exception) -> type[Exception]:
    """The class to report cffi's ``exc`` with: an int out of range is also a ValueError."""
    return errors.ArgumentOverflowError if isinstance(exc, OverflowError) else type(exc)


_F32ARR = ffi.typeof("float[]")


def _floats(values: Any, api: str, param: str) -> Any:
    """A sequence of real numbers as a C ``float[]``."""
    try:
        items = [v for v in values]
        if any(isinstance(v, (bool, str, bytes)) for v in items):
            raise TypeError
        return ffi.new(_F32ARR, items)
    except (TypeError, OverflowError):
        raise TypeError(f"{api}: {param} must be a sequence of floats, got {_describe(values)}") from None


def _handles(values: Any, ctype: str, api: str, param: str) -> Any:
    """A sequence of handles (cffi pointers of ``ctype``, never None) as a C array of them."""
    try:
        items = list(values)
    except TypeError:
        raise TypeError(
            f"{api}: {param} must be a sequence of {ctype} handles, got {_describe(values)}"
        ) from None
    for i, item in enumerate(items):
        if item is None or not isinstance(item, ffi.CData):
            raise TypeError(f"{api}: {param}[{i}] must be a {ctype} handle, got {_describe(item)}")
    try:
        return ffi.new(f"{ctype}[]", items)
    except TypeError as exc:
        raise TypeError(f"{api}: {param} must hold {ctype} handles: {exc}") from None


def _bools(values: Any, api: str, param: str) -> Any:
    try:
        flags = [_as_bool(v) for v in values]
    except (TypeError, ValueError):  # ValueError: a NumPy array has no single truth value
        raise TypeError(f"{api}: {param} must be a sequence of bools, got {_describe(values)}") from None
    return ffi.new(_BOOLARR, flags)


def _as_bool(value: Any) -> bool:
    if value is True or value is False:
        return value
    if type(value).__name__ == "bool_" or value in (0, 1):  # numpy.bool_, or 0/1 as in C
        return bool(value)
    raise TypeError


def _cstring(value: str | bytes | os.PathLike[str] | os.PathLike[bytes] | None, api: str, param: str) -> Any:
    if value is None:
        return NULL
    try:
        return os.fsencode(value)
    except TypeError:
        raise TypeError(f"{api}: {param} must be a str path or None, got {_describe(value)}") from None


_workspace_pointers: dict[int, Any] = {}  # address -> void *: a stream's workspace recurs every call


def _workspace(value: Any, api: str) -> Any:
    """A workspace address as ``void *`` (NULL for 0), the cast cached for the addresses that recur."""
    if type(value) is int:
        if value == 0:
            return NULL
        cached = _workspace_pointers.get(value)
        if cached is not None:
            return cached
        pointer = _pointer(value, api, "workspace")
        if len(_workspace_pointers) >= 64:
            _workspace_pointers.clear()  # addresses of freed workspaces: start again
        _workspace_pointers[value] = pointer
        return pointer
    return _pointer(value, api, "workspace")


def _new_event(status: int, event: Any) -> Any:
    return ffi.cast(_EVENT, event) if status == 0 and event != NULL else None


def _event(event: Any, api: str) -> Any:
    if type(event) is _CDATA and ffi.typeof(event) is _EVENT:
        return event
    raise TypeError(f"{api}: event must be an event from aclrtCreateEvent, got {_describe(event)}")


def _new_graph(status: int, graph: Any) -> Any:
    return ffi.cast(_GRAPH, graph) if status == 0 and graph != NULL else None


def _graph(graph: Any, api: str) -> Any:
    if graph is None:  # NULL: CANN's own check refuses it with its code
        return NULL
    if type(graph) is _CDATA and ffi.typeof(graph) is _GRAPH:
        return graph
    raise TypeError(
        f"{api}: modelRI must be a graph from aclmdlRICaptureEnd (or None), got {_describe(graph)}"
    )


#: The last stream :func:`_stream` accepted, in a one-item list: a cdata object's type never
#: changes, so launch after launch on one stream is checked once (phase 2 compares identity first).
accepted_stream: list[Any] = [object()]  # (not None, which _stream turns into NULL)


def _stream(stream: Any, api: str) -> Any:
    if stream is None:
        return NULL
    if type(stream) is _CDATA and ffi.typeof(stream) is _STREAM:
        accepted_stream[0] = stream
        return stream
    raise TypeError(
        f"{api}: stream must be a stream from aclrtCreateStream (or None), got {_describe(stream)}"
    )


def _handle(value: Any) -> Any:
    return NULL if value is None else value

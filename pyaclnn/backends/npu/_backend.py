"""The npu backend: the C API of the CANN subset, forwarded through cffi.

Loading (once per process, under a lock, on first use)
------------------------------------------------------
:func:`load` opens the libraries :func:`.discover` chose, in dependency order
(runtime, libnnopbase, operator libraries) with ``RTLD_NOW | RTLD_GLOBAL``,
then binds every function of ``include/decl`` to the first library that
exports it. A function no library exports is bound to a stub: calling it
raises :class:`pyaclnn.errors.AclError` (:class:`~pyaclnn.errors.AclnnError`
for ``aclnn*``) with status ``ACL_ERROR_API_NOT_SUPPORT`` (200001) and a
message naming the function and every library searched. Everything else
still works: a CANN without the computer-vision operator package still runs
max-pool.

Marshaling
----------
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
import threading
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast

from ... import errors
from ...constants import (
    ACL_ERROR_API_NOT_SUPPORT,
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_UNINITIALIZE,
    ACL_SUCCESS,
)
from .._interface import LIVE_COUNT_NAMES
from ._discovery import Candidate, Discovery, LibraryNotFoundError, discover
from ._ffi import Symbols, ffi, function_names, parameter_names

NULL = ffi.NULL
# The C type of a cdata: the C backend's typeof skips FFI.typeof's Python dispatch (~65 ns per
# stream check, several per call); FFI.typeof where a cffi lacks it.
_typeof = getattr(ffi._backend, "typeof", ffi.typeof)
_VOIDP = ffi.typeof("void *")
_VOIDPP = ffi.typeof("void **")
_UINTPTR = ffi.typeof("uintptr_t")
_I64ARR = ffi.typeof("int64_t[]")
_BOOLARR = ffi.typeof("bool[]")
_I64P = ffi.typeof("int64_t *")
_I32P = ffi.typeof("int32_t *")
_U32P = ffi.typeof("uint32_t *")
_U64P = ffi.typeof("uint64_t *")
_SIZEP = ffi.typeof("size_t *")
_EXECPP = ffi.typeof("aclOpExecutor **")
# aclrtStream is void *, which cffi lets through for any pointer parameter;
# a private tag type for the streams we hand out keeps them apart from tensors.
_STREAM = ffi.typeof("struct pyaclnnStream *")
_STREAMP = ffi.typeof("aclrtStream *")
_EVENT = ffi.typeof("struct pyaclnnEvent *")  # the same for events (aclrtEvent is void * too)
_EVENTP = ffi.typeof("aclrtEvent *")
_RECORDEDP = ffi.typeof("aclrtEventRecordedStatus *")
_FLOATP = ffi.typeof("float *")
_CDATA = type(ffi.cast(_STREAM, 0))  # the class of non-owning cdata, as returned by C


_LOAD_HINT = (
    "CANN's libraries are present but could not be opened; the NPU driver libraries "
    "(/usr/local/Ascend/driver/lib64/driver and .../common) must be on LD_LIBRARY_PATH or in "
    "ld.so.conf: source CANN's set_env.sh, or use PYACLNN_BACKEND=numpy."
)


@dataclass(frozen=True)
class Loaded:
    """The opened libraries and the bound functions (one per process).

    Attributes
    ----------
    candidate : Candidate
        The home the libraries came from.
    libraries : tuple[tuple[Path, Any], ...]
        ``(path, cffi lib)`` per opened library, in load order.
    symbols : types.SimpleNamespace
        One attribute per declared C function: the cffi function, or a stub
        that raises (see the module docstring).
    missing : frozenset[str]
        Declared functions no library exports.
    """

    candidate: Candidate
    libraries: tuple[tuple[Path, Any], ...]
    symbols: types.SimpleNamespace
    missing: frozenset[str] = field(default_factory=frozenset)


_lock = threading.Lock()
_loaded: Loaded | None = None


def _missing_stub(name: str, paths: Sequence[Path]) -> Any:
    searched = ", ".join(str(p) for p in paths)
    message = (
        f"{name} is not exported by any loaded CANN library (searched {searched}); "
        "this CANN install lacks the operator package or is too old for this function"
    )

    def call(*_args: Any, **_kwargs: Any) -> Any:
        raise errors.make_error(ACL_ERROR_API_NOT_SUPPORT, message, name)

    call.__name__ = call.__qualname__ = name
    return call


def _open(discovery: Discovery) -> Loaded:
    chosen = discovery.chosen
    if chosen is None:
        raise discovery.not_found_error()
    opened: list[tuple[Path, Any]] = []
    for path in chosen.libraries:
        try:
            # RTLD_GLOBAL: later libraries (and CANN's own plugins) resolve
            # their undefined symbols against the earlier ones.
            opened.append((path, ffi.dlopen(str(path), ffi.RTLD_NOW | ffi.RTLD_GLOBAL)))
        except OSError as exc:
            raise LibraryNotFoundError(
                f"CANN was found in {chosen.lib_dir} (from {chosen.source}) but {path.name} "
                f"could not be opened: {exc}\n{_LOAD_HINT}",
                discovery,
            ) from exc
    bound: dict[str, Any] = {}
    missing = set()
    for name in function_names():
        for _path, lib in opened:
            try:
                bound[name] = getattr(lib, name)
                break
            except AttributeError:
                continue
        else:
            bound[name] = _missing_stub(name, [p for p, _ in opened])
            missing.add(name)
    return Loaded(chosen, tuple(opened), types.SimpleNamespace(**bound), frozenset(missing))


def load(environ: dict[str, str] | None = None) -> Loaded:
    """Open CANN's libraries once per process (thread-safe) and return them.

    Parameters
    ----------
    environ : Mapping[str, str], optional
        Environment for the search (``os.environ`` by default); ignored once
        the libraries are loaded, since a process can hold only one CANN.

    Raises
    ------
    LibraryNotFoundError
        No usable home (the message lists every place searched and what each
        lacked) or a library failed to open. A failure is not cached: the
        next call searches again.
    """
    global _loaded
    loaded = _loaded
    if loaded is None:
        with _lock:
            if _loaded is None:
                _loaded = _open(discover(environ))
            loaded = _loaded
    return loaded


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
    if type(event) is _CDATA and _typeof(event) is _EVENT:
        return event
    raise TypeError(f"{api}: event must be an event from aclrtCreateEvent, got {_describe(event)}")


def _stream(stream: Any, api: str) -> Any:
    if stream is None:
        return NULL
    if type(stream) is _CDATA and _typeof(stream) is _STREAM:
        return stream
    raise TypeError(
        f"{api}: stream must be a stream from aclrtCreateStream (or None), got {_describe(stream)}"
    )


def _handle(value: Any) -> Any:
    return NULL if value is None else value


class NpuBackend:
    """The C API of the CANN subset over the real (or emulated) libraries.

    Construction loads the libraries (once per process) and raises
    :class:`LibraryNotFoundError` when that fails. Methods follow
    :class:`pyaclnn.backends._interface.Backend`.
    """

    name = "npu"

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        self._loaded = load(environ)
        self._c = cast(Symbols, self._loaded.symbols)  # a namespace of those functions

    # -- introspection ----------------------------------------------------------
    @property
    def home(self) -> Path:
        """The CANN install root the libraries came from."""
        return self._loaded.candidate.home

    @property
    def libraries(self) -> tuple[Path, ...]:
        """Paths of the opened libraries, in load order."""
        return tuple(p for p, _ in self._loaded.libraries)

    @property
    def missing_functions(self) -> frozenset[str]:
        """Declared C functions that no opened library exports."""
        return self._loaded.missing

    def live_counts(self, device: int | None = None) -> dict[str, int] | None:
        """Live objects of the host emulator of CANN, or None on real CANN.

        Keys: ``device_allocs, host_allocs, tensors, int_arrays, bool_arrays,
        executors, streams`` (C function ``pyaclnnEmuLiveCounts``); with
        ``device``, the allocations and streams of that device only
        (``pyaclnnEmuDeviceLiveCounts``).
        """
        if "pyaclnnEmuLiveCounts" in self._loaded.missing:
            return None
        counts = ffi.new("int64_t[]", len(LIVE_COUNT_NAMES))
        if device is None:
            written = self._c.pyaclnnEmuLiveCounts(counts, len(LIVE_COUNT_NAMES))
        else:
            written = self._c.pyaclnnEmuDeviceLiveCounts(device, counts, len(LIVE_COUNT_NAMES))
        return {name: int(counts[i]) for i, name in enumerate(LIVE_COUNT_NAMES[: max(written, 0)])}

    def hazard_count(self) -> int | None:
        """Hazards the host emulator of CANN has seen so far, or None on real CANN
        (C function ``pyaclnnEmuHazardCount``)."""
        if "pyaclnnEmuHazardCount" in self._loaded.missing:
            return None
        return int(self._c.pyaclnnEmuHazardCount())

    def adopt_stream(self, handle: Any) -> Any:
        """An ``aclrtStream`` made elsewhere (an int address or a cffi pointer) as this backend's handle."""
        if type(handle) is _CDATA and _typeof(handle) is _STREAM:
            return handle
        if isinstance(handle, ffi.CData) and ffi.typeof(handle).kind == "pointer":
            return ffi.cast(_STREAM, handle)
        if isinstance(handle, numbers.Integral) and not isinstance(handle, bool):
            if not 0 < int(handle) < _ADDRESS_LIMIT:
                raise ValueError(f"handle {int(handle):#x} is not an aclrtStream address")
            return ffi.cast(_STREAM, int(handle))
        raise TypeError(f"handle must be an aclrtStream (an int or a cffi pointer), got {_describe(handle)}")

    def device_memory(self, ptr: int, nbytes: int) -> int | None:
        """None: real CANN cannot tell which memory is whose; the caller answers for the pointer."""
        return None

    def _bad_argument(self, api: str, args: tuple[Any, ...], exc: Exception) -> Exception:
        """Name the argument cffi refused (the slow path of a failed call)."""
        ctype = ffi.typeof(getattr(self._c, api))
        for param, ptype, value in zip(parameter_names()[api], ctype.args, args):
            if ptype.cname == "char *" and isinstance(value, bytes):
                continue
            try:
                ffi.new(ffi.getctype(ptype, "*"), value)  # the same check as passing it
            except (TypeError, OverflowError) as err:
                what = "a handle of this type" if ptype.kind == "pointer" else "a value of this type"
                return _reraised(err)(
                    f"{api}: {param} ({ptype.cname}) needs {what}, got {_describe(value)}: {err}"
                )
        return exc

    # -- runtime (libascendcl / libacl_rt) ---------------------------------------
    def aclInit(self, config_path: str | None) -> int:
        return self._c.aclInit(_cstring(config_path, "aclInit", "config_path"))

    def aclFinalize(self) -> int:
        return self._c.aclFinalize()

    def aclGetRecentErrMsg(self) -> str:
        text = self._c.aclGetRecentErrMsg()
        # Only the latest pointer stays valid: copy now.
        return "" if text == NULL else ffi.string(text).decode("utf-8", "replace")

    def aclrtSetDevice(self, device_id: int) -> int:
        try:
            return self._c.aclrtSetDevice(device_id)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclrtSetDevice", (device_id,), exc) from None

    def aclrtResetDevice(self, device_id: int) -> int:
        try:
            return self._c.aclrtResetDevice(device_id)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclrtResetDevice", (device_id,), exc) from None

    def aclrtGetDevice(self) -> tuple[int, int]:
        out = ffi.new(_I32P)
        status = self._c.aclrtGetDevice(out)
        return status, out[0]

    def aclrtGetDeviceCount(self) -> tuple[int, int]:
        out = ffi.new(_U32P)
        status = self._c.aclrtGetDeviceCount(out)
        return status, out[0]

    def aclrtSynchronizeDevice(self) -> int:
        return self._c.aclrtSynchronizeDevice()

    def aclrtCreateStream(self) -> tuple[int, Any]:
        out = ffi.new(_STREAMP)
        status = self._c.aclrtCreateStream(out)
        stream = out[0]
        return status, (ffi.cast(_STREAM, stream) if status == 0 and stream != NULL else None)

    def aclrtDestroyStream(self, stream: Any) -> int:
        return self._c.aclrtDestroyStream(_stream(stream, "aclrtDestroyStream"))

    def aclrtSynchronizeStream(self, stream: Any) -> int:
        if type(stream) is not _CDATA or _typeof(stream) is not _STREAM:  # once per call: no helper
            stream = _stream(stream, "aclrtSynchronizeStream")
        return self._c.aclrtSynchronizeStream(stream)

    # -- events -------------------------------------------------------------------
    def aclrtCreateEvent(self) -> tuple[int, Any]:
        out = ffi.new(_EVENTP)
        status = self._c.aclrtCreateEvent(out)
        return status, _new_event(status, out[0])

    def aclrtCreateEventWithFlag(self, flag: int) -> tuple[int, Any]:
        out = ffi.new(_EVENTP)
        try:
            status = self._c.aclrtCreateEventWithFlag(out, flag)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclrtCreateEventWithFlag", (out, flag), exc) from None
        return status, _new_event(status, out[0])

    def aclrtDestroyEvent(self, event: Any) -> int:
        return self._c.aclrtDestroyEvent(_event(event, "aclrtDestroyEvent"))

    def aclrtRecordEvent(self, event: Any, stream: Any) -> int:
        api = "aclrtRecordEvent"
        return self._c.aclrtRecordEvent(_event(event, api), _stream(stream, api))

    def aclrtQueryEventStatus(self, event: Any) -> tuple[int, int]:
        out = ffi.new(_RECORDEDP)
        status = self._c.aclrtQueryEventStatus(_event(event, "aclrtQueryEventStatus"), out)
        return status, int(out[0])

    def aclrtSynchronizeEvent(self, event: Any) -> int:
        return self._c.aclrtSynchronizeEvent(_event(event, "aclrtSynchronizeEvent"))

    def aclrtEventElapsedTime(self, start: Any, end: Any) -> tuple[int, float]:
        api = "aclrtEventElapsedTime"
        out = ffi.new(_FLOATP)
        status = self._c.aclrtEventElapsedTime(out, _event(start, api), _event(end, api))
        return status, float(out[0])

    def aclrtStreamWaitEvent(self, stream: Any, event: Any) -> int:
        api = "aclrtStreamWaitEvent"
        return self._c.aclrtStreamWaitEvent(_stream(stream, api), _event(event, api))

    def aclrtMalloc(self, size: int, policy: int) -> tuple[int, int]:
        out = ffi.new(_VOIDPP)
        try:
            status = self._c.aclrtMalloc(out, size, policy)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclrtMalloc", (out, size, policy), exc) from None
        return status, int(ffi.cast(_UINTPTR, out[0]))

    def aclrtFree(self, ptr: int) -> int:
        return self._c.aclrtFree(_pointer(ptr, "aclrtFree", "ptr"))

    def aclrtMallocHost(self, size: int) -> tuple[int, int]:
        out = ffi.new(_VOIDPP)
        try:
            status = self._c.aclrtMallocHost(out, size)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclrtMallocHost", (out, size), exc) from None
        return status, int(ffi.cast(_UINTPTR, out[0]))

    def aclrtFreeHost(self, ptr: int) -> int:
        return self._c.aclrtFreeHost(_pointer(ptr, "aclrtFreeHost", "ptr"))

    def aclrtMemcpy(self, dst: Any, dest_max: int, src: Any, count: int, kind: int) -> int:
        api = "aclrtMemcpy"
        d = _host(dst, dest_max, True, api, "dst")
        s = _host(src, count, False, api, "src")
        try:
            return self._c.aclrtMemcpy(d, dest_max, s, count, kind)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (d, dest_max, s, count, kind), exc) from None

    def aclrtMemcpyAsync(self, dst: Any, dest_max: int, src: Any, count: int, kind: int, stream: Any) -> int:
        # The caller keeps host buffers alive until the stream is synchronized.
        api = "aclrtMemcpyAsync"
        d = _host(dst, dest_max, True, api, "dst")
        s = _host(src, count, False, api, "src")
        st = _stream(stream, api)
        try:
            return self._c.aclrtMemcpyAsync(d, dest_max, s, count, kind, st)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (d, dest_max, s, count, kind, st), exc) from None

    def aclrtMemset(self, ptr: int, max_count: int, value: int, count: int) -> int:
        api = "aclrtMemset"
        p = _pointer(ptr, api, "ptr")
        try:
            return self._c.aclrtMemset(p, max_count, value, count)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (p, max_count, value, count), exc) from None

    def aclrtMemsetAsync(self, ptr: int, max_count: int, value: int, count: int, stream: Any) -> int:
        api = "aclrtMemsetAsync"
        p = _pointer(ptr, api, "ptr")
        st = _stream(stream, api)
        try:
            return self._c.aclrtMemsetAsync(p, max_count, value, count, st)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (p, max_count, value, count, st), exc) from None

    def aclrtGetMemInfo(self, attr: int) -> tuple[int, int, int]:
        free, total = ffi.new(_SIZEP), ffi.new(_SIZEP)
        try:
            status = self._c.aclrtGetMemInfo(attr, free, total)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclrtGetMemInfo", (attr, free, total), exc) from None
        return status, free[0], total[0]

    def aclrtCtxSetSysParamOpt(self, opt: int, value: int) -> int:
        try:
            return self._c.aclrtCtxSetSysParamOpt(opt, value)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclrtCtxSetSysParamOpt", (opt, value), exc) from None

    def aclrtCtxGetSysParamOpt(self, opt: int) -> tuple[int, int]:
        out = ffi.new(_I64P)
        try:
            status = self._c.aclrtCtxGetSysParamOpt(opt, out)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclrtCtxGetSysParamOpt", (opt, out), exc) from None
        return status, out[0]

    def aclrtSetSysParamOpt(self, opt: int, value: int) -> int:
        try:
            return self._c.aclrtSetSysParamOpt(opt, value)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclrtSetSysParamOpt", (opt, value), exc) from None

    def aclrtGetSysParamOpt(self, opt: int) -> tuple[int, int]:
        out = ffi.new(_I64P)
        try:
            status = self._c.aclrtGetSysParamOpt(opt, out)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclrtGetSysParamOpt", (opt, out), exc) from None
        return status, out[0]

    def aclrtGetSocName(self) -> str | None:
        name = self._c.aclrtGetSocName()
        return None if name == NULL else ffi.string(name).decode("utf-8", "replace")

    def aclDataTypeSize(self, data_type: int) -> int:
        try:
            return self._c.aclDataTypeSize(data_type)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclDataTypeSize", (data_type,), exc) from None

    # -- aclnn meta API (libnnopbase) ---------------------------------------------
    def aclnnInit(self, config_path: str | None) -> int:
        return self._c.aclnnInit(_cstring(config_path, "aclnnInit", "config_path"))

    def aclnnFinalize(self) -> int:
        return self._c.aclnnFinalize()

    def aclCreateTensor(
        self,
        view_dims: Sequence[int],
        data_type: int,
        strides: Sequence[int] | None,
        offset: int,
        fmt: int,
        storage_dims: Sequence[int],
        data: int,
    ) -> Any | None:
        api = "aclCreateTensor"
        view = _int64s(view_dims, api, "view_dims")
        stride = NULL if strides is None else _int64s(strides, api, "strides")
        storage = _int64s(storage_dims, api, "storage_dims")
        ptr = _pointer(data, api, "data")
        args = (view, len(view), data_type, stride, offset, fmt, storage, len(storage), ptr)
        try:
            tensor = self._c.aclCreateTensor(*args)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, args, exc) from None
        return None if tensor == NULL else tensor

    def aclDestroyTensor(self, tensor: Any) -> int:
        try:
            return self._c.aclDestroyTensor(_handle(tensor))
        except TypeError as exc:
            raise self._bad_argument("aclDestroyTensor", (tensor,), exc) from None

    def aclCreateIntArray(self, values: Sequence[int]) -> Any | None:
        array = _int64s(values, "aclCreateIntArray", "values")
        result = self._c.aclCreateIntArray(array, len(array))
        return None if result == NULL else result

    def aclDestroyIntArray(self, array: Any) -> int:
        try:
            return self._c.aclDestroyIntArray(_handle(array))
        except TypeError as exc:
            raise self._bad_argument("aclDestroyIntArray", (array,), exc) from None

    def aclCreateBoolArray(self, values: Sequence[bool]) -> Any | None:
        array = _bools(values, "aclCreateBoolArray", "values")
        result = self._c.aclCreateBoolArray(array, len(array))
        return None if result == NULL else result

    def aclDestroyBoolArray(self, array: Any) -> int:
        try:
            return self._c.aclDestroyBoolArray(_handle(array))
        except TypeError as exc:
            raise self._bad_argument("aclDestroyBoolArray", (array,), exc) from None

    def aclSetAclOpExecutorRepeatable(self, executor: Any) -> int:
        try:
            return self._c.aclSetAclOpExecutorRepeatable(_handle(executor))
        except TypeError as exc:
            raise self._bad_argument("aclSetAclOpExecutorRepeatable", (executor,), exc) from None

    def aclDestroyAclOpExecutor(self, executor: Any) -> int:
        try:
            return self._c.aclDestroyAclOpExecutor(_handle(executor))
        except TypeError as exc:
            raise self._bad_argument("aclDestroyAclOpExecutor", (executor,), exc) from None

    # -- operators (libopapi*) -------------------------------------------------------
    # The hot path: no per-call allocation of the out-parameters (one pair per
    # thread, reset before each call), no extra Python call per argument. On
    # failure the executor is None whatever the library left behind.
    def aclnnMaxPool3dWithArgmaxGetWorkspaceSize(
        self,
        self_: Any,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        ceil_mode: bool,
        out: Any,
        indices: Any,
    ) -> tuple[int, int, Any | None]:
        size, executor = _outs()
        try:
            status = self._c.aclnnMaxPool3dWithArgmaxGetWorkspaceSize(
                NULL if self_ is None else self_,
                NULL if kernel_size is None else kernel_size,
                NULL if stride is None else stride,
                NULL if padding is None else padding,
                NULL if dilation is None else dilation,
                ceil_mode,
                NULL if out is None else out,
                NULL if indices is None else indices,
                size,
                executor,
            )
        except (TypeError, OverflowError) as exc:
            args = (self_, kernel_size, stride, padding, dilation, ceil_mode, out, indices)
            raise self._bad_argument("aclnnMaxPool3dWithArgmaxGetWorkspaceSize", _nulls(args), exc) from None
        ex = executor[0]
        return status, size[0], (ex if status == 0 and ex else None)  # a NULL cdata is false

    def aclnnMaxPool3dWithArgmax(
        self, workspace: int, workspace_size: int, executor: Any, stream: Any
    ) -> int:
        api = "aclnnMaxPool3dWithArgmax"
        ws = _workspace(workspace, api)
        st = stream if type(stream) is _CDATA and _typeof(stream) is _STREAM else _stream(stream, api)
        try:
            return self._c.aclnnMaxPool3dWithArgmax(
                ws, workspace_size, NULL if executor is None else executor, st
            )
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (ws, workspace_size, _null(executor), st), exc) from None

    def aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
        self,
        grad_output: Any,
        self_: Any,
        indices: Any,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        ceil_mode: bool,
        grad_input: Any,
    ) -> tuple[int, int, Any | None]:
        size, executor = _outs()
        try:
            status = self._c.aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
                NULL if grad_output is None else grad_output,
                NULL if self_ is None else self_,
                NULL if indices is None else indices,
                NULL if kernel_size is None else kernel_size,
                NULL if stride is None else stride,
                NULL if padding is None else padding,
                NULL if dilation is None else dilation,
                ceil_mode,
                NULL if grad_input is None else grad_input,
                size,
                executor,
            )
        except (TypeError, OverflowError) as exc:
            args = (
                grad_output,
                self_,
                indices,
                kernel_size,
                stride,
                padding,
                dilation,
                ceil_mode,
                grad_input,
            )
            raise self._bad_argument(
                "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize", _nulls(args), exc
            ) from None
        ex = executor[0]
        return status, size[0], (ex if status == 0 and ex else None)  # a NULL cdata is false

    def aclnnMaxPool3dWithArgmaxBackward(
        self, workspace: int, workspace_size: int, executor: Any, stream: Any
    ) -> int:
        api = "aclnnMaxPool3dWithArgmaxBackward"
        ws = _workspace(workspace, api)
        st = stream if type(stream) is _CDATA and _typeof(stream) is _STREAM else _stream(stream, api)
        try:
            return self._c.aclnnMaxPool3dWithArgmaxBackward(
                ws, workspace_size, NULL if executor is None else executor, st
            )
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (ws, workspace_size, _null(executor), st), exc) from None

    def aclnnGridSampler3DGetWorkspaceSize(
        self,
        input: Any,
        grid: Any,
        interpolation_mode: int,
        padding_mode: int,
        align_corners: bool,
        out: Any,
    ) -> tuple[int, int, Any | None]:
        size, executor = _outs()
        try:
            status = self._c.aclnnGridSampler3DGetWorkspaceSize(
                NULL if input is None else input,
                NULL if grid is None else grid,
                interpolation_mode,
                padding_mode,
                align_corners,
                NULL if out is None else out,
                size,
                executor,
            )
        except (TypeError, OverflowError) as exc:
            args = (input, grid, interpolation_mode, padding_mode, align_corners, out)
            raise self._bad_argument("aclnnGridSampler3DGetWorkspaceSize", _nulls(args), exc) from None
        ex = executor[0]
        return status, size[0], (ex if status == 0 and ex else None)  # a NULL cdata is false

    def aclnnGridSampler3D(self, workspace: int, workspace_size: int, executor: Any, stream: Any) -> int:
        api = "aclnnGridSampler3D"
        ws = _workspace(workspace, api)
        st = stream if type(stream) is _CDATA and _typeof(stream) is _STREAM else _stream(stream, api)
        try:
            return self._c.aclnnGridSampler3D(ws, workspace_size, NULL if executor is None else executor, st)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (ws, workspace_size, _null(executor), st), exc) from None

    def aclnnGridSampler3DBackwardGetWorkspaceSize(
        self,
        grad_output: Any,
        input: Any,
        grid: Any,
        interpolation_mode: int,
        padding_mode: int,
        align_corners: bool,
        output_mask: Any,
        input_grad: Any,
        grid_grad: Any,
    ) -> tuple[int, int, Any | None]:
        size, executor = _outs()
        try:
            status = self._c.aclnnGridSampler3DBackwardGetWorkspaceSize(
                NULL if grad_output is None else grad_output,
                NULL if input is None else input,
                NULL if grid is None else grid,
                interpolation_mode,
                padding_mode,
                align_corners,
                NULL if output_mask is None else output_mask,
                NULL if input_grad is None else input_grad,
                NULL if grid_grad is None else grid_grad,
                size,
                executor,
            )
        except (TypeError, OverflowError) as exc:
            args = (
                grad_output,
                input,
                grid,
                interpolation_mode,
                padding_mode,
                align_corners,
                output_mask,
                input_grad,
                grid_grad,
            )
            raise self._bad_argument(
                "aclnnGridSampler3DBackwardGetWorkspaceSize", _nulls(args), exc
            ) from None
        ex = executor[0]
        return status, size[0], (ex if status == 0 and ex else None)  # a NULL cdata is false

    def aclnnGridSampler3DBackward(
        self, workspace: int, workspace_size: int, executor: Any, stream: Any
    ) -> int:
        api = "aclnnGridSampler3DBackward"
        ws = _workspace(workspace, api)
        st = stream if type(stream) is _CDATA and _typeof(stream) is _STREAM else _stream(stream, api)
        try:
            return self._c.aclnnGridSampler3DBackward(
                ws, workspace_size, NULL if executor is None else executor, st
            )
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (ws, workspace_size, _null(executor), st), exc) from None


_tls = threading.local()


def _outs() -> tuple[Any, Any]:
    """This thread's (workspace size, executor) out-parameters, reset for a new call."""
    try:
        size, executor = _tls.outs
    except AttributeError:
        size, executor = _tls.outs = (ffi.new(_U64P), ffi.new(_EXECPP))
    size[0] = 0
    executor[0] = NULL
    return size, executor


def _null(value: Any) -> Any:
    return NULL if value is None else value


def _nulls(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(NULL if v is None else v for v in values)


# -- probe ----------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeResult:
    """Whether the npu backend is usable here, and why not.

    Attributes
    ----------
    ok : bool
        True when the libraries load and at least one device is visible.
    reason : str
        Empty when ``ok``; else what failed and how to fix it.
    home : str | None
        The CANN install root used.
    libraries : tuple[str, ...]
        Paths of the opened libraries, in load order.
    device_count : int | None
        What ``aclrtGetDeviceCount`` reported (None if it could not be asked).
    soc_name : str | None
        ``aclrtGetSocName()``, e.g. ``"Ascend910B1"``.
    missing_functions : tuple[str, ...]
        Declared C functions no opened library exports.
    """

    ok: bool
    reason: str
    home: str | None = None
    libraries: tuple[str, ...] = ()
    device_count: int | None = None
    soc_name: str | None = None
    missing_functions: tuple[str, ...] = ()


class _Found(TypedDict):
    """What ProbeResult reports of a loaded CANN, whatever the devices say."""

    home: str
    libraries: tuple[str, ...]
    missing_functions: tuple[str, ...]


def probe(environ: dict[str, str] | None = None) -> ProbeResult:
    """Try the npu backend without raising: load CANN, count devices, name the SoC.

    ``aclrtGetDeviceCount`` is asked first without ``aclInit``; only if it
    answers ``ACL_ERROR_UNINITIALIZE`` is ``aclInit(NULL)`` called (a repeat
    init, 100002, counts as success) and the count asked again.

    Returns
    -------
    ProbeResult
        Never raises; failures are described in ``reason``.
    """
    try:
        backend = NpuBackend(environ)
    except LibraryNotFoundError as exc:
        return ProbeResult(False, str(exc))
    except Exception as exc:  # noqa: BLE001 -- a broken install must not break backend selection
        return ProbeResult(False, f"loading CANN failed: {type(exc).__name__}: {exc}")
    found: _Found = {
        "home": str(backend.home),
        "libraries": tuple(str(p) for p in backend.libraries),
        "missing_functions": tuple(sorted(backend.missing_functions)),
    }
    try:
        status, count = backend.aclrtGetDeviceCount()
        if status == ACL_ERROR_UNINITIALIZE:
            init = backend.aclInit(None)
            if init not in (ACL_SUCCESS, ACL_ERROR_REPEAT_INITIALIZE):
                return ProbeResult(False, _failed("aclInit", init, backend), **found)
            status, count = backend.aclrtGetDeviceCount()
        if status != ACL_SUCCESS:
            return ProbeResult(False, _failed("aclrtGetDeviceCount", status, backend), **found)
        soc = backend.aclrtGetSocName() if count else None
    except Exception as exc:  # noqa: BLE001 -- probe never raises
        return ProbeResult(False, f"querying the devices failed: {type(exc).__name__}: {exc}", **found)
    if count < 1:
        return ProbeResult(
            False,
            "CANN loaded but aclrtGetDeviceCount reports no NPU device (is the driver installed?)",
            device_count=count,
            **found,
        )
    return ProbeResult(True, "", device_count=count, soc_name=soc, **found)


def _failed(api: str, status: int, backend: NpuBackend) -> str:
    try:
        message = backend.aclGetRecentErrMsg()
    except Exception:  # noqa: BLE001 -- reporting one failure must not raise another
        message = ""
    return str(errors.make_error(status, message, api))

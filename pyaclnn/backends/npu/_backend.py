"""The npu backend: the C API of the CANN subset, forwarded through cffi.

One method per C function of ``include/decl`` (:class:`NpuBackend`), over the
libraries :mod:`._loading` opened, with the argument conversions of
:mod:`._marshal`; :mod:`._probe` says whether a device is usable.

Two ways to bind a C function, so that its prototype is written only in include/decl:

* the generic path (:func:`_generic`), for functions whose arguments are plain
  numbers and whose out-parameters are numbers or addresses: the method takes
  the C arguments without the out-parameters, allocates these from the
  declaration (:func:`._ffi.out_parameters`, public cffi ``CType`` API only),
  and returns ``status`` or ``(status, *outs)`` as the backend interface says;
* hand-written methods where an argument needs marshaling (handles, host
  buffers, arrays, strings) or the call is on the hot path of an operator call
  (aclCreateTensor, the aclnn phase 1 / phase 2 pairs, memcpy, streams): these
  avoid the generic path's per-call work (tuple building, a lookup by name).
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from .._interface import LIVE_COUNT_NAMES, OperatorPhases, Symbols, install_operator_phases
from ._c_form import CForm, c_form
from ._ffi import ffi, out_parameters, parameter_names
from ._loading import custom_library, load, operator_function
from ._marshal import (
    _ADDRESS_LIMIT,
    _CAPTURE_MODEP,
    _CAPTURE_STATUSP,
    _CDATA,
    _EVENTP,
    _EXECPP,
    _FLOATP,
    _GRAPHP,
    _RECORDEDP,
    _STREAM,
    _STREAMP,
    _U64P,
    _UINTPTR,
    _VOIDPP,
    NULL,
    _bools,
    _cstring,
    _describe,
    _event,
    _floats,
    _graph,
    _handle,
    _handles,
    _host,
    _int64s,
    _new_event,
    _new_graph,
    _pointer,
    _reraised,
    _stream,
    _workspace,
    _workspace_pointers,
    accepted_stream,
)


def _generic(api: str) -> Any:
    """The method of C function ``api`` on the generic path (see the module docstring)."""
    outs = out_parameters()[api]

    def method(self: NpuBackend, *args: Any) -> Any:
        fn = getattr(self._c, api)
        values = [ffi.new(ctype) for _, ctype in outs]
        full = list(args)
        for (position, _), value in zip(outs, values):
            full.insert(position, value)
        try:
            status = fn(*full)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, tuple(full), exc) from None
        if not outs:
            return status
        return (status, *(_out_value(ctype, value[0]) for (_, ctype), value in zip(outs, values)))

    method.__name__ = method.__qualname__ = api
    method.__doc__ = f"``{api}`` through the generic path."
    return method


def _out_value(ctype: Any, value: Any) -> Any:
    """An out-parameter as the backend interface returns it: an address as int, a number as itself."""
    if ctype.item.kind == "pointer":
        return int(ffi.cast(_UINTPTR, value))
    return float(value) if ctype.item.cname in ("float", "double") else int(value)


def _phase1(api: str) -> Any:
    """The method of an operator's ``aclnn*GetWorkspaceSize``: ``(status, workspace_size, executor)``.

    Takes the C arguments before the two out-parameters; None is NULL.
    """

    def method(self: NpuBackend, *args: Any) -> tuple[int, int, Any | None]:
        size, executor = _outs()
        try:
            status = getattr(self._c, api)(*[NULL if a is None else a for a in args], size, executor)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, _nulls(args), exc) from None
        ex = executor[0]
        return status, size[0], (ex if status == 0 and ex else None)  # a NULL cdata is false

    method.__name__ = method.__qualname__ = api
    return method


def _phase2(api: str) -> Any:
    """The method of an operator's launch: ``(workspace, workspace_size, executor, stream) -> status``."""

    def method(self: NpuBackend, workspace: int, workspace_size: int, executor: Any, stream: Any) -> int:
        # Every launch of a loop passes the same stream and workspace: the checks of _stream and
        # _workspace are made once (identity, one look-up), not once per launch.
        ws = None
        if type(workspace) is int:  # (not a bool or float equal to a cached address)
            ws = _workspace_pointers.get(workspace) if workspace else NULL
        if ws is None:
            ws = _workspace(workspace, api)
        st = stream if stream is accepted_stream[0] else _stream(stream, api)
        ex = NULL if executor is None else executor
        try:
            status: int = getattr(self._c, api)(ws, workspace_size, ex, st)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (ws, workspace_size, ex, st), exc) from None
        return status

    method.__name__ = method.__qualname__ = api
    return method


def _on_handle(api: str) -> Any:
    """The method of C function ``api`` whose one argument is a descriptor or executor handle."""

    def method(self: NpuBackend, handle: Any) -> int:
        try:
            return cast(int, getattr(self._c, api)(_handle(handle)))
        except TypeError as exc:
            raise self._bad_argument(api, (handle,), exc) from None

    method.__name__ = method.__qualname__ = api
    return method


# The operators' phases, the hot path, are one fast method per phase made from the
# prototypes (_phase1, _phase2) for every operator of the table: phase 1 allocates no
# out-parameters per call (one pair per thread, reset before each call); on failure the
# executor is None whatever the library left.
@install_operator_phases(phase1=_phase1, phase2=_phase2)
class NpuBackend(OperatorPhases):
    """The C API of the CANN subset over the real (or emulated) libraries.

    Construction loads the libraries (once per process) and raises
    :class:`LibraryNotFoundError` when that fails. Methods follow
    :class:`pyaclnn.backends._interface.Backend`.
    """

    name = "npu"
    maps_host_memory = False  # NumPy data is copied to the device: kernels read HBM, not PCIe

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
        if type(handle) is _CDATA and ffi.typeof(handle) is _STREAM:
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

    def phase2_call(
        self, api: str, workspace: int, workspace_size: int, executor: Any, stream: Any
    ) -> tuple[Callable[..., int], tuple[Any, ...]]:
        """Phase 2 ``api`` as its C function and the arguments it is given, checked and marshaled
        once (with the method's own checks and messages): each launch is then one cffi call."""
        args = (
            _workspace(workspace, api),
            workspace_size,
            NULL if executor is None else executor,
            _stream(stream, api),
        )
        function = getattr(self._c, api)
        if isinstance(function, ffi.CData):  # (not the stub of a missing function: it raises when called)
            refused = self._refused(api, args)
            if refused is not None:
                raise refused
        return function, args

    # -- operators of pyaclnn.ops (any operator header of the home) -------------------
    def operator_headers(self) -> Path:
        """The CANN home the libraries came from: its operator headers declare what can be called."""
        return self.home

    def operator_phases(self, declaration: Any) -> tuple[Callable[..., Any], Callable[..., int]]:
        """Phase 1 and phase 2 of a declared operator (see the Backend protocol): cffi declarations
        made from its prototypes, the symbols from the library that exports them; LookupError when
        none does."""
        api, launch_api = declaration.phase1_api, declaration.phase2_api
        library = declaration.library
        first = operator_function(self._loaded, api, declaration.phase1_prototype, library)
        second = operator_function(self._loaded, launch_api, declaration.phase2_prototype, library)
        names = [p.name for p in declaration.params]

        def phase1(*args: Any) -> tuple[int, int, Any | None]:
            size, executor = _outs()
            try:
                # (`in` is a C loop: the usual call has no None to turn into NULL)
                c_args = tuple(NULL if a is None else a for a in args) if None in args else args
                status = first(*c_args, size, executor)
            except (TypeError, OverflowError) as exc:
                raise _generic_refusal(api, names, args, exc) from None
            ex = executor[0]
            return status, size[0], (ex if status == 0 and ex else None)

        def phase2(workspace: int, workspace_size: int, executor: Any, stream: Any) -> int:
            ws = _workspace(workspace, launch_api)
            st = stream if stream is accepted_stream[0] else _stream(stream, launch_api)
            status: int = second(ws, workspace_size, NULL if executor is None else executor, st)
            return status

        phase1.__name__ = phase1.__qualname__ = api
        phase2.__name__ = phase2.__qualname__ = launch_api
        return phase1, phase2

    def operator_c_form(self, declaration: Any) -> CForm | None:
        """How the compiled repeated call passes the operator's phase-1 arguments (see
        :mod:`._c_form`); None when a parameter type cannot be passed that way."""
        d = declaration
        first = operator_function(self._loaded, d.phase1_api, d.phase1_prototype, d.library)
        second = operator_function(self._loaded, d.phase2_api, d.phase2_prototype, d.library)
        return c_form(first, second)

    def operator_library(self, path: Any) -> None:
        """Open a custom operator package's library now (locally); OSError when it does not open."""
        custom_library(Path(path))

    def _bad_argument(self, api: str, args: tuple[Any, ...], exc: Exception) -> Exception:
        """Name the argument cffi refused (the slow path of a failed call)."""
        return self._refused(api, args) or exc

    def _refused(self, api: str, args: tuple[Any, ...]) -> Exception | None:
        """The error naming the first of ``args`` that cffi refuses for ``api``; None if it takes them all."""
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
        return None

    # -- runtime (libascendcl / libacl_rt) ---------------------------------------
    def aclInit(self, config_path: str | None) -> int:
        return self._c.aclInit(_cstring(config_path, "aclInit", "config_path"))

    aclFinalize = _generic("aclFinalize")

    def aclGetRecentErrMsg(self) -> str:
        text = self._c.aclGetRecentErrMsg()
        # Only the latest pointer stays valid: copy now.
        return "" if text == NULL else ffi.string(text).decode("utf-8", "replace")

    aclrtSetDevice = _generic("aclrtSetDevice")
    aclrtResetDevice = _generic("aclrtResetDevice")
    aclrtGetDevice = _generic("aclrtGetDevice")
    aclrtGetDeviceCount = _generic("aclrtGetDeviceCount")
    aclrtSynchronizeDevice = _generic("aclrtSynchronizeDevice")

    def aclrtCreateStream(self) -> tuple[int, Any]:
        out = ffi.new(_STREAMP)
        status = self._c.aclrtCreateStream(out)
        stream = out[0]
        return status, (ffi.cast(_STREAM, stream) if status == 0 and stream != NULL else None)

    def aclrtCreateStreamWithConfig(self, priority: int, flag: int) -> tuple[int, Any]:
        out = ffi.new(_STREAMP)
        try:
            status = self._c.aclrtCreateStreamWithConfig(out, priority, flag)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument("aclrtCreateStreamWithConfig", (out, priority, flag), exc) from None
        stream = out[0]
        return status, (ffi.cast(_STREAM, stream) if status == 0 and stream != NULL else None)

    def aclrtSetStreamFailureMode(self, stream: Any, mode: int) -> int:
        api = "aclrtSetStreamFailureMode"
        st = _stream(stream, api)
        try:
            return self._c.aclrtSetStreamFailureMode(st, mode)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (st, mode), exc) from None

    def aclrtDestroyStream(self, stream: Any) -> int:
        return self._c.aclrtDestroyStream(_stream(stream, "aclrtDestroyStream"))

    def aclrtSynchronizeStream(self, stream: Any) -> int:
        return self._c.aclrtSynchronizeStream(_stream(stream, "aclrtSynchronizeStream"))

    def aclrtStreamQuery(self, stream: Any) -> tuple[int, int]:
        out = ffi.new("aclrtStreamStatus *")
        status = self._c.aclrtStreamQuery(_stream(stream, "aclrtStreamQuery"), out)
        return status, int(out[0])

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

    # -- stream capture (aclmdlRI*) ---------------------------------------------------
    def aclmdlRICaptureBegin(self, stream: Any, mode: int) -> int:
        api = "aclmdlRICaptureBegin"
        st = _stream(stream, api)
        try:
            return self._c.aclmdlRICaptureBegin(st, mode)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (st, mode), exc) from None

    def aclmdlRICaptureGetInfo(self, stream: Any) -> tuple[int, int, Any]:
        status_out, graph_out = ffi.new(_CAPTURE_STATUSP), ffi.new(_GRAPHP)
        status = self._c.aclmdlRICaptureGetInfo(
            _stream(stream, "aclmdlRICaptureGetInfo"), status_out, graph_out
        )
        return status, int(status_out[0]), _new_graph(status, graph_out[0])

    def aclmdlRICaptureEnd(self, stream: Any) -> tuple[int, Any]:
        out = ffi.new(_GRAPHP)
        status = self._c.aclmdlRICaptureEnd(_stream(stream, "aclmdlRICaptureEnd"), out)
        return status, _new_graph(status, out[0])

    def aclmdlRICaptureThreadExchangeMode(self, mode: int) -> tuple[int, int]:
        api = "aclmdlRICaptureThreadExchangeMode"
        inout = ffi.new(_CAPTURE_MODEP)
        try:
            inout[0] = mode
        except (TypeError, OverflowError) as exc:
            raise _reraised(exc)(
                f"{api}: mode (aclmdlRICaptureMode) needs an int, got {_describe(mode)}: {exc}"
            ) from None
        status = self._c.aclmdlRICaptureThreadExchangeMode(inout)
        return status, int(inout[0])

    def aclmdlRIExecuteAsync(self, model_ri: Any, stream: Any) -> int:
        api = "aclmdlRIExecuteAsync"
        return self._c.aclmdlRIExecuteAsync(_graph(model_ri, api), _stream(stream, api))

    def aclmdlRIDestroy(self, model_ri: Any) -> int:
        return self._c.aclmdlRIDestroy(_graph(model_ri, "aclmdlRIDestroy"))

    # -- profiler (aclprof*, libmsprofiler.so: optional, see _loading) -----------------
    def aclprofInit(self, profiler_result_path: str | None, length: int) -> int:
        api = "aclprofInit"
        path = _cstring(profiler_result_path, api, "profiler_result_path")
        try:
            return self._c.aclprofInit(path, length)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (path, length), exc) from None

    aclprofFinalize = _generic("aclprofFinalize")

    def aclprofCreateConfig(
        self,
        device_id_list: Sequence[int],
        aicore_metrics: int,
        aicore_events: Any,
        data_type_config: int,
    ) -> Any | None:
        api = "aclprofCreateConfig"
        try:
            devices = ffi.new("uint32_t[]", [d.__index__() for d in device_id_list])
        except (TypeError, AttributeError, OverflowError) as exc:
            kind = _reraised(exc) if isinstance(exc, OverflowError) else TypeError
            raise kind(
                f"{api}: device_id_list must be a sequence of uint32 values, got {_describe(device_id_list)}"
            ) from None
        args = (devices, len(device_id_list), aicore_metrics, _handle(aicore_events), data_type_config)
        try:
            result = self._c.aclprofCreateConfig(*args)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, args, exc) from None
        return None if result == NULL else result

    aclprofDestroyConfig = _on_handle("aclprofDestroyConfig")
    aclprofStart = _on_handle("aclprofStart")
    aclprofStop = _on_handle("aclprofStop")

    aclrtMalloc = _generic("aclrtMalloc")

    def aclrtFree(self, ptr: int) -> int:
        return self._c.aclrtFree(_pointer(ptr, "aclrtFree", "ptr"))

    aclrtMallocHost = _generic("aclrtMallocHost")

    def aclrtFreeHost(self, ptr: int) -> int:
        return self._c.aclrtFreeHost(_pointer(ptr, "aclrtFreeHost", "ptr"))

    # The mapping outlives the call: the caller keeps the host memory alive until it unregisters.
    def aclrtHostRegister(self, ptr: Any, size: int, type: int) -> tuple[int, int]:
        api = "aclrtHostRegister"
        p = _host(ptr, size, True, api, "ptr")
        out = ffi.new(_VOIDPP)
        try:
            status = self._c.aclrtHostRegister(p, size, type, out)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (p, size, type, out), exc) from None
        return status, int(ffi.cast(_UINTPTR, out[0]))

    def aclrtHostUnregister(self, ptr: Any) -> int:
        return self._c.aclrtHostUnregister(_host(ptr, 0, True, "aclrtHostUnregister", "ptr"))

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

    aclrtGetMemInfo = _generic("aclrtGetMemInfo")
    aclrtCtxSetSysParamOpt = _generic("aclrtCtxSetSysParamOpt")
    aclrtCtxGetSysParamOpt = _generic("aclrtCtxGetSysParamOpt")
    aclrtSetSysParamOpt = _generic("aclrtSetSysParamOpt")
    aclrtGetSysParamOpt = _generic("aclrtGetSysParamOpt")

    def aclrtGetSocName(self) -> str | None:
        name = self._c.aclrtGetSocName()
        return None if name == NULL else ffi.string(name).decode("utf-8", "replace")

    aclDataTypeSize = _generic("aclDataTypeSize")

    # -- aclnn meta API (libnnopbase) ---------------------------------------------
    def aclnnInit(self, config_path: str | None) -> int:
        return self._c.aclnnInit(_cstring(config_path, "aclnnInit", "config_path"))

    aclnnFinalize = _generic("aclnnFinalize")

    # Hand-written (its arrays need marshaling, and it runs for every tensor of a call); the numpy
    # backend implements the same generated Backend method, so the parameter list stands there too.
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

    aclDestroyTensor = _on_handle("aclDestroyTensor")

    def aclCreateIntArray(self, values: Sequence[int]) -> Any | None:
        array = _int64s(values, "aclCreateIntArray", "values")
        result = self._c.aclCreateIntArray(array, len(array))
        return None if result == NULL else result

    aclDestroyIntArray = _on_handle("aclDestroyIntArray")

    def aclCreateBoolArray(self, values: Sequence[bool]) -> Any | None:
        array = _bools(values, "aclCreateBoolArray", "values")
        result = self._c.aclCreateBoolArray(array, len(array))
        return None if result == NULL else result

    aclDestroyBoolArray = _on_handle("aclDestroyBoolArray")

    def aclCreateScalar(self, value: Any, data_type: int) -> Any | None:
        api = "aclCreateScalar"
        buffer = _host(value, 0, False, api, "value")  # CANN copies the value
        try:
            result = self._c.aclCreateScalar(buffer, data_type)
        except (TypeError, OverflowError) as exc:
            raise self._bad_argument(api, (buffer, data_type), exc) from None
        return None if result == NULL else result

    aclDestroyScalar = _on_handle("aclDestroyScalar")

    def aclCreateFloatArray(self, values: Sequence[float]) -> Any | None:
        array = _floats(values, "aclCreateFloatArray", "value")
        result = self._c.aclCreateFloatArray(array, len(array))
        return None if result == NULL else result

    aclDestroyFloatArray = _on_handle("aclDestroyFloatArray")

    def aclCreateTensorList(self, values: Sequence[Any]) -> Any | None:
        array = _handles(values, "aclTensor *", "aclCreateTensorList", "value")
        result = self._c.aclCreateTensorList(array, len(array))
        return None if result == NULL else result

    aclDestroyTensorList = _on_handle("aclDestroyTensorList")

    def aclCreateScalarList(self, values: Sequence[Any]) -> Any | None:
        array = _handles(values, "aclScalar *", "aclCreateScalarList", "value")
        result = self._c.aclCreateScalarList(array, len(array))
        return None if result == NULL else result

    aclDestroyScalarList = _on_handle("aclDestroyScalarList")
    aclSetAclOpExecutorRepeatable = _on_handle("aclSetAclOpExecutorRepeatable")
    aclDestroyAclOpExecutor = _on_handle("aclDestroyAclOpExecutor")


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


def _generic_refusal(api: str, names: Sequence[str], args: tuple[Any, ...], exc: Exception) -> Exception:
    """The error for an argument cffi refused in a call of a generic operator: it names the C
    parameter when cffi's message tells its position (``argument N``)."""
    text = str(exc)
    words = text.split()
    position = None
    for before, word in zip(words, words[1:]):
        if before == "argument" and word.isdigit():
            position = int(word) - 1
    if position is not None and 0 <= position < len(names):
        text = f"{names[position]} ({_describe(args[position])}): {text}"
    return _reraised(exc)(f"{api}: {text}")


def _nulls(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(NULL if v is None else v for v in values)

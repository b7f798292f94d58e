"""The npu backend: the C API of the CANN subset, forwarded through cffi.

One method per C function of ``include/decl`` (:class:`NpuBackend`), over the
libraries :mod:`._loading` opened, with the argument conversions of
:mod:`._marshal`; :mod:`._probe` says whether a device is usable.
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from .._interface import LIVE_COUNT_NAMES
from ._ffi import Symbols, ffi, parameter_names
from ._loading import load
from ._marshal import (
    _ADDRESS_LIMIT,
    _CDATA,
    _EVENTP,
    _EXECPP,
    _FLOATP,
    _I32P,
    _I64P,
    _RECORDEDP,
    _SIZEP,
    _STREAM,
    _STREAMP,
    _U32P,
    _U64P,
    _UINTPTR,
    _VOIDPP,
    NULL,
    _bools,
    _cstring,
    _describe,
    _event,
    _handle,
    _host,
    _int64s,
    _new_event,
    _pointer,
    _reraised,
    _stream,
    _typeof,
    _workspace,
)


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

"""The one cffi FFI of the npu backend, declared from ``include/decl``.

ABI mode: cffi reads the declaration files verbatim (no compiler, no CANN
headers) and later resolves the functions in the shared libraries that
:mod:`._discovery` finds. Nothing here opens a library.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Protocol

import cffi

from ... import _decl

ffi = cffi.FFI()
for _name in _decl.DECL_FILES:
    ffi.cdef(_decl.read(_name))
del _name

_PROTOTYPE = re.compile(r"\b(\w+)\s*\(([^()]*)\)\s*;")


@functools.cache
def function_names() -> tuple[str, ...]:
    """Every function the declaration files declare, in declaration order."""
    # cffi keeps its parse result in a private table; the "function " keys are
    # exactly the prototypes it will resolve by name.
    return tuple(key.split(" ", 1)[1] for key in ffi._parser._declarations if key.startswith("function "))


@functools.cache
def parameter_names() -> dict[str, tuple[str, ...]]:
    """C parameter names of every declared function, for error messages.

    cffi drops parameter names, so they are read from the same declaration
    text cffi parsed (``void`` parameter lists give an empty tuple).
    """
    names: dict[str, tuple[str, ...]] = {}
    for decl_file in _decl.DECL_FILES:
        for func, params in _PROTOTYPE.findall(_decl.read(decl_file)):
            params = params.strip()
            if params in ("", "void"):
                names[func] = ()
            else:
                names[func] = tuple(re.findall(r"(\w+)\s*$", p.strip())[0] for p in params.split(","))
    return names


@functools.cache
def out_parameters() -> dict[str, tuple[tuple[int, Any], ...]]:
    """``{function: ((position, pointer ctype), ...)}`` of the out-parameters of every declared function.

    The convention of include/decl: an out-parameter is a pointer that is not
    ``const`` to a number, an enum or a pointer (``int32_t *deviceId``,
    ``void **devPtr``, ``aclOpExecutor **executor``); cffi drops ``const``, so
    the declaration text decides. ``char *`` strings are never out-parameters.
    """
    outs: dict[str, tuple[tuple[int, Any], ...]] = {}
    for decl_file in _decl.DECL_FILES:
        for func, params in _PROTOTYPE.findall(_decl.read(decl_file)):
            found = []
            for position, param in enumerate(p.strip() for p in params.split(",")):
                ctype_text = re.sub(r"\w+\s*$", "", param).strip()
                if param in ("", "void") or ctype_text.startswith("const ") or "*" not in ctype_text:
                    continue
                ctype = ffi.typeof(ctype_text)
                if ctype.item.kind in ("primitive", "enum", "pointer") and ctype.item.cname != "char":
                    found.append((position, ctype))
            outs[func] = tuple(found)
    return outs


def integer_constants() -> dict[str, int]:
    """Every ``#define`` integer and enumerator value as cffi parsed them.

    This is what cffi passes to and compares with C, independent of
    pyaclnn's own regex-based reading in :mod:`pyaclnn._decl`; the tests
    compare the two.
    """
    values: dict[str, int] = {}
    process = _process_lib()
    for key in ffi._parser._declarations:  # the names only; values via public API
        kind, _, name = key.partition(" ")
        if kind == "macro":
            values[name] = int(getattr(process, name))
        elif kind == "typedef":
            ctype = ffi.typeof(name)
            if ctype.kind == "enum":
                values.update(ctype.relements)
    return values


class Symbols(Protocol):
    """The declared C functions as bound by the loader (a stub where no library exports one).

    One method per function of include/decl (tests/test_typing.py checks the two agree):
    pointers and handles are cffi cdata (``Any``: cffi has no stubs), C integers Python ints.
    """

    def aclInit(self, configPath: Any, /) -> int: ...
    def aclFinalize(self) -> int: ...
    def aclFinalizeReference(self, refCount: Any, /) -> int: ...
    def aclGetRecentErrMsg(self) -> Any: ...
    def aclrtSetDevice(self, deviceId: Any, /) -> int: ...
    def aclrtResetDevice(self, deviceId: Any, /) -> int: ...
    def aclrtGetDevice(self, deviceId: Any, /) -> int: ...
    def aclrtSynchronizeDevice(self) -> int: ...
    def aclrtGetDeviceCount(self, count: Any, /) -> int: ...
    def aclrtCreateStream(self, stream: Any, /) -> int: ...
    def aclrtDestroyStream(self, stream: Any, /) -> int: ...
    def aclrtSynchronizeStream(self, stream: Any, /) -> int: ...
    def aclrtCreateEvent(self, event: Any, /) -> int: ...
    def aclrtCreateEventWithFlag(self, event: Any, flag: Any, /) -> int: ...
    def aclrtDestroyEvent(self, event: Any, /) -> int: ...
    def aclrtRecordEvent(self, event: Any, stream: Any, /) -> int: ...
    def aclrtQueryEventStatus(self, event: Any, status: Any, /) -> int: ...
    def aclrtSynchronizeEvent(self, event: Any, /) -> int: ...
    def aclrtEventElapsedTime(self, ms: Any, startEvent: Any, endEvent: Any, /) -> int: ...
    def aclrtStreamWaitEvent(self, stream: Any, event: Any, /) -> int: ...
    def aclrtMalloc(self, devPtr: Any, size: Any, policy: Any, /) -> int: ...
    def aclrtFree(self, devPtr: Any, /) -> int: ...
    def aclrtMallocHost(self, hostPtr: Any, size: Any, /) -> int: ...
    def aclrtFreeHost(self, hostPtr: Any, /) -> int: ...
    def aclrtMemcpy(self, dst: Any, destMax: Any, src: Any, count: Any, kind: Any, /) -> int: ...
    def aclrtMemcpyAsync(
        self, dst: Any, destMax: Any, src: Any, count: Any, kind: Any, stream: Any, /
    ) -> int: ...
    def aclrtMemset(self, devPtr: Any, maxCount: Any, value: Any, count: Any, /) -> int: ...
    def aclrtMemsetAsync(self, devPtr: Any, maxCount: Any, value: Any, count: Any, stream: Any, /) -> int: ...
    def aclrtGetMemInfo(self, attr: Any, free: Any, total: Any, /) -> int: ...
    def aclrtCtxSetSysParamOpt(self, opt: Any, value: Any, /) -> int: ...
    def aclrtCtxGetSysParamOpt(self, opt: Any, value: Any, /) -> int: ...
    def aclrtSetSysParamOpt(self, opt: Any, value: Any, /) -> int: ...
    def aclrtGetSysParamOpt(self, opt: Any, value: Any, /) -> int: ...
    def aclrtGetVersion(self, majorVersion: Any, minorVersion: Any, patchVersion: Any, /) -> int: ...
    def aclrtGetSocName(self) -> Any: ...
    def aclDataTypeSize(self, dataType: Any, /) -> int: ...
    def aclCreateTensor(
        self,
        viewDims: Any,
        viewDimsNum: Any,
        dataType: Any,
        stride: Any,
        offset: Any,
        format: Any,
        storageDims: Any,
        storageDimsNum: Any,
        tensorData: Any,
        /,
    ) -> Any: ...
    def aclCreateScalar(self, value: Any, dataType: Any, /) -> Any: ...
    def aclCreateIntArray(self, value: Any, size: Any, /) -> Any: ...
    def aclCreateFloatArray(self, value: Any, size: Any, /) -> Any: ...
    def aclCreateBoolArray(self, value: Any, size: Any, /) -> Any: ...
    def aclDestroyTensor(self, tensor: Any, /) -> int: ...
    def aclDestroyScalar(self, scalar: Any, /) -> int: ...
    def aclDestroyIntArray(self, array: Any, /) -> int: ...
    def aclDestroyFloatArray(self, array: Any, /) -> int: ...
    def aclDestroyBoolArray(self, array: Any, /) -> int: ...
    def aclGetViewOffset(self, tensor: Any, offset: Any, /) -> int: ...
    def aclGetFormat(self, tensor: Any, format: Any, /) -> int: ...
    def aclGetDataType(self, tensor: Any, dataType: Any, /) -> int: ...
    def aclGetIntArraySize(self, array: Any, size: Any, /) -> int: ...
    def aclGetBoolArraySize(self, array: Any, size: Any, /) -> int: ...
    def aclSetAclOpExecutorRepeatable(self, executor: Any, /) -> int: ...
    def aclDestroyAclOpExecutor(self, executor: Any, /) -> int: ...
    def aclSetRawTensorAddr(self, tensor: Any, addr: Any, /) -> int: ...
    def aclGetRawTensorAddr(self, tensor: Any, addr: Any, /) -> int: ...
    def aclnnInit(self, configPath: Any, /) -> int: ...
    def aclnnFinalize(self) -> int: ...
    def aclnnMaxPool3dWithArgmaxGetWorkspaceSize(
        self,
        self_: Any,
        kernelSize: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        ceilMode: Any,
        out: Any,
        indices: Any,
        workspaceSize: Any,
        executor: Any,
        /,
    ) -> int: ...
    def aclnnMaxPool3dWithArgmax(
        self, workspace: Any, workspaceSize: Any, executor: Any, stream: Any, /
    ) -> int: ...
    def aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
        self,
        gradOutput: Any,
        self_: Any,
        indices: Any,
        kernelSize: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        ceilMode: Any,
        gradInput: Any,
        workspaceSize: Any,
        executor: Any,
        /,
    ) -> int: ...
    def aclnnMaxPool3dWithArgmaxBackward(
        self, workspace: Any, workspaceSize: Any, executor: Any, stream: Any, /
    ) -> int: ...
    def aclnnGridSampler3DGetWorkspaceSize(
        self,
        input: Any,
        grid: Any,
        interpolationMode: Any,
        paddingMode: Any,
        alignCorners: Any,
        out: Any,
        workspaceSize: Any,
        executor: Any,
        /,
    ) -> int: ...
    def aclnnGridSampler3D(
        self, workspace: Any, workspaceSize: Any, executor: Any, stream: Any, /
    ) -> int: ...
    def aclnnGridSampler3DBackwardGetWorkspaceSize(
        self,
        gradOutput: Any,
        input: Any,
        grid: Any,
        interpolationMode: Any,
        paddingMode: Any,
        alignCorners: Any,
        outputMask: Any,
        inputGrad: Any,
        gridGrad: Any,
        workspaceSize: Any,
        executor: Any,
        /,
    ) -> int: ...
    def aclnnGridSampler3DBackward(
        self, workspace: Any, workspaceSize: Any, executor: Any, stream: Any, /
    ) -> int: ...
    def pyaclnnEmuLiveCounts(self, counts: Any, n: Any, /) -> int: ...
    def pyaclnnEmuHazardCount(self) -> int: ...
    def pyaclnnEmuDeviceLiveCounts(self, device: Any, counts: Any, n: Any, /) -> int: ...


@functools.cache
def _process_lib() -> Any:  # Any: a cffi library object (cffi has no stubs)
    # ABI mode exposes "#define NAME <int>" on any library object; the process
    # itself (dlopen(None)) is always there and holds no CANN state.
    return ffi.dlopen(None)

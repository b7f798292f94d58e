"""The interface every backend implements: the C API of the CANN subset.

A backend is an object with one method per C function of include/decl, named
exactly like the C function. Each returns what the C function returns plus its
out-parameters, so the low-level API (pyaclnn.acl, pyaclnn.aclnn) can treat
both backends alike and turn every failing status into an exception:

* a call returning ``aclError``/``aclnnStatus`` returns ``status`` if it has no
  out-parameter, else ``(status, out1, ...)``;
* a ``aclCreate*`` call returns the new handle, or ``None`` for C's NULL (the
  reason is then in ``aclGetRecentErrMsg()``);
* device and host pointers are Python ints (0 is NULL); host-side buffers of
  memcpy may also be objects with the buffer protocol (NumPy arrays);
* handles (streams, tensors, arrays, executors) are opaque objects owned by the
  backend that made them; ``None`` is C's NULL;
* a backend never raises for a condition the C API reports with a status; it
  raises ``TypeError`` only for Python values that cannot be passed to C at all.

The numpy backend implements this in Python over host memory
(pyaclnn.backends.numpy); the npu backend forwards to CANN through cffi
(pyaclnn.backends.npu).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

Handle = Any
Pointer = int

#: Keys of ``live_counts()``: the order of the emulator's pyaclnnEmuLiveCounts
#: (include/decl/emulator.h), which the numpy backend reports too.
LIVE_COUNT_NAMES = (
    "device_allocs",
    "host_allocs",
    "tensors",
    "int_arrays",
    "bool_arrays",
    "executors",
    "streams",
)
HostBuffer = Any  # int pointer or buffer-protocol object


class Backend(Protocol):
    name: str  # "numpy" or "npu"

    # -- emulation only (None on real CANN) -------------------------------------
    def live_counts(self) -> dict[str, int] | None: ...  # keys: LIVE_COUNT_NAMES
    def hazard_count(self) -> int | None: ...  # hazards seen so far (pyaclnnEmuHazardCount)

    # -- memory and streams of other libraries (not C functions) ----------------
    def adopt_stream(self, handle: Any) -> Handle: ...  # an aclrtStream made elsewhere, or TypeError
    # the device owning [ptr, ptr + nbytes) in one allocation; -1: not device memory; None: cannot tell
    def device_memory(self, ptr: Pointer, nbytes: int) -> int | None: ...

    # -- runtime (libascendcl / libacl_rt) ------------------------------------
    def aclInit(self, config_path: str | None) -> int: ...
    def aclFinalize(self) -> int: ...
    def aclGetRecentErrMsg(self) -> str: ...  # "" when none; reading clears it
    def aclrtSetDevice(self, device_id: int) -> int: ...
    def aclrtResetDevice(self, device_id: int) -> int: ...
    def aclrtGetDevice(self) -> tuple[int, int]: ...
    def aclrtGetDeviceCount(self) -> tuple[int, int]: ...
    def aclrtSynchronizeDevice(self) -> int: ...
    def aclrtCreateStream(self) -> tuple[int, Handle]: ...
    def aclrtDestroyStream(self, stream: Handle) -> int: ...
    def aclrtSynchronizeStream(self, stream: Handle) -> int: ...
    # Events. aclrtQueryEventStatus returns an aclrtEventRecordedStatus value
    # (NOT_READY 0, COMPLETE 1); aclrtEventElapsedTime returns milliseconds.
    def aclrtCreateEvent(self) -> tuple[int, Handle]: ...
    def aclrtCreateEventWithFlag(self, flag: int) -> tuple[int, Handle]: ...
    def aclrtDestroyEvent(self, event: Handle) -> int: ...
    def aclrtRecordEvent(self, event: Handle, stream: Handle) -> int: ...
    def aclrtQueryEventStatus(self, event: Handle) -> tuple[int, int]: ...
    def aclrtSynchronizeEvent(self, event: Handle) -> int: ...
    def aclrtEventElapsedTime(self, start: Handle, end: Handle) -> tuple[int, float]: ...
    def aclrtStreamWaitEvent(self, stream: Handle, event: Handle) -> int: ...
    def aclrtMalloc(self, size: int, policy: int) -> tuple[int, Pointer]: ...
    def aclrtFree(self, ptr: Pointer) -> int: ...
    def aclrtMallocHost(self, size: int) -> tuple[int, Pointer]: ...
    def aclrtFreeHost(self, ptr: Pointer) -> int: ...
    def aclrtMemcpy(self, dst: HostBuffer, dest_max: int, src: HostBuffer, count: int, kind: int) -> int: ...
    def aclrtMemcpyAsync(
        self, dst: HostBuffer, dest_max: int, src: HostBuffer, count: int, kind: int, stream: Handle
    ) -> int: ...
    def aclrtMemset(self, ptr: Pointer, max_count: int, value: int, count: int) -> int: ...
    def aclrtMemsetAsync(
        self, ptr: Pointer, max_count: int, value: int, count: int, stream: Handle
    ) -> int: ...
    def aclrtGetMemInfo(self, attr: int) -> tuple[int, int, int]: ...  # (status, free, total)
    def aclrtCtxSetSysParamOpt(self, opt: int, value: int) -> int: ...
    def aclrtCtxGetSysParamOpt(self, opt: int) -> tuple[int, int]: ...
    def aclrtSetSysParamOpt(self, opt: int, value: int) -> int: ...
    def aclrtGetSysParamOpt(self, opt: int) -> tuple[int, int]: ...
    def aclrtGetSocName(self) -> str | None: ...
    def aclDataTypeSize(self, data_type: int) -> int: ...

    # -- aclnn meta API (libnnopbase) ------------------------------------------
    def aclnnInit(self, config_path: str | None) -> int: ...
    def aclnnFinalize(self) -> int: ...
    def aclCreateTensor(
        self,
        view_dims: Sequence[int],
        data_type: int,
        strides: Sequence[int] | None,
        offset: int,
        fmt: int,
        storage_dims: Sequence[int],
        data: Pointer,
    ) -> Handle | None: ...
    def aclDestroyTensor(self, tensor: Handle) -> int: ...
    def aclCreateIntArray(self, values: Sequence[int]) -> Handle | None: ...
    def aclDestroyIntArray(self, array: Handle) -> int: ...
    def aclCreateBoolArray(self, values: Sequence[bool]) -> Handle | None: ...
    def aclDestroyBoolArray(self, array: Handle) -> int: ...
    def aclSetAclOpExecutorRepeatable(self, executor: Handle) -> int: ...
    def aclDestroyAclOpExecutor(self, executor: Handle) -> int: ...

    # -- operators (libopapi*) -------------------------------------------------
    # Phase 1 returns (status, workspace_size, executor); the executor is None
    # when the op has nothing to do (empty tensors) or on failure. Phase 2
    # consumes a non-repeatable executor.
    def aclnnMaxPool3dWithArgmaxGetWorkspaceSize(
        self,
        self_: Handle,
        kernel_size: Handle,
        stride: Handle,
        padding: Handle,
        dilation: Handle,
        ceil_mode: bool,
        out: Handle,
        indices: Handle,
    ) -> tuple[int, int, Handle | None]: ...
    def aclnnMaxPool3dWithArgmax(
        self, workspace: Pointer, workspace_size: int, executor: Handle, stream: Handle
    ) -> int: ...
    def aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
        self,
        grad_output: Handle,
        self_: Handle,
        indices: Handle,
        kernel_size: Handle,
        stride: Handle,
        padding: Handle,
        dilation: Handle,
        ceil_mode: bool,
        grad_input: Handle,
    ) -> tuple[int, int, Handle | None]: ...
    def aclnnMaxPool3dWithArgmaxBackward(
        self, workspace: Pointer, workspace_size: int, executor: Handle, stream: Handle
    ) -> int: ...
    def aclnnGridSampler3DGetWorkspaceSize(
        self,
        input: Handle,
        grid: Handle,
        interpolation_mode: int,
        padding_mode: int,
        align_corners: bool,
        out: Handle,
    ) -> tuple[int, int, Handle | None]: ...
    def aclnnGridSampler3D(
        self, workspace: Pointer, workspace_size: int, executor: Handle, stream: Handle
    ) -> int: ...
    def aclnnGridSampler3DBackwardGetWorkspaceSize(
        self,
        grad_output: Handle,
        input: Handle,
        grid: Handle,
        interpolation_mode: int,
        padding_mode: int,
        align_corners: bool,
        output_mask: Handle,
        input_grad: Handle,
        grid_grad: Handle,
    ) -> tuple[int, int, Handle | None]: ...
    def aclnnGridSampler3DBackward(
        self, workspace: Pointer, workspace_size: int, executor: Handle, stream: Handle
    ) -> int: ...

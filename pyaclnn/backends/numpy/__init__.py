"""The numpy backend: a host emulation of the CANN C API subset.

"Device" memory is host memory behind synthetic addresses (``_heap``),
descriptors are Python objects (``_objects``), phase 1 of each operator runs
the NPU's checks (``pyaclnn.kernels.checks``) and phase 2 runs the NumPy
kernels on strided views of the emulated memory. Streams execute work
immediately, in the calling thread. See pyaclnn.backends._interface for the
calling convention.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np

from ... import _decl
from ... import dtypes as _dtypes
from ...kernels import checks as _checks
from ...kernels import grid_sampler3d as _grid
from ...kernels import max_pool3d as _pool
from .._interface import LIVE_COUNT_NAMES
from ._cvalues import c_address, c_bool, c_bools, c_int, c_ints, c_size
from ._heap import Heap, HeapError
from ._objects import BoolArray, Executor, IntArray, Registry, Stream, Tensor

_c = _decl.constant
SUCCESS = 0
INVALID_PARAM = _c("ACL_ERROR_INVALID_PARAM")
UNINITIALIZE = _c("ACL_ERROR_UNINITIALIZE")
REPEAT_INITIALIZE = _c("ACL_ERROR_REPEAT_INITIALIZE")
REPEAT_FINALIZE = _c("ACL_ERROR_REPEAT_FINALIZE")
INVALID_RESOURCE_HANDLE = _c("ACL_ERROR_INVALID_RESOURCE_HANDLE")
RT_INVALID_DEVICEID = _c("ACL_ERROR_RT_INVALID_DEVICEID")
RT_MEMORY_ALLOCATION = _c("ACL_ERROR_RT_MEMORY_ALLOCATION")
RT_MEMORY_FREE = _c("ACL_ERROR_RT_MEMORY_FREE")
RT_PARAM_INVALID = _c("ACL_ERROR_RT_PARAM_INVALID")
RT_SYSPARAMOPT_NOT_SET = _c("ACL_ERROR_RT_SYSPARAMOPT_NOT_SET")
NN_PARAM_NULLPTR = _c("ACLNN_ERR_PARAM_NULLPTR")
NN_PARAM_INVALID = _c("ACLNN_ERR_PARAM_INVALID")
NN_RUNTIME_ERROR = _c("ACLNN_ERR_RUNTIME_ERROR")
NN_INNER_NULLPTR = _c("ACLNN_ERR_INNER_NULLPTR")

_H2H, _H2D, _D2H, _D2D, _DEFAULT = (
    _c(n)
    for n in (
        "ACL_MEMCPY_HOST_TO_HOST",
        "ACL_MEMCPY_HOST_TO_DEVICE",
        "ACL_MEMCPY_DEVICE_TO_HOST",
        "ACL_MEMCPY_DEVICE_TO_DEVICE",
        "ACL_MEMCPY_DEFAULT",
    )
)
_KNOWN_SYS_PARAM_OPTS = frozenset(_decl.enums()["aclSysParamOpt"].values())

DEVICE_COUNT = 1
SOC_NAME = "Ascend910B (pyaclnn numpy emulation)"
# Workspace the emulated backward ops ask for, so callers exercise the workspace path.
BACKWARD_WORKSPACE = 32


class NumpyBackend:
    """Host emulation of the C API (one device, id 0, Atlas A2/A3 rules)."""

    name = "numpy"

    def __init__(self) -> None:
        self.heap = Heap(base=0x100000000)
        self.host_heap = Heap(base=0x7F0000000000)
        self.tensors = Registry("tensor")
        self.int_arrays = Registry("int array")
        self.bool_arrays = Registry("bool array")
        self.executors = Registry("executor")
        self.streams = Registry("stream")
        self._tls = threading.local()
        self._lock = threading.Lock()
        self._init_count = 0
        self._sys_params: dict[int, int] = {}

    # -- errors -------------------------------------------------------------
    def _error(self, status: int, message: str) -> int:
        self._tls.message = message
        return status

    def _null(self, status: int, message: str) -> None:
        """Failure of an aclCreate* call: NULL, with the reason left in the recent error message."""
        self._error(status, message)
        return None

    def aclGetRecentErrMsg(self) -> str:
        message = getattr(self._tls, "message", "")
        self._tls.message = ""
        return message

    # -- init, device -------------------------------------------------------
    def aclInit(self, config_path: str | None) -> int:
        with self._lock:
            self._init_count += 1
            if self._init_count > 1:
                return self._error(REPEAT_INITIALIZE, "aclInit was already called in this process")
        return SUCCESS

    def aclFinalize(self) -> int:
        with self._lock:
            if self._init_count == 0:
                return self._error(REPEAT_FINALIZE, "aclFinalize without a matching aclInit")
            self._init_count = 0
        return SUCCESS

    def aclnnInit(self, config_path: str | None) -> int:
        return SUCCESS

    def aclnnFinalize(self) -> int:
        return SUCCESS

    def _device_ok(self, device_id: int) -> bool:
        return isinstance(device_id, (int, np.integer)) and 0 <= device_id < DEVICE_COUNT

    def aclrtSetDevice(self, device_id: int) -> int:
        if not self._device_ok(device_id):
            return self._error(RT_INVALID_DEVICEID, f"deviceId {device_id} is invalid; the only device is 0")
        self._tls.device = int(device_id)
        return SUCCESS

    def aclrtResetDevice(self, device_id: int) -> int:
        if not self._device_ok(device_id):
            return self._error(RT_INVALID_DEVICEID, f"deviceId {device_id} is invalid; the only device is 0")
        self._tls.device = None
        return SUCCESS

    def aclrtGetDevice(self) -> tuple[int, int]:
        device = getattr(self._tls, "device", None)
        if device is None:
            return self._error(RT_INVALID_DEVICEID, "no device is set in this thread"), -1
        return SUCCESS, device

    def aclrtGetDeviceCount(self) -> tuple[int, int]:
        return SUCCESS, DEVICE_COUNT

    def aclrtSynchronizeDevice(self) -> int:
        return SUCCESS

    def aclrtGetSocName(self) -> str | None:
        return SOC_NAME

    def aclDataTypeSize(self, data_type: int) -> int:
        return _dtypes.size_of(data_type)

    def aclrtGetMemInfo(self, attr: int) -> tuple[int, int, int]:
        return SUCCESS, self.heap.capacity - self.heap.used, self.heap.capacity

    # -- system parameters --------------------------------------------------
    def aclrtCtxSetSysParamOpt(self, opt: int, value: int) -> int:
        if opt not in _KNOWN_SYS_PARAM_OPTS:
            return self._error(RT_PARAM_INVALID, f"opt {opt} is not an aclSysParamOpt value")
        self._sys_params[opt] = int(value)
        return SUCCESS

    def aclrtCtxGetSysParamOpt(self, opt: int) -> tuple[int, int]:
        if opt not in self._sys_params:
            return self._error(RT_SYSPARAMOPT_NOT_SET, f"system parameter {opt} was never set"), 0
        return SUCCESS, self._sys_params[opt]

    aclrtSetSysParamOpt = aclrtCtxSetSysParamOpt
    aclrtGetSysParamOpt = aclrtCtxGetSysParamOpt

    # -- streams ------------------------------------------------------------
    def aclrtCreateStream(self) -> tuple[int, Stream]:
        return SUCCESS, self.streams.add(Stream())

    def _stream_ok(self, stream: Any) -> bool:
        return stream is None or self.streams.is_live(stream)

    def aclrtDestroyStream(self, stream: Any) -> int:
        if stream is None or not self.streams.remove(stream):
            return self._error(INVALID_RESOURCE_HANDLE, "stream is not a live stream of this backend")
        return SUCCESS

    def aclrtSynchronizeStream(self, stream: Any) -> int:
        if not self._stream_ok(stream):
            return self._error(INVALID_RESOURCE_HANDLE, "stream is not a live stream of this backend")
        return SUCCESS

    # -- memory -------------------------------------------------------------
    def _malloc(self, heap: Heap, size: int, host: bool, api: str) -> tuple[int, int]:
        size = c_size(size, api, "size")
        if size == 0:
            return self._error(INVALID_PARAM, f"size is {size}; it must be a positive number of bytes"), 0
        try:
            return SUCCESS, heap.allocate(size, host=host)
        except MemoryError as exc:
            return self._error(RT_MEMORY_ALLOCATION, str(exc)), 0

    def aclrtMalloc(self, size: int, policy: int) -> tuple[int, int]:
        return self._malloc(self.heap, size, host=False, api="aclrtMalloc")

    def aclrtMallocHost(self, size: int) -> tuple[int, int]:
        return self._malloc(self.host_heap, size, host=True, api="aclrtMallocHost")

    def aclrtFree(self, ptr: int) -> int:
        ptr = c_address(ptr, "aclrtFree", "devPtr")
        try:
            self.heap.free(ptr)
        except HeapError as exc:
            return self._error(RT_MEMORY_FREE, f"devPtr: {exc} (double free, or not from aclrtMalloc)")
        return SUCCESS

    def aclrtFreeHost(self, ptr: int) -> int:
        ptr = c_address(ptr, "aclrtFreeHost", "hostPtr")
        try:
            self.host_heap.free(ptr, host=True)
        except HeapError as exc:
            return self._error(RT_MEMORY_FREE, f"hostPtr: {exc} (double free, or not from aclrtMallocHost)")
        return SUCCESS

    def _bytes(self, where: Any, count: int, side: str, what: str, writable: bool) -> np.ndarray:
        """uint8 view of ``count`` bytes of ``where``: a device or host address, or a host buffer."""
        if isinstance(where, (int, np.integer)):
            heap = self.heap if side == "device" else self.host_heap
            return heap.bytes_at(c_address(where, "aclrtMemcpy", what), count, what)
        if side == "device":
            raise HeapError(
                f"{what} must be a device address (an int from aclrtMalloc), got {type(where).__name__}"
            )
        if isinstance(where, np.ndarray):  # also dtypes without a buffer format, such as bfloat16
            if not where.flags.c_contiguous:
                raise HeapError(f"{what} must be a contiguous buffer")
            if writable and not where.flags.writeable:
                raise HeapError(f"{what} is a read-only buffer")
            flat = where.reshape(-1).view(np.uint8)
        else:
            view = memoryview(where)
            if writable and view.readonly:
                raise HeapError(f"{what} is a read-only buffer")
            if not view.c_contiguous:
                raise HeapError(f"{what} must be a contiguous buffer")
            flat = np.frombuffer(view.cast("B"), dtype=np.uint8) if view.nbytes else np.empty(0, np.uint8)
        if count > flat.size:
            raise HeapError(f"{what} holds {flat.size} bytes; {count} were asked for")
        return flat[:count]

    def aclrtMemcpy(self, dst: Any, dest_max: int, src: Any, count: int, kind: int) -> int:
        dest_max = c_size(dest_max, "aclrtMemcpy", "destMax")
        count = c_size(count, "aclrtMemcpy", "count")
        kind = c_int(kind, "aclrtMemcpy", "kind")
        if count > dest_max:
            return self._error(INVALID_PARAM, f"count {count} exceeds destMax {dest_max}")
        sides = {
            _H2H: ("host", "host"),
            _H2D: ("device", "host"),
            _D2H: ("host", "device"),
            _D2D: ("device", "device"),
        }
        if kind == _DEFAULT:
            sides[kind] = (self._side(dst), self._side(src))
        if kind not in sides:
            return self._error(INVALID_PARAM, f"kind {kind} is not an aclrtMemcpyKind this backend supports")
        if count == 0:
            return SUCCESS
        dst_side, src_side = sides[kind]
        try:
            target = self._bytes(dst, count, dst_side, "dst", writable=True)
            source = self._bytes(src, count, src_side, "src", writable=False)
        except (HeapError, TypeError) as exc:
            return self._error(INVALID_PARAM, str(exc))
        target[:] = source
        return SUCCESS

    def _side(self, where: Any) -> str:
        if isinstance(where, (int, np.integer)) and self.heap.find(int(where)) is not None:
            return "device"
        return "host"

    def aclrtMemcpyAsync(self, dst: Any, dest_max: int, src: Any, count: int, kind: int, stream: Any) -> int:
        if not self._stream_ok(stream):
            return self._error(INVALID_RESOURCE_HANDLE, "stream is not a live stream of this backend")
        return self.aclrtMemcpy(dst, dest_max, src, count, kind)

    def aclrtMemset(self, ptr: int, max_count: int, value: int, count: int) -> int:
        ptr = c_address(ptr, "aclrtMemset", "devPtr")
        max_count = c_size(max_count, "aclrtMemset", "maxCount")
        value = c_int(value, "aclrtMemset", "value", (-(2**31), 2**31 - 1))
        count = c_size(count, "aclrtMemset", "count")
        if count > max_count:
            return self._error(INVALID_PARAM, f"count {count} exceeds maxCount {max_count}")
        if count == 0:
            return SUCCESS
        try:
            self.heap.bytes_at(ptr, count, "devPtr")[:] = value & 0xFF
        except (HeapError, TypeError) as exc:
            return self._error(INVALID_PARAM, str(exc))
        return SUCCESS

    def aclrtMemsetAsync(self, ptr: int, max_count: int, value: int, count: int, stream: Any) -> int:
        if not self._stream_ok(stream):
            return self._error(INVALID_RESOURCE_HANDLE, "stream is not a live stream of this backend")
        return self.aclrtMemset(ptr, max_count, value, count)

    # -- descriptors --------------------------------------------------------
    def aclCreateTensor(
        self,
        view_dims: Sequence[int],
        data_type: int,
        strides: Sequence[int] | None,
        offset: int,
        fmt: int,
        storage_dims: Sequence[int],
        data: int,
    ) -> Tensor | None:
        api = "aclCreateTensor"
        shape = c_ints(view_dims, api, "viewDims")
        if any(d < 0 for d in shape):
            return self._null(NN_PARAM_INVALID, f"viewDims {list(shape)} has a negative dim")
        strides = _contiguous(shape) if strides is None else c_ints(strides, api, "stride")
        if len(strides) != len(shape):
            return self._null(NN_PARAM_INVALID, f"stride has {len(strides)} values for {len(shape)} dims")
        if any(s < 0 for s in strides):
            return self._null(
                NN_PARAM_INVALID, f"stride {list(strides)} has a negative value; strides must be >= 0"
            )
        offset = c_int(offset, api, "offset")
        if offset < 0:
            return self._null(NN_PARAM_INVALID, f"offset {offset} is negative")
        storage = c_ints(storage_dims, api, "storageDims")
        if any(d < 0 for d in storage):
            return self._null(NN_PARAM_INVALID, f"storageDims {list(storage)} has a negative dim")
        data = c_address(data, api, "tensorData")
        try:
            dtype = _dtypes.to_numpy(c_int(data_type, api, "dataType"))
        except ValueError as exc:
            return self._null(NN_PARAM_INVALID, str(exc))
        tensor = Tensor(shape, int(data_type), strides, offset, c_int(fmt, api, "format"), storage, data)
        if 0 not in shape:
            try:
                storage_bytes = prod(storage) * dtype.itemsize
                if storage_bytes:
                    self.heap.bytes_at(data, storage_bytes, "tensorData (storageDims)")
                self.heap.view(tensor.data, dtype, shape, strides, tensor.offset, "tensorData")
            except HeapError as exc:
                return self._null(NN_PARAM_INVALID, str(exc))
        return self.tensors.add(tensor)

    def aclDestroyTensor(self, tensor: Any) -> int:
        return self._destroy(self.tensors, tensor)

    def aclCreateIntArray(self, values: Sequence[int]) -> IntArray:
        return self.int_arrays.add(IntArray(c_ints(values, "aclCreateIntArray", "values")))

    def aclDestroyIntArray(self, array: Any) -> int:
        return self._destroy(self.int_arrays, array)

    def aclCreateBoolArray(self, values: Sequence[bool]) -> BoolArray:
        return self.bool_arrays.add(BoolArray(c_bools(values, "aclCreateBoolArray", "values")))

    def aclDestroyBoolArray(self, array: Any) -> int:
        return self._destroy(self.bool_arrays, array)

    def _destroy(self, registry: Registry, obj: Any) -> int:
        if obj is None:
            return self._error(NN_PARAM_NULLPTR, f"the {registry.kind} is a null pointer")
        if not registry.remove(obj):
            return self._error(
                NN_PARAM_INVALID,
                f"the {registry.kind} is not live (destroyed already, or not from this backend)",
            )
        return SUCCESS

    def aclSetAclOpExecutorRepeatable(self, executor: Any) -> int:
        if executor is None or not self.executors.is_live(executor):
            return self._error(NN_INNER_NULLPTR, "executor is not a live executor of this backend")
        executor.repeatable = True
        return SUCCESS

    def aclDestroyAclOpExecutor(self, executor: Any) -> int:
        if executor is None or not self.executors.is_live(executor):
            return self._error(NN_INNER_NULLPTR, "executor is not a live executor of this backend")
        if not executor.repeatable:
            return self._error(
                NN_PARAM_INVALID, "executor is not repeatable: phase 2 frees it, it must not be destroyed"
            )
        self.executors.remove(executor)
        return SUCCESS

    def live_counts(self) -> dict[str, int]:
        """Live objects of each kind, as the emulator reports them through pyaclnnEmuLiveCounts."""
        counts = (
            self.heap.live_count(host=False),
            self.host_heap.live_count(host=True),
            len(self.tensors),
            len(self.int_arrays),
            len(self.bool_arrays),
            len(self.executors),
            len(self.streams),
        )
        return dict(zip(LIVE_COUNT_NAMES, counts))

    # -- operators: shared machinery ----------------------------------------
    def _phase1(self, api: str, check, args: tuple, make_run, workspace_size: int) -> tuple[int, int, Any]:
        """Validate handles, run the op's checks, and wrap the work in an executor."""
        try:
            plan = check(*args)
        except _checks.CheckFailed as exc:
            return self._error(exc.status, exc.message), 0, None
        if plan is None:
            return SUCCESS, 0, None
        executor = Executor(api, make_run(plan), workspace_size)
        self.executors.add(executor)
        return SUCCESS, workspace_size, executor

    def _phase2(self, api: str, workspace: int, workspace_size: int, executor: Any, stream: Any) -> int:
        workspace = c_address(workspace, api, "workspace")
        workspace_size = c_size(workspace_size, api, "workspaceSize")
        if executor is None:
            if workspace_size == 0:
                return SUCCESS  # phase 1 found nothing to do
            return self._error(NN_INNER_NULLPTR, "executor is a null pointer")
        if not self.executors.is_live(executor):
            return self._error(
                NN_INNER_NULLPTR,
                "executor is not live: it was consumed by an earlier launch, or never created here",
            )
        if executor.op != api:
            return self._error(NN_PARAM_INVALID, f"executor was made for {executor.op}, not {api}")
        if not executor.repeatable:
            self.executors.remove(executor)  # consumed by this launch, also when it fails
        if not self._stream_ok(stream):
            return self._error(INVALID_RESOURCE_HANDLE, "stream is not a live stream of this backend")
        if executor.workspace_size:
            if workspace_size < executor.workspace_size:
                return self._error(
                    NN_PARAM_INVALID,
                    f"workspaceSize {workspace_size} is smaller than the {executor.workspace_size} bytes "
                    "phase 1 asked for",
                )
            try:
                self.heap.bytes_at(workspace, executor.workspace_size, "workspace")
            except HeapError as exc:
                return self._error(NN_PARAM_INVALID, str(exc))
        try:
            executor.run()
        except _checks.CheckFailed as exc:
            return self._error(exc.status, exc.message)
        except HeapError as exc:
            return self._error(NN_RUNTIME_ERROR, f"{exc} (was the memory freed before the launch?)")
        return SUCCESS

    def _array(self, t: Tensor, what: str) -> np.ndarray:
        return self.heap.view(t.data, _dtypes.to_numpy(t.data_type), t.shape, t.strides, t.offset, what)

    def _tensor(self, obj: Any, name: str) -> Tensor | None:
        """``obj`` if it is a live tensor; None stays None (null); anything else is rejected."""
        if obj is None or self.tensors.is_live(obj):
            return obj
        raise _checks.CheckFailed(NN_PARAM_INVALID, f"{name} is not a live aclTensor of this backend")

    def _values(self, obj: Any, registry: Registry, name: str) -> tuple | None:
        if obj is None:
            return None
        if not registry.is_live(obj):
            raise _checks.CheckFailed(
                NN_PARAM_INVALID, f"{name} is not a live {registry.kind} of this backend"
            )
        return obj.values

    # -- MaxPool3dWithArgmax ------------------------------------------------
    def aclnnMaxPool3dWithArgmaxGetWorkspaceSize(
        self, self_, kernel_size, stride, padding, dilation, ceil_mode, out, indices
    ) -> tuple[int, int, Any]:
        def check(self_, kernel_size, stride, padding, dilation, ceil_mode, out, indices):
            x, o, i = (self._tensor(t, n) for t, n in ((self_, "self"), (out, "out"), (indices, "indices")))
            ints = [
                self._values(a, self.int_arrays, n)
                for a, n in (
                    (kernel_size, "kernelSize"),
                    (stride, "stride"),
                    (padding, "padding"),
                    (dilation, "dilation"),
                )
            ]
            ceil = c_bool(ceil_mode, "aclnnMaxPool3dWithArgmaxGetWorkspaceSize", "ceilMode")
            return _checks.max_pool3d_with_argmax(x, *ints, ceil, o, i), (x, o, i)

        def make_run(result):
            plan, (x, o, i) = result
            p = plan.params

            def run() -> None:
                xa = _batched(self._array(x, "self"), plan)
                # out and indices may hold their single element in another shape (the op allows it)
                shape = xa.shape[:2] + _checks.pooled_shape(xa.shape[2:], p)
                oa, ia = (self._array(t, n).reshape(shape) for t, n in ((o, "out"), (i, "indices")))
                _pool.max_pool3d_with_argmax(
                    xa, p.kernel_size, p.stride, p.padding, p.dilation, p.ceil_mode, oa, ia
                )

            return run

        return self._phase1(
            "aclnnMaxPool3dWithArgmax",
            _unwrap(check),
            (self_, kernel_size, stride, padding, dilation, ceil_mode, out, indices),
            make_run,
            0,
        )

    def aclnnMaxPool3dWithArgmax(self, workspace, workspace_size, executor, stream) -> int:
        return self._phase2("aclnnMaxPool3dWithArgmax", workspace, workspace_size, executor, stream)

    # -- MaxPool3dWithArgmaxBackward ----------------------------------------
    def aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
        self, grad_output, self_, indices, kernel_size, stride, padding, dilation, ceil_mode, grad_input
    ) -> tuple[int, int, Any]:
        def check(grad_output, self_, indices, kernel_size, stride, padding, dilation, ceil_mode, grad_input):
            tensors = [
                self._tensor(t, n)
                for t, n in (
                    (grad_output, "gradOutput"),
                    (self_, "self"),
                    (indices, "indices"),
                    (grad_input, "gradInput"),
                )
            ]
            ints = [
                self._values(a, self.int_arrays, n)
                for a, n in (
                    (kernel_size, "kernelSize"),
                    (stride, "stride"),
                    (padding, "padding"),
                    (dilation, "dilation"),
                )
            ]
            g, x, i, gi = tensors
            ceil = c_bool(ceil_mode, "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize", "ceilMode")
            return _checks.max_pool3d_with_argmax_backward(g, x, i, *ints, ceil, gi), (g, i, gi)

        def make_run(result):
            plan, (g, i, gi) = result

            def run() -> None:
                ga, ia, gia = (
                    _batched(self._array(t, n), plan)
                    for t, n in ((g, "gradOutput"), (i, "indices"), (gi, "gradInput"))
                )
                try:
                    _pool.max_pool3d_with_argmax_backward(ga, ia, gia)
                except _pool.IndexOutOfPlaneError as exc:
                    raise _checks.CheckFailed(NN_PARAM_INVALID, str(exc)) from None

            return run

        return self._phase1(
            "aclnnMaxPool3dWithArgmaxBackward",
            _unwrap(check),
            (grad_output, self_, indices, kernel_size, stride, padding, dilation, ceil_mode, grad_input),
            make_run,
            BACKWARD_WORKSPACE,
        )

    def aclnnMaxPool3dWithArgmaxBackward(self, workspace, workspace_size, executor, stream) -> int:
        return self._phase2("aclnnMaxPool3dWithArgmaxBackward", workspace, workspace_size, executor, stream)

    # -- GridSampler3D ------------------------------------------------------
    def aclnnGridSampler3DGetWorkspaceSize(
        self, input, grid, interpolation_mode, padding_mode, align_corners, out
    ) -> tuple[int, int, Any]:
        def check(input, grid, interpolation_mode, padding_mode, align_corners, out):
            x, g, o = (self._tensor(t, n) for t, n in ((input, "input"), (grid, "grid"), (out, "out")))
            plan = _checks.grid_sampler3d(
                x,
                g,
                *_grid_scalars(
                    "aclnnGridSampler3DGetWorkspaceSize", interpolation_mode, padding_mode, align_corners
                ),
                o,
            )
            return plan, (x, g, o)

        def make_run(result):
            plan, (x, g, o) = result

            def run() -> None:
                xa, oa = (_ncdhw(self._array(t, n), plan) for t, n in ((x, "input"), (o, "out")))
                _grid.grid_sampler3d(
                    xa,
                    self._array(g, "grid"),
                    plan.interpolation_mode,
                    plan.padding_mode,
                    plan.align_corners,
                    oa,
                )

            return run

        return self._phase1(
            "aclnnGridSampler3D",
            _unwrap(check),
            (input, grid, interpolation_mode, padding_mode, align_corners, out),
            make_run,
            0,
        )

    def aclnnGridSampler3D(self, workspace, workspace_size, executor, stream) -> int:
        return self._phase2("aclnnGridSampler3D", workspace, workspace_size, executor, stream)

    # -- GridSampler3DBackward ----------------------------------------------
    def aclnnGridSampler3DBackwardGetWorkspaceSize(
        self,
        grad_output,
        input,
        grid,
        interpolation_mode,
        padding_mode,
        align_corners,
        output_mask,
        input_grad,
        grid_grad,
    ) -> tuple[int, int, Any]:
        def check(
            grad_output,
            input,
            grid,
            interpolation_mode,
            padding_mode,
            align_corners,
            output_mask,
            input_grad,
            grid_grad,
        ):
            mask = self._values(output_mask, self.bool_arrays, "outputMask")
            tensors = [
                self._tensor(t, n)
                for t, n in (
                    (grad_output, "gradOutput"),
                    (input, "input"),
                    (grid, "grid"),
                    (input_grad, "inputGrad"),
                    (grid_grad, "gridGrad"),
                )
            ]
            g, x, gr, ig, gg = tensors
            plan = _checks.grid_sampler3d_backward(
                g,
                x,
                gr,
                *_grid_scalars(
                    "aclnnGridSampler3DBackwardGetWorkspaceSize",
                    interpolation_mode,
                    padding_mode,
                    align_corners,
                ),
                mask,
                ig,
                gg,
            )
            return plan, tensors

        def make_run(result):
            plan, (g, x, gr, ig, gg) = result

            def run() -> None:
                ga, xa = _ncdhw(self._array(g, "gradOutput"), plan), _ncdhw(self._array(x, "input"), plan)
                iga = _ncdhw(self._array(ig, "inputGrad"), plan) if plan.output_mask[0] else None
                gga = self._array(gg, "gridGrad") if plan.output_mask[1] else None
                _grid.grid_sampler3d_backward(
                    ga,
                    xa,
                    self._array(gr, "grid"),
                    plan.interpolation_mode,
                    plan.padding_mode,
                    plan.align_corners,
                    iga,
                    gga,
                )

            return run

        return self._phase1(
            "aclnnGridSampler3DBackward",
            _unwrap(check),
            (
                grad_output,
                input,
                grid,
                interpolation_mode,
                padding_mode,
                align_corners,
                output_mask,
                input_grad,
                grid_grad,
            ),
            make_run,
            BACKWARD_WORKSPACE,
        )

    def aclnnGridSampler3DBackward(self, workspace, workspace_size, executor, stream) -> int:
        return self._phase2("aclnnGridSampler3DBackward", workspace, workspace_size, executor, stream)


def _grid_scalars(api: str, interpolation_mode: Any, padding_mode: Any, align_corners: Any) -> tuple:
    return (
        c_int(interpolation_mode, api, "interpolationMode"),
        c_int(padding_mode, api, "paddingMode"),
        c_bool(align_corners, api, "alignCorners"),
    )


def _unwrap(check):
    """Adapt a check returning ``(plan, tensors)`` to the phase-1 protocol (None = nothing to do)."""

    def wrapped(*args):
        plan, tensors = check(*args)
        return None if plan is None else (plan, tensors)

    return wrapped


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


def _batched(a: np.ndarray, plan: _checks.MaxPoolPlan) -> np.ndarray:
    """4-D (C, D, H, W) tensors are computed as N = 1."""
    return a if plan.batched else a[np.newaxis]


def _ncdhw(a: np.ndarray, plan: _checks.GridPlan) -> np.ndarray:
    """(N, D, H, W, C) data seen as (N, C, D, H, W), without copying."""
    return np.moveaxis(a, 4, 1) if plan.channels_last else a

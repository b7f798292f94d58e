"""The numpy backend's operator adapters: the aclnn* two-phase calls.

Phase 1 (``aclnn*GetWorkspaceSize``) resolves the C arguments, runs the op's
checks (``pyaclnn.kernels.checks``), which return the plan, and wraps the
kernel call in an executor; phase 2 (``aclnn*``) makes the launch-time checks
and enqueues the kernel, on NumPy views of the emulated memory, on the stream.
A repeatable executor keeps the views of its last launch and phase 2 reuses
them while the workspace, the stream and the live allocations are unchanged
(on the benchmark machine, resolving them cost about 60 us a launch cold).
The kernels take the plan's already-validated arrays and validate nothing.
The runtime emulation these adapters run on (memory, streams, registries,
errors) lives in the package ``__init__``; :class:`OperatorsMixin` is one of
the bases of its ``NumpyBackend``.
"""

from __future__ import annotations

from functools import partial
from math import prod
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import dtypes as _dtypes
from ...constants import (
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_STREAM_CONTEXT,
    ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
    ACLNN_ERR_INNER_NULLPTR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_RUNTIME_ERROR,
    ACLNN_SUCCESS,
)
from ...kernels import checks as _checks
from ...kernels import grid_sampler3d as _grid
from ...kernels import max_pool3d as _pool
from ._cvalues import c_address, c_bool, c_int, c_size
from ._heap import Allocation, Heap, HeapError
from ._objects import Executor, Registry, Stream, Tensor
from ._streams import KERNEL_US, DeviceError, Hazards, Task, Worker, env_ns

# Phase 1's result when the plan says there is nothing to do (empty tensors): no executor.
NOTHING_TO_DO = (ACLNN_SUCCESS, 0, None)
# Workspace the emulated backward ops ask for, so callers exercise the workspace path.
BACKWARD_WORKSPACE = 32


class OperatorsMixin:
    """The aclnn* operators of ``NumpyBackend``, on top of its runtime emulation."""

    # Provided by NumpyBackend (the runtime emulation).
    heap: Heap
    tensors: Registry
    int_arrays: Registry
    bool_arrays: Registry
    executors: Registry
    hazards: Hazards

    if TYPE_CHECKING:

        def _error(self, status: int, message: str) -> int: ...
        def _stream_status(self, stream: Any, api: str = "", own: bool = True) -> int: ...
        def _worker(self, stream: Stream | None) -> Worker: ...
        def _submit(self, worker: Worker, task: Task) -> int: ...

    # -- operators: shared machinery ----------------------------------------
    # Each op's phase 1 resolves its C arguments and asks kernels.checks for the
    # plan inside one ``try``: a CheckFailed from either becomes the op's status.
    def _executor(self, api: str, bind: Any, workspace_size: int) -> tuple[int, int, Any]:
        """Phase 1's result: a new executor for phase 2 ``api`` running ``bind``."""
        executor = Executor(api, bind, workspace_size)
        self.executors.add(executor)
        return ACLNN_SUCCESS, workspace_size, executor

    def _failed(self, exc: _checks.CheckFailed) -> tuple[int, int, None]:
        return self._error(exc.status, exc.message), 0, None

    def _phase2(self, api: str, workspace: int, workspace_size: int, executor: Any, stream: Any) -> int:
        workspace = c_address(workspace, api, "workspace")
        workspace_size = c_size(workspace_size, api, "workspaceSize")
        if executor is None:
            if workspace_size == 0:
                return ACLNN_SUCCESS  # phase 1 found nothing to do
            return self._error(ACLNN_ERR_INNER_NULLPTR, "executor is a null pointer")
        if not self.executors.is_live(executor):
            return self._error(
                ACLNN_ERR_INNER_NULLPTR,
                "executor is not live: it was consumed by an earlier launch, or never created here",
            )
        if executor.op != api:
            return self._error(ACLNN_ERR_PARAM_INVALID, f"executor was made for {executor.op}, not {api}")
        if not executor.repeatable:
            self.executors.remove(executor)  # consumed by this launch, also when it fails
        status = self._stream_status(stream, api)
        if status in (ACL_ERROR_RT_CONTEXT_NULL, ACL_ERROR_RT_STREAM_CONTEXT):
            # A failed launch is ACLNN_ERR_RUNTIME_ERROR; the message names the runtime's code.
            return ACLNN_ERR_RUNTIME_ERROR
        if status:
            return status
        if workspace_size < executor.workspace_size:
            return self._error(
                ACLNN_ERR_PARAM_INVALID,
                f"workspaceSize {workspace_size} is smaller than the {executor.workspace_size} bytes "
                "phase 1 asked for",
            )
        worker = self._worker(stream)
        generation = self.heap.generation
        bound = executor.bound
        # A repeated launch with the same workspace and stream, and nothing freed
        # since, would resolve the same views and pass the same checks.
        if bound is not None and bound[0] == workspace and bound[1] == generation and bound[2] is worker:
            run, allocations = bound[3], bound[4]
        else:
            views = _Views(self.heap)
            if executor.workspace_size:
                try:
                    views.workspace(workspace, executor.workspace_size)
                except HeapError as exc:
                    return self._error(ACLNN_ERR_PARAM_INVALID, str(exc))
            try:
                run = executor.bind(views)
            except HeapError as exc:
                return self._error(
                    ACLNN_ERR_RUNTIME_ERROR, f"{exc} (was the memory freed before the launch?)"
                )
            foreign = views.foreign(worker.device)
            if foreign is not None:
                # CANN checks nothing here; the kernel would fault or read garbage: a hazard, as
                # the C emulator's (check_devices_locked in tests/emulator/streams.c).
                name, device = foreign
                self.hazards.report(
                    f"memory of device {device} ({name}) used by work on stream {worker.label} of "
                    f"device {worker.device}",
                    api,
                )
            allocations = views.allocations()
            if executor.repeatable and foreign is None:  # a foreign binding is checked at every launch
                executor.bound = (workspace, generation, worker, run, allocations)
        owner = executor if executor.repeatable else None
        self._submit(worker, Task(run, allocations, owner, api, env_ns(KERNEL_US)))
        return ACLNN_SUCCESS

    def _tensors(self, *named: tuple[Any, str]) -> list[Any]:
        """Each ``(handle, C name)`` as a live tensor or None (null); anything else fails the check."""
        tensors = []
        for obj, name in named:
            if obj is not None and not self.tensors.is_live(obj):
                raise _checks.CheckFailed(
                    ACLNN_ERR_PARAM_INVALID, f"{name} is not a live aclTensor of this backend"
                )
            tensors.append(obj)
        return tensors

    def _values(self, obj: Any, registry: Registry, name: str) -> tuple[Any, ...] | None:
        if obj is None:
            return None
        if not registry.is_live(obj):
            raise _checks.CheckFailed(
                ACLNN_ERR_PARAM_INVALID, f"{name} is not a live {registry.kind} of this backend"
            )
        values: tuple[Any, ...] = obj.values
        return values

    def _pool_params(
        self, kernel_size: Any, stride: Any, padding: Any, dilation: Any
    ) -> list[tuple[Any, ...] | None]:
        """The values of the four pooling aclIntArrays (None for null)."""
        return [
            self._values(a, self.int_arrays, n)
            for a, n in (
                (kernel_size, "kernelSize"),
                (stride, "stride"),
                (padding, "padding"),
                (dilation, "dilation"),
            )
        ]

    # -- MaxPool3dWithArgmax ------------------------------------------------
    # The two max-pool adapters take the same four pooling arrays and ceilMode because the
    # C operators do; what they share beyond the parameter lists is in _pool_params.
    def aclnnMaxPool3dWithArgmaxGetWorkspaceSize(
        self,
        self_: Any,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        ceil_mode: Any,
        out: Any,
        indices: Any,
    ) -> tuple[int, int, Any]:
        api = "aclnnMaxPool3dWithArgmaxGetWorkspaceSize"
        try:
            x, o, i = self._tensors((self_, "self"), (out, "out"), (indices, "indices"))
            k, s, p, d = self._pool_params(kernel_size, stride, padding, dilation)
            ceil = c_bool(ceil_mode, api, "ceilMode")
            plan = _checks.max_pool3d_with_argmax(x, k, s, p, d, ceil, o, i)
        except _checks.CheckFailed as exc:
            return self._failed(exc)
        if plan is None:
            return NOTHING_TO_DO

        def bind(views: _Views) -> Any:
            xa = _planned(views.array(x, "self"), plan.input_shape)
            oa, ia = (_planned(views.array(t, n), plan.output_shape) for t, n in ((o, "out"), (i, "indices")))
            q = plan.params
            return partial(
                _pool.max_pool3d_with_argmax,
                xa,
                q.kernel_size,
                q.stride,
                q.padding,
                q.dilation,
                q.ceil_mode,
                oa,
                ia,
            )

        return self._executor("aclnnMaxPool3dWithArgmax", bind, 0)

    def aclnnMaxPool3dWithArgmax(
        self, workspace: Any, workspace_size: Any, executor: Any, stream: Any
    ) -> int:
        return self._phase2("aclnnMaxPool3dWithArgmax", workspace, workspace_size, executor, stream)

    # -- MaxPool3dWithArgmaxBackward ----------------------------------------
    def aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
        self,
        grad_output: Any,
        self_: Any,
        indices: Any,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        ceil_mode: Any,
        grad_input: Any,
    ) -> tuple[int, int, Any]:
        api = "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize"
        try:
            g, x, i, gi = self._tensors(
                (grad_output, "gradOutput"), (self_, "self"), (indices, "indices"), (grad_input, "gradInput")
            )
            k, s, p, d = self._pool_params(kernel_size, stride, padding, dilation)
            ceil = c_bool(ceil_mode, api, "ceilMode")
            plan = _checks.max_pool3d_with_argmax_backward(g, x, i, k, s, p, d, ceil, gi)
        except _checks.CheckFailed as exc:
            return self._failed(exc)
        if plan is None:
            return NOTHING_TO_DO

        def bind(views: _Views) -> Any:
            ga, ia = (
                _planned(views.array(t, n), plan.output_shape) for t, n in ((g, "gradOutput"), (i, "indices"))
            )
            gia = _planned(views.array(gi, "gradInput"), plan.input_shape)

            def run() -> None:
                try:
                    _pool.max_pool3d_with_argmax_backward(ga, ia, gia)
                except _pool.IndexOutOfPlaneError:
                    # The kernel refuses before writing; on the NPU this is a fault of the device.
                    raise DeviceError(ACL_ERROR_RT_VECTOR_CORE_EXCEPTION, _index_fault(ia, gia)) from None

            return run

        return self._executor("aclnnMaxPool3dWithArgmaxBackward", bind, BACKWARD_WORKSPACE)

    def aclnnMaxPool3dWithArgmaxBackward(
        self, workspace: Any, workspace_size: Any, executor: Any, stream: Any
    ) -> int:
        return self._phase2("aclnnMaxPool3dWithArgmaxBackward", workspace, workspace_size, executor, stream)

    # -- GridSampler3D ------------------------------------------------------
    def aclnnGridSampler3DGetWorkspaceSize(
        self, input: Any, grid: Any, interpolation_mode: Any, padding_mode: Any, align_corners: Any, out: Any
    ) -> tuple[int, int, Any]:
        api = "aclnnGridSampler3DGetWorkspaceSize"
        try:
            x, g, o = self._tensors((input, "input"), (grid, "grid"), (out, "out"))
            mode, padding, corners = _grid_scalars(api, interpolation_mode, padding_mode, align_corners)
            plan = _checks.grid_sampler3d(x, g, mode, padding, corners, o)
        except _checks.CheckFailed as exc:
            return self._failed(exc)
        if plan is None:
            return NOTHING_TO_DO

        def bind(views: _Views) -> Any:
            xa, oa = (_ncdhw(views.array(t, n), plan) for t, n in ((x, "input"), (o, "out")))
            ga = views.array(g, "grid")
            return partial(
                _grid.grid_sampler3d,
                xa,
                ga,
                plan.interpolation_mode,
                plan.padding_mode,
                plan.align_corners,
                oa,
            )

        return self._executor("aclnnGridSampler3D", bind, 0)

    def aclnnGridSampler3D(self, workspace: Any, workspace_size: Any, executor: Any, stream: Any) -> int:
        return self._phase2("aclnnGridSampler3D", workspace, workspace_size, executor, stream)

    # -- GridSampler3DBackward ----------------------------------------------
    def aclnnGridSampler3DBackwardGetWorkspaceSize(
        self,
        grad_output: Any,
        input: Any,
        grid: Any,
        interpolation_mode: Any,
        padding_mode: Any,
        align_corners: Any,
        output_mask: Any,
        input_grad: Any,
        grid_grad: Any,
    ) -> tuple[int, int, Any]:
        api = "aclnnGridSampler3DBackwardGetWorkspaceSize"
        try:
            mask = self._values(output_mask, self.bool_arrays, "outputMask")
            g, x, gr, ig, gg = self._tensors(
                (grad_output, "gradOutput"),
                (input, "input"),
                (grid, "grid"),
                (input_grad, "inputGrad"),
                (grid_grad, "gridGrad"),
            )
            mode, padding, corners = _grid_scalars(api, interpolation_mode, padding_mode, align_corners)
            plan = _checks.grid_sampler3d_backward(g, x, gr, mode, padding, corners, mask, ig, gg)
        except _checks.CheckFailed as exc:
            return self._failed(exc)
        if plan is None:
            return NOTHING_TO_DO

        def bind(views: _Views) -> Any:
            ga, xa = _ncdhw(views.array(g, "gradOutput"), plan), _ncdhw(views.array(x, "input"), plan)
            iga = _ncdhw(views.array(ig, "inputGrad"), plan) if plan.output_mask[0] else None
            gga = views.array(gg, "gridGrad") if plan.output_mask[1] else None
            return partial(
                _grid.grid_sampler3d_backward,
                ga,
                xa,
                views.array(gr, "grid"),
                plan.interpolation_mode,
                plan.padding_mode,
                plan.align_corners,
                iga,
                gga,
            )

        return self._executor("aclnnGridSampler3DBackward", bind, BACKWARD_WORKSPACE)

    def aclnnGridSampler3DBackward(
        self, workspace: Any, workspace_size: Any, executor: Any, stream: Any
    ) -> int:
        return self._phase2("aclnnGridSampler3DBackward", workspace, workspace_size, executor, stream)


class _Views:
    """Resolves a launch's memory in phase 2, noting which allocation each argument uses.

    The kernel task then holds NumPy views, not descriptors (which the caller
    may destroy at once), and the noted allocations let aclrtFree see that a
    pending task still uses them.
    """

    __slots__ = ("_heap", "_used")

    def __init__(self, heap: Heap) -> None:
        self._heap = heap
        self._used: list[tuple[str, Allocation]] = []  # (C argument, allocation)

    def array(self, t: Tensor, what: str) -> np.ndarray:
        """The NumPy view of tensor ``t`` (C argument ``what``)."""
        array, allocation = self._heap.locate_view(
            t.data, _dtypes.to_numpy(t.data_type), t.shape, t.strides, t.offset, what
        )
        if allocation is not None:
            self._used.append((what, allocation))
        return array

    def workspace(self, address: int, size: int) -> None:
        """Note the workspace (the kernels do not touch it, but it must stay allocated)."""
        self._used.append(("workspace", self._heap.locate_bytes(address, size, "workspace")[1]))

    def allocations(self) -> tuple[Allocation, ...]:
        return tuple(allocation for _, allocation in self._used)

    def foreign(self, device: int) -> tuple[str, int] | None:
        """The first argument whose memory is not on ``device``, and its device; None if all are."""
        for name, allocation in self._used:
            if allocation.device != device:
                return name, allocation.device
        return None


def _index_fault(indices: np.ndarray, grad_input: np.ndarray) -> str:
    """The device error of a max-pool backward given an index outside its (n, c) plane:
    the first bad position in C order (as the C emulator names it, in 5-D)."""
    plane = prod(grad_input.shape[2:])
    bad = (indices < 0) | (indices >= plane)
    position = np.unravel_index(int(np.argmax(bad)), indices.shape)
    where = ", ".join(str(int(i)) for i in position)
    return (
        f"aclnnMaxPool3dWithArgmaxBackward: indices[{where}] = {int(indices[position])} lies outside "
        f"its (n, c) plane of {plane} elements"
    )


def _grid_scalars(
    api: str, interpolation_mode: Any, padding_mode: Any, align_corners: Any
) -> tuple[int, int, bool]:
    return (
        c_int(interpolation_mode, api, "interpolationMode"),
        c_int(padding_mode, api, "paddingMode"),
        c_bool(align_corners, api, "alignCorners"),
    )


def _planned(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` in its plan's 5-D shape, without copying.

    The plan differs from the tensor's view shape only for a 4-D tensor
    (computed as N = 1) and for an output holding its single element in another
    shape (the op accepts it); NumPy reshapes both as views.
    """
    return a if a.shape == shape else a.reshape(shape)


def _ncdhw(a: np.ndarray, plan: _checks.GridPlan) -> np.ndarray:
    """(N, D, H, W, C) data seen as (N, C, D, H, W), without copying."""
    return np.moveaxis(a, 4, 1) if plan.channels_last else a

"""The numpy backend's operator adapters: the aclnn* two-phase calls, made from the operator table.

Every operator of :func:`pyaclnn._optable.operators` gets its two phase methods,
named by the C API (``aclnnMaxPool3dWithArgmaxGetWorkspaceSize``,
``aclnnMaxPool3dWithArgmax``, ...), from one loop
(:func:`pyaclnn.backends._interface.install_operator_phases`): :func:`_phase1`
and :func:`_phase2` make them from the C names.

Phase 1 unpacks the C arguments by the table's parameter kinds
(:meth:`OperatorsMixin._arguments`: tensors, then arrays and scalars), runs the
operator's check function (:mod:`pyaclnn.kernels.checks`, by the table's Python
name), which returns the plan, and binds the operator's kernel
(:data:`pyaclnn.backends.numpy._kernels.KERNELS`) in an executor; phase 2
(``aclnn*``) makes the launch-time checks and enqueues the kernel, on NumPy
views of the emulated memory, on the stream. A repeatable executor keeps the
views of its last launch and phase 2 reuses them while the workspace, the
stream and the live allocations are unchanged (on the benchmark machine,
resolving them cost about 60 us a launch cold). The kernels take the plan's
already-validated arrays and validate nothing. So a new operator needs its
check function and its kernel entry, and nothing here.

The runtime emulation these adapters run on (memory, streams, registries,
errors) lives in the package ``__init__``; :class:`OperatorsMixin` is one of
the bases of its ``NumpyBackend``.

For type checkers the phase methods are the attributes
:class:`~pyaclnn.backends._interface.OperatorPhases` declares (generated from
the same table, as ``Backend``'s exact signatures are), so ``NumpyBackend``
satisfies the ``Backend`` protocol under ``mypy --strict`` although the
methods are made in a loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import _decl, _optable
from ... import dtypes as _dtypes
from ...constants import (
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_STREAM_CONTEXT,
    ACLNN_ERR_INNER_NULLPTR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_RUNTIME_ERROR,
    ACLNN_SUCCESS,
)
from ...kernels import checks as _checks
from ...kernels import references as _references
from ...ops._types import INT_RANGES  # the C integer types' ranges: the one table of them
from .._interface import OperatorPhases, install_operator_phases
from . import _streams
from ._cvalues import c_address, c_bool, c_int, c_size
from ._heap import Allocation, Heap, HeapError
from ._kernels import BACKWARD_WORKSPACE as BACKWARD_WORKSPACE
from ._kernels import KERNELS
from ._objects import BoolArray, Executor, FloatArray, HandleList, IntArray, Registry, Scalar, Stream, Tensor
from ._streams import KERNEL_US, SYNC_US, Hazards, Task, Worker, env_ns, sleep_ns

# Phase 1's result when the plan says there is nothing to do (empty tensors): no executor.
NOTHING_TO_DO = (ACLNN_SUCCESS, 0, None)
_TENSORS = (_optable.TENSOR, _optable.OUTPUT)


def _c_kinds(params: tuple[Any, ...]) -> tuple[str, ...]:
    """Each declared parameter's C type without ``const``: what phase 1 unpacks a value by."""
    return tuple(param.type.removeprefix("const ") for param in params)


def _phase1(api: str) -> Callable[..., tuple[int, int, Any]]:
    """The phase-1 method of the operator whose ``aclnn*GetWorkspaceSize`` is ``api``."""
    spec = next(s for s in _optable.operators() if s.phase1_api == api)
    check = getattr(_checks, spec.python_name, None)
    kernel = KERNELS.get(spec.python_name)
    if check is None or kernel is None:
        missing = (
            "its check (pyaclnn/kernels/checks.py)"
            if check is None
            else f"its binder _bind_{spec.python_name} (pyaclnn/backends/numpy/_kernels/)"
        )
        raise LookupError(
            f"include/decl/{_optable.DECL_FILE} declares {spec.phase2_api}, but the numpy backend lacks "
            f"{missing} for {spec.python_name} (docs/adding-an-operator.md)"
        )
    names = [p.c_name for p in spec.params]

    def method(self: OperatorsMixin, *args: Any) -> tuple[int, int, Any]:
        if len(args) != len(spec.params):
            raise TypeError(f"{api}() takes {len(spec.params)} arguments ({len(args)} given)")
        try:
            values = self._arguments(spec, args)
            plan = check(*values)
        except _checks.CheckFailed as exc:
            return self._error(exc.status, exc.message), 0, None
        if plan is None:
            return NOTHING_TO_DO
        tensors = {name: v for name, v, p in zip(names, values, spec.params) if p.kind in _TENSORS}

        def bind(views: _Views) -> Callable[[], None]:
            return kernel.bind(plan, lambda name: views.array(tensors[name], name))

        executor = Executor(spec.phase2_api, bind, kernel.workspace)
        self.executors.add(executor)
        return ACLNN_SUCCESS, kernel.workspace, executor

    method.__name__ = method.__qualname__ = api
    return method


def _phase2(api: str) -> Callable[..., int]:
    """The phase-2 (launch) method ``api``."""

    def method(self: OperatorsMixin, workspace: Any, workspace_size: Any, executor: Any, stream: Any) -> int:
        return self._launch(api, workspace, workspace_size, executor, stream)

    method.__name__ = method.__qualname__ = api
    return method


@install_operator_phases(phase1=_phase1, phase2=_phase2)
class OperatorsMixin(OperatorPhases):
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

    scalars: Registry
    float_arrays: Registry
    tensor_lists: Registry
    scalar_lists: Registry

    # -- operators of pyaclnn.ops: the NumPy references ------------------------
    def operator_headers(self) -> dict[str, str]:
        """The C declarations of the operators this backend runs, by header name: its NumPy
        references and the operators of the table (include/decl's declarations of them)."""
        return {_optable.DECL_FILE: _decl.read(_optable.DECL_FILE), **_references.headers()}

    def operator_library(self, path: Any) -> None:
        """Nothing: this backend runs no library (a custom package's operators run through their
        NumPy references)."""

    def operator_phases(self, declaration: Any) -> tuple[Callable[..., Any], Callable[..., int]]:
        """Phase 1 and phase 2 of a declared operator (see the Backend protocol), run by its NumPy
        reference (:mod:`pyaclnn.kernels.references`); LookupError if it has none."""
        if declaration.name in _optable.by_name():  # one of the table's: its own phase methods
            own = _optable.by_name()[declaration.name]
            return getattr(self, own.phase1_api), getattr(self, own.phase2_api)
        reference = _references.get(declaration.name)
        if reference is None:
            raise LookupError(declaration.phase2_api)
        api = declaration.phase1_api
        launch_api = declaration.phase2_api
        params = tuple(declaration.params)
        kinds = _c_kinds(params)

        def phase1(*args: Any) -> tuple[int, int, Any]:
            if len(args) != len(params):
                raise TypeError(f"{api}() takes {len(params)} arguments ({len(args)} given)")
            try:
                values, tensors = self._reference_values(api, params, args, kinds)
                if reference.check is not None:
                    reference.check(*values)
            except _checks.CheckFailed as exc:
                return self._error(exc.status, exc.message), 0, None

            def bind(views: _Views) -> Callable[[], None]:
                resolved = list(values)
                for index in tensors:  # tensors and tensor lists: their memory, resolved now
                    arg, name = args[index], params[index].name
                    if isinstance(arg, Tensor):
                        resolved[index] = views.array(arg, name)
                    else:
                        resolved[index] = [views.array(t, f"{name}[{i}]") for i, t in enumerate(arg.items)]
                return lambda: reference.kernel(*resolved)

            executor = Executor(launch_api, bind, 0)
            self.executors.add(executor)
            return ACLNN_SUCCESS, 0, executor

        def phase2(workspace: Any, workspace_size: Any, executor: Any, stream: Any) -> int:
            return self._launch(launch_api, workspace, workspace_size, executor, stream)

        phase1.__name__ = phase1.__qualname__ = api
        phase2.__name__ = phase2.__qualname__ = launch_api
        return phase1, phase2

    def operator_at_once(self, declaration: Any) -> Callable[..., bool | None] | None:
        """A runner of a declared operator's NumPy reference on host arrays, on the calling
        thread; None for an operator without one (the table's run their own phase methods).

        ``run(infos, values, stream)``: ``values`` as the reference's kernel gets them in phase
        2 (NumPy arrays for tensors, the C values of the rest as :meth:`_reference_values`
        makes them), ``infos`` the same with :class:`~pyaclnn.kernels.references.TensorInfo`
        for the arrays, as its check gets them in phase 1; ``stream`` a live stream of the
        calling thread's current device, or None (its default stream). The check, then the
        kernel as the stream's next task (:meth:`Worker.run_now`), with the simulated kernel
        and wait times; True, or False when the kernel failed (the stream's sticky error, which
        the next wait reports). None, with nothing run, when the check refuses (phase 1 then
        tells why), the stream has work pending or a failure, or the profiler records (its
        records are those of the two phases)."""
        if declaration.name in _optable.by_name():
            return None
        reference = _references.get(declaration.name)
        if reference is None:
            return None
        check, kernel, api = reference.check, reference.kernel, declaration.phase2_api

        def run(infos: list[Any], values: list[Any], stream: Any) -> bool | None:
            if _streams.RECORDER is not None:
                return None
            if check is not None:
                try:
                    check(*infos)
                except Exception:  # (pure: phase 1 runs it again and reports it)
                    return None
            worker = self._worker(stream)
            ran = worker.run_now(Task(lambda: kernel(*values), (), None, api, env_ns(KERNEL_US)))
            if ran is not None:
                sleep_ns(env_ns(SYNC_US))  # the wait a call on NumPy arrays makes
            return ran

        return run

    def _reference_values(
        self, api: str, params: tuple[Any, ...], args: tuple[Any, ...], kinds: tuple[str, ...] | None = None
    ) -> tuple[list[Any], list[int]]:
        """A reference's values for phase 1 (tensors as TensorInfo) and the indices of the tensor
        and tensor-list arguments, resolved in phase 2. CheckFailed for a handle that is not live.

        ``kinds``: each parameter's C type without ``const`` (:func:`_c_kinds`), worked out once
        per operator rather than at every call."""
        if kinds is None:
            kinds = _c_kinds(params)
        values: list[Any] = []
        tensors: list[int] = []
        registries = {
            Scalar: self.scalars,
            IntArray: self.int_arrays,
            BoolArray: self.bool_arrays,
            FloatArray: self.float_arrays,
        }
        for index, (param, arg, c_type) in enumerate(zip(params, args, kinds)):
            kind = type(arg)
            if arg is None:
                values.append(None)
            elif kind is Tensor or isinstance(arg, Tensor):
                values.append(self._tensor_info(arg, param.name))
                tensors.append(index)
            elif isinstance(arg, HandleList):
                name = param.name
                if self.tensor_lists.is_live(arg):
                    values.append([self._tensor_info(t, f"{name}[{i}]") for i, t in enumerate(arg.items)])
                    tensors.append(index)
                elif self.scalar_lists.is_live(arg):
                    values.append([item.value for item in arg.items])
                else:
                    raise _checks.CheckFailed(
                        ACLNN_ERR_PARAM_INVALID, f"{name} is not a live list of this backend"
                    )
            elif kind in registries:
                registry = registries[kind]
                if not registry.is_live(arg):
                    raise _checks.CheckFailed(
                        ACLNN_ERR_PARAM_INVALID, f"{param.name} is not a live {registry.kind} of this backend"
                    )
                values.append(arg.value if kind is Scalar else tuple(arg.values))
            elif c_type == "aclDataType":
                try:
                    values.append(_dtypes.to_numpy(c_int(arg, api, param.name)))
                except ValueError as exc:
                    raise _checks.CheckFailed(ACLNN_ERR_PARAM_INVALID, f"{param.name}: {exc}") from None
            elif c_type == "bool":
                values.append(c_bool(arg, api, param.name))
            elif c_type in ("double", "float"):
                values.append(float(arg))
            elif c_type in INT_RANGES:
                values.append(c_int(arg, api, param.name, INT_RANGES[c_type]))
            else:
                values.append(arg)  # a string
        return values, tensors

    def _tensor_info(self, tensor: Tensor, name: str) -> _references.TensorInfo:
        if not self.tensors.is_live(tensor):
            raise _checks.CheckFailed(
                ACLNN_ERR_PARAM_INVALID, f"{name} is not a live aclTensor of this backend"
            )
        info: _references.TensorInfo | None = tensor.info
        if info is None:
            info = tensor.info = _references.TensorInfo(tensor.shape, _dtypes.to_numpy(tensor.data_type))
        return info

    # -- operators: shared machinery ----------------------------------------
    def _arguments(self, spec: _optable.OperatorSpec, args: tuple[Any, ...]) -> list[Any]:
        """Phase 1's C arguments as the check functions take them, in C order: a live tensor
        or None for a tensor, the values or None for an array, a checked int or bool.

        The tensors are looked at first, then the other parameters in C order (a handle
        that is not live fails the check, 161002; a value C cannot take is a TypeError).
        """
        values = list(args)
        for param, obj in zip(spec.params, args):
            if param.kind in _TENSORS and obj is not None and not self.tensors.is_live(obj):
                raise _checks.CheckFailed(
                    ACLNN_ERR_PARAM_INVALID, f"{param.c_name} is not a live aclTensor of this backend"
                )
        for i, (param, obj) in enumerate(zip(spec.params, args)):
            if param.kind == _optable.INT_ARRAY:
                values[i] = self._values(obj, self.int_arrays, param.c_name)
            elif param.kind == _optable.BOOL_ARRAY:
                values[i] = self._values(obj, self.bool_arrays, param.c_name)
            elif param.kind == _optable.INT:
                values[i] = c_int(obj, spec.phase1_api, param.c_name)
            elif param.kind == _optable.BOOL:
                values[i] = c_bool(obj, spec.phase1_api, param.c_name)
        return values

    def _values(self, obj: Any, registry: Registry, name: str) -> tuple[Any, ...] | None:
        if obj is None:
            return None
        if not registry.is_live(obj):
            raise _checks.CheckFailed(
                ACLNN_ERR_PARAM_INVALID, f"{name} is not a live {registry.kind} of this backend"
            )
        values: tuple[Any, ...] = obj.values
        return values

    def phase2_call(
        self, api: str, workspace: int, workspace_size: int, executor: Any, stream: Any
    ) -> tuple[Callable[..., int], tuple[Any, ...]]:
        """Phase 2 ``api`` as its method and arguments (see the Backend protocol): the method checks
        them at every launch, and keeps what it resolved while nothing changed (``executor.bound``)."""
        return getattr(self, api), (workspace, workspace_size, executor, stream)

    def _launch(self, api: str, workspace: int, workspace_size: int, executor: Any, stream: Any) -> int:
        """Phase 2 of every operator: the launch-time checks, then the kernel queued on the stream."""
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
        info = t.info  # (phase 1 made it)
        dtype = info.dtype if info is not None else _dtypes.to_numpy(t.data_type)
        array, allocation = self._heap.locate_view(t.data, dtype, t.shape, t.strides, t.offset, what)
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

"""The numpy backend's kernels: for each operator, the one place that chooses what computes a call.

Phase 1 (``_ops``) gets the call's plan from :mod:`pyaclnn.kernels.checks` and
binds the operator's kernel here (:data:`KERNELS`, by the operator table's
Python name); phase 2 resolves the tensors' memory and queues the call. When
the call runs, its kernel takes the first of these that takes it:

1. the compiled kernel (:mod:`pyaclnn.kernels._accel`), unless
   ``PYACLNN_ACCEL=0`` (read at every call) or the library cannot be built; it
   has codes for float32, float16 and bfloat16, and declines a call it has no
   scratch memory for, or (max-pool forward) a plane too large for its int32
   cells;
2. the tuned NumPy path (:mod:`pyaclnn.kernels._tuned`);
3. the reference (:mod:`pyaclnn.kernels.max_pool3d`,
   :mod:`pyaclnn.kernels.grid_sampler3d`), the specification, where it is the
   faster of the two NumPy kernels: the float32/float64 max-pool backward below
   :data:`TUNED_MIN_ELEMENTS` elements, which it scatters in one ``np.add.at``
   while the tuned path pays for its chunking (measured: 35 against 47 us at
   82k elements, 67 against 71 us at 164k, 160 against 123 us at 328k; every
   other operator and dtype was faster tuned at every size tried, 3-5x for the
   forward and the grid sampler, and float16 backward 3x, NumPy's float16 cast
   being slow).

All three give the same results (max pooling bit for bit; the grid sampler
to float32 rounding, the compiled inputGrad bit for bit with the tuned one),
which tests/test_accel*.py and tests/test_kernels_*.py check. How many threads
a fast kernel uses is :func:`pyaclnn.kernels._workers.threads_for`'s decision.

Adding an operator: its check function in :mod:`pyaclnn.kernels.checks` and
its binder here, ``_bind_<Python name>``, which :data:`KERNELS` finds by the
operator table; ``_ops`` makes its phase methods from the table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from math import prod
from typing import Any

import numpy as np

from ... import _optable
from ...constants import ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
from ...kernels import _accel
from ...kernels import max_pool3d as _pool
from ...kernels._tuned import grid_sampler3d as _tuned_grid
from ...kernels._tuned import max_pool3d as _tuned_pool
from ...kernels.checks import GridPlan, IndexOutOfPlaneError, MaxPoolPlan, index_outside_message
from ._streams import DeviceError

# And each operator's kernel function, named as the operator (max_pool3d_with_argmax, ...).
__all__ = ["TUNED_MIN_ELEMENTS", "Kernel", "KERNELS"]

#: Max-pool backward calls (float32 or float64) with fewer elements than this (gradients,
#: indices and grad_input) run the reference when the compiled kernel does not take them.
TUNED_MIN_ELEMENTS = 1 << 17

#: Workspace the emulated backward ops (``*_backward``) ask for, so callers exercise the workspace path.
BACKWARD_WORKSPACE = 32

#: The view of one tensor argument in phase 2, by its C name.
View = Callable[[str], np.ndarray]


@dataclass(frozen=True)
class Kernel:
    """An operator's kernel as phase 1 binds it."""

    #: (plan, view) -> the call phase 2 queues: resolves the views it needs (by C name) and
    #: returns a callable that runs the kernel on them.
    bind: Callable[[Any, View], Callable[[], None]]
    #: Workspace bytes phase 1 asks for.
    workspace: int


# -- MaxPool3dWithArgmax ------------------------------------------------------


def max_pool3d_with_argmax(plan: MaxPoolPlan, x: np.ndarray, out: np.ndarray, indices: np.ndarray) -> None:
    """The forward of ``plan`` on its 5-D arrays."""
    q = plan.params
    params = (q.kernel_size, q.stride, q.padding, q.dilation)  # ceil_mode sized out
    if _accel.max_pool3d(x, params, out, indices):
        return
    _tuned_pool.max_pool3d_with_argmax(x, params, out, indices)


def max_pool3d_with_argmax_backward(
    plan: MaxPoolPlan, grad_output: np.ndarray, indices: np.ndarray, grad_input: np.ndarray
) -> None:
    """The backward of ``plan`` on its 5-D arrays.

    Raises
    ------
    IndexOutOfPlaneError
        For an index outside its (n, c) plane, naming the first in C order; nothing written.
    """
    q = plan.params
    try:
        if _accel.max_pool3d_backward(
            grad_output, indices, grad_input, (q.kernel_size, q.stride, q.padding, q.dilation)
        ):
            return
    except _accel.BadIndex as exc:
        raise IndexOutOfPlaneError(index_outside_message(indices, exc.position, plan.plane)) from None
    small = 2 * grad_output.size + grad_input.size < TUNED_MIN_ELEMENTS and grad_input.dtype.itemsize >= 4
    kernel = _pool.max_pool3d_with_argmax_backward if small else _tuned_pool.max_pool3d_with_argmax_backward
    kernel(grad_output, indices, grad_input)


def _planned(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` in its plan's 5-D shape, without copying.

    The plan differs from the tensor's view shape only for a 4-D tensor
    (computed as N = 1) and for an output holding its single element in another
    shape (the op accepts it); NumPy reshapes both as views.
    """
    return a if a.shape == shape else a.reshape(shape)


def _bind_max_pool3d_with_argmax(plan: MaxPoolPlan, view: View) -> Callable[[], None]:
    x = _planned(view("self"), plan.input_shape)
    out, indices = (_planned(view(name), plan.output_shape) for name in ("out", "indices"))
    return partial(max_pool3d_with_argmax, plan, x, out, indices)


def _bind_max_pool3d_with_argmax_backward(plan: MaxPoolPlan, view: View) -> Callable[[], None]:
    grad_output, indices = (_planned(view(name), plan.output_shape) for name in ("gradOutput", "indices"))
    grad_input = _planned(view("gradInput"), plan.input_shape)

    def run() -> None:
        try:
            max_pool3d_with_argmax_backward(plan, grad_output, indices, grad_input)
        except IndexOutOfPlaneError:
            # The kernel refuses before writing; on the NPU this is a fault of the device.
            raise DeviceError(ACL_ERROR_RT_VECTOR_CORE_EXCEPTION, _index_fault(indices, grad_input)) from None

    return run


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


# -- GridSampler3D(Backward) --------------------------------------------------


def _modes(plan: GridPlan) -> tuple[int, int, bool]:
    return plan.interpolation_mode, plan.padding_mode, plan.align_corners


def grid_sampler3d(plan: GridPlan, input: np.ndarray, grid: np.ndarray, out: np.ndarray) -> None:
    """The forward of ``plan`` on its NCDHW arrays."""
    if _accel.grid_sampler3d((input, grid), _modes(plan), out):
        return
    _tuned_grid.grid_sampler3d((input, grid), _modes(plan), out)


def grid_sampler3d_backward(
    plan: GridPlan,
    grad_output: np.ndarray,
    input: np.ndarray,
    grid: np.ndarray,
    input_grad: np.ndarray | None,
    grid_grad: np.ndarray | None,
) -> None:
    """The backward of ``plan`` on its NCDHW arrays (None: an output not wanted)."""
    if _accel.grid_sampler3d_backward((grad_output, input, grid), _modes(plan), (input_grad, grid_grad)):
        return
    _tuned_grid.grid_sampler3d_backward((grad_output, input, grid), _modes(plan), (input_grad, grid_grad))


def _ncdhw(a: np.ndarray, plan: GridPlan) -> np.ndarray:
    """(N, D, H, W, C) data seen as (N, C, D, H, W), without copying."""
    return np.moveaxis(a, 4, 1) if plan.channels_last else a


def _bind_grid_sampler3d(plan: GridPlan, view: View) -> Callable[[], None]:
    x, out = (_ncdhw(view(name), plan) for name in ("input", "out"))
    return partial(grid_sampler3d, plan, x, view("grid"), out)


def _bind_grid_sampler3d_backward(plan: GridPlan, view: View) -> Callable[[], None]:
    grad_output, x = (_ncdhw(view(name), plan) for name in ("gradOutput", "input"))
    # An output the mask leaves out is neither resolved nor written (it keeps its contents).
    input_grad = _ncdhw(view("inputGrad"), plan) if plan.output_mask[0] else None
    grid_grad = view("gridGrad") if plan.output_mask[1] else None
    return partial(grid_sampler3d_backward, plan, grad_output, x, view("grid"), input_grad, grid_grad)


#: Each operator's kernel, by the operator table's Python name: its binder, ``_bind_<Python name>``
#: here (as its check is ``<Python name>`` in kernels.checks), and its workspace. An operator of the
#: table without a binder has no entry (the backend's phase 1 names what it lacks).
KERNELS: Mapping[str, Kernel] = {
    spec.python_name: Kernel(bind, BACKWARD_WORKSPACE if spec.python_name.endswith("_backward") else 0)
    for spec in _optable.operators()
    if (bind := globals().get(f"_bind_{spec.python_name}")) is not None
}

"""The numpy backend's kernels of MaxPool3dWithArgmax and its backward: the compiled kernel,
else the tuned NumPy path, else the reference (see :mod:`pyaclnn.backends.numpy._kernels`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from math import prod

import numpy as np

from ....constants import ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
from ....kernels import _accel
from ....kernels import max_pool3d as _pool
from ....kernels._tuned import max_pool3d as _tuned_pool
from ....kernels.checks import IndexOutOfPlaneError, MaxPoolPlan, index_outside_message
from .._streams import DeviceError
from ._kernel import View

__all__ = ["TUNED_MIN_ELEMENTS", "max_pool3d_with_argmax", "max_pool3d_with_argmax_backward"]

#: Max-pool backward calls (float32 or float64) with fewer elements than this (gradients,
#: indices and grad_input) run the reference when the compiled kernel does not take them.
TUNED_MIN_ELEMENTS = 1 << 17


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

"""The numpy backend's kernels of GridSampler3D and its backward: the compiled kernel, else the
tuned NumPy path (see :mod:`pyaclnn.backends.numpy._kernels`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from ....kernels import _accel
from ....kernels._tuned import grid_sampler3d as _tuned_grid
from ....kernels.checks import GridPlan
from ._kernel import View

__all__ = ["grid_sampler3d", "grid_sampler3d_backward"]


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

"""What the selftest expects: the reference kernels of :mod:`pyaclnn.kernels` on host arrays.

Called directly, as the numpy backend calls them (what an NPU is checked
against). Module-level functions, looked up at call time, so a test can replace
one (``monkeypatch.setattr(pyaclnn.selftest.references, ...)``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..kernels import checks as _checks
from ..kernels import grid_sampler3d as _grid
from ..kernels import max_pool3d as _pool

__all__ = [
    "MODES",
    "PADDINGS",
    "reference_max_pool3d_with_argmax",
    "reference_max_pool3d_with_argmax_backward",
    "reference_grid_sampler3d",
    "reference_grid_sampler3d_backward",
]

#: The functional API's sampling names -> the kernels' codes.
MODES = {"bilinear": _grid.BILINEAR, "nearest": _grid.NEAREST}
PADDINGS = {"zeros": _grid.ZEROS, "border": _grid.BORDER, "reflection": _grid.REFLECTION}


def reference_max_pool3d_with_argmax(x: np.ndarray, p: _checks.PoolParams) -> tuple[np.ndarray, np.ndarray]:
    """Pooled values and int32 indices of ``x`` (N, C, D, H, W) by :mod:`pyaclnn.kernels.max_pool3d`."""
    shape = x.shape[:2] + _checks.pooled_shape(x.shape[2:], p)
    out = np.empty(shape, dtype=x.dtype)
    indices = np.empty(shape, dtype=np.int32)
    _pool.max_pool3d_with_argmax(x, p.kernel_size, p.stride, p.padding, p.dilation, p.ceil_mode, out, indices)
    return out, indices


def reference_max_pool3d_with_argmax_backward(
    grad_output: np.ndarray, indices: np.ndarray, input_shape: Sequence[int]
) -> np.ndarray:
    """grad_input of shape ``input_shape`` (N, C, D, H, W) by :mod:`pyaclnn.kernels.max_pool3d`."""
    grad_input = np.empty(tuple(input_shape), dtype=grad_output.dtype)
    _pool.max_pool3d_with_argmax_backward(grad_output, indices, grad_input)
    return grad_input


def reference_grid_sampler3d(
    x: np.ndarray, grid: np.ndarray, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> np.ndarray:
    """Sampled ``x`` (N, C, D, H, W) at ``grid`` by :mod:`pyaclnn.kernels.grid_sampler3d`."""
    out = np.empty(x.shape[:2] + grid.shape[1:4], dtype=x.dtype)
    _grid.grid_sampler3d(x, grid, interpolation_mode, padding_mode, align_corners, out)
    return out


def reference_grid_sampler3d_backward(
    grad_output: np.ndarray,
    x: np.ndarray,
    grid: np.ndarray,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
    output_mask: Sequence[bool],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(input_grad, grid_grad), None where the mask is False, by :mod:`pyaclnn.kernels.grid_sampler3d`."""
    input_grad = np.empty(x.shape, dtype=x.dtype) if output_mask[0] else None
    grid_grad = np.empty(grid.shape, dtype=x.dtype) if output_mask[1] else None
    _grid.grid_sampler3d_backward(
        grad_output, x, grid, interpolation_mode, padding_mode, align_corners, input_grad, grid_grad
    )
    return input_grad, grid_grad

"""Reference math of aclnnMaxPool3dWithArgmax and aclnnMaxPool3dWithArgmaxBackward.

Plain NumPy, written to read as the specification (docs/operator-semantics.md,
Pooling parameters, MaxPool3dWithArgmax and MaxPool3dWithArgmaxBackward): no ACL
types, no descriptors, no threads, no tuning. The arguments are
what a plan of :mod:`pyaclnn.kernels.checks` describes (NCDHW arrays of any
strides, valid parameters, ``out`` sized by :func:`pool_output_shape`); the
kernels write into the output views they are given and never modify their
inputs.

The numpy backend runs faster implementations of the same math where it can
(``pyaclnn.backends.numpy._kernels`` chooses: the compiled kernels of
:mod:`pyaclnn.kernels._accel`, the tuned NumPy of :mod:`pyaclnn.kernels._tuned`);
each is checked against these (tests/test_accel*.py, tests/test_kernels_*.py).

Forward, as PyTorch ``max_pool3d_with_indices`` on CPU: every window starts
from -inf and its first in-bounds cell, then scans its in-bounds cells in d, h,
w order, and a cell wins when it is greater than the running maximum or NaN.
So ties go to the first maximum, a window holding NaN gives NaN and the index
of its last NaN, an all -inf window gives -inf and its first in-bounds cell,
and a window over padding only gives -inf and the cell its start reaches by
whole dilations (which lies past the plane). Each output is the exact value
of its input cell.

Backward, as PyTorch ``max_pool3d_with_indices_backward``: grad_input = 0 plus
each gradient added at its index, in the C order of grad_output, summed in
float32 for float16/bfloat16/float32 (float64 for float64) and rounded once.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ..dtypes import compute_dtype
from . import _workers
from .checks import IndexOutOfPlaneError, check_indices, pool_output_size

__all__ = [
    "IndexOutOfPlaneError",
    "max_pool3d_with_argmax",
    "max_pool3d_with_argmax_backward",
    "pool_output_shape",
    "pool_output_size",
]


# benchmarks/bench_kernels.py and bench_floor.py still read the kernels' thread count here;
# remove once they ask pyaclnn.kernels._workers. These kernels use no threads.
_thread_count = _workers.thread_count


def pool_output_shape(
    spatial: Sequence[int],
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> tuple[int, int, int]:
    """(Do, Ho, Wo) of an input volume (D, H, W): :func:`pyaclnn.kernels.checks.pool_output_size`
    per axis. Every parameter is a 3-tuple ordered (depth, height, width)."""
    d, h, w = (
        pool_output_size(int(n), int(k), int(s), int(p), int(dl), bool(ceil_mode))
        for n, k, s, p, dl in zip(spatial, kernel_size, stride, padding, dilation, strict=True)
    )
    return d, h, w


def _window_cells(
    length: int, out_len: int, kernel: int, stride: int, padding: int, dilation: int
) -> np.ndarray:
    """(out_len, offsets) input coordinates of the windows' cells along one axis, for the
    kernel offsets, in order, whose cell lies inside the input for some window.

    The other offsets read padding in every window, and padding never wins, so
    leaving them out changes no result (and a kernel far larger than the input
    costs no more than one its size).
    """
    first = max(0, -(-(padding - (out_len - 1) * stride) // dilation))  # ceil: the first that reaches in
    end = min(kernel, (length - 1 + padding) // dilation + 1)  # one past the last
    start = np.arange(out_len) * stride - padding
    return start[:, None] + np.arange(first, max(first, end)) * dilation


def _first_cell(out_len: int, stride: int, padding: int, dilation: int) -> np.ndarray:
    """The first cell of every window along one axis that is not left of the input:
    the window's start moved right by whole dilations (it may lie past the end)."""
    start = np.arange(out_len) * stride - padding
    first: np.ndarray = start + -(np.minimum(start, 0) // dilation) * dilation
    return first


def _outer(d: np.ndarray, h: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-axis arrays shaped to broadcast over (Do, Ho, Wo)."""
    return d[:, None, None], h[None, :, None], w[None, None, :]


def max_pool3d_with_argmax(
    x: np.ndarray,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
    out: np.ndarray,
    indices: np.ndarray,
) -> None:
    """3-D max pooling with argmax, written into ``out`` and ``indices``.

    Parameters
    ----------
    x : ndarray, shape (N, C, D, H, W)
        float32, float16, bfloat16 or float64; any strides. Not modified.
    kernel_size, stride, padding, dilation : 3-tuples of int
        Valid (docs/operator-semantics.md, Pooling parameters): k > 0, s > 0, 0 <= p <= k // 2, d > 0.
    ceil_mode : bool
        Output-size rounding; ``out`` is already sized with it
        (:func:`pool_output_shape`), so the kernel takes (Do, Ho, Wo) from there.
    out : ndarray, shape (N, C, Do, Ho, Wo)
        Writable, of ``x``'s dtype; receives the window maxima.
    indices : ndarray, shape (N, C, Do, Ho, Wo)
        Writable int32 or int64; receives d*H*W + h*W + w of each maximum inside
        its unpadded (n, c) plane.
    """
    del ceil_mode  # it sized ``out``
    n, c, depth, height, width = x.shape
    out_spatial = out.shape[2:]
    ct = compute_dtype(x.dtype)
    # Per axis: the cells of each window, and the first in-bounds one, where a window starts.
    axes = list(zip((depth, height, width), out_spatial, kernel_size, stride, padding, dilation))
    cells = [_window_cells(n, o, k, s, p, d) for n, o, k, s, p, d in axes]
    firsts = [_first_cell(o, s, p, d) for _, o, _, s, p, d in axes]
    zf, yf, xf = _outer(*firsts)
    best = np.full(out.shape, -np.inf, ct)
    arg = np.broadcast_to((zf * height + yf) * width + xf, out.shape).astype(np.int64)
    seen = np.zeros(out_spatial, bool)  # windows holding an input cell
    sizes = (depth, height, width)
    for offsets in itertools.product(*(range(axis_cells.shape[1]) for axis_cells in cells)):
        at = [axis_cells[:, j] for axis_cells, j in zip(cells, offsets)]  # the cell each window reads
        inside = _outer(*((0 <= v) & (v < size) for v, size in zip(at, sizes)))
        z, y, w = _outer(*(np.clip(v, 0, size - 1) for v, size in zip(at, sizes)))
        in_bounds = inside[0] & inside[1] & inside[2]
        seen |= in_bounds
        v = np.where(in_bounds, x[:, :, z, y, w].astype(ct), -np.inf)  # padding: -inf, never wins
        take = (v > best) | np.isnan(v)
        best = np.where(take, v, best)
        arg = np.where(take, (z * height + y) * width + w, arg)
    indices[...] = arg
    # The maxima as the exact input values (sign of zero, NaN payloads); -inf for padding only.
    plane = depth * height * width
    hit = np.broadcast_to(seen, out.shape)
    values = np.full(out.shape, -np.inf, x.dtype)
    if hit.any():
        cell = np.where(hit, arg, 0).reshape(n, c, -1)
        values[hit] = np.take_along_axis(x.reshape(n, c, plane), cell, axis=2).reshape(out.shape)[hit]
    out[...] = values


@np.errstate(
    all="ignore"
)  # inf - inf and sums beyond float16 are part of the math (the device raises nothing)
def max_pool3d_with_argmax_backward(
    grad_output: np.ndarray, indices: np.ndarray, grad_input: np.ndarray
) -> None:
    """Scatter-add ``grad_output`` to the argmax positions, into ``grad_input``.

    Parameters
    ----------
    grad_output : ndarray, shape (N, C, Do, Ho, Wo)
        float32, float16, bfloat16 or float64; any strides. Not modified.
    indices : ndarray, shape (N, C, Do, Ho, Wo)
        int32 or int64, any strides: flat positions d*H*W + h*W + w inside each
        (n, c) plane of the input, as the forward produces. Not modified.
    grad_input : ndarray, shape (N, C, D, H, W)
        Writable, of ``grad_output``'s dtype, fully overwritten: zeros plus the
        sum of the gradients sent to each position.

    Raises
    ------
    IndexOutOfPlaneError
        If an index is outside [0, D*H*W), before anything is written, naming
        the first bad position in C order (:func:`pyaclnn.kernels.checks.check_indices`).
    """
    n, c, depth, height, width = grad_input.shape
    plane = depth * height * width
    check_indices(indices, plane)
    acc = np.zeros((n, c, plane), compute_dtype(grad_input.dtype))
    # Each (n, c) plane as one stretch of a flat accumulator; np.add.at adds in index order,
    # which is the C order of grad_output.
    flat = indices.astype(np.int64) + (np.arange(n * c).reshape(n, c, 1, 1, 1) * plane)
    np.add.at(acc.reshape(-1), flat.reshape(-1), grad_output.astype(acc.dtype).reshape(-1))
    grad_input[...] = acc.reshape(grad_input.shape)  # rounded once

"""Reference math of aclnnGridSampler3D and aclnnGridSampler3DBackward.

Plain NumPy, written to read as the specification (docs/operator-semantics.md,
GridSampler3D and GridSampler3DBackward): no ACL types, no descriptors, no threads,
no tuning. The arguments are
what a plan of :mod:`pyaclnn.kernels.checks` describes: NCDHW arrays of any
strides (a channels-last tensor arrives as an ``np.moveaxis`` view of its NDHWC
storage), the grid as (N, Do, Ho, Wo, 3), valid modes; the kernels write into
the output views they are given and never modify their inputs.

The numpy backend runs faster implementations of the same math where it can
(``pyaclnn.backends.numpy._kernels`` chooses: the compiled kernels of
:mod:`pyaclnn.kernels._accel`, the tuned NumPy of :mod:`pyaclnn.kernels._tuned`);
each is checked against these (tests/test_accel_grid.py, tests/test_kernels_grid_sampler3d.py).

The math is PyTorch's ``grid_sampler_3d`` / ``grid_sampler_3d_backward`` on
CPU (``GridSampler.h``), which the op documentation follows:

* ``grid[..., 0]`` (x) addresses W, ``grid[..., 1]`` (y) H, ``grid[..., 2]`` (z) D;
* each coordinate is unnormalized, then padded (zeros / border / reflection);
* a coordinate that ends above ``INT_MAX - 1``, below ``INT_MIN`` or NaN becomes
  -100, i.e. out of bounds (the device's sentinel); with border padding a
  coordinate that was NaN before clipping, and with reflection one that was
  +-inf or NaN before reflecting, becomes -100 too (+-inf under border clamps to
  the edge);
* bilinear interpolation weighs the 8 corners of the cell and skips the corners
  outside the input; nearest rounds half to even (``np.rint``);
* the backward adds into inputGrad (from zero) and computes gridGrad (0 for
  nearest).

fp16 and bf16 are computed in fp32 (fp64 stays fp64) and rounded once when the
result is written, as the NPU does on A2/A3.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..dtypes import compute_dtype

__all__ = [
    "BILINEAR",
    "NEAREST",
    "ZEROS",
    "BORDER",
    "REFLECTION",
    "grid_sampler3d",
    "grid_sampler3d_backward",
]

BILINEAR, NEAREST = 0, 1  # interpolationMode values of the C API
ZEROS, BORDER, REFLECTION = 0, 1, 2  # paddingMode values of the C API

# The device kernel's sentinel for coordinates that do not fit an int32.
_OUT_OF_RANGE = -100.0
_INT_MAX_M1 = 2**31 - 2
_INT_MIN = -(2**31)
# Output points computed together: bounds the temporaries to a few (C, points) arrays.
_POINTS = 4096
# The 8 corners of a cell, as (z, y, x) offsets from its (z0, y0, x0) corner, z-major.
_CORNERS = tuple(itertools.product((0, 1), repeat=3))


# --------------------------------------------------------------------------
# Coordinates, one axis at a time
# --------------------------------------------------------------------------


def _unnormalize(coord: np.ndarray, size: int, align: bool) -> tuple[np.ndarray, float]:
    """Source coordinate of normalized ``coord`` along an axis of ``size`` cells, and d(source)/d(coord)."""
    ct = coord.dtype.type
    if align:
        return ((coord + ct(1)) / ct(2)) * ct(size - 1), (size - 1) / 2
    return ((coord + ct(1)) * ct(size) - ct(1)) / ct(2), size / 2


def _clip(i: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Border padding: ``i`` clipped to [0, size-1], and its gradient (0 at and beyond the borders)."""
    grad = ((i > 0) & (i < size - 1)).astype(i.dtype)
    return np.clip(i, 0, size - 1), grad


def _reflect(i: np.ndarray, twice_lo: int, twice_hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Reflection of ``i`` into [twice_lo/2, twice_hi/2], and its gradient (+1 or -1)."""
    ct = i.dtype.type
    if twice_lo == twice_hi:  # align_corners with a single cell
        return np.zeros_like(i), np.zeros_like(i)
    lo, span = ct(twice_lo / 2), ct((twice_hi - twice_lo) / 2)
    t = i - lo
    sign = np.where(t < 0, ct(-1), ct(1))
    t = np.abs(t)
    extra = np.fmod(t, span)
    odd = np.fmod(np.floor(t / span), 2) != 0
    return np.where(odd, (span - extra) + lo, extra + lo), np.where(odd, -sign, sign)


def _source_index(coord: np.ndarray, size: int, padding: int, align: bool) -> tuple[np.ndarray, np.ndarray]:
    """Source coordinate of ``coord`` along an axis of ``size`` cells (-100 when out of
    range), and d(source)/d(coord) per point."""
    i, multiplier = _unnormalize(coord, size, align)
    grad = np.ones_like(i)
    bad = np.zeros(i.shape, bool)
    if padding == BORDER:
        bad = np.isnan(i)
        i, grad = _clip(i, size)
    elif padding == REFLECTION:
        bad = ~np.isfinite(i)
        i, grad = _reflect(i, 0, 2 * (size - 1)) if align else _reflect(i, -1, 2 * size - 1)
        i, clipped = _clip(i, size)
        grad = grad * clipped
    ct = i.dtype.type
    keep = (i >= ct(_INT_MIN)) & (i <= ct(_INT_MAX_M1)) & ~bad  # False for NaN
    return np.where(keep, i, ct(_OUT_OF_RANGE)), grad * ct(multiplier)


class _Points:
    """Output points [p0, p1) of one batch item: their (d, h, w) and source coordinates."""

    def __init__(
        self,
        grid_n: np.ndarray,
        p0: int,
        p1: int,
        sizes: tuple[int, ...],
        ct: np.dtype,
        padding: int,
        align: bool,
    ) -> None:
        self.at = np.unravel_index(np.arange(p0, p1), grid_n.shape[:3])  # (d, h, w) of each point
        coords = grid_n[self.at].astype(ct)  # (points, 3): x, y, z
        depth, height, width = sizes
        # Source coordinates and their gradient factors, in (z, y, x) order like the input's axes.
        (iz, gz), (iy, gy), (ix, gx) = (
            _source_index(coords[:, axis], size, padding, align)
            for axis, size in ((2, depth), (1, height), (0, width))
        )
        self.source, self.grad = (iz, iy, ix), (gz, gy, gx)
        self.sizes = sizes


Cells = tuple[np.ndarray, np.ndarray, np.ndarray]


def _inside(cells: Cells, sizes: tuple[int, ...]) -> tuple[np.ndarray, Cells]:
    """For integer cells (z, y, x) of points: which lie inside the input, and the cells
    clipped into it (where they may be read)."""
    inside = np.ones(cells[0].shape, bool)
    for v, size in zip(cells, sizes):
        inside &= (v >= 0) & (v < size)
    z, y, x = (np.clip(v, 0, max(size - 1, 0)).astype(np.intp) for v, size in zip(cells, sizes))
    return inside, (z, y, x)


def _values(input_n: np.ndarray, inside: np.ndarray, where: Cells, ct: np.dtype) -> np.ndarray:
    """input_n (C, D, H, W) at the cells ``where`` as (C, points) in ``ct``, 0 where not ``inside``."""
    if not inside.any():
        return np.zeros((input_n.shape[0], inside.size), ct)
    return np.where(inside, input_n[(slice(None),) + where].astype(ct), ct.type(0))


Corner = tuple[tuple[int, int, int], np.ndarray, np.ndarray, Cells]


def _corners(points: _Points) -> tuple[tuple[tuple[np.ndarray, np.ndarray], ...], list[Corner]]:
    """The per-axis (low, high) weights (z, y, x order) of the points' cells, and each of
    the 8 corners (a, b, e) as its offsets, weight (wx * wy) * wz, inside mask and cells."""
    lows = tuple(np.floor(i) for i in points.source)
    weights = tuple(((low + 1) - i, i - low) for i, low in zip(points.source, lows))
    (z0, y0, x0), (wz, wy, wx) = lows, weights
    corners = []
    for a, b, e in _CORNERS:
        weight = (wx[e] * wy[b]) * wz[a]  # PyTorch's order
        inside, where = _inside((z0 + a, y0 + b, x0 + e), points.sizes)
        corners.append(((a, b, e), weight, inside, where))
    return weights, corners


# --------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------


@np.errstate(all="ignore")  # overflow, NaN and inf are part of the math (the device raises nothing)
def grid_sampler3d(
    input: np.ndarray,
    grid: np.ndarray,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
    out: np.ndarray,
) -> None:
    """Sample ``input`` at ``grid``, writing into ``out`` (aclnnGridSampler3D).

    Parameters
    ----------
    input : ndarray, shape (N, C, D, H, W)
        float16, bfloat16, float32 or float64; any strides.
    grid : ndarray, shape (N, Do, Ho, Wo, 3)
        Normalized (x, y, z) sampling positions, input's dtype; any strides.
    interpolation_mode : int
        ``BILINEAR`` (0) or ``NEAREST`` (1).
    padding_mode : int
        ``ZEROS`` (0), ``BORDER`` (1) or ``REFLECTION`` (2).
    align_corners : bool
        Whether -1 and 1 address the centres (True) or the outer edges (False)
        of the corner cells.
    out : ndarray, shape (N, C, Do, Ho, Wo)
        Writable view of input's dtype (any strides); fully overwritten.
    """
    ct = compute_dtype(input.dtype)
    sizes = input.shape[2:]
    points = grid.shape[1] * grid.shape[2] * grid.shape[3]
    for n in range(input.shape[0]):
        for p0 in range(0, points, _POINTS):
            pts = _Points(grid[n], p0, min(points, p0 + _POINTS), sizes, ct, padding_mode, align_corners)
            if interpolation_mode == NEAREST:
                z, y, x = (np.rint(i) for i in pts.source)  # half to even
                inside, where = _inside((z, y, x), sizes)
                result = _values(input[n], inside, where, ct)
            else:
                result = np.zeros((input.shape[1], pts.at[0].size), ct)
                for _, weight, inside, where in _corners(pts)[1]:
                    values = _values(input[n], inside, where, ct)
                    np.add(result, values * weight, out=result, where=inside)  # corners outside: skipped
            out[n][(slice(None),) + pts.at] = result  # rounded once


# --------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------


@np.errstate(all="ignore")
def grid_sampler3d_backward(
    grad_output: np.ndarray,
    input: np.ndarray,
    grid: np.ndarray,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
    input_grad: np.ndarray | None,
    grid_grad: np.ndarray | None,
) -> None:
    """Gradients of grid sampling (aclnnGridSampler3DBackward).

    Parameters
    ----------
    grad_output : ndarray, shape (N, C, Do, Ho, Wo)
        Gradient of the forward output; any strides.
    input : ndarray, shape (N, C, D, H, W)
        The forward's input; any strides.
    grid : ndarray, shape (N, Do, Ho, Wo, 3)
        The forward's grid; any strides.
    interpolation_mode, padding_mode, align_corners
        As for :func:`grid_sampler3d`.
    input_grad : ndarray, shape (N, C, D, H, W), or None
        Writable view for the input gradient, or None when not requested:
        the sum, from zero, of weight * gradOutput at every in-bounds corner.
    grid_grad : ndarray, shape (N, Do, Ho, Wo, 3), or None
        Writable view for the grid gradient, or None when not requested: per
        point and axis, the sum over channels and in-bounds corners of
        +-V * gradOutput * (the other two axes' weights), - for the low corner
        on the axis, times d(source)/d(coord); all zero for nearest.

    Notes
    -----
    All arrays share one dtype (float16, bfloat16, float32 or float64). The
    math runs in fp32 (fp64 for fp64) and each output is rounded once.
    """
    ct = compute_dtype(input.dtype)
    sizes = input.shape[2:]
    points = grid.shape[1] * grid.shape[2] * grid.shape[3]
    nearest = interpolation_mode == NEAREST
    if grid_grad is not None and nearest:
        grid_grad[...] = 0
        grid_grad = None
    for n in range(input.shape[0]):
        acc = np.zeros(input.shape[1:], ct) if input_grad is not None else None
        for p0 in range(0, points, _POINTS):
            pts = _Points(grid[n], p0, min(points, p0 + _POINTS), sizes, ct, padding_mode, align_corners)
            gout = grad_output[n][(slice(None),) + pts.at].astype(ct)  # (C, points)
            if nearest:
                if acc is not None:
                    z, y, x = (np.rint(i) for i in pts.source)
                    inside, where = _inside((z, y, x), sizes)
                    np.add.at(acc, (slice(None),) + tuple(w[inside] for w in where), gout[:, inside])
                continue
            gxyz = [np.zeros(gout.shape[1], ct) for _ in range(3)]  # d/dz, d/dy, d/dx sums
            (wz, wy, wx), corners = _corners(pts)
            for (a, b, e), weight, inside, where in corners:
                if acc is not None:
                    np.add.at(
                        acc,
                        (slice(None),) + tuple(w[inside] for w in where),
                        weight[inside] * gout[:, inside],
                    )
                if grid_grad is not None:
                    values = _values(input[n], inside, where, ct)
                    vg = np.where(inside, (values * gout).sum(axis=0), ct.type(0))  # skipped when outside
                    gxyz[0] += (1 if a else -1) * vg * (wx[e] * wy[b])
                    gxyz[1] += (1 if b else -1) * vg * (wx[e] * wz[a])
                    gxyz[2] += (1 if e else -1) * vg * (wy[b] * wz[a])
            if grid_grad is not None:
                for axis, (sums, grad) in enumerate(zip(gxyz, pts.grad)):  # grid holds (x, y, z)
                    grid_grad[n][pts.at + (2 - axis,)] = sums * grad
        if input_grad is not None and acc is not None:
            input_grad[n] = acc  # rounded once

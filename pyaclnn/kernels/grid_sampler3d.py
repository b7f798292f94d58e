"""NumPy math of aclnnGridSampler3D and aclnnGridSampler3DBackward.

Pure NumPy: no ACL types, no descriptors. The numpy backend validates the
arguments the way the device does (op-semantics.md §4-5) and then calls these
kernels with NCDHW arrays of any strides (a channels-last tensor arrives as an
``np.moveaxis`` view of its NDHWC storage); the kernels write into the output
views they are given and never modify their inputs.

The math is PyTorch's ``grid_sampler_3d`` / ``grid_sampler_3d_backward`` on
CPU (``GridSampler.h``), which the op documentation follows:

* ``grid[..., 0]`` (x) addresses W, ``grid[..., 1]`` (y) H, ``grid[..., 2]`` (z) D;
* coordinates are unnormalized, then padded (zeros / border / reflection);
* a coordinate that ends above ``INT_MAX - 1``, below ``INT_MIN`` or NaN becomes
  -100, i.e. out of bounds; with border padding a coordinate that was NaN
  before clipping, and with reflection one that was +-inf or NaN before
  reflecting, becomes -100 too (+-inf under border clamps to the edge);
* bilinear interpolation uses the 8 corners of the cell and skips the corners
  outside the input; nearest rounds half to even (``np.rint``);
* the backward scatters into inputGrad (zeroed first) and computes gridGrad
  (always 0 for nearest).

fp16 and bf16 are computed in fp32 (fp64 stays fp64) and rounded once when the
result is written, as the NPU does on A2/A3.

Implementation: the output points of one batch item are processed in chunks.
For a chunk the per-axis floor indices, weights and validity are computed
once; each of the 8 corners gets a flat index into the (D*H*W) cells of the
batch item, or the sentinel index D*H*W for an out-of-bounds corner. The
input is gathered from a channels-last (D*H*W + 1, C) table whose last row is
zero, so out-of-bounds corners read 0 and never touch input values; inputGrad
is scattered per channel into (C, D*H*W + 1) planes whose last column is
thrown away.
"""

from __future__ import annotations

import numpy as np

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

# Scratch budget of one chunk of points: the (points, 8, C) gathered corners
# and the per-channel scatter values should stay in the L2 cache, while the
# chunk stays large enough that NumPy's per-call overhead does not dominate.
_CHUNK_BYTES = 1 << 20
_MIN_CHUNK = 2048
_MAX_CHUNK = 1 << 16

# Sentinel of the device kernel for coordinates that do not fit an int32.
_OUT_OF_RANGE = -100.0
_INT_MAX_M1 = 2**31 - 2
_INT_MIN = -(2**31)


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    # fp16/bf16 are computed in fp32 like the device; fp64 stays fp64.
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _chunk_points(channels: int) -> int:
    per_point = 8 * max(channels, 1) * 4
    return int(min(_MAX_CHUNK, max(_MIN_CHUNK, _CHUNK_BYTES // per_point)))


def _view_as(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """A reshaped view of ``a`` that shares its memory, or None when the
    reshape would need a copy (writes into a copy would be lost)."""
    try:
        v = a.view()
        v.shape = shape
    except AttributeError:
        return None
    return v


# --------------------------------------------------------------------------
# Coordinates
# --------------------------------------------------------------------------


def _clip(i: np.ndarray, size: int, need_grad: bool) -> tuple[np.ndarray, np.ndarray | None]:
    # Border clip; the borders themselves count as clipped (gradient 0).
    hi = size - 1
    g = ((i > 0) & (i < hi)).astype(i.dtype) if need_grad else None
    return np.clip(i, 0, hi, out=i), g


def _reflect(
    i: np.ndarray, twice_lo: int, twice_hi: int, need_grad: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    ct = i.dtype.type
    if twice_lo == twice_hi:
        r = np.zeros_like(i)
        return r, (np.zeros_like(i) if need_grad else None)
    lo = ct(twice_lo / 2)
    span = ct((twice_hi - twice_lo) / 2)
    t = i - lo
    neg = t < 0
    np.abs(t, out=t)
    extra = np.fmod(t, span)
    flips = np.floor(t / span)
    odd = np.fmod(flips, 2) != 0
    res = np.where(odd, (span - extra) + lo, extra + lo)
    g = None
    if need_grad:
        # +1 when the reflection keeps the direction, -1 when it flips it.
        g = np.where(neg != odd, ct(-1), ct(1))
    return res, g


def _source_index(
    coord: np.ndarray, size: int, padding: int, align: bool, need_grad: bool
) -> tuple[np.ndarray, float, np.ndarray | None]:
    """Unnormalize and pad one axis.

    Returns the source coordinate (with -100 for the device's out-of-range
    sentinel), the scalar gradient multiplier of the unnormalization and the
    per-point multiplier of the padding (None for zeros padding or when no
    gradient is needed).
    """
    ct = coord.dtype.type
    # Same operation order as PyTorch so that ties of nearest agree.
    if align:
        i = ((coord + ct(1)) / ct(2)) * ct(size - 1)
        mult = (size - 1) / 2
    else:
        i = ((coord + ct(1)) * ct(size) - ct(1)) / ct(2)
        mult = size / 2
    g = None
    bad = None
    if padding == BORDER:
        bad = np.isnan(i)
        i, g = _clip(i, size, need_grad)
    elif padding == REFLECTION:
        bad = ~np.isfinite(i)
        if align:
            i, g = _reflect(i, 0, 2 * (size - 1), need_grad)
        else:
            i, g = _reflect(i, -1, 2 * size - 1, need_grad)
        i, gc = _clip(i, size, need_grad)
        if need_grad:
            g *= gc
    keep = (i >= ct(_INT_MIN)) & (i <= ct(_INT_MAX_M1))  # False for NaN
    if bad is not None:
        keep &= ~bad
    i = np.where(keep, i, ct(_OUT_OF_RANGE))
    return i, mult, g


def _axis_offsets(i0: np.ndarray, size: int, stride: int, sentinel: int) -> np.ndarray:
    """Flat-index contributions ``i0 * stride`` of one axis, or ``sentinel``
    (>= number of cells) where i0 is outside [0, size)."""
    ok = (i0 >= 0) & (i0 < size)
    return np.where(ok, i0 * stride, sentinel)


# --------------------------------------------------------------------------
# Per-chunk geometry
# --------------------------------------------------------------------------


class _Chunk:
    """Corner indices and weights of a chunk of points of one batch item."""

    __slots__ = ("idx", "w", "wx", "wy", "wz", "mx", "my", "mz", "gx", "gy", "gz")

    def __init__(
        self,
        g: np.ndarray,
        dims: tuple[int, int, int],
        interp: int,
        padding: int,
        align: bool,
        need_grad: bool,
    ) -> None:
        D, H, W = dims
        M = D * H * W
        ix, self.mx, self.gx = _source_index(g[:, 0], W, padding, align, need_grad)
        iy, self.my, self.gy = _source_index(g[:, 1], H, padding, align, need_grad)
        iz, self.mz, self.gz = _source_index(g[:, 2], D, padding, align, need_grad)
        if interp == NEAREST:
            cx = _axis_offsets(np.rint(ix).astype(np.intp), W, 1, M)
            cy = _axis_offsets(np.rint(iy).astype(np.intp), H, W, M)
            cz = _axis_offsets(np.rint(iz).astype(np.intp), D, H * W, M)
            cx += cy
            cx += cz
            self.idx = np.minimum(cx, M, out=cx)
            self.w = None
            return
        fx, fy, fz = np.floor(ix), np.floor(iy), np.floor(iz)
        # Per-axis weights of the low and high corner, as PyTorch forms them.
        self.wx = (fx + 1 - ix, ix - fx)
        self.wy = (fy + 1 - iy, iy - fy)
        self.wz = (fz + 1 - iz, iz - fz)
        x0, y0, z0 = fx.astype(np.intp), fy.astype(np.intp), fz.astype(np.intp)
        cx = (_axis_offsets(x0, W, 1, M), _axis_offsets(x0 + 1, W, 1, M))
        cy = (_axis_offsets(y0, H, W, M), _axis_offsets(y0 + 1, H, W, M))
        cz = (_axis_offsets(z0, D, H * W, M), _axis_offsets(z0 + 1, D, H * W, M))
        n = g.shape[0]
        idx = np.empty((n, 8), dtype=np.intp)
        w = np.empty((n, 8), dtype=ix.dtype)
        for b in range(2):
            for e in range(2):
                cyx = cy[b] + cx[e]
                wyx = self.wx[e] * self.wy[b]
                for a in range(2):
                    k = 4 * a + 2 * b + e  # z-major, x-minor corner order
                    np.add(cyx, cz[a], out=idx[:, k])
                    np.multiply(wyx, self.wz[a], out=w[:, k])
        # Any out-of-bounds axis pushed the sum to >= M: map it to the sentinel.
        self.idx = np.minimum(idx, M, out=idx)
        self.w = w


def _grid_grad_from_corner_dots(ch: _Chunk, dots: np.ndarray, out: np.ndarray) -> None:
    """gridGrad of a bilinear chunk from ``dots[p, k] = sum_c V[p, k, c] * gOut[p, c]``.

    ``out`` is the (points, 3) result in the compute dtype.
    """
    t = dots.reshape(-1, 2, 2, 2)  # (p, z, y, x)
    wx0, wx1 = ch.wx
    wy0, wy1 = ch.wy
    wz0, wz1 = ch.wz
    dx = t[:, :, :, 1] - t[:, :, :, 0]  # (p, z, y)
    gx = (dx[:, 0, 0] * wy0 + dx[:, 0, 1] * wy1) * wz0 + (dx[:, 1, 0] * wy0 + dx[:, 1, 1] * wy1) * wz1
    dy = t[:, :, 1, :] - t[:, :, 0, :]  # (p, z, x)
    gy = (dy[:, 0, 0] * wx0 + dy[:, 0, 1] * wx1) * wz0 + (dy[:, 1, 0] * wx0 + dy[:, 1, 1] * wx1) * wz1
    dz = t[:, 1, :, :] - t[:, 0, :, :]  # (p, y, x)
    gz = (dz[:, 0, 0] * wx0 + dz[:, 0, 1] * wx1) * wy0 + (dz[:, 1, 0] * wx0 + dz[:, 1, 1] * wx1) * wy1
    for j, (gsum, m, gpad) in enumerate(((gx, ch.mx, ch.gx), (gy, ch.my, ch.gy), (gz, ch.mz, ch.gz))):
        gsum *= gsum.dtype.type(m)
        if gpad is not None:
            gsum *= gpad
        out[:, j] = gsum


# --------------------------------------------------------------------------
# Layout helpers
# --------------------------------------------------------------------------


def _table(inp_n: np.ndarray, ct: np.dtype) -> np.ndarray:
    """Channels-last (D*H*W + 1, C) copy of one batch item with a zero last row."""
    C, D, H, W = inp_n.shape
    M = D * H * W
    tab = np.empty((M + 1, C), dtype=ct)
    tab[M] = 0
    tab[:M].reshape(D, H, W, C)[...] = np.moveaxis(inp_n, 0, -1)
    return tab


def _points_cf(a_n: np.ndarray) -> np.ndarray:
    """(C, P) view (or copy) of a (C, Do, Ho, Wo) array."""
    return a_n.reshape(a_n.shape[0], -1)


# --------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------


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

    Notes
    -----
    Computed in fp32 for fp16/bf16/fp32 and in fp64 for fp64, rounded once.
    """
    N, C, D, H, W = input.shape
    if out.size == 0:
        return
    ct = _compute_dtype(input.dtype)
    Do, Ho, Wo = grid.shape[1:4]
    P = Do * Ho * Wo
    chunk = _chunk_points(C)
    for n in range(N):
        tab = _table(input[n], ct)
        out_n = _view_as(out[n], (C, P))
        buf = np.empty((C, P), dtype=out.dtype) if out_n is None else out_n
        grid_n = grid[n].reshape(P, 3)
        for p0 in range(0, P, chunk):
            p1 = min(P, p0 + chunk)
            g = grid_n[p0:p1].astype(ct)
            ch = _Chunk(g, (D, H, W), interpolation_mode, padding_mode, align_corners, False)
            if ch.w is None:
                res = np.take(tab, ch.idx, axis=0)  # (p, C)
            else:
                v = np.take(tab, ch.idx, axis=0)  # (p, 8, C)
                res = np.matmul(ch.w[:, None, :], v)[:, 0, :]
            buf[:, p0:p1] = res.T
        if out_n is None:
            out[n] = buf.reshape(C, Do, Ho, Wo)


# --------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------


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
        Writable view for the input gradient, or None when not requested.
        Fully overwritten (accumulated from zero).
    grid_grad : ndarray, shape (N, Do, Ho, Wo, 3), or None
        Writable view for the grid gradient, or None when not requested.
        Fully overwritten; all zero for nearest interpolation.

    Notes
    -----
    All arrays share one dtype (float16, bfloat16, float32 or float64). The
    math runs in fp32 (fp64 for fp64) and each output is rounded once.
    """
    N, C, D, H, W = input.shape
    Do, Ho, Wo = grid.shape[1:4]
    P = Do * Ho * Wo
    M = D * H * W
    ct = _compute_dtype(input.dtype)
    want_in = input_grad is not None and input_grad.size > 0
    want_grid = grid_grad is not None and grid_grad.size > 0
    if want_grid and (interpolation_mode == NEAREST or C == 0 or M == 0):
        grid_grad[...] = 0
        want_grid = False
    if want_in and (P == 0 or C == 0):
        input_grad[...] = 0
        want_in = False
    if not (want_in or want_grid):
        return
    chunk = _chunk_points(C)
    for n in range(N):
        tab = _table(input[n], ct) if want_grid else None
        acc = np.zeros((C, M + 1), dtype=ct) if want_in else None
        gout_n = _points_cf(grad_output[n])  # (C, P)
        grid_n = grid[n].reshape(P, 3)
        gg_n = None
        if want_grid:
            gg_n = _view_as(grid_grad[n], (P, 3))
            gg_buf = np.empty((P, 3), dtype=grid_grad.dtype) if gg_n is None else gg_n
        for p0 in range(0, P, chunk):
            p1 = min(P, p0 + chunk)
            g = grid_n[p0:p1].astype(ct)
            ch = _Chunk(g, (D, H, W), interpolation_mode, padding_mode, align_corners, want_grid)
            go = gout_n[:, p0:p1].astype(ct, copy=False)  # (C, p)
            if want_in:
                if ch.w is None:
                    for c in range(C):
                        np.add.at(acc[c], ch.idx, go[c])
                else:
                    flat = ch.idx.reshape(-1)
                    vals = np.empty_like(ch.w)
                    for c in range(C):
                        np.multiply(ch.w, go[c][:, None], out=vals)
                        np.add.at(acc[c], flat, vals.reshape(-1))
            if want_grid:
                v = np.take(tab, ch.idx, axis=0)  # (p, 8, C)
                dots = np.matmul(v, go.T[:, :, None])[:, :, 0]
                res = np.empty((p1 - p0, 3), dtype=ct)
                _grid_grad_from_corner_dots(ch, dots, res)
                gg_buf[p0:p1] = res
        if want_in:
            input_grad[n] = acc[:, :M].reshape(C, D, H, W)
        if want_grid and gg_n is None:
            grid_grad[n] = gg_buf.reshape(Do, Ho, Wo, 3)

"""Tuned NumPy paths of the grid-sampler kernels: the reference's math, faster.

:mod:`pyaclnn.kernels.grid_sampler3d` is the specification; these compute the
same coordinates operation for operation (so the same cells and weights) and
sum in another order, so they agree with it to float32 rounding, and are
checked against it (tests/test_kernels_grid_sampler3d.py). The numpy backend
chooses them (``pyaclnn.backends.numpy._kernels``) for calls the compiled
kernels do not take; the compiled inputGrad sums in this module's order, bit
for bit. They take what a plan of :mod:`pyaclnn.kernels.checks` guarantees
(non-empty arrays of one dtype, valid modes, at least one output wanted) and
validate nothing.

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

Implementation. Each batch item's input is copied into a channels-last
table with one cell of zero padding around (D, H, W) and a zero tail. The
output points are processed in chunks: for a chunk the coordinates of the
three axes are computed together, giving per point the flat index of its
(z0, y0, x0) corner in the padded layout, or a sentinel in the tail when no
corner is inside; the 8 corners are that index plus fixed offsets. So
out-of-bounds corners read zeros and never touch input values, without any
per-corner masks. The forward gathers the 8 corner rows of a chunk with
``np.take`` and combines them with a batched ``matmul``; gridGrad contracts
the gathered rows with gradOutput (``einsum``). inputGrad is scattered one
channel at a time over the cached corner data of all points, into one padded
accumulator plane that stays in cache; the x0/x1 corners of a row are added
as one complex pair, which halves the ``np.add.at`` work.

The coordinates of a chunk are computed on the calling thread; its gathers
and products (which release the GIL) run on the worker threads
(:func:`pyaclnn.kernels._workers.threads_for`), and in the backward they
overlap the scatter. Scratch memory stays near the size of one
batch item's input plus a few chunks; in the backward of a grid too large for
one cached group of points, the channels whose accumulator planes fit within
twice the outputs go in one pass over the points, and each further pass
recomputes the coordinates (measured: +25% time on a 72**3 grid, +7% on 96**3).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from ...dtypes import compute_dtype
from .. import _workers
from ..grid_sampler3d import _INT_MAX_M1, _INT_MIN, _OUT_OF_RANGE, BORDER, NEAREST, REFLECTION

__all__ = ["Modes", "grid_sampler3d", "grid_sampler3d_backward"]

#: (interpolation_mode, padding_mode, align_corners) of a call.
Modes = tuple[int, int, bool]

# Points of one chunk of coordinate work (each chunk costs ~25 NumPy calls),
# and the budget of one gather of (8, points, C) corner values, which should
# stay in the L2 cache.
_CHUNK_POINTS = 8192
_GATHER_BYTES = 1 << 19
# inputGrad: points whose corner indices and weights are cached for the
# channel-by-channel scatter (bounds that cache to ~20 MB), and the points per
# np.add.at call.
_MAX_CACHED_POINTS = 1 << 18
_SCATTER_CHUNK = 8192
# Chunks of points go to the worker threads (pyaclnn.kernels._workers) when a
# call has this many points.
PARALLEL_MIN_POINTS = 1 << 15


def _chunk_points(channels: int) -> int:
    # Points per chunk of coordinate work: large, as it costs ~25 calls a chunk.
    return _CHUNK_POINTS


def _gather_points(channels: int) -> int:
    # Points per gather of the (8, points, C) corner values: kept in cache.
    return int(max(64, _GATHER_BYTES // (8 * 4 * max(channels, 1))))


def _view_as(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """A reshaped view of ``a`` that shares its memory, or None when the
    reshape would need a copy (writes into a copy would be lost)."""
    v = a.reshape(shape)
    return v if np.may_share_memory(v, a) else None


# --------------------------------------------------------------------------
# Coordinates
# --------------------------------------------------------------------------


def _clip(i: np.ndarray, hi: np.ndarray, need_grad: bool) -> np.ndarray | None:
    """Border clip to [0, hi] in place; the borders themselves count as
    clipped (gradient 0). Returns the gradient factor when needed."""
    g = ((i > 0) & (i < hi)).astype(i.dtype) if need_grad else None
    np.clip(i, 0, hi, out=i)
    return g


def _reflect(
    i: np.ndarray, twice_lo: np.ndarray, twice_hi: np.ndarray, need_grad: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """Reflect into [twice_lo/2, twice_hi/2] (per-axis bounds, shape (3, 1)).

    An axis with twice_lo == twice_hi (align_corners with size 1) gives 0 with
    gradient 0; the caller has already marked its non-finite values."""
    ct = i.dtype.type
    lo = (twice_lo / 2).astype(i.dtype)
    span = ((twice_hi - twice_lo) / 2).astype(i.dtype)
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
    flat = (span == 0)[:, 0]
    if flat.any():
        res[flat] = 0
        if g is not None:  # need_grad
            g[flat] = 0
    return res, g


def _source_index(
    coord: np.ndarray, sizes: np.ndarray, padding: int, align: bool, need_grad: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Unnormalize and pad the (x, y, z) rows of ``coord`` (shape (3, p)).

    ``sizes`` is (W, H, D) as a (3, 1) array of the compute dtype. Returns the
    source coordinates (with -100 for the device's out-of-range sentinel),
    the per-axis gradient multipliers of the unnormalization (shape (3,)) and
    the per-point multipliers of the padding (None for zeros padding or when
    no gradient is needed).
    """
    ct = coord.dtype.type
    # Same operation order as PyTorch so that ties of nearest agree.
    if align:
        i = ((coord + ct(1)) / ct(2)) * (sizes - 1)
        mult = (sizes[:, 0] - 1) / 2
    else:
        i = ((coord + ct(1)) * sizes - ct(1)) / ct(2)
        mult = sizes[:, 0] / 2
    g = None
    bad = None
    if padding == BORDER:
        bad = np.isnan(i)
        g = _clip(i, sizes - 1, need_grad)
    elif padding == REFLECTION:
        bad = ~np.isfinite(i)
        if align:
            i, g = _reflect(i, np.zeros_like(sizes), 2 * (sizes - 1), need_grad)
        else:
            i, g = _reflect(i, np.full_like(sizes, -1), 2 * sizes - 1, need_grad)
        gc = _clip(i, sizes - 1, need_grad)
        if g is not None and gc is not None:  # need_grad
            g *= gc
    keep = (i >= ct(_INT_MIN)) & (i <= ct(_INT_MAX_M1))  # False for NaN
    if bad is not None:
        keep &= ~bad
    i = np.where(keep, i, ct(_OUT_OF_RANGE))
    return i, mult, g


class _Geometry:
    """Padded cell layout of one batch item.

    The (D, H, W) cells are stored with one cell of padding on every side, as
    (D+2, H+2, W+2), followed by a tail. A bilinear corner is at most one cell
    outside the input when its point has any in-bounds corner, so it lands in
    the padding: zero when gathered, thrown away when scattered. A point with
    no in-bounds corner gets the base index ``sentinel``, whose corners all
    land in the tail.
    """

    __slots__ = ("dims", "wp", "hwp", "mp", "sentinel", "length", "off8", "off4", "strides", "sizes")

    def __init__(self, D: int, H: int, W: int) -> None:
        self.dims = (D, H, W)
        self.wp = W + 2
        self.hwp = (H + 2) * self.wp
        self.mp = (D + 2) * self.hwp
        self.sentinel = self.mp
        self.length = self.mp + self.hwp + self.wp + 2
        # Corner k = 4a + 2b + e sits at (z0+a, y0+b, x0+e): z-major, x-minor.
        self.off8 = np.array(
            [a * self.hwp + b * self.wp + e for a in range(2) for b in range(2) for e in range(2)],
            dtype=np.intp,
        )
        # The x0/x1 corners of a row are adjacent: they form one complex pair.
        self.off4 = self.off8[::2].copy()
        self.strides = np.array([[1], [self.wp], [self.hwp]], dtype=np.intp)  # x, y, z
        self.sizes = np.array([[W], [H], [D]], dtype=np.intp)

    def interior(self, a: np.ndarray) -> np.ndarray:
        """The (..., D, H, W) interior of a (..., length) array (a view)."""
        D, H, W = self.dims
        lead = a.shape[:-1]
        v = a[..., : self.mp].reshape(*lead, D + 2, H + 2, W + 2)
        return v[..., 1:-1, 1:-1, 1:-1]


class _Chunk:
    """Corner base indices and weights of a chunk of points of one batch item.

    ``base`` (p,) is the padded flat index of corner (z0, y0, x0), or the
    sentinel; ``w`` (8, p) are the corner weights (None for nearest or when
    not needed);
    ``wx``, ``wy``, ``wz`` the (low, high) per-axis weights; ``m`` the (3,)
    unnormalization multipliers and ``gpad`` the (3, p) padding multipliers
    (or None) of gridGrad.
    """

    __slots__ = ("base", "w", "wx", "wy", "wz", "m", "gpad")

    def __init__(
        self,
        g: np.ndarray,
        geo: _Geometry,
        interp: int,
        padding: int,
        align: bool,
        need_grad: bool,
        need_w: bool = True,
    ) -> None:
        ct = g.dtype
        sizes = geo.sizes.astype(ct)
        coord = np.ascontiguousarray(g.T)  # (3, p): x, y, z rows
        i, self.m, self.gpad = _source_index(coord, sizes, padding, align, need_grad)
        if interp == NEAREST:
            f = np.rint(i)
            # The cell itself may be in the padding (one outside): it reads 0.
            hi = sizes
        else:
            f = np.floor(i)
            # x0 in [-1, W-1]: at least one of x0, x0+1 is inside.
            hi = sizes - 1
        ok = ((f >= -1) & (f <= hi)).all(axis=0)
        # Clip first so that the integer arithmetic cannot overflow.
        fi = np.clip(f, -1, sizes).astype(np.intp)
        fi += 1
        fi *= geo.strides
        base = fi.sum(axis=0)
        self.base = np.where(ok, base, geo.sentinel)
        if interp == NEAREST:
            self.w = None
            return
        # Per-axis weights of the low and high corner, as PyTorch forms them.
        w0 = (f + 1) - i
        w1 = i - f
        self.wx, self.wy, self.wz = (w0[0], w1[0]), (w0[1], w1[1]), (w0[2], w1[2])
        if not need_w:
            self.w = None
            return
        wa = np.stack((w0, w1))  # (corner side, axis, p)
        # (z, y, x, p) products in PyTorch's order (x * y) * z, as (8, p).
        w = (wa[None, None, :, 0] * wa[None, :, None, 1]) * wa[:, None, None, 2]
        self.w = w.reshape(8, -1)


def _grid_grad_from_corner_dots(ch: _Chunk, dots: np.ndarray, out: np.ndarray) -> None:
    """gridGrad of a bilinear chunk from ``dots[k, p] = sum_c V[k, p, c] * gOut[p, c]``.

    ``out`` is the (points, 3) result, of any float dtype.
    """
    t = dots.reshape(2, 2, 2, -1)  # (z, y, x, p)
    wx0, wx1 = ch.wx
    wy0, wy1 = ch.wy
    wz0, wz1 = ch.wz
    dx = t[:, :, 1] - t[:, :, 0]  # (z, y, p)
    gx = (dx[0, 0] * wy0 + dx[0, 1] * wy1) * wz0 + (dx[1, 0] * wy0 + dx[1, 1] * wy1) * wz1
    dy = t[:, 1] - t[:, 0]  # (z, x, p)
    gy = (dy[0, 0] * wx0 + dy[0, 1] * wx1) * wz0 + (dy[1, 0] * wx0 + dy[1, 1] * wx1) * wz1
    dz = t[1] - t[0]  # (y, x, p)
    gz = (dz[0, 0] * wx0 + dz[0, 1] * wx1) * wy0 + (dz[1, 0] * wx0 + dz[1, 1] * wx1) * wy1
    for j, gsum in enumerate((gx, gy, gz)):
        gsum *= gsum.dtype.type(ch.m[j])
        if ch.gpad is not None:
            gsum *= ch.gpad[j]
        out[:, j] = gsum


# --------------------------------------------------------------------------
# Layout helpers
# --------------------------------------------------------------------------


def _fill_table(tab: np.ndarray, geo: _Geometry, inp_n: np.ndarray) -> None:
    """Copy one batch item into the interior of the channels-last
    (length, C) table; padding and tail stay zero."""
    np.copyto(geo.interior(tab.T).transpose(1, 2, 3, 0), np.moveaxis(inp_n, 0, -1), casting="unsafe")


def _channels_per_pass(channels: int, room: int, plane_bytes: int) -> int:
    """Channels whose accumulator planes fit in ``room`` bytes (at least one)."""
    return int(min(channels, max(1, room // plane_bytes)))


def _table_dtype(dtype: np.dtype, ct: np.dtype) -> np.dtype:
    # bf16 widens to fp32 by a shift, so its table stays bf16 (half the memory)
    # and each gather is widened; fp16 widens slowly and is widened once.
    return np.dtype(dtype) if np.dtype(dtype).name == "bfloat16" else ct


def _points_cf(a_n: np.ndarray) -> np.ndarray:
    """(C, P) view (or copy) of a (C, Do, Ho, Wo) array."""
    return a_n.reshape(a_n.shape[0], -1)


def _complex_of(ct: np.dtype) -> np.dtype:
    return np.dtype(np.complex128) if ct == np.float64 else np.dtype(np.complex64)


class _ScatterCache:
    """Corner base indices and weights of a group of points, kept for the
    channel-by-channel scatter of inputGrad.

    Bilinear adds the x0/x1 corners of a row as one complex pair: slot u of a
    complex accumulator plane holds (cell u, cell u+1) in its (real, imag)
    parts, which halves the ``np.add.at`` work. The weights are kept as those
    complex pairs, (4, points). Nearest adds plain values to a real plane.
    """

    __slots__ = ("base", "w", "ct", "idx", "vals")

    def __init__(self, npoints: int, nearest: bool, ct: np.dtype) -> None:
        self.ct = ct
        cplx = _complex_of(ct)
        self.base = np.empty(npoints, dtype=np.intp)
        self.w = None if nearest else np.empty((4, npoints), dtype=cplx)
        self.vals = None if nearest else np.empty((4, _SCATTER_CHUNK), dtype=cplx)
        self.idx = None if nearest else np.empty((4, _SCATTER_CHUNK), dtype=np.intp)

    def store(self, q0: int, ch: _Chunk) -> None:
        q1 = q0 + ch.base.shape[0]
        self.base[q0:q1] = ch.base
        if self.w is not None and ch.w is not None:  # bilinear
            # Row 2j+e of ch.w is corner pair j, x side e: interleave e.
            pairs = self.w[:, q0:q1].view(self.ct).reshape(4, q1 - q0, 2)
            pairs[...] = ch.w.reshape(4, 2, -1).transpose(0, 2, 1)

    def scatter(self, plane: np.ndarray, gout: np.ndarray, geo: _Geometry) -> None:
        """Add one channel's contributions (gout: that channel's gradOutput
        of the group's points) into its accumulator plane."""
        weights, idx_buf, vals_buf = self.w, self.idx, self.vals
        if weights is None or idx_buf is None or vals_buf is None:  # nearest: none of them is made
            np.add.at(plane, self.base, gout.astype(self.ct, copy=False))
            return
        n = self.base.shape[0]
        for q0 in range(0, n, _SCATTER_CHUNK):
            q1 = min(n, q0 + _SCATTER_CHUNK)
            g = gout[q0:q1].astype(self.ct, copy=False)
            idx = np.add(self.base[q0:q1], geo.off4[:, None], out=idx_buf[:, : q1 - q0])
            # complex weight pair times a real gradient: both parts exact.
            vals = np.multiply(weights[:, q0:q1], g, out=vals_buf[:, : q1 - q0])
            np.add.at(plane, idx.reshape(-1), vals.reshape(-1))


def _finish_plane(plane: np.ndarray, geo: _Geometry) -> np.ndarray:
    """The (D, H, W) inputGrad of an accumulator plane (a view into it). In a
    complex plane cell u got the real part of slot u and the imaginary part
    of slot u-1."""
    if not np.iscomplexobj(plane):
        return geo.interior(plane)
    f = plane.view(plane.real.dtype)
    re, im = f[0::2], f[1::2]
    np.add(re[1:], im[:-1], out=re[1:])
    return geo.interior(re)


# --------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------


# Overflow, NaN and inf are part of the math here (the device raises nothing);
# the worker threads set the same state for themselves.
@np.errstate(all="ignore")
def grid_sampler3d(data: tuple[np.ndarray, np.ndarray], modes: Modes, out: np.ndarray) -> None:
    """:func:`pyaclnn.kernels.grid_sampler3d.grid_sampler3d` for a plan's non-empty arrays,
    its arguments grouped as the compiled kernel takes them
    (:func:`pyaclnn.kernels._accel.grid_sampler3d`): ``data`` (input, grid), ``modes``
    (interpolation_mode, padding_mode, align_corners). Chunks of points gathered from a
    padded channels-last table and combined with a batched ``matmul`` on the worker
    threads."""
    input, grid = data
    interpolation_mode, padding_mode, align_corners = modes
    N, C, D, H, W = input.shape
    ct = compute_dtype(input.dtype)
    Do, Ho, Wo = grid.shape[1:4]
    P = Do * Ho * Wo
    geo = _Geometry(D, H, W)
    chunk = _chunk_points(C)
    gather = _gather_points(C)
    tab = np.zeros((geo.length, C), dtype=_table_dtype(input.dtype, ct))
    threads = _workers.threads_for(N * P, PARALLEL_MIN_POINTS)
    workers = _workers.Pipeline(threads, 2 * threads)
    try:
        for n in range(N):
            workers.wait()  # the table is about to change
            _fill_table(tab, geo, input[n])
            out_n = _view_as(out[n], (C, P))
            buf = np.empty((C, P), dtype=out.dtype) if out_n is None else out_n
            grid_n = grid[n].reshape(P, 3)
            for p0 in range(0, P, chunk):
                p1 = min(P, p0 + chunk)
                g = grid_n[p0:p1].astype(ct)
                ch = _Chunk(g, geo, interpolation_mode, padding_mode, align_corners, False)
                workers.run(_sample_chunk, tab, geo, ch, buf[:, p0:p1], gather, ct)
            if out_n is None:
                workers.wait()
                out[n] = buf.reshape(C, Do, Ho, Wo)
    finally:
        workers.wait()


def _sample_chunk(
    tab: np.ndarray, geo: _Geometry, ch: _Chunk, out: np.ndarray, gather: int, ct: np.dtype
) -> None:
    """Forward values of one chunk into ``out`` (C, points)."""
    if ch.w is None:
        out[...] = np.take(tab, ch.base, axis=0).T  # (p, C) rows, exact
        return
    wt = ch.w.T  # (p, 8)
    for j0 in range(0, out.shape[1], gather):
        j1 = min(out.shape[1], j0 + gather)
        idx = ch.base[j0:j1] + geo.off8[:, None]  # (8, j)
        v = np.take(tab, idx, axis=0).astype(ct, copy=False)  # (8, j, C)
        res = np.matmul(wt[j0:j1, None, :], v.transpose(1, 0, 2))[:, 0, :]
        out[:, j0:j1] = res.T


# --------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------


@np.errstate(all="ignore")
def grid_sampler3d_backward(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
    modes: Modes,
    outputs: tuple[np.ndarray | None, np.ndarray | None],
) -> None:
    """:func:`pyaclnn.kernels.grid_sampler3d.grid_sampler3d_backward` for a plan's
    non-empty arrays with at least one output wanted, its arguments grouped as the
    compiled kernel takes them (:func:`pyaclnn.kernels._accel.grid_sampler3d_backward`):
    ``data`` (grad_output, input, grid), ``modes`` (interpolation_mode, padding_mode,
    align_corners), ``outputs`` (input_grad, grid_grad; None where not wanted).
    inputGrad scattered channel by channel in complex (x0, x1) pairs, gridGrad from the
    gathered corners' dots with gradOutput on the worker threads (see the module)."""
    grad_output, input, grid = data
    interpolation_mode, padding_mode, align_corners = modes
    input_grad, grid_grad = outputs
    N, C, D, H, W = input.shape
    Do, Ho, Wo = grid.shape[1:4]
    P = Do * Ho * Wo
    ct = compute_dtype(input.dtype)
    want_in = input_grad is not None
    want_grid = grid_grad is not None
    # Used only where want_in / want_grid say they are given (the flags narrow them).
    in_grad, gr_grad = cast(np.ndarray, input_grad), cast(np.ndarray, grid_grad)
    if want_grid and interpolation_mode == NEAREST:
        gr_grad[...] = 0  # nearest has no gradient with respect to the grid
        want_grid = False
    if not (want_in or want_grid):
        return
    geo = _Geometry(D, H, W)
    chunk = _chunk_points(C)
    gather = _gather_points(C)
    nearest = interpolation_mode == NEAREST
    tab = np.zeros((geo.length if want_grid else 0, C), dtype=_table_dtype(input.dtype, ct))
    # inputGrad is scattered channel by channel over the cached corner indices
    # and weights of many points, so that one channel's accumulator stays in
    # cache. When all points of a batch item fit the cache, one accumulator
    # plane is enough. Otherwise each channel keeps its plane across the
    # groups of points, and as many channels as fit the memory bound (twice
    # the outputs) go in one pass over the points; later passes recompute the
    # coordinates for the next channels.
    group = P if P <= _MAX_CACHED_POINTS else _MAX_CACHED_POINTS
    # Bilinear accumulates complex (x0, x1) pairs, nearest plain values.
    acc_dtype = ct if nearest else _complex_of(ct)
    out_bytes = (in_grad.nbytes if want_in else 0) + (gr_grad.nbytes if want_grid else 0)
    threads = _workers.threads_for(N * P, PARALLEL_MIN_POINTS) if want_grid else 1
    held = tab.nbytes + 2 * threads * _GATHER_BYTES * 2
    if want_in:
        held += group * (8 + 4 * 2 * ct.itemsize)  # the scatter cache
    planes = 1
    if want_in and group < P:
        planes = _channels_per_pass(C, 2 * out_bytes - held, geo.length * acc_dtype.itemsize)
    acc = np.zeros((planes if want_in else 0, geo.length), dtype=acc_dtype)
    held += acc.nbytes
    cache = _ScatterCache(0, nearest, ct)  # one per group of points when inputGrad is wanted
    # One pass over the points per group of channels; a single pass when the
    # points fit one group (the plane is then reused channel by channel).
    channel_step = planes if group < P else C
    # Chunks queued for the gridGrad workers hold their coordinates (~48 bytes
    # a point); queue as many as fit in the rest of twice the output size, so
    # that the calling thread can go on to the scatter instead of waiting.
    workers = _workers.Pipeline(threads, (2 * out_bytes - held) // (chunk * 48))
    try:
        for n in range(N):
            if want_grid:
                workers.wait()  # the table is about to change
                _fill_table(tab, geo, input[n])
            gout_n = _points_cf(grad_output[n])  # (C, P)
            grid_n = grid[n].reshape(P, 3)
            if want_grid:
                gg_n = _view_as(gr_grad[n], (P, 3))
                gg_buf = np.empty((P, 3), dtype=gr_grad.dtype) if gg_n is None else gg_n
            for c0 in range(0, C if want_in else 1, channel_step):
                c1 = min(C, c0 + channel_step)
                grid_pass = want_grid and c0 == 0  # gridGrad is computed in the first pass only
                if want_in and group < P:
                    acc.fill(0)
                for s0 in range(0, P, group):
                    s1 = min(P, s0 + group)
                    if want_in:
                        cache = _ScatterCache(0, nearest, ct)  # free the previous group's cache first
                        cache = _ScatterCache(s1 - s0, nearest, ct)
                    for p0 in range(s0, s1, chunk):
                        p1 = min(s1, p0 + chunk)
                        g = grid_n[p0:p1].astype(ct)
                        ch = _Chunk(
                            g, geo, interpolation_mode, padding_mode, align_corners, grid_pass, want_in
                        )
                        if want_in:
                            cache.store(p0 - s0, ch)
                            ch.w = None  # only the scatter needed it
                        if grid_pass:
                            workers.run(
                                _grid_grad_chunk, tab, geo, ch, gout_n[:, p0:p1], gg_buf[p0:p1], gather, ct
                            )
                    if want_in:
                        # Runs while the workers finish the gridGrad chunks.
                        for c in range(c0, c1):
                            if group < P:
                                cache.scatter(acc[c - c0], gout_n[c, s0:s1], geo)
                            else:
                                plane = acc[0]
                                plane.fill(0)
                                cache.scatter(plane, gout_n[c, s0:s1], geo)
                                in_grad[n, c] = _finish_plane(plane, geo)
                if want_in and group < P:
                    for c in range(c0, c1):
                        in_grad[n, c] = _finish_plane(acc[c - c0], geo)
            if want_grid and gg_n is None:
                workers.wait()
                gr_grad[n] = gg_buf.reshape(Do, Ho, Wo, 3)
    finally:
        workers.wait()


def _grid_grad_chunk(
    tab: np.ndarray,
    geo: _Geometry,
    ch: _Chunk,
    gout: np.ndarray,
    out: np.ndarray,
    gather: int,
    ct: np.dtype,
) -> None:
    """gridGrad of one bilinear chunk (gout: its (C, points) gradOutput) into
    ``out`` (points, 3)."""
    n = out.shape[0]
    dots = np.empty((8, n), dtype=ct)
    for j0 in range(0, n, gather):
        j1 = min(n, j0 + gather)
        go = np.ascontiguousarray(gout[:, j0:j1].T, dtype=ct)  # (j, C)
        idx = ch.base[j0:j1] + geo.off8[:, None]  # (8, j)
        v = np.take(tab, idx, axis=0).astype(ct, copy=False)  # (8, j, C)
        # einsum's own loop, not BLAS: a threaded gemv stalls on a busy host.
        np.einsum("kpc,pc->kp", v, go, out=dots[:, j0:j1])
    _grid_grad_from_corner_dots(ch, dots, out)

"""Tuned NumPy paths of the max-pool kernels: the same results as the reference,
bit for bit, faster.

:mod:`pyaclnn.kernels.max_pool3d` is the specification; these compute the same
outputs and indices (forward) and the same float32 sums in the same order
(backward), and are checked against it (tests/test_kernels_max_pool3d.py). The
numpy backend chooses them (``pyaclnn.backends.numpy._kernels``) for calls the
compiled kernels do not take. They take what a plan of
:mod:`pyaclnn.kernels.checks` guarantees and validate nothing, apart from the
backward's index rule (only the kernel sees index values).

How they are fast: the forward splits the padded input by stride phase so that
every NumPy call is a long unit-stride loop over a chunk of planes that stays
in cache; the backward scatters chunks of planes with ``np.add.at`` and, for
16-bit outputs, rounds only the sums (see :meth:`_BackwardScratch.scatter_compact`).
Chunks of (n, c) planes go to the worker threads (:mod:`pyaclnn.kernels._workers`),
each writing its own part of the outputs, so the thread count changes no bit.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dtypes import compute_dtype
from .. import _workers
from ..checks import check_indices, first_index_outside

__all__ = ["PoolParams", "max_pool3d_with_argmax", "max_pool3d_with_argmax_backward"]

#: (kernel_size, stride, padding, dilation) of a pooling, each ordered (depth, height, width).
PoolParams = tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int]]

# Scratch budget of one worker's chunk of (n, c) planes (phases, running
# maximum, argmax and mask in the forward; flat indices, values and float32
# accumulator in the backward). Smaller chunks stay in cache, larger ones pay
# NumPy's per-call overhead less often: 4 MiB measured best on the benchmark
# shapes. _chunk_budget also caps it by the output's size.
_FORWARD_CHUNK_BYTES = 4 << 20
_BACKWARD_CHUNK_BYTES = 4 << 20
# Planes with at least this many gradients get one np.add.at call each.
_PLANE_AT_MIN = 4096

# --------------------------------------------------------------------------
# Chunking over (n, c) planes
# --------------------------------------------------------------------------


def _merge_planes(a: np.ndarray) -> np.ndarray | None:
    """(N, C, ...) as an (N*C, ...) view, or None if that needs a copy."""
    n_count, c_count = a.shape[:2]
    if n_count == 1 or c_count == 1 or a.strides[0] == a.strides[1] * c_count:
        merged: np.ndarray = a.reshape(n_count * c_count, *a.shape[2:])  # the two axes merge: a view
        return merged
    return None


def _plane_blocks(arrays: Sequence[np.ndarray], planes: int) -> Iterator[tuple[np.ndarray, ...]]:
    """Yield 4-D views (planes, D, H, W) of the 5-D arrays, chunk by chunk.

    Chunks run over the flattened N*C planes when every array allows that
    without a copy, else over C inside each n.
    """
    n_count, c_count = arrays[0].shape[:2]
    merged = [_merge_planes(a) for a in arrays]
    if all(m is not None for m in merged):
        for start in range(0, n_count * c_count, planes):
            yield tuple(m[start : start + planes] for m in merged)  # type: ignore[index]
    else:
        for n in range(n_count):
            for start in range(0, c_count, planes):
                yield tuple(a[n, start : start + planes] for a in arrays)


# --------------------------------------------------------------------------
# Widening
# --------------------------------------------------------------------------

# float16 -> float32 by table: NumPy's float16 casts are scalar and slow.
_HALF_TO_FLOAT: np.ndarray | None = None


def _widen(values: np.ndarray, out: np.ndarray) -> None:
    """Exact copy of ``values`` into the float32/float64 buffer ``out``."""
    global _HALF_TO_FLOAT
    if values.dtype == np.float16 and out.dtype == np.float32:
        if _HALF_TO_FLOAT is None:
            _HALF_TO_FLOAT = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
        # mode="clip" cannot clip a uint16 here; unlike "raise" it writes
        # straight into ``out`` instead of through a temporary copy.
        np.take(_HALF_TO_FLOAT, values.view(np.uint16), out=out, mode="clip")
    else:
        np.copyto(out, values, casting="unsafe")


def _round_into(values: np.ndarray, dtype: np.dtype, bits: np.ndarray, where: np.ndarray) -> None:
    """bits[where] = float32 ``values`` rounded to nearest even in the 16-bit
    float ``dtype``, as bits (``bits`` is a uint16 view of the output)."""
    if dtype == np.float16:
        rounded = _float_to_half_bits(values)
    else:
        rounded = values.astype(dtype).view(np.uint16)  # ml_dtypes' bfloat16 cast is fast
    bits[where] = rounded


def _fix_lone_specials(bits: np.ndarray, flat: np.ndarray, dtype: np.dtype, gbits: np.ndarray) -> None:
    """Where 16-bit gradients ``bits`` were copied to ``gbits[flat]`` as their own sums,
    put what the float32 sum from +0 gives instead for the two kinds of value it
    changes: -0 (+0 + -0 is +0) and NaN (the add quietens a signalling one; bfloat16
    rounds any NaN to 0x7FC0 with its sign), through the reference's own casts.

    One pass finds both: with the sign dropped, minus one wraps zero to the top, so
    only zeros and NaNs reach the infinity's bits.
    """
    magnitude = bits & np.uint16(0x7FFF)
    magnitude -= np.uint16(1)
    infinity = 0x7C00 if dtype == np.float16 else 0x7F80
    special = magnitude >= np.uint16(infinity)
    if special.any():
        sums = np.zeros(int(np.count_nonzero(special)), np.float32)
        with np.errstate(invalid="ignore"):  # a signalling NaN, quietened as in the reference
            sums += bits[special].view(dtype).astype(np.float32)
        gbits[flat[special]] = sums.astype(dtype).view(np.uint16)


def _float_to_half_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> float16 bits, rounded to nearest even, exactly as NumPy's
    cast but about twice as fast: NumPy converts one element at a time.

    Results in float16's normal range come from integer arithmetic on the
    float32 bits (rebias the exponent, round the 13 dropped bits to even, a
    carry that overflows the largest float16 lands on inf); everything else
    (zeros, subnormals, overflow, inf, NaN) is rare in sums of gradients and
    goes through NumPy.
    """
    u = values.view(np.uint32)
    magnitude = u & np.uint32(0x7FFFFFFF)
    sign = u ^ magnitude
    # Unsigned wrap-around: one comparison finds both ends of the range
    # [2^-14, 2^16).
    odd = (magnitude - np.uint32(0x38800000)) >= np.uint32(0x47800000 - 0x38800000)
    half = magnitude >> 13
    half &= 1  # the kept last bit: ties round to even
    half += magnitude
    half += np.uint32(0xC8000FFF)  # exponent bias 127 -> 15, plus 0xFFF
    half >>= 13
    sign >>= 16
    half |= sign
    out = half.astype(np.uint16)
    if odd.any():
        rare = np.flatnonzero(odd)
        with np.errstate(over="ignore"):  # overflow to inf is the right answer
            out[rare] = values[rare].astype(np.float16).view(np.uint16)
    result: np.ndarray = out
    return result


# --------------------------------------------------------------------------
# Worker threads
# --------------------------------------------------------------------------

# From this many element operations on, a call shares its chunks out to the
# worker threads (pyaclnn.kernels._workers.threads_for decides how many).
PARALLEL_MIN_WORK = 1 << 20


def _chunk_budget(limit: int, output_bytes: int, threads: int) -> int:
    """Scratch bytes per worker: ``limit``, but with all ``threads`` workers together
    holding no more than about the output's size (or 256 KiB, which small
    calls may use whatever their size)."""
    return min(limit, max(1 << 18, output_bytes // threads))


# --------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------

# One pooling axis: (kernel, stride, padding, dilation).
_Axis = tuple[int, int, int, int]


def _first_inside(out_len: int, axis: _Axis) -> np.ndarray:
    """Kernel offset of the first in-bounds cell of every window along an axis.

    Like PyTorch, a window start left of 0 moves right by whole dilations.
    """
    _, s, p, d = axis
    start = np.arange(out_len, dtype=np.int64) * s - p
    return -(np.minimum(start, 0) // d)  # ceil(max(0, -start) / d)


def _outer_sum(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(len a, len b, len c) array of a[i] + b[j] + c[k]."""
    total: np.ndarray = a[:, None, None] + b[None, :, None] + c[None, None, :]
    return total


def _reaching_offsets(axis: _Axis, length: int, out_len: int) -> _Axis:
    """The same axis with the kernel cut to the offsets that can reach the input.

    Offset j of window o reads padded cell o*s + j*d. Offsets with
    j*d >= length + p lie right of the input for every window, and offsets
    with j*d < p - (out_len - 1)*s left of it: both only ever see padding,
    which never wins (past a window's first in-bounds offset, its answer when
    it holds nothing else). Dropping the first j0 of them and lowering the padding
    by j0*d names the same cells in the same order, so a kernel far larger
    than the input costs no more than one the size of the input.
    """
    k, s, p, d = axis
    first = max(0, p - (out_len - 1) * s) // d
    # Keep each window's first in-bounds offset (ceil(p/d) at most), which is its
    # answer when it holds only padding.
    end = min(k, max(-(-(length + p) // d), -(-p // d) + 1))
    return (end - first, s, p - first * d, d)


@dataclass(eq=False)
class _ForwardPlan:
    """Geometry of one forward call.

    The padded input of a chunk is split by stride phase: phase (rd, rh, rw)
    holds the padded cells (rd + sd*i, rh + sh*j, rw + sw*k), with -inf in the
    padding. The window of output (od, oh, ow) then reads, for every kernel
    offset, the cell (od, oh, ow) + q of one phase, where q is the offset's
    shift. Laying the outputs out with the phases' row pitch (Hq, Wq) turns
    that into one contiguous 1-D slice per plane and offset, so every NumPy
    call is a long unit-stride loop. The columns past (Ho, Wo) are scratch
    that is never read back.

    A chunk is a few whole (n, c) planes, or ``rows`` output depth rows of
    one plane when a plane alone would exceed the scratch budget.
    """

    spatial: tuple[int, int, int]
    out_spatial: tuple[int, int, int]
    axes: tuple[_Axis, _Axis, _Axis]
    compute: np.dtype
    index_dtype: np.dtype
    rows: int

    def __post_init__(self) -> None:
        spatial, out_spatial, axes, rows = self.spatial, self.out_spatial, self.axes, self.rows
        index_dtype = self.index_dtype
        strides = (spatial[1] * spatial[2], spatial[2], 1)

        # Phase lengths: enough for the padding and for a ceil-mode window
        # that reaches past it, rounded up to whole strides.
        phase_len = [
            -(-max(n + 2 * p, (o - 1) * s + (k - 1) * d + 1) // s)
            for n, o, (k, s, p, d) in zip(spatial, out_spatial, axes)
        ]
        _, hq, wq = phase_len
        self.pitched = (rows, hq, wq)  # a chunk's outputs, laid out with the phase pitch
        self.pitched_size = rows * hq * wq

        # Per kernel offset in d, h, w scan order: phase, flat shift inside the
        # phase, and flat offset from the window start in the unpadded plane.
        self.offsets: list[tuple[tuple[int, int, int], int, int]] = []
        for j in itertools.product(*(range(ax[0]) for ax in axes)):
            reach = [jj * ax[3] for jj, ax in zip(j, axes)]
            phase = tuple(r % ax[1] for r, ax in zip(reach, axes))
            q = [r // ax[1] for r, ax in zip(reach, axes)]
            shift = (q[0] * hq + q[1]) * wq + q[2]
            offset = sum(r * st for r, st in zip(reach, strides))
            self.offsets.append((phase, shift, offset))  # type: ignore[arg-type]
        self.phases = sorted({phase for phase, _, _ in self.offsets})
        # Phase depth rows a chunk reads: its own plus the deepest shift.
        self.phase_rows = min(phase_len[0], rows + (axes[0][0] - 1) * axes[0][3] // axes[0][1])
        self.phase_grid = (self.phase_rows, hq, wq)
        max_shift = max(shift for _, shift, _ in self.offsets)
        self.phase_size = max(self.phase_rows * hq * wq, self.pitched_size + max_shift)

        # The running argmax is the offset's number in scan order (a "code"),
        # in the narrowest type that holds it: less memory traffic per pass.
        count = len(self.offsets)
        self.code_dtype = np.dtype(np.uint8 if count <= 256 else np.uint16 if count <= 65536 else np.int32)
        self.code_offset = np.array([offset for _, _, offset in self.offsets], index_dtype)

        # Initial argmax of every output depth row: the first in-bounds cell
        # of each window (pitched grid).
        k1, k2 = axes[1][0], axes[2][0]
        firsts = [_first_inside(n, ax) for n, ax in zip((out_spatial[0], hq, wq), axes)]
        self.first_code = _outer_sum(firsts[0] * k1 * k2, firsts[1] * k2, firsts[2]).astype(self.code_dtype)
        self.window_start = _outer_sum(
            *(
                (np.arange(o, dtype=np.int64) * ax[1] - ax[2]) * st
                for o, ax, st in zip(out_spatial, axes, strides)
            )
        )
        # Per phase and axis, the phase cells that hold input: (first, end,
        # first input cell), in whole-plane phase coordinates.
        self.copy_ranges: dict[tuple[int, int, int], list[tuple[int, int, int]]] = {}
        for phase in self.phases:
            ranges = []
            for r, n, (_, s, p, _) in zip(phase, spatial, axes):
                q0 = max(0, -((r - p) // s))  # ceil((p - r) / s): first phase cell inside
                q1 = max(q0, (n - 1 + p - r) // s + 1)
                ranges.append((q0, q1, q0 * s + r - p))
            self.copy_ranges[phase] = ranges

    def bytes_per_plane(self) -> int:
        """Scratch of one plane (or ``rows`` output rows of it) in one chunk."""
        phases = len(self.phases) * self.phase_size * self.compute.itemsize
        outputs = self.pitched_size * (
            self.compute.itemsize + 2 * self.code_dtype.itemsize + self.index_dtype.itemsize + 1
        )
        return phases + outputs

    def allocate(self, planes: int) -> _ForwardScratch:
        return _ForwardScratch(self, planes)


# Plans whose outputs are at most this many cells per plane are kept for the
# next call with the same geometry: building one costs ~50 us, which is most
# of a small call; larger plans hold output-sized arrays and are rebuilt.
_CACHED_PLAN_OUTPUTS = 1 << 15


def _forward_plan(*geometry: Any) -> _ForwardPlan:
    """``_ForwardPlan(*geometry)``, from the cache when its outputs are small."""
    do, ho, wo = geometry[1]  # out_spatial
    if do * ho * wo <= _CACHED_PLAN_OUTPUTS:
        return _cached_forward_plan(*geometry)
    return _ForwardPlan(*geometry)


@functools.lru_cache(maxsize=64)
def _cached_forward_plan(*args: Any) -> _ForwardPlan:
    plan = _ForwardPlan(*args)
    for shared in (plan.first_code, plan.window_start, plan.code_offset):
        shared.setflags(write=False)  # shared by every call with this geometry
    return plan


class _ForwardScratch:
    """Buffers of one worker of a forward call: the phases of a chunk and the
    running maximum, argmax code and mask."""

    def __init__(self, plan: _ForwardPlan, planes: int) -> None:
        self.plan = plan
        # Padding cells stay -inf for the whole call; chunks overwrite the rest.
        self.phase_buf = {
            phase: np.full((planes, plan.phase_size), -np.inf, plan.compute) for phase in plan.phases
        }
        self.best = np.empty((planes, plan.pitched_size), plan.compute)
        self.sel = np.empty((planes, plan.pitched_size), plan.code_dtype)
        self.scratch = np.empty((planes, plan.pitched_size), plan.code_dtype)
        self.offset = np.empty((planes, *plan.pitched), plan.index_dtype)
        self.mask = np.empty((planes, plan.pitched_size), np.bool_)

    def load(self, xc: np.ndarray, row0: int) -> None:
        """Copy the input a chunk needs into the phases: planes ``xc``
        (planes, D, H, W), output depth rows from ``row0``."""
        plan = self.plan
        count = xc.shape[0]
        depth_rows, hq, wq = plan.phase_grid
        for phase, buf in self.phase_buf.items():
            grid = buf[:count, : depth_rows * hq * wq].reshape(count, depth_rows, hq, wq)
            (d0, d1, first_d), *rest = plan.copy_ranges[phase]
            sd = plan.axes[0][1]
            # Depth rows of this chunk that hold input; the others are padding.
            lo = min(max(d0 - row0, 0), depth_rows)
            hi = max(min(d1 - row0, depth_rows), lo)
            if plan.rows < plan.out_spatial[0]:  # rows move between chunks: reset the padding
                grid[:, :lo] = -np.inf
                grid[:, hi:] = -np.inf
            if hi == lo:
                continue
            start = first_d + (row0 + lo - d0) * sd
            target: list[slice] = [slice(None), slice(lo, hi)]
            source: list[slice] = [slice(None), slice(start, start + (hi - lo - 1) * sd + 1, sd)]
            for (q0, q1, first), ax in zip(rest, plan.axes[1:]):
                target.append(slice(q0, q1))
                source.append(slice(first, first + (q1 - q0 - 1) * ax[1] + 1 if q1 > q0 else first, ax[1]))
            _widen(xc[tuple(source)], grid[tuple(target)])

    def run(self, count: int, row0: int, rows: int, nan_rule: bool) -> tuple[np.ndarray, np.ndarray]:
        """Pool the loaded chunk; returns the maxima (a view of the pitched
        buffer) and the flat offsets of the argmax from the window starts."""
        plan = self.plan
        size = plan.pitched_size
        best = self.best[:count]
        sel = self.sel[:count]
        scratch = self.scratch[:count]
        mask = self.mask[:count]
        best.fill(-np.inf)
        grid = sel.reshape(count, *plan.pitched)
        grid[:, :rows] = plan.first_code[row0 : row0 + rows]
        for code, (phase, shift, _) in enumerate(plan.offsets):
            v = self.phase_buf[phase][:count, shift : shift + size]
            np.greater(v, best, out=mask)
            if nan_rule:
                # A NaN always takes over, so the last NaN in scan order wins.
                np.logical_or(mask, np.isnan(v), out=mask)
            # Codes grow in scan order and every window starts from its
            # smallest in-bounds one, so max(sel, mask*code) is the masked
            # store (np.copyto with where= is an order of magnitude slower).
            np.multiply(mask, plan.code_dtype.type(code), out=scratch)
            np.maximum(sel, scratch, out=sel)
            # np.maximum propagates NaN, and nothing compares greater than a
            # NaN best, so a later number never replaces it.
            np.maximum(best, v, out=best)
        _, ho, wo = plan.out_spatial
        valid = (slice(None), slice(0, rows), slice(0, ho), slice(0, wo))
        offset = self.offset[:count, :rows, :ho, :wo]
        np.take(plan.code_offset, grid[valid], out=offset)
        return best.reshape(count, *plan.pitched)[valid], offset

    def pool(self, xc: np.ndarray, oc: np.ndarray, ic: np.ndarray, row0: int) -> None:
        """Pool one chunk: planes ``xc`` of the input into ``oc`` and ``ic``,
        which hold the output depth rows from ``row0`` of those planes."""
        count, rows = oc.shape[:2]
        self.load(xc, row0)
        best, offset = self.run(count, row0, rows, nan_rule=False)
        if np.isnan(best).any():
            # Rare: redo the chunk with the full NaN rule, which the fast path
            # skips (it keeps the offset of the largest number).
            best, offset = self.run(count, row0, rows, nan_rule=True)
        np.add(offset, self.plan.window_start[row0 : row0 + rows], out=ic, casting="unsafe")
        np.copyto(oc, best, casting="unsafe")
        # np.maximum may hand back +0 for (-0, +0), or another NaN than the
        # chosen one: copy those outputs exactly from the input.
        fix = best == 0
        np.logical_or(fix, np.isnan(best), out=fix)
        if fix.any():
            where = np.nonzero(fix)
            oc[where] = _gather_planes(xc, where[0], ic[where].astype(np.int64))


def _gather_planes(xc: np.ndarray, plane: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """xc[plane, flat unravelled over (D, H, W)] for matching index arrays."""
    _, _, height, width = xc.shape
    gathered: np.ndarray = xc[plane, flat // (height * width), (flat // width) % height, flat % width]
    return gathered


def max_pool3d_with_argmax(x: np.ndarray, params: PoolParams, out: np.ndarray, indices: np.ndarray) -> None:
    """:func:`pyaclnn.kernels.max_pool3d.max_pool3d_with_argmax` (the same bits) for a plan's
    non-empty arrays, the pooling's parameters grouped as the compiled kernel takes them
    (:func:`pyaclnn.kernels._accel.max_pool3d`): ``params`` is (kernel_size, stride,
    padding, dilation); ceil_mode already sized ``out``.

    The output indices' dtype holds every index (the plan's int32 holds a plane of
    up to PLANE_LIMIT cells), so the kernel keeps its offsets in it. It loops over
    the kD*kH*kW kernel offsets on chunks of (n, c) planes small enough to stay in
    cache (see ``_ForwardPlan``), on the threads
    :func:`pyaclnn.kernels._workers.threads_for` gives. Comparisons run in
    float32 (float64 for float64), which is exact, and every output is an exact
    copy of an input value.
    """
    n_count, c_count, depth, height, width = x.shape
    spatial = (depth, height, width)
    axes: tuple[_Axis, _Axis, _Axis] = tuple(  # type: ignore[assignment]
        (int(k), int(s), int(p), int(d)) for k, s, p, d in zip(*params, strict=True)
    )
    out_spatial: tuple[int, int, int] = out.shape[2:]  # the plan's output shape (ceil_mode included)
    compute = compute_dtype(x.dtype)
    index_dtype = np.dtype(np.int32 if indices.dtype.itemsize <= 4 else np.int64)
    axes = tuple(_reaching_offsets(ax, n, o) for ax, n, o in zip(axes, spatial, out_spatial))  # type: ignore[assignment]
    plan = _forward_plan(spatial, out_spatial, axes, compute, index_dtype, out_spatial[0])
    per_plane = plan.bytes_per_plane()
    threads = _workers.threads_for(out.size * len(plan.offsets), PARALLEL_MIN_WORK)
    budget = _chunk_budget(_FORWARD_CHUNK_BYTES, out.nbytes + indices.nbytes, threads)
    if per_plane <= budget:
        planes = min(n_count * c_count, budget // per_plane)
        blocks = [(xc, oc, ic, 0) for xc, oc, ic in _plane_blocks((x, out, indices), planes)]
    else:
        # A plane alone is too big: chunks of output depth rows of one plane.
        planes = 1
        row_bytes = max(1, per_plane // out_spatial[0])
        rows = max(1, min(out_spatial[0], budget // row_bytes))
        plan = _forward_plan(spatial, out_spatial, axes, compute, index_dtype, rows)
        blocks = [
            (xc, oc[:, r : r + rows], ic[:, r : r + rows], r)
            for xc, oc, ic in _plane_blocks((x, out, indices), 1)
            for r in range(0, out_spatial[0], rows)
        ]

    def work(share: list[tuple[Any, ...]]) -> None:
        scratch = plan.allocate(planes)
        for xc, oc, ic, row0 in share:
            scratch.pool(xc, oc, ic, row0)

    _workers.run_shared(work, blocks, threads)


# --------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------


def _check_indices(indices: np.ndarray, plane: int) -> None:
    """:func:`pyaclnn.kernels.checks.check_indices`, its pass over the indices shared out
    to the worker threads chunk by chunk of planes."""
    per_plane = max(1, indices[0, 0].size)
    blocks = list(_plane_blocks((indices,), max(1, (1 << 20) // per_plane)))
    outside: list[bool] = []

    def work(share: list[tuple[np.ndarray, ...]]) -> None:
        outside.extend(first_index_outside(b, plane) is not None for (b,) in share)

    _workers.run_shared(work, blocks, _workers.threads_for(indices.size, PARALLEL_MIN_WORK))
    if any(outside):
        check_indices(indices, plane)  # finds the first one and raises


def max_pool3d_with_argmax_backward(
    grad_output: np.ndarray, indices: np.ndarray, grad_input: np.ndarray
) -> None:
    """:func:`pyaclnn.kernels.max_pool3d.max_pool3d_with_argmax_backward` (the same
    arguments, bits and IndexOutOfPlaneError), for a plan's non-empty arrays.

    float16/bfloat16 gradients are summed in float32 and rounded once, in the C
    order of ``grad_output``. Chunks of (n, c) planes are scattered with
    ``np.add.at`` on the threads :func:`pyaclnn.kernels._workers.threads_for`
    gives; each chunk owns its part of ``grad_input``, so the result does not
    depend on the thread count.
    """
    n_count, c_count, depth, height, width = grad_input.shape
    plane = depth * height * width
    _check_indices(indices, plane)

    out_spatial = grad_output.shape[2:]
    row = out_spatial[1] * out_spatial[2]  # gradients per output depth row
    acc_dtype = compute_dtype(grad_input.dtype)
    # float16/bfloat16 chunks of whole planes written flat take
    # scatter_compact, which rounds only touched cells.
    compact = grad_input.dtype.itemsize == 2 and grad_output.dtype == grad_input.dtype
    # Scratch per gradient: int64 flat index and widened value; for
    # scatter_compact also an int32 slot, a partial sum and the rounding
    # temporaries. Per cell: the accumulator, and scatter_compact's int32 owner.
    per_out = 8 + acc_dtype.itemsize + (32 if compact else 0)
    acc_bytes = plane * (acc_dtype.itemsize + (4 if compact else 0))
    threads = _workers.threads_for(grad_output.size * 4, PARALLEL_MIN_WORK)
    budget = _chunk_budget(_BACKWARD_CHUNK_BYTES, grad_input.nbytes, threads)
    per_plane = out_spatial[0] * row * per_out + acc_bytes
    if per_plane <= budget:
        planes, rows = min(n_count * c_count, budget // per_plane), out_spatial[0]
    else:
        # A plane alone is too big: scatter its gradients a few depth rows at a
        # time (the accumulator still spans the whole plane).
        planes = 1
        rows = max(1, min(out_spatial[0], max(0, budget - acc_bytes) // max(1, row * per_out)))
    blocks = list(_plane_blocks((grad_output, indices, grad_input), planes))
    compact = compact and rows == out_spatial[0]

    def work(share: list[tuple[np.ndarray, ...]]) -> None:
        scratch = _BackwardScratch(planes, plane, rows * row, acc_dtype)
        for goc, ic, gic in share:
            if compact and gic.flags.c_contiguous:
                scratch.scatter_compact(goc, ic, gic)
            else:
                scratch.scatter(goc, ic, gic, rows)

    _workers.run_shared(work, blocks, threads)


class _BackwardScratch:
    """Buffers of one worker of a backward call."""

    def __init__(self, planes: int, plane: int, per_chunk: int, acc_dtype: np.dtype) -> None:
        self.plane = plane
        self.acc_dtype = acc_dtype
        self.flat = np.empty(planes * per_chunk, np.int64)
        self.values = np.empty(planes * per_chunk, acc_dtype)
        self.acc: np.ndarray | None = None
        self.owner: np.ndarray | None = None
        self.slot: np.ndarray | None = None
        self.sums: np.ndarray | None = None
        self.order: np.ndarray | None = None
        self.prefer_dense = False
        self.plane_start = (np.arange(planes, dtype=np.int64) * plane).reshape(planes, 1, 1, 1)
        self.planes = planes

    def scatter(self, goc: np.ndarray, ic: np.ndarray, gic: np.ndarray, rows: int) -> None:
        """grad_input chunk = zeros + scatter-add of the grad_output chunk,
        taking ``rows`` output depth rows at a time."""
        count, depth = goc.shape[:2]
        in_place = gic.dtype == self.acc_dtype and gic.flags.c_contiguous
        if in_place:
            acc = gic.reshape(-1)
        else:
            if self.acc is None:
                self.acc = np.empty(self.planes * self.plane, self.acc_dtype)
            acc = self.acc[: count * self.plane]
        acc.fill(0)
        for row0 in range(0, depth, rows):
            g, i = goc[:, row0 : row0 + rows], ic[:, row0 : row0 + rows]
            self._add(g, i, acc)
        if in_place:
            return
        # NumPy rounds to float16 slowly (scalar code): when few cells are
        # nonzero, zero-fill and round only those (a zero sum is +0 either way).
        if gic.dtype == np.float16 and gic.flags.c_contiguous:
            touched = acc != 0  # NumPy finds nonzero bools much faster than floats
            if 3 * np.count_nonzero(touched) >= acc.size:
                np.copyto(gic, acc.reshape(gic.shape), casting="unsafe")
                return
            nonzero = np.flatnonzero(touched)
            gflat = gic.reshape(-1)
            gflat.fill(0)
            gflat[nonzero] = acc[nonzero].astype(np.float16)
            return
        np.copyto(gic, acc.reshape(gic.shape), casting="unsafe")

    def scatter_compact(self, goc: np.ndarray, ic: np.ndarray, gic: np.ndarray) -> None:
        """Like :meth:`scatter` for a C-contiguous float16/bfloat16 chunk of
        whole planes: only touched cells are written after a fast zero fill,
        and only sums are rounded.

        Few repeats (windows that do not overlap): every touched position
        elects one of its gradients (whichever fancy assignment keeps), so a
        position whose gradients all name the same elected one is hit once and
        simply receives its gradient's bits. The gradients of positions hit
        several times are summed in float32 in a buffer indexed by the elected
        number, in C order, and rounded once. Fancy indexing releases the GIL,
        np.add.at does not, so this also runs well on several threads.

        Many repeats (overlapping windows): the gradients are summed into a
        float32 plane and the sum is read back, rounded and written at every
        gradient's position, which costs less than scanning the plane for the
        touched cells. A worker that meets many repeats skips the election
        from then on.
        """
        count = goc.shape[0]
        size = goc.size
        flat = self.flat[:size]
        np.add(ic, self.plane_start[:count], out=flat.reshape(ic.shape))
        grads = goc.reshape(-1)
        # As 16-bit integers: NumPy copies those fast, while fancy indexing of
        # ml_dtypes' bfloat16 goes element by element through the dtype.
        gbits = gic.reshape(-1).view(np.uint16)
        gbits.fill(0)
        if not self.prefer_dense:
            if self.owner is None:
                self.owner = np.empty(self.planes * self.plane, np.int32)
                self.order = np.arange(self.flat.size, dtype=np.int32)
                self.slot = np.empty(self.flat.size, np.int32)
            assert self.order is not None and self.slot is not None
            owner = self.owner[: count * self.plane]
            order = self.order[:size]
            slot = self.slot[:size]
            owner[flat] = order
            # mode="clip" never clips here (flat is in range) but skips the
            # bounds check.
            np.take(owner, flat, out=slot, mode="clip")
            repeated = slot != order
            repeats = int(np.count_nonzero(repeated))
            if 4 * repeats < size:
                bits = grads.view(np.uint16)
                gbits[flat] = bits
                _fix_lone_specials(bits, flat, gic.dtype, gbits)
                if not repeats:
                    return
                owner[flat[repeated]] = -1
                involved = owner[flat] == -1  # every gradient of a repeated position
                where, slots = flat[involved], slot[involved]
                values = self.values[: where.size]
                _widen(grads[involved], values)
                if self.sums is None:
                    self.sums = np.empty(self.flat.size, self.acc_dtype)
                sums = self.sums
                sums[slots] = 0
                np.add.at(sums, slots, values)
                _round_into(sums[slots], gic.dtype, gbits, where)
                return
            self.prefer_dense = True
        values = self.values[:size]
        _widen(goc, values.reshape(goc.shape))
        if self.acc is None:
            self.acc = np.empty(self.planes * self.plane, self.acc_dtype)
        acc = self.acc[: count * self.plane]
        acc.fill(0)
        np.add.at(acc, flat, values)
        np.take(acc, flat, out=values, mode="clip")
        _round_into(values, gic.dtype, gbits, flat)

    def _add(self, goc: np.ndarray, ic: np.ndarray, acc: np.ndarray) -> None:
        """acc (count * plane cells, contiguous) += scatter of one slice of
        gradients."""
        count = goc.shape[0]
        size = goc.size
        if goc.dtype == self.acc_dtype and goc.flags.c_contiguous:
            values = goc.reshape(-1)
        else:
            values = self.values[:size]
            _widen(goc, values.reshape(goc.shape))
        per = size // count
        if per >= _PLANE_AT_MIN and ic.dtype == np.int64 and ic.flags.c_contiguous:
            planes_acc = acc.reshape(count, -1)
            # Large planes with int64 indices: one np.add.at per plane spares
            # building the chunk-wide indices.
            for j in range(count):
                np.add.at(planes_acc[j], ic[j].reshape(-1), values[j * per : (j + 1) * per])
            return
        flat = self.flat[:size]
        # Indices of the whole chunk as one 1-D range, computed in int64.
        np.add(ic, self.plane_start[:count], out=flat.reshape(ic.shape))
        np.add.at(acc, flat, values)

"""Data movement references: InplaceCopy (broadcast and cast), Cat, Arange, the triangles (Tril, Triu
and their in-place forms), the gathers (IndexSelect, Gather, GatherV2), the repeats (Repeat and the
RepeatInterleave forms) and ConstantPadNd: torch's ``copy_``, ``cat``, ``arange``, ``tril``, ``triu``,
``index_select``, ``gather``, ``repeat``, ``repeat_interleave``, ``constant_pad_nd``, exact in every
dtype. GatherV2 is ``index_select`` with an index of any shape (``np.take``: the index's dims replace
``dim``), ggml's get_rows. An index out of range is not checked (phase 1 cannot see the values; the
NPU's result is undefined there): the CPU clips it. Arange computes ``start + k * step`` in float64,
then casts (torch's arange for float steps).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ...constants import ACLNN_ERR_PARAM_NULLPTR
from ._registry import Reference, TensorInfo, register
from ._rules import (
    ARITHMETIC,
    DATA,
    INDEX,
    PHASE2_CONST,
    Row,
    axis,
    broadcast,
    can_cast,
    convert,
    dtype_in,
    fail,
    promote,
    register_rows,
    required,
    shaped,
    write,
)

# -- InplaceCopy ----------------------------------------------------------------

_COPY_H = """
ACLNN_API aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor* selfRef, const aclTensor* src,
                                                       uint64_t* workspaceSize, aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnInplaceCopy(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       const aclrtStream stream);
"""


def _check_inplace_copy(self_ref: TensorInfo, src: TensorInfo) -> None:
    required(selfRef=self_ref, src=src)
    dtype_in("selfRef", self_ref, ARITHMETIC)
    dtype_in("src", src, ARITHMETIC)
    shape = broadcast("selfRef", self_ref.shape, "src", src.shape)
    if shape != self_ref.shape:
        raise fail(f"src shape {list(src.shape)} does not broadcast to selfRef shape {list(self_ref.shape)}")


def _kernel_inplace_copy(self_ref: np.ndarray, src: np.ndarray) -> None:
    write(self_ref, src)  # src may overlap selfRef (a view of it): write copies it first then


register(
    Reference("InplaceCopy", _kernel_inplace_copy, "aclnn_copy.h", _COPY_H, _check_inplace_copy, ARITHMETIC)
)


# -- Cat ----------------------------------------------------------------------------

_CAT_H = """
ACLNN_API aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList* tensors, int64_t dim, aclTensor* out,
                                               uint64_t* workspaceSize, aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnCat(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                               aclrtStream stream);
"""


def _check_cat(tensors: list[TensorInfo] | None, dim: int, out: TensorInfo) -> None:
    if tensors is None:
        raise fail("tensors is a null pointer, it must be an aclTensorList", ACLNN_ERR_PARAM_NULLPTR)
    required(out=out)
    if not tensors:
        raise fail("tensors is empty: it needs at least one tensor")
    first = tensors[0]
    rank = len(first.shape)
    if not -rank <= dim < max(rank, 1):
        raise fail(f"dim {dim} is outside [{-rank}, {rank - 1}] for tensors of {rank} dims")
    axis = dim % rank if rank else 0
    result = first.dtype
    total = 0
    for i, t in enumerate(tensors):
        dtype_in(f"tensors[{i}]", t, ARITHMETIC)
        if len(t.shape) != rank or any(
            a != b for k, (a, b) in enumerate(zip(t.shape, first.shape)) if k != axis
        ):
            raise fail(
                f"tensors[{i}] has shape {list(t.shape)}, tensors[0] {list(first.shape)}: they must agree "
                f"except in dim {dim}"
            )
        result = promote(result, t.dtype)
        total += t.shape[axis] if rank else 0
    dtype_in("out", out, ARITHMETIC)
    if not can_cast(result, out.dtype):
        raise fail(f"out has dtype {out.dtype.name}, which {result.name} (the tensors) cannot be cast to")
    expected = tuple(total if k == axis else d for k, d in enumerate(first.shape))
    if out.shape != expected:
        raise fail(f"out has shape {list(out.shape)}; the tensors concatenate to {list(expected)}")


def _kernel_cat(tensors: list[np.ndarray], dim: int, out: np.ndarray) -> None:
    if out.ndim == 0:
        out[...] = np.concatenate([convert(t, out.dtype) for t in tensors], axis=dim)
        return
    axis = dim % out.ndim
    start = 0
    for t in tensors:  # each converted straight into its part of out
        stop = start + t.shape[axis]
        write(out[(slice(None),) * axis + (slice(start, stop),)], t)
        start = stop


register(Reference("Cat", _kernel_cat, "aclnn_cat.h", _CAT_H, _check_cat, ARITHMETIC))


# -- Arange -----------------------------------------------------------------------------------------

ARANGE: tuple[Row, ...] = (
    Row(
        "Arange",
        "aclnn_arange.h",
        "const aclScalar* start, const aclScalar* end, const aclScalar* step, aclTensor* out",
        "arange",
        frozenset(("float32", "float16", "bfloat16", "int32", "int64")),
        PHASE2_CONST,
    ),
)


def _check_arange(row: Row, start: Any, end: Any, step: Any, out: TensorInfo) -> None:
    for name, value in (("start", start), ("end", end), ("step", step)):
        if value is None:
            raise fail(f"{name} is a null pointer, it must be an aclScalar", ACLNN_ERR_PARAM_NULLPTR)
    required(out=out)
    dtype_in("out", out, row.dtypes)
    first, last, delta = float(start), float(end), float(step)
    if delta == 0 or not all(math.isfinite(v) for v in (first, last, delta)):
        raise fail(f"start {start}, end {end} and step {step} must be finite, the step not 0")
    if (last - first) * delta < 0:
        raise fail(f"step {step} goes away from end {end} (start {start})")
    shaped("out", out, (max(math.ceil((last - first) / delta), 0),))


# Arange's float64 values a block at a time: the three passes over a block stay in the caches
# (1M float32 values: 10 ms in one go, 6 ms in blocks, the same bits)
_ARANGE_BLOCK = 1 << 15
_ARANGE_STEPS = np.arange(_ARANGE_BLOCK, dtype=np.float64)
_ARANGE_STEPS.flags.writeable = False  # shared by every call, on any thread


def _kernel_arange(row: Row, start: Any, end: Any, step: Any, out: np.ndarray) -> None:
    first, delta = float(start), float(step)
    buffer = np.empty(min(out.shape[0], _ARANGE_BLOCK))
    for begin in range(0, out.shape[0], _ARANGE_BLOCK):
        values = buffer[: min(_ARANGE_BLOCK, out.shape[0] - begin)]
        np.add(_ARANGE_STEPS[: values.size], begin, out=values)  # k exactly (below 2**53)
        values *= delta
        values += first
        write(out[begin : begin + values.size], values)


register_rows(ARANGE, _check_arange, _kernel_arange)


# -- Tril, Triu ---------------------------------------------------------------------------------------

_TRIANGLE = "const aclTensor* self, int64_t diagonal, aclTensor* out"
TRIANGLES: tuple[Row, ...] = (
    Row("Tril", "aclnn_tril.h", _TRIANGLE, "tril", DATA, PHASE2_CONST),
    Row("Triu", "aclnn_triu.h", _TRIANGLE, "triu", DATA),
    Row(
        "InplaceTril",
        "aclnn_tril.h",
        "const aclTensor* selfRef, int64_t diagonal",
        "tril",
        DATA,
        PHASE2_CONST,
    ),
    Row("InplaceTriu", "aclnn_triu.h", "aclTensor* selfRef, int64_t diagonal", "triu", DATA),
)


def _check_triangle(row: Row, diagonal: int, **tensors: TensorInfo) -> None:
    required(**tensors)
    self = tensors["self"] if "self" in tensors else tensors["selfRef"]
    dtype_in("self" if "self" in tensors else "selfRef", self, row.dtypes)
    if len(self.shape) < 2:
        raise fail(f"self has shape {list(self.shape)}; {row.name} takes at least 2 dims")
    if "out" in tensors:
        shaped("out", tensors["out"], self.shape, self.dtype)


def _kernel_triangle(row: Row, diagonal: int, **tensors: np.ndarray) -> None:
    self = tensors["self"] if "self" in tensors else tensors["selfRef"]
    rows, cols = self.shape[-2:]
    target = tensors["out"] if "out" in tensors else self
    if target is not self:
        np.copyto(target, self)
    # by blocks of rows: the columns every row of the block zeroes in one fill, the band along the
    # diagonal through the mask (a masked copy of the whole matrix took 10x torch's in-place tril)
    mask, zero = _zeroed(row.form, rows, cols, diagonal), np.zeros((), self.dtype)
    for first in range(0, rows, _BLOCK):
        last = min(first + _BLOCK, rows)
        if row.form == "tril":  # col > row + diagonal
            band, full = (first + diagonal + 1, last + diagonal), (last + diagonal, cols)
        else:  # col < row + diagonal
            band, full = (first + diagonal, last + diagonal - 1), (0, first + diagonal)
        start, stop = (min(max(c, 0), cols) for c in full)
        if start < stop:
            target[..., first:last, start:stop] = zero
        start, stop = (min(max(c, 0), cols) for c in band)
        if start < stop:
            np.copyto(target[..., first:last, start:stop], zero, where=mask[first:last, start:stop])


_BLOCK = 64


@functools.lru_cache(maxsize=16)
def _zeroed(form: str, rows: int, cols: int, diagonal: int) -> np.ndarray:
    """The elements Tril (Triu) zeroes: col - row > diagonal (< diagonal), read-only and cached."""
    if form == "tril":
        mask = ~np.tri(rows, cols, diagonal, dtype=bool)
    else:
        mask = np.tri(rows, cols, diagonal - 1, dtype=bool)
    mask.flags.writeable = False
    return mask


register_rows(TRIANGLES, _check_triangle, _kernel_triangle)


# -- IndexSelect, Gather, GatherV2 ---------------------------------------------------------------------------

_GATHER = "const aclTensor* self, int64_t dim, const aclTensor* index, aclTensor* out"
GATHERS: tuple[Row, ...] = (
    Row("IndexSelect", "aclnn_index_select.h", _GATHER, "index_select", DATA, PHASE2_CONST),
    Row(
        "Gather",
        "aclnn_gather.h",
        "const aclTensor* self, const int64_t dim, const aclTensor* index, aclTensor* out",
        "gather",
        DATA,
        PHASE2_CONST,
    ),
    Row("GatherV2", "aclnn_gather_v2.h", _GATHER, "gather_v2", DATA),
)


def _gathered_shape(row: Row, self: TensorInfo, dim: int, index: TensorInfo) -> tuple[int, ...]:
    rank = len(self.shape)
    k = axis("dim", dim, rank)
    if row.form == "index_select":
        if len(index.shape) > 1:
            raise fail(f"index has shape {list(index.shape)}; IndexSelect takes a 0-d or 1-d index")
        size = int(np.prod(index.shape))
        return tuple(size if d == k else s for d, s in enumerate(self.shape))
    if row.form == "gather_v2":
        return (*self.shape[:k], *index.shape, *self.shape[k + 1 :])
    if len(index.shape) != rank or any(
        i > s for d, (i, s) in enumerate(zip(index.shape, self.shape)) if d != k
    ):
        raise fail(
            f"index has shape {list(index.shape)}; Gather takes one of self's rank {rank}, no larger than "
            f"self {list(self.shape)} but in dim {dim}"
        )
    return tuple(index.shape)


def _check_gather(row: Row, self: TensorInfo, dim: int, index: TensorInfo, out: TensorInfo) -> None:
    required(self=self, index=index, out=out)
    dtype_in("self", self, row.dtypes)
    dtype_in("index", index, INDEX)
    shaped("out", out, _gathered_shape(row, self, dim, index), self.dtype)


def _kernel_gather(row: Row, self: np.ndarray, dim: int, index: np.ndarray, out: np.ndarray) -> None:
    k = dim % max(self.ndim, 1)
    if self.ndim == 0:
        out[...] = self
        return
    if row.form == "gather":
        if index.size == 0:
            return
        if self.shape[k] == 0:
            return
        if index.min() < 0 or index.max() >= self.shape[k]:
            index = np.clip(index, 0, self.shape[k] - 1)
        # flat offsets into self (index's extents are within self's): one take, 3x faster than
        # np.take_along_axis's broadcast fancy indexing
        source = self if self.flags.c_contiguous else np.ascontiguousarray(self)
        steps = [s // source.itemsize for s in source.strides]
        offsets = index.astype(np.int64)  # a new array: scaled and shifted in place
        if steps[k] != 1:
            offsets *= steps[k]
        for d, n in enumerate(index.shape):
            if d != k and n > 1:
                grid = np.arange(n, dtype=np.int64) * steps[d]
                offsets += grid.reshape([-1 if e == d else 1 for e in range(index.ndim)])
        _take(source.reshape(-1), offsets, None, out)
        return
    if self.shape[k] == 0:
        return
    _take(self, index.reshape(-1) if row.form == "index_select" else index, k, out)


def _take(source: np.ndarray, index: np.ndarray, axis: int | None, out: np.ndarray) -> None:
    """``np.take(source, index, axis, mode="clip")`` written straight into ``out`` when NumPy can
    (the same dtype, out apart from source), else through a new array."""
    if out.flags.c_contiguous and not np.may_share_memory(out, source):
        np.take(source, index, axis=axis, out=out, mode="clip")
    else:
        out[...] = np.take(source, index, axis=axis, mode="clip")


register_rows(GATHERS, _check_gather, _kernel_gather)


# -- Repeat, RepeatInterleave ---------------------------------------------------------------------------

_INTERLEAVE = "aclnn_repeat_interleave.h"
REPEATS: tuple[Row, ...] = (
    Row(
        "Repeat",
        "aclnn_repeat.h",
        "const aclTensor* self, const aclIntArray* repeats, aclTensor* out",
        "repeat",
        DATA,
    ),
    Row(
        "RepeatInterleaveIntWithDim",
        _INTERLEAVE,
        "const aclTensor* self, int64_t repeats, int64_t dim, int64_t outputSize, aclTensor* out",
        "interleave",
        DATA,
    ),
    Row(
        "RepeatInterleaveInt",
        _INTERLEAVE,
        "const aclTensor* self, int64_t repeats, int64_t outputSize, aclTensor* out",
        "interleave",
        DATA,
    ),
    Row(
        "RepeatInterleave",
        _INTERLEAVE,
        "const aclTensor* self, const aclTensor* repeats, int64_t outputSize, aclTensor* out",
        "interleave",
        DATA,
    ),
)


def _check_repeat(row: Row, self: TensorInfo, repeats: Any, out: TensorInfo, **rest: Any) -> None:
    required(self=self, out=out)
    if repeats is None:
        kind = "aclTensor" if row.name == "RepeatInterleave" else "aclIntArray"
        raise fail(f"repeats is a null pointer, it must be an {kind}", ACLNN_ERR_PARAM_NULLPTR)
    dtype_in("self", self, row.dtypes)
    if out.dtype != self.dtype:
        raise fail(f"out has dtype {out.dtype.name}; it must be self's ({self.dtype.name})")
    rank = len(self.shape)
    if row.form == "repeat":
        if len(repeats) < rank or any(r < 0 for r in repeats):
            raise fail(f"repeats {list(repeats)} must have at least self's {rank} values, none negative")
        padded = (1,) * (len(repeats) - rank) + tuple(self.shape)
        shaped("out", out, tuple(r * s for r, s in zip(repeats, padded)))
        return
    if isinstance(repeats, TensorInfo):
        dtype_in("repeats", repeats, INDEX)
        numel = int(np.prod(self.shape))
        if len(repeats.shape) > 1 or int(np.prod(repeats.shape)) not in (1, numel):
            raise fail(
                f"repeats has shape {list(repeats.shape)}; it must be 0-d or 1-d of 1 or {numel} values"
            )
        size = rest["outputSize"]
        if len(out.shape) != 1 or (size > 0 and out.shape[0] != size):
            raise fail(f"out has shape {list(out.shape)}; it must be 1-d (of outputSize {size} when given)")
        return
    if repeats < 0:
        raise fail(f"repeats {repeats} is negative")
    if "dim" in rest:
        k = axis("dim", rest["dim"], rank)
        shape = tuple(s * repeats if d == k else s for d, s in enumerate(self.shape)) if rank else (repeats,)
    else:
        shape = (int(np.prod(self.shape)) * repeats,)
    size = rest["outputSize"]
    if size > 0 and size != shape[axis("dim", rest.get("dim", 0), len(shape))]:
        raise fail(f"outputSize {size} is not the repeated size {list(shape)}")
    shaped("out", out, shape)


def _kernel_repeat(row: Row, self: np.ndarray, repeats: Any, out: np.ndarray, **rest: Any) -> None:
    if row.form == "repeat":
        padded = (1,) * (len(repeats) - self.ndim) + self.shape
        if out.flags.c_contiguous and not np.may_share_memory(out, self):
            # out as (r0, s0, r1, s1, ...): self broadcast into it, one copy and no tiled array
            spread = out.reshape([n for pair in zip(repeats, padded) for n in pair])
            spread[...] = self.reshape([n for size in padded for n in (1, size)])
        else:
            out[...] = np.tile(self, repeats)
    elif "dim" in rest and self.ndim:
        out[...] = np.repeat(self, repeats, axis=rest["dim"] % self.ndim)
    else:
        counts = repeats.reshape(-1) if isinstance(repeats, np.ndarray) else repeats
        repeated = np.repeat(self.reshape(-1), counts)
        # a tensor of repeats summing to another size than out's (phase 1 cannot see its values):
        # the NPU's result is undefined, the CPU writes what fits
        size = min(out.shape[0], repeated.shape[0])
        out[:size] = repeated[:size]


register_rows(REPEATS, _check_repeat, _kernel_repeat)


# -- ConstantPadNd -----------------------------------------------------------------------------------------

PADS: tuple[Row, ...] = (
    Row(
        "ConstantPadNd",
        "aclnn_constant_pad_nd.h",
        "const aclTensor* self, const aclIntArray* pad, const aclScalar* value, aclTensor* out",
        "pad",
        DATA,
    ),
)


def _pads(pad: tuple[int, ...], rank: int) -> list[tuple[int, int]]:
    """(before, after) per dim of ``self``: ``pad`` lists pairs from the last dim backwards."""
    pairs = [(0, 0)] * rank
    for i in range(len(pad) // 2):
        pairs[rank - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    return pairs


def _check_pad(row: Row, self: TensorInfo, pad: tuple[int, ...] | None, value: Any, out: TensorInfo) -> None:
    required(self=self, out=out)
    if pad is None:
        raise fail("pad is a null pointer, it must be an aclIntArray", ACLNN_ERR_PARAM_NULLPTR)
    if value is None:
        raise fail("value is a null pointer, it must be an aclScalar", ACLNN_ERR_PARAM_NULLPTR)
    dtype_in("self", self, row.dtypes)
    rank = len(self.shape)
    if len(pad) % 2 or len(pad) > 2 * rank:
        raise fail(f"pad {list(pad)} must have an even number of values, at most 2 * {rank}")
    shape = tuple(s + b + a for s, (b, a) in zip(self.shape, _pads(pad, rank)))
    if any(s < 0 for s in shape):
        raise fail(f"pad {list(pad)} crops self {list(self.shape)} below 0 ({list(shape)})")
    shaped("out", out, shape, self.dtype)


def _kernel_pad(row: Row, self: np.ndarray, pad: tuple[int, ...], value: Any, out: np.ndarray) -> None:
    write(out, value)
    source, target = [], []
    for size, (before, after) in zip(self.shape, _pads(pad, self.ndim)):
        start, stop = max(-before, 0), size - max(-after, 0)
        source.append(slice(start, max(stop, start)))
        target.append(slice(max(before, 0), max(before, 0) + max(stop - start, 0)))
    out[tuple(target)] = self[tuple(source)]


register_rows(PADS, _check_pad, _kernel_pad)

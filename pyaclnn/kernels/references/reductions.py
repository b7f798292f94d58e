"""Reduction references: ReduceSum, Mean (torch's ``sum.dim_IntList`` and ``mean.dim``) and Cumsum
(``cumsum``).

One check and one kernel: ``self`` converted to ``dtype`` (which the output has), summed with a
float32 accumulator for fp16, bf16 and float32 (an int64 one for integers and bool, wrapping as
torch's) and rounded once. The CPU sums in NumPy's pairwise order, the NPU in its own: the results
agree within a tolerance, not bitwise. An empty ``dims`` reduces every dim;
Mean takes floats only (self and dtype).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...constants import ACLNN_ERR_PARAM_NULLPTR
from ._rules import (
    DATA,
    MATH,
    Row,
    axis,
    can_cast,
    convert,
    dtype_in,
    dtype_name,
    fail,
    register_rows,
    required,
    shaped,
    write,
)

_F32 = np.dtype(np.float32)

TABLE: tuple[Row, ...] = (
    Row(
        "ReduceSum",
        "aclnn_reduce_sum.h",
        "const aclTensor* self, const aclIntArray* dims, bool keepDims, aclDataType dtype, aclTensor* out",
        "sum",
        DATA,
    ),
    Row(
        "Mean",
        "aclnn_mean.h",
        "const aclTensor* self, const aclIntArray* dim, bool keepDim, aclDataType dtype, aclTensor* out",
        "mean",
        MATH,
    ),
    Row(
        "Cumsum",
        "aclnn_cumsum.h",
        "const aclTensor* self, int64_t dim, aclDataType dtype, aclTensor* out",
        "cumsum",
        DATA,
    ),
)


def _reduced(row: Row, values: dict[str, Any], rank: int) -> tuple[tuple[int, ...], bool]:
    """The reduced axes and keepdim of a call (every axis for an empty list)."""
    name = "dims" if "dims" in values else "dim"
    keep = bool(values.get("keepDims", values.get("keepDim")))
    listed = values[name]
    axes = tuple(axis(name, d, rank) for d in listed) if listed else tuple(range(rank))
    if len(set(axes)) != len(axes):
        raise fail(f"{name} {list(listed)} names a dim twice")
    return axes, keep


def check(row: Row, **values: Any) -> None:
    self, out, dtype = values["self"], values["out"], values["dtype"]
    required(self=self, out=out)
    dtype_in("self", self, row.dtypes)
    if dtype_name(dtype) not in row.dtypes:
        raise fail(f"dtype {dtype.name} is not one of {', '.join(sorted(row.dtypes))}")
    if row.form == "mean" and dtype_name(dtype) not in MATH:
        raise fail(f"dtype {dtype.name}: Mean computes in a float dtype (float32, float16, bfloat16)")
    if row.form == "cumsum" and dtype == np.bool_:
        raise fail("dtype bool: Cumsum writes a number (torch has no bool cumsum)")
    if not can_cast(self.dtype, dtype):
        raise fail(f"self has dtype {self.dtype.name}, which cannot be cast to dtype {dtype.name}")
    rank = len(self.shape)
    if row.form == "cumsum":
        axis("dim", values["dim"], rank)
        shaped("out", out, self.shape, dtype)
        return
    name = "dims" if "dims" in values else "dim"
    if values[name] is None:
        raise fail(f"{name} is a null pointer, it must be an aclIntArray", ACLNN_ERR_PARAM_NULLPTR)
    axes, keep = _reduced(row, values, rank)
    shape = tuple(1 if k in axes else s for k, s in enumerate(self.shape) if keep or k not in axes)
    shaped("out", out, shape, dtype)


def _accumulator(dtype: np.dtype) -> np.dtype:
    return _F32 if dtype_name(dtype) in MATH else np.dtype(np.int64)


def kernel(row: Row, **values: Any) -> None:
    self, out, dtype = values["self"], values["out"], values["dtype"]
    accumulator = _accumulator(dtype)
    if row.form == "cumsum" and self.ndim and self.dtype == accumulator == out.dtype:
        np.cumsum(self, axis=values["dim"] % self.ndim, out=out)
        return
    x = self if self.dtype == dtype else convert(self, dtype)  # torch: self cast to dtype first
    x = x.astype(accumulator, copy=False)
    if row.form == "cumsum":
        write(out, np.cumsum(x, axis=values["dim"] % max(self.ndim, 1)) if self.ndim else x)
        return
    axes, keep = _reduced(row, values, self.ndim)
    total = np.sum(x, axis=axes, keepdims=keep, dtype=accumulator)
    if row.form == "mean":
        count = int(np.prod([self.shape[k] for k in axes]))
        with np.errstate(invalid="ignore", divide="ignore"):
            total = total / np.float32(count) if count else np.full_like(total, np.nan)
    write(out, total)


register_rows(TABLE, check, kernel)

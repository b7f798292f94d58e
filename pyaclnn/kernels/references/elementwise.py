"""Elementwise references: Add and Cast (torch's promotion; fp16/bf16 in float32, rounded once)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...constants import ACLNN_ERR_PARAM_NULLPTR
from ._registry import Reference, TensorInfo, register
from ._rules import (
    ARITHMETIC,
    CATEGORY,
    broadcast,
    can_cast,
    compute_dtype,
    convert,
    dtype_in,
    dtype_name,
    fail,
    is_one,
    promote,
    required,
)

# -- Add ----------------------------------------------------------------------

_ADD_H = """
ACLNN_API aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                               const aclScalar* alpha, aclTensor* out,
                                               uint64_t* workspaceSize, aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnAdd(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                               aclrtStream stream);
"""


def _check_add(self: TensorInfo, other: TensorInfo, alpha: Any, out: TensorInfo) -> None:
    required(self=self, other=other, out=out)
    if alpha is None:
        raise fail("alpha is a null pointer, it must be an aclScalar", ACLNN_ERR_PARAM_NULLPTR)
    for name, t in (("self", self), ("other", other), ("out", out)):
        dtype_in(name, t, ARITHMETIC)
    result = promote(self.dtype, other.dtype)
    if not can_cast(result, out.dtype):
        raise fail(f"out has dtype {out.dtype.name}, which {result.name} (self with other) cannot be cast to")
    alpha_type = np.asarray(alpha).dtype
    if CATEGORY.get(dtype_name(alpha_type), 2) > CATEGORY[dtype_name(result)]:
        raise fail(f"alpha has type {alpha_type.name}, which {result.name} (self with other) cannot take")
    shape = broadcast("self", self.shape, "other", other.shape)
    if out.shape != shape:
        raise fail(f"out has shape {list(out.shape)}; self and other broadcast to {list(shape)}")


def _kernel_add(self: np.ndarray, other: np.ndarray, alpha: Any, out: np.ndarray) -> None:
    result = promote(self.dtype, other.dtype)
    compute = compute_dtype(result)
    a = self.astype(compute, copy=False)
    b = other.astype(compute, copy=False)
    if not is_one(alpha):
        b = b * np.asarray(alpha).astype(compute)
    total = np.add(a, b, dtype=compute)
    out[...] = total.astype(result, copy=False).astype(out.dtype, copy=False)


register(Reference("Add", _kernel_add, "aclnn_add.h", _ADD_H, _check_add))


# -- Cast ---------------------------------------------------------------------

_CAST_H = """
ACLNN_API aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor* self, const aclDataType dtype,
                                                aclTensor* out, uint64_t* workspaceSize,
                                                aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnCast(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                aclrtStream stream);
"""


def _check_cast(self: TensorInfo, dtype: np.dtype, out: TensorInfo) -> None:
    required(self=self, out=out)
    dtype_in("self", self, ARITHMETIC)
    if dtype_name(dtype) not in ARITHMETIC:
        raise fail(f"dtype {dtype.name} is not one of {', '.join(sorted(ARITHMETIC))}")
    if out.dtype != dtype:
        raise fail(f"out has dtype {out.dtype.name}, but dtype asks for {dtype.name}")
    if out.shape != self.shape:
        raise fail(f"out has shape {list(out.shape)}, self {list(self.shape)}: they must be equal")


def _kernel_cast(self: np.ndarray, dtype: np.dtype, out: np.ndarray) -> None:
    out[...] = convert(self, out.dtype)


register(Reference("Cast", _kernel_cast, "aclnn_cast.h", _CAST_H, _check_cast))

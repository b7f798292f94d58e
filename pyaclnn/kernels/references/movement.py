"""Data movement references: InplaceCopy (broadcast and cast) and Cat."""

from __future__ import annotations

import numpy as np

from ...constants import ACLNN_ERR_PARAM_NULLPTR
from ._registry import Reference, TensorInfo, register
from ._rules import (
    ARITHMETIC,
    broadcast,
    can_cast,
    convert,
    dtype_in,
    fail,
    promote,
    required,
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
    # src may overlap selfRef (a view of it): convert into a new array before writing
    self_ref[...] = np.array(convert(src, self_ref.dtype), copy=True)


register(Reference("InplaceCopy", _kernel_inplace_copy, "aclnn_copy.h", _COPY_H, _check_inplace_copy))


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
    parts = [convert(t, out.dtype) for t in tensors]
    out[...] = np.concatenate(parts, axis=dim)


register(Reference("Cat", _kernel_cat, "aclnn_cat.h", _CAT_H, _check_cat))

"""Normalisation references: LayerNorm (statistics in float32)."""

from __future__ import annotations

import numpy as np

from ...constants import ACLNN_ERR_PARAM_NULLPTR
from ._registry import Reference, TensorInfo, register
from ._rules import (
    dtype_in,
    fail,
    required,
)

# -- LayerNorm -------------------------------------------------------------------------

_LAYER_NORM_H = """
ACLNN_API aclnnStatus aclnnLayerNormGetWorkspaceSize(
    const aclTensor* input, const aclIntArray* normalizedShape, const aclTensor* weightOptional,
    const aclTensor* biasOptional, double eps, aclTensor* out, aclTensor* meanOutOptional,
    aclTensor* rstdOutOptional, uint64_t* workspaceSize, aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnLayerNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                     aclrtStream stream);
"""
_NORM_DTYPES = frozenset(("float16", "bfloat16", "float32"))


def _check_layer_norm(
    input: TensorInfo,
    normalized_shape: tuple[int, ...] | None,
    weight: TensorInfo | None,
    bias: TensorInfo | None,
    eps: float,
    out: TensorInfo,
    mean: TensorInfo | None,
    rstd: TensorInfo | None,
) -> None:
    required(input=input, out=out)
    if normalized_shape is None:
        raise fail("normalizedShape is a null pointer, it must be an aclIntArray", ACLNN_ERR_PARAM_NULLPTR)
    dtype_in("input", input, _NORM_DTYPES)
    count = len(normalized_shape)
    if count < 1 or count > len(input.shape) or tuple(input.shape[-count:]) != tuple(normalized_shape):
        raise fail(
            f"normalizedShape {list(normalized_shape)} must be the last dims of input "
            f"(shape {list(input.shape)})"
        )
    for name, t in (("weightOptional", weight), ("biasOptional", bias)):
        if t is not None:
            dtype_in(name, t, _NORM_DTYPES)
            if t.shape != tuple(normalized_shape):
                raise fail(
                    f"{name} has shape {list(t.shape)}; it must be normalizedShape {list(normalized_shape)}"
                )
    if out.shape != input.shape or out.dtype != input.dtype:
        raise fail(f"out has shape {list(out.shape)} and dtype {out.dtype.name}; it must be input's")
    reduced = (*input.shape[: len(input.shape) - count], *(1,) * count)
    for name, t in (("meanOutOptional", mean), ("rstdOutOptional", rstd)):
        if t is not None:
            dtype_in(name, t, _NORM_DTYPES)
            if t.shape != reduced:
                raise fail(f"{name} has shape {list(t.shape)}; it must be {list(reduced)}")


def _kernel_layer_norm(
    input: np.ndarray,
    normalized_shape: tuple[int, ...],
    weight: np.ndarray | None,
    bias: np.ndarray | None,
    eps: float,
    out: np.ndarray,
    mean: np.ndarray | None,
    rstd: np.ndarray | None,
) -> None:
    axes = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    x = input.astype(np.float32)
    mu = x.mean(axis=axes, keepdims=True)
    inverse = 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + np.float32(eps))
    y = (x - mu) * inverse
    if weight is not None:
        y = y * weight.astype(np.float32)
    if bias is not None:
        y = y + bias.astype(np.float32)
    out[...] = y.astype(out.dtype)
    if mean is not None:
        mean[...] = mu.astype(mean.dtype)
    if rstd is not None:
        rstd[...] = inverse.astype(rstd.dtype)


register(Reference("LayerNorm", _kernel_layer_norm, "aclnn_layer_norm.h", _LAYER_NORM_H, _check_layer_norm))

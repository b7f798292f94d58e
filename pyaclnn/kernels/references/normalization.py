"""Normalisation references: LayerNorm, RmsNorm, Softmax and LogSoftmax, computed in float32 and
rounded once to the output's dtype (torch's ``layer_norm``, ``rms_norm``, ``_softmax``,
``_log_softmax``). RmsNorm's ``rstdOut`` is float32, shaped like ``x`` with ``gamma``'s trailing dims
set to 1 (as torch_npu's op-plugin allocates it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...constants import ACLNN_ERR_PARAM_NULLPTR
from ._registry import Reference, TensorInfo, register
from ._rules import MATH, Row, axis, dtype_in, fail, register_rows, required, shaped, write

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
    x = input.astype(np.float32, copy=False)
    mu = x.mean(axis=axes, keepdims=True)
    y = np.subtract(x, mu, out=_float32_buffer(out, input))
    # the sum of squares as a dot product of each normalized block with itself: no squared copy
    # (a new 1 MB array for (64, 4096), 40% of this kernel)
    count = int(np.prod(normalized_shape))
    flat = y.reshape(*y.shape[: y.ndim - len(axes)], count)
    squares = _row_dot(flat, flat).reshape(mu.shape)
    inverse = 1.0 / np.sqrt(squares / np.float32(count) + np.float32(eps))
    y *= inverse
    if weight is not None:
        y *= weight.astype(np.float32, copy=False)
    if bias is not None:
        y += bias.astype(np.float32, copy=False)
    if y is not out:
        write(out, y)
    if mean is not None:
        mean[...] = mu.astype(mean.dtype)
    if rstd is not None:
        rstd[...] = inverse.astype(rstd.dtype)


register(
    Reference(
        "LayerNorm", _kernel_layer_norm, "aclnn_layer_norm.h", _LAYER_NORM_H, _check_layer_norm, _NORM_DTYPES
    )
)


def _einsum_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    result: np.ndarray = np.einsum("...i,...i->...", a, b)
    return result


# The dot products of the last dims: np.vecdot from NumPy 2.0, einsum's (a little slower) before.
_row_dot: Callable[[np.ndarray, np.ndarray], np.ndarray] = getattr(np, "vecdot", _einsum_dot)


def _float32_buffer(out: np.ndarray, source: np.ndarray) -> np.ndarray | None:
    """``out`` when the float32 steps can run in it (it is float32, and ``source`` itself or apart
    from it: each step reads what it overwrites), else None (a new array, written at the end)."""
    if out.dtype == np.float32 and (out is source or not np.may_share_memory(out, source)):
        return out
    return None


# -- Softmax, LogSoftmax, RmsNorm ---------------------------------------------------------------------

_F32 = np.dtype(np.float32)
_SOFTMAX = "const aclTensor* self, int64_t dim, aclTensor* out"
TABLE: tuple[Row, ...] = (
    Row("Softmax", "aclnn_softmax.h", _SOFTMAX, "softmax", MATH),
    Row("LogSoftmax", "aclnn_logsoftmax.h", _SOFTMAX, "log_softmax", MATH),
    Row(
        "RmsNorm",
        "aclnn_rms_norm.h",
        "const aclTensor *x, const aclTensor *gamma, double epsilon, const aclTensor *yOut, "
        "const aclTensor *rstdOut",
        "rms_norm",
        MATH,
    ),
)


def check(row: Row, **values: Any) -> None:
    if row.form == "rms_norm":
        x, gamma, y, rstd = values["x"], values["gamma"], values["yOut"], values["rstdOut"]
        required(x=x, gamma=gamma, yOut=y, rstdOut=rstd)
        dtype_in("x", x, row.dtypes)
        if gamma.dtype != x.dtype:
            raise fail(f"gamma has dtype {gamma.dtype.name}; it must be x's ({x.dtype.name})")
        count = len(gamma.shape)
        if count < 1 or count > len(x.shape) or tuple(x.shape[len(x.shape) - count :]) != tuple(gamma.shape):
            raise fail(f"gamma has shape {list(gamma.shape)}; it must be the last dims of x {list(x.shape)}")
        shaped("yOut", y, x.shape, x.dtype)
        shaped("rstdOut", rstd, (*x.shape[: len(x.shape) - count], *(1,) * count), _F32)
        return
    self, out = values["self"], values["out"]
    required(self=self, out=out)
    dtype_in("self", self, row.dtypes)
    dtype_in("out", out, row.dtypes)
    axis("dim", values["dim"], len(self.shape))
    shaped("out", out, self.shape)


def kernel(row: Row, **values: Any) -> None:
    if row.form == "rms_norm":
        x, gamma = values["x"].astype(_F32, copy=False), values["gamma"].astype(_F32, copy=False)
        axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
        rstd = 1.0 / np.sqrt(np.mean(np.square(x), axis=axes, keepdims=True) + np.float32(values["epsilon"]))
        y = np.multiply(x, rstd, out=_float32_buffer(values["yOut"], values["x"]))
        np.multiply(y, gamma, out=y)
        if y is not values["yOut"]:
            write(values["yOut"], y)
        write(values["rstdOut"], rstd)
        return
    self, out = values["self"], values["out"]
    if self.size == 0:
        return
    dim = values["dim"] % max(self.ndim, 1) if self.ndim else None
    x = self.astype(_F32, copy=False)
    shifted = np.subtract(x, np.max(x, axis=dim, keepdims=True), out=_float32_buffer(out, self))
    if row.form == "softmax":
        exp = np.exp(shifted, out=shifted)
        exp /= np.sum(exp, axis=dim, keepdims=True)
    else:
        shifted -= np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))
    if shifted is not out:
        write(out, shifted)


register_rows(TABLE, check, kernel)

"""Unary references: the activations (Silu, Gelu, GeluV2, Relu, Sigmoid, Tanh), Exp, Log, Sqrt,
Rsqrt, Neg, Abs, Sign and their in-place forms.

Rows of the table of :mod:`.elementwise`, run by its kernel and check: the float functions give
float32 for an integer or bool input (torch's rule) and compute fp16 and bf16 in float32, rounded
once; Gelu computes in float64 (its erf, which NumPy lacks, is :func:`erfc` here) and rounds once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import _accel
from ._rules import ARITHMETIC, FLOATS, INTS, PHASE2, PHASE2_CONST, fail
from .elementwise import Family, Op, as_row, floating, into, kernel, register_table, same


def _gelu_rule(promoted: np.dtype, named: Mapping[str, Any]) -> np.dtype:
    approximate = named.get("approximate", 0)
    if approximate not in (0, 1):
        raise fail(f"approximate is {approximate}; it must be 0 (none, erf) or 1 (tanh)")
    return promoted


def _sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    # 1 / (1 + exp(-x)): exp overflows to inf below about -88 (float32), where 1 / inf is the 0 the
    # sigmoid rounds to; every step writes ``out``, which only the first reads x into
    e = np.negative(x, out=out)
    np.exp(e, out=e)
    result: np.ndarray = np.divide(1, np.add(e, 1, out=e), out=e)
    return result


def _silu(x: np.ndarray, out: np.ndarray | None = None) -> Any:
    # x / (1 + exp(-x)): x is read again at the end, so out holds exp(-x) only when it is not x
    e = np.negative(x, out=None if out is x else out)
    np.exp(e, out=e)
    return np.divide(x, np.add(e, 1, out=e), out=out)


# erf(s) = s * sum(_ERF_SERIES[n] * s**(2n)), the Taylor series to 30 terms: below s = 2 the first term
# left out is under 1e-16, erf's rounding (erfc's relative error at s = 2: 2e-14)
_ERF_SERIES = [(-1) ** n * 2 / math.sqrt(math.pi) / (math.factorial(n) * (2 * n + 1)) for n in range(30)]


def erfc(x: np.ndarray) -> np.ndarray:
    """erfc in float64, vectorised, relative error below 1e-12 (NumPy has no erf): the Taylor
    series of erf below 2 (30 terms, by Horner's rule) and the continued fraction of erfc from 2
    (50 levels), with erfc(-x) = 2 - erfc(x)."""
    x = np.asarray(x, np.float64)
    magnitude = np.abs(x)
    small = magnitude < 2.0
    tail = np.empty_like(magnitude)
    s = magnitude[small]
    square = np.square(s)
    total = np.full_like(s, _ERF_SERIES[-1])
    for coefficient in reversed(_ERF_SERIES[:-1]):  # in place: two passes a term, no new arrays
        total *= square
        total += coefficient
    total *= s
    tail[small] = np.subtract(1.0, total, out=total)
    b = magnitude[~small]
    fraction = b
    for k in range(50, 0, -1):
        fraction = b + (k / 2.0) / fraction
    tail[~small] = np.exp(-b * b) / np.sqrt(np.pi) / fraction
    result: np.ndarray = np.where(x < 0, 2.0 - tail, tail)
    return result


def _gelu(x: np.ndarray, approximate: int = 0) -> np.ndarray:
    if approximate == 1:
        inner = np.sqrt(2.0 / np.pi) * (x + 0.044715 * x * x * x)
        tanh: np.ndarray = 0.5 * x * (1.0 + np.tanh(inner))
        return tanh
    erf: np.ndarray = 0.5 * x * erfc(-x / np.sqrt(2.0))  # 1 + erf(z) = erfc(-z), no cancellation
    return erf


def _gelu_kernel(op: Op, *values: Any) -> None:
    """Gelu's and GeluV2's kernel: the compiled erf form (:func:`pyaclnn.kernels._accel.gelu`,
    checked against this module's NumPy one in tests) when it takes the call, else the table's."""
    x, out = values[0], values[-1]
    if (len(values) == 2 or values[1] == 0) and _accel.gelu(x, out):
        return
    kernel(op, *values)


def _rsqrt(x: np.ndarray, out: np.ndarray | None = None) -> Any:
    root = np.sqrt(x, out=out)
    return np.divide(1, root, out=root)


def _relu(x: np.ndarray, out: np.ndarray | None = None) -> Any:
    return np.maximum(x, as_row(np.zeros((), x.dtype), x), out=out)  # NaN stays NaN


def _sign(x: np.ndarray, out: np.ndarray | None = None) -> Any:
    return into(x, out) if x.dtype == np.bool_ else np.sign(x, out=out)


# -- the families and their dtypes -------------------------------------------------------------------
# Exp, Log, Sqrt, Rsqrt and Tanh take every dtype, an integer or bool giving float32 (torch's rule;
# CANN lists integers for Tanh, Sqrt and Rsqrt, bool for Exp); Silu, Gelu and Sigmoid take floats
# only (CANN: float types). Relu: CANN's list (float32, float16, bfloat16, int8, int32, uint8).
# Neg and Abs: integers and floats (torch refuses bool; CANN lists bool for Abs, not taken here).
# Sign: every dtype.

_FLOATING = frozenset(FLOATS)
_NUMBERS = frozenset((*FLOATS, *INTS))
_RELU = frozenset(("float32", "float16", "bfloat16", "int8", "int32", "uint8"))


SILU = Family(_silu, floating)
GELU = Family(_gelu, _gelu_rule, float64=True, into=False)
RELU = Family(_relu, same)
SIGMOID = Family(_sigmoid, floating)
TANH = Family(np.tanh, floating)
EXP = Family(np.exp, floating)
LOG = Family(np.log, floating)
SQRT = Family(np.sqrt, floating)
RSQRT = Family(_rsqrt, floating)
NEG = Family(np.negative, same)
ABS = Family(np.abs, same)
SIGN = Family(_sign, same)
A = ARITHMETIC
UNARY = "const aclTensor* self, aclTensor* out"
_GELU_V2 = "const aclTensor* x, int64_t approximate, aclTensor* y"

TABLE: tuple[Op, ...] = (
    Op("Silu", "aclnn_silu.h", UNARY, SILU, _FLOATING),
    Op("Gelu", "aclnn_gelu.h", UNARY, GELU, _FLOATING, PHASE2_CONST),
    Op("GeluV2", "aclnn_gelu_v2.h", _GELU_V2, GELU, _FLOATING, PHASE2_CONST),
    Op("Relu", "aclnn_relu.h", "const aclTensor* self, const aclTensor* out", RELU, _RELU, PHASE2_CONST),
    Op("InplaceRelu", "aclnn_relu.h", "aclTensor* selfRef", RELU, _RELU, PHASE2_CONST),
    Op("Sigmoid", "aclnn_sigmoid.h", UNARY, SIGMOID, _FLOATING, PHASE2_CONST),
    Op(
        "InplaceSigmoid",
        "aclnn_sigmoid.h",
        "aclTensor* selfRef",
        SIGMOID,
        _FLOATING,
        PHASE2_CONST,
        "uint64_t* workspace_size, aclOpExecutor** executor",
    ),
    Op("Tanh", "aclnn_tanh.h", UNARY, TANH, A, PHASE2_CONST),
    Op("InplaceTanh", "aclnn_tanh.h", "aclTensor* selfRef", TANH, A, PHASE2_CONST),
    Op("Exp", "aclnn_exp.h", UNARY, EXP, A),
    Op("InplaceExp", "aclnn_exp.h", "aclTensor* selfRef", EXP, A),
    Op(
        "Log",
        "aclnn_log.h",
        UNARY,
        LOG,
        A,
        "void* workspace, uint64_t workspace_size, aclOpExecutor* executor, aclrtStream stream",
    ),
    Op("InplaceLog", "aclnn_log.h", "aclTensor* selfRef", LOG, A),
    Op(
        "Sqrt",
        "aclnn_sqrt.h",
        UNARY,
        SQRT,
        A,
        "void* workspace, uint64_t workspaceSize, aclOpExecutor* opExecutor, aclrtStream stream",
        "uint64_t* workspaceSize, aclOpExecutor** opExecutor",
    ),
    Op("InplaceSqrt", "aclnn_sqrt.h", "aclTensor* self", SQRT, A),
    Op("Rsqrt", "aclnn_rsqrt.h", UNARY, RSQRT, A),
    Op(
        "InplaceRsqrt",
        "aclnn_rsqrt.h",
        "aclTensor* selfRef",
        RSQRT,
        A,
        PHASE2,
        "uint64_t* workspace_size, aclOpExecutor** executor",
    ),
    Op("Neg", "aclnn_neg.h", UNARY, NEG, _NUMBERS, PHASE2_CONST),
    Op("InplaceNeg", "aclnn_neg.h", "aclTensor* selfRef", NEG, _NUMBERS),
    Op("Abs", "aclnn_abs.h", UNARY, ABS, _NUMBERS, PHASE2_CONST),
    Op("Sign", "aclnn_sign.h", "const aclTensor* self, aclTensor* result", SIGN, A, PHASE2_CONST),
)

for _op in TABLE:  # in the table's order (the listings keep it), Gelu's rows with their own kernel
    register_table((_op,), __name__, _gelu_kernel if _op.family is GELU else None)

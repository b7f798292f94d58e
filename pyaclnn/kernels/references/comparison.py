"""Comparison, selection and fill references: Eq, Ne, Gt, Ge, Lt, Le (Tensor and Scalar), the Clamp
family, SWhere, and InplaceFillScalar, InplaceZero, InplaceOne, InplaceFillTensor.

Rows of the table of :mod:`.elementwise`, run by its kernel and check: comparisons promote both
operands (torch's rule, a scalar promoting only a tensor of a lower kind) and compare in the compute
dtype, writing bool converted to the output's dtype; Clamp is ``min(max(self, min), max)`` on the
promoted operands (NaN propagates, a min above the max gives the max, as torch); SWhere promotes
self and other and picks by a bool condition, the three broadcast. The fills write their value
converted to selfRef's dtype (as torch's ``fill_``: no promotion, no cast check).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...constants import ACLNN_ERR_PARAM_NULLPTR
from ._registry import TensorInfo
from ._rules import ARITHMETIC, FLOATS, INTS, PHASE2_CONST, convert, dtype_in, fail
from .elementwise import SCALAR, TENSOR, Family, Op, as_row, boolean, register_table, same

# Comparisons: every dtype pyaclnn has, out of any dtype (CANN's headers list most dtypes for each,
# a few without bool or bfloat16; torch compares all). Clamp: integers and floats (CANN: float16,
# float32, float64, int8, uint8, int16, int32, int64, and bfloat16 on Atlas A2; torch refuses bool).
# SWhere: self and other of every dtype, condition bool. Fills: every dtype.

_CLAMP = frozenset((*FLOATS, *INTS))
A = ARITHMETIC


def _comparison(ufunc: Callable[..., Any]) -> Family:
    return Family(ufunc, boolean, out_dtypes=ARITHMETIC)


EQ, NE = _comparison(np.equal), _comparison(np.not_equal)
GT, GE = _comparison(np.greater), _comparison(np.greater_equal)
LT, LE = _comparison(np.less), _comparison(np.less_equal)


def _clamp(x: np.ndarray, low: np.ndarray, high: np.ndarray, out: np.ndarray | None = None) -> Any:
    bounded = np.maximum(x, as_row(low, x), out=out)
    return np.minimum(bounded, as_row(high, x), out=bounded)


def _clamp_min(x: np.ndarray, low: np.ndarray, out: np.ndarray | None = None) -> Any:
    return np.maximum(x, as_row(low, x), out=out)


def _clamp_max(x: np.ndarray, high: np.ndarray, out: np.ndarray | None = None) -> Any:
    return np.minimum(x, as_row(high, x), out=out)


CLAMP = Family(_clamp, same)
CLAMP_MIN = Family(_clamp_min, same)
CLAMP_MAX = Family(_clamp_max, same)
WHERE = Family(np.where, same, into=False)

_T, _S = TENSOR, SCALAR
_CLAMP_SCALARS = (
    "const aclTensor* self, const aclScalar* clipValueMin, const aclScalar* clipValueMax, aclTensor* out"
)
_CLAMP_TENSORS = (
    "const aclTensor* self, const aclTensor* clipValueMin, const aclTensor* clipValueMax, aclTensor* out"
)
_CLAMP_MIN = "const aclTensor* self, const aclScalar* clipValueMin, aclTensor* out"
_CLAMP_MAX = "const aclTensor* self, const aclScalar* clipValueMax, aclTensor* out"
_CLAMP_MIN_TENSOR = "const aclTensor* self, const aclTensor* clipValueMin, aclTensor* out"
_CLAMP_MAX_TENSOR = "const aclTensor* self, const aclTensor* max, aclTensor* out"
_CLAMP_MAX_IN_PLACE = "const aclTensor* selfRef, const aclScalar* clipValueMax"
_WHERE = "const aclTensor* condition, const aclTensor* self, const aclTensor* other, aclTensor* out"

TABLE: tuple[Op, ...] = (
    Op("EqTensor", "aclnn_eq_tensor.h", _T, EQ, A),
    Op("EqScalar", "aclnn_eq_scalar.h", _S, EQ, A, PHASE2_CONST),
    Op("NeTensor", "aclnn_ne_tensor.h", _T, NE, A),
    Op("NeScalar", "aclnn_ne_scalar.h", _S, NE, A, PHASE2_CONST),
    Op("GtTensor", "aclnn_gt_tensor.h", _T, GT, A),
    Op("GtScalar", "aclnn_gt_scalar.h", _S, GT, A),
    Op("GeTensor", "aclnn_ge_tensor.h", _T, GE, A, PHASE2_CONST),
    Op("GeScalar", "aclnn_ge_scalar.h", _S, GE, A, PHASE2_CONST),
    Op("LtTensor", "aclnn_lt_tensor.h", _T, LT, A),
    Op("LtScalar", "aclnn_lt_scalar.h", _S, LT, A),
    Op("LeTensor", "aclnn_le_tensor.h", _T, LE, A),
    Op("LeScalar", "aclnn_le_scalar.h", _S, LE, A),
    Op("Clamp", "aclnn_clamp.h", _CLAMP_SCALARS, CLAMP, _CLAMP, PHASE2_CONST),
    Op("ClampMin", "aclnn_clamp.h", _CLAMP_MIN, CLAMP_MIN, _CLAMP, PHASE2_CONST),
    Op("ClampMax", "aclnn_clamp.h", _CLAMP_MAX, CLAMP_MAX, _CLAMP),
    Op("ClampTensor", "aclnn_clamp.h", _CLAMP_TENSORS, CLAMP, _CLAMP, PHASE2_CONST),
    Op("ClampMinTensor", "aclnn_clamp.h", _CLAMP_MIN_TENSOR, CLAMP_MIN, _CLAMP, PHASE2_CONST),
    Op("ClampMaxTensor", "aclnn_clamp.h", _CLAMP_MAX_TENSOR, CLAMP_MAX, _CLAMP),
    Op("InplaceClampMax", "aclnn_clamp.h", _CLAMP_MAX_IN_PLACE, CLAMP_MAX, _CLAMP),
    Op("SWhere", "aclnn_s_where.h", _WHERE, WHERE, A),
)

register_table(TABLE, __name__)


# -- the fills: selfRef[...] = a value converted to selfRef's dtype -------------------------------------


def _value(value: Any) -> Any:
    return value


FILL = Family(_value, same)
ZERO = Family(lambda: 0, same)
ONE = Family(lambda: 1, same)

FILLS: tuple[Op, ...] = (
    Op("InplaceFillScalar", "aclnn_fill_scalar.h", "aclTensor* selfRef, const aclScalar* value", FILL, A),
    Op("InplaceZero", "aclnn_zero.h", "aclTensor* selfRef", ZERO, A),
    Op("InplaceOne", "aclnn_ones.h", "const aclTensor* selfRef", ONE, A),
    Op("InplaceFillTensor", "aclnn_fill_tensor.h", "aclTensor* selfRef, const aclTensor* value", FILL, A),
)


def check_fill(op: Op, self_ref: TensorInfo | None, *value: Any) -> None:
    for param, v in zip(op.roles, (self_ref, *value)):
        if v is None:
            kind = "aclTensor" if param.tensor else "aclScalar"
            raise fail(f"{param.name} is a null pointer, it must be an {kind}", ACLNN_ERR_PARAM_NULLPTR)
    assert self_ref is not None
    dtype_in(op.roles[0].name, self_ref, op.dtypes)
    if value and isinstance(value[0], TensorInfo):
        dtype_in("value", value[0], op.dtypes)
        if len(value[0].shape) > 1 or int(np.prod(value[0].shape)) != 1:
            raise fail(f"value has shape {list(value[0].shape)}; it must be 0-d or 1-d of one element")


def kernel_fill(op: Op, self_ref: np.ndarray, *value: Any) -> None:
    filled = np.asarray(op.family.compute(*value))
    self_ref[...] = convert(filled.reshape(()), self_ref.dtype)


register_table(FILLS, __name__, kernel_fill, check_fill)

"""The rules the references share: dtypes, torch's type promotion, broadcasting, the status
of a NULL tensor, fp16/bf16 computed in float32 and rounded once."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...constants import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR
from ..checks import CheckFailed
from ._registry import TensorInfo

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "uint8", "int16", "int32", "int64")
ARITHMETIC = frozenset((*FLOATS, *INTS, "bool"))
CATEGORY = {"bool": 0, **dict.fromkeys(INTS, 1), **dict.fromkeys(FLOATS, 2)}


def fail(message: str, status: int = ACLNN_ERR_PARAM_INVALID) -> CheckFailed:
    return CheckFailed(status, message)


def required(**tensors: Any) -> None:
    """ACLNN_ERR_PARAM_NULLPTR for the first of ``tensors`` that is None (NULL), naming it."""
    for name, value in tensors.items():
        if value is None:
            raise fail(f"{name} is a null pointer, it must be an aclTensor", ACLNN_ERR_PARAM_NULLPTR)


@functools.lru_cache(maxsize=64)
def dtype_name(dtype: np.dtype) -> str:
    """``dtype.name``, cached: NumPy works the name out at every access (a hot path of every check)."""
    return str(dtype.name)


def dtype_in(name: str, t: TensorInfo, allowed: frozenset[str]) -> None:
    if dtype_name(t.dtype) not in allowed:
        raise fail(f"{name} has dtype {t.dtype.name}, which is not one of {', '.join(sorted(allowed))}")


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch's result type of two tensors: the higher category (bool < int < float) wins; within
    one, the wider type (float16 with bfloat16 gives float32, int8 with uint8 int16)."""
    ca, cb = CATEGORY[dtype_name(a)], CATEGORY[dtype_name(b)]
    if ca != cb:
        return a if ca > cb else b
    if a == b:
        return a
    if {dtype_name(a), dtype_name(b)} == {"float16", "bfloat16"}:
        return np.dtype(np.float32)
    return np.promote_types(a, b)


def can_cast(source: np.dtype, target: np.dtype) -> bool:
    """torch's ``canCast``: no float to an integer or bool, no integer to bool."""
    return CATEGORY[dtype_name(target)] >= CATEGORY[dtype_name(source)]


def broadcast(name_a: str, a: tuple[int, ...], name_b: str, b: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise fail(f"{name_a} shape {list(a)} and {name_b} shape {list(b)} do not broadcast") from None


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """fp16 and bf16 compute in float32 and round once."""
    return np.dtype(np.float32) if dtype_name(dtype) in ("float16", "bfloat16") else dtype


def is_one(value: Any) -> bool:
    return bool(value == 1) and not isinstance(value, (np.bool_, bool))


def convert(source: np.ndarray, target: np.dtype) -> np.ndarray:
    """``source`` as ``target`` the way the device casts: floats to integers toward zero,
    anything to bool by != 0, bfloat16 through float32 (rounded once)."""
    if target == np.bool_:
        nonzero: np.ndarray = source != 0
        return nonzero
    if dtype_name(source.dtype) == "bfloat16" or (
        dtype_name(target) == "bfloat16" and source.dtype != np.float32
    ):
        source = source.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        converted: np.ndarray = source.astype(target)
    return converted

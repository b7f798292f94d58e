"""The rules the references share: dtypes, torch's type promotion, broadcasting, the status
of a NULL tensor, fp16/bf16 computed in float32 and rounded once."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...constants import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR
from .. import _accel
from ..checks import CheckFailed
from ._registry import Reference, TensorInfo, register

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "uint8", "int16", "int32", "int64")
ARITHMETIC = frozenset((*FLOATS, *INTS, "bool"))
CATEGORY = {"bool": 0, **dict.fromkeys(INTS, 1), **dict.fromkeys(FLOATS, 2)}
# The dtypes of the math operators (matmul, convolution, softmax, norms) on Atlas A2, and of the data
# movement ones (every dtype the tests run).
MATH = frozenset(("float32", "float16", "bfloat16"))
DATA = frozenset(("float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "int16", "bool"))
INDEX = frozenset(("int32", "int64"))

_FLOAT16 = np.dtype(np.float16)

TAIL = "uint64_t* workspaceSize, aclOpExecutor** executor"
PHASE2 = "void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream"
PHASE2_CONST = "void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, const aclrtStream stream"
_PARAM = re.compile(r"^(?P<type>.*?)\s*\**\s*(?P<name>\w+)$")


@dataclass(frozen=True)
class Row:
    """An operator of a family (linalg, reductions, normalization, movement): its name, header and
    phase-1 parameters as its CANN 8.1.RC1 header declares them, the family's form of it (``"mm"``,
    ``"addmm"``, ...) and the dtypes of its tensors. The family's one check and one kernel get the
    row and the call's values by their C names."""

    name: str
    header: str
    params: str
    form: str
    dtypes: frozenset[str]
    phase2: str = PHASE2

    @property
    def declaration(self) -> str:
        return (
            f"\nACLNN_API aclnnStatus aclnn{self.name}GetWorkspaceSize({self.params}, {TAIL});\n"
            f"ACLNN_API aclnnStatus aclnn{self.name}({self.phase2});\n"
        )

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        found = []
        for text in self.params.split(","):
            match = _PARAM.match(text.strip())
            assert match is not None, text
            found.append(match["name"])
        return tuple(found)


def _by_name(function: Callable[..., None], row: Row, *values: Any) -> None:
    function(row, **dict(zip(row.names, values)))


def register_rows(rows: Iterable[Row], check: Callable[..., None], kernel: Callable[..., None]) -> None:
    """Register each row with the family's ``check`` and ``kernel``, called as ``f(row, **values)``."""
    for row in rows:
        register(
            Reference(
                row.name,
                functools.partial(_by_name, kernel, row),
                row.header,
                row.declaration,
                functools.partial(_by_name, check, row),
                row.dtypes,
            )
        )


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


def axis(name: str, dim: int, rank: int) -> int:
    """``dim`` in ``[-rank, rank)`` (a 0-d tensor takes -1 and 0) as a non-negative axis."""
    bound = max(rank, 1)
    if not -bound <= dim < bound:
        raise fail(f"{name} {dim} is outside [{-bound}, {bound - 1}] for a tensor of {rank} dims")
    return dim % bound


def shaped(name: str, t: TensorInfo, shape: tuple[int, ...], dtype: np.dtype | None = None) -> None:
    """The output ``t`` must have ``shape`` (and ``dtype``, when given)."""
    if tuple(t.shape) != tuple(shape):
        raise fail(f"{name} has shape {list(t.shape)}; it must be {list(shape)}")
    if dtype is not None and t.dtype != dtype:
        raise fail(f"{name} has dtype {t.dtype.name}; it must be {np.dtype(dtype).name}")


def write(out: np.ndarray, value: Any) -> None:
    """``value`` converted to ``out``'s dtype (broadcast to its shape) as :func:`convert` does,
    written into it in one pass: NumPy's casts round once, and copy ``value`` first when it overlaps
    ``out``."""
    value = np.asarray(value)
    if out.dtype == _FLOAT16 and _accel.float_to_half(value, out):  # NumPy's bits, by F16C
        return
    if out.dtype == np.bool_ and value.dtype != np.bool_:
        np.not_equal(value, 0, out=out)
    elif dtype_name(value.dtype) == "bfloat16" or (
        dtype_name(out.dtype) == "bfloat16" and value.dtype != np.float32
    ):
        out[...] = convert(value, out.dtype)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            np.copyto(out, value, casting="unsafe")

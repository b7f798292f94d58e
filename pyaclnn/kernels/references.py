"""NumPy references of aclnn operators that the numpy backend runs through ``pyaclnn.ops``.

One mechanism for every operator: a :class:`Reference` holds the operator's C
declaration (the text of its CANN 8.1.RC1 header, which the catalogue reads as
it reads CANN's own headers), its phase-1 check (the rules with CANN's status
codes, :class:`~pyaclnn.kernels.checks.CheckFailed`) and its kernel. Both get
the call's values in header order: a tensor is a :class:`TensorInfo` for the
check and a NumPy view for the kernel (which writes its outputs in place), a
tensor list a list of them, a scalar a NumPy scalar of its type, an
``aclDataType`` a NumPy dtype, arrays tuples, the rest Python values.

Semantics follow the aten operators these implement (``add``, ``_to_copy``,
``copy_``): torch's type promotion, ``alpha`` applied only when it is not 1 (so
integers stay exact), fp16/bf16 computed in float32 and rounded once.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..constants import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR
from ..ops._headers import python_operator_name
from .checks import CheckFailed


@dataclass(frozen=True)
class TensorInfo:
    """What phase 1 knows of a tensor: its shape and dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class Reference:
    """An operator's NumPy reference: its name (the C name without ``aclnn``, ``"Add"``, or the
    Python name, ``"add"``), its kernel, and for pyaclnn's own the header that declares it, the
    declaration's text and its phase-1 check (a user's reference has none: its operator is
    declared by a package's header, and CANN's checks are the device's)."""

    name: str
    kernel: Callable[..., None]
    header: str = ""
    declaration: str = ""
    check: Callable[..., None] | None = None


_REFERENCES: dict[str, Reference] = {}
_lock = threading.Lock()


def register(reference: Reference) -> None:
    """Make ``reference`` the numpy backend's implementation of its operator (replacing one
    registered under the same name)."""
    with _lock:
        _REFERENCES[reference.name] = reference


def get(name: str) -> Reference | None:
    """The reference of operator ``name`` (C name without ``aclnn``), registered under that name
    or under its Python name; None if there is none."""
    found = _REFERENCES.get(name)
    return found if found is not None else _REFERENCES.get(python_operator_name(name))


def names() -> tuple[str, ...]:
    return tuple(_REFERENCES)


def headers() -> dict[str, str]:
    """``{header file name: C declarations}`` of the references that carry their declaration."""
    texts: dict[str, str] = {}
    for reference in list(_REFERENCES.values()):
        if reference.declaration:
            texts[reference.header] = texts.get(reference.header, "") + reference.declaration
    return texts


# -- rules shared by the references -------------------------------------------

_FLOATS = ("float16", "bfloat16", "float32", "float64")
_INTS = ("int8", "uint8", "int16", "int32", "int64")
_ARITHMETIC = frozenset((*_FLOATS, *_INTS, "bool"))
_CATEGORY = {"bool": 0, **dict.fromkeys(_INTS, 1), **dict.fromkeys(_FLOATS, 2)}


def _fail(message: str, status: int = ACLNN_ERR_PARAM_INVALID) -> CheckFailed:
    return CheckFailed(status, message)


def _required(**tensors: Any) -> None:
    """ACLNN_ERR_PARAM_NULLPTR for the first of ``tensors`` that is None (NULL), naming it."""
    for name, value in tensors.items():
        if value is None:
            raise _fail(f"{name} is a null pointer, it must be an aclTensor", ACLNN_ERR_PARAM_NULLPTR)


@functools.lru_cache(maxsize=64)
def _name(dtype: np.dtype) -> str:
    """``dtype.name``, cached: NumPy works the name out at every access (a hot path of every check)."""
    return str(dtype.name)


def _dtype_in(name: str, t: TensorInfo, allowed: frozenset[str]) -> None:
    if _name(t.dtype) not in allowed:
        raise _fail(f"{name} has dtype {t.dtype.name}, which is not one of {', '.join(sorted(allowed))}")


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch's result type of two tensors: the higher category (bool < int < float) wins; within
    one, the wider type (float16 with bfloat16 gives float32, int8 with uint8 int16)."""
    ca, cb = _CATEGORY[_name(a)], _CATEGORY[_name(b)]
    if ca != cb:
        return a if ca > cb else b
    if a == b:
        return a
    if {_name(a), _name(b)} == {"float16", "bfloat16"}:
        return np.dtype(np.float32)
    return np.promote_types(a, b)


def _can_cast(source: np.dtype, target: np.dtype) -> bool:
    """torch's ``canCast``: no float to an integer or bool, no integer to bool."""
    return _CATEGORY[_name(target)] >= _CATEGORY[_name(source)]


def _broadcast(name_a: str, a: tuple[int, ...], name_b: str, b: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise _fail(f"{name_a} shape {list(a)} and {name_b} shape {list(b)} do not broadcast") from None


def _compute(dtype: np.dtype) -> np.dtype:
    """fp16 and bf16 compute in float32 and round once."""
    return np.dtype(np.float32) if _name(dtype) in ("float16", "bfloat16") else dtype


def _is_one(value: Any) -> bool:
    return bool(value == 1) and not isinstance(value, (np.bool_, bool))


# -- Add ----------------------------------------------------------------------

_ADD_H = """
ACLNN_API aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                               const aclScalar* alpha, aclTensor* out,
                                               uint64_t* workspaceSize, aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnAdd(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                               aclrtStream stream);
"""


def _check_add(self: TensorInfo, other: TensorInfo, alpha: Any, out: TensorInfo) -> None:
    _required(self=self, other=other, out=out)
    if alpha is None:
        raise _fail("alpha is a null pointer, it must be an aclScalar", ACLNN_ERR_PARAM_NULLPTR)
    for name, t in (("self", self), ("other", other), ("out", out)):
        _dtype_in(name, t, _ARITHMETIC)
    result = promote(self.dtype, other.dtype)
    if not _can_cast(result, out.dtype):
        raise _fail(
            f"out has dtype {out.dtype.name}, which {result.name} (self with other) cannot be cast to"
        )
    alpha_type = np.asarray(alpha).dtype
    if _CATEGORY.get(_name(alpha_type), 2) > _CATEGORY[_name(result)]:
        raise _fail(f"alpha has type {alpha_type.name}, which {result.name} (self with other) cannot take")
    shape = _broadcast("self", self.shape, "other", other.shape)
    if out.shape != shape:
        raise _fail(f"out has shape {list(out.shape)}; self and other broadcast to {list(shape)}")


def _kernel_add(self: np.ndarray, other: np.ndarray, alpha: Any, out: np.ndarray) -> None:
    result = promote(self.dtype, other.dtype)
    compute = _compute(result)
    a = self.astype(compute, copy=False)
    b = other.astype(compute, copy=False)
    if not _is_one(alpha):
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
    _required(self=self, out=out)
    _dtype_in("self", self, _ARITHMETIC)
    if _name(dtype) not in _ARITHMETIC:
        raise _fail(f"dtype {dtype.name} is not one of {', '.join(sorted(_ARITHMETIC))}")
    if out.dtype != dtype:
        raise _fail(f"out has dtype {out.dtype.name}, but dtype asks for {dtype.name}")
    if out.shape != self.shape:
        raise _fail(f"out has shape {list(out.shape)}, self {list(self.shape)}: they must be equal")


def _convert(source: np.ndarray, target: np.dtype) -> np.ndarray:
    """``source`` as ``target`` the way the device casts: floats to integers toward zero,
    anything to bool by != 0, bfloat16 through float32 (rounded once)."""
    if target == np.bool_:
        nonzero: np.ndarray = source != 0
        return nonzero
    if _name(source.dtype) == "bfloat16" or (_name(target) == "bfloat16" and source.dtype != np.float32):
        source = source.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        converted: np.ndarray = source.astype(target)
    return converted


def _kernel_cast(self: np.ndarray, dtype: np.dtype, out: np.ndarray) -> None:
    out[...] = _convert(self, out.dtype)


register(Reference("Cast", _kernel_cast, "aclnn_cast.h", _CAST_H, _check_cast))


# -- InplaceCopy ----------------------------------------------------------------

_COPY_H = """
ACLNN_API aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor* selfRef, const aclTensor* src,
                                                       uint64_t* workspaceSize, aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnInplaceCopy(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       const aclrtStream stream);
"""


def _check_inplace_copy(self_ref: TensorInfo, src: TensorInfo) -> None:
    _required(selfRef=self_ref, src=src)
    _dtype_in("selfRef", self_ref, _ARITHMETIC)
    _dtype_in("src", src, _ARITHMETIC)
    shape = _broadcast("selfRef", self_ref.shape, "src", src.shape)
    if shape != self_ref.shape:
        raise _fail(f"src shape {list(src.shape)} does not broadcast to selfRef shape {list(self_ref.shape)}")


def _kernel_inplace_copy(self_ref: np.ndarray, src: np.ndarray) -> None:
    # src may overlap selfRef (a view of it): convert into a new array before writing
    self_ref[...] = np.array(_convert(src, self_ref.dtype), copy=True)


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
        raise _fail("tensors is a null pointer, it must be an aclTensorList", ACLNN_ERR_PARAM_NULLPTR)
    _required(out=out)
    if not tensors:
        raise _fail("tensors is empty: it needs at least one tensor")
    first = tensors[0]
    rank = len(first.shape)
    if not -rank <= dim < max(rank, 1):
        raise _fail(f"dim {dim} is outside [{-rank}, {rank - 1}] for tensors of {rank} dims")
    axis = dim % rank if rank else 0
    result = first.dtype
    total = 0
    for i, t in enumerate(tensors):
        _dtype_in(f"tensors[{i}]", t, _ARITHMETIC)
        if len(t.shape) != rank or any(
            a != b for k, (a, b) in enumerate(zip(t.shape, first.shape)) if k != axis
        ):
            raise _fail(
                f"tensors[{i}] has shape {list(t.shape)}, tensors[0] {list(first.shape)}: they must agree "
                f"except in dim {dim}"
            )
        result = promote(result, t.dtype)
        total += t.shape[axis] if rank else 0
    _dtype_in("out", out, _ARITHMETIC)
    if not _can_cast(result, out.dtype):
        raise _fail(f"out has dtype {out.dtype.name}, which {result.name} (the tensors) cannot be cast to")
    expected = tuple(total if k == axis else d for k, d in enumerate(first.shape))
    if out.shape != expected:
        raise _fail(f"out has shape {list(out.shape)}; the tensors concatenate to {list(expected)}")


def _kernel_cat(tensors: list[np.ndarray], dim: int, out: np.ndarray) -> None:
    parts = [_convert(t, out.dtype) for t in tensors]
    out[...] = np.concatenate(parts, axis=dim)


register(Reference("Cat", _kernel_cat, "aclnn_cat.h", _CAT_H, _check_cat))


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
    _required(input=input, out=out)
    if normalized_shape is None:
        raise _fail("normalizedShape is a null pointer, it must be an aclIntArray", ACLNN_ERR_PARAM_NULLPTR)
    _dtype_in("input", input, _NORM_DTYPES)
    count = len(normalized_shape)
    if count < 1 or count > len(input.shape) or tuple(input.shape[-count:]) != tuple(normalized_shape):
        raise _fail(
            f"normalizedShape {list(normalized_shape)} must be the last dims of input "
            f"(shape {list(input.shape)})"
        )
    for name, t in (("weightOptional", weight), ("biasOptional", bias)):
        if t is not None:
            _dtype_in(name, t, _NORM_DTYPES)
            if t.shape != tuple(normalized_shape):
                raise _fail(
                    f"{name} has shape {list(t.shape)}; it must be normalizedShape {list(normalized_shape)}"
                )
    if out.shape != input.shape or out.dtype != input.dtype:
        raise _fail(f"out has shape {list(out.shape)} and dtype {out.dtype.name}; it must be input's")
    reduced = (*input.shape[: len(input.shape) - count], *(1,) * count)
    for name, t in (("meanOutOptional", mean), ("rstdOutOptional", rstd)):
        if t is not None:
            _dtype_in(name, t, _NORM_DTYPES)
            if t.shape != reduced:
                raise _fail(f"{name} has shape {list(t.shape)}; it must be {list(reduced)}")


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

"""aclDataType / aclFormat values and their NumPy counterparts.

The numeric values come from include/decl/acl_types.h; this module only pairs
them with NumPy dtypes. :data:`bfloat16` is ``ml_dtypes.bfloat16`` itself, the scalar
type (what ``np.float16`` is to NumPy): ``bfloat16(1.5)`` makes a value, and it is
accepted wherever a dtype is, as ``np.dtype(bfloat16)`` is the bfloat16 dtype.

ml_dtypes takes most of a second to import, and that cannot be made cheaper
from here: the time is all in its extension module's initialisation, which
registers each of its dtypes (bfloat16, the float8 and int4 families) with NumPy,
a cast and ufunc loop at a time, each registration scanning the loops
registered before it (``PyUFunc_AddLoop``: measured with ``perf``, nearly all of
the time); ml_dtypes has no way to register bfloat16 alone, and a bfloat16 of
pyaclnn's own would be a NumPy dtype in C to write and keep. So it is imported
on first need only: the attribute ``bfloat16`` (a module ``__getattr__``), ``to_numpy(ACL_BF16)``,
or a dtype that may be bfloat16 given to :func:`from_numpy`. A bfloat16 array
exists only once ml_dtypes is imported, so float32/float16/float64 work never
pays for it.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np

from . import _decl

# Re-exported: dtypes.ACL_FLOAT etc. predate pyaclnn.constants and stay for callers.
from .constants import (  # noqa: F401
    ACL_BF16,
    ACL_BOOL,
    ACL_COMPLEX64,
    ACL_COMPLEX128,
    ACL_DOUBLE,
    ACL_FLOAT,
    ACL_FLOAT16,
    ACL_FORMAT_NCDHW,
    ACL_FORMAT_NCHW,
    ACL_FORMAT_ND,
    ACL_FORMAT_NDHWC,
    ACL_INT8,
    ACL_INT16,
    ACL_INT32,
    ACL_INT64,
    ACL_UINT8,
    ACL_UINT16,
    ACL_UINT32,
    ACL_UINT64,
)
from .errors import describe

DATA_TYPES: dict[str, int] = _decl.enums()["aclDataType"]
FORMATS: dict[str, int] = _decl.enums()["aclFormat"]

# aclDataType <-> NumPy, for the types that have a NumPy equivalent.
_TO_NUMPY: dict[int, np.dtype] = {
    ACL_FLOAT: np.dtype(np.float32),
    ACL_FLOAT16: np.dtype(np.float16),
    ACL_DOUBLE: np.dtype(np.float64),
    ACL_INT8: np.dtype(np.int8),
    ACL_INT16: np.dtype(np.int16),
    ACL_INT32: np.dtype(np.int32),
    ACL_INT64: np.dtype(np.int64),
    ACL_UINT8: np.dtype(np.uint8),
    ACL_UINT16: np.dtype(np.uint16),
    ACL_UINT32: np.dtype(np.uint32),
    ACL_UINT64: np.dtype(np.uint64),
    ACL_BOOL: np.dtype(np.bool_),
    ACL_COMPLEX64: np.dtype(np.complex64),
    ACL_COMPLEX128: np.dtype(np.complex128),
}
_FROM_NUMPY: dict[np.dtype, int] = {dt: code for code, dt in _TO_NUMPY.items()}
_DATA_TYPE_NAMES = {code: name for name, code in DATA_TYPES.items()}
_FORMAT_NAMES = {code: name for name, code in FORMATS.items()}
# aclDataTypeSize(ACL_BF16) must not import ml_dtypes.
_BF16_ITEMSIZE = 2
bfloat16: type[np.generic]  # declared for type checkers; __getattr__ provides it
_bfloat16: np.dtype | None = None  # set, with the ACL_BF16 table entries, by _load_bfloat16


def _load_bfloat16() -> np.dtype:
    """``ml_dtypes.bfloat16`` as a NumPy dtype; the first call imports ml_dtypes and fills the tables."""
    global _bfloat16
    if _bfloat16 is None:
        import ml_dtypes

        dt = np.dtype(ml_dtypes.bfloat16)
        # Tables first: a thread that sees _bfloat16 set finds them complete.
        _TO_NUMPY[ACL_BF16] = dt
        _FROM_NUMPY[dt] = ACL_BF16
        _bfloat16 = dt
    return _bfloat16


def _may_be_bfloat16(dtype: Any) -> bool:
    """Whether ``dtype``, unknown so far, may name bfloat16 once ml_dtypes is loaded."""
    # An ml_dtypes type or array dtype implies ml_dtypes is imported; a string needs it to resolve.
    return "ml_dtypes" in sys.modules or (isinstance(dtype, str) and dtype.strip().lower() == "bfloat16")


def __getattr__(name: str) -> Any:
    if name == "bfloat16":
        return _load_bfloat16().type
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_numpy(data_type: int) -> np.dtype:
    """NumPy dtype of an aclDataType value.

    Raises
    ------
    ValueError
        If ``data_type`` has no NumPy equivalent (ACL_STRING, ACL_INT4, ...).
    """
    if int(data_type) == ACL_BF16:
        return _load_bfloat16()
    try:
        return _TO_NUMPY[int(data_type)]
    except KeyError:
        raise ValueError(f"aclDataType {data_type_name(data_type)} has no NumPy equivalent") from None


def as_dtype(dtype: Any) -> np.dtype:
    """``np.dtype(dtype)``, also for the name ``"bfloat16"`` before ml_dtypes is imported.

    NumPy knows the name only once ml_dtypes has registered it; this imports
    ml_dtypes for it, as ``import ml_dtypes`` at start-up used to.

    Raises
    ------
    TypeError
        If NumPy does not understand ``dtype``.
    """
    try:
        resolved: np.dtype = np.dtype(dtype)
    except TypeError:
        if _bfloat16 is not None or not _may_be_bfloat16(dtype):
            raise
        _load_bfloat16()
        resolved = np.dtype(dtype)
    return resolved


def from_numpy(dtype: np.dtype | type | str) -> int:
    """aclDataType value of a NumPy dtype (``ml_dtypes.bfloat16`` -> ACL_BF16).

    Raises
    ------
    TypeError
        If the dtype has no aclDataType.
    """
    try:
        return _FROM_NUMPY[as_dtype(dtype)]
    except (KeyError, TypeError):
        pass
    if _bfloat16 is None and _may_be_bfloat16(dtype):
        _load_bfloat16()  # a bfloat16 array or type: ml_dtypes is imported, the tables lack it so far
        return from_numpy(dtype)  # once: _bfloat16 is set now
    raise TypeError(f"dtype {describe(dtype)} has no aclDataType")


def size_of(data_type: int) -> int:
    """Bytes per element of an aclDataType, 0 when unknown (as aclDataTypeSize)."""
    if int(data_type) == ACL_BF16:
        return _BF16_ITEMSIZE
    dt = _TO_NUMPY.get(int(data_type))
    return 0 if dt is None else dt.itemsize


def data_type_name(data_type: int) -> str:
    """C name of an aclDataType value, or ``"aclDataType(<n>)"``."""
    return _DATA_TYPE_NAMES.get(int(data_type), f"aclDataType({data_type})")


def format_name(fmt: int) -> str:
    """C name of an aclFormat value, or ``"aclFormat(<n>)"``."""
    return _FORMAT_NAMES.get(int(fmt), f"aclFormat({fmt})")


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """Accumulation dtype: float64 for float64, float32 for everything narrower."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


@functools.lru_cache(maxsize=1024)
def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides in elements (as aclCreateTensor takes them) of a C-contiguous ``shape``.

    What aclCreateTensor assumes for NULL strides; a dimension of 0 counts as 1,
    so the strides stay valid for an empty tensor. Cached: a loop of calls asks
    for the same few shapes.
    """
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))

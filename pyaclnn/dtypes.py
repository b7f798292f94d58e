"""aclDataType / aclFormat values and their NumPy counterparts.

The numeric values come from include/decl/acl_types.h; this module only pairs
them with NumPy dtypes. bfloat16 is ``ml_dtypes.bfloat16``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import _decl

bfloat16 = np.dtype(ml_dtypes.bfloat16)

DATA_TYPES: dict[str, int] = _decl.enums()["aclDataType"]
FORMATS: dict[str, int] = _decl.enums()["aclFormat"]

ACL_FLOAT = DATA_TYPES["ACL_FLOAT"]
ACL_FLOAT16 = DATA_TYPES["ACL_FLOAT16"]
ACL_BF16 = DATA_TYPES["ACL_BF16"]
ACL_DOUBLE = DATA_TYPES["ACL_DOUBLE"]
ACL_INT32 = DATA_TYPES["ACL_INT32"]
ACL_INT64 = DATA_TYPES["ACL_INT64"]
ACL_BOOL = DATA_TYPES["ACL_BOOL"]

ACL_FORMAT_ND = FORMATS["ACL_FORMAT_ND"]
ACL_FORMAT_NCHW = FORMATS["ACL_FORMAT_NCHW"]
ACL_FORMAT_NCDHW = FORMATS["ACL_FORMAT_NCDHW"]
ACL_FORMAT_NDHWC = FORMATS["ACL_FORMAT_NDHWC"]

# aclDataType <-> NumPy, for the types that have a NumPy equivalent.
_TO_NUMPY: dict[int, np.dtype] = {
    DATA_TYPES["ACL_FLOAT"]: np.dtype(np.float32),
    DATA_TYPES["ACL_FLOAT16"]: np.dtype(np.float16),
    DATA_TYPES["ACL_BF16"]: bfloat16,
    DATA_TYPES["ACL_DOUBLE"]: np.dtype(np.float64),
    DATA_TYPES["ACL_INT8"]: np.dtype(np.int8),
    DATA_TYPES["ACL_INT16"]: np.dtype(np.int16),
    DATA_TYPES["ACL_INT32"]: np.dtype(np.int32),
    DATA_TYPES["ACL_INT64"]: np.dtype(np.int64),
    DATA_TYPES["ACL_UINT8"]: np.dtype(np.uint8),
    DATA_TYPES["ACL_UINT16"]: np.dtype(np.uint16),
    DATA_TYPES["ACL_UINT32"]: np.dtype(np.uint32),
    DATA_TYPES["ACL_UINT64"]: np.dtype(np.uint64),
    DATA_TYPES["ACL_BOOL"]: np.dtype(np.bool_),
    DATA_TYPES["ACL_COMPLEX64"]: np.dtype(np.complex64),
    DATA_TYPES["ACL_COMPLEX128"]: np.dtype(np.complex128),
}
_FROM_NUMPY: dict[np.dtype, int] = {dt: code for code, dt in _TO_NUMPY.items()}
_DATA_TYPE_NAMES = {code: name for name, code in DATA_TYPES.items()}
_FORMAT_NAMES = {code: name for name, code in FORMATS.items()}


def to_numpy(data_type: int) -> np.dtype:
    """NumPy dtype of an aclDataType value.

    Raises
    ------
    ValueError
        If ``data_type`` has no NumPy equivalent (ACL_STRING, ACL_INT4, ...).
    """
    try:
        return _TO_NUMPY[int(data_type)]
    except KeyError:
        raise ValueError(
            f"aclDataType {data_type_name(data_type)} has no NumPy equivalent"
        ) from None


def from_numpy(dtype: np.dtype | type | str) -> int:
    """aclDataType value of a NumPy dtype (``ml_dtypes.bfloat16`` -> ACL_BF16).

    Raises
    ------
    TypeError
        If the dtype has no aclDataType.
    """
    try:
        return _FROM_NUMPY[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"dtype {dtype!r} has no aclDataType") from None


def size_of(data_type: int) -> int:
    """Bytes per element of an aclDataType, 0 when unknown (as aclDataTypeSize)."""
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

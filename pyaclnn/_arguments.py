"""The functional layer's arguments: Python values normalised into what the C API takes.

Only values that cannot be passed to C at all are rejected here (with the
argument's name); the operators' own rules (lengths, ranges, modes) are checked
by their phase 1, so both backends report them alike.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from . import _operators as _ops
from . import dtypes as _dtypes
from ._array import DeviceArray
from .errors import ArgumentOverflowError, describe

__all__ = [
    "IntOrSeq",
    "InterpolationMode",
    "PaddingMode",
    "Layout",
    "OutArray",
    "OutPair",
    "PoolInts",
    "INTERPOLATION",
    "PADDING",
    "LAYOUTS",
    "int_tuple",
    "int64",
    "pool_ints",
    "mode",
    "flag",
    "out_one",
    "out_pair",
    "layout",
    "output_mask",
]

IntOrSeq = int | Sequence[int]
# The modes and layouts by name, for type checkers ("trilinear" is caught before it runs); the
# integers of the C API stay accepted. tests/test_typing.py checks them against the names below.
InterpolationMode = Literal["bilinear", "nearest"] | int
PaddingMode = Literal["zeros", "border", "reflection"] | int
Layout = Literal["NCDHW", "NDHWC"]
#: What ``out=`` takes: a DeviceArray, or a NumPy array when every input is one.
OutArray = DeviceArray | npt.NDArray[Any]
#: ``out=`` of the calls with two outputs: an array for each, or None to allocate it.
OutPair = tuple[OutArray | None, OutArray | None]
#: kernel_size, stride, padding, dilation as normalised by :func:`int_tuple`.
PoolInts = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Modes by name, in the C API's order (3-D sampling has no bicubic: the op rejects the C API's 2).
INTERPOLATION = {name: i for i, name in enumerate(_ops.INTERPOLATION_MODES)}
PADDING = {name: i for i, name in enumerate(_ops.PADDING_MODES)}
LAYOUTS = {"NCDHW": _dtypes.ACL_FORMAT_NCDHW, "NDHWC": _dtypes.ACL_FORMAT_NDHWC}


def int_tuple(name: str, value: IntOrSeq) -> tuple[int, ...]:
    """``value`` (an int or a sequence of ints) as a tuple, lengths as given.

    Lengths and ranges are the operator's rules and are checked by its phase 1;
    only values that cannot be passed to C at all are rejected here.

    Raises
    ------
    TypeError
        If ``value`` is not an int or a sequence of ints (bools are not ints here).
    ValueError
        If a value does not fit in int64.
    """
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        return (value,)  # the common cases, without the general checks below
    if type(value) is tuple:
        for v in value:  # a loop, not all() over a generator: this runs four times per max-pool call
            if type(v) is not int or not INT64_MIN <= v <= INT64_MAX:
                break
        else:
            return value
    items = (value,) if not isinstance(value, (Sequence, np.ndarray)) or isinstance(value, str) else value
    if isinstance(value, np.ndarray) and value.ndim != 1:
        raise TypeError(
            f"{name} must be an int or a 1-D sequence of ints, got an array of shape {value.shape}"
        )
    result = []
    for item in items:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise TypeError(f"{name} must be an int or a sequence of ints, got {describe(value)}")
        result.append(int64(name, item))
    return tuple(result)


def int64(name: str, value: int | np.integer) -> int:
    if not INT64_MIN <= int(value) <= INT64_MAX:
        raise ArgumentOverflowError(f"{name} value {int(value)} does not fit in int64")
    return operator.index(value)


#: pool_ints of plain ints (stride: also the default ``()``) -> its result, as calls repeat them
_PLAIN_POOL_INTS: dict[tuple[Any, ...], PoolInts] = {}
_PLAIN_POOL_INTS_LIMIT = 256


def pool_ints(kernel_size: IntOrSeq, stride: IntOrSeq, padding: IntOrSeq, dilation: IntOrSeq) -> PoolInts:
    """The four pooling parameters as tuples of ints (see :func:`int_tuple`)."""
    # The types are tested before the look-up: True == 1 and np.int64(2) == 2 hash alike, but
    # int_tuple refuses a bool, and only plain ints (that fit int64) were ever kept.
    plain = (
        type(kernel_size) is int
        and type(padding) is int
        and type(dilation) is int
        and (type(stride) is int or (type(stride) is tuple and not stride))
    )
    if plain:
        found = _PLAIN_POOL_INTS.get((kernel_size, stride, padding, dilation))
        if found is not None:
            return found
    ints = (
        int_tuple("kernel_size", kernel_size),
        int_tuple("stride", stride),
        int_tuple("padding", padding),
        int_tuple("dilation", dilation),
    )
    if plain and len(_PLAIN_POOL_INTS) < _PLAIN_POOL_INTS_LIMIT:
        _PLAIN_POOL_INTS[(kernel_size, stride, padding, dilation)] = ints
    return ints


def mode(name: str, value: str | int, names: dict[str, int]) -> int:
    if isinstance(value, str):
        try:
            return names[value]
        except KeyError:
            valid = ", ".join(repr(n) for n in names)
            raise ValueError(
                f"{name} must be one of {valid} or the C API's integer, got {describe(value)}"
            ) from None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a str or an int, got {describe(value)}")
    return int64(name, value)


def flag(name: str, value: Any) -> bool:
    if type(value) is bool:
        return value  # the common case, without the general check below
    if not isinstance(value, (bool, np.bool_, int, np.integer)):
        raise TypeError(f"{name} must be a bool, got {describe(value)}")
    return bool(value)


def out_one(out: Any, name: str = "out") -> OutArray | None:
    """``out`` of a call with one output: a DeviceArray, a NumPy array or None."""
    if out is None or isinstance(out, (DeviceArray, np.ndarray)):
        return out
    raise TypeError(f"{name} must be a pyaclnn.DeviceArray, a NumPy array or None, got {type(out).__name__}")


def out_pair(out: Any) -> tuple[OutArray | None, OutArray | None]:
    """``out`` of a call with two outputs: None, or a pair of arrays (DeviceArray or NumPy) or None."""
    if out is None:
        return None, None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"out must be a pair (array or None, array or None), got {describe(out)}")
    first, second = out
    if first is not None and second is not None and first is second:
        raise ValueError("out: both outputs would be written into the same array")
    return out_one(first, "out[0]"), out_one(second, "out[1]")


def layout(layout: str) -> int:
    try:
        return LAYOUTS[layout]
    except (KeyError, TypeError):
        raise ValueError(f"layout must be 'NCDHW' or 'NDHWC', got {describe(layout)}") from None


def output_mask(value: Any) -> tuple[bool, ...]:
    """output_mask as a tuple of bools; its length is the op's rule (checked by phase 1)."""
    if type(value) is tuple and len(value) == 2 and type(value[0]) is bool and type(value[1]) is bool:
        return value  # the common case, without the general checks below
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise TypeError(f"output_mask must be a sequence of two bools, got {describe(value)}")
    return tuple(flag("output_mask", m) for m in value)

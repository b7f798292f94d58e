"""Python values checked as the C parameters they stand for.

The npu backend gets these checks from cffi; the numpy backend must make them
itself, or ``int("a")`` and ``bool("x")`` would let through what C cannot
take. Messages follow the npu backend's: ``"<C function>: <parameter> ..."``.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from ...errors import ArgumentOverflowError, describe

INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)


def c_int(value: Any, api: str, param: str, bounds: tuple[int, int] = INT64) -> int:
    """An integral value within ``bounds`` (int64 by default)."""
    if type(value) is int:  # the common case, without the ABC check's two Python calls
        number = value
    elif isinstance(value, numbers.Integral):
        number = int(value)
    else:
        raise TypeError(f"{api}: {param} must be an int, got {type(value).__name__} {describe(value)}")
    if not bounds[0] <= number <= bounds[1]:
        raise ArgumentOverflowError(f"{api}: {param} = {number} is outside [{bounds[0]}, {bounds[1]}]")
    return number


def c_ints(values: Any, api: str, param: str, bounds: tuple[int, int] = INT64) -> tuple[int, ...]:
    if not isinstance(values, Iterable) or isinstance(values, (str, bytes)):
        raise TypeError(f"{api}: {param} must be a sequence of ints, got {describe(values)}")
    return tuple(c_int(v, api, param, bounds) for v in values)


def c_floats(values: Any, api: str, param: str) -> tuple[float, ...]:
    """A sequence of C ``float`` values: real numbers, rounded to float32 as C stores them."""
    if not isinstance(values, Iterable) or isinstance(values, (str, bytes)):
        raise TypeError(f"{api}: {param} must be a sequence of floats, got {type(values).__name__}")
    found = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{api}: {param} must be a sequence of floats, got an item {type(v).__name__}")
        found.append(float(np.float32(v)))
    return tuple(found)


def c_size(value: Any, api: str, param: str) -> int:
    """A ``size_t`` / ``uint64_t``."""
    return c_int(value, api, param, UINT64)


def c_address(value: Any, api: str, param: str) -> int:
    """A ``void *`` given as an int address; None is NULL."""
    return 0 if value is None else c_int(value, api, param, UINT64)


def c_bool(value: Any, api: str, param: str) -> bool:
    """A C ``bool``: True, False, a NumPy bool, or 0 / 1."""
    if value is True or value is False or isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{api}: {param} must be a bool, got {describe(value)}")


def c_bools(values: Any, api: str, param: str) -> tuple[bool, ...]:
    if not isinstance(values, Iterable) or isinstance(values, (str, bytes)):
        raise TypeError(f"{api}: {param} must be a sequence of bools, got {describe(values)}")
    return tuple(c_bool(v, api, param) for v in values)

"""What the selftest knows of each operator, keyed by the operator table's Python name
(:func:`pyaclnn._optable.operators`): how to make its inputs, call it, compute it with the
reference kernels, and its cases (:class:`Case`: operator, dtype, parameters).

This module holds :class:`Case`, :class:`Operator`, the helpers every operator's inputs use
and the registry :data:`OPERATORS`; the knowledge of each operator is hand-written in a
module of its family (:mod:`pyaclnn.selftest.max_pool3d`,
:mod:`pyaclnn.selftest.grid_sampler3d`), which adds its entries to :data:`OPERATORS` when
:mod:`pyaclnn.selftest.references` imports it. Which operators exist is not hand-written:
:func:`pyaclnn.selftest.cases` assembles the matrix from these entries in table order and
refuses a table with an operator missing here (or one here the table does not have).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes as _dtypes
from .compare import TOLERANCES, Arrays, Outputs

__all__ = ["Case", "Operator", "OPERATORS"]

FP32, FP16, FP64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)


@dataclass(frozen=True)
class Case:
    """One check of one operator; inputs are seeded by the name.

    ``operator`` is the operator table's Python name ("max_pool3d_with_argmax",
    ...); ``params`` are the operator's arguments (and shapes).
    """

    name: str
    operator: str
    dtype: np.dtype
    params: Mapping[str, Any]
    exact: bool = False
    quick: bool = False

    @property
    def kind(self) -> str:
        """The operator's short label in the report: "max_pool3d fwd", "grid_sampler3d bwd", ..."""
        return OPERATORS[self.operator].kind

    @property
    def tolerance(self) -> float:
        return 0.0 if self.exact else TOLERANCES[self.dtype.name]

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def inputs(self) -> Arrays:
        """The case's inputs, the same on every call and machine."""
        return OPERATORS[self.operator].inputs(self, np.random.default_rng(self.seed))

    def call(self, backend: str, inputs: Arrays) -> Outputs:
        """The operator's outputs on ``backend``, by name."""
        return OPERATORS[self.operator].call(self, inputs, backend)

    def reference(self, inputs: Arrays) -> Outputs:
        """What the reference kernels compute from ``inputs``, in the operator's layout."""
        return OPERATORS[self.operator].reference(self, inputs)


@dataclass(frozen=True)
class Operator:
    """One operator as the selftest runs it; ``kind`` is its short label in the report."""

    kind: str
    inputs: Callable[[Case, np.random.Generator], Arrays]
    call: Callable[[Case, Arrays, str], Outputs]
    reference: Callable[[Case, Arrays], Outputs]
    #: The operator's cases, in report order; ``quick=True`` marks those of ``--quick``.
    cases: Callable[[], Sequence[Case]]


def random_array(
    rng: np.random.Generator, shape: Sequence[int], dtype: np.dtype, bounds: tuple[float, float] | None = None
) -> np.ndarray:
    """Standard normal values, or uniform in ``bounds``, rounded to float32 and then to ``dtype``."""
    values = rng.standard_normal(shape) if bounds is None else rng.uniform(*bounds, size=shape)
    return values.astype(np.float32).astype(dtype)


def bfloat16() -> Any:
    """bfloat16, looked up when the cases are made, not at import: it imports ml_dtypes."""
    return _dtypes.bfloat16


def non_contiguous(x: np.ndarray) -> np.ndarray:
    """``x`` as a strided view of a larger array (every other element along the last axis)."""
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype=x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


def ints(value: int | Sequence[int]) -> tuple[int, ...]:
    """A case's int-or-sequence parameter as a tuple (cases are ours: nothing to check)."""
    return (value,) if isinstance(value, int) else tuple(value)


#: By the table's Python name (pyaclnn._optable), filled by the operators' modules; the matrix
#: (pyaclnn.selftest.matrix) takes the cases in table order and checks that these are exactly
#: the table's operators.
OPERATORS: dict[str, Operator] = {}

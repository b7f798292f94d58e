"""The selftest matrix: :class:`Case`, the case makers of each operator, and :func:`cases`.

A case is data (operator, dtype, parameters); :mod:`pyaclnn.selftest.operators`
gives, per operator, how to make its inputs, call it, and compute it with the
reference kernels. :func:`cases` checks that the matrix covers exactly the
operators of the operator table, so a new operator cannot be skipped silently.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _optable
from .. import dtypes as _dtypes
from . import operators as _ops
from .compare import TOLERANCES, Arrays, Outputs

__all__ = ["Case", "cases", "check_coverage"]

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
        return _ops.OPERATORS[self.operator].kind

    @property
    def tolerance(self) -> float:
        return 0.0 if self.exact else TOLERANCES[self.dtype.name]

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def inputs(self) -> Arrays:
        """The case's inputs, the same on every call and machine."""
        return _ops.OPERATORS[self.operator].inputs(self, np.random.default_rng(self.seed))

    def call(self, backend: str, inputs: Arrays) -> Outputs:
        """The operator's outputs on ``backend``, by name."""
        return _ops.OPERATORS[self.operator].call(self, inputs, backend)

    def reference(self, inputs: Arrays) -> Outputs:
        """What the reference kernels compute from ``inputs``, in the operator's layout."""
        return _ops.OPERATORS[self.operator].reference(self, inputs)


# -- case makers --------------------------------------------------------------------


def _pool_case(
    operator: str,
    name: str,
    dtype: np.dtype,
    shape: Sequence[int],
    kernel: Any,
    stride: Any = (),
    padding: Any = 0,
    ceil_mode: bool = False,
    *,
    strided: bool = False,
    indices_dtype: Any = np.int32,
    quick: bool = False,
) -> Case:
    """A max-pool case; the forward's values and indices must match exactly."""
    params = dict(
        shape=tuple(shape),
        kernel=kernel,
        stride=stride,
        padding=padding,
        ceil_mode=ceil_mode,
        strided=strided,
        indices_dtype=np.dtype(indices_dtype),
    )
    exact = operator == "max_pool3d_with_argmax"
    return Case(name, operator, np.dtype(dtype), params, exact=exact, quick=quick)


def _pool_forward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _pool_case("max_pool3d_with_argmax", name, *args, **kwargs)


def _pool_backward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _pool_case("max_pool3d_with_argmax_backward", name, *args, **kwargs)


def _grid_case(
    operator: str,
    name: str,
    dtype: np.dtype,
    interpolation: str,
    padding: str,
    align_corners: bool,
    *,
    in_shape: Sequence[int] = (2, 3, 5, 6, 7),
    out_spatial: Sequence[int] = (4, 5, 6),
    layout: str = "NCDHW",
    strided: bool = False,
    output_mask: tuple[bool, bool] = (True, True),
    quick: bool = False,
) -> Case:
    params = dict(
        interpolation=interpolation,
        padding=padding,
        align_corners=align_corners,
        in_shape=tuple(in_shape),
        out_spatial=tuple(out_spatial),
        layout=layout,
        strided=strided,
        output_mask=tuple(output_mask),
    )
    return Case(name, operator, np.dtype(dtype), params, quick=quick)


def _grid_forward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _grid_case("grid_sampler3d", name, *args, **kwargs)


def _grid_backward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _grid_case("grid_sampler3d_backward", name, *args, **kwargs)


# -- the matrix ---------------------------------------------------------------------


def check_coverage(matrix: Sequence[Case]) -> None:
    """Raise LookupError unless ``matrix`` and :mod:`~pyaclnn.selftest.operators` cover exactly
    the operators of the operator table, each with a case and a ``--quick`` case."""
    table = {spec.python_name: spec.name for spec in _optable.operators()}
    where = f"the operator table (include/decl/{_optable.DECL_FILE})"
    problems = [
        f"{c_name} ({name}) is in {where}, but selftest has no inputs, call and reference for it "
        "(pyaclnn/selftest/operators.py)"
        for name, c_name in table.items()
        if name not in _ops.OPERATORS
    ]
    problems += [
        f"{name} is in pyaclnn/selftest/operators.py but not in {where}"
        for name in _ops.OPERATORS
        if name not in table
    ]
    for name, c_name in table.items():
        if name not in _ops.OPERATORS:
            continue
        own = [c for c in matrix if c.operator == name]
        if not own:
            problems.append(f"{c_name} ({name}) has no case in the matrix (pyaclnn/selftest/matrix.py)")
        elif not any(c.quick for c in own):
            problems.append(f"{c_name} ({name}) has no --quick case (pyaclnn/selftest/matrix.py)")
    problems += [
        f"case {c.name!r}: unknown operator {c.operator!r}" for c in matrix if c.operator not in table
    ]
    if problems:
        raise LookupError("the selftest does not cover the operators:\n  " + "\n  ".join(problems))


def cases() -> list[Case]:
    """The selftest matrix; ``quick=True`` marks the subset of ``--quick``.

    Raises
    ------
    LookupError
        When the matrix does not cover the operator table (:func:`check_coverage`).
    """
    BF16 = _dtypes.bfloat16  # looked up here, not at import: it imports ml_dtypes
    matrix = [
        _pool_forward_case("max_pool3d fwd k2 s2", FP32, (2, 3, 8, 8, 8), 2, quick=True),
        _pool_forward_case(
            "max_pool3d fwd k3 s2 p1 ceil_mode", FP16, (1, 4, 7, 6, 9), 3, 2, 1, True, quick=True
        ),
        _pool_forward_case(
            "max_pool3d fwd k(3,2,2) s(2,1,2) p(1,1,0)",
            BF16,
            (2, 2, 6, 7, 8),
            (3, 2, 2),
            (2, 1, 2),
            (1, 1, 0),
        ),
        _pool_forward_case("max_pool3d fwd 4-D (C,D,H,W) stride 1", FP32, (3, 5, 5, 5), 2, 1),
        _pool_forward_case(
            "max_pool3d fwd non-contiguous input", FP32, (2, 2, 6, 6, 6), 3, 2, 1, strided=True
        ),
        _pool_forward_case("max_pool3d fwd int64 indices", FP32, (1, 2, 6, 6, 6), 2, indices_dtype=np.int64),
        _pool_forward_case("max_pool3d fwd larger k3 s2 p1", FP32, (2, 16, 16, 24, 24), 3, 2, 1),
        _pool_backward_case(
            "max_pool3d bwd k3 s2 p1 (overlapping)", FP32, (2, 3, 7, 7, 7), 3, 2, 1, quick=True
        ),
        _pool_backward_case("max_pool3d bwd k2 ceil_mode", FP16, (1, 4, 7, 5, 9), 2, 2, 0, True),
        _pool_backward_case("max_pool3d bwd k3 s1 p1", BF16, (1, 3, 6, 6, 6), 3, 1, 1),
        _pool_backward_case(
            "max_pool3d bwd non-contiguous grad_output", FP32, (2, 2, 6, 6, 6), 2, strided=True
        ),
        _grid_forward_case("grid_sampler3d fwd bilinear zeros", FP32, "bilinear", "zeros", False, quick=True),
        _grid_forward_case("grid_sampler3d fwd nearest border align", FP32, "nearest", "border", True),
        _grid_forward_case("grid_sampler3d fwd bilinear reflection", FP16, "bilinear", "reflection", False),
        _grid_forward_case("grid_sampler3d fwd bilinear zeros align", BF16, "bilinear", "zeros", True),
        _grid_forward_case("grid_sampler3d fwd bilinear border", FP64, "bilinear", "border", False),
        _grid_forward_case("grid_sampler3d fwd NDHWC", FP32, "bilinear", "zeros", False, layout="NDHWC"),
        _grid_forward_case(
            "grid_sampler3d fwd non-contiguous input", FP32, "bilinear", "reflection", True, strided=True
        ),
        _grid_backward_case(
            "grid_sampler3d bwd bilinear zeros", FP32, "bilinear", "zeros", False, quick=True
        ),
        _grid_backward_case(
            "grid_sampler3d bwd nearest reflection align", FP32, "nearest", "reflection", True
        ),
        _grid_backward_case("grid_sampler3d bwd bilinear border", FP16, "bilinear", "border", False),
        _grid_backward_case("grid_sampler3d bwd bilinear zeros align", BF16, "bilinear", "zeros", True),
        _grid_backward_case("grid_sampler3d bwd bilinear reflection", FP64, "bilinear", "reflection", False),
        _grid_backward_case("grid_sampler3d bwd NDHWC", FP32, "bilinear", "border", True, layout="NDHWC"),
        _grid_backward_case(
            "grid_sampler3d bwd mask (True, False)",
            FP32,
            "bilinear",
            "zeros",
            False,
            output_mask=(True, False),
        ),
        _grid_backward_case(
            "grid_sampler3d bwd non-contiguous input", FP32, "bilinear", "zeros", True, strided=True
        ),
        _grid_backward_case(
            "grid_sampler3d bwd larger",
            FP32,
            "bilinear",
            "zeros",
            False,
            in_shape=(2, 8, 12, 14, 16),
            out_spatial=(8, 10, 12),
        ),
    ]
    check_coverage(matrix)
    return matrix

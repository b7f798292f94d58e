"""What the selftest knows of each operator, keyed by the operator table's Python name
(:func:`pyaclnn._optable.operators`): how to make its inputs, call it, compute it with the
reference kernels, and its cases (:class:`Case`: operator, dtype, parameters).

This knowledge is hand-written, one section and one :data:`OPERATORS` entry per operator;
which operators exist is not. :func:`pyaclnn.selftest.cases` assembles the matrix from
these entries in table order and refuses a table with an operator missing here (or one
here the table does not have).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes as _dtypes
from .. import functional as F
from ..kernels import checks as _checks
from . import references as _ref
from .compare import TOLERANCES, Arrays, Outputs

__all__ = ["Case", "Operator", "OPERATORS", "pool_params"]

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


def _random(
    rng: np.random.Generator, shape: Sequence[int], dtype: np.dtype, bounds: tuple[float, float] | None = None
) -> np.ndarray:
    """Standard normal values, or uniform in ``bounds``, rounded to float32 and then to ``dtype``."""
    values = rng.standard_normal(shape) if bounds is None else rng.uniform(*bounds, size=shape)
    return values.astype(np.float32).astype(dtype)


def _bfloat16() -> Any:
    """bfloat16, looked up when the cases are made, not at import: it imports ml_dtypes."""
    return _dtypes.bfloat16


def _non_contiguous(x: np.ndarray) -> np.ndarray:
    """``x`` as a strided view of a larger array (every other element along the last axis)."""
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype=x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


def _ints(value: int | Sequence[int]) -> tuple[int, ...]:
    """A case's int-or-sequence parameter as a tuple (cases are ours: nothing to check)."""
    return (value,) if isinstance(value, int) else tuple(value)


def pool_params(case: Case) -> _checks.PoolParams:
    """The pooling parameters of a max-pool case as its plan has them (3 values each, stride () expanded)."""
    p = case.params
    kernel, stride, padding = (_ints(p[name]) for name in ("kernel", "stride", "padding"))
    return _checks.pool_params(kernel, stride, padding, (1,), p["ceil_mode"])


def _pool_options(case: Case) -> dict[str, Any]:
    """The functional call's pooling arguments, as the case gives them."""
    p = case.params
    return dict(kernel_size=p["kernel"], stride=p["stride"], padding=p["padding"], ceil_mode=p["ceil_mode"])


# -- max_pool3d_with_argmax and its backward: their case maker ---------------------


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


# -- max_pool3d_with_argmax -------------------------------------------------------


def _pool_forward_inputs(case: Case, rng: np.random.Generator) -> Arrays:
    x = _random(rng, case.params["shape"], case.dtype)
    return {"x": _non_contiguous(x) if case.params["strided"] else x}


def _pool_forward_call(case: Case, inputs: Arrays, backend: str) -> Outputs:
    out, indices = F.max_pool3d_with_argmax(
        inputs["x"], **_pool_options(case), indices_dtype=case.params["indices_dtype"], backend=backend
    )
    return {"out": out, "indices": indices}


def _pool_forward_reference(case: Case, inputs: Arrays) -> Outputs:
    x = inputs["x"]
    out, indices = _ref.reference_max_pool3d_with_argmax(x if x.ndim == 5 else x[None], pool_params(case))
    if x.ndim == 4:
        out, indices = out[0], indices[0]
    return {"out": out, "indices": indices.astype(case.params["indices_dtype"])}


def _pool_forward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _pool_case("max_pool3d_with_argmax", name, *args, **kwargs)


def _pool_forward_cases() -> list[Case]:
    """The cases of max_pool3d_with_argmax."""
    BF16 = _bfloat16()
    return [
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
    ]


# -- max_pool3d_with_argmax_backward ----------------------------------------------


def _pool_backward_inputs(case: Case, rng: np.random.Generator) -> Arrays:
    x = _random(rng, case.params["shape"], case.dtype)
    # The indices come from the reference forward: this case checks the backward alone.
    _, indices = _ref.reference_max_pool3d_with_argmax(x, pool_params(case))
    grad_output = _random(rng, indices.shape, case.dtype)
    if case.params["strided"]:
        grad_output = _non_contiguous(grad_output)
    return {"x": x, "indices": indices, "grad_output": grad_output}


def _pool_backward_call(case: Case, inputs: Arrays, backend: str) -> Outputs:
    got = F.max_pool3d_with_argmax_backward(
        inputs["grad_output"], inputs["x"], inputs["indices"], **_pool_options(case), backend=backend
    )
    return {"grad_input": got}


def _pool_backward_reference(case: Case, inputs: Arrays) -> Outputs:
    return {
        "grad_input": _ref.reference_max_pool3d_with_argmax_backward(
            inputs["grad_output"], inputs["indices"], inputs["x"].shape
        )
    }


def _pool_backward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _pool_case("max_pool3d_with_argmax_backward", name, *args, **kwargs)


def _pool_backward_cases() -> list[Case]:
    """The cases of max_pool3d_with_argmax_backward."""
    BF16 = _bfloat16()
    return [
        _pool_backward_case(
            "max_pool3d bwd k3 s2 p1 (overlapping)", FP32, (2, 3, 7, 7, 7), 3, 2, 1, quick=True
        ),
        _pool_backward_case("max_pool3d bwd k2 ceil_mode", FP16, (1, 4, 7, 5, 9), 2, 2, 0, True),
        _pool_backward_case("max_pool3d bwd k3 s1 p1", BF16, (1, 3, 6, 6, 6), 3, 1, 1),
        _pool_backward_case(
            "max_pool3d bwd non-contiguous grad_output", FP32, (2, 2, 6, 6, 6), 2, strided=True
        ),
    ]


# -- grid_sampler3d and grid_sampler3d_backward -----------------------------------


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


def _grid_inputs(case: Case, rng: np.random.Generator) -> Arrays:
    """x (N, C, D, H, W), grid reaching beyond [-1, 1], and grad_output for the backward.

    The arrays are NCDHW; :func:`_to_layout` gives the operator its layout.
    """
    p = case.params
    x = _random(rng, p["in_shape"], case.dtype)
    if p["strided"]:
        x = _non_contiguous(x)
    arrays = {
        "x": x,
        "grid": _random(rng, (p["in_shape"][0], *p["out_spatial"], 3), case.dtype, (-1.15, 1.15)),
    }
    if case.operator == "grid_sampler3d_backward":
        arrays["grad_output"] = _random(
            rng, (p["in_shape"][0], p["in_shape"][1], *p["out_spatial"]), case.dtype
        )
    return arrays


def _to_layout(a: np.ndarray | None, layout: str) -> np.ndarray | None:
    return np.moveaxis(a, 1, -1) if a is not None and layout == "NDHWC" else a


def _grid_options(case: Case) -> dict[str, Any]:
    """The functional call's sampling arguments, as the case gives them."""
    p = case.params
    return dict(
        interpolation_mode=p["interpolation"],
        padding_mode=p["padding"],
        align_corners=p["align_corners"],
        layout=p["layout"],
    )


def _grid_forward_call(case: Case, inputs: Arrays, backend: str) -> Outputs:
    p = case.params
    x = inputs["x"]
    x_op = np.ascontiguousarray(np.moveaxis(x, 1, -1)) if p["layout"] == "NDHWC" else x
    out = F.grid_sampler3d(x_op, inputs["grid"], **_grid_options(case), backend=backend)
    return {"out": out}


def _grid_forward_reference(case: Case, inputs: Arrays) -> Outputs:
    p = case.params
    out = _ref.reference_grid_sampler3d(
        inputs["x"],
        inputs["grid"],
        _ref.MODES[p["interpolation"]],
        _ref.PADDINGS[p["padding"]],
        p["align_corners"],
    )
    return {"out": _to_layout(out, p["layout"])}


def _grid_forward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _grid_case("grid_sampler3d", name, *args, **kwargs)


def _grid_forward_cases() -> list[Case]:
    """The cases of grid_sampler3d."""
    BF16 = _bfloat16()
    return [
        _grid_forward_case("grid_sampler3d fwd bilinear zeros", FP32, "bilinear", "zeros", False, quick=True),
        _grid_forward_case("grid_sampler3d fwd nearest border align", FP32, "nearest", "border", True),
        _grid_forward_case("grid_sampler3d fwd bilinear reflection", FP16, "bilinear", "reflection", False),
        _grid_forward_case("grid_sampler3d fwd bilinear zeros align", BF16, "bilinear", "zeros", True),
        _grid_forward_case("grid_sampler3d fwd bilinear border", FP64, "bilinear", "border", False),
        _grid_forward_case("grid_sampler3d fwd NDHWC", FP32, "bilinear", "zeros", False, layout="NDHWC"),
        _grid_forward_case(
            "grid_sampler3d fwd non-contiguous input", FP32, "bilinear", "reflection", True, strided=True
        ),
    ]


def _grid_backward_call(case: Case, inputs: Arrays, backend: str) -> Outputs:
    p = case.params
    x, grad_output = inputs["x"], inputs["grad_output"]
    if p["layout"] == "NDHWC":
        x, grad_output = np.ascontiguousarray(np.moveaxis(x, 1, -1)), np.moveaxis(grad_output, 1, -1)
    input_grad, grid_grad = F.grid_sampler3d_backward(
        grad_output, x, inputs["grid"], **_grid_options(case), output_mask=p["output_mask"], backend=backend
    )
    return {"input_grad": input_grad, "grid_grad": grid_grad}


def _grid_backward_reference(case: Case, inputs: Arrays) -> Outputs:
    p = case.params
    input_grad, grid_grad = _ref.reference_grid_sampler3d_backward(
        inputs["grad_output"],
        inputs["x"],
        inputs["grid"],
        _ref.MODES[p["interpolation"]],
        _ref.PADDINGS[p["padding"]],
        p["align_corners"],
        p["output_mask"],
    )
    return {"input_grad": _to_layout(input_grad, p["layout"]), "grid_grad": grid_grad}


def _grid_backward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _grid_case("grid_sampler3d_backward", name, *args, **kwargs)


def _grid_backward_cases() -> list[Case]:
    """The cases of grid_sampler3d_backward."""
    BF16 = _bfloat16()
    return [
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


#: By the table's Python name (pyaclnn._optable); the matrix (pyaclnn.selftest.matrix) takes the
#: cases in table order and checks that these are exactly the table's operators.
OPERATORS: dict[str, Operator] = {
    "max_pool3d_with_argmax": Operator(
        "max_pool3d fwd",
        _pool_forward_inputs,
        _pool_forward_call,
        _pool_forward_reference,
        _pool_forward_cases,
    ),
    "max_pool3d_with_argmax_backward": Operator(
        "max_pool3d bwd",
        _pool_backward_inputs,
        _pool_backward_call,
        _pool_backward_reference,
        _pool_backward_cases,
    ),
    "grid_sampler3d": Operator(
        "grid_sampler3d fwd", _grid_inputs, _grid_forward_call, _grid_forward_reference, _grid_forward_cases
    ),
    "grid_sampler3d_backward": Operator(
        "grid_sampler3d bwd",
        _grid_inputs,
        _grid_backward_call,
        _grid_backward_reference,
        _grid_backward_cases,
    ),
}

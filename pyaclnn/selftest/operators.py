"""What the selftest knows of each operator: how to make its inputs, call it, and compute it
with the reference kernels, keyed by the operator table's Python name
(:func:`pyaclnn._optable.operators`).

This knowledge is hand-written; which operators exist is not. :func:`pyaclnn.selftest.cases`
refuses a table with an operator missing here (or one here the table does not have).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import functional as F
from ..kernels import checks as _checks
from . import references as _ref
from .compare import Arrays, Outputs

if TYPE_CHECKING:
    from .matrix import Case

__all__ = ["Operator", "OPERATORS", "pool_params"]


@dataclass(frozen=True)
class Operator:
    """One operator as the selftest runs it; ``kind`` is its short label in the report."""

    kind: str
    inputs: Callable[[Case, np.random.Generator], Arrays]
    call: Callable[[Case, Arrays, str], Outputs]
    reference: Callable[[Case, Arrays], Outputs]


def _random(
    rng: np.random.Generator, shape: Sequence[int], dtype: np.dtype, bounds: tuple[float, float] | None = None
) -> np.ndarray:
    """Standard normal values, or uniform in ``bounds``, rounded to float32 and then to ``dtype``."""
    values = rng.standard_normal(shape) if bounds is None else rng.uniform(*bounds, size=shape)
    return values.astype(np.float32).astype(dtype)


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


# -- grid_sampler3d and grid_sampler3d_backward -----------------------------------


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


#: By the table's Python name (pyaclnn._optable); the matrix (pyaclnn.selftest.matrix) checks
#: that these are exactly the table's operators.
OPERATORS: dict[str, Operator] = {
    "max_pool3d_with_argmax": Operator(
        "max_pool3d fwd", _pool_forward_inputs, _pool_forward_call, _pool_forward_reference
    ),
    "max_pool3d_with_argmax_backward": Operator(
        "max_pool3d bwd", _pool_backward_inputs, _pool_backward_call, _pool_backward_reference
    ),
    "grid_sampler3d": Operator(
        "grid_sampler3d fwd", _grid_inputs, _grid_forward_call, _grid_forward_reference
    ),
    "grid_sampler3d_backward": Operator(
        "grid_sampler3d bwd", _grid_inputs, _grid_backward_call, _grid_backward_reference
    ),
}

"""The selftest of grid_sampler3d and its backward: the reference kernels on host arrays, and
each operator's inputs, call, reference and cases, registered in
:data:`pyaclnn.selftest.operators.OPERATORS`.

The references are module-level functions, looked up at call time, so a test can replace
one (``monkeypatch.setattr(pyaclnn.selftest.grid_sampler3d, ...)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import functional as F
from ..kernels import grid_sampler3d as _grid
from .compare import Arrays, Outputs
from .operators import FP16, FP32, FP64, OPERATORS, Case, Operator, bfloat16, non_contiguous, random_array

__all__ = ["MODES", "PADDINGS", "reference_grid_sampler3d", "reference_grid_sampler3d_backward"]

#: The functional API's sampling names -> the kernels' codes.
MODES = {"bilinear": _grid.BILINEAR, "nearest": _grid.NEAREST}
PADDINGS = {"zeros": _grid.ZEROS, "border": _grid.BORDER, "reflection": _grid.REFLECTION}


def reference_grid_sampler3d(
    x: np.ndarray, grid: np.ndarray, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> np.ndarray:
    """Sampled ``x`` (N, C, D, H, W) at ``grid`` by :mod:`pyaclnn.kernels.grid_sampler3d`."""
    out = np.empty(x.shape[:2] + grid.shape[1:4], dtype=x.dtype)
    _grid.grid_sampler3d(x, grid, interpolation_mode, padding_mode, align_corners, out)
    return out


def reference_grid_sampler3d_backward(
    grad_output: np.ndarray,
    x: np.ndarray,
    grid: np.ndarray,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
    output_mask: Sequence[bool],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(input_grad, grid_grad), None where the mask is False, by :mod:`pyaclnn.kernels.grid_sampler3d`."""
    input_grad = np.empty(x.shape, dtype=x.dtype) if output_mask[0] else None
    grid_grad = np.empty(grid.shape, dtype=x.dtype) if output_mask[1] else None
    _grid.grid_sampler3d_backward(
        grad_output, x, grid, interpolation_mode, padding_mode, align_corners, input_grad, grid_grad
    )
    return input_grad, grid_grad


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
    x = random_array(rng, p["in_shape"], case.dtype)
    if p["strided"]:
        x = non_contiguous(x)
    arrays = {
        "x": x,
        "grid": random_array(rng, (p["in_shape"][0], *p["out_spatial"], 3), case.dtype, (-1.15, 1.15)),
    }
    if case.operator == "grid_sampler3d_backward":
        arrays["grad_output"] = random_array(
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
    out = reference_grid_sampler3d(
        inputs["x"],
        inputs["grid"],
        MODES[p["interpolation"]],
        PADDINGS[p["padding"]],
        p["align_corners"],
    )
    return {"out": _to_layout(out, p["layout"])}


def _grid_forward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _grid_case("grid_sampler3d", name, *args, **kwargs)


def _grid_forward_cases() -> list[Case]:
    """The cases of grid_sampler3d."""
    BF16 = bfloat16()
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
    input_grad, grid_grad = reference_grid_sampler3d_backward(
        inputs["grad_output"],
        inputs["x"],
        inputs["grid"],
        MODES[p["interpolation"]],
        PADDINGS[p["padding"]],
        p["align_corners"],
        p["output_mask"],
    )
    return {"input_grad": _to_layout(input_grad, p["layout"]), "grid_grad": grid_grad}


def _grid_backward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _grid_case("grid_sampler3d_backward", name, *args, **kwargs)


def _grid_backward_cases() -> list[Case]:
    """The cases of grid_sampler3d_backward."""
    BF16 = bfloat16()
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


OPERATORS["grid_sampler3d"] = Operator(
    "grid_sampler3d fwd", _grid_inputs, _grid_forward_call, _grid_forward_reference, _grid_forward_cases
)
OPERATORS["grid_sampler3d_backward"] = Operator(
    "grid_sampler3d bwd",
    _grid_inputs,
    _grid_backward_call,
    _grid_backward_reference,
    _grid_backward_cases,
)

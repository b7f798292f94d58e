"""The selftest of max_pool3d_with_argmax and its backward: the reference kernels on host
arrays, and each operator's inputs, call, reference and cases, registered in
:data:`pyaclnn.selftest.operators.OPERATORS`.

The references are module-level functions, looked up at call time, so a test can replace
one (``monkeypatch.setattr(pyaclnn.selftest.max_pool3d, ...)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import functional as F
from ..kernels import checks as _checks
from ..kernels import max_pool3d as _pool
from .compare import Arrays, Outputs
from .operators import FP16, FP32, OPERATORS, Case, Operator, bfloat16, ints, non_contiguous, random_array

__all__ = ["pool_params", "reference_max_pool3d_with_argmax", "reference_max_pool3d_with_argmax_backward"]


def reference_max_pool3d_with_argmax(x: np.ndarray, p: _checks.PoolParams) -> tuple[np.ndarray, np.ndarray]:
    """Pooled values and int32 indices of ``x`` (N, C, D, H, W) by :mod:`pyaclnn.kernels.max_pool3d`."""
    shape = x.shape[:2] + _checks.pooled_shape(x.shape[2:], p)
    out = np.empty(shape, dtype=x.dtype)
    indices = np.empty(shape, dtype=np.int32)
    _pool.max_pool3d_with_argmax(x, p.kernel_size, p.stride, p.padding, p.dilation, p.ceil_mode, out, indices)
    return out, indices


def reference_max_pool3d_with_argmax_backward(
    grad_output: np.ndarray, indices: np.ndarray, input_shape: Sequence[int]
) -> np.ndarray:
    """grad_input of shape ``input_shape`` (N, C, D, H, W) by :mod:`pyaclnn.kernels.max_pool3d`."""
    grad_input = np.empty(tuple(input_shape), dtype=grad_output.dtype)
    _pool.max_pool3d_with_argmax_backward(grad_output, indices, grad_input)
    return grad_input


def pool_params(case: Case) -> _checks.PoolParams:
    """The pooling parameters of a max-pool case as its plan has them (3 values each, stride () expanded)."""
    p = case.params
    kernel, stride, padding = (ints(p[name]) for name in ("kernel", "stride", "padding"))
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
    x = random_array(rng, case.params["shape"], case.dtype)
    return {"x": non_contiguous(x) if case.params["strided"] else x}


def _pool_forward_call(case: Case, inputs: Arrays, backend: str) -> Outputs:
    out, indices = F.max_pool3d_with_argmax(
        inputs["x"], **_pool_options(case), indices_dtype=case.params["indices_dtype"], backend=backend
    )
    return {"out": out, "indices": indices}


def _pool_forward_reference(case: Case, inputs: Arrays) -> Outputs:
    x = inputs["x"]
    out, indices = reference_max_pool3d_with_argmax(x if x.ndim == 5 else x[None], pool_params(case))
    if x.ndim == 4:
        out, indices = out[0], indices[0]
    return {"out": out, "indices": indices.astype(case.params["indices_dtype"])}


def _pool_forward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _pool_case("max_pool3d_with_argmax", name, *args, **kwargs)


def _pool_forward_cases() -> list[Case]:
    """The cases of max_pool3d_with_argmax."""
    BF16 = bfloat16()
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
    x = random_array(rng, case.params["shape"], case.dtype)
    # The indices come from the reference forward: this case checks the backward alone.
    _, indices = reference_max_pool3d_with_argmax(x, pool_params(case))
    grad_output = random_array(rng, indices.shape, case.dtype)
    if case.params["strided"]:
        grad_output = non_contiguous(grad_output)
    return {"x": x, "indices": indices, "grad_output": grad_output}


def _pool_backward_call(case: Case, inputs: Arrays, backend: str) -> Outputs:
    got = F.max_pool3d_with_argmax_backward(
        inputs["grad_output"], inputs["x"], inputs["indices"], **_pool_options(case), backend=backend
    )
    return {"grad_input": got}


def _pool_backward_reference(case: Case, inputs: Arrays) -> Outputs:
    return {
        "grad_input": reference_max_pool3d_with_argmax_backward(
            inputs["grad_output"], inputs["indices"], inputs["x"].shape
        )
    }


def _pool_backward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _pool_case("max_pool3d_with_argmax_backward", name, *args, **kwargs)


def _pool_backward_cases() -> list[Case]:
    """The cases of max_pool3d_with_argmax_backward."""
    BF16 = bfloat16()
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


OPERATORS["max_pool3d_with_argmax"] = Operator(
    "max_pool3d fwd",
    _pool_forward_inputs,
    _pool_forward_call,
    _pool_forward_reference,
    _pool_forward_cases,
)
OPERATORS["max_pool3d_with_argmax_backward"] = Operator(
    "max_pool3d bwd",
    _pool_backward_inputs,
    _pool_backward_call,
    _pool_backward_reference,
    _pool_backward_cases,
)

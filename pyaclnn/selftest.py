"""``python -m pyaclnn selftest``: the four operators on a backend against the NumPy reference
kernels and against golden outputs of PyTorch.

Every case builds seeded random inputs, runs one operator through the
functional API on the chosen backend (the NPU, or the numpy backend), and
compares the result twice:

- with the same math run on the host by the reference kernels of
  :mod:`pyaclnn.kernels`, called directly as the numpy backend calls them
  (what an NPU is checked against);
- with golden outputs PyTorch CPU computed once from the same inputs,
  shipped as package data (``selftest_golden.npz``, made by
  ``scripts/make_selftest_golden.py``). On the numpy backend the first
  comparison is the kernels against themselves; this one is an independent
  oracle. Outputs larger than :data:`GOLDEN_MAX_ELEMENTS` are kept as every
  k-th element of the flattened array, to keep the file small.

Error measure: ``max |result - expected| / max |expected|`` (plain
``max |result - expected|`` when the expected values are all zero), computed
in float64. Tolerances, the same for both comparisons:

==================================  ======================================
max-pool forward (values, indices)  exact: identical values, 0 index mismatches
float64                             1e-12
float32                             1e-5
float16                             1e-3  (one fp16 ulp at the largest value is 9.8e-4)
bfloat16                            1e-2  (one bf16 ulp at the largest value is 7.8e-3)
==================================  ======================================

fp16/bf16 are computed in float32 and rounded once on every side, so the
expected values and a correct device differ by at most one rounding step.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, TextIO

import numpy as np

from . import backends as _backends
from . import dtypes as _dtypes
from . import functional as F
from .kernels import checks as _checks
from .kernels import grid_sampler3d as _grid
from .kernels import max_pool3d as _pool

__all__ = [
    "GOLDEN_FILE",
    "GOLDEN_MAX_ELEMENTS",
    "TOLERANCES",
    "Case",
    "CaseResult",
    "Comparison",
    "cases",
    "golden",
    "golden_sample",
    "inputs_digest",
    "run",
    "run_case",
    "main",
    "reference_max_pool3d_with_argmax",
    "reference_max_pool3d_with_argmax_backward",
    "reference_grid_sampler3d",
    "reference_grid_sampler3d_backward",
]

FP32, FP16, FP64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)

#: Largest accepted max |result - expected| / max |expected| per dtype name
#: (names, not dtypes: bfloat16's dtype needs ml_dtypes, imported only when cases() runs).
TOLERANCES: dict[str, float] = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-3, "bfloat16": 1e-2}

#: The golden outputs, package data next to this module.
GOLDEN_FILE = "selftest_golden.npz"
#: Outputs with more elements are stored as every k-th element (k = ceil(size / this)).
GOLDEN_MAX_ELEMENTS = 4096
_REGENERATE = "regenerate it with scripts/make_selftest_golden.py"

_MODES = {"bilinear": _grid.BILINEAR, "nearest": _grid.NEAREST}
_PADDINGS = {"zeros": _grid.ZEROS, "border": _grid.BORDER, "reflection": _grid.REFLECTION}

Arrays = dict[str, np.ndarray]
#: Outputs by name; None for one masked out. Any: what the operator returned, checked by the comparison.
Outputs = dict[str, Any]


# -- references: the kernels on host arrays ------------------------------------
# Module-level functions, looked up at call time, so a test can replace one.


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


# -- comparison ---------------------------------------------------------------


@dataclass
class Comparison:
    """Worst differences over the outputs of one case against one set of expected values."""

    error: float = 0.0  # max |got - expected| / max |expected|, over all outputs
    index_mismatches: int | None = None  # integer outputs (max-pool indices) only
    exact_mismatches: int | None = None  # values that differ, for exact cases
    notes: list[str] = field(default_factory=list)

    def fail(self, note: str) -> None:
        self.notes.append(note)
        self.error = float("inf")

    def add(self, name: str, got: Any, ref: np.ndarray | None, *, exact: bool = False) -> None:
        if ref is None:
            if got is not None:
                self.fail(f"{name}: expected None (masked out), got an array")
            return
        if got is None or np.shape(got) != ref.shape:
            self.fail(f"{name}: shape {None if got is None else np.shape(got)}, expected {ref.shape}")
            return
        got64 = np.asarray(got).astype(np.float64)
        ref64 = ref.astype(np.float64)
        if np.issubdtype(ref.dtype, np.integer):
            mismatches = int(np.count_nonzero(got64 != ref64))
            self.index_mismatches = (self.index_mismatches or 0) + mismatches
            return
        same_nan = np.isnan(got64) & np.isnan(ref64)
        diff = np.where(same_nan, 0.0, np.abs(got64 - ref64))
        worst = float(np.max(diff, initial=0.0))
        if np.isnan(worst) or np.any(np.isnan(got64) != np.isnan(ref64)):
            worst = float("inf")
        scale = float(np.max(np.abs(np.where(np.isnan(ref64), 0.0, ref64)), initial=0.0))
        self.error = max(self.error, worst / scale if scale > 0 else worst)
        if exact:
            self.exact_mismatches = (self.exact_mismatches or 0) + int(np.count_nonzero(diff))

    def within(self, tolerance: float) -> bool:
        return (
            self.error <= tolerance
            and not self.index_mismatches
            and not self.exact_mismatches
            and not self.notes
        )


# -- cases ----------------------------------------------------------------------
# A case is data (operator, dtype, parameters); the four operators each give how
# to make its inputs, call it, and compute it with the reference kernels.


@dataclass(frozen=True)
class Case:
    """One check of one operator; inputs are seeded by the name.

    ``params`` are the operator's arguments (and shapes); ``kind`` names the
    operator: "max_pool3d fwd", "max_pool3d bwd", "grid_sampler3d fwd" or
    "grid_sampler3d bwd".
    """

    name: str
    kind: str
    dtype: np.dtype
    params: Mapping[str, Any]
    exact: bool = False
    quick: bool = False

    @property
    def tolerance(self) -> float:
        return 0.0 if self.exact else TOLERANCES[self.dtype.name]

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def inputs(self) -> Arrays:
        """The case's inputs, the same on every call and machine."""
        return _OPERATORS[self.kind].inputs(self, np.random.default_rng(self.seed))

    def call(self, backend: str, inputs: Arrays) -> Outputs:
        """The operator's outputs on ``backend``, by name."""
        return _OPERATORS[self.kind].call(self, inputs, backend)

    def reference(self, inputs: Arrays) -> Outputs:
        """What the reference kernels compute from ``inputs``, in the operator's layout."""
        return _OPERATORS[self.kind].reference(self, inputs)


@dataclass(frozen=True)
class _Operator:
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


def pool_params(case: Case) -> _checks.PoolParams:
    """The pooling parameters of a max-pool case as its plan has them (3 values each, stride () expanded)."""
    p = case.params
    kernel, stride, padding = (F.int_tuple("", p[name]) for name in ("kernel", "stride", "padding"))
    return _checks.pool_params(kernel, stride, padding, (1,), p["ceil_mode"])


def _pool_options(case: Case) -> dict[str, Any]:
    """The functional call's pooling arguments, as the case gives them."""
    p = case.params
    return dict(kernel_size=p["kernel"], stride=p["stride"], padding=p["padding"], ceil_mode=p["ceil_mode"])


# max_pool3d forward


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
    out, indices = reference_max_pool3d_with_argmax(x if x.ndim == 5 else x[None], pool_params(case))
    if x.ndim == 4:
        out, indices = out[0], indices[0]
    return {"out": out, "indices": indices.astype(case.params["indices_dtype"])}


def _pool_case(
    kind: str,
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
    return Case(name, kind, np.dtype(dtype), params, exact=kind == "max_pool3d fwd", quick=quick)


def _pool_forward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _pool_case("max_pool3d fwd", name, *args, **kwargs)


def _pool_backward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _pool_case("max_pool3d bwd", name, *args, **kwargs)


# max_pool3d backward


def _pool_backward_inputs(case: Case, rng: np.random.Generator) -> Arrays:
    x = _random(rng, case.params["shape"], case.dtype)
    # The indices come from the reference forward: this case checks the backward alone.
    _, indices = reference_max_pool3d_with_argmax(x, pool_params(case))
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
        "grad_input": reference_max_pool3d_with_argmax_backward(
            inputs["grad_output"], inputs["indices"], inputs["x"].shape
        )
    }


# grid_sampler3d forward and backward


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
    if case.kind == "grid_sampler3d bwd":
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
    out = reference_grid_sampler3d(
        inputs["x"], inputs["grid"], _MODES[p["interpolation"]], _PADDINGS[p["padding"]], p["align_corners"]
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
    input_grad, grid_grad = reference_grid_sampler3d_backward(
        inputs["grad_output"],
        inputs["x"],
        inputs["grid"],
        _MODES[p["interpolation"]],
        _PADDINGS[p["padding"]],
        p["align_corners"],
        p["output_mask"],
    )
    return {"input_grad": _to_layout(input_grad, p["layout"]), "grid_grad": grid_grad}


def _grid_case(
    kind: str,
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
    return Case(name, kind, np.dtype(dtype), params, quick=quick)


def _grid_forward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _grid_case("grid_sampler3d fwd", name, *args, **kwargs)


def _grid_backward_case(name: str, *args: Any, **kwargs: Any) -> Case:
    return _grid_case("grid_sampler3d bwd", name, *args, **kwargs)


_OPERATORS: dict[str, _Operator] = {
    "max_pool3d fwd": _Operator(_pool_forward_inputs, _pool_forward_call, _pool_forward_reference),
    "max_pool3d bwd": _Operator(_pool_backward_inputs, _pool_backward_call, _pool_backward_reference),
    "grid_sampler3d fwd": _Operator(_grid_inputs, _grid_forward_call, _grid_forward_reference),
    "grid_sampler3d bwd": _Operator(_grid_inputs, _grid_backward_call, _grid_backward_reference),
}


def cases() -> list[Case]:
    """The selftest matrix; ``quick=True`` marks the subset of ``--quick``."""
    BF16 = _dtypes.bfloat16  # looked up here, not at import: it imports ml_dtypes
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


# -- golden outputs ---------------------------------------------------------------
# selftest_golden.npz holds, per case and output, "<case>::<output>" (the values,
# subsampled by golden_sample), "<case>::<output>::shape", and "<case>::inputs" (the
# inputs_digest they were made from, so changed inputs are told apart from a wrong kernel).


def golden_sample(a: np.ndarray) -> np.ndarray:
    """What the golden file keeps of an output: all of it, or every k-th element when large."""
    flat = np.asarray(a).reshape(-1)
    step = max(1, math.ceil(flat.size / GOLDEN_MAX_ELEMENTS))
    return flat[::step]


def inputs_digest(inputs: Arrays) -> int:
    """CRC-32 of the inputs' names, shapes, dtypes and values."""
    crc = 0
    for name in sorted(inputs):
        a = np.ascontiguousarray(inputs[name])
        crc = zlib.crc32(f"{name}{a.shape}{a.dtype.name}".encode(), crc)
        crc = zlib.crc32(a.view(np.uint8).reshape(-1).tobytes(), crc)
    return crc


@cache
def golden() -> Mapping[str, np.ndarray] | None:
    """The golden arrays by key, or None when the package data is missing."""
    try:
        with resources.files(__package__).joinpath(GOLDEN_FILE).open("rb") as f, np.load(f) as data:
            return {key: data[key] for key in data.files}
    except FileNotFoundError:
        return None


def _compare_golden(case: Case, inputs: Arrays, outputs: Outputs) -> Comparison:
    cmp = Comparison()
    table = golden()
    if table is None:
        cmp.fail(f"the golden outputs ({GOLDEN_FILE}) are missing from the package; {_REGENERATE}")
        return cmp
    digest = table.get(f"{case.name}::inputs")
    if digest is None:
        cmp.fail(f"no golden outputs for this case; {_REGENERATE}")
        return cmp
    if int(digest) != inputs_digest(inputs):
        cmp.fail(f"the golden outputs were made from other inputs; {_REGENERATE}")
        return cmp
    for name, got in outputs.items():
        expected = table.get(f"{case.name}::{name}")
        if expected is None:
            cmp.add(name, got, None)
            continue
        shape = tuple(int(n) for n in table[f"{case.name}::{name}::shape"])
        if got is None or np.shape(got) != shape:
            cmp.fail(f"{name}: shape {None if got is None else np.shape(got)}, expected {shape}")
            continue
        cmp.add(name, golden_sample(got), expected, exact=case.exact)
    return cmp


# -- running ----------------------------------------------------------------------


@dataclass
class CaseResult:
    """The outcome of one case: against the reference kernels and against the golden outputs."""

    case: Case
    passed: bool
    comparison: Comparison | None  # against the reference kernels
    error: str = ""  # the exception, when the case raised
    seconds: float = 0.0
    golden: Comparison | None = None  # against PyTorch's golden outputs

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: every number finite or null."""
        c = self.case
        return {
            "name": c.name,
            "operator": c.kind,
            "dtype": c.dtype.name,
            "exact": c.exact,
            "tolerance": c.tolerance,
            "passed": self.passed,
            "result": _verdict(self),
            "exception": self.error or None,
            "seconds": round(self.seconds, 6),
            "reference": _comparison_json(self.comparison),
            "golden": _comparison_json(self.golden),
        }


def _comparison_json(cmp: Comparison | None) -> dict[str, Any] | None:
    if cmp is None:
        return None
    return {
        "error": cmp.error if math.isfinite(cmp.error) else None,
        "index_mismatches": cmp.index_mismatches,
        "exact_mismatches": cmp.exact_mismatches,
        "notes": list(cmp.notes),
    }


def _check_dtypes(outputs: Outputs, expected: Outputs, cmp: Comparison) -> None:
    for name, got in outputs.items():
        ref = expected.get(name)
        if got is not None and ref is not None and np.dtype(got.dtype) != ref.dtype:
            cmp.fail(f"{name}: dtype {got.dtype}, expected {ref.dtype}")


def _compare(case: Case, outputs: Outputs, expected: Outputs) -> Comparison:
    cmp = Comparison()
    for name, ref in expected.items():
        cmp.add(name, outputs.get(name), ref, exact=case.exact)
    _check_dtypes(outputs, expected, cmp)
    return cmp


def run_case(case: Case, backend: str) -> CaseResult:
    """Run one case; an exception is a failure with its text."""
    start = time.perf_counter()
    try:
        inputs = case.inputs()
        outputs = case.call(backend, inputs)
        cmp = _compare(case, outputs, case.reference(inputs))
        golden_cmp = _compare_golden(case, inputs, outputs)
    except Exception as exc:  # report and go on with the other cases
        detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return CaseResult(case, False, None, detail, time.perf_counter() - start)
    passed = cmp.within(case.tolerance) and golden_cmp.within(case.tolerance)
    return CaseResult(case, passed, cmp, seconds=time.perf_counter() - start, golden=golden_cmp)


def _format_error(value: float) -> str:
    return "0" if value == 0 else f"{value:.2e}"


def _verdict(r: CaseResult) -> str:
    return "ERROR" if r.comparison is None else "PASS" if r.passed else "FAIL"


def _details(r: CaseResult) -> list[str]:
    """Lines explaining a failure: the exception, or what differed from which expected values."""
    if r.comparison is None:
        return [f"  {r.case.name}: {r.error}"]
    lines = []
    for label, cmp in (("reference", r.comparison), ("torch golden", r.golden)):
        if cmp is None:
            continue
        if cmp.exact_mismatches:
            lines.append(f"  {r.case.name}: vs {label}: {cmp.exact_mismatches} value(s) differ")
        if cmp.index_mismatches:
            lines.append(f"  {r.case.name}: vs {label}: {cmp.index_mismatches} index mismatch(es)")
        lines.extend(f"  {r.case.name}: vs {label}: {note}" for note in cmp.notes)
    return lines


def format_table(results: Sequence[CaseResult]) -> str:
    """The pass/fail table, one row per case, then what went wrong."""
    rows = [("case", "dtype", "err vs ref", "err vs torch", "tolerance", "index mism.", "result")]
    for r in results:
        c, cmp, gold = r.case, r.comparison, r.golden
        tol = "exact" if c.exact else f"{c.tolerance:g}"
        if cmp is None:
            rows.append((c.name, str(c.dtype), "-", "-", tol, "-", "ERROR"))
            continue
        mism = "-" if cmp.index_mismatches is None else str(cmp.index_mismatches)
        gold_error = "-" if gold is None else _format_error(gold.error)
        rows.append((c.name, str(c.dtype), _format_error(cmp.error), gold_error, tol, mism, _verdict(r)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + [line for r in results for line in _details(r)])


def _short_reason(reason: str) -> str:
    """The selection reason in one short line; ``info`` gives the whole library search."""
    lines = reason.splitlines()
    if len(lines) <= 1:
        return reason
    return lines[0].split(". ")[0].rstrip(".:") + "; `python -m pyaclnn info` shows where it looked"


def _select(quick: bool, pattern: str | None) -> list[Case]:
    return [c for c in cases() if (c.quick or not quick) and (pattern is None or pattern in c.name)]


def run(
    backend: str | None = None,
    quick: bool = False,
    pattern: str | None = None,
    out: TextIO | None = None,
    as_json: bool = False,
) -> int:
    """Run the matrix on ``backend`` (None: the active one) and report; 0 if every case passes.

    Parameters
    ----------
    backend : {"numpy", "npu"}, optional
        The backend under test.
    quick : bool
        Only the cases marked quick (one or two per operator).
    pattern : str, optional
        Only the cases whose name contains it.
    out : file, optional
        Where to print (sys.stdout by default).
    as_json : bool
        Print one JSON object (backend, counts, every case with its errors and
        tolerance) instead of the table.

    Returns
    -------
    int
        0 when all selected cases pass, 1 otherwise (also when none is
        selected, or the backend cannot be used).
    """
    out = out or sys.stdout
    report: dict[str, Any] = {
        "backend": backend,
        "reason": f"--backend {backend}" if backend else None,
        "usable": True,
        "problem": None,
    }
    try:
        name = backend or _backends.active_name()
    except Exception as exc:  # PYACLNN_BACKEND=bogus
        report.update(usable=False, problem=f"no backend can be selected: {exc}")
        return _finish(report, [], out, as_json)
    report.update(backend=name, reason=report["reason"] or _backends.selection_reason())
    try:
        _backends.get(name)
    except Exception as exc:  # e.g. npu asked for where CANN cannot load
        report.update(usable=False, problem=f"backend {name!r} is not usable: {exc}")
        return _finish(report, [], out, as_json)
    selected = _select(quick, pattern)
    if not as_json:
        print(
            f"pyaclnn selftest on backend {name!r} ({_short_reason(report['reason'])}): "
            f"{len(selected)} case(s)",
            file=out,
        )
    if not selected:
        report["problem"] = "no case matches"
    return _finish(report, [run_case(c, name) for c in selected], out, as_json)


def _finish(report: dict[str, Any], results: list[CaseResult], out: TextIO, as_json: bool) -> int:
    """Print the results (JSON or table and summary); the exit status."""
    failed = sum(not r.passed for r in results)
    seconds = sum(r.seconds for r in results)
    report.update(
        passed=len(results) - failed,
        failed=failed,
        seconds=round(seconds, 6),
        golden_file=GOLDEN_FILE,
        cases=[r.to_json() for r in results],
    )
    if as_json:
        json.dump(report, out, indent=2, allow_nan=False)
        out.write("\n")
    elif report["problem"] is not None:
        print(f"pyaclnn selftest: {report['problem']}", file=out)
    else:
        print(format_table(results), file=out)
        print(f"{report['passed']} passed, {failed} failed in {seconds:.2f} s", file=out)
    return 1 if failed or report["problem"] is not None else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line of ``python -m pyaclnn selftest``."""
    parser = argparse.ArgumentParser(prog="python -m pyaclnn selftest", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args.backend, args.quick, args.k, as_json=args.json)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=_backends.BACKEND_NAMES, help="default: the active backend")
    parser.add_argument("--quick", action="store_true", help="one or two cases per operator")
    parser.add_argument("-k", metavar="TEXT", help="only the cases whose name contains TEXT")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON: every case with its errors and tolerance, and the counts",
    )

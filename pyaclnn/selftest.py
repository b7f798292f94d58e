"""``python -m pyaclnn selftest``: the four operators on a backend against the NumPy reference kernels.

Every case builds seeded random inputs, runs one operator through the
functional API on the chosen backend (the NPU, or the numpy backend), and runs
the same math on the host with the reference kernels of
:mod:`pyaclnn.kernels` called directly, as the numpy backend calls them. The
worst difference is reported per case.

Error measure: ``max |result - reference| / max |reference|`` (plain
``max |result - reference|`` when the reference is all zero), computed in
float64. Tolerances:

==================================  ======================================
max-pool forward (values, indices)  exact: identical values, 0 index mismatches
float64                             1e-12
float32                             1e-5
float16                             1e-3  (one fp16 ulp at the largest value is 9.8e-4)
bfloat16                            1e-2  (one bf16 ulp at the largest value is 7.8e-3)
==================================  ======================================

fp16/bf16 are computed in float32 and rounded once on both sides, so the
reference and a correct device differ by at most one rounding step.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import backends as _backends
from . import functional as F
from .dtypes import bfloat16
from .kernels import checks as _checks
from .kernels import grid_sampler3d as _grid
from .kernels import max_pool3d as _pool

__all__ = [
    "TOLERANCES", "Case", "CaseResult", "cases", "run", "main",
    "reference_max_pool3d_with_argmax", "reference_max_pool3d_with_argmax_backward",
    "reference_grid_sampler3d", "reference_grid_sampler3d_backward",
]

FP32, FP16, FP64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)
BF16 = np.dtype(bfloat16)

#: Largest accepted max |result - reference| / max |reference| per dtype.
TOLERANCES: dict[np.dtype, float] = {FP64: 1e-12, FP32: 1e-5, FP16: 1e-3, BF16: 1e-2}

_MODES = {"bilinear": _grid.BILINEAR, "nearest": _grid.NEAREST}
_PADDINGS = {"zeros": _grid.ZEROS, "border": _grid.BORDER, "reflection": _grid.REFLECTION}


# -- references: the kernels on host arrays ------------------------------------
# Module-level functions, looked up at call time, so a test can replace one.


def reference_max_pool3d_with_argmax(
    x: np.ndarray, kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int],
    dilation: Sequence[int], ceil_mode: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Pooled values and int32 indices of ``x`` (N, C, D, H, W) by :mod:`pyaclnn.kernels.max_pool3d`."""
    p = _checks.pool_params(kernel_size, stride, padding, dilation, ceil_mode)
    shape = x.shape[:2] + _pool.pool_output_shape(x.shape[2:], p.kernel_size, p.stride, p.padding,
                                                  p.dilation, p.ceil_mode)
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
    grad_output: np.ndarray, x: np.ndarray, grid: np.ndarray, interpolation_mode: int, padding_mode: int,
    align_corners: bool, output_mask: Sequence[bool],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(input_grad, grid_grad), None where the mask is False, by :mod:`pyaclnn.kernels.grid_sampler3d`."""
    input_grad = np.empty(x.shape, dtype=x.dtype) if output_mask[0] else None
    grid_grad = np.empty(grid.shape, dtype=x.dtype) if output_mask[1] else None
    _grid.grid_sampler3d_backward(grad_output, x, grid, interpolation_mode, padding_mode, align_corners,
                                  input_grad, grid_grad)
    return input_grad, grid_grad


# -- comparison ---------------------------------------------------------------


@dataclass
class Comparison:
    """Worst differences over the outputs of one case."""

    error: float = 0.0  # max |got - ref| / max |ref|, over all outputs
    index_mismatches: int | None = None  # max-pool forward only
    exact_mismatches: int | None = None  # values that differ, for exact cases
    notes: list[str] = field(default_factory=list)

    def add(self, name: str, got: Any, ref: np.ndarray | None, *, exact: bool = False) -> None:
        if ref is None:
            if got is not None:
                self.notes.append(f"{name}: expected None (masked out), got an array")
                self.error = float("inf")
            return
        if got is None or np.shape(got) != ref.shape:
            self.notes.append(f"{name}: shape {None if got is None else np.shape(got)}, expected {ref.shape}")
            self.error = float("inf")
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


# -- cases ----------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One check: ``run(backend, rng)`` returns the comparison of device and reference."""

    name: str
    dtype: np.dtype
    run: Callable[[str, np.random.Generator], Comparison]
    exact: bool = False
    quick: bool = False

    @property
    def tolerance(self) -> float:
        return 0.0 if self.exact else TOLERANCES[self.dtype]


def _random(rng: np.random.Generator, shape: Sequence[int], dtype: np.dtype, low: float | None = None,
            high: float | None = None) -> np.ndarray:
    values = rng.standard_normal(shape) if low is None else rng.uniform(low, high, size=shape)
    return values.astype(np.float32).astype(dtype)


def _non_contiguous(x: np.ndarray) -> np.ndarray:
    """``x`` as a strided view of a larger array (every other element along the last axis)."""
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype=x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


def _pool_forward_case(name: str, dtype: np.dtype, shape: Sequence[int], kernel: Any, stride: Any = (),
                       padding: Any = 0, ceil_mode: bool = False, *, strided: bool = False,
                       indices_dtype: Any = np.int32, quick: bool = False) -> Case:
    def run(backend: str, rng: np.random.Generator) -> Comparison:
        x = _random(rng, shape, dtype)
        if strided:
            x = _non_contiguous(x)
        params = [F.int_tuple("", v) for v in (kernel, stride, padding, 1)]
        out, indices = F.max_pool3d_with_argmax(x, kernel, stride, padding, 1, ceil_mode,
                                                indices_dtype=indices_dtype, backend=backend)
        x5 = x if x.ndim == 5 else x[None]
        ref_out, ref_indices = reference_max_pool3d_with_argmax(x5, *params, ceil_mode)
        if x.ndim == 4:
            ref_out, ref_indices = ref_out[0], ref_indices[0]
        cmp = Comparison()
        cmp.add("out", out, ref_out, exact=True)
        cmp.add("indices", indices, ref_indices.astype(indices_dtype))
        if np.dtype(indices.dtype) != np.dtype(indices_dtype):
            cmp.notes.append(f"indices dtype {indices.dtype}, expected {np.dtype(indices_dtype)}")
            cmp.error = float("inf")
        return cmp

    return Case(name, np.dtype(dtype), run, exact=True, quick=quick)


def _pool_backward_case(name: str, dtype: np.dtype, shape: Sequence[int], kernel: Any, stride: Any = (),
                        padding: Any = 0, ceil_mode: bool = False, *, strided: bool = False,
                        quick: bool = False) -> Case:
    def run(backend: str, rng: np.random.Generator) -> Comparison:
        x = _random(rng, shape, dtype)
        params = [F.int_tuple("", v) for v in (kernel, stride, padding, 1)]
        # The indices come from the reference forward: this case checks the backward alone.
        _, indices = reference_max_pool3d_with_argmax(x, *params, ceil_mode)
        grad_output = _random(rng, indices.shape, dtype)
        if strided:
            grad_output = _non_contiguous(grad_output)
        got = F.max_pool3d_with_argmax_backward(grad_output, x, indices, kernel, stride, padding, 1,
                                                ceil_mode, backend=backend)
        cmp = Comparison()
        cmp.add("grad_input", got, reference_max_pool3d_with_argmax_backward(grad_output, indices, x.shape))
        return cmp

    return Case(name, np.dtype(dtype), run, quick=quick)


def _grid_inputs(rng: np.random.Generator, dtype: np.dtype, in_shape: Sequence[int],
                 out_spatial: Sequence[int], layout: str,
                 strided: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input as the op takes it in ``layout``, its NCDHW view, grid); the grid reaches beyond [-1, 1]."""
    x = _random(rng, in_shape, dtype)
    if strided:
        x = _non_contiguous(x)
    grid = _random(rng, (in_shape[0], *out_spatial, 3), dtype, -1.15, 1.15)
    x_op = np.ascontiguousarray(np.moveaxis(x, 1, -1)) if layout == "NDHWC" else x
    return x_op, x, grid


def _to_layout(a: np.ndarray | None, layout: str) -> np.ndarray | None:
    return np.moveaxis(a, 1, -1) if a is not None and layout == "NDHWC" else a


def _grid_forward_case(name: str, dtype: np.dtype, interpolation: str, padding: str, align_corners: bool, *,
                       in_shape: Sequence[int] = (2, 3, 5, 6, 7), out_spatial: Sequence[int] = (4, 5, 6),
                       layout: str = "NCDHW", strided: bool = False, quick: bool = False) -> Case:
    def run(backend: str, rng: np.random.Generator) -> Comparison:
        x_op, x, grid = _grid_inputs(rng, dtype, in_shape, out_spatial, layout, strided)
        got = F.grid_sampler3d(x_op, grid, interpolation, padding, align_corners, layout=layout,
                               backend=backend)
        ref = reference_grid_sampler3d(x, grid, _MODES[interpolation], _PADDINGS[padding], align_corners)
        cmp = Comparison()
        cmp.add("out", got, _to_layout(ref, layout))
        return cmp

    return Case(name, np.dtype(dtype), run, quick=quick)


def _grid_backward_case(name: str, dtype: np.dtype, interpolation: str, padding: str, align_corners: bool, *,
                        in_shape: Sequence[int] = (2, 3, 5, 6, 7), out_spatial: Sequence[int] = (4, 5, 6),
                        layout: str = "NCDHW", strided: bool = False,
                        output_mask: tuple[bool, bool] = (True, True), quick: bool = False) -> Case:
    def run(backend: str, rng: np.random.Generator) -> Comparison:
        x_op, x, grid = _grid_inputs(rng, dtype, in_shape, out_spatial, layout, strided)
        grad_output = _random(rng, (in_shape[0], in_shape[1], *out_spatial), dtype)
        grad_op = np.moveaxis(grad_output, 1, -1) if layout == "NDHWC" else grad_output
        input_grad, grid_grad = F.grid_sampler3d_backward(
            grad_op, x_op, grid, interpolation, padding, align_corners, output_mask, layout=layout,
            backend=backend)
        ref_input_grad, ref_grid_grad = reference_grid_sampler3d_backward(
            grad_output, x, grid, _MODES[interpolation], _PADDINGS[padding], align_corners, output_mask)
        cmp = Comparison()
        cmp.add("input_grad", input_grad, _to_layout(ref_input_grad, layout))
        cmp.add("grid_grad", grid_grad, ref_grid_grad)
        return cmp

    return Case(name, np.dtype(dtype), run, quick=quick)


def cases() -> list[Case]:
    """The selftest matrix; ``quick=True`` marks the subset of ``--quick``."""
    return [
        _pool_forward_case("max_pool3d fwd k2 s2", FP32, (2, 3, 8, 8, 8), 2, quick=True),
        _pool_forward_case("max_pool3d fwd k3 s2 p1 ceil_mode", FP16, (1, 4, 7, 6, 9), 3, 2, 1, True,
                           quick=True),
        _pool_forward_case("max_pool3d fwd k(3,2,2) s(2,1,2) p(1,1,0)", BF16, (2, 2, 6, 7, 8), (3, 2, 2),
                           (2, 1, 2), (1, 1, 0)),
        _pool_forward_case("max_pool3d fwd 4-D (C,D,H,W) stride 1", FP32, (3, 5, 5, 5), 2, 1),
        _pool_forward_case("max_pool3d fwd non-contiguous input", FP32, (2, 2, 6, 6, 6), 3, 2, 1,
                           strided=True),
        _pool_forward_case("max_pool3d fwd int64 indices", FP32, (1, 2, 6, 6, 6), 2, indices_dtype=np.int64),
        _pool_forward_case("max_pool3d fwd larger k3 s2 p1", FP32, (2, 16, 16, 24, 24), 3, 2, 1),
        _pool_backward_case("max_pool3d bwd k3 s2 p1 (overlapping)", FP32, (2, 3, 7, 7, 7), 3, 2, 1,
                            quick=True),
        _pool_backward_case("max_pool3d bwd k2 ceil_mode", FP16, (1, 4, 7, 5, 9), 2, 2, 0, True),
        _pool_backward_case("max_pool3d bwd k3 s1 p1", BF16, (1, 3, 6, 6, 6), 3, 1, 1),
        _pool_backward_case("max_pool3d bwd non-contiguous grad_output", FP32, (2, 2, 6, 6, 6), 2,
                            strided=True),
        _grid_forward_case("grid_sampler3d fwd bilinear zeros", FP32, "bilinear", "zeros", False, quick=True),
        _grid_forward_case("grid_sampler3d fwd nearest border align", FP32, "nearest", "border", True),
        _grid_forward_case("grid_sampler3d fwd bilinear reflection", FP16, "bilinear", "reflection", False),
        _grid_forward_case("grid_sampler3d fwd bilinear zeros align", BF16, "bilinear", "zeros", True),
        _grid_forward_case("grid_sampler3d fwd bilinear border", FP64, "bilinear", "border", False),
        _grid_forward_case("grid_sampler3d fwd NDHWC", FP32, "bilinear", "zeros", False, layout="NDHWC"),
        _grid_forward_case("grid_sampler3d fwd non-contiguous input", FP32, "bilinear", "reflection", True,
                           strided=True),
        _grid_backward_case("grid_sampler3d bwd bilinear zeros", FP32, "bilinear", "zeros", False,
                            quick=True),
        _grid_backward_case("grid_sampler3d bwd nearest reflection align", FP32, "nearest", "reflection",
                            True),
        _grid_backward_case("grid_sampler3d bwd bilinear border", FP16, "bilinear", "border", False),
        _grid_backward_case("grid_sampler3d bwd bilinear zeros align", BF16, "bilinear", "zeros", True),
        _grid_backward_case("grid_sampler3d bwd bilinear reflection", FP64, "bilinear", "reflection", False),
        _grid_backward_case("grid_sampler3d bwd NDHWC", FP32, "bilinear", "border", True, layout="NDHWC"),
        _grid_backward_case("grid_sampler3d bwd mask (True, False)", FP32, "bilinear", "zeros", False,
                            output_mask=(True, False)),
        _grid_backward_case("grid_sampler3d bwd non-contiguous input", FP32, "bilinear", "zeros", True,
                            strided=True),
        _grid_backward_case("grid_sampler3d bwd larger", FP32, "bilinear", "zeros", False,
                            in_shape=(2, 8, 12, 14, 16), out_spatial=(8, 10, 12)),
    ]


# -- running ----------------------------------------------------------------------


@dataclass
class CaseResult:
    case: Case
    passed: bool
    comparison: Comparison | None
    error: str = ""  # the exception, when the case raised
    seconds: float = 0.0


def run_case(case: Case, backend: str) -> CaseResult:
    """Run one case (inputs seeded by its name); an exception is a failure with its text."""
    seed = zlib.crc32(case.name.encode())
    start = time.perf_counter()
    try:
        cmp = case.run(backend, np.random.default_rng(seed))
    except Exception as exc:  # report and go on with the other cases
        detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return CaseResult(case, False, None, detail, time.perf_counter() - start)
    passed = (cmp.error <= case.tolerance and not cmp.index_mismatches and not cmp.exact_mismatches
              and not cmp.notes)
    return CaseResult(case, passed, cmp, seconds=time.perf_counter() - start)


def _format_error(value: float) -> str:
    return "0" if value == 0 else f"{value:.2e}"


def format_table(results: Sequence[CaseResult]) -> str:
    """The pass/fail table, one row per case."""
    rows = [("case", "dtype", "max err/max|ref|", "tolerance", "index mism.", "result")]
    details = []
    for r in results:
        c, cmp = r.case, r.comparison
        tol = "exact" if c.exact else f"{c.tolerance:g}"
        if cmp is None:
            rows.append((c.name, str(c.dtype), "-", tol, "-", "ERROR"))
            details.append(f"  {c.name}: {r.error}")
            continue
        mism = "-" if cmp.index_mismatches is None else str(cmp.index_mismatches)
        verdict = "PASS" if r.passed else "FAIL"
        rows.append((c.name, str(c.dtype), _format_error(cmp.error), tol, mism, verdict))
        if cmp.exact_mismatches:
            details.append(f"  {c.name}: {cmp.exact_mismatches} value(s) differ from the reference")
        details.extend(f"  {c.name}: {note}" for note in cmp.notes)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + details)


def run(backend: str | None = None, quick: bool = False, pattern: str | None = None,
        out: Any = None) -> int:
    """Run the matrix on ``backend`` (None: the active one), print the table; 0 if every case passes.

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

    Returns
    -------
    int
        0 when all selected cases pass, 1 otherwise (also when none is selected).
    """
    out = out or sys.stdout
    name = backend or _backends.active_name()
    reason = _backends.selection_reason() if backend is None else f"--backend {backend}"
    try:
        _backends.get(name)
    except Exception as exc:  # e.g. npu asked for where CANN cannot load
        print(f"pyaclnn selftest: backend {name!r} is not usable: {exc}", file=out)
        return 1
    selected = [c for c in cases() if (c.quick or not quick) and (pattern is None or pattern in c.name)]
    print(f"pyaclnn selftest on backend {name!r} ({reason}): {len(selected)} case(s)", file=out)
    if not selected:
        print("no case matches", file=out)
        return 1
    results = [run_case(c, name) for c in selected]
    print(format_table(results), file=out)
    failed = sum(not r.passed for r in results)
    seconds = sum(r.seconds for r in results)
    print(f"{len(results) - failed} passed, {failed} failed in {seconds:.2f} s", file=out)
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line of ``python -m pyaclnn selftest``."""
    parser = argparse.ArgumentParser(prog="python -m pyaclnn selftest", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args.backend, args.quick, args.k)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=_backends.BACKEND_NAMES, help="default: the active backend")
    parser.add_argument("--quick", action="store_true", help="one or two cases per operator")
    parser.add_argument("-k", metavar="TEXT", help="only the cases whose name contains TEXT")

"""The compiled grid sampler (pyaclnn.kernels._accel) against the tuned NumPy kernels and the
reference.

The compiled kernels run through the numpy backend's kernel choice
(pyaclnn.backends.numpy._kernels) with a plan. Against the tuned NumPy paths
(pyaclnn.kernels._tuned.grid_sampler3d), the kernels they take over from:
inputGrad: both implementations add, per (cell, channel), the x0-corner and
the x1-corner contributions apart, in the same point order (chunks of 8192
points, corner pair after corner pair), and add the two sums at the end; so
inputGrad is compared bit for bit (NaN positions must agree, NaN payloads may
differ). gridGrad and the bilinear forward contract over the channels (NumPy:
einsum / matmul, whose summation order is NumPy's own), so they are compared
with a float32 tolerance (and one unit of the 16-bit formats after rounding).
The nearest forward copies values: bit for bit. Against the reference
(pyaclnn.kernels.grid_sampler3d, the specification): every output to the same
float32 tolerance (:func:`test_compiled_results_match_the_reference`).

Like tests/test_accel.py, the tests skip only when the library cannot be
built, and fail instead with PYACLNN_REQUIRE_ACCEL=1.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from reproducible import seed
from test_accel import library_or_skip

from pyaclnn.backends.numpy import _kernels
from pyaclnn.dtypes import compute_dtype
from pyaclnn.kernels import _accel
from pyaclnn.kernels import grid_sampler3d as gs
from pyaclnn.kernels._tuned import grid_sampler3d as tuned
from pyaclnn.kernels.checks import GridPlan

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
DTYPES = [F32, F16, BF16]
MODES = list(
    itertools.product([gs.BILINEAR, gs.NEAREST], [gs.ZEROS, gs.BORDER, gs.REFLECTION], [False, True])
)
MODE_IDS = [
    f"{'bil' if i == 0 else 'near'}-{('zeros', 'border', 'refl')[p]}-{'ac' if a else 'noac'}"
    for i, p, a in MODES
]
# gridGrad tolerance relative to the largest |value| of the case, per dtype
# (float32: summation order; 16-bit: one unit in the last place after that).
TOLERANCE = {F32: 1e-5, F16: 2.0**-10, BF16: 2.0**-7}


class _Recorder:
    """The cffi library, counting the calls of the grid-sampler kernels."""

    def __init__(self, lib) -> None:
        self._lib = lib
        self.calls = 0
        self.forward_calls = 0

    def pyaclnn_grid_sampler3d_backward(self, *args):
        self.calls += 1
        return self._lib.pyaclnn_grid_sampler3d_backward(*args)

    def pyaclnn_grid_sampler3d(self, *args):
        self.forward_calls += 1
        return self._lib.pyaclnn_grid_sampler3d(*args)

    def __getattr__(self, name):
        return getattr(self._lib, name)


@pytest.fixture
def compiled(monkeypatch) -> _Recorder:
    """The compiled kernels switched on, their calls counted; skips only if unbuildable."""
    recorder = _Recorder(library_or_skip(monkeypatch))
    monkeypatch.setattr(_accel._loaded, "lib", recorder)
    return recorder


def _plan(x: np.ndarray, grid: np.ndarray, mode, mask=(True, True)) -> GridPlan:
    """The plan of a call on these NCDHW arrays (the layout does not matter to the kernels)."""
    n, c = x.shape[:2]
    return GridPlan(False, *mode, x.shape, (n, c, *grid.shape[1:4]), compute_dtype(x.dtype), mask)


def backward(go, x, grid, interpolation_mode, padding_mode, align_corners, input_grad, grid_grad) -> str:
    """The backward as the numpy backend runs it: the compiled kernel where it takes the call."""
    mode = (interpolation_mode, padding_mode, align_corners)
    plan = _plan(x, grid, mode, (input_grad is not None, grid_grad is not None))
    return _kernels.grid_sampler3d_backward(plan, go, x, grid, input_grad, grid_grad)


def forward(x, grid, interpolation_mode, padding_mode, align_corners, out) -> str:
    """The forward as the numpy backend runs it."""
    plan = _plan(x, grid, (interpolation_mode, padding_mode, align_corners))
    return _kernels.grid_sampler3d(plan, x, grid, out)


def _same(a: np.ndarray, b: np.ndarray) -> None:
    """Bit for bit, except that NaNs only need to be NaN in both."""
    assert a.shape == b.shape and a.dtype == b.dtype
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    nan = np.isnan(fa)
    assert np.array_equal(nan, np.isnan(fb)), "NaN positions differ"
    bits_a = np.ascontiguousarray(np.where(nan, 0, a).astype(a.dtype)).view(np.uint8)
    bits_b = np.ascontiguousarray(np.where(nan, 0, b).astype(b.dtype)).view(np.uint8)
    if not np.array_equal(bits_a, bits_b):
        worst = np.nanmax(np.abs(fa - fb))
        raise AssertionError(f"bits differ (largest difference {worst})")


def _close(a: np.ndarray, b: np.ndarray) -> None:
    """Equal up to the summation order (float32), then one unit of the 16-bit formats."""
    assert a.shape == b.shape and a.dtype == b.dtype
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    assert np.array_equal(np.isnan(fa), np.isnan(fb)), "NaN positions differ"
    finite = np.isfinite(fb)
    assert np.array_equal(fa[~finite & ~np.isnan(fb)], fb[~finite & ~np.isnan(fb)]), "infinities differ"
    scale = float(np.max(np.abs(fb[finite]), initial=1.0))
    tol = TOLERANCE[a.dtype] * max(scale, 1.0)
    np.testing.assert_allclose(fa[finite], fb[finite], rtol=TOLERANCE[a.dtype], atol=tol)


def _case(rng, in_shape, out_spatial, dtype, spread=1.3, channels_last=False):
    """grad_output, input, grid of the shapes; NCDHW views of NDHWC storage when ``channels_last``."""
    n, c = in_shape[:2]
    x = rng.standard_normal(in_shape, dtype=np.float32).astype(dtype)
    go = rng.standard_normal((n, c, *out_spatial), dtype=np.float32).astype(dtype)
    grid = rng.uniform(-spread, spread, (n, *out_spatial, 3)).astype(np.float32).astype(dtype)
    if channels_last:
        x = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 1, 4)), 4, 1)
        go = np.moveaxis(np.ascontiguousarray(np.moveaxis(go, 1, 4)), 4, 1)
    return go, x, grid


def _outputs(x, grid, channels_last=False, fill=7):
    ig = np.full(x.shape, fill, x.dtype)
    if channels_last:
        ig = np.moveaxis(np.full((x.shape[0], *x.shape[2:], x.shape[1]), fill, x.dtype), 4, 1)
    return ig, np.full(grid.shape, fill, grid.dtype)


def _backward_both(go, x, grid, mode, channels_last=False, mask=(True, True)):
    """(compiled, numpy) results of the backward, each (input_grad, grid_grad) or None."""
    results = []
    for numpy_path in (False, True):
        ig, gg = _outputs(x, grid, channels_last)
        outputs = (ig if mask[0] else None, gg if mask[1] else None)
        if numpy_path:
            tuned.grid_sampler3d_backward((go, x, grid), mode, outputs)
        else:
            backward(go, x, grid, *mode, *outputs)
        results.append((ig, gg))
    return results


def _check_backward(go, x, grid, mode, channels_last=False, mask=(True, True)):
    (ig, gg), (eig, egg) = _backward_both(go, x, grid, mode, channels_last, mask)
    _same(ig, eig)
    if mode[0] == gs.NEAREST:
        _same(gg, egg)
    else:
        _close(gg, egg)
    return ig, gg


# --------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["NCDHW", "NDHWC"])
def test_backward_random_inputs_match_numpy_in_every_mode(compiled, mode, dtype, channels_last):
    rng = np.random.default_rng(seed(mode, dtype, channels_last))
    for in_shape, out_spatial in [((2, 3, 4, 5, 6), (3, 4, 5)), ((1, 6, 7, 3, 9), (5, 2, 11))]:
        go, x, grid = _case(rng, in_shape, out_spatial, dtype, channels_last=channels_last)
        _check_backward(go, x, grid, mode, channels_last)
    assert compiled.calls == 2


def _stepped(a: np.ndarray) -> np.ndarray:
    big = np.zeros(tuple(2 * n + 1 for n in a.shape), a.dtype)
    view = big[tuple(slice(1, None, 2) for _ in a.shape)]
    view[...] = a
    return view


def _negative(a: np.ndarray) -> np.ndarray:
    flip = tuple(slice(None, None, -1) for _ in a.shape)
    return np.ascontiguousarray(a[flip])[flip]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["stepped", "negative", "transposed"])
@pytest.mark.parametrize("mode", [MODES[0], MODES[5], MODES[7]], ids=[MODE_IDS[0], MODE_IDS[5], MODE_IDS[7]])
def test_backward_non_contiguous_inputs_and_outputs(compiled, dtype, kind, mode):
    rng = np.random.default_rng(4)
    go, x, grid = _case(rng, (2, 3, 4, 5, 6), (3, 4, 5), dtype)
    if kind == "stepped":
        go, x, grid = _stepped(go), _stepped(x), _stepped(grid)
    elif kind == "negative":
        go, x, grid = _negative(go), _negative(x), _negative(grid)
    else:
        t = (4, 3, 2, 1, 0)
        go, x, grid = (np.ascontiguousarray(a.transpose(t)).transpose(t) for a in (go, x, grid))
    expected = _backward_both(go, x, grid, mode)[1]
    ig = _stepped(np.zeros(x.shape, dtype))
    gg = np.zeros(grid.shape[::-1], dtype).transpose(4, 3, 2, 1, 0)
    backward(go, x, grid, *mode, ig, gg)
    _same(ig, expected[0])
    _close(gg, expected[1]) if mode[0] == gs.BILINEAR else _same(gg, expected[1])
    assert compiled.calls == 2  # the tuned run went to NumPy


@pytest.mark.parametrize("mask", [(True, False), (False, True), (True, True)], ids=["input", "grid", "both"])
@pytest.mark.parametrize("mode", [MODES[0], MODES[6]], ids=[MODE_IDS[0], MODE_IDS[6]])
def test_backward_output_mask_variants_leave_the_other_output_alone(compiled, mask, mode):
    rng = np.random.default_rng(8)
    go, x, grid = _case(rng, (2, 4, 5, 6, 7), (4, 3, 5), F32)
    (ig, gg), (eig, egg) = _backward_both(go, x, grid, mode, mask=mask)
    for wanted, got, exp in ((mask[0], ig, eig), (mask[1], gg, egg)):
        if not wanted:
            assert np.all(got == 7)
            continue
        if got is gg and mode[0] == gs.BILINEAR:
            _close(got, exp)
        else:
            _same(got, exp)
    if mode[0] == gs.NEAREST and mask[1]:
        assert np.all(gg == 0)


@pytest.mark.parametrize(
    "in_shape, out_spatial",
    [
        ((1, 1, 1, 1, 1), (1, 1, 1)),
        ((2, 1, 1, 5, 1), (1, 3, 1)),
        ((1, 2, 3, 1, 4), (2, 1, 1)),
    ],
)
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_backward_edge_shapes(compiled, in_shape, out_spatial, mode):
    rng = np.random.default_rng(2)
    go, x, grid = _case(rng, in_shape, out_spatial, F32)
    _check_backward(go, x, grid, mode)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 3e9, -3e9, 1.0, -1.0, 0.0, 0.5, -0.5], np.float32)


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_backward_nan_inf_and_huge_coordinates_and_values(compiled, mode, dtype):
    rng = np.random.default_rng(9)
    go, x, grid = _case(rng, (2, 3, 4, 5, 6), (4, 5, 6), dtype)
    g = grid.astype(np.float32)
    # one special value on one axis of many points, the other axes random
    flat = g.reshape(-1, 3)
    for k, value in enumerate(SPECIAL):
        flat[3 * k : 3 * k + 3, k % 3] = value
    flat[40:44] = np.nan
    flat[44:48] = np.inf
    # coordinates on exact cell centres and halfway points (nearest ties)
    flat[60:80] = (np.arange(20, dtype=np.float32)[:, None] / 4 - 2.5) / 2.5
    with np.errstate(over="ignore"):  # 1e10 is inf in float16
        grid = g.astype(dtype)
    xs = x.astype(np.float32)
    xs.reshape(-1)[[3, 50, 100]] = [np.nan, np.inf, -np.inf]
    gos = go.astype(np.float32)
    gos.reshape(-1)[[7, 70]] = [np.inf, np.nan]
    _check_backward(gos.astype(dtype), xs.astype(dtype), grid, mode)
    # and finite values with the special coordinates only
    _check_backward(go, x, grid, mode)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["NCDHW", "NDHWC"])
def test_backward_16_bit_rounds_once_like_numpy_in_both_conversion_paths(compiled, dtype, channels_last):
    rng = np.random.default_rng(12)
    # many points on few cells: long float32 sums whose rounding matters
    go, x, grid = _case(rng, (1, 5, 2, 3, 4), (6, 7, 8), dtype, spread=1.0, channels_last=channels_last)
    go = (go.astype(np.float32) * 300).astype(dtype)  # sums beyond float16's exact integers
    before = _accel.use_f16c()
    try:
        hardware = _check_backward(go, x, grid, MODES[0], channels_last)
        _accel.use_f16c(False)
        software = _check_backward(go, x, grid, MODES[0], channels_last)
    finally:
        _accel.use_f16c(before)
    _same(hardware[0], software[0])
    _same(hardware[1], software[1])


@pytest.mark.parametrize("channels_last", [False, True], ids=["NCDHW", "NDHWC"])
@pytest.mark.parametrize("mode", [MODES[0], MODES[3], MODES[8]], ids=[MODE_IDS[0], MODE_IDS[3], MODE_IDS[8]])
def test_backward_result_does_not_depend_on_the_thread_count(compiled, monkeypatch, channels_last, mode):
    rng = np.random.default_rng(13)
    go, x, grid = _case(rng, (2, 9, 6, 10, 12), (16, 20, 24), F32, channels_last=channels_last)
    reference = _check_backward(go, x, grid, mode, channels_last)
    for threads in ("1", "2", "3", "7"):
        monkeypatch.setenv("PYACLNN_NUM_THREADS", threads)
        ig, gg = _outputs(x, grid, channels_last)
        backward(go, x, grid, *mode, ig, gg)
        _same(ig, reference[0])
        _same(gg, reference[1])


def test_backward_more_points_than_the_numpy_kernel_caches(compiled):
    """Over 2**18 points a batch item: NumPy's multi-pass path, the same order."""
    rng = np.random.default_rng(14)
    go, x, grid = _case(rng, (1, 3, 4, 5, 6), (65, 64, 64), F32)
    _check_backward(go, x, grid, MODES[0])


def test_backward_float64_and_pyaclnn_accel_0_stay_with_numpy(compiled, monkeypatch):
    rng = np.random.default_rng(15)
    go, x, grid = _case(rng, (1, 2, 3, 4, 5), (2, 3, 4), np.dtype(np.float64))
    ig, gg = _outputs(x, grid)
    backward(go, x, grid, *MODES[0], ig, gg)
    assert compiled.calls == 0
    go, x, grid = _case(rng, (1, 2, 3, 4, 5), (2, 3, 4), F32)
    monkeypatch.setenv("PYACLNN_ACCEL", "0")
    ig, gg = _outputs(x, grid)
    backward(go, x, grid, *MODES[0], ig, gg)
    assert compiled.calls == 0
    monkeypatch.delenv("PYACLNN_ACCEL")
    backward(go, x, grid, *MODES[0], ig, gg)
    assert compiled.calls == 1


def test_accel_status_lists_the_grid_kernels(compiled):
    kernels = _accel.accel_status()["kernels"]
    assert kernels["grid_sampler3d_backward"] == kernels["grid_sampler3d"] == "compiled"


# --------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------


def _check_forward(x, grid, mode, out=None):
    n, c = x.shape[:2]
    shape = (n, c, *grid.shape[1:4])
    expected = np.full(shape, 7, x.dtype)
    tuned.grid_sampler3d((x, grid), mode, expected)
    got = np.full(shape, 7, x.dtype) if out is None else out
    forward(x, grid, *mode, got)
    if mode[0] == gs.NEAREST:
        _same(got, expected)  # a copy of one value
    else:
        _close(got, expected)
    return got


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["NCDHW", "NDHWC"])
def test_forward_random_inputs_match_numpy_in_every_mode(compiled, mode, dtype, channels_last):
    rng = np.random.default_rng(seed(mode, dtype, channels_last, 1))
    for in_shape, out_spatial in [((2, 3, 4, 5, 6), (3, 4, 5)), ((1, 6, 7, 3, 9), (5, 2, 11))]:
        _, x, grid = _case(rng, in_shape, out_spatial, dtype, channels_last=channels_last)
        _check_forward(x, grid, mode)
    assert compiled.forward_calls == 2


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mode", [MODES[0], MODES[5], MODES[7]], ids=[MODE_IDS[0], MODE_IDS[5], MODE_IDS[7]])
def test_forward_non_contiguous_inputs_and_outputs(compiled, dtype, mode):
    rng = np.random.default_rng(21)
    _, x, grid = _case(rng, (2, 3, 4, 5, 6), (3, 4, 5), dtype)
    _check_forward(_negative(x), _stepped(grid), mode, out=_stepped(np.zeros((2, 3, 3, 4, 5), dtype)))
    _check_forward(
        _stepped(x), _negative(grid), mode, out=np.zeros((5, 4, 3, 3, 2), dtype).transpose(4, 3, 2, 1, 0)
    )


@pytest.mark.parametrize(
    "in_shape, out_spatial",
    [
        ((1, 1, 1, 1, 1), (1, 1, 1)),
        ((2, 1, 1, 5, 1), (1, 3, 1)),
    ],
)
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_forward_edge_shapes(compiled, in_shape, out_spatial, mode):
    rng = np.random.default_rng(22)
    _, x, grid = _case(rng, in_shape, out_spatial, F32)
    _check_forward(x, grid, mode)


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_forward_nan_inf_and_huge_coordinates_and_values(compiled, mode, dtype):
    rng = np.random.default_rng(23)
    _, x, grid = _case(rng, (2, 3, 4, 5, 6), (4, 5, 6), dtype)
    g = grid.astype(np.float32)
    flat = g.reshape(-1, 3)
    for k, value in enumerate(SPECIAL):
        flat[3 * k : 3 * k + 3, k % 3] = value
    flat[60:80] = (np.arange(20, dtype=np.float32)[:, None] / 4 - 2.5) / 2.5
    with np.errstate(over="ignore"):
        grid = g.astype(dtype)
    xs = x.astype(np.float32)
    xs.reshape(-1)[[3, 50, 100]] = [np.nan, np.inf, -np.inf]
    _check_forward(xs.astype(dtype), grid, mode)


@pytest.mark.parametrize("channels_last", [False, True], ids=["NCDHW", "NDHWC"])
def test_forward_result_does_not_depend_on_the_thread_count(compiled, monkeypatch, channels_last):
    rng = np.random.default_rng(24)
    _, x, grid = _case(rng, (2, 9, 6, 10, 12), (16, 20, 24), F32, channels_last=channels_last)
    reference = _check_forward(x, grid, MODES[2])
    for threads in ("1", "2", "3", "7"):
        monkeypatch.setenv("PYACLNN_NUM_THREADS", threads)
        got = np.empty(reference.shape, F32)
        forward(x, grid, *MODES[2], got)
        _same(got, reference)


# --------------------------------------------------------------------------
# Against the reference
# --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_compiled_results_match_the_reference(compiled, mode, dtype):
    """The specification (plain NumPy, PyTorch's order of operations): the same cells and
    weights, another summation order, so float32 tolerance (one unit of the 16-bit formats)."""
    rng = np.random.default_rng(seed("reference", mode, dtype))
    go, x, grid = _case(rng, (2, 3, 4, 5, 6), (3, 4, 5), dtype)
    ig, gg = _outputs(x, grid)
    backward(go, x, grid, *mode, ig, gg)
    out = np.empty(go.shape, dtype)
    forward(x, grid, *mode, out)
    assert compiled.calls == compiled.forward_calls == 1
    eig, egg = _outputs(x, grid)
    gs.grid_sampler3d_backward(go, x, grid, *mode, eig, egg)
    eout = np.empty(go.shape, dtype)
    gs.grid_sampler3d(x, grid, *mode, eout)
    for got, expected in ((ig, eig), (gg, egg), (out, eout)):
        _close(got, expected)

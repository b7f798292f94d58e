"""The compiled max-pool forward against the reference kernel, bit for bit.

The compiled kernel runs through the numpy backend's kernel choice
(pyaclnn.backends.numpy._kernels) with a plan; the reference is
pyaclnn.kernels.max_pool3d.

Both scan each window's in-bounds cells in d, h, w order from -inf and the
first in-bounds cell, and a cell wins when greater or NaN, so the outputs
(each the exact bits of an input cell) and the indices must be identical:
ties to the first maximum, NaN to the last NaN with its payload, -0 and +0 as
they come first, all -inf windows, and windows over padding only (-inf and
their first cell past the plane, as PyTorch reports it).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from reproducible import seed
from test_accel import (
    BF16,
    DTYPES,
    F16,
    F32,
    INDEX_DTYPES,
    _output,
    _same_bits,
    _strided,
    library_or_skip,
    pool_plan,
)

from pyaclnn.backends.numpy import _kernels
from pyaclnn.kernels import _accel
from pyaclnn.kernels import max_pool3d as mp


@pytest.fixture
def compiled(monkeypatch):
    """The compiled kernels on, their forward calls counted; skips only if unbuildable."""
    lib = library_or_skip(monkeypatch)
    calls = []

    class Counting:
        def __getattr__(self, name):
            return getattr(lib, name)

        def pyaclnn_max_pool3d(self, *args):
            calls.append(args)
            return lib.pyaclnn_max_pool3d(*args)

    monkeypatch.setattr(_accel._loaded, "lib", Counting())
    return calls


def _pool(x, params, index_dtype, accel: bool, out_kind: str = "contiguous"):
    """(out, indices) of the forward of ``x``: as the numpy backend runs it when ``accel``,
    else the reference kernel."""
    k, s, p, d, ceil = params
    shape = x.shape[:2] + mp.pool_output_shape(x.shape[2:], k, s, p, d, ceil)
    out, indices = _output(shape, x.dtype, out_kind), _output(shape, index_dtype, out_kind)
    if accel:
        _kernels.max_pool3d_with_argmax(
            pool_plan(x.shape, shape, x.dtype, params, index_dtype), x, out, indices
        )
    else:
        mp.max_pool3d_with_argmax(x, k, s, p, d, ceil, out, indices)
    return out, indices


def _compare(x, params, index_dtype, calls, out_kind="contiguous"):
    """Both kernels into fresh outputs: the same bits; the compiled one was called."""
    before = len(calls)
    got = _pool(x, params, index_dtype, True, out_kind)
    assert len(calls) == before + 1, "the compiled forward did not take the call"
    expected = _pool(x, params, index_dtype, False, out_kind)
    assert _same_bits(got[0], expected[0]), params
    assert np.array_equal(got[1], expected[1]), params
    return got


def _specials(rng, shape, dtype, share: float = 0.25) -> np.ndarray:
    """Normal values with NaN (of both signs), +-inf, +-0 and repeated maxima sprinkled in."""
    x = rng.standard_normal(shape).astype(np.float32)
    pick = rng.random(shape)
    values = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 1.0], np.float32)
    where = pick < share
    x[where] = rng.choice(values, size=int(where.sum()))
    return x.astype(dtype)


def _random_params(rng):
    k = tuple(int(v) for v in rng.integers(1, 5, 3))
    s = tuple(int(v) for v in rng.integers(1, 4, 3))
    p = tuple(int(rng.integers(0, kk // 2 + 1)) for kk in k)
    d = tuple(int(v) for v in rng.integers(1, 4, 3))
    return k, s, p, d, bool(rng.integers(0, 2))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
def test_random_shapes_and_parameters_match_numpy_bit_for_bit(compiled, dtype, index_dtype):
    rng = np.random.default_rng(seed("forward", dtype, index_dtype))
    done = 0
    while done < 40:
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 3)), *(int(v) for v in rng.integers(1, 10, 3)))
        params = _random_params(rng)
        if min(mp.pool_output_shape(shape[2:], *params)) <= 0:
            continue  # the op's checks refuse these
        _compare(_specials(rng, shape, dtype), params, index_dtype, compiled)
        done += 1


@pytest.mark.parametrize("kind", ["transposed", "stepped", "negative"])
@pytest.mark.parametrize("out_kind", ["contiguous", "strided", "transposed"])
def test_any_strides_of_input_and_outputs(compiled, kind, out_kind):
    rng = np.random.default_rng(seed("strides", kind, out_kind))
    for dtype in DTYPES:
        x = _strided(_specials(rng, (2, 3, 7, 6, 9), dtype), kind)
        _compare(
            x, ((3, 2, 3), (2, 1, 2), (1, 0, 1), (1, 2, 1), True), np.dtype(np.int64), compiled, out_kind
        )


def test_windows_over_padding_only_give_minus_inf_and_their_first_cell_past_the_plane(compiled):
    # length 3, kernel 2, dilation 4, padding 1: the one window reads cells -1 and 3, neither inside
    x = np.arange(1, 28, dtype=np.float32).reshape(1, 1, 3, 3, 3)
    params = ((2, 2, 2), (1, 1, 1), (1, 1, 1), (4, 4, 4), False)
    out, indices = _compare(x, params, np.dtype(np.int32), compiled)
    assert out.shape == (1, 1, 1, 1, 1) and out[0, 0, 0, 0, 0] == -np.inf
    assert indices[0, 0, 0, 0, 0] == (3 * 3 + 3) * 3 + 3  # cell (3, 3, 3) of a 3x3x3 plane
    # padding only along one axis: the others still pick their first in-bounds cell
    y = np.arange(1, 28 * 3 + 1, dtype=np.float32).reshape(1, 1, 3, 4, 7)
    _compare(y, ((1, 2, 1), (1, 1, 1), (0, 1, 0), (1, 4, 1), False), np.dtype(np.int64), compiled)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_ties_nan_and_signed_zero_follow_the_scan_order(compiled, dtype):
    x = np.zeros((1, 1, 2, 2, 2), np.float32)
    params = ((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False)
    cases = {
        "tie": ([5, 1, 5, 0, 0, 0, 0, 5], 5.0, 0),
        "zeros": ([-0.0, 0.0, 0.0, -0.0, 0, 0, 0, 0], -0.0, 0),
        "nan last": ([1, np.nan, 2, 9, -np.nan, 3, 0, 0], np.nan, 4),
        "all -inf": ([-np.inf] * 8, -np.inf, 0),
    }
    for name, (values, value, index) in cases.items():
        x.reshape(-1)[:] = values
        out, indices = _compare(x.astype(dtype), params, np.dtype(np.int32), compiled)
        assert indices.item() == index, name
        got = out.astype(np.float32).item()
        if np.isnan(value):
            assert np.isnan(got) and np.signbit(got), name  # -nan, the last NaN, with its sign
        else:
            assert got == value and np.signbit(got) == np.signbit(value), name


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_16_bit_nan_payloads_are_kept(compiled, dtype):
    bits = np.array(
        [0x7E01, 0x7C01, 0xFE3F, 0x7FFF] if dtype == F16 else [0x7FC1, 0x7F81, 0xFFC3, 0x7FFF], np.uint16
    )
    x = np.zeros((1, 4, 2, 2, 2), np.uint16)
    x[0, :, 1, 1, 1] = bits  # one NaN per plane, the last cell of its window
    out, _ = _compare(
        x.view(dtype), ((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False), np.dtype(np.int32), compiled
    )
    assert np.array_equal(out.view(np.uint16).reshape(-1), bits)


@pytest.mark.parametrize("f16c", [True, False])
def test_hardware_and_software_conversions_and_scans_agree(compiled, f16c):
    before = _accel.use_f16c()
    try:
        if f16c and not _accel.use_f16c(True):
            pytest.skip("this CPU has no F16C/AVX2 path")
        if not f16c:
            _accel.use_f16c(False)
        rng = np.random.default_rng(seed("f16c", f16c))
        for dtype in DTYPES:
            _compare(
                _specials(rng, (2, 2, 9, 11, 13), dtype),
                ((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), True),
                np.dtype(np.int32),
                compiled,
            )
    finally:
        _accel.use_f16c(before)


def test_the_thread_count_changes_no_bit(compiled, monkeypatch):
    rng = np.random.default_rng(7)
    x = _specials(rng, (2, 8, 16, 20, 24), F32, share=0.05)  # large enough for several threads
    params = ((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), False)
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("PYACLNN_NUM_THREADS", threads)
        results.append(_compare(x, params, np.dtype(np.int32), compiled))
    for out, indices in results[1:]:
        assert _same_bits(out, results[0][0]) and np.array_equal(indices, results[0][1])


def test_input_is_never_modified_and_float64_stays_with_numpy(compiled):
    rng = np.random.default_rng(3)
    x = _specials(rng, (1, 2, 6, 6, 6), F32)
    copy = x.copy()
    _compare(x, ((2, 2, 2), (2, 2, 2), (1, 1, 1), (1, 1, 1), True), np.dtype(np.int32), compiled)
    assert _same_bits(x, copy)
    before = len(compiled)
    _pool(x.astype(np.float64), ((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False), np.dtype(np.int32), True)
    assert len(compiled) == before


def test_the_benchmark_shapes_match(compiled):
    """The shapes bench_kernels times, with each of its kernels (k2 s2, k3 s2 p1, k3 s1 p1 ceil)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 4, 32, 64, 64), dtype=np.float32)
    for k, s, p, ceil in itertools.product((2, 3), (1, 2), (0, 1), (False, True)):
        if p > k // 2:
            continue
        params = ((k,) * 3, (s,) * 3, (p,) * 3, (1, 1, 1), ceil)
        _compare(x, params, np.dtype(np.int32), compiled)
    _compare(x.astype(F16), ((3,) * 3, (2,) * 3, (1,) * 3, (1,) * 3, False), np.dtype(np.int32), compiled)


def test_status_lists_the_forward_as_compiled(compiled):
    assert _accel.accel_status()["kernels"]["max_pool3d_with_argmax"] == "compiled"

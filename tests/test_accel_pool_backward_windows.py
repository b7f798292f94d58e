"""The compiled max-pool backward with the pooling's windows, against the reference, bit for bit.

With windows that do not overlap (stride >= kernel size, dilation 1), the
compiled backward checks each plane's indices (the caller's) against their
own outputs' windows and, when every one lies in its own window, writes the
plane without a float32 accumulation plane: each cell then receives at most
one gradient, stored as the float32 sum +0 + g rounded once, as the
reference computes it. A plane with an index elsewhere (in its plane or not)
takes the accumulation path. Overlapping windows (k3 s1, k3 s2) always take
the accumulation path, whose runs of one index (chains of adds into one cell)
must keep the reference's order.

Every case compares with pyaclnn.kernels.max_pool3d bit for bit and counts
the planes written without an accumulation plane
(``pyaclnn_accel_direct_planes``), so that a test fails both when the direct
path is not taken and when it is taken where it must not be.
"""

from __future__ import annotations

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
    _Recorder,
    _same_bits,
    _sprinkle_specials,
    _strided,
    library_or_skip,
    pool_plan,
)

from pyaclnn.backends.numpy import _kernels
from pyaclnn.kernels import _accel
from pyaclnn.kernels import max_pool3d as reference
from pyaclnn.kernels.checks import IndexOutOfPlaneError


@pytest.fixture
def compiled(monkeypatch) -> _Recorder:
    """The compiled kernels on, their backward calls counted, the direct-plane count reset."""
    recorder = _Recorder(library_or_skip(monkeypatch))
    monkeypatch.setattr(_accel._loaded, "lib", recorder)
    recorder.pyaclnn_accel_direct_planes(1)
    return recorder


def _axes(value) -> tuple[int, int, int]:
    return tuple(value) if isinstance(value, tuple) else (value,) * 3


def _params(k, s, p, d=1, ceil=False):
    return _axes(k), _axes(s), _axes(p), _axes(d), ceil


def _forward(rng, in_shape, params, dtype, index_dtype):
    """x with many ties, NaN and -inf; its forward's indices (the compiled forward, which
    gives the reference's bits: tests/test_accel_pool_forward.py) and a grad_output."""
    k, s, p, d, ceil = params
    x = rng.integers(0, 4, in_shape).astype(np.float32)  # ties: the first maximum wins
    x[rng.random(in_shape) < 0.02] = np.nan
    x[rng.random(in_shape) < 0.05] = -np.inf
    x = x.astype(dtype)
    out_shape = in_shape[:2] + reference.pool_output_shape(in_shape[2:], k, s, p, d, ceil)
    out, idx = np.empty(out_shape, dtype), np.empty(out_shape, index_dtype)
    _kernels.max_pool3d_with_argmax(pool_plan(in_shape, out_shape, dtype, params, index_dtype), x, out, idx)
    go = rng.standard_normal(out_shape, dtype=np.float32).astype(dtype)
    return go, idx


def _backward(go, idx, gi, params) -> None:
    """The backward as the numpy backend runs it for a plan with these pooling parameters."""
    plan = pool_plan(gi.shape, go.shape, gi.dtype, params, idx.dtype)
    _kernels.max_pool3d_with_argmax_backward(plan, go, idx, gi)


def _compare(compiled, go, idx, in_shape, dtype, params, direct, out_kind="contiguous", nan_sign_free=False):
    """Both kernels into fresh outputs: the same bits, and ``direct`` planes written directly."""
    expected = np.full(in_shape, 7, dtype)
    reference.max_pool3d_with_argmax_backward(go, idx, expected)
    got = _output(in_shape, dtype, out_kind)
    calls = compiled.calls
    _backward(go, idx, got, params)
    assert compiled.calls == calls + 1  # the compiled kernel took the call
    assert compiled.pyaclnn_accel_direct_planes(1) == direct
    if nan_sign_free:  # NaNs of both signs summed in one cell: either survives (see test_accel)
        nan = np.isnan(expected.astype(np.float32))
        assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
        got, expected = np.where(nan, 0, got).astype(dtype), np.where(nan, 0, expected).astype(dtype)
    assert _same_bits(got, expected)
    return got


# (input shape, pooling parameters) whose windows do not overlap
DISJOINT = [
    ((2, 3, 8, 10, 12), _params(2, 2, 0)),
    ((1, 2, 9, 11, 13), _params(2, 3, 1, ceil=True)),  # gaps between windows, padding, a partial last window
    ((2, 2, 7, 6, 9), _params((1, 2, 3), (2, 2, 3), (0, 1, 1), ceil=True)),
    ((1, 2, 5, 4, 3), _params(1, 1, 0)),  # every cell its own window
    ((1, 2, 3, 4, 5), _params((3, 4, 5), (3, 4, 5), 0)),  # one window per plane
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("case", range(len(DISJOINT)))
def test_disjoint_windows_write_planes_directly(compiled, dtype, index_dtype, case):
    """Indices of the forward: every plane direct, the reference's bits, with NaN
    (both signs: one gradient a cell), +-inf, -0 (the reference's +0 + -0 is +0), ties."""
    in_shape, params = DISJOINT[case]
    rng = np.random.default_rng(seed(dtype, index_dtype, case))
    go, idx = _forward(rng, in_shape, params, dtype, index_dtype)
    go = _sprinkle_specials(rng, go, signed_nans=True)
    go.reshape(-1)[::7] = -0.0
    planes = in_shape[0] * in_shape[1]
    got = _compare(compiled, go, idx, in_shape, dtype, params, direct=planes).astype(np.float32)
    if go[0, 0].size < got[0, 0].size:
        assert (got == 0).any()  # cells no gradient reaches
    assert not np.signbit(got[got == 0]).any()  # a -0 gradient comes out +0, as the reference's +0 + -0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("in_kind", ["transposed", "stepped", "negative"])
@pytest.mark.parametrize("out_kind", ["contiguous", "strided", "transposed"])
def test_disjoint_windows_any_strides(compiled, dtype, in_kind, out_kind):
    in_shape, params = DISJOINT[1]
    rng = np.random.default_rng(seed(dtype, in_kind, out_kind))
    go, idx = _forward(rng, in_shape, params, dtype, np.int32)
    go, idx = _strided(go, in_kind), _strided(idx, in_kind)
    _compare(compiled, go, idx, in_shape, dtype, params, direct=2, out_kind=out_kind)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
def test_disjoint_windows_large_outputs_streamed(compiled, dtype, index_dtype, monkeypatch):
    """From 1 MiB of grad_input on, written with streaming stores by depth slab; on one
    thread and several."""
    in_shape, params = (2, 4, 16, 64, 64), _params(2, 2, 0)
    assert int(np.prod(in_shape)) * dtype.itemsize >= 1 << 20
    rng = np.random.default_rng(seed(dtype, index_dtype, "large"))
    go, idx = _forward(rng, in_shape, params, dtype, index_dtype)
    go = _sprinkle_specials(rng, go, signed_nans=True)
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("PYACLNN_NUM_THREADS", threads)
        _compare(compiled, go, idx, in_shape, dtype, params, direct=8)
        _compare(compiled, go, idx, in_shape, dtype, params, direct=8, out_kind="strided")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("large", [False, True], ids=["small", "streamed"])
def test_an_index_outside_its_window_takes_the_accumulation_path(compiled, dtype, index_dtype, large):
    """The indices are the caller's. An index in its plane but not in its own output's
    window: another output's cell (which then receives two gradients, to be summed), or
    a cell no window reaches, or a window's cell of another depth. Only that plane
    leaves the direct path; the result is still the reference's. Without the window
    check the first case loses a gradient (and the others write outside the slab)."""
    in_shape = (2, 3, 16, 64, 64) if large else (2, 3, 8, 9, 11)
    params = _params(2, 3, 0)  # cells 2, 5, ... along each axis lie in no window
    rng = np.random.default_rng(seed(dtype, index_dtype, large, "outside"))
    go, idx = _forward(rng, in_shape, params, dtype, index_dtype)
    height, width = in_shape[3:]
    moves = [
        ((1, 2, 0, 0, 1), int(idx[1, 2, 0, 0, 0])),  # output (0, 0, 1) sends to output (0, 0, 0)'s cell
        ((0, 1, 1, 1, 1), (3 * height + 3) * width + 2),  # x = 2: a gap between windows
        ((1, 0, 0, 1, 0), (4 * height + 3) * width + 0),  # depth 4: the window of output depth 1
    ]
    for where, cell in moves:
        bad = idx.copy()
        bad[where] = cell
        assert bad[where] != idx[where]
        _compare(compiled, go, bad, in_shape, dtype, params, direct=5)
    both = idx.copy()
    for where, cell in moves:
        both[where] = cell
    _compare(compiled, go, both, in_shape, dtype, params, direct=3)


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("bad_value", [-1, 2**31 - 1, 8 * 9 * 11])
def test_an_index_outside_its_plane_is_refused_before_anything_is_written(compiled, index_dtype, bad_value):
    in_shape, params = (2, 3, 8, 9, 11), _params(2, 2, 0)
    rng = np.random.default_rng(seed(index_dtype, bad_value, "guard"))
    go, idx = _forward(rng, in_shape, params, F32, index_dtype)
    idx[1, 1, 2, 3, 4] = bad_value
    with pytest.raises(IndexOutOfPlaneError) as numpy_error:
        reference.max_pool3d_with_argmax_backward(go, idx, np.empty(in_shape, F32))
    gi = np.full(in_shape, 7, F32)
    with pytest.raises(IndexOutOfPlaneError) as error:
        _backward(go, idx, gi, params)
    assert str(error.value) == str(numpy_error.value)
    assert (gi == 7).all()


# Overlapping windows, or disjoint ones with a dilation: always the accumulation path.
OVERLAPPING = [
    ((1, 4, 6, 13, 15), _params(3, 1, 1, ceil=True)),  # runs of one index: chains into one cell
    ((2, 3, 9, 16, 17), _params(3, 2, 1)),
    ((1, 2, 8, 9, 10), _params((3, 2, 3), (1, 2, 2), (1, 0, 1), (1, 1, 2))),
    ((1, 3, 8, 9, 10), _params(2, 4, 0, 2)),  # disjoint but dilated
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("case", range(len(OVERLAPPING)))
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf + -inf in a cell
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # sums beyond float16: inf
def test_overlapping_windows_sum_in_the_references_order(compiled, dtype, index_dtype, case):
    """Indices of the forward on ties, NaN and -inf inputs, with padding: consecutive
    outputs often share a maximum, so a cell sums runs of gradients (whose order sets
    the bits of a float32 sum); NaN, +-inf, -0 and 16-bit halfway values among them."""
    in_shape, params = OVERLAPPING[case]
    rng = np.random.default_rng(seed(dtype, index_dtype, case, "overlap"))
    go, idx = _forward(rng, in_shape, params, dtype, index_dtype)
    k, stride = params[:2]
    if any(a < b for a, b in zip(stride, k)):  # overlapping
        flat = idx.reshape(-1)
        assert (flat[1:] == flat[:-1]).mean() > 0.1  # runs of one index
    got = _compare(compiled, _sprinkle_specials(rng, go, signed_nans=False), idx, in_shape, dtype, params, 0)
    assert (got.astype(np.float32) == 0).any()
    _compare(
        compiled,
        _sprinkle_specials(rng, go, signed_nans=True),
        idx,
        in_shape,
        dtype,
        params,
        0,
        nan_sign_free=True,
    )
    # float32 sums that round differently in another order: 1 + 2^-24 + 2^-24 ...
    tiny = np.where(rng.random(go.shape) < 0.5, np.float32(1.0), np.float32(2.0**-24)).astype(np.float32)
    if dtype == F32:
        _compare(compiled, tiny, idx, in_shape, dtype, params, 0)


def test_the_sums_order_is_visible_in_the_bits(compiled):
    """Guard for the test above: on one run of one index, 1 + 2^-24 + 2^-24 (left to right:
    1) and 2^-24 + 2^-24 + 1 (1 + 2^-23) differ, so an order change fails the comparison."""
    go = np.array([1.0, 2.0**-24, 2.0**-24, 2.0**-24, 2.0**-24, 1.0], np.float32).reshape(1, 1, 1, 1, 6)
    idx = np.array([0, 0, 0, 1, 1, 1], np.int64).reshape(go.shape)
    got = _compare(compiled, go, idx, (1, 1, 1, 1, 3), F32, _params(1, 1, 0), direct=0)
    assert got.reshape(-1).tolist() == [1.0, 1.0 + 2.0**-23, 0.0]


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_direct_16_bit_gradients_come_back_as_they_were(compiled, dtype):
    """One gradient a cell: +0 + g in float32 rounded once is g itself for every finite
    16-bit g but -0 (+0) and NaN (quietened; bfloat16 0x7FC0 with its sign), as the
    reference gives."""
    bits = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    go = bits.reshape(1, 1, 16, 64, 64)
    in_shape = (1, 1, 16, 64, 128)
    idx = (np.arange(go.size, dtype=np.int64) * 2).reshape(go.shape)  # every other cell along W
    params = _params((1, 1, 2), (1, 1, 2), 0)
    got = _compare(compiled, go, idx, in_shape, dtype, params, direct=1)
    placed = got.reshape(-1)[::2]
    finite = np.isfinite(bits.astype(np.float32)) & (bits.view(np.uint16) != 0x8000)
    assert np.array_equal(placed.view(np.uint16)[finite], bits.view(np.uint16)[finite])

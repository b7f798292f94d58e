"""The compiled max-pool backward with the pooling's parameters, against the reference, bit for bit.

Given the pooling's parameters, the compiled backward checks in its index
guard that each output depth's indices (the caller's) lie in the input depths
its windows reach; a plane where they do is summed a slab of those depths at
a time, each depth written out once the windows have moved past it, instead
of in a whole float32 plane. The additions and their order are those of the
whole-plane path and of the reference (float32 sums in the C order of
grad_output from +0, rounded once), so the bits must be identical, whatever
the windows: overlapping (k3 s1: runs of one index, chains of adds into one
cell; k3 s2), disjoint, dilated, with padding and partial windows. A plane
with an index at another depth takes the whole-plane path.

Windows that overlap on no axis (stride >= (kernel - 1) * dilation + 1) give
each cell at most one gradient of the forward's indices: such a plane (with
C-contiguous grad_input planes) is written in grad_input's dtype directly,
each gradient's own bits (+0 for -0, NaN quietened, as the float32 sum from
+0 gives them), with no float32 sums; a repeated index in a slab (the
caller's) sends the plane back to the float32 slabs.

Every case compares with pyaclnn.kernels.max_pool3d bit for bit and counts
the planes summed by slabs (``pyaclnn_accel_slab_planes``) and, of those, the
planes written directly (``pyaclnn_accel_disjoint_planes``), so that a test
fails both when a path is not taken and when it is taken where it must not be.
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
    """The compiled kernels on, their backward calls counted, the slab-plane counts reset."""
    recorder = _Recorder(library_or_skip(monkeypatch))
    monkeypatch.setattr(_accel._loaded, "lib", recorder)
    recorder.pyaclnn_accel_slab_planes(1)
    recorder.pyaclnn_accel_disjoint_planes(1)
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


def _compare(
    compiled, go, idx, in_shape, dtype, params, slabs, out_kind="contiguous", nan_sign_free=False, disjoint=0
):
    """Both kernels into fresh outputs: the same bits, ``slabs`` planes summed by slabs and
    ``disjoint`` of them written directly (windows that do not overlap)."""
    expected = np.full(in_shape, 7, dtype)
    reference.max_pool3d_with_argmax_backward(go, idx, expected)
    got = _output(in_shape, dtype, out_kind)
    calls = compiled.calls
    _backward(go, idx, got, params)
    assert compiled.calls == calls + 1  # the compiled kernel took the call
    assert compiled.pyaclnn_accel_slab_planes(1) == slabs
    assert compiled.pyaclnn_accel_disjoint_planes(1) == disjoint
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
def test_disjoint_windows_by_slabs(compiled, dtype, index_dtype, case):
    """Indices of the forward: every plane by slabs, the reference's bits, with NaN
    (both signs: one gradient a cell), +-inf, -0 (the reference's +0 + -0 is +0), ties."""
    in_shape, params = DISJOINT[case]
    rng = np.random.default_rng(seed(dtype, index_dtype, case))
    go, idx = _forward(rng, in_shape, params, dtype, index_dtype)
    go = _sprinkle_specials(rng, go, signed_nans=True)
    go.reshape(-1)[::7] = -0.0
    planes = in_shape[0] * in_shape[1]
    got = _compare(compiled, go, idx, in_shape, dtype, params, slabs=planes, disjoint=planes)
    got = got.astype(np.float32)
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
    disjoint = 2 if out_kind == "contiguous" else 0  # written directly into C-contiguous planes only
    _compare(compiled, go, idx, in_shape, dtype, params, slabs=2, out_kind=out_kind, disjoint=disjoint)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
def test_large_outputs_streamed_by_slabs(compiled, dtype, index_dtype, monkeypatch):
    """From 1 MiB of grad_input on, each depth written with streaming stores once final;
    planes two at a time; on one thread and several; disjoint and overlapping windows."""
    in_shape = (2, 9, 16, 32, 64)  # 18 planes: two at a time leave one alone on some thread counts
    assert int(np.prod(in_shape)) * dtype.itemsize >= 1 << 20
    for params, disjoint in ((_params(2, 2, 0), 18), (_params(3, 2, 1), 0), (_params(3, 1, 1, ceil=True), 0)):
        rng = np.random.default_rng(seed(dtype, index_dtype, params, "large"))
        go, idx = _forward(rng, in_shape, params, dtype, index_dtype)
        go = _sprinkle_specials(rng, go, signed_nans=False)
        for threads in ("1", "2", "3"):
            monkeypatch.setenv("PYACLNN_NUM_THREADS", threads)
            _compare(compiled, go, idx, in_shape, dtype, params, slabs=18, disjoint=disjoint)
            _compare(compiled, go, idx, in_shape, dtype, params, slabs=18, out_kind="strided")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("large", [False, True], ids=["small", "streamed"])
@pytest.mark.parametrize("params", [_params(2, 3, 0), _params(3, 2, 1)], ids=["k2s3", "k3s2"])
def test_an_index_at_another_depth_takes_the_whole_plane_path(compiled, dtype, index_dtype, large, params):
    """The indices are the caller's. An index in its plane but outside its own output's
    window, at a depth that window reaches (another output's cell, which then sums two
    gradients; a cell no window reaches): still by slabs, the reference's sums. At a
    depth its window does not reach: that plane alone is summed whole; the others by
    slabs. Without the depth check the slab path would add it outside its slab. With
    disjoint windows (k2 s3) a plane is written directly unless an index repeats
    another's cell: that plane goes back to the float32 slabs."""
    in_shape = (2, 3, 16, 32, 64) if large else (2, 3, 8, 9, 11)
    rng = np.random.default_rng(seed(dtype, index_dtype, large, params, "outside"))
    go, idx = _forward(rng, in_shape, params, dtype, index_dtype)
    height, width = in_shape[3:]
    other = int(idx[1, 2, 0, 0, 0])
    same_depths = [
        ((1, 2, 0, 0, 3), other),  # output (0, 0, 3) sends to output (0, 0, 0)'s cell
        ((0, 1, 1, 1, 1), (3 * height + 0) * width + 8),  # far along H and W, at a depth of its window
    ]
    other_depths = [
        ((1, 0, 0, 1, 0), (5 * height + 3) * width + 0),  # below the window of output depth 0
        ((0, 2, 2, 1, 1), 0),  # above the window of output depth 2
    ]
    disjoint = params[1][0] >= params[0][0]
    for (where, cell), direct in zip(same_depths, (5, 6)):  # the first repeats a cell
        bad = idx.copy()
        bad[where] = cell
        assert bad[where] != idx[where]
        _compare(compiled, go, bad, in_shape, dtype, params, slabs=6, disjoint=direct * disjoint)
    for where, cell in other_depths:
        bad = idx.copy()
        bad[where] = cell
        _compare(compiled, go, bad, in_shape, dtype, params, slabs=5, disjoint=5 * disjoint)
    everything = idx.copy()
    for where, cell in same_depths + other_depths:
        everything[where] = cell
    _compare(compiled, go, everything, in_shape, dtype, params, slabs=4, disjoint=3 * disjoint)


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


# Overlapping windows, and disjoint ones with a dilation.
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
def test_overlapping_windows_sum_by_slabs_in_the_references_order(compiled, dtype, index_dtype, case):
    """Indices of the forward on ties, NaN and -inf inputs, with padding: consecutive
    outputs often share a maximum, so a cell sums runs of gradients (whose order sets
    the bits of a float32 sum); NaN, +-inf, -0 and 16-bit halfway values among them."""
    in_shape, params = OVERLAPPING[case]
    rng = np.random.default_rng(seed(dtype, index_dtype, case, "overlap"))
    go, idx = _forward(rng, in_shape, params, dtype, index_dtype)
    planes = in_shape[0] * in_shape[1]
    k, stride = params[:2]
    if any(a < b for a, b in zip(stride, k)):  # overlapping
        flat = idx.reshape(-1)
        assert (flat[1:] == flat[:-1]).mean() > 0.1  # runs of one index
    go = _sprinkle_specials(rng, go, signed_nans=False)
    direct = planes if case == 3 else 0  # disjoint but dilated: written directly
    got = _compare(compiled, go, idx, in_shape, dtype, params, planes, disjoint=direct)
    assert (got.astype(np.float32) == 0).any()
    _compare(
        compiled,
        _sprinkle_specials(rng, go, signed_nans=True),
        idx,
        in_shape,
        dtype,
        params,
        planes,
        nan_sign_free=True,
        disjoint=direct,
    )
    # float32 sums that round differently in another order: 1 + 2^-24 + 2^-24 ...
    tiny = np.where(rng.random(go.shape) < 0.5, np.float32(1.0), np.float32(2.0**-24)).astype(np.float32)
    if dtype == F32:
        _compare(compiled, tiny, idx, in_shape, dtype, params, planes, disjoint=direct)


@pytest.mark.parametrize("depth", [0, 1], ids=["by-slabs", "whole-plane"])
def test_the_sums_order_is_visible_in_the_bits(compiled, depth):
    """Guard for the test above: on one run of one index, 1 + 2^-24 + 2^-24 (left to right:
    1) and 2^-24 + 2^-24 + 1 (1 + 2^-23) differ, so an order change fails the comparison.
    In the depth its window reaches (by slabs) and in another (the whole plane). The k1 s1
    windows are disjoint, but the repeated cells send the plane to the float32 slabs."""
    go = np.array([1.0, 2.0**-24, 2.0**-24, 2.0**-24, 2.0**-24, 1.0], np.float32).reshape(1, 1, 1, 1, 6)
    idx = np.array([0, 0, 0, 1, 1, 1], np.int64).reshape(go.shape) + 3 * depth
    got = _compare(compiled, go, idx, (1, 1, 2, 1, 3), F32, _params(1, 1, 0), slabs=1 - depth)
    assert got.reshape(-1)[3 * depth :][:3].tolist() == [1.0, 1.0 + 2.0**-23, 0.0]


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
    got = _compare(compiled, go, idx, in_shape, dtype, params, slabs=1, disjoint=1)
    placed = got.reshape(-1)[::2]
    finite = np.isfinite(bits.astype(np.float32)) & (bits.view(np.uint16) != 0x8000)
    assert np.array_equal(placed.view(np.uint16)[finite], bits.view(np.uint16)[finite])


def test_direct_float32_gradients_come_back_as_the_sum_gives_them(compiled):
    """float32 written directly: +0 + g is g but for -0 (+0) and signalling NaNs (quietened,
    payload kept), as the reference's sums give; random bit patterns, subnormals among them."""
    rng = np.random.default_rng(seed("direct float32"))
    bits = rng.integers(0, 1 << 32, size=16 * 32 * 32, dtype=np.uint64).astype(np.uint32)
    special = [0x80000000, 0x00000001, 0x807FFFFF, 0x7F800001, 0xFF800001, 0x7FA00000, 0x7FC00001, 0x7F800000]
    bits[: len(special)] = special
    go = bits.view(F32).reshape(1, 1, 16, 32, 32)
    in_shape = (1, 1, 16, 32, 64)
    idx = (np.arange(go.size, dtype=np.int32) * 2 + 1).reshape(go.shape)  # the odd cells along W
    params = _params((1, 1, 2), (1, 1, 2), 0)
    with np.errstate(invalid="ignore"):
        got = _compare(compiled, go, idx, in_shape, F32, params, slabs=1, disjoint=1)
    placed = got.reshape(-1)[1::2].view(np.uint32)
    assert placed[:6].tolist() == [0, 0x00000001, 0x807FFFFF, 0x7FC00001, 0xFFC00001, 0x7FE00000]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_repeated_cell_holding_zero_takes_the_next_gradient_directly(compiled, dtype):
    """The direct path finds a repeated index by the cell it already wrote being nonzero.
    A cell written +0 (from a -0 or +0 gradient) is not found, and needs not be: +0 + g is
    what the float32 sum gives, so the plane stays on the direct path with the reference's
    bits. A nonzero cell hit again sends the plane to the float32 slabs."""
    params = _params((1, 1, 2), (1, 1, 2), 0)
    in_shape = (1, 1, 1, 1, 16)  # eight windows; the indices (the caller's) repeat cells
    idx = np.array([0, 0, 2, 2, 4, 4, 6, 6], np.int32).reshape(1, 1, 1, 1, 8)
    held_zero = np.array([-0.0, 3.0, 0.0, -0.0, -0.0, -0.0, 0.0, np.nan], np.float32).astype(dtype)
    got = _compare(compiled, held_zero.reshape(idx.shape), idx, in_shape, dtype, params, slabs=1, disjoint=1)
    assert got.view(np.uint8).any() and not np.signbit(got.astype(np.float32)[..., :6]).any()
    nonzero_first = np.array([3.0, -0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0], np.float32).astype(dtype)
    _compare(compiled, nonzero_first.reshape(idx.shape), idx, in_shape, dtype, params, slabs=1, disjoint=0)

"""The NumPy max-pool kernels against PyTorch CPU (torch.ops.aten.*), and the tuned paths
against the reference bit for bit.

The reference (pyaclnn.kernels.max_pool3d) and the tuned NumPy paths
(pyaclnn.kernels._tuned.max_pool3d, its arguments grouped as the compiled
kernels take them, called here through ``TUNED`` with the reference's); the ``kernels``
fixture runs a test on each. The tuned paths' chunking, threads and float16
rounding are tested on them alone; calls a plan never makes (empty tensors)
on the reference alone.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from pyaclnn.kernels import max_pool3d as reference
from pyaclnn.kernels._tuned import max_pool3d as tuned
from pyaclnn.kernels.max_pool3d import IndexOutOfPlaneError, pool_output_shape, pool_output_size

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
_LAYOUTS = ["contiguous", "transposed", "stepped", "negative"]
# The tuned forward takes the pooling's parameters grouped, as the compiled kernel does:
# called here with the reference's arguments.
TUNED = SimpleNamespace(
    max_pool3d_with_argmax=lambda x, k, s, p, d, ceil_mode, out, idx: tuned.max_pool3d_with_argmax(
        x, (k, s, p, d), out, idx
    ),
    max_pool3d_with_argmax_backward=tuned.max_pool3d_with_argmax_backward,
)
IMPLEMENTATIONS = {"reference": reference, "tuned": TUNED}


@pytest.fixture(params=list(IMPLEMENTATIONS))
def kernels(request):
    """The reference or the tuned NumPy kernels (called with the reference's arguments)."""
    return IMPLEMENTATIONS[request.param]


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def _layout(a: np.ndarray, kind: str, rng: np.random.Generator) -> np.ndarray:
    """The same values as ``a`` in a differently strided array."""
    if kind == "contiguous":
        return a.copy()
    if kind == "transposed":
        # Stored in reverse axis order: every stride differs from C order and
        # N, C cannot be merged without a copy.
        return np.ascontiguousarray(a.transpose(4, 3, 2, 1, 0)).transpose(4, 3, 2, 1, 0)
    if kind == "stepped":
        big = np.zeros(tuple(2 * n + 1 for n in a.shape), a.dtype)
        view = big[1::2, 1::2, 1::2, 1::2, 1::2]
        view[...] = a
        return view
    if kind == "negative":
        flipped = np.ascontiguousarray(a[::-1, :, ::-1, :, ::-1])
        return flipped[::-1, :, ::-1, :, ::-1]
    raise AssertionError(kind)


def _empty_out(shape: tuple[int, ...], dtype: np.dtype, kind: str) -> np.ndarray:
    """A writable array of ``shape`` that may be a strided view into a larger one."""
    if kind == "contiguous":
        return np.full(shape, 7, dtype)
    if kind == "strided":
        big = np.full(shape[:-1] + (2 * shape[-1] + 1,), 7, dtype)
        return big[..., 1::2]
    if kind == "transposed":
        return np.full(shape[::-1], 7, dtype).transpose(4, 3, 2, 1, 0)
    raise AssertionError(kind)


def _torch_forward(torch, x, k, s, p, d, ceil_mode):
    """PyTorch's values (cast back to x's dtype) and int64 indices.

    float16/bfloat16 inputs run in float32: widening is exact, so maxima,
    ties and NaNs are the same.
    """
    wide = np.float64 if x.dtype == F64 else np.float32
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=wide))
    vals, idx = torch.ops.aten.max_pool3d_with_indices(t, list(k), list(s), list(p), list(d), ceil_mode)
    return vals.numpy().astype(x.dtype), idx.numpy()


def _torch_backward(torch, grad_output, indices, input_shape, k, s, p, d, ceil_mode):
    """PyTorch's gradient in float32 (float64 for float64), not rounded."""
    wide = np.float64 if grad_output.dtype == F64 else np.float32
    go = torch.from_numpy(np.ascontiguousarray(grad_output, dtype=wide))
    idx = torch.from_numpy(np.ascontiguousarray(indices, dtype=np.int64))
    x = torch.zeros(input_shape, dtype=go.dtype)
    res = torch.ops.aten.max_pool3d_with_indices_backward(
        go, x, list(k), list(s), list(p), list(d), ceil_mode, idx
    )
    return res.numpy()


def _ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between same-dtype 16-bit floats."""
    ia = a.view(np.int16).astype(np.int32)
    ib = b.view(np.int16).astype(np.int32)
    # Map sign-magnitude to a monotone integer line.
    ia = np.where(ia < 0, -32768 - ia, ia)
    ib = np.where(ib < 0, -32768 - ib, ib)
    return np.abs(ia - ib)


def _values(rng: np.random.Generator, shape, kind: str) -> np.ndarray:
    """float64 test data: 'normal', 'ties' (small integers), 'nan' or 'neginf'."""
    if kind == "normal":
        return rng.standard_normal(shape)
    x = rng.integers(-2, 3, shape).astype(np.float64)
    u = rng.random(shape)
    if kind == "nan":
        x[u < 0.12] = np.nan
        x[(u >= 0.12) & (u < 0.3)] = -np.inf
    elif kind == "neginf":
        x[u < 0.8] = -np.inf
    return x


def _windows_touch_input(spatial, k, s, p, d, ceil_mode) -> bool:
    """Whether every window holds at least one input cell (with dilation and
    padding a window can fall entirely into the padding)."""
    out = pool_output_shape(spatial, k, s, p, d, ceil_mode)
    for n, o, kk, ss, pp, dd in zip(spatial, out, k, s, p, d):
        for i in range(o):
            if not any(0 <= i * ss - pp + j * dd < n for j in range(kk)):
                return False
    return True


def _random_case(rng: np.random.Generator, touching: bool = False):
    """Random valid pooling parameters and an input shape with a positive
    output; with ``touching``, only cases where every window holds input."""
    while True:
        k = tuple(int(v) for v in rng.integers(1, 4, 3))
        s = tuple(int(v) for v in rng.integers(1, 4, 3))
        p = tuple(int(rng.integers(0, kk // 2 + 1)) for kk in k)
        d = tuple(int(v) for v in rng.choice([1, 1, 2], 3))
        ceil_mode = bool(rng.integers(2))
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4))) + tuple(
            int(v) for v in rng.integers(1, 10, 3)
        )
        if min(pool_output_shape(shape[2:], k, s, p, d, ceil_mode)) > 0 and (
            not touching or _windows_touch_input(shape[2:], k, s, p, d, ceil_mode)
        ):
            return shape, k, s, p, d, ceil_mode


def _forward_cases(count: int, seed: int):
    rng = np.random.default_rng(seed)
    dtypes = [F32, F32, F64, F16, BF16]
    layouts = _LAYOUTS
    outs = ["contiguous", "strided", "transposed"]
    kinds = ["normal", "ties", "ties", "nan", "neginf"]
    cases = []
    for i in range(count):
        shape, k, s, p, d, ceil_mode = _random_case(rng)
        cases.append(
            pytest.param(
                i,
                shape,
                k,
                s,
                p,
                d,
                ceil_mode,
                dtypes[i % len(dtypes)],
                np.dtype(np.int32 if i % 2 else np.int64),
                layouts[i % len(layouts)],
                outs[(i // 2) % len(outs)],
                kinds[i % len(kinds)],
                id=f"{i}-{shape}-k{k}s{s}p{p}d{d}{'-ceil' if ceil_mode else ''}",
            )
        )
    return cases


# Fixed cases worth naming: the last-window rule, size-1 axes, a 4-D
# equivalent batch, flat offsets not increasing in scan order (w reaches 4,
# the next h row starts at 3), dilation with padding.
_NAMED_FORWARD = [
    pytest.param((1, 1, 5, 5, 5), (2, 2, 2), (2, 2, 2), (1, 1, 1), (1, 1, 1), True, id="last-window-rule"),
    pytest.param((1, 2, 7, 6, 5), (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), True, id="ceil-k3s2p1"),
    pytest.param((1, 3, 1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1), False, id="size-1"),
    pytest.param((1, 4, 1, 9, 1), (1, 3, 1), (1, 2, 1), (0, 1, 0), (1, 1, 1), True, id="size-1-axes"),
    pytest.param((1, 5, 6, 7, 8), (2, 3, 2), (2, 1, 2), (1, 1, 0), (1, 1, 1), False, id="batch-of-1"),
    pytest.param(
        (2, 2, 4, 3, 3), (3, 3, 3), (1, 1, 1), (1, 1, 1), (2, 1, 2), False, id="offsets-not-increasing"
    ),
    pytest.param((1, 2, 9, 9, 9), (3, 3, 3), (2, 3, 1), (1, 1, 1), (2, 3, 2), True, id="dilated-padded"),
    pytest.param((2, 3, 8, 8, 8), (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False, id="k2s2"),
    pytest.param((1, 2, 6, 6, 6), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), True, id="k3s1p1-ceil"),
]


# --------------------------------------------------------------------------
# Output size
# --------------------------------------------------------------------------


def test_pool_output_size_applies_the_last_window_rule():
    # floor((5 + 2 - 1 - 1 + 1) / 2) + 1 = 4, but window 4 would start at 6 >= 5 + 1.
    assert pool_output_size(5, 2, 2, 1, 1, True) == 3
    assert pool_output_size(5, 2, 2, 1, 1, False) == 3
    assert pool_output_size(6, 3, 2, 0, 1, True) == 3
    assert pool_output_size(6, 3, 2, 0, 1, False) == 2


def test_pool_output_size_floors_toward_minus_infinity():
    # (2 + 0 - 4 - 1) = -3; -3 // 2 = -2 (not -1), so the size is -1, not 0.
    assert pool_output_size(2, 5, 2, 0, 1, False) == -1


def test_pool_output_shape_matches_pytorch_over_random_parameters(torch):
    rng = np.random.default_rng(1234)
    checked = rule_mattered = 0
    for _ in range(300):
        k = tuple(int(v) for v in rng.integers(1, 6, 3))
        s = tuple(int(v) for v in rng.integers(1, 5, 3))
        p = tuple(int(rng.integers(0, kk // 2 + 1)) for kk in k)
        d = tuple(int(v) for v in rng.integers(1, 4, 3))
        ceil_mode = bool(rng.integers(2))
        spatial = tuple(int(v) for v in rng.integers(1, 14, 3))
        ours = pool_output_shape(spatial, k, s, p, d, ceil_mode)
        x = torch.zeros((1, 1, *spatial))
        if min(ours) <= 0:
            with pytest.raises(RuntimeError):
                torch.ops.aten.max_pool3d_with_indices(x, list(k), list(s), list(p), list(d), ceil_mode)
            continue
        out, _ = torch.ops.aten.max_pool3d_with_indices(x, list(k), list(s), list(p), list(d), ceil_mode)
        assert tuple(out.shape[2:]) == ours, (spatial, k, s, p, d, ceil_mode)
        checked += 1
        for n, kk, ss, pp, dd in zip(spatial, k, s, p, d):
            raw = (n + 2 * pp - dd * (kk - 1) - 1 + (ss - 1 if ceil_mode else 0)) // ss + 1
            rule_mattered += raw != pool_output_size(n, kk, ss, pp, dd, ceil_mode)
    assert checked > 150
    assert rule_mattered > 0  # the sample exercised the last-window rule


# --------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------


def test_forward_matches_the_documented_example(kernels):
    x = np.array([0.0850, -0.5147, -0.0212, -0.5654, -0.3222, 0.5847, 1.7510, 0.9954], np.float32).reshape(
        1, 1, 2, 2, 2
    )
    out = np.zeros((1, 1, 1, 1, 1), np.float32)
    idx = np.zeros((1, 1, 1, 1, 1), np.int32)
    kernels.max_pool3d_with_argmax(x, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False, out, idx)
    assert out.item() == np.float32(1.7510)
    assert idx.item() == 6


@pytest.mark.parametrize(
    "case, shape, k, s, p, d, ceil_mode, dtype, index_dtype, layout, out_layout, kind",
    _forward_cases(60, seed=20260101),
)
def test_forward_matches_pytorch(
    kernels, torch, case, shape, k, s, p, d, ceil_mode, dtype, index_dtype, layout, out_layout, kind
):
    rng = np.random.default_rng(case)
    x = _layout(_values(rng, shape, kind).astype(dtype), layout, rng)
    before = x.copy()
    want_vals, want_idx = _torch_forward(torch, x, k, s, p, d, ceil_mode)
    out = _empty_out(want_vals.shape, dtype, out_layout)
    idx = _empty_out(want_vals.shape, index_dtype, out_layout)

    kernels.max_pool3d_with_argmax(x, k, s, p, d, ceil_mode, out, idx)

    np.testing.assert_array_equal(idx, want_idx.astype(index_dtype))
    np.testing.assert_array_equal(out, want_vals)  # NaN == NaN here
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("shape, k, s, p, d, ceil_mode", _NAMED_FORWARD)
@pytest.mark.parametrize("kind", ["normal", "ties", "nan"])
def test_forward_named_cases_match_pytorch(kernels, torch, shape, k, s, p, d, ceil_mode, kind):
    rng = np.random.default_rng(7)
    x = _values(rng, shape, kind).astype(np.float32)
    want_vals, want_idx = _torch_forward(torch, x, k, s, p, d, ceil_mode)
    out = np.empty(want_vals.shape, np.float32)
    idx = np.empty(want_vals.shape, np.int64)
    kernels.max_pool3d_with_argmax(x, k, s, p, d, ceil_mode, out, idx)
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_array_equal(out, want_vals)


def test_ties_pick_the_first_maximum_in_scan_order(kernels, torch):
    # All equal: every window must report its first in-bounds cell.
    x = np.ones((1, 1, 5, 5, 5), np.float32)
    out = np.empty((1, 1, 3, 3, 3), np.float32)
    idx = np.empty((1, 1, 3, 3, 3), np.int64)
    kernels.max_pool3d_with_argmax(x, (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), False, out, idx)
    _, want = _torch_forward(torch, x, (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), False)
    np.testing.assert_array_equal(idx, want)
    assert idx[0, 0, 1, 1, 1] == 1 * 25 + 1 * 5 + 1  # window (1..3)^3 starts at (1, 1, 1)


def test_nan_picks_the_last_nan_and_beats_larger_numbers(kernels):
    x = np.zeros((1, 1, 2, 2, 2), np.float32)
    x.reshape(-1)[[1, 2, 5]] = [np.nan, 5.0, np.nan]
    x.reshape(-1)[7] = 9.0  # a larger number after the last NaN does not win
    out = np.empty((1, 1, 1, 1, 1), np.float32)
    idx = np.empty((1, 1, 1, 1, 1), np.int32)
    kernels.max_pool3d_with_argmax(x, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False, out, idx)
    assert np.isnan(out.item())
    assert idx.item() == 5


def test_all_minus_inf_window_reports_its_first_in_bounds_cell(kernels, torch):
    x = np.full((1, 1, 4, 4, 4), -np.inf, np.float32)
    out = np.empty((1, 1, 3, 3, 3), np.float32)
    idx = np.empty((1, 1, 3, 3, 3), np.int64)
    kernels.max_pool3d_with_argmax(x, (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), True, out, idx)
    _, want_idx = _torch_forward(torch, x, (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), True)
    assert np.all(out == -np.inf)
    np.testing.assert_array_equal(idx, want_idx)
    assert idx[0, 0, 0, 0, 0] == 0  # the padded corner window starts at cell (0, 0, 0)


def test_window_entirely_in_padding_reports_what_pytorch_reports(kernels, torch):
    # D = 1, kD = 3, dD = 2, pD = 1: the only depth window reads cells -1, 1, 3.
    # PyTorch answers -inf and the cell one dilation right of the window start,
    # which lies outside the plane; the kernel mirrors that.
    args = ((3, 3, 1), (3, 2, 3), (1, 0, 0), (2, 2, 1), True)
    x = np.random.default_rng(0).standard_normal((1, 2, 1, 7, 7)).astype(np.float32)
    want_vals, want_idx = _torch_forward(torch, x, *args)
    out = np.empty(want_vals.shape, np.float32)
    idx = np.empty(want_vals.shape, np.int64)
    kernels.max_pool3d_with_argmax(x, *args, out, idx)
    np.testing.assert_array_equal(out, want_vals)
    np.testing.assert_array_equal(idx, want_idx)
    assert np.all(out == -np.inf) and np.all(idx >= 49)
    # Such indices are then refused by the backward.
    with pytest.raises(IndexOutOfPlaneError):
        kernels.max_pool3d_with_argmax_backward(out, idx, np.empty(x.shape, np.float32))


def test_forward_copies_signed_zeros_exactly(kernels):
    # -0 and +0 compare equal: the first one wins and its sign must survive.
    x = np.array([-0.0, 0.0, 0.0, -0.0], np.float32).reshape(1, 1, 1, 1, 4)
    out = np.empty((1, 1, 1, 1, 2), np.float32)
    idx = np.empty((1, 1, 1, 1, 2), np.int64)
    kernels.max_pool3d_with_argmax(x, (1, 1, 2), (1, 1, 2), (0, 0, 0), (1, 1, 1), False, out, idx)
    np.testing.assert_array_equal(idx.ravel(), [0, 2])
    np.testing.assert_array_equal(np.signbit(out.ravel()), [True, False])


def _force_threads(monkeypatch, threads: int) -> None:
    """Make every call of the tuned kernels use ``threads`` worker threads, however small."""
    monkeypatch.setattr(tuned, "PARALLEL_MIN_WORK", 0)
    monkeypatch.setenv("PYACLNN_NUM_THREADS", str(threads))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("chunk_bytes", [1, 2000, 6000])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_forward_is_the_same_whatever_the_chunking(torch, monkeypatch, chunk_bytes, layout, threads):
    # A plane takes 2720 bytes of scratch: 1 and 2000 chunk a plane by output
    # depth rows (1 and 2 of its 3), 6000 takes two planes at a time, which
    # does not divide N*C = 15. "transposed" cannot merge N and C, so it
    # chunks over C inside each n.
    monkeypatch.setattr(tuned, "_FORWARD_CHUNK_BYTES", chunk_bytes)
    _force_threads(monkeypatch, threads)
    rng = np.random.default_rng(3)
    x = _layout(_values(rng, (3, 5, 5, 6, 7), "ties").astype(np.float32), layout, rng)
    args = ((2, 3, 2), (2, 1, 2), (1, 1, 0), (1, 1, 1), True)
    want_vals, want_idx = _torch_forward(torch, x, *args)
    out = np.empty(want_vals.shape, np.float32)
    idx = np.empty(want_vals.shape, np.int32)
    TUNED.max_pool3d_with_argmax(x, *args, out, idx)
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_array_equal(out, want_vals)


@pytest.mark.parametrize("shape", [(0, 2, 4, 4, 4), (2, 0, 4, 4, 4)])
def test_the_reference_forward_of_an_empty_batch_writes_nothing(shape):
    """Never a plan (phase 1 has nothing to compute), but the reference is plain NumPy."""
    x = np.ones(shape, np.float32)
    out = np.empty((*shape[:2], 2, 2, 2), np.float32)
    idx = np.empty(out.shape, np.int32)
    reference.max_pool3d_with_argmax(x, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False, out, idx)
    assert out.size == 0 and idx.size == 0


# --------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------


def test_backward_matches_the_documented_example(kernels):
    idx = np.array([6], np.int32).reshape(1, 1, 1, 1, 1)
    go = np.array([0.4757], np.float32).reshape(1, 1, 1, 1, 1)
    gi = np.full((1, 1, 2, 2, 2), 3.0, np.float32)
    kernels.max_pool3d_with_argmax_backward(go, idx, gi)
    np.testing.assert_array_equal(gi.ravel(), np.float32([0, 0, 0, 0, 0, 0, 0.4757, 0]))


def _backward_cases(count: int, seed: int):
    rng = np.random.default_rng(seed)
    dtypes = [F32, F16, BF16, F64, F32]
    layouts = _LAYOUTS
    outs = ["contiguous", "strided", "transposed"]
    cases = []
    for i in range(count):
        shape, k, s, p, d, ceil_mode = _random_case(rng, touching=True)
        cases.append(
            pytest.param(
                i,
                shape,
                k,
                s,
                p,
                d,
                ceil_mode,
                dtypes[i % len(dtypes)],
                np.dtype(np.int64 if i % 3 else np.int32),
                layouts[i % len(layouts)],
                outs[(i // 3) % len(outs)],
                id=f"{i}-{shape}-k{k}s{s}p{p}d{d}{'-ceil' if ceil_mode else ''}",
            )
        )
    return cases


def _check_backward(kernels, torch, grad_output, indices, input_shape, args, out_layout="contiguous"):
    """Run the kernel on the given (possibly strided) inputs and compare."""
    dtype = grad_output.dtype
    go_before, idx_before = grad_output.copy(), indices.copy()
    want = _torch_backward(torch, grad_output, indices, input_shape, *args)
    gi = _empty_out(input_shape, dtype, out_layout)
    kernels.max_pool3d_with_argmax_backward(grad_output, indices, gi)
    if dtype in (F32, F64):
        np.testing.assert_allclose(gi, want, rtol=1e-5, atol=1e-6)
    else:
        # The oracle summed in float32; rounding it once must give our result.
        assert _ulp_distance(gi, want.astype(dtype)).max() <= 1
    np.testing.assert_array_equal(grad_output, go_before)
    np.testing.assert_array_equal(indices, idx_before)


@pytest.mark.parametrize(
    "case, shape, k, s, p, d, ceil_mode, dtype, index_dtype, layout, out_layout",
    _backward_cases(50, seed=4242),
)
def test_backward_matches_pytorch(
    kernels, torch, case, shape, k, s, p, d, ceil_mode, dtype, index_dtype, layout, out_layout
):
    rng = np.random.default_rng(case + 1000)
    # Ties make windows share maxima, so positions receive several gradients.
    x = _values(rng, shape, "ties" if case % 2 else "normal").astype(np.float32)
    _, idx = _torch_forward(torch, x, k, s, p, d, ceil_mode)
    go = rng.standard_normal(idx.shape).astype(dtype)
    # indices get another layout than grad_output.
    idx_layout = _LAYOUTS[(_LAYOUTS.index(layout) + 1) % len(_LAYOUTS)]
    _check_backward(
        kernels,
        torch,
        _layout(go, layout, rng),
        _layout(idx.astype(index_dtype), idx_layout, rng),
        shape,
        (k, s, p, d, ceil_mode),
        out_layout,
    )


@pytest.mark.parametrize("shape, k, s, p, d, ceil_mode", _NAMED_FORWARD)
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_backward_named_cases_match_pytorch(kernels, torch, shape, k, s, p, d, ceil_mode, dtype):
    rng = np.random.default_rng(11)
    x = _values(rng, shape, "ties").astype(np.float32)
    _, idx = _torch_forward(torch, x, k, s, p, d, ceil_mode)
    go = rng.standard_normal(idx.shape).astype(dtype)
    _check_backward(kernels, torch, go, idx.astype(np.int32), shape, (k, s, p, d, ceil_mode))


def test_backward_moves_inf_and_nan_like_any_value(kernels, torch):
    idx = np.array([0, 0, 3, 5], np.int64).reshape(1, 1, 1, 1, 4)
    go = np.array([np.inf, 1.0, np.nan, -np.inf], np.float32).reshape(1, 1, 1, 1, 4)
    gi = np.empty((1, 1, 1, 2, 3), np.float32)
    kernels.max_pool3d_with_argmax_backward(go, idx, gi)
    np.testing.assert_array_equal(gi.ravel(), [np.inf, 0, 0, np.nan, 0, -np.inf])


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_backward_accumulates_low_precision_in_float32(kernels, dtype):
    # 1 + 64 * 2^-12: each 2^-12 alone vanishes next to 1 in float16 or
    # bfloat16, but the float32 sum 1.015625 is representable in both.
    go = np.array([1.0] + [2.0**-12] * 64, np.float32).astype(dtype).reshape(1, 1, 1, 1, 65)
    idx = np.zeros(go.shape, np.int32)
    gi = np.empty((1, 1, 1, 1, 3), dtype)
    kernels.max_pool3d_with_argmax_backward(go, idx, gi)
    np.testing.assert_array_equal(gi.astype(np.float32).ravel(), [1.015625, 0, 0])


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("chunk_bytes", [1, 1500, 5000])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_backward_is_the_same_whatever_the_chunking(torch, monkeypatch, chunk_bytes, dtype, threads):
    # A plane takes 2352 bytes of scratch (126 gradients, 210 cells): 1 and
    # 1500 scatter one plane 1 and 2 output depth rows at a time, 5000 takes
    # two planes at a time.
    monkeypatch.setattr(tuned, "_BACKWARD_CHUNK_BYTES", chunk_bytes)
    # With threads, also take the one-np.add.at-per-plane path meant for large planes.
    monkeypatch.setattr(tuned, "_PLANE_AT_MIN", 1 if threads > 1 else 1 << 30)
    _force_threads(monkeypatch, threads)
    rng = np.random.default_rng(5)
    shape = (3, 5, 6, 5, 7)
    args = ((3, 3, 3), (1, 2, 1), (1, 1, 1), (1, 1, 1), True)
    x = _values(rng, shape, "ties").astype(np.float32)
    _, idx = _torch_forward(torch, x, *args)
    go = rng.standard_normal(idx.shape).astype(dtype)
    # Transposed arrays cannot merge N and C: chunks run over C inside each n.
    _check_backward(tuned, torch, _layout(go, "transposed", rng), idx, shape, args, "contiguous")
    _check_backward(tuned, torch, go, idx, shape, args, "transposed")


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_backward_rounds_sums_once_when_few_positions_are_touched(kernels, dtype):
    # 8 gradients into a 64-cell plane: only the touched cells are written.
    # Cell 0 gets three gradients, cell 7 two; cell 5 gets -0, which becomes
    # +0 once added to the zero the plane starts from.
    idx = np.array([0, 0, 0, 3, 5, 7, 7, 9], np.int64).reshape(1, 1, 1, 1, 8)
    go = np.array([1.0, 2.0**-9, 2.0**-9, 4.0, -0.0, np.nan, 1.0, 2.5], np.float32)
    go = go.astype(dtype).reshape(idx.shape)
    gi = np.full((1, 1, 4, 4, 4), 3.0, dtype)
    kernels.max_pool3d_with_argmax_backward(go, idx, gi)
    want = np.zeros(64, np.float32)
    for i, v in zip(idx.ravel(), go.astype(np.float32).ravel()):
        want[i] += v
    want = want.astype(dtype)
    assert _ulp_distance(gi.ravel(), want).max() == 0
    assert not np.signbit(gi.ravel()[5])
    assert np.isnan(gi.ravel()[7])


def test_out_of_plane_index_names_the_first_bad_position_and_writes_nothing(kernels):
    shape = (2, 3, 16, 16, 16)  # D*H*W = 4096
    idx = np.zeros((2, 3, 2, 4, 5), np.int64)
    idx[0, 1, 0, 2, 3] = 4096
    idx[1, 0, 0, 0, 0] = -1  # later in C order
    go = np.ones(idx.shape, np.float32)
    gi = np.full(shape, 5.0, np.float32)
    with pytest.raises(IndexOutOfPlaneError) as err:
        kernels.max_pool3d_with_argmax_backward(go, idx, gi)
    assert isinstance(err.value, ValueError)
    assert str(err.value).startswith(
        "indices[0, 1, 0, 2, 3] = 4096 is outside its (n, c) plane of D*H*W = 4096 elements"
    )
    assert "[0, 4096)" in str(err.value)
    assert np.all(gi == 5.0)


def test_negative_index_is_out_of_plane_too(kernels):
    idx = np.zeros((1, 2, 1, 1, 3), np.int32)
    idx[0, 1, 0, 0, 1] = -7
    gi = np.full((1, 2, 2, 2, 2), 5.0, np.float16)
    with pytest.raises(IndexOutOfPlaneError, match=re.escape("indices[0, 1, 0, 0, 1] = -7 is outside")):
        kernels.max_pool3d_with_argmax_backward(np.ones(idx.shape, np.float16), idx, gi)
    assert np.all(gi == 5.0)


def test_the_reference_backward_with_no_gradients_zero_fills_grad_input():
    gi = np.full((1, 2, 3, 3, 3), 5.0, np.float32)
    empty = np.empty((1, 2, 0, 2, 2))
    reference.max_pool3d_with_argmax_backward(empty.astype(np.float32), empty.astype(np.int32), gi)
    assert np.all(gi == 0)


def test_the_reference_backward_of_an_empty_batch_writes_nothing():
    gi = np.empty((0, 2, 3, 3, 3), np.float32)
    go = np.empty((0, 2, 2, 2, 2), np.float32)
    reference.max_pool3d_with_argmax_backward(go, go.astype(np.int64), gi)
    assert gi.size == 0


def test_float32_to_float16_by_integer_rounding_equals_numpys_cast():
    """The tuned backward rounds its float16 sums by integer arithmetic (NumPy's cast
    converts one element at a time, half the speed): the same bits as the cast."""
    # Every float16, the float32 midpoints between neighbours (ties to even)
    # and their float32 neighbours, the subnormal and overflow edges, and
    # random bit patterns (NaN included).
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = np.sort(halves[np.isfinite(halves)].astype(np.float32))
    mid = (finite[:-1].astype(np.float64) + finite[1:]) / 2
    mid = mid[np.abs(mid) < 2**16].astype(np.float32)
    edges = np.array([65504, 65519.996, 65520, 65536, 2.0**-14, 2.0**-24, 2.0**-25, np.inf], np.float32)
    rng = np.random.default_rng(3)
    random_bits = rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint32).view(np.float32)
    values = np.concatenate(
        [
            finite,
            mid,
            np.nextafter(mid, np.float32(np.inf)),
            np.nextafter(mid, np.float32(-np.inf)),
            edges,
            -edges,
            random_bits,
        ]
    ).astype(np.float32)
    with np.errstate(over="ignore"):
        want = values.astype(np.float16).view(np.uint16)
    got = tuned._float_to_half_bits(values)
    nan = np.isnan(values)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.isnan(got[nan].view(np.float16)).all()


# --------------------------------------------------------------------------
# The tuned paths against the reference
# --------------------------------------------------------------------------


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64], ids=str)
def test_the_tuned_paths_give_the_references_bits(dtype):
    """Forward and backward over random parameters, ties, NaN and -inf: every output bit,
    every index, every rounded sum."""
    rng = np.random.default_rng(20261203)
    done = 0
    while done < 60:
        shape, k, s, p, d, ceil_mode = _random_case(rng)
        x = _values(rng, shape, ("normal", "ties", "nan", "neginf")[done % 4]).astype(dtype)
        out_shape = shape[:2] + pool_output_shape(shape[2:], k, s, p, d, ceil_mode)
        results = []
        for impl in (reference, TUNED):
            out, idx = np.empty(out_shape, dtype), np.empty(out_shape, np.int32)
            impl.max_pool3d_with_argmax(x, k, s, p, d, ceil_mode, out, idx)
            results.append((out, idx))
        (ref_out, ref_idx), (out, idx) = results
        assert np.array_equal(_bits(out), _bits(ref_out)) and np.array_equal(idx, ref_idx), (
            shape,
            k,
            s,
            p,
            d,
        )
        if (
            ref_idx < np.prod(shape[2:])
        ).all():  # windows over padding only give indices the backward refuses
            go = rng.standard_normal(out_shape).astype(dtype)
            grads = []
            for impl in (reference, TUNED):
                gi = np.full(shape, 7, dtype)
                impl.max_pool3d_with_argmax_backward(go, ref_idx, gi)
                grads.append(gi)
            assert np.array_equal(_bits(grads[0]), _bits(grads[1])), (shape, k, s, p, d)
        done += 1


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("repeats", [False, True], ids=["lone", "some-repeated"])
def test_the_tuned_16_bit_backward_gives_lone_gradients_as_the_float32_sum_does(dtype, repeats):
    """Every 16-bit pattern as a gradient alone in its cell (as with disjoint windows): the
    tuned path copies its bits, but -0 and NaN are what +0 + g in float32 gives (+0; the
    NaN quietened, bfloat16's 0x7FC0), the reference's bits; also with a few cells summing
    two gradients (their sums rounded once)."""
    # small planes, so that chunks of whole planes take the path that copies the bits
    go = np.arange(1 << 16, dtype=np.uint16).view(dtype).reshape(1, 64, 1, 32, 32)
    idx = np.broadcast_to(np.arange(1024, dtype=np.int64) * 2, (64, 1024)).reshape(go.shape).copy()
    if repeats:
        idx.reshape(-1)[1:200:7] = idx.reshape(-1)[:199:7]  # a few cells get two gradients
    expected, got = np.empty((2, 1, 64, 1, 32, 64), dtype)
    reference.max_pool3d_with_argmax_backward(go, idx, expected)
    tuned.max_pool3d_with_argmax_backward(go, idx, got)
    assert np.array_equal(_bits(got), _bits(expected))
    nan = np.isnan(go.astype(np.float32))
    signalling = nan & (go.view(np.uint16) & (0x0200 if dtype == F16 else 0x0040) == 0)
    assert signalling.any()  # the case the copy alone gets wrong

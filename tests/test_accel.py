"""The compiled CPU kernels (pyaclnn.kernels._accel) against the reference kernels, bit for bit.

The compiled kernels run as the numpy backend runs them, through its kernel
choice (pyaclnn.backends.numpy._kernels) with a plan; the reference is
pyaclnn.kernels.max_pool3d, the plain NumPy specification.

Max-pool backward sums every (n, c) plane in float32 in the C order of
grad_output in both implementations, so the comparisons are exact
(``_same_bits``); no tolerance is needed. The one exception: a cell that adds
two NaNs of different sign keeps either (IEEE 754 leaves it open, compilers
swap the operands of +), so where NaNs of both signs meet, NaN positions must
agree and every other cell bit for bit (``nan_sign_free``).

The tests that need the library skip, naming the reason, only when it cannot
be built (no compiler, a failed build); with PYACLNN_REQUIRE_ACCEL=1 (CI) they
fail instead. PYACLNN_ACCEL=0 in the environment does not turn them off.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import threading

import ml_dtypes
import numpy as np
import pytest
from reproducible import seed

from pyaclnn.backends.numpy import _kernels
from pyaclnn.dtypes import compute_dtype
from pyaclnn.kernels import _accel
from pyaclnn.kernels import max_pool3d as reference
from pyaclnn.kernels.checks import IndexOutOfPlaneError, MaxPoolPlan, PoolParams

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
DTYPES = [F32, F16, BF16]
INDEX_DTYPES = [np.dtype(np.int32), np.dtype(np.int64)]


# --------------------------------------------------------------------------
# Fixtures and helpers
# --------------------------------------------------------------------------


class _Recorder:
    """The cffi library, counting the calls of its max-pool backward."""

    def __init__(self, lib) -> None:
        self._lib = lib
        self.calls = 0

    def pyaclnn_max_pool3d_backward(self, *args):
        self.calls += 1
        return self._lib.pyaclnn_max_pool3d_backward(*args)

    def __getattr__(self, name):
        return getattr(self._lib, name)


def library_or_skip(monkeypatch):
    """The compiled kernels' library, switched on; skips only if it cannot be built
    (fails instead under PYACLNN_REQUIRE_ACCEL=1). Shared by the compiled-kernel tests."""
    monkeypatch.delenv("PYACLNN_ACCEL", raising=False)
    lib = _accel.library()
    if lib is None:
        reason = _accel.accel_status()["reason"]
        if os.environ.get("PYACLNN_REQUIRE_ACCEL") == "1":
            pytest.fail(f"PYACLNN_REQUIRE_ACCEL=1 but the compiled kernels are unavailable: {reason}")
        pytest.skip(f"compiled kernels unavailable: {reason}")
    return lib


@pytest.fixture
def compiled(monkeypatch) -> _Recorder:
    """The compiled kernels switched on, their backward calls counted; skips only if unbuildable."""
    recorder = _Recorder(library_or_skip(monkeypatch))
    monkeypatch.setattr(_accel._loaded, "lib", recorder)
    return recorder


def pool_plan(x_shape, out_shape, dtype, params=None, index_dtype=np.int32) -> MaxPoolPlan:
    """The plan of a max-pool call on 5-D arrays of these shapes (as the checks would make
    it, without their dtype rules: float64 and int64 indices too). Shared with
    tests/test_accel_pool_forward.py."""
    k, s, p, d, ceil = params or ((1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1), False)
    return MaxPoolPlan(
        PoolParams(tuple(k), tuple(s), tuple(p), tuple(d), bool(ceil)),
        True,
        tuple(x_shape),
        tuple(out_shape),
        compute_dtype(np.dtype(dtype)),
        np.dtype(index_dtype),
    )


def max_pool3d_with_argmax_backward(go: np.ndarray, idx: np.ndarray, gi: np.ndarray) -> str:
    """The backward as the numpy backend runs it (the compiled kernel where it takes the call)."""
    return _kernels.max_pool3d_with_argmax_backward(pool_plan(gi.shape, go.shape, gi.dtype), go, idx, gi)


def _numpy_backward(go: np.ndarray, idx: np.ndarray, gi: np.ndarray) -> None:
    """The reference kernel."""
    reference.max_pool3d_with_argmax_backward(go, idx, gi)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))
    )


def _strided(a: np.ndarray, kind: str) -> np.ndarray:
    """The same values as ``a`` in a differently strided array (a view)."""
    if kind == "contiguous":
        return a.copy()
    if kind == "transposed":  # reverse axis order: N and C cannot merge
        return np.ascontiguousarray(a.transpose(4, 3, 2, 1, 0)).transpose(4, 3, 2, 1, 0)
    if kind == "stepped":
        big = np.zeros(tuple(2 * n + 1 for n in a.shape), a.dtype)
        view = big[1::2, 1::2, 1::2, 1::2, 1::2]
        view[...] = a
        return view
    if kind == "negative":
        return np.ascontiguousarray(a[::-1, :, ::-1, :, ::-1])[::-1, :, ::-1, :, ::-1]
    raise AssertionError(kind)


def _output(shape: tuple[int, ...], dtype: np.dtype, kind: str) -> np.ndarray:
    """A writable array of ``shape`` full of 7s, possibly a strided view."""
    if kind == "contiguous":
        return np.full(shape, 7, dtype)
    if kind == "strided":
        return np.full(shape[:-1] + (2 * shape[-1] + 1,), 7, dtype)[..., 1::2]
    if kind == "transposed":
        return np.full(shape[::-1], 7, dtype).transpose(4, 3, 2, 1, 0)
    raise AssertionError(kind)


def _random_case(rng, in_shape, out_spatial, dtype, index_dtype, collide: bool = True):
    """grad_output and indices for ``in_shape``; indices from a few cells when ``collide``."""
    plane = int(np.prod(in_shape[2:]))
    out_shape = in_shape[:2] + tuple(out_spatial)
    go = rng.standard_normal(out_shape, dtype=np.float32).astype(dtype)
    high = max(1, plane // 4) if collide else plane
    idx = rng.integers(0, high, out_shape).astype(index_dtype)
    return go, idx


def _compare(go, idx, in_shape, dtype, out_kind="contiguous", nan_sign_free=False):
    """Run both kernels into fresh outputs; assert the same bits; return the compiled output."""
    expected = np.full(in_shape, 7, dtype)
    _numpy_backward(go, idx, expected)
    got = _output(in_shape, dtype, out_kind)
    max_pool3d_with_argmax_backward(go, idx, got)
    if nan_sign_free:
        nan = np.isnan(expected.astype(np.float32))
        assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
        got, expected = np.where(nan, 0, got).astype(dtype), np.where(nan, 0, expected).astype(dtype)
    assert _same_bits(got, expected)
    return got


# --------------------------------------------------------------------------
# Random matrices, layouts
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("collide", [True, False], ids=["colliding", "spread"])
def test_random_matrices_match_numpy_bit_for_bit(compiled, dtype, index_dtype, collide):
    rng = np.random.default_rng(seed(dtype, index_dtype, collide))
    for in_shape, out_spatial in [
        ((2, 3, 4, 5, 6), (3, 4, 5)),
        ((1, 5, 6, 9, 7), (6, 9, 7)),
        ((3, 2, 2, 3, 17), (5, 1, 9)),
    ]:
        go, idx = _random_case(rng, in_shape, out_spatial, dtype, index_dtype, collide)
        _compare(go, idx, in_shape, dtype)
    assert compiled.calls == 3


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("in_kind", ["transposed", "stepped", "negative"])
@pytest.mark.parametrize("out_kind", ["contiguous", "strided", "transposed"])
def test_non_contiguous_inputs_and_outputs(compiled, dtype, in_kind, out_kind):
    rng = np.random.default_rng(5)
    in_shape = (2, 3, 4, 6, 5)
    go, idx = _random_case(rng, in_shape, (3, 5, 4), dtype, np.int32)
    _compare(_strided(go, in_kind), _strided(idx, in_kind), in_shape, dtype, out_kind)
    assert compiled.calls == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_indices_from_the_forward_on_several_threads(compiled, dtype, monkeypatch):
    """Large enough to use the worker threads; any thread count gives the same bits."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 8, 8, 24, 24), dtype=np.float32).astype(dtype)
    out_shape = (2, 8) + reference.pool_output_shape(
        x.shape[2:], (3,) * 3, (1,) * 3, (1,) * 3, (1,) * 3, True
    )
    o, idx = np.empty(out_shape, dtype), np.empty(out_shape, np.int32)
    reference.max_pool3d_with_argmax(x, (3,) * 3, (1,) * 3, (1,) * 3, (1,) * 3, True, o, idx)
    go = rng.standard_normal(out_shape, dtype=np.float32).astype(dtype)
    expected = _compare(go, idx, x.shape, dtype)
    for threads in ("1", "3", "7"):
        monkeypatch.setenv("PYACLNN_NUM_THREADS", threads)
        got = np.empty(x.shape, dtype)
        max_pool3d_with_argmax_backward(go, idx, got)
        assert _same_bits(got, expected)


def test_concurrent_calls_from_several_python_threads(compiled):
    """One call holds the workers; the others run in their own thread (never wait, never mix)."""
    rng = np.random.default_rng(3)
    in_shape = (4, 8, 8, 32, 32)
    go, idx = _random_case(rng, in_shape, (4, 16, 16), F32, np.int32)
    expected = np.empty(in_shape, F32)
    _numpy_backward(go, idx, expected)
    results = [np.empty(in_shape, F32) for _ in range(4)]
    threads = [threading.Thread(target=max_pool3d_with_argmax_backward, args=(go, idx, r)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(_same_bits(r, expected) for r in results)


def _child_backward(queue) -> None:
    go = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    idx = np.zeros((1, 1, 2, 2, 2), np.int32)
    gi = np.empty((1, 1, 2, 2, 2), np.float32)
    os.environ["PYACLNN_NUM_THREADS"] = "2"
    max_pool3d_with_argmax_backward(go, idx, gi)
    queue.put(float(gi.reshape(-1)[0]))


def test_a_forked_child_gets_its_own_workers(compiled):
    rng = np.random.default_rng(4)
    in_shape = (4, 8, 8, 32, 32)
    go, idx = _random_case(rng, in_shape, (4, 16, 16), F32, np.int32)
    max_pool3d_with_argmax_backward(go, idx, np.empty(in_shape, F32))  # the parent's workers exist
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_backward, args=(queue,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == 36.0


# --------------------------------------------------------------------------
# Edge shapes and values
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "in_shape, out_spatial",
    [
        ((0, 3, 2, 2, 2), (1, 1, 1)),  # no planes
        ((2, 0, 2, 2, 2), (1, 1, 1)),
        ((2, 3, 2, 2, 2), (0, 1, 1)),  # no gradients: zeros
        ((2, 3, 1, 1, 1), (1, 1, 1)),  # one-element planes
        ((3, 5, 1, 1, 1), (2, 3, 4)),  # one-element planes, many gradients each
        ((1, 1, 1, 1, 1), (1, 1, 1)),
        ((1, 2, 1, 1, 40000), (1, 1, 1)),  # a long row, one gradient
    ],
)
def test_edge_shapes(compiled, dtype, in_shape, out_spatial):
    rng = np.random.default_rng(7)
    go, idx = _random_case(rng, in_shape, out_spatial, dtype, np.int64)
    _compare(go, idx, in_shape, dtype)
    assert compiled.calls == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_indices_equal(compiled, dtype):
    """One run of a single index per plane: the running sum kept in a register."""
    rng = np.random.default_rng(8)
    in_shape = (2, 3, 4, 4, 4)
    go = rng.standard_normal((2, 3, 5, 6, 7), dtype=np.float32).astype(dtype)
    for cell in (0, 63):
        _compare(go, np.full(go.shape, cell, np.int32), in_shape, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_inf_and_signed_zeros(compiled, dtype):
    values = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -np.nan, 3.5], np.float32)
    rng = np.random.default_rng(9)
    in_shape = (2, 2, 2, 3, 4)
    go = rng.choice(values, size=(2, 2, 3, 3, 4)).astype(dtype)
    for high in (24, 6, 1):  # cells hit once (-0 must give +0), a few times, all at one
        idx = rng.integers(0, high, go.shape).astype(np.int32)
        _compare(go, idx, in_shape, dtype, nan_sign_free=True)
    # one NaN flavour and no inf - inf (which makes the other): bit for bit
    go = np.where(np.isnan(go.astype(np.float32)) | (go.astype(np.float32) == -np.inf), np.nan, go)
    _compare(go.astype(dtype), rng.integers(0, 6, go.shape).astype(np.int32), in_shape, dtype)
    # inf + -inf in one cell, -0 alone in another
    go = np.array([np.inf, -np.inf, -0.0], np.float32).astype(dtype).reshape(1, 1, 1, 1, 3)
    got = _compare(go, np.array([0, 0, 1], np.int32).reshape(go.shape), (1, 1, 1, 1, 2), dtype)
    assert np.isnan(got.astype(np.float32).reshape(-1)[0])
    assert got.view(np.uint8 if dtype == F32 else np.uint16).reshape(-1)[-1] == 0


@pytest.mark.parametrize(
    "dtype, parts, expected",
    [
        # float16: 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to even (1); 1 + 3*2^-11 up.
        (F16, [1.0, 2.0**-11], 1.0),
        (F16, [1.0, 2.0**-11, 2.0**-10], 1.0 + 2.0**-9),
        (F16, [2048.0, 1.0], 2048.0),  # 2049: halfway, to the even 2048
        (F16, [2050.0, 1.0], 2052.0),  # 2051: halfway, to the even 2052
        (F16, [65504.0, 16.0], np.inf),  # 65520 rounds to inf
        # bfloat16: 1 + 2^-8 is halfway: to even (1); 1 + 3*2^-8 up to 1 + 2^-6.
        (BF16, [1.0, 2.0**-8], 1.0),
        (BF16, [1.0, 2.0**-8, 2.0**-7], 1.0 + 2.0**-6),
        (BF16, [1.0 + 2.0**-7, 2.0**-8], 1.0 + 2.0**-6),  # halfway above an odd value: up
    ],
)
def test_rounding_ties_round_once_to_even(compiled, dtype, parts, expected):
    go = np.array(parts, np.float32).astype(dtype).reshape(1, 1, 1, 1, -1)
    assert np.array_equal(go.astype(np.float32).reshape(-1), np.array(parts, np.float32))  # exact inputs
    got = _compare(go, np.zeros(go.shape, np.int64), (1, 1, 1, 1, 2), dtype)
    assert got.astype(np.float32).reshape(-1)[0] == np.float32(expected)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_random_sums_round_like_numpy(compiled, dtype):
    """Many two- and three-term float32 sums over the whole range, rounded to 16 bits."""
    rng = np.random.default_rng(12)
    bits = rng.integers(0, 1 << 16, size=3 * 4096, dtype=np.uint16)
    go = bits.view(dtype).reshape(1, 1, 3, 64, 64)
    go = np.where(np.isnan(go.astype(np.float32)), np.zeros((), dtype), go)  # payloads: see the module
    idx = rng.integers(0, 4096, go.shape).astype(np.int32)
    _compare(go, idx, (1, 1, 1, 64, 64), dtype)


# --------------------------------------------------------------------------
# The index guard
# --------------------------------------------------------------------------


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("bad_value", [-1, 64, 2**31 - 1])
def test_index_guard_same_message_nothing_written(compiled, index_dtype, bad_value, monkeypatch):
    rng = np.random.default_rng(13)
    in_shape = (4, 16, 4, 4, 4)  # 64 cells per plane; large enough for several threads
    go, idx = _random_case(rng, in_shape, (16, 16, 16), F32, index_dtype)
    idx[3, 5, 1, 2, 3] = bad_value  # a later plane
    idx[1, 9, 7, 0, 1] = bad_value  # the first bad one in C order
    idx[1, 9, 9, 0, 0] = -5
    expected = pytest.raises(IndexOutOfPlaneError)
    with expected as numpy_error:
        _numpy_backward(go, idx, np.empty(in_shape, F32))
    for threads in ("1", "2", "4"):
        monkeypatch.setenv("PYACLNN_NUM_THREADS", threads)
        gi = np.full(in_shape, 7, F32)
        with pytest.raises(IndexOutOfPlaneError) as error:
            max_pool3d_with_argmax_backward(go, idx, gi)
        assert str(error.value) == str(numpy_error.value)
        assert "indices[1, 9, 7, 0, 1]" in str(error.value)
        assert (gi == 7).all()
    assert compiled.calls == 3


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("bad_value", [-1, 4096, 2**31 - 1, -(2**31)])
def test_index_guard_scans_alike_with_and_without_avx2(conversion, index_dtype, bad_value):
    """The contiguous scan has a baseline and an AVX2 build (use_f16c switches both):
    each finds the same first bad index, in any plane and at either end of one."""
    rng = np.random.default_rng(22)
    in_shape = (2, 3, 16, 16, 16)  # 4096 cells per plane
    go, idx = _random_case(rng, in_shape, (8, 8, 8), F32, index_dtype)
    _compare(go, idx, in_shape, F32)  # no bad index: both kernels run
    for where in [(0, 0, 0, 0, 0), (1, 2, 7, 7, 7), (1, 1, 3, 4, 5)]:
        bad = idx.copy()
        bad[where] = bad_value
        gi = np.full(in_shape, 7, F32)
        with pytest.raises(IndexOutOfPlaneError, match=re.escape(f"indices[{', '.join(map(str, where))}]")):
            max_pool3d_with_argmax_backward(go, bad, gi)
        assert (gi == 7).all()


def test_index_guard_checks_every_plane_before_any_thread_writes(compiled, monkeypatch):
    """One parallel task checks and then scatters: a thread out of planes to check
    must wait for the others' checks, so a bad index in the last plane still
    leaves grad_input untouched."""
    rng = np.random.default_rng(21)
    in_shape = (4, 64, 8, 8, 8)  # 256 planes, ~1M indices: the threads check side by side
    go, idx = _random_case(rng, in_shape, (16, 16, 16), F32, np.int32)
    idx[-1, -1, -1, -1, -1] = 512  # the last index of the last plane: one past its end
    for threads in ("2", "3"):
        monkeypatch.setenv("PYACLNN_NUM_THREADS", threads)
        for _ in range(10):
            gi = np.full(in_shape, 7, F32)
            with pytest.raises(IndexOutOfPlaneError, match=r"indices\[3, 63, 15, 15, 15\] = 512"):
                max_pool3d_with_argmax_backward(go, idx, gi)
            assert (gi == 7).all()
    assert compiled.calls == 20


# --------------------------------------------------------------------------
# Switching, status, conversions
# --------------------------------------------------------------------------


def test_pyaclnn_accel_0_really_uses_numpy(compiled, monkeypatch):
    rng = np.random.default_rng(14)
    go, idx = _random_case(rng, (1, 2, 3, 4, 5), (2, 3, 4), F16, np.int32)
    monkeypatch.setenv("PYACLNN_ACCEL", "0")
    max_pool3d_with_argmax_backward(go, idx, np.empty((1, 2, 3, 4, 5), F16))
    assert compiled.calls == 0
    status = _accel.accel_status()
    assert status["active"] is False and status["reason"] == "PYACLNN_ACCEL=0"
    assert set(status["kernels"].values()) == {"numpy"}
    monkeypatch.delenv("PYACLNN_ACCEL")
    max_pool3d_with_argmax_backward(go, idx, np.empty((1, 2, 3, 4, 5), F16))
    assert compiled.calls == 1
    assert _accel.accel_status()["kernels"] == dict.fromkeys(_accel.KERNELS, "compiled")


def test_float64_and_mixed_dtypes_stay_with_numpy(compiled):
    rng = np.random.default_rng(15)
    go, idx = _random_case(rng, (1, 2, 3, 4, 5), (2, 3, 4), np.float64, np.int32)
    max_pool3d_with_argmax_backward(go, idx, np.empty((1, 2, 3, 4, 5), np.float64))
    assert compiled.calls == 0


def test_the_numpy_backend_runs_the_compiled_kernel(compiled):
    import pyaclnn

    rng = np.random.default_rng(16)
    x = rng.standard_normal((1, 2, 4, 4, 4), dtype=np.float32)
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, 2, 0, 1, False, backend="numpy")
    go = rng.standard_normal(out.shape, dtype=np.float32)
    gi = pyaclnn.max_pool3d_with_argmax_backward(go, x, idx, 2, 2, 0, 1, False, backend="numpy")
    expected = np.empty(x.shape, np.float32)
    _numpy_backward(go, np.asarray(idx.to_host() if hasattr(idx, "to_host") else idx), expected)
    host = gi.to_host() if hasattr(gi, "to_host") else np.asarray(gi)
    assert _same_bits(np.asarray(host), expected)
    assert compiled.calls == 1


@pytest.fixture
def f16c(compiled):
    """Hardware conversion on (skips without F16C); software again afterwards if it was."""
    before = _accel.use_f16c()
    if not _accel.use_f16c(True):
        pytest.skip("this CPU has no F16C: only the software conversion exists")
    yield
    _accel.use_f16c(before)


def _convert_both_ways(ffi, lib, halves: np.ndarray, floats: np.ndarray):
    widened = np.empty(halves.size, np.float32)
    narrowed = np.empty(floats.size, np.uint16)
    buffer = ffi.from_buffer
    lib.pyaclnn_accel_half_to_float(buffer("uint16_t[]", halves), buffer("float[]", widened), halves.size)
    lib.pyaclnn_accel_float_to_half(buffer("float[]", floats), buffer("uint16_t[]", narrowed), floats.size)
    return widened.view(np.uint32), narrowed


def test_f16c_and_software_conversions_give_the_same_bits(f16c):
    ffi, lib = _accel._loaded.ffi, _accel._loaded.lib
    halves = np.arange(1 << 16, dtype=np.uint16)  # every float16
    rng = np.random.default_rng(17)
    floats = np.concatenate(
        [
            rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32),
            # around every float16 rounding boundary: the halfway points and their neighbours
            (
                (halves.astype(np.uint32) << 13)[:, None] + np.array([0xFFF, 0x1000, 0x1001], np.uint32)
            ).ravel(),
            np.arange(0x33000000 - 4, 0x38800000 + 4, 997, dtype=np.uint32),  # the subnormal range
        ]
    ).view(np.float32)
    hardware = _convert_both_ways(ffi, lib, halves, floats)
    assert _accel.use_f16c(False) is False
    software = _convert_both_ways(ffi, lib, halves, floats)
    assert np.array_equal(hardware[0], software[0])
    assert np.array_equal(hardware[1], software[1])
    # and both are NumPy's conversions outside NaN (NumPy keeps NaN payloads unquietened)
    finite = ~np.isnan(floats)
    with np.errstate(over="ignore"):
        assert np.array_equal(software[1][finite], floats[finite].astype(np.float16).view(np.uint16))
    not_nan = ~np.isnan(halves.view(np.float16))
    numpy_widened = halves.view(np.float16)[not_nan].astype(np.float32).view(np.uint32)
    assert np.array_equal(software[0][not_nan], numpy_widened)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("in_shape", [(2, 4, 4, 16, 16), (2, 4, 16, 64, 64)], ids=["small", "whole-plane"])
def test_software_conversion_kernel_matches(f16c, dtype, in_shape):
    rng = np.random.default_rng(18)
    go, idx = _random_case(rng, in_shape, (4, 16, 16), dtype, np.int32)
    hardware = _compare(go, idx, in_shape, dtype)
    _accel.use_f16c(False)
    software = _compare(go, idx, in_shape, dtype)
    assert _same_bits(hardware, software)


# --------------------------------------------------------------------------
# Large outputs: whole planes written with streaming stores
# --------------------------------------------------------------------------
# From 1 MiB of grad_input on (STREAM_MIN_BYTES in the C source), a
# C-contiguous plane is summed in a float32 scratch plane and written in one
# pass with streaming stores: float32 copied, float16 converted by F16C,
# bfloat16 by AVX2 lanes. Below it, or with strided planes, or with the
# hardware conversion switched off (16 bits), row by row; small float32
# outputs are summed in place. All must give the NumPy kernel's bits.

STREAM_CASES = [
    ((2, 5, 17, 63, 61), (9, 32, 31)),  # odd planes: each plane starts unaligned, ragged tails
    ((1, 2, 64, 64, 64), (32, 32, 32)),  # aligned planes
]


@pytest.fixture(params=["hardware", "software"])
def conversion(request, compiled):
    """F16C (and AVX2 bfloat16) conversions on, or the software ones; restored afterwards."""
    before = _accel.use_f16c()
    if request.param == "hardware" and not _accel.use_f16c(True):
        pytest.skip("this CPU has no F16C: only the software conversion exists")
    if request.param == "software":
        assert _accel.use_f16c(False) is False
    yield request.param
    _accel.use_f16c(before)


def _sprinkle_specials(rng, go: np.ndarray, signed_nans: bool) -> np.ndarray:
    """``go`` with about 1% NaN, +-Inf, +-0 and float16/bfloat16 halfway parts."""
    values = [np.nan, np.inf, -np.inf, -0.0, 0.0, 2.0**-11, 2.0**-8, 2048.0, 65504.0, 1.0]
    if signed_nans:
        values.append(-np.nan)
    flat = go.reshape(-1).astype(np.float32)
    where = rng.random(flat.size) < 0.01
    flat[where] = rng.choice(np.array(values, np.float32), size=int(where.sum()))
    return flat.astype(go.dtype).reshape(go.shape)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("case", range(len(STREAM_CASES)))
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # sums beyond float16: inf
def test_large_16_bit_outputs_match_numpy(conversion, dtype, index_dtype, case):
    """Touched and untouched (+0) cells, colliding sums, NaN/Inf, ties; any plane alignment."""
    in_shape, out_spatial = STREAM_CASES[case]
    assert int(np.prod(in_shape)) * 2 >= 1 << 20  # the whole-plane path
    rng = np.random.default_rng(seed(dtype, index_dtype, case))
    go, idx = _random_case(rng, in_shape, out_spatial, dtype, index_dtype, collide=True)
    got = _compare(_sprinkle_specials(rng, go, signed_nans=True), idx, in_shape, dtype, nan_sign_free=True)
    assert (got.astype(np.float32) == 0).any()  # untouched cells
    _compare(_sprinkle_specials(rng, go, signed_nans=False), idx, in_shape, dtype)  # no -inf: bit for bit
    # every 16-bit pattern but NaN as gradients: two- and more-term sums all over the range
    bits = rng.integers(0, 1 << 16, size=go.size, dtype=np.uint16).view(dtype).reshape(go.shape)
    bits = np.where(np.isnan(bits.astype(np.float32)), np.zeros((), dtype), bits)
    _compare(bits, idx, in_shape, dtype, nan_sign_free=True)  # inf - inf makes the other NaN


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_large_16_bit_outputs_all_indices_equal(conversion, dtype):
    """One touched cell per plane (the first or the last), the rest +0."""
    rng = np.random.default_rng(19)
    in_shape, out_spatial = STREAM_CASES[0]
    go = rng.standard_normal(in_shape[:2] + out_spatial, dtype=np.float32).astype(dtype)
    plane = int(np.prod(in_shape[2:]))
    for cell in (0, plane - 1):
        got = _compare(go, np.full(go.shape, cell, np.int32), in_shape, dtype)
        flat = got.reshape(in_shape[0] * in_shape[1], plane)
        assert not flat[:, 1:-1].astype(np.float32).any()


def _same_bits_in_strided_outputs(go, idx, in_shape, dtype, reference) -> None:
    """The row-by-row stores (a strided and a transposed grad_input) give ``reference``'s bits."""
    for kind in ("strided", "transposed"):
        got = _output(in_shape, dtype, kind)
        max_pool3d_with_argmax_backward(go, idx, got)
        assert _same_bits(got, reference), kind


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_large_16_bit_outputs_same_bits_in_every_path(conversion, dtype):
    """Whole-plane (contiguous) and row-by-row (strided, transposed) stores agree."""
    rng = np.random.default_rng(20)
    in_shape, out_spatial = STREAM_CASES[0]
    go, idx = _random_case(rng, in_shape, out_spatial, dtype, np.int64)
    go = _sprinkle_specials(rng, go, signed_nans=False)
    _same_bits_in_strided_outputs(go, idx, in_shape, dtype, _compare(go, idx, in_shape, dtype))


# planes summed in scratch go two at a time (given 4 a thread): 9 leave one alone
FLOAT32_STREAM_CASES = [*STREAM_CASES, ((1, 9, 16, 64, 64), (8, 32, 32))]


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("case", range(len(FLOAT32_STREAM_CASES)))
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf + -inf in a cell
def test_large_float32_outputs_match_numpy_streamed_or_not(compiled, index_dtype, case):
    """From 1 MiB of float32 grad_input on, planes are summed apart (two at a time) and
    streamed out: the NumPy kernel's bits (summed in place), as the strided outputs."""
    in_shape, out_spatial = FLOAT32_STREAM_CASES[case]
    assert int(np.prod(in_shape)) * 4 >= 1 << 20
    rng = np.random.default_rng(seed(index_dtype, case, "f32"))
    go, idx = _random_case(rng, in_shape, out_spatial, F32, index_dtype, collide=True)
    reference = _compare(_sprinkle_specials(rng, go, signed_nans=False), idx, in_shape, F32)
    assert (reference == 0).any()  # untouched cells
    _compare(_sprinkle_specials(rng, go, signed_nans=True), idx, in_shape, F32, nan_sign_free=True)
    go = _sprinkle_specials(rng, go, signed_nans=False)
    _same_bits_in_strided_outputs(go, idx, in_shape, F32, _compare(go, idx, in_shape, F32))
    plane = int(np.prod(in_shape[2:]))
    for cell in (0, plane - 1):  # one touched cell per plane: the scratch plane is cleared between planes
        got = _compare(go, np.full(go.shape, cell, index_dtype), in_shape, F32)
        assert not got.reshape(-1, plane)[:, 1:-1].any()


# Pooling cases of the streamed backward paths on planes of an odd cell count (each plane
# starts at another alignment): disjoint windows (written directly, copied out in 32-byte
# stores), overlapping ones (float32 slabs, converted 16 values a store), partial windows.
POOLED_STREAM_CASES = [
    ((2, 2, 2), (2, 2, 2), (0, 0, 0), False),
    ((3, 3, 3), (2, 2, 2), (1, 1, 1), False),
    ((2, 2, 2), (2, 2, 2), (0, 0, 0), True),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
@pytest.mark.parametrize("case", range(len(POOLED_STREAM_CASES)))
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # sums beyond float16: inf
def test_large_pooled_outputs_same_bits_with_and_without_simd(
    conversion, dtype, index_dtype, case, monkeypatch
):
    """The backward with the pooling's parameters, streamed (from 1 MiB of grad_input): the
    SIMD builds (F16C, AVX copies) and the plain ones give the reference's bits, on one
    thread and two, from contiguous and non-contiguous gradients and indices."""
    k, s, p, ceil = POOLED_STREAM_CASES[case]
    in_shape = (2, 9, 17, 33, 63)
    assert int(np.prod(in_shape)) * dtype.itemsize >= 1 << 20
    rng = np.random.default_rng(seed(dtype, index_dtype, case, "pooled"))
    x = rng.integers(0, 8, in_shape).astype(dtype)  # ties: runs of one index where windows overlap
    out_shape = in_shape[:2] + reference.pool_output_shape(in_shape[2:], k, s, p, (1, 1, 1), ceil)
    params = (k, s, p, (1, 1, 1), ceil)
    out, idx = np.empty(out_shape, dtype), np.empty(out_shape, index_dtype)
    _kernels.max_pool3d_with_argmax(pool_plan(in_shape, out_shape, dtype, params, index_dtype), x, out, idx)
    go = _sprinkle_specials(rng, rng.standard_normal(out_shape, dtype=np.float32).astype(dtype), False)
    expected = np.empty(in_shape, dtype)
    _numpy_backward(go, idx, expected)
    plan = pool_plan(in_shape, out_shape, dtype, params, index_dtype)
    for threads in ("1", "2"):
        monkeypatch.setenv("PYACLNN_NUM_THREADS", threads)
        for kind in ("contiguous", "stepped"):
            got = np.full(in_shape, 7, dtype)
            _kernels.max_pool3d_with_argmax_backward(plan, _strided(go, kind), _strided(idx, kind), got)
            assert _same_bits(got, expected), (threads, kind)


def test_no_compiler_means_numpy_kernels_and_says_why(monkeypatch, tmp_path):
    monkeypatch.delenv("PYACLNN_ACCEL", raising=False)
    monkeypatch.setenv("PYACLNN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to run there
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(_accel, "_loaded", None)
    status = _accel.accel_status()
    assert status["active"] is False and "no C compiler" in status["reason"]
    assert status["kernels"] == dict.fromkeys(_accel.KERNELS, "numpy")
    go = np.ones((1, 1, 1, 1, 2), F32)
    gi = np.empty((1, 1, 1, 1, 2), F32)
    max_pool3d_with_argmax_backward(go, np.zeros(go.shape, np.int32), gi)
    assert gi.reshape(-1).tolist() == [2.0, 0.0]
    assert not list(tmp_path.glob("*.so"))


def test_a_failing_build_is_reported(monkeypatch, tmp_path):
    monkeypatch.delenv("PYACLNN_ACCEL", raising=False)
    monkeypatch.setenv("PYACLNN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "/bin/false")
    monkeypatch.setattr(_accel, "_loaded", None)
    status = _accel.accel_status()
    assert status["active"] is False and status["reason"].startswith("build failed: /bin/false failed")
    assert _accel.library() is None


def test_build_into_a_fresh_directory_is_warning_free(monkeypatch, tmp_path):
    """-Wall -Wextra clean: the compiler prints nothing."""
    if _accel._compiler() is None:
        pytest.skip("no C compiler on PATH")
    import subprocess

    command = _accel._compiler()
    proc = subprocess.run(
        [*command, *_accel.CFLAGS, "-o", str(tmp_path / "lib.so"), str(_accel.SOURCE)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc.stderr
    assert _accel.build(tmp_path).is_file()
    assert _accel.build(tmp_path) == _accel.build(tmp_path)  # built once, then found


# --------------------------------------------------------------------------
# Elementwise kernels of the references: Gelu (erf form), float32 -> float16
# --------------------------------------------------------------------------

# The NumPy reference's documented relative error (pyaclnn.kernels.references.unary.erfc), and the
# error of the estimate of the exact value below (math.erfc of x/sqrt(2) rounded: 2 a^2 ulp, below
# 1e-13 for |x| < 15, where float32 results stop being zero).
GELU_REFERENCE_ERROR = 1e-12
GELU_ESTIMATE_ERROR = 1e-13


def _gelu_inputs(rng) -> np.ndarray:
    """float32 inputs of every branch: both sides of the near path's bounds (x*x/2 = 4 below 0,
    4.84 above), the far tail to where results underflow and beyond the exponential's clamp,
    subnormals, signed zeros, infinities, NaN and an odd count (a scalar tail)."""
    edges = [2 * np.sqrt(2.0), 2.2 * np.sqrt(2.0), np.sqrt(1400.0), 26 * np.sqrt(2.0)]
    around = np.concatenate(
        [np.nextafter(np.float32(e), np.float32(e) + d, dtype=np.float32) for e in edges for d in (-1, 1)]
        + [np.float32(e) for e in edges],
        axis=None,
    )
    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-38, -1e-38, 3.4e38, -3.4e38], np.float32
    )
    return np.concatenate(
        [
            rng.uniform(-3, 3, 60_001),
            rng.standard_normal(30_000) * 4,
            rng.uniform(-16, -10, 10_000),  # results near float32's underflow
            rng.uniform(3, 12, 3_000),
            around,
            -around,
            specials,
        ]
    ).astype(np.float32)


def _gelu_reference(x: np.ndarray) -> np.ndarray:
    from pyaclnn.kernels.references import unary

    with np.errstate(all="ignore"):
        return unary._gelu(x.astype(np.float64)).astype(np.float32)


def _assert_rounds_like_the_reference(x: np.ndarray, got: np.ndarray, want: np.ndarray) -> None:
    """``got`` is ``want`` bit for bit (NaN for NaN) except next to it where the exact value lies
    within the errors of the two float64 values of the midpoint between them."""
    import math

    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    differ = np.flatnonzero((got.view(np.uint32) != want.view(np.uint32)) & ~nan)
    assert differ.size <= max(3, x.size // 10_000), f"{differ.size} of {x.size} differ"
    for i in differ:
        a, b = float(got[i]), float(want[i])
        assert abs(int(got.view(np.int32)[i]) - int(want.view(np.int32)[i])) == 1 or a == b == 0, (x[i], a, b)
        value = float(x[i])
        exact = 0.5 * value * math.erfc(-value / math.sqrt(2.0))
        tolerance = (GELU_REFERENCE_ERROR + GELU_ESTIMATE_ERROR) * abs(exact)
        assert abs(exact - (a + b) / 2) <= tolerance, (x[i], a, b, exact)


def _gelu_compiled(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    assert _accel.gelu(x, out)
    return out


def test_gelu_rounds_as_the_numpy_reference_within_its_error(conversion):
    x = _gelu_inputs(np.random.default_rng(40))
    _assert_rounds_like_the_reference(x, _gelu_compiled(x), _gelu_reference(x))


def test_gelu_simd_and_scalar_paths_give_the_same_bits(f16c):
    x = _gelu_inputs(np.random.default_rng(41))
    simd = _gelu_compiled(x)
    _accel.use_f16c(False)
    assert np.array_equal(_gelu_compiled(x).view(np.uint32), simd.view(np.uint32))


def test_gelu_special_values_as_the_reference(compiled):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -1e-45, -40.0, 40.0], np.float32)
    got = _gelu_compiled(x)
    assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(got[2])
    assert got[3:5].view(np.uint32).tolist() == [0, 0x80000000]  # signed zeros kept
    assert got[6] == 0 and np.signbit(got[6]) and got[7] == 40.0
    _assert_rounds_like_the_reference(x, got, _gelu_reference(x))


def test_gelu_takes_only_what_it_can(compiled):
    x = np.random.default_rng(42).uniform(-3, 3, 64).astype(np.float32)
    assert not _accel.gelu(x.astype(np.float64), np.empty(64))
    assert not _accel.gelu(x.astype(np.float16), np.empty(64, np.float16))
    assert not _accel.gelu(x[::2], np.empty(32, np.float32))  # strided
    assert not _accel.gelu(x[1:], x[:-1])  # overlapping, not the same array
    assert not _accel.gelu(x, np.empty(32, np.float32))
    x = np.random.default_rng(42).uniform(-6, 6, 4099).astype(np.float32)  # far lanes in most vectors
    want = _gelu_compiled(x)
    assert _accel.gelu(x, x)  # in place: each element (a far one too) is read before it is written
    assert np.array_equal(x.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("name", ["gelu", "gelu_v2"])
def test_gelu_through_the_numpy_backend(compiled, monkeypatch, name):
    from pyaclnn import ops

    x = np.random.default_rng(43).uniform(-3, 3, (33, 65)).astype(np.float32)
    call = getattr(ops, name)
    extra = [0] if name == "gelu_v2" else []
    with _numpy_backend():
        out = np.empty_like(x)
        call(x, *extra, out)
        assert np.array_equal(out.view(np.uint32), _gelu_compiled(x).view(np.uint32))
        monkeypatch.setenv("PYACLNN_ACCEL", "0")  # the NumPy reference
        reference = np.empty_like(x)
        call(x, *extra, reference)
    _assert_rounds_like_the_reference(x.ravel(), out.ravel(), reference.ravel())


class _numpy_backend:
    """The numpy backend active inside the block, the previous one restored after."""

    def __enter__(self) -> None:
        import pyaclnn

        self._before = pyaclnn.get_backend()
        pyaclnn.set_backend("numpy")

    def __exit__(self, *exc) -> None:
        import pyaclnn

        pyaclnn.set_backend(self._before)


def _half_inputs(rng) -> np.ndarray:
    """float32 bit patterns around every float16 rounding boundary (halfway points and their
    neighbours, both signs), the subnormal and overflow ranges, every NaN class, random ones."""
    halves = np.arange(1 << 15, dtype=np.uint32)
    boundaries = ((halves << 13)[:, None] + np.array([0xFFF, 0x1000, 0x1001], np.uint32)).ravel() + 0x38000000
    patterns = np.concatenate(
        [
            boundaries,
            np.arange(0, 0x38800000 + 8, 4099, dtype=np.uint32),  # zero to float16's smallest normal
            np.arange(0x477FE000, 0x47800100, 3, dtype=np.uint32),  # 65504 .. past 65520 (to inf)
            np.array(
                [0x7F800000, 0x7F800001, 0x7F801FFF, 0x7F802000, 0x7FA00000, 0x7FC00000, 0x7FFFFFFF],
                np.uint32,
            ),  # inf, NaNs whose top payload bits are zero, signalling, quiet
            rng.integers(0, 1 << 32, size=1 << 18, dtype=np.uint64).astype(np.uint32),
        ]
    )
    return np.concatenate([patterns, patterns | 0x80000000]).view(np.float32)


def test_float_to_half_is_numpys_astype_bit_for_bit(conversion):
    floats = _half_inputs(np.random.default_rng(44))
    for count in (floats.size, 13, 8, 1, 0):  # the 8-lane loop and the scalar tail
        source = floats[:count].copy()
        out = np.empty(count, np.float16)
        assert _accel.float_to_half(source, out)
        with np.errstate(over="ignore", invalid="ignore"):
            want = source.astype(np.float16)
        assert np.array_equal(out.view(np.uint16), want.view(np.uint16))


def test_float_to_half_takes_only_what_it_can(compiled):
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    assert not _accel.float_to_half(x.astype(np.float64), np.empty(64, np.float16))
    assert not _accel.float_to_half(x, np.empty(64, np.float32))
    assert not _accel.float_to_half(x[::2], np.empty(32, np.float16))
    assert not _accel.float_to_half(x, np.empty((64, 1), np.float16))
    assert not _accel.float_to_half(x, x.view(np.float16)[:64])  # sharing memory


def test_cast_and_float16_results_use_the_compiled_conversion(compiled, monkeypatch):
    from pyaclnn import ops

    calls = []
    original = _accel.float_to_half
    monkeypatch.setattr(_accel, "float_to_half", lambda s, o: calls.append(s.shape) or original(s, o))
    x = np.random.default_rng(45).standard_normal((17, 31)).astype(np.float32) * 3e3
    with _numpy_backend():
        out = np.empty(x.shape, np.float16)
        ops.cast(x, np.float16, out)
        assert np.array_equal(out.view(np.uint16), x.astype(np.float16).view(np.uint16))
        assert calls == [x.shape]
        total = np.empty(x.shape, np.float16)
        ops.add(x.astype(np.float16), x.astype(np.float16), 1, total)  # computed in float32, rounded once
        assert len(calls) == 2
    assert np.array_equal(total, (x.astype(np.float16).astype(np.float32) * 2).astype(np.float16))

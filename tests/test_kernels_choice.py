"""Which kernel the numpy backend runs (pyaclnn.backends.numpy._kernels): compiled, tuned
NumPy or the reference, chosen in one place for every operator of the table."""

from __future__ import annotations

import numpy as np
import pytest

from pyaclnn import _optable
from pyaclnn.backends.numpy import _kernels
from pyaclnn.kernels import _accel, checks
from pyaclnn.kernels import grid_sampler3d as reference_grid
from pyaclnn.kernels import max_pool3d as reference_pool
from pyaclnn.kernels._tuned import grid_sampler3d as tuned_grid
from pyaclnn.kernels._tuned import max_pool3d as tuned_pool


@pytest.fixture
def ran(monkeypatch):
    """Records which of the NumPy kernels ran (by module); the compiled ones are switched off."""
    monkeypatch.setenv("PYACLNN_ACCEL", "0")
    seen: list[str] = []
    for module, label in (
        (reference_pool, "reference"),
        (tuned_pool, "tuned"),
        (reference_grid, "reference"),
        (tuned_grid, "tuned"),
    ):
        for name in (
            "max_pool3d_with_argmax",
            "max_pool3d_with_argmax_backward",
            "grid_sampler3d",
            "grid_sampler3d_backward",
        ):
            real = getattr(module, name, None)
            if real is None:
                continue

            def record(*args, _real=real, _label=label):
                seen.append(_label)
                return _real(*args)

            monkeypatch.setattr(module, name, record)
    return seen


def _pool_plan(shape, out_shape, dtype):
    params = checks.PoolParams((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False)
    return checks.MaxPoolPlan(
        params, True, shape, out_shape, np.dtype(np.float64 if dtype == np.float64 else np.float32)
    )


def _backward(shape, dtype):
    out_shape = shape[:2] + tuple(n // 2 for n in shape[2:])
    go = np.ones(out_shape, dtype)
    idx = np.zeros(out_shape, np.int32)
    gi = np.empty(shape, dtype)
    _kernels.max_pool3d_with_argmax_backward(_pool_plan(shape, out_shape, dtype), go, idx, gi)
    return gi


def test_every_operator_of_the_table_has_a_kernel_and_a_check():
    for spec in _optable.operators():
        assert spec.python_name in _kernels.KERNELS
        assert callable(getattr(checks, spec.python_name))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_small_float32_or_float64_max_pool_backward_runs_the_reference(ran, dtype):
    gi = _backward((1, 2, 4, 4, 4), dtype)
    assert ran == ["reference"] and gi.reshape(2, -1)[:, 0].tolist() == [8, 8]


def test_a_large_or_16_bit_max_pool_backward_runs_the_tuned_path(ran):
    _backward((2, 8, 32, 32, 32), np.float32)
    _backward((1, 2, 4, 4, 4), np.float16)
    assert ran == ["tuned", "tuned"]


def test_the_forward_and_the_grid_sampler_run_the_tuned_paths_without_the_compiled_kernels(ran):
    x = np.ones((1, 1, 4, 4, 4), np.float32)
    out, idx = np.empty((1, 1, 2, 2, 2), np.float32), np.empty((1, 1, 2, 2, 2), np.int32)
    _kernels.max_pool3d_with_argmax(_pool_plan(x.shape, out.shape, np.float32), x, out, idx)
    grid = np.zeros((1, 2, 2, 2, 3), np.float32)
    plan = checks.GridPlan(False, 0, 0, False, x.shape, (1, 1, 2, 2, 2), np.dtype(np.float32))
    _kernels.grid_sampler3d(plan, x, grid, out)
    _kernels.grid_sampler3d_backward(
        plan, out, x, grid, np.empty(x.shape, np.float32), np.empty(grid.shape, np.float32)
    )
    assert ran == ["tuned", "tuned", "tuned"]


def test_the_compiled_kernel_takes_the_call_unless_pyaclnn_accel_is_0(ran, monkeypatch):
    monkeypatch.delenv("PYACLNN_ACCEL")
    if _accel.library() is None:
        pytest.skip(f"compiled kernels unavailable: {_accel.accel_status()['reason']}")
    _backward((1, 2, 4, 4, 4), np.float32)
    _backward((1, 2, 4, 4, 4), np.float64)  # no code for float64: the NumPy kernels
    assert ran == ["reference"]


def test_a_bad_index_from_the_compiled_kernel_reads_as_the_reference_says(monkeypatch):
    monkeypatch.delenv("PYACLNN_ACCEL", raising=False)
    shape, out_shape = (1, 2, 4, 4, 4), (1, 2, 2, 2, 2)
    idx = np.zeros(out_shape, np.int32)
    idx[0, 1, 1, 0, 1] = 64
    go = np.ones(out_shape, np.float32)
    with pytest.raises(checks.IndexOutOfPlaneError) as expected:
        reference_pool.max_pool3d_with_argmax_backward(go, idx, np.empty(shape, np.float32))
    gi = np.full(shape, 7, np.float32)
    with pytest.raises(checks.IndexOutOfPlaneError) as got:
        _kernels.max_pool3d_with_argmax_backward(_pool_plan(shape, out_shape, np.float32), go, idx, gi)
    assert str(got.value) == str(expected.value) and (gi == 7).all()

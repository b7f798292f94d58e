"""Nothing held: once a call on NumPy arrays returned, pyaclnn keeps no reference to them.

On the numpy backend a call whose arrays are 1 MiB and more maps their pages
instead of copying them, and keeps the registration idle for the next call on
the same arrays; it must not keep the arrays (``ndarray.resize`` refuses an
array anything else refers to, weakly too). On the npu backend they are copied.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import pyaclnn

SHAPE = (1, 2, 64, 64, 64)  # 2 MiB of float32: mapped on the numpy backend


@pytest.mark.parametrize("with_out", [False, True], ids=["results", "out"])
def test_a_large_numpy_input_is_the_callers_alone_after_the_call(backend, with_out):
    x = np.random.default_rng(0).random(SHAPE, dtype=np.float32)
    values = np.empty((1, 2, 32, 32, 32), np.float32)
    indices = np.empty((1, 2, 32, 32, 32), np.int32)
    for _ in range(2):  # the second call reuses what the first left idle
        got = pyaclnn.max_pool3d_with_argmax(
            x, 2, out=(values, indices) if with_out else None, backend=backend
        )
        np.testing.assert_array_equal(got[0], x.reshape(1, 2, 32, 2, 32, 2, 32, 2).max(axis=(3, 5, 7)))
        del got
        assert sys.getrefcount(x) == 2, "pyaclnn still refers to the input"  # x and the argument
        assert sys.getrefcount(values) == 2 and sys.getrefcount(indices) == 2
    x.resize((4,), refcheck=True)  # refused while anything refers to x
    assert x.shape == (4,)


def test_a_large_input_of_a_backward_call_is_not_held(backend):
    rng = np.random.default_rng(1)
    x = rng.random(SHAPE, dtype=np.float32)
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    grad = np.ones_like(out)
    del out
    pyaclnn.max_pool3d_with_argmax_backward(grad, x, idx, 2, backend=backend)
    assert sys.getrefcount(x) == 2 and sys.getrefcount(grad) == 2 and sys.getrefcount(idx) == 2

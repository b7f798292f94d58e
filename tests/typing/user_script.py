"""A user's script, type-checked by tests/test_typing.py with ``mypy --strict``.

It must pass as it is: NumPy arrays in give ``numpy.ndarray`` results (so NumPy
methods type-check on them), DeviceArrays in (or ``out=``) give DeviceArrays
(read back with ``.numpy()``), and both carry the scalar type (``assert_type``
below fails the check when a result's type is not exactly the one written). It
also runs (on the numpy backend), where ``assert_type`` returns its value.
"""

from __future__ import annotations

import sys

import numpy as np
import numpy.typing as npt

import pyaclnn

if sys.version_info >= (3, 11):
    from typing import assert_type
else:  # mypy and pytest bring it
    from typing_extensions import assert_type


def pool_on_host(x: npt.NDArray[np.float32]) -> float:
    out, indices = pyaclnn.max_pool3d_with_argmax(x, kernel_size=2, stride=2)
    grad = pyaclnn.max_pool3d_with_argmax_backward(np.ones_like(out), x, indices, kernel_size=2, stride=2)
    kept: npt.NDArray[np.float32] = out  # the input's dtype, statically too
    return float(kept.mean()) + float(indices.max()) + float(grad.sum())


def pool_on_device(x: pyaclnn.DeviceArray) -> npt.NDArray[np.float32]:
    out, indices = pyaclnn.max_pool3d_with_argmax(x, kernel_size=2, stride=2)
    grad: pyaclnn.DeviceArray = pyaclnn.max_pool3d_with_argmax_backward(
        pyaclnn.zeros(out.shape, out.dtype), x, indices, kernel_size=2, stride=2
    )
    host: npt.NDArray[np.float32] = out.numpy()  # .numpy() is a DeviceArray method
    assert grad.numpy().shape == x.shape
    return host


def sample_on_host(x: npt.NDArray[np.float32], grid: npt.NDArray[np.float32]) -> float:
    y = pyaclnn.grid_sampler3d(x, grid, "bilinear", "zeros", align_corners=False)
    dx, dgrid = pyaclnn.grid_sampler3d_backward(np.ones_like(y), x, grid)
    total = float(y.mean())
    if dx is not None:
        total += float(dx.sum())
    if dgrid is not None:
        total += float(np.abs(dgrid).max())
    return total


def sample_mixed(x: npt.NDArray[np.float32], grid: pyaclnn.DeviceArray) -> pyaclnn.DeviceArray:
    # One DeviceArray input is enough for DeviceArray results.
    y = pyaclnn.grid_sampler3d(x, grid)
    dx, _ = pyaclnn.grid_sampler3d_backward(y, x, grid, output_mask=(True, False))
    assert dx is not None
    return dx


def sample_into(x: npt.NDArray[np.float32], grid: npt.NDArray[np.float32], out: pyaclnn.DeviceArray) -> None:
    # out= gives DeviceArrays even for NumPy inputs (an out= pair of Nones gives nothing: NumPy results).
    y = pyaclnn.grid_sampler3d(x, grid, out=out)
    assert y is out
    values, indices = pyaclnn.max_pool3d_with_argmax(x, 1, out=(None, pyaclnn.empty(x.shape, np.int32)))
    values.close()
    indices.close()
    host_values, _ = pyaclnn.max_pool3d_with_argmax(x, 1, out=(None, None))
    assert host_values.mean() == x.mean()


def scalar_types_follow_the_input() -> None:
    # The dtype is part of the type: DeviceArray[np.float16], as NumPy's NDArray[np.float16].
    host32 = np.zeros((1, 1, 2, 2, 2), np.float32)
    with pyaclnn.to_device(host32) as x32:
        assert_type(x32, pyaclnn.DeviceArray[np.float32])
        assert_type(x32.numpy(), npt.NDArray[np.float32])
        assert_type(x32.dtype, np.dtype[np.float32])
        assert_type(x32.reshape(-1), pyaclnn.DeviceArray[np.float32])
    assert_type(pyaclnn.to_device(np.zeros(3, np.float32)).numpy(), npt.NDArray[np.float32])
    with pyaclnn.empty((1, 1, 2, 2, 2), np.float16) as x16:
        assert_type(x16, pyaclnn.DeviceArray[np.float16])
        assert_type(pyaclnn.DeviceArray((2,), np.float16), pyaclnn.DeviceArray[np.float16])
        assert_type(pyaclnn.DeviceArray((2,), np.dtype(np.int32)), pyaclnn.DeviceArray[np.int32])
        assert_type(pyaclnn.zeros((2,)), pyaclnn.DeviceArray[np.float32])  # the default dtype
        assert_type(pyaclnn.zeros_like(x16), pyaclnn.DeviceArray[np.float16])
        assert_type(pyaclnn.empty_like(host32, np.int64), pyaclnn.DeviceArray[np.int64])
        assert_type(pyaclnn.empty_like(x16).copy_(x16), pyaclnn.DeviceArray[np.float16])

        # Max-pool: values of the input's type; indices int32, or int64 when asked for.
        out, idx = pyaclnn.max_pool3d_with_argmax(x16, 2)
        assert_type(out, pyaclnn.DeviceArray[np.float16])
        assert_type(idx, pyaclnn.DeviceArray[np.int32])
        assert_type(idx.numpy(), npt.NDArray[np.int32])
        _, idx64 = pyaclnn.max_pool3d_with_argmax(x16, 2, indices_dtype=np.int64)
        assert_type(idx64, pyaclnn.DeviceArray[np.int64])
        host_out, host_idx = pyaclnn.max_pool3d_with_argmax(host32, 2)
        assert_type(host_out, npt.NDArray[np.float32])
        assert_type(host_idx, npt.NDArray[np.int32])
        assert_type(
            pyaclnn.max_pool3d_with_argmax(host32, 2, indices_dtype=np.int64)[1], npt.NDArray[np.int64]
        )
        into = pyaclnn.max_pool3d_with_argmax(host32, 2, out=(None, pyaclnn.empty(out.shape, np.int32)))
        assert_type(into, tuple[pyaclnn.DeviceArray[np.float32], pyaclnn.DeviceArray[np.int32]])
        grad = pyaclnn.max_pool3d_with_argmax_backward(out, x16, idx, 2)
        assert_type(grad, pyaclnn.DeviceArray[np.float16])

        # Grid sampling: the input's type, also when only the grid is on the device.
        grid = pyaclnn.zeros((1, 1, 1, 1, 3), np.float16)
        y = pyaclnn.grid_sampler3d(x16, grid)
        assert_type(y, pyaclnn.DeviceArray[np.float16])
        assert_type(
            pyaclnn.grid_sampler3d(host32, pyaclnn.zeros((1, 1, 1, 1, 3))), pyaclnn.DeviceArray[np.float32]
        )
        dx, _ = pyaclnn.grid_sampler3d_backward(y, x16, grid)
        assert_type(dx, pyaclnn.DeviceArray[np.float16] | None)
        for array in (out, idx, idx64, grad, grid, y, *into):
            array.close()


def any_dtype(x: pyaclnn.DeviceArray) -> npt.NDArray[np.float64]:
    # A plain DeviceArray is an array of any dtype: no type parameter needed under --strict.
    return x.numpy()


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    grid = rng.uniform(-1, 1, (1, 2, 2, 2, 3)).astype(np.float32)
    pool_on_host(x)
    with pyaclnn.to_device(x) as dx:
        assert pool_on_device(dx).shape == (1, 2, 2, 2, 2)
    sample_on_host(x, grid)
    with pyaclnn.to_device(grid) as dgrid:
        sample_mixed(x, dgrid).close()
    with pyaclnn.empty((1, 2, 2, 2, 2), np.float32) as out:
        sample_into(x, grid, out)
    scalar_types_follow_the_input()
    typed: type[pyaclnn.DeviceArray[np.float32]] = pyaclnn.DeviceArray[np.float32]  # subscripted at run time
    with typed((2,), np.float32) as made, pyaclnn.to_device(np.zeros(2)) as float64s:
        assert isinstance(made, pyaclnn.DeviceArray) and made.dtype == np.float32
        assert any_dtype(float64s).dtype == np.float64


if __name__ == "__main__":
    main()

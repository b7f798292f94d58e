"""A user's script, type-checked by tests/test_typing.py with ``mypy --strict``.

It must pass as it is: NumPy arrays in give ``numpy.ndarray`` results (so NumPy
methods type-check on them), DeviceArrays in (or ``out=``) give DeviceArrays
(read back with ``.numpy()``). It also runs (on the numpy backend).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import pyaclnn


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


if __name__ == "__main__":
    main()

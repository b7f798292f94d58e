"""The functional API on each backend against PyTorch CPU, and its argument handling.

The kernels' own oracle tests cover the math broadly; these check that the
layers above them (runtime, low-level API, both backends) carry it through
unchanged: dtypes, layouts, strides, masks, int64 indices, DeviceArrays.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import pyaclnn
from pyaclnn import AclnnError, bfloat16, constants

RNG = np.random.default_rng(20261130)


def rounded(torch_result, dtype) -> np.ndarray:
    """A float32/float64 oracle result rounded once to ``dtype``."""
    return torch_result.detach().numpy().astype(dtype)


def assert_close(got: np.ndarray, want: np.ndarray, dtype) -> None:
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
    tol = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}.get(np.dtype(dtype), 1e-2)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


# -- max-pool ----------------------------------------------------------------

POOL_CASES = [
    # shape, kernel, stride, padding, ceil
    ((2, 3, 6, 7, 8), 2, (), 0, False),
    ((1, 2, 7, 9, 5), (3, 2, 3), (2, 1, 2), (1, 1, 1), True),
    ((3, 5, 4, 6), 3, 2, 1, True),  # 4-D (C, D, H, W)
    ((1, 1, 5, 5, 5), (2, 3, 1), 1, (1, 1, 0), False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape, kernel, stride, padding, ceil", POOL_CASES)
def test_max_pool3d_forward_and_backward_match_torch(
    backend, torch, dtype, shape, kernel, stride, padding, ceil
):
    x = RNG.standard_normal(shape).astype(dtype)
    out, idx = pyaclnn.max_pool3d_with_argmax(x, kernel, stride, padding, 1, ceil, backend=backend)
    t_x = torch.from_numpy(x.astype(np.float32))
    k3 = [kernel] * 3 if isinstance(kernel, int) else list(kernel)
    s3 = k3 if stride == () else ([stride] * 3 if isinstance(stride, int) else list(stride))
    p3 = [padding] * 3 if isinstance(padding, int) else list(padding)
    t_out, t_idx = torch.ops.aten.max_pool3d_with_indices(t_x, k3, s3, p3, [1, 1, 1], ceil)
    np.testing.assert_array_equal(out.astype(np.float32), t_out.numpy())
    np.testing.assert_array_equal(idx, t_idx.numpy())
    assert out.dtype == np.dtype(dtype) and idx.dtype == np.int32

    g = RNG.standard_normal(out.shape).astype(dtype)
    grad = pyaclnn.max_pool3d_with_argmax_backward(
        g, x, idx, kernel, stride, padding, 1, ceil, backend=backend
    )
    t_grad = torch.ops.aten.max_pool3d_with_indices_backward(
        torch.from_numpy(g.astype(np.float32)), t_x, k3, s3, p3, [1, 1, 1], ceil, t_idx
    )
    assert grad.dtype == np.dtype(dtype) and grad.shape == x.shape
    assert_close(grad, rounded(t_grad, dtype), dtype)


def test_max_pool3d_non_contiguous_input_and_int64_indices(backend, torch):
    base = RNG.standard_normal((2, 8, 9, 10, 6)).astype(np.float32)
    x = base[:, ::2, ::-1, 1:, :].transpose(0, 1, 4, 2, 3)  # strided, reversed, transposed view
    before = base.copy()
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 3, 2, 1, indices_dtype=np.int64, backend=backend)
    t_out, t_idx = torch.ops.aten.max_pool3d_with_indices(
        torch.from_numpy(x.copy()), [3] * 3, [2] * 3, [1] * 3
    )
    np.testing.assert_array_equal(out, t_out.numpy())
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx, t_idx.numpy())
    g = RNG.standard_normal(out.shape).astype(np.float32)
    grad = pyaclnn.max_pool3d_with_argmax_backward(
        g[..., ::-1].copy()[..., ::-1], x, idx, 3, 2, 1, backend=backend
    )
    t_grad = torch.ops.aten.max_pool3d_with_indices_backward(
        torch.from_numpy(g), torch.from_numpy(x.copy()), [3] * 3, [2] * 3, [1] * 3, [1] * 3, False, t_idx
    )
    assert_close(grad, t_grad.numpy(), np.float32)
    np.testing.assert_array_equal(base, before)  # inputs are never modified


def test_max_pool3d_backward_rejects_an_int64_index_beyond_int32(backend):
    x = np.zeros((1, 1, 2, 2, 2), np.float32)
    idx = np.array([2**40], np.int64).reshape(1, 1, 1, 1, 1)
    with pytest.raises(AclnnError) as info:
        pyaclnn.max_pool3d_with_argmax_backward(
            np.ones((1, 1, 1, 1, 1), np.float32), x, idx, 2, backend=backend
        )
    assert info.value.status == constants.ACLNN_ERR_PARAM_INVALID and "indices" in str(info.value)


def test_max_pool3d_backward_of_empty_grad_output_is_zero(backend):
    x = np.ones((1, 2, 4, 4, 4), np.float32)
    grad = pyaclnn.max_pool3d_with_argmax_backward(
        np.ones((1, 0, 2, 2, 2), np.float32),
        np.ones((1, 0, 4, 4, 4), np.float32),
        np.zeros((1, 0, 2, 2, 2), np.int32),
        2,
        backend=backend,
    )
    assert grad.shape == (1, 0, 4, 4, 4)
    # The op succeeds without writing when gradOutput is empty (before comparing N and C);
    # the functional API hands back the mathematically right gradient: zeros.
    grad = pyaclnn.max_pool3d_with_argmax_backward(
        np.ones((1, 0, 2, 2, 2), np.float32), x, np.zeros((1, 0, 2, 2, 2), np.int32), 2, backend=backend
    )
    assert grad.shape == x.shape and not grad.any()


# -- grid sampler ------------------------------------------------------------

GRID_CASES = [
    # input shape (N, C, D, H, W), grid spatial, interpolation, padding, align_corners
    ((2, 3, 4, 5, 6), (3, 2, 4), "bilinear", "zeros", False),
    ((1, 2, 5, 4, 3), (2, 3, 3), "bilinear", "reflection", True),
    ((1, 4, 3, 3, 3), (4, 2, 2), "nearest", "border", False),
    ((2, 1, 1, 4, 5), (1, 3, 2), "bilinear", "border", True),
    ((1, 3, 4, 4, 4), (2, 2, 2), "nearest", "reflection", True),
]
MODES = {"bilinear": 0, "nearest": 1, "zeros": 0, "border": 1, "reflection": 2}


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.float16, bfloat16], ids=["fp32", "fp64", "fp16", "bf16"]
)
@pytest.mark.parametrize("shape, spatial, interp, pad, corners", GRID_CASES)
def test_grid_sampler3d_forward_and_backward_match_torch(
    backend, torch, dtype, layout, shape, spatial, interp, pad, corners
):
    n, c = shape[:2]
    x = RNG.standard_normal(shape).astype(dtype)
    grid = (RNG.uniform(-1.3, 1.3, (n, *spatial, 3))).astype(dtype)
    g = RNG.standard_normal((n, c, *spatial)).astype(dtype)
    wide = np.float64 if dtype == np.float64 else np.float32
    t_x, t_grid, t_g = (torch.from_numpy(a.astype(wide)) for a in (x, grid, g))
    t_out = torch.ops.aten.grid_sampler_3d(t_x, t_grid, MODES[interp], MODES[pad], corners)
    t_dx, t_dgrid = torch.ops.aten.grid_sampler_3d_backward(
        t_g, t_x, t_grid, MODES[interp], MODES[pad], corners, [True, True]
    )
    to_layout = (lambda a: np.ascontiguousarray(np.moveaxis(a, 1, 4))) if layout == "NDHWC" else (lambda a: a)
    from_layout = (lambda a: np.moveaxis(a, 4, 1)) if layout == "NDHWC" else (lambda a: a)

    out = pyaclnn.grid_sampler3d(to_layout(x), grid, interp, pad, corners, layout=layout, backend=backend)
    assert out.dtype == np.dtype(dtype)
    assert_close(from_layout(out), rounded(t_out, dtype), dtype)
    dx, dgrid = pyaclnn.grid_sampler3d_backward(
        to_layout(g), to_layout(x), grid, interp, pad, corners, layout=layout, backend=backend
    )
    assert_close(from_layout(dx), rounded(t_dx, dtype), dtype)
    assert_close(dgrid, rounded(t_dgrid, dtype), dtype)


@pytest.mark.parametrize("mask", [(True, False), (False, True), (False, False)])
def test_grid_sampler3d_backward_returns_none_for_masked_outputs(backend, torch, mask):
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-1, 1, (1, 2, 3, 2, 3)).astype(np.float32)
    g = RNG.standard_normal((1, 2, 2, 3, 2)).astype(np.float32)
    dx, dgrid = pyaclnn.grid_sampler3d_backward(g, x, grid, output_mask=mask, backend=backend)
    t_dx, t_dgrid = torch.ops.aten.grid_sampler_3d_backward(
        torch.from_numpy(g), torch.from_numpy(x), torch.from_numpy(grid), 0, 0, False, [True, True]
    )
    assert (dx is None) != mask[0] and (dgrid is None) != mask[1]
    if mask[0]:
        assert_close(dx, t_dx.numpy(), np.float32)
    if mask[1]:
        assert_close(dgrid, t_dgrid.numpy(), np.float32)


def test_grid_sampler3d_seed_example(backend, torch):
    # The operator document's sample: input 1..9 on a (1, 1, 1, 3, 3) volume, bilinear, zeros,
    # align_corners False, gradOutput all ones.
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 1, 3, 3)
    grid = np.array([-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0], np.float32).reshape(1, 1, 2, 2, 3)
    g = np.ones((1, 1, 1, 2, 2), np.float32)
    dx, dgrid = pyaclnn.grid_sampler3d_backward(g, x, grid, backend=backend)
    # Worked by hand (docs/operator-semantics.md, GridSampler3DBackward: math): each point has
    # one in-bounds corner, e.g.
    # (x, y, z) = (-1, -1, 0) unnormalizes to (-0.5, -0.5, 0) and reaches voxel (0, 0) with 0.5 * 0.5.
    np.testing.assert_allclose(dx.ravel(), [0.25, 0, 0, 0.5, 0, 0, 0.125, 0.5, 0], rtol=1e-6)
    t_dx, t_dgrid = torch.ops.aten.grid_sampler_3d_backward(
        torch.from_numpy(g), torch.from_numpy(x), torch.from_numpy(grid), 0, 0, False, [True, True]
    )
    np.testing.assert_allclose(dx, t_dx.numpy(), rtol=1e-6)
    np.testing.assert_allclose(dgrid, t_dgrid.numpy(), rtol=1e-6, atol=1e-6)


# -- DeviceArrays and argument handling ----------------------------------------


def test_device_arrays_in_give_device_arrays_out(backend, torch):
    x = RNG.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    with pyaclnn.to_device(x, backend=backend) as dx:
        out, idx = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend)
        assert isinstance(out, pyaclnn.DeviceArray) and isinstance(idx, pyaclnn.DeviceArray)
        t_out, _ = torch.ops.aten.max_pool3d_with_indices(torch.from_numpy(x), [2] * 3, [2] * 3)
        np.testing.assert_array_equal(out.numpy(), t_out.numpy())
        grad = pyaclnn.max_pool3d_with_argmax_backward(out, dx, idx, 2, backend=backend)
        assert isinstance(grad, pyaclnn.DeviceArray) and grad.shape == x.shape
        for a in (out, idx, grad):
            a.close()


def test_to_device_copies_a_strided_views_elements(backend):
    base = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    view = base[:, 1:, 1::2, ::2]
    with pyaclnn.to_device(view, backend=backend) as d:
        assert d.shape == view.shape and d.is_contiguous()
        assert d.storage_nbytes == d.nbytes == view.nbytes  # its elements, not the storage it spans
        np.testing.assert_array_equal(d.numpy(), view)
    reversed_view = base[:, ::-1]  # negative strides: an aclTensor cannot describe them
    with pyaclnn.to_device(reversed_view, backend=backend) as d:
        assert d.is_contiguous()
        np.testing.assert_array_equal(d.numpy(), reversed_view)


def test_a_device_array_of_another_backend_is_rejected(backend):
    other = "npu" if backend == "numpy" else "numpy"
    if other == "npu":
        pytest.importorskip("cffi")
    x = np.ones((1, 1, 2, 2, 2), np.float32)
    with pyaclnn.to_device(x, backend=backend) as d:
        with pytest.raises(ValueError, match="backend"):
            pyaclnn.max_pool3d_with_argmax(d, 2, backend=other if other == "numpy" else backend + "x")


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(kernel_size="2"), TypeError, "kernel_size"),
        (dict(kernel_size=2.0), TypeError, "kernel_size"),
        (dict(kernel_size=True), TypeError, "kernel_size"),
        (dict(kernel_size=[2, None]), TypeError, "kernel_size"),
        (dict(kernel_size=2, stride=[2**70]), ValueError, "stride"),
        (dict(kernel_size=2, ceil_mode="yes"), TypeError, "ceil_mode"),
        (dict(kernel_size=2, input=[[1.0]]), TypeError, "input"),
        (dict(kernel_size=2, input=np.ones((1, 1, 2, 2, 2), np.complex256)), TypeError, "input"),
    ],
)
def test_bad_argument_types_raise_naming_the_argument(backend, kwargs, error, words):
    args = dict(input=np.ones((1, 1, 2, 2, 2), np.float32)) | kwargs
    with pytest.raises(error, match=words):
        pyaclnn.max_pool3d_with_argmax(backend=backend, **args)


@pytest.mark.parametrize("name", ["kernel_size", "stride", "padding", "dilation"])
def test_pool_parameters_equal_to_those_of_an_earlier_call_are_still_checked(backend, name):
    """The normalised pooling parameters of plain ints are kept from call to call; a bool equal to
    such an int (True == 1, False == 0, with the same hash) is still refused, naming the argument,
    and a NumPy integer still accepted, with the same result."""
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    params = dict(kernel_size=1, stride=1, padding=0, dilation=1)
    want, _ = pyaclnn.max_pool3d_with_argmax(x, **params, backend=backend)  # kept now
    with pytest.raises(TypeError, match=name):
        pyaclnn.max_pool3d_with_argmax(x, **(params | {name: bool(params[name])}), backend=backend)
    got, _ = pyaclnn.max_pool3d_with_argmax(x, **(params | {name: np.int64(params[name])}), backend=backend)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (
            dict(interpolation_mode="bicubic"),
            ValueError,
            "interpolation_mode must be one of 'bilinear', 'nearest'",
        ),
        (dict(interpolation_mode=2), AclnnError, r"interpolationMode.*2.*\(in Python: interpolation_mode\)"),
        (dict(interpolation_mode="linear"), ValueError, "interpolation_mode"),
        (dict(padding_mode=7), AclnnError, r"paddingMode.*\(in Python: padding_mode\)"),
        (dict(layout="NHWC"), ValueError, "layout"),
        (dict(output_mask=(True, True, True)), AclnnError, r"outputMask.*\(in Python: output_mask"),
        (dict(output_mask="yes"), TypeError, "output_mask"),
    ],
)
def test_grid_sampler3d_backward_bad_modes(backend, kwargs, error, words):
    x = np.ones((1, 1, 2, 2, 2), np.float32)
    grid = np.zeros((1, 1, 1, 1, 3), np.float32)
    g = np.ones((1, 1, 1, 1, 1), np.float32)
    with pytest.raises(error, match=words):
        pyaclnn.grid_sampler3d_backward(g, x, grid, backend=backend, **kwargs)


def test_a_missing_tensor_is_161001(backend):
    with pytest.raises(AclnnError) as info:
        pyaclnn.grid_sampler3d(None, np.zeros((1, 1, 1, 1, 3), np.float32), backend=backend)
    assert info.value.status == constants.ACLNN_ERR_PARAM_NULLPTR
    assert info.value.status_name == "ACLNN_ERR_PARAM_NULLPTR"
    assert "input" in str(info.value)


@pytest.mark.parametrize("forward", [True, False])
def test_a_plane_above_int32_max_is_rejected_before_any_allocation(backend, forward):
    x = np.broadcast_to(np.float32(0), (1, 1, 2048, 2048, 1024))  # 2**32 elements, no memory
    from pyaclnn import backends

    pyaclnn.to_device(np.zeros(1, np.float32), backend=backend).close()  # initialise first
    before = backends.get(backend).live_counts()
    with pytest.raises(AclnnError) as info:
        if forward:
            pyaclnn.max_pool3d_with_argmax(x, 1, backend=backend)
        else:
            pyaclnn.max_pool3d_with_argmax_backward(
                x, x, np.broadcast_to(np.int32(0), x.shape), 1, backend=backend
            )
    expected = constants.ACLNN_ERR_INNER_NULLPTR if forward else constants.ACLNN_ERR_PARAM_INVALID
    assert info.value.status == expected
    assert "INT32_MAX" in str(info.value)
    assert backends.get(backend).live_counts() == before


def test_a_kernel_that_leaves_no_window_gives_empty_results_as_the_op_does(backend):
    # The output shape is the checks' rule (checks.pool_output_shape): an axis
    # without a window has size 0, and the op takes the empty out and succeeds.
    # Along D the formula gives (1 - 3) // 1 + 1 = -1.
    x = np.ones((1, 2, 1, 5, 5), np.float32)
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 3, 1, backend=backend)
    assert out.shape == idx.shape == (1, 2, 0, 3, 3)
    assert out.dtype == np.float32 and idx.dtype == np.int32


def test_a_backward_without_a_window_is_161002_naming_grad_output(backend):
    # (An empty grad_output would succeed: the L2 layer returns before the tiling check.)
    x = np.ones((1, 2, 2, 5, 5), np.float32)
    g = np.ones((1, 2, 1, 1, 1), np.float32)
    with pytest.raises(AclnnError, match=r"\(in Python: grad_output") as info:
        pyaclnn.max_pool3d_with_argmax_backward(g, x, np.zeros(g.shape, np.int32), 3, backend=backend)
    assert info.value.status == constants.ACLNN_ERR_PARAM_INVALID


@pytest.mark.parametrize(
    "grad_shape",
    [(1, 2, 2, 2, 3), (1, 3, 2, 2, 2), (2, 2, 2, 2, 2), (2, 2, 2, 2), (1, 2, 2, 2, 2, 1)],
    ids=["spatial", "channels", "batch", "rank 4", "rank 6"],
)
def test_a_grad_output_of_the_wrong_shape_names_grad_output(backend, grad_shape):
    x = np.ones((1, 2, 4, 4, 4), np.float32)
    g = np.ones(grad_shape, np.float32)
    with pytest.raises(AclnnError, match=r"\(in Python: grad_output") as info:
        pyaclnn.max_pool3d_with_argmax_backward(g, x, np.zeros(grad_shape, np.int32), 2, backend=backend)
    assert info.value.status == constants.ACLNN_ERR_PARAM_INVALID


_PYTHON_PARAMETERS = (
    "input", "grad_output", "grid", "indices", "out", "kernel_size", "stride", "padding", "dilation",
    "ceil_mode", "interpolation_mode", "padding_mode", "align_corners", "output_mask", "layout",
    "indices_dtype",
)  # fmt: skip


@pytest.mark.parametrize(
    "call",
    [
        lambda b: pyaclnn.max_pool3d_with_argmax(np.ones((1, 1, 4, 4, 4), np.float64), 2, backend=b),
        lambda b: pyaclnn.max_pool3d_with_argmax(np.ones((4, 4, 4), np.float32), 2, backend=b),
        lambda b: pyaclnn.max_pool3d_with_argmax(np.ones((1, 1, 4, 4, 4), np.float32), 2, 0, backend=b),
        lambda b: pyaclnn.max_pool3d_with_argmax(np.ones((1, 1, 4, 4, 4), np.float32), 2, 2, 2, backend=b),
        lambda b: pyaclnn.max_pool3d_with_argmax(np.ones((1, 1, 4, 4, 4), np.float32), 2, 2, 0, 2, backend=b),
        lambda b: pyaclnn.max_pool3d_with_argmax_backward(
            np.ones((1, 1, 2, 2, 2), np.float32),
            np.ones((1, 1, 4, 4, 4), np.float32),
            np.zeros((1, 1, 2, 2, 1), np.int32),
            2,
            backend=b,
        ),
        lambda b: pyaclnn.max_pool3d_with_argmax_backward(
            np.ones((1, 1, 2, 2, 2), np.float32),
            np.ones((1, 1, 4, 4, 4), np.float32),
            np.full((1, 1, 2, 2, 2), 64, np.int32),
            2,
            backend=b,
        ),
        lambda b: pyaclnn.grid_sampler3d(
            np.ones((1, 1, 2, 2, 2), np.float32), np.zeros((1, 1, 1, 1, 2), np.float32), backend=b
        ),
        lambda b: pyaclnn.grid_sampler3d(
            np.ones((1, 1, 2, 2, 2), np.float32), np.zeros((2, 1, 1, 1, 3), np.float32), backend=b
        ),
        lambda b: pyaclnn.grid_sampler3d(
            np.ones((1, 1, 2, 2, 2), np.float32), np.zeros((1, 1, 1, 1, 3), np.float16), backend=b
        ),
        lambda b: pyaclnn.grid_sampler3d_backward(
            np.ones((1, 1, 1, 1, 2), np.float32),
            np.ones((1, 1, 2, 2, 2), np.float32),
            np.zeros((1, 1, 1, 1, 3), np.float32),
            backend=b,
        ),
    ],
)
def test_every_functional_error_names_a_python_parameter(backend, call):
    with pytest.raises(AclnnError) as info:
        call(backend)
    # C names that differ from the Python ones are translated: "(in Python: grad_output)".
    text = str(info.value)
    reason = text.split("(in Python: ", 1)[1] if "(in Python: " in text else text.split("): ", 1)[1]
    assert any(re.search(rf"\b{name}\b", reason) for name in _PYTHON_PARAMETERS), text


def test_threads_may_share_one_stream(backend):
    import threading

    x = RNG.standard_normal((2, 3, 6, 6, 6)).astype(np.float32)
    want = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    results, errors = [], []
    with pyaclnn.Stream(backend=backend) as stream:

        def work():
            try:
                for _ in range(5):
                    results.append(pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=stream))
            except Exception as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors and len(results) == 20
    for out, idx in results:
        np.testing.assert_array_equal(out, want[0])
        np.testing.assert_array_equal(idx, want[1])


@pytest.mark.parametrize(
    "call, words",
    [
        (
            lambda x, i, b: pyaclnn.max_pool3d_with_argmax(x.astype(np.float64), 2, backend=b),
            r"self .*\(in Python: input\)",
        ),
        (
            lambda x, i, b: pyaclnn.max_pool3d_with_argmax(x, (2, 2), backend=b),
            r"kernelSize .*\(in Python: kernel_size\)",
        ),
        (
            lambda x, i, b: pyaclnn.max_pool3d_with_argmax_backward(
                np.ones((1, 1, 3, 2, 2), np.float32), x, i, 2, backend=b
            ),
            r"indices .* gradOutput's .*\(in Python: indices, grad_output\)$",
        ),
        # The argument at fault is named first, though the message names kernelSize too.
        (
            lambda x, i, b: pyaclnn.max_pool3d_with_argmax(x, 2, padding=2, backend=b),
            r"padding\b.*kernelSize.*\(in Python: padding, kernel_size\)$",
        ),
        (
            lambda x, i, b: pyaclnn.max_pool3d_with_argmax(x, 2, padding=-1, backend=b),
            r"padding\b.*\(in Python: padding\b[^)]*\)$",  # the note also when padding is named alone (npu)
        ),
    ],
)
def test_operator_errors_keep_their_text_and_name_the_python_argument(backend, call, words):
    x = np.random.default_rng(0).standard_normal((1, 1, 4, 4, 4), dtype=np.float32)
    _, indices = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    with pytest.raises(AclnnError, match=words):
        call(x, indices, backend)


def test_bfloat16_is_the_scalar_type_and_is_accepted_wherever_a_dtype_is(backend):
    import ml_dtypes

    bf16 = np.dtype(ml_dtypes.bfloat16)
    assert pyaclnn.bfloat16 is ml_dtypes.bfloat16  # what np.float16 is to NumPy
    assert float(pyaclnn.bfloat16(1.5)) == 1.5
    assert pyaclnn.empty((2, 3), pyaclnn.bfloat16, backend=backend).dtype == bf16
    zeros = pyaclnn.zeros((2, 3), pyaclnn.bfloat16, backend=backend)
    assert zeros.dtype == bf16 and not zeros.numpy().any()
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2).astype(pyaclnn.bfloat16)
    out, indices = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    assert out.dtype == bf16 and float(out.reshape(-1)[0]) == 7.0 and int(indices.reshape(-1)[0]) == 7

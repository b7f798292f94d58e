"""Generic calls through pyaclnn.ops: arguments by C type, outputs returned and written back, the
four crafted operators through ops.* equal to the functional API, bad input named per kind,
DeviceArray's astype/copy/contiguous/copy_, and a captured and replayed generic call."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import pyaclnn
from pyaclnn import ops

BF16 = pyaclnn.bfloat16


def _rng():
    return np.random.default_rng(7)


# -- Add, Cast, InplaceCopy (the numpy backend's references; the emulator's kernels) ------------


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_add_broadcasts_and_applies_alpha(active, dtype):
    rng = _rng()
    x = (rng.standard_normal((3, 4)) * 10).astype(dtype)
    y = (rng.standard_normal((4,)) * 10).astype(dtype)
    out = np.empty((3, 4), dtype)
    result = ops.add(x, y, 2, out)
    assert result is out
    compute = np.float32 if dtype == np.float16 else dtype
    expected = (x.astype(compute) + np.asarray(2, compute) * y.astype(compute)).astype(dtype)
    np.testing.assert_array_equal(out, expected)


def test_add_on_device_arrays_returns_the_device_output(active):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    d, o = pyaclnn.to_device(x), pyaclnn.empty((2, 3), np.float32)
    result = ops.add(d, d, 1.0, o)
    assert result is o
    np.testing.assert_array_equal(o.numpy(), 2 * x)
    for a in (d, o):
        a.close()


def test_add_of_ints_with_alpha_one_stays_exact(active):
    big = np.array([2**62 + 1], dtype=np.int64)
    out = np.empty(1, np.int64)
    ops.add(big, np.array([1], np.int64), 1, out)
    assert int(out[0]) == 2**62 + 2


def test_add_refuses_what_cann_refuses_with_its_status(active):
    with pytest.raises(pyaclnn.AclnnError) as info:
        ops.add(np.ones((2, 3), np.float32), np.ones((4,), np.float32), 1, np.empty((2, 3), np.float32))
    assert info.value.status_name == "ACLNN_ERR_PARAM_INVALID"
    assert "(in Python: " in str(info.value)
    with pytest.raises(pyaclnn.AclnnError) as info:
        ops.add(np.ones(3, np.float32), np.ones(3, np.float32), 1, np.empty(3, np.int32))  # float to int
    assert info.value.status_name == "ACLNN_ERR_PARAM_INVALID"


@pytest.mark.parametrize("target", [np.float16, np.int32, np.bool_, "bfloat16"])
def test_cast_converts_as_the_device(active, target):
    x = np.array([[-2.7, -0.5, 0.0], [0.5, 1.5, 1e4]], dtype=np.float32)
    dtype = np.dtype(BF16) if target == "bfloat16" else np.dtype(target)
    out = ops.cast(x, dtype, np.empty(x.shape, dtype))
    expected = x != 0 if dtype == np.bool_ else x.astype(dtype)
    np.testing.assert_array_equal(out, expected)


def test_cast_takes_an_acl_constant_for_the_dtype(active):
    out = ops.cast(np.array([1.5, 2.5], np.float32), pyaclnn.constants.ACL_INT32, np.empty(2, np.int32))
    np.testing.assert_array_equal(out, [1, 2])


def test_inplace_copy_writes_a_broadcast_cast_source_into_the_numpy_array(active):
    target = np.zeros((2, 3), np.float16)
    source = np.array([1, 2, 3], np.int64)
    result = ops.inplace_copy(target, source)
    assert result is target
    np.testing.assert_array_equal(target, [[1, 2, 3], [1, 2, 3]])


def test_inplace_copy_into_a_strided_numpy_view_writes_only_the_view(active):
    base = np.zeros((4, 4), np.float32)
    view = base[::2, 1:3]
    ops.inplace_copy(view, np.full((2, 2), 5, np.float32))
    expected = np.zeros((4, 4), np.float32)
    expected[::2, 1:3] = 5
    np.testing.assert_array_equal(base, expected)


# -- the four through ops.* ------------------------------------------------------------------


def test_the_four_through_ops_equal_the_functional_api_bit_for_bit(active):
    rng = _rng()
    x = rng.standard_normal((2, 3, 6, 6, 6)).astype(np.float32)
    out = np.empty((2, 3, 3, 3, 3), np.float32)
    indices = np.empty((2, 3, 3, 3, 3), np.int32)
    got = ops.max_pool3d_with_argmax(x, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False, out, indices)
    expected = pyaclnn.max_pool3d_with_argmax(x, 2)
    assert got[0] is out and got[1] is indices
    np.testing.assert_array_equal(out, expected[0])
    np.testing.assert_array_equal(indices, expected[1])
    grad = rng.standard_normal(out.shape).astype(np.float32)
    grad_input = np.empty_like(x)
    ops.max_pool3d_with_argmax_backward(
        grad, x, indices, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False, grad_input
    )
    np.testing.assert_array_equal(grad_input, pyaclnn.max_pool3d_with_argmax_backward(grad, x, indices, 2))
    grid = rng.uniform(-1, 1, (2, 2, 3, 4, 3)).astype(np.float32)
    sampled = ops.grid_sampler3d(x, grid, 0, 0, False, np.empty((2, 3, 2, 3, 4), np.float32))
    np.testing.assert_array_equal(sampled, pyaclnn.grid_sampler3d(x, grid))
    g = rng.standard_normal(sampled.shape).astype(np.float32)
    input_grad, grid_grad = ops.grid_sampler3d_backward(
        g, x, grid, 0, 0, False, [True, True], np.empty_like(x), np.empty_like(grid)
    )
    expected_grads = pyaclnn.grid_sampler3d_backward(g, x, grid)
    np.testing.assert_array_equal(input_grad, expected_grads[0])
    np.testing.assert_array_equal(grid_grad, expected_grads[1])


# -- the Python surface -------------------------------------------------------------------------


def test_signature_and_help_show_the_parameters_and_both_prototypes(active):
    signature = inspect.signature(ops.add)
    assert list(signature.parameters) == ["self", "other", "alpha", "out", "stream"]
    assert signature.parameters["stream"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self" in ops.add.__doc__
    assert "aclnnStatus aclnnAdd(void* workspace" in ops.add.__doc__
    assert {"add", "cast", "inplace_copy", "max_pool3d_with_argmax"} <= set(dir(ops))


def test_arguments_by_keyword(active):
    out = np.empty(2, np.float32)
    ops.add(out=out, alpha=3, other=np.ones(2, np.float32), self=np.zeros(2, np.float32))
    np.testing.assert_array_equal(out, [3, 3])


@pytest.mark.parametrize(
    "args, error, words",
    [
        (
            (np.ones(2, np.float32), [1.0, 2.0], 1, "out"),
            TypeError,
            "other must be a DeviceArray or a NumPy array",
        ),
        ((np.ones(2, np.float32), None, 1, "out"), TypeError, "other is required"),
        ((np.ones(2, np.float32), "x", "a", "out"), TypeError, "other must be"),
        (
            (np.ones(2, np.float32), np.ones(2, np.float32), "a", "out"),
            TypeError,
            "alpha must be a bool, int, float",
        ),
        (
            (np.ones(2, np.float32), np.ones(2, np.float32), 2**70, "out"),
            OverflowError,
            "alpha = 1180591620717411303424",
        ),
    ],
)
def test_bad_arguments_name_the_python_parameter(active, args, error, words):
    args = tuple(np.empty(2, np.float32) if isinstance(a, str) and a == "out" else a for a in args)
    with pytest.raises(error, match=words):
        ops.add(*args)


def test_a_wrong_type_names_the_type_and_shape_not_the_array(active):
    with pytest.raises(TypeError) as info:
        ops.inplace_copy(np.zeros((64, 64, 64), np.float32), [np.zeros((64, 64, 64), np.float32)])
    assert len(str(info.value)) < 200 and "src must be" in str(info.value)


def test_missing_and_unexpected_arguments(active):
    with pytest.raises(TypeError, match="missing required argument 'out'"):
        ops.add(np.ones(2, np.float32), np.ones(2, np.float32), 1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'alpah'"):
        ops.add(np.ones(2, np.float32), np.ones(2, np.float32), alpah=1, out=np.empty(2, np.float32))
    with pytest.raises(TypeError, match="multiple values for argument 'self'"):
        ops.add(np.ones(2, np.float32), self=np.ones(2, np.float32))
    with pytest.raises(TypeError, match="missing required argument 'alpha'"):  # every argument by position
        ops.add(np.ones(2, np.float32), np.ones(2, np.float32), ops.REQUIRED, np.empty(2, np.float32))


def test_an_int_out_of_its_c_range_is_refused_naming_the_parameter(active):
    x = np.zeros((2, 3, 4, 4, 4), np.float32)
    with pytest.raises(
        OverflowError, match="interpolation_mode = 9223372036854775808 is outside the range of int64_t"
    ):
        ops.grid_sampler3d(
            x, np.zeros((2, 1, 1, 1, 3), np.float32), 2**63, 0, False, np.empty((2, 3, 1, 1, 1), np.float32)
        )


def test_a_numpy_output_with_a_device_input_is_refused_before_anything_runs(active):
    d = pyaclnn.to_device(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="out is a NumPy array the operator writes"):
        ops.add(d, d, 1, np.empty(2, np.float32))
    d.close()


# -- DeviceArray conveniences through the operators -----------------------------------------------


def test_astype_copy_and_contiguous(active):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 5.5
    d = pyaclnn.to_device(x)
    half = d.astype(np.float16)
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half.numpy(), x.astype(np.float16))
    ints = d.astype(np.int32)
    np.testing.assert_array_equal(ints.numpy(), x.astype(np.int32))
    same = d.astype(np.float32)
    assert same is not d
    np.testing.assert_array_equal(same.numpy(), x)
    view = d[:, ::2, 1:]  # a strided view of d's memory
    assert not view.is_contiguous()
    dense = view.contiguous()
    assert dense.is_contiguous()
    np.testing.assert_array_equal(dense.numpy(), x[:, ::2, 1:])
    assert dense.contiguous() is dense
    copied = d.copy()
    np.testing.assert_array_equal(copied.numpy(), x)
    for a in (d, half, ints, same, view, dense, copied):
        a.close()


def test_copy_from_a_strided_broadcast_or_other_dtype_source(active):
    target = pyaclnn.zeros((2, 3), np.float16)
    target.copy_(np.array([1, 2, 3], np.int64))  # NumPy: broadcast and cast
    np.testing.assert_array_equal(target.numpy(), [[1, 2, 3], [1, 2, 3]])
    whole = pyaclnn.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    source = whole[:2, ::2]  # strided device array
    wide = pyaclnn.zeros((2, 2), np.float64)
    wide.copy_(source)
    np.testing.assert_array_equal(wide.numpy(), [[0, 2], [4, 6]])
    with pytest.raises(ValueError, match="does not broadcast"):
        target.copy_(np.ones((4,), np.float16))
    for a in (target, source, whole, wide):
        a.close()


# -- graphs ------------------------------------------------------------------------------------------


def test_a_captured_generic_call_replays(active):
    x = pyaclnn.to_device(np.ones(4, np.float32))
    out = pyaclnn.empty(4, np.float32)
    stream = pyaclnn.Stream(backend=active)
    graph = pyaclnn.Graph()
    with pyaclnn.graph(graph, stream=stream):
        ops.add(x, x, 1, out, stream=stream)
    x.copy_(np.full(4, 3, np.float32), stream=stream)
    graph.replay(stream)
    np.testing.assert_array_equal(out.numpy(), [6, 6, 6, 6])
    graph.close()
    for a in (x, out):
        a.close()
    stream.close()


# -- every kind of argument end to end: the emulator's operators through ops.* (npu backend) ---------


@pytest.fixture
def npu(emulator_home):
    """The npu backend over the C emulator, active, with the checks of the backend fixture."""
    import os

    from pyaclnn import backends

    os.environ["PYACLNN_ASCEND_HOME"] = str(emulator_home)
    previous = pyaclnn.get_backend()
    pyaclnn.set_backend("npu")
    hazards = backends.get("npu").hazard_count()
    yield "npu"
    pyaclnn.set_backend(previous)
    pyaclnn.finalize("npu")
    emulation = backends.get("npu")
    counts = emulation.live_counts()
    assert not any(counts.values()), counts
    assert emulation.hazard_count() == hazards


def test_cat_takes_a_list_of_numpy_and_device_arrays(npu):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(3, dtype=np.float32).reshape(1, 3) + 10
    np.testing.assert_array_equal(ops.cat([a, b], 0, np.empty((3, 3), np.float32)), np.concatenate([a, b]))
    da, db = pyaclnn.to_device(a), pyaclnn.to_device(b)
    out = ops.cat([da, db, da], 0, pyaclnn.empty((5, 3), np.float32))
    np.testing.assert_array_equal(out.numpy(), np.concatenate([a, b, a]))
    for x in (da, db, out):
        x.close()


def test_split_tensor_writes_a_list_of_outputs_and_returns_it(npu):
    x = np.arange(10, dtype=np.float32)
    parts = [np.empty(4, np.float32), np.empty(4, np.float32), np.empty(2, np.float32)]
    result = ops.split_tensor(x, 4, 0, parts)
    assert isinstance(result, list) and all(r is p for r, p in zip(result, parts))
    for got, expected in zip(parts, np.split(x, [4, 8])):
        np.testing.assert_array_equal(got, expected)


def test_reduce_sum_takes_dims_keep_dims_and_a_dtype(npu, torch):
    x = _rng().standard_normal((2, 3, 4)).astype(np.float32)
    out = ops.reduce_sum(x, [0, 2], True, np.float32, np.empty((1, 3, 1), np.float32))
    expected = torch.ops.aten.sum.dim_IntList(torch.from_numpy(x), [0, 2], True).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_nan_to_num_takes_three_floats(npu):
    x = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    out = ops.nan_to_num(x, 0.5, 100.0, -100.0, np.empty(4, np.float32))
    np.testing.assert_array_equal(out, [0.5, 100.0, -100.0, 1.5])


def test_layer_norm_with_none_for_optional_inputs_and_outputs(npu, torch):
    x = _rng().standard_normal((2, 3, 8)).astype(np.float32)
    out, mean, rstd = ops.layer_norm(
        x, [8], None, None, 1e-5, np.empty_like(x), None, np.empty((2, 3, 1), np.float32)
    )
    assert mean is None
    expected = torch.ops.aten.native_layer_norm(torch.from_numpy(x), [8], None, None, 1e-5)
    np.testing.assert_allclose(out, expected[0].numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rstd, expected[2].numpy(), rtol=1e-5)


def test_foreach_add_scalar_list_takes_a_scalar_list_and_writes_a_list(npu):
    xs = [np.ones(2, np.float32), np.arange(3, dtype=np.float32)]
    outs = [np.empty(2, np.float32), np.empty(3, np.float32)]
    result = ops.foreach_add_scalar_list(xs, [1.5, 2.0], outs)
    assert len(result) == 2 and all(r is o for r, o in zip(result, outs))
    np.testing.assert_array_equal(outs[0], [2.5, 2.5])
    np.testing.assert_array_equal(outs[1], [2.0, 3.0, 4.0])


def test_resize_takes_a_float_array_and_a_string(npu, torch):
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    out = ops.resize(x, [1.0, 1.0, 0.5, 0.5], "nearest", np.empty((1, 1, 2, 2), np.float32))
    expected = torch.nn.functional.interpolate(torch.from_numpy(x), size=(2, 2), mode="nearest").numpy()
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(pyaclnn.AclnnError, match="ACLNN_ERR_PARAM_INVALID"):
        ops.resize(x, [1.0, 1.0, 0.5, 0.5], "cubic", np.empty((1, 1, 2, 2), np.float32))


def test_the_emulator_home_catalogue_has_the_fourteen_operators(npu):
    names = set(ops.catalogue("npu").index())
    assert {
        "Add",
        "Cast",
        "InplaceCopy",
        "Cat",
        "ReduceSum",
        "SplitTensor",
        "NanToNum",
        "LayerNorm",
        "ForeachAddScalarList",
        "Resize",
        "MaxPool3dWithArgmax",
        "MaxPool3dWithArgmaxBackward",
        "GridSampler3D",
        "GridSampler3DBackward",
    } <= names


def test_a_generic_call_is_a_row_of_the_profile_named_by_the_operator(active, tmp_path):
    import json

    x = np.ones(3, np.float32)
    with pyaclnn.profile(tmp_path):
        ops.add(x, x, 1, np.empty(3, np.float32))
    trace = json.loads((tmp_path / "pyaclnn_trace.json").read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert "add" in names


def test_on_the_numpy_backend_an_operator_without_a_reference_says_it_needs_cann():
    previous = pyaclnn.get_backend()
    pyaclnn.set_backend("numpy")
    try:
        with pytest.raises(
            AttributeError,
            match=r"pyaclnn.ops.flash_attention_score: .*other operators need the npu backend with CANN",
        ):
            ops.flash_attention_score  # noqa: B018
        assert "add" in dir(ops) and "flash_attention_score" not in dir(ops)
    finally:
        pyaclnn.set_backend(previous)


def test_on_the_split_layout_an_operator_of_another_library_is_found_on_demand():
    """CANN >= 8.5 splits the operators by library: Add is in libopapi_math.so, which the npu
    backend does not open at start; the generic call opens it and finds the symbols there."""
    import json
    import os
    import subprocess
    import sys
    import textwrap

    from emulator_build import emulator_home

    home = emulator_home("split")
    code = textwrap.dedent(
        """
        import json, numpy as np, pyaclnn
        from pyaclnn import ops, backends
        out = ops.add(np.ones(3, np.float32), np.arange(3, dtype=np.float32), 2, np.empty(3, np.float32))
        npu = backends.get("npu")
        print(json.dumps({"out": out.tolist(), "headers": str(ops.catalogue().folder),
                          "opened": [p.name for p in npu.libraries]}))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYACLNN_")}
    env.update(PYACLNN_ASCEND_HOME=str(home), PYACLNN_BACKEND="npu")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["out"] == [1.0, 3.0, 5.0]
    assert result["headers"] == str(home / "include" / "aclnnop")
    assert "libopapi_math.so" not in result["opened"]  # opened on demand, not at start

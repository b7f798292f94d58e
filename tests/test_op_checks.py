"""Every phase-1 check of docs/operator-semantics.md, in order, with its status code, on each backend.

Each case starts from a valid call and breaks one rule; the test asserts the
status and that the message names the argument. Run through the low-level API,
as the C samples call the ops.
"""

from __future__ import annotations

import lowlevel as ll
import numpy as np
import pytest
from lowlevel import NCDHW, NDHWC, NULL, Spec

from pyaclnn import AclError, AclnnError, bfloat16, constants

# Short local names: the tables below would not fit their lines with the C names.
NULLPTR, INVALID, INNER_NULLPTR = (
    constants.ACLNN_ERR_PARAM_NULLPTR,
    constants.ACLNN_ERR_PARAM_INVALID,
    constants.ACLNN_ERR_INNER_NULLPTR,
)
F32, F16, F64, I32, I64 = np.float32, np.float16, np.float64, np.int32, np.int64


def status(fn, *args, **kwargs) -> tuple[int, str]:
    try:
        fn(*args, **kwargs)
    except AclnnError as exc:
        return exc.status, str(exc)
    return 0, ""


# -- MaxPool3dWithArgmax ------------------------------------------------------

POOL_OK = dict(
    x=Spec((1, 2, 4, 4, 4)),
    kernel=(2, 2, 2),
    stride=(2, 2, 2),
    padding=(0, 0, 0),
    dilation=(1, 1, 1),
    ceil=False,
    out=Spec((1, 2, 2, 2, 2)),
    indices=Spec((1, 2, 2, 2, 2), I32),
)

POOL_CASES = {
    "null self": (dict(x=NULL), NULLPTR, "self"),
    "null kernelSize": (dict(kernel=NULL), NULLPTR, "kernelSize"),
    "null stride": (dict(stride=NULL), NULLPTR, "stride"),
    "null padding": (dict(padding=NULL), NULLPTR, "padding"),
    "null dilation": (dict(dilation=NULL), NULLPTR, "dilation"),
    "null out": (dict(out=NULL), NULLPTR, "out"),
    "null indices": (dict(indices=NULL), NULLPTR, "indices"),
    "null wins over a bad dtype": (dict(out=NULL, x=Spec((1, 2, 4, 4, 4), F64)), NULLPTR, "out"),
    "self float64": (dict(x=Spec((1, 2, 4, 4, 4), F64), out=Spec((1, 2, 2, 2, 2), F64)), INVALID, "self"),
    "self int32": (dict(x=Spec((1, 2, 4, 4, 4), I32), out=Spec((1, 2, 2, 2, 2), I32)), INVALID, "self"),
    "int64 indices on A2/A3": (dict(indices=Spec((1, 2, 2, 2, 2), I64)), INVALID, "indices"),
    "out dtype differs": (dict(out=Spec((1, 2, 2, 2, 2), F16)), INVALID, "out"),
    "out format differs": (dict(out=Spec((1, 2, 2, 2, 2), fmt=NCDHW)), INVALID, "out"),
    "NDHWC self": (
        dict(
            x=Spec((1, 2, 4, 4, 4), fmt=NDHWC),
            out=Spec((1, 2, 2, 2, 2), fmt=NDHWC),
            indices=Spec((1, 2, 2, 2, 2), I32, fmt=NDHWC),
        ),
        INVALID,
        "self",
    ),
    "rank 3": (dict(x=Spec((4, 4, 4))), INVALID, "rank"),
    "rank 6": (dict(x=Spec((1, 1, 2, 4, 4, 4))), INVALID, "rank"),
    "kernel length 2": (dict(kernel=(2, 2)), INVALID, "kernelSize"),
    "kernel 0": (dict(kernel=(2, 0, 2)), INVALID, "kernelSize"),
    "stride length 2": (dict(stride=(2, 2)), INVALID, "stride"),
    "stride 0": (dict(stride=(2, 2, 0)), INVALID, "stride"),
    "padding length 2": (dict(padding=(0, 0)), INVALID, "padding"),
    "padding negative": (dict(padding=(0, -1, 0)), INVALID, "padding"),
    "padding above k/2": (dict(padding=(0, 0, 2)), INVALID, "padding"),
    "dilation length 0": (dict(dilation=()), INVALID, "dilation"),
    "dilation 0": (dict(dilation=(1, 0, 1)), INVALID, "dilation"),
    "dilation 2 on A2/A3": (dict(dilation=(2, 2, 2)), INVALID, "dilation"),
    "out shape differs": (dict(out=Spec((1, 2, 2, 2, 3))), INVALID, "out"),
    "indices shape differs": (dict(indices=Spec((1, 2, 2, 3, 2), I32)), INVALID, "indices"),
    "D*H*W above INT32_MAX": (
        dict(
            x=Spec((1, 1, 2048, 2048, 1024), strides=(0, 0, 0, 0, 0)),
            kernel=(1, 1, 1),
            stride=(1, 1, 1),
            out=Spec((1, 1, 2048, 2048, 1024), strides=(0, 0, 0, 0, 0)),
            indices=Spec((1, 1, 2048, 2048, 1024), I32, strides=(0, 0, 0, 0, 0)),
        ),
        INNER_NULLPTR,
        "INT32_MAX",
    ),
}


@pytest.mark.parametrize("case", POOL_CASES, ids=list(POOL_CASES))
def test_max_pool3d_forward_rejects(backend, case):
    change, code, word = POOL_CASES[case]
    got, message = status(ll.max_pool3d_with_argmax, backend, **{**POOL_OK, **change})
    assert got == code, message
    assert word in message


def test_max_pool3d_forward_valid_call_and_its_variants_pass(backend):
    x = np.arange(64, dtype=np.float32).reshape(1, 1, 4, 4, 4)
    out, idx = ll.max_pool3d_with_argmax(
        backend, **{**POOL_OK, "x": x, "out": Spec((1, 1, 2, 2, 2)), "indices": Spec((1, 1, 2, 2, 2), I32)}
    )
    assert out.ravel().tolist() == [21, 23, 29, 31, 53, 55, 61, 63]
    assert idx.ravel().tolist() == [21, 23, 29, 31, 53, 55, 61, 63]
    # length-1 parameters, stride () meaning "= kernel", a 4-D (C, D, H, W) input
    out4, idx4 = ll.max_pool3d_with_argmax(
        backend, x[0], (2,), (), (0,), (1,), False, Spec((1, 2, 2, 2)), Spec((1, 2, 2, 2), I32)
    )
    assert out4.ravel().tolist() == out.ravel().tolist() and idx4.ravel().tolist() == idx.ravel().tolist()


def test_max_pool3d_forward_empty_input_succeeds_and_writes_nothing(backend):
    out, idx = ll.max_pool3d_with_argmax(
        backend,
        **{
            **POOL_OK,
            "x": Spec((1, 0, 4, 4, 4)),
            "out": Spec((1, 0, 2, 2, 2)),
            "indices": Spec((1, 0, 2, 2, 2), I32),
        },
    )
    assert out.shape == (1, 0, 2, 2, 2) and idx.shape == (1, 0, 2, 2, 2)
    out, idx = ll.max_pool3d_with_argmax(
        backend, **{**POOL_OK, "out": Spec((1, 2, 0, 2, 2)), "indices": Spec((1, 2, 2, 2, 2), I32, fill=7)}
    )
    assert (idx == 7).all()


def test_max_pool3d_forward_accepts_single_element_shapes_that_differ(backend):
    x = np.array([3.0, 1.0], np.float32).reshape(1, 1, 1, 1, 2)
    out, idx = ll.max_pool3d_with_argmax(
        backend,
        x,
        (1, 1, 2),
        (1, 1, 2),
        (0, 0, 0),
        (1, 1, 1),
        False,
        Spec((1, 1, 1, 1)),
        Spec((1, 1, 1, 1), I32),
    )
    assert out.ravel().tolist() == [3.0] and idx.ravel().tolist() == [0]


# -- MaxPool3dWithArgmaxBackward ----------------------------------------------

BWD_OK = dict(
    grad_output=Spec((1, 2, 2, 2, 2), fill=1),
    x=Spec((1, 2, 4, 4, 4)),
    indices=Spec((1, 2, 2, 2, 2), I32),
    kernel=(2, 2, 2),
    stride=(2, 2, 2),
    padding=(0, 0, 0),
    dilation=(1, 1, 1),
    ceil=False,
    grad_input=Spec((1, 2, 4, 4, 4)),
)

BWD_CASES = {
    "null gradOutput": (dict(grad_output=NULL), NULLPTR, "gradOutput"),
    "null self": (dict(x=NULL), NULLPTR, "self"),
    "null indices": (dict(indices=NULL), NULLPTR, "indices"),
    "null kernelSize": (dict(kernel=NULL), NULLPTR, "kernelSize"),
    "null stride": (dict(stride=NULL), NULLPTR, "stride"),
    "null padding": (dict(padding=NULL), NULLPTR, "padding"),
    "null dilation": (dict(dilation=NULL), NULLPTR, "dilation"),
    "null gradInput": (dict(grad_input=NULL), NULLPTR, "gradInput"),
    "self float64": (dict(x=Spec((1, 2, 4, 4, 4), F64)), INVALID, "self"),
    "int64 indices on A2/A3": (dict(indices=Spec((1, 2, 2, 2, 2), I64)), INVALID, "indices"),
    "gradOutput dtype differs": (dict(grad_output=Spec((1, 2, 2, 2, 2), F16)), INVALID, "gradOutput"),
    "gradInput dtype differs": (dict(grad_input=Spec((1, 2, 4, 4, 4), bfloat16)), INVALID, "gradInput"),
    "gradOutput format differs": (dict(grad_output=Spec((1, 2, 2, 2, 2), fmt=NCDHW)), INVALID, "gradOutput"),
    "gradOutput rank 3": (dict(grad_output=Spec((2, 2, 2))), INVALID, "gradOutput"),
    "self rank 6": (dict(x=Spec((1, 1, 2, 4, 4, 4))), INVALID, "self"),
    "kernel length 2": (dict(kernel=(2, 2)), INVALID, "kernelSize"),
    "stride length 2": (dict(stride=(2, 2)), INVALID, "stride"),
    "padding above k/2": (dict(padding=(2, 0, 0)), INVALID, "padding"),
    "dilation 0": (dict(dilation=(0,)), INVALID, "dilation"),
    "indices shape differs from gradOutput": (dict(indices=Spec((1, 2, 2, 2, 1), I32)), INVALID, "indices"),
    "gradInput shape differs from self": (dict(grad_input=Spec((1, 2, 4, 4, 5))), INVALID, "gradInput"),
    "gradOutput shape differs from the pooling formula": (
        dict(grad_output=Spec((1, 2, 2, 2, 3)), indices=Spec((1, 2, 2, 2, 3), I32)),
        INVALID,
        "gradOutput",
    ),
    "gradOutput N/C differ from self": (
        dict(grad_output=Spec((1, 3, 2, 2, 2)), indices=Spec((1, 3, 2, 2, 2), I32)),
        INVALID,
        "gradOutput",
    ),
    "D*H*W above INT32_MAX": (
        dict(
            x=Spec((1, 1, 2048, 2048, 1024), strides=(0, 0, 0, 0, 0)),
            grad_input=Spec((1, 1, 2048, 2048, 1024), strides=(0, 0, 0, 0, 0)),
        ),
        INVALID,
        "INT32_MAX",
    ),
}


@pytest.mark.parametrize("case", BWD_CASES, ids=list(BWD_CASES))
def test_max_pool3d_backward_rejects(backend, case):
    change, code, word = BWD_CASES[case]
    got, message = status(ll.max_pool3d_with_argmax_backward, backend, **{**BWD_OK, **change})
    assert got == code, message
    assert word in message


def test_max_pool3d_backward_seed_example(backend):
    # Golden values from the operator document's sample.
    x = np.array([0.0850, -0.5147, -0.0212, -0.5654, -0.3222, 0.5847, 1.7510, 0.9954], np.float32)
    grad = ll.max_pool3d_with_argmax_backward(
        backend,
        np.array([0.4757], np.float32).reshape(1, 1, 1, 1, 1),
        x.reshape(1, 1, 2, 2, 2),
        np.array([6], np.int32).reshape(1, 1, 1, 1, 1),
        (2, 2, 2),
        (2, 2, 2),
        (0, 0, 0),
        (1, 1, 1),
        False,
        Spec((1, 1, 2, 2, 2), fill=9),
    )
    np.testing.assert_array_equal(grad.ravel(), np.array([0, 0, 0, 0, 0, 0, 0.4757, 0], np.float32))


def test_max_pool3d_backward_accepts_dilation_above_1_as_the_npu_does(backend):
    g = np.ones((1, 1, 1, 1, 1), np.float32)
    grad = ll.max_pool3d_with_argmax_backward(
        backend,
        g,
        Spec((1, 1, 3, 3, 3)),
        np.array([26], np.int32).reshape(1, 1, 1, 1, 1),
        (2,),
        (2,),
        (0,),
        (2,),
        False,
        Spec((1, 1, 3, 3, 3)),
    )
    assert grad.ravel()[26] == 1 and grad.sum() == 1


@pytest.mark.parametrize("bad", [-1, 64, 2**31 - 1])
def test_max_pool3d_backward_index_outside_its_plane_is_a_device_error_at_the_next_synchronize(backend, bad):
    # Only the kernel sees index values: phase 1 and the launch succeed, the kernel refuses
    # to write and the stream's synchronize reports it (ll.Call.run synchronizes).
    indices = np.zeros((1, 2, 2, 2, 2), np.int32)
    indices[0, 1, 1, 0, 1] = bad
    with pytest.raises(AclError) as error:
        ll.max_pool3d_with_argmax_backward(
            backend, **{**BWD_OK, "indices": indices, "grad_input": Spec((1, 2, 4, 4, 4), fill=5)}
        )
    assert error.value.status == constants.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
    assert error.value.api == "aclrtSynchronizeStream"
    assert f"aclnnMaxPool3dWithArgmaxBackward: indices[0, 1, 1, 0, 1] = {bad}" in str(error.value)


def test_max_pool3d_backward_empty_tensors_succeed_and_leave_grad_input_untouched(backend):
    grad = ll.max_pool3d_with_argmax_backward(
        backend,
        **{
            **BWD_OK,
            "grad_output": Spec((1, 0, 2, 2, 2)),
            "indices": Spec((1, 0, 2, 2, 2), I32),
            "grad_input": Spec((1, 2, 4, 4, 4), fill=3),
        },
    )
    assert (grad == 3).all()


# -- GridSampler3D --------------------------------------------------------------

GRID_OK = dict(
    x=Spec((1, 2, 3, 4, 5)),
    grid=Spec((1, 2, 2, 2, 3)),
    interpolation=0,
    padding=0,
    align_corners=False,
    out=Spec((1, 2, 2, 2, 2)),
)

GRID_CASES = {
    "null input": (dict(x=NULL), NULLPTR, "input"),
    "null grid": (dict(grid=NULL), NULLPTR, "grid"),
    "null out": (dict(out=NULL), NULLPTR, "out"),
    "input int32": (
        dict(x=Spec((1, 2, 3, 4, 5), I32), grid=Spec((1, 2, 2, 2, 3), I32), out=Spec((1, 2, 2, 2, 2), I32)),
        INVALID,
        "input",
    ),
    "grid dtype differs": (dict(grid=Spec((1, 2, 2, 2, 3), F64)), INVALID, "grid"),
    "out dtype differs": (dict(out=Spec((1, 2, 2, 2, 2), F16)), INVALID, "out"),
    "paddingMode 3": (dict(padding=3), INVALID, "paddingMode"),
    "interpolationMode 2 (bicubic)": (dict(interpolation=2), INVALID, "interpolationMode"),
    "paddingMode is checked before interpolationMode": (
        dict(padding=-1, interpolation=5),
        INVALID,
        "paddingMode",
    ),
    "input rank 4": (dict(x=Spec((2, 3, 4, 5))), INVALID, "input"),
    "N differs": (dict(grid=Spec((2, 2, 2, 2, 3))), INVALID, "N"),
    "C differs": (dict(out=Spec((1, 3, 2, 2, 2))), INVALID, "C"),
    "grid spatial differs from out": (dict(grid=Spec((1, 2, 2, 3, 3))), INVALID, "grid"),
    "grid last dim 2": (dict(grid=Spec((1, 2, 2, 2, 2))), INVALID, "grid"),
    "input H is 0": (dict(x=Spec((1, 2, 3, 0, 5))), INVALID, "input"),
}


@pytest.mark.parametrize("case", GRID_CASES, ids=list(GRID_CASES))
def test_grid_sampler3d_forward_rejects(backend, case):
    change, code, word = GRID_CASES[case]
    got, message = status(ll.grid_sampler3d, backend, **{**GRID_OK, **change})
    assert got == code, message
    assert word in message


def test_grid_sampler3d_forward_empty_grid_succeeds(backend):
    out = ll.grid_sampler3d(
        backend, **{**GRID_OK, "grid": Spec((1, 0, 2, 2, 3)), "out": Spec((1, 2, 0, 2, 2))}
    )
    assert out.shape == (1, 2, 0, 2, 2)


# -- GridSampler3DBackward ----------------------------------------------------

GBWD_OK = dict(
    grad_output=Spec((1, 2, 2, 2, 2), fill=1),
    x=Spec((1, 2, 3, 4, 5), fill=1),
    grid=Spec((1, 2, 2, 2, 3)),
    interpolation=0,
    padding=0,
    align_corners=False,
    mask=(True, True),
    input_grad=Spec((1, 2, 3, 4, 5), fill=7),
    grid_grad=Spec((1, 2, 2, 2, 3), fill=7),
)

GBWD_CASES = {
    "null gradOutput": (dict(grad_output=NULL), NULLPTR, "gradOutput"),
    "null input": (dict(x=NULL), NULLPTR, "input"),
    "null grid": (dict(grid=NULL), NULLPTR, "grid"),
    "null inputGrad": (dict(input_grad=NULL), NULLPTR, "inputGrad"),
    "null gridGrad": (dict(grid_grad=NULL), NULLPTR, "gridGrad"),
    "input int64": (dict(x=Spec((1, 2, 3, 4, 5), I64)), INVALID, "input"),
    "gradOutput dtype differs": (dict(grad_output=Spec((1, 2, 2, 2, 2), F64)), INVALID, "gradOutput"),
    "gridGrad dtype differs": (dict(grid_grad=Spec((1, 2, 2, 2, 3), F16)), INVALID, "gridGrad"),
    "paddingMode 3": (dict(padding=3), INVALID, "paddingMode"),
    "interpolationMode 2": (dict(interpolation=2), INVALID, "interpolationMode"),
    "grid rank 4": (dict(grid=Spec((1, 2, 2, 3))), INVALID, "grid"),
    "N differs": (dict(grad_output=Spec((2, 2, 2, 2, 2))), INVALID, "N"),
    "C differs": (dict(grad_output=Spec((1, 3, 2, 2, 2))), INVALID, "C"),
    "grid spatial differs from gradOutput": (
        dict(grid=Spec((1, 2, 2, 1, 3)), grid_grad=Spec((1, 2, 2, 1, 3))),
        INVALID,
        "grid",
    ),
    "grid last dim 4": (dict(grid=Spec((1, 2, 2, 2, 4)), grid_grad=Spec((1, 2, 2, 2, 4))), INVALID, "grid"),
    "inputGrad shape differs": (dict(input_grad=Spec((1, 2, 3, 4, 4))), INVALID, "inputGrad"),
    "gridGrad shape differs": (dict(grid_grad=Spec((1, 2, 2, 3, 3))), INVALID, "gridGrad"),
    "outputMask length 3": (dict(mask=(True, True, False)), INVALID, "outputMask"),
    "outputMask length 1": (dict(mask=(True,)), INVALID, "outputMask"),
}


@pytest.mark.parametrize("case", GBWD_CASES, ids=list(GBWD_CASES))
def test_grid_sampler3d_backward_rejects(backend, case):
    change, code, word = GBWD_CASES[case]
    got, message = status(ll.grid_sampler3d_backward, backend, **{**GBWD_OK, **change})
    assert got == code, message
    assert word in message


def test_grid_sampler3d_backward_null_mask_is_a_successful_no_op_before_any_check(backend):
    ig, gg = ll.grid_sampler3d_backward(
        backend, **{**GBWD_OK, "mask": NULL, "padding": 9, "x": Spec((1, 2, 3, 4, 5), I64)}
    )
    assert (ig == 7).all() and (gg == 7).all()


def test_grid_sampler3d_backward_false_false_mask_writes_nothing(backend):
    ig, gg = ll.grid_sampler3d_backward(backend, **{**GBWD_OK, "mask": (False, False)})
    assert (ig == 7).all() and (gg == 7).all()


@pytest.mark.parametrize("mask", [(True, False), (False, True)])
def test_grid_sampler3d_backward_partial_mask_leaves_the_other_output_untouched(backend, mask):
    ig, gg = ll.grid_sampler3d_backward(backend, **{**GBWD_OK, "mask": mask})
    assert (ig == 7).all() != mask[0]
    assert (gg == 7).all() != mask[1]


def test_grid_sampler3d_backward_empty_input_succeeds_and_writes_nothing(backend):
    ig, gg = ll.grid_sampler3d_backward(
        backend,
        **{
            **GBWD_OK,
            "grad_output": Spec((1, 2, 0, 2, 2)),
            "grid": Spec((1, 0, 2, 2, 3)),
            "grid_grad": Spec((1, 0, 2, 2, 3)),
        },
    )
    assert (ig == 7).all() and gg.size == 0


def test_grid_sampler3d_backward_ndhwc_layout_is_taken_from_input(backend):
    # (N, D, H, W, C) with C = 2: gradOutput (1, 2, 2, 2, 2) has C last.
    got, _ = status(
        ll.grid_sampler3d_backward,
        backend,
        **{**GBWD_OK, "x": Spec((1, 3, 4, 5, 2)), "input_grad": Spec((1, 3, 4, 5, 2)), "fmt": NDHWC},
    )
    assert got == 0
    got, message = status(
        ll.grid_sampler3d_backward,
        backend,
        **{**GBWD_OK, "x": Spec((1, 3, 4, 5, 3)), "input_grad": Spec((1, 3, 4, 5, 3)), "fmt": NDHWC},
    )
    assert got == INVALID and "C" in message


# -- the plans the checks return ----------------------------------------------


def test_a_max_pool_plan_is_5d_with_its_output_shape_and_compute_dtype():
    from types import SimpleNamespace

    from pyaclnn.kernels import checks

    def t(shape, dtype=constants.ACL_FLOAT16):
        return SimpleNamespace(shape=shape, data_type=dtype, format=constants.ACL_FORMAT_ND)

    plan = checks.max_pool3d_with_argmax(
        t((2, 5, 5, 5)), [2], [], [0], [1], True, t((2, 3, 3, 3)), t((2, 3, 3, 3), constants.ACL_INT32)
    )
    assert plan.input_shape == (1, 2, 5, 5, 5) and plan.output_shape == (1, 2, 3, 3, 3)
    assert not plan.batched and plan.params.stride == (2, 2, 2) and plan.plane == 125
    assert plan.compute_dtype == np.float32


def test_the_pooled_output_of_an_axis_without_a_window_is_empty():
    from pyaclnn.kernels import checks

    assert checks.pool_output_shape((1, 2, 1, 5, 5), [3], [1], [0], [1], False) == (1, 2, 0, 3, 3)


def test_a_max_pool_plan_carries_the_indices_dtype_and_the_plane_limit():
    from types import SimpleNamespace

    from pyaclnn.kernels import checks

    def t(shape, dtype=constants.ACL_FLOAT):
        return SimpleNamespace(shape=shape, data_type=dtype, format=constants.ACL_FORMAT_ND)

    plan = checks.max_pool3d_with_argmax(
        t((1, 2, 4, 4, 4)),
        [2],
        [2],
        [0],
        [1],
        False,
        t((1, 2, 2, 2, 2)),
        t((1, 2, 2, 2, 2), constants.ACL_INT32),
    )
    assert plan.index_dtype == np.int32 and plan.plane == 64
    assert checks.PLANE_LIMIT == np.iinfo(plan.index_dtype).max  # every index of a plan fits its dtype


def test_the_pooled_size_formula_has_one_home():
    """The checks state it; the reference kernel module re-exports it for its callers."""
    from pyaclnn.kernels import checks
    from pyaclnn.kernels import max_pool3d as reference

    assert reference.pool_output_size is checks.pool_output_size
    params = checks.pool_params([3], [2], [1], [1], True)
    assert params.pooled((5, 6, 7)) == reference.pool_output_shape(
        (5, 6, 7), (3,) * 3, (2,) * 3, (1,) * 3, (1,) * 3, True
    )


def test_the_null_pointer_rule_follows_the_operator_table():
    """Every pointer parameter of every operator, in C order, is refused as null by its check
    (the grid backward's outputMask excepted: null there is a successful no-op)."""
    from types import SimpleNamespace

    from pyaclnn import _optable
    from pyaclnn.kernels import checks

    tensor = SimpleNamespace(
        shape=(1, 1, 1, 1, 1), data_type=constants.ACL_FLOAT, format=constants.ACL_FORMAT_ND
    )
    values = {
        _optable.INT_ARRAY: (1,),
        _optable.BOOL_ARRAY: (True, True),
        _optable.INT: 0,
        _optable.BOOL: False,
    }
    for spec in _optable.operators():
        args = [values.get(p.kind, tensor) for p in spec.params]
        for i, param in enumerate(spec.params):
            if param.kind in (_optable.INT, _optable.BOOL) or param.c_name == "outputMask":
                continue
            with pytest.raises(checks.CheckFailed) as info:
                getattr(checks, spec.python_name)(*args[:i], None, *args[i + 1 :])
            assert info.value.status == NULLPTR and info.value.message.startswith(param.c_name), spec.name

"""The reader of CANN's operator headers (pyaclnn.ops._headers) and the type table (ops._types),
over headers written in the forms CANN's take: long comment blocks, both export macros,
declarations over several lines, const forms, extern "C" guards, includes, a subfolder."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pyaclnn.ops import _headers, _listing, _types, _vendors

# Every parameter kind of CANN 8.1.RC1's phase 1, in the forms its headers use.
ALL_KINDS = """\
/**
 * Copyright (c) Someone. All rights reserved.
 */
#ifndef OP_API_INC_KINDS_H_
#define OP_API_INC_KINDS_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief aclnnEveryKind: the first phase. (A comment naming aclnnStatus aclnnFake(void); is no declaration.)
 * @param [in] self: a tensor
 */
ACLNN_API aclnnStatus aclnnEveryKindGetWorkspaceSize(const aclTensor* self, const aclTensorList *tensors,
                                                     const aclScalar* alpha, const aclScalarList* scalars,
                                                     const aclIntArray* dims, const aclBoolArray *mask,
                                                     const aclFloatArray* scales, int64_t dim,
                                                     const int32_t n,
                                                     int8_t small, int count, uint64_t sections,
                                                     bool keepDims, const bool flag, double eps,
                                                     const float f,
                                                     const char* mode, char *reduce, const aclDataType dtype,
                                                     aclTensor* out, aclTensorList* outList,
                                                     uint64_t* workspaceSize, aclOpExecutor** executor);

// the second phase, here with const forms
ACLNN_API aclnnStatus aclnnEveryKind(void* workspace, const uint64_t workspaceSize, aclOpExecutor* executor,
                                     const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // OP_API_INC_KINDS_H_
"""

# A generated custom-operator header's form: __attribute__, one parameter a line.
VISIBILITY = """\
/*
 * calution: this file was generated automaticlly donot change it.
*/
#ifndef ACLNN_MY_OP_H_
#define ACLNN_MY_OP_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* function: aclnnMyOpGetWorkspaceSize
 * parameters :
 * x : required
 * from : required
 * lambda : optional
 * out : required
 * workspaceSize : size of workspace(output).
 * executor : executor context(output).
 */
__attribute__((visibility("default")))
aclnnStatus aclnnMyOpGetWorkspaceSize(
    const aclTensor *x,
    int64_t from,
    const aclTensor *lambdaOptional,
    const aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

__attribute__((visibility("default")))
aclnnStatus aclnnMyOp(
    void *workspace,
    uint64_t workspaceSize,
    aclOpExecutor *executor,
    aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
"""

ROLES = """\
ACLNN_API aclnnStatus aclnnInplaceHardswishGetWorkspaceSize(const aclTensor* self, uint64_t* workspaceSize,
                                                            aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnInplaceHardswish(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            aclrtStream stream);
ACLNN_API aclnnStatus aclnnRolesGetWorkspaceSize(const aclTensor* x, const aclTensor* output,
    const aclTensor* meanOut, const aclTensor* stateRef, const aclTensor* yOutput,
    const aclTensor* rstdOutOptional,
    const aclTensor* outer, uint64_t* workspaceSize, aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnRoles(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                 aclrtStream stream);
"""

REFUSED = """\
ACLNN_API aclnnStatus aclnnOddTypeGetWorkspaceSize(const aclTensor* self, const aclOpaqueThing* thing,
                                                   aclTensor* out, uint64_t* workspaceSize,
                                                   aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnOddType(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   aclrtStream stream);
ACLNN_API aclnnStatus aclnnNoLaunchGetWorkspaceSize(const aclTensor* self, uint64_t* workspaceSize,
                                                    aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnOddLaunchGetWorkspaceSize(const aclTensor* self, uint64_t* workspaceSize,
                                                     aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnOddLaunch(void* workspace, uint64_t workspaceSize, aclrtStream stream);
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A toolkit-layout CANN home with the headers above, one of them in a subfolder."""
    aclnnop = tmp_path / "home" / _headers.HEADER_FOLDERS[0]
    (aclnnop / "level2").mkdir(parents=True)
    (aclnnop / "aclnn_every_kind.h").write_text(ALL_KINDS)
    (aclnnop / "level2" / "aclnn_my_op.h").write_text(VISIBILITY)
    (aclnnop / "aclnn_roles.h").write_text(ROLES)
    (aclnnop / "aclnn_refused.h").write_text(REFUSED)
    return aclnnop


def _declaration(folder: Path, name: str) -> _headers.Declaration:
    found = {d.name: d for d in _headers.Catalogue(folder).declarations()}
    return found[name]


def test_every_parameter_kind_is_read_with_its_type_as_declared(folder):
    declaration = _declaration(folder, "EveryKind")
    assert _types.refusal(declaration) is None
    kinds = [(p.c.type, p.kind) for p in _types.parameters(declaration)]
    assert kinds == [
        ("const aclTensor*", _types.TENSOR),
        ("const aclTensorList*", _types.TENSOR_LIST),
        ("const aclScalar*", _types.SCALAR),
        ("const aclScalarList*", _types.SCALAR_LIST),
        ("const aclIntArray*", _types.INT_ARRAY),
        ("const aclBoolArray*", _types.BOOL_ARRAY),
        ("const aclFloatArray*", _types.FLOAT_ARRAY),
        ("int64_t", _types.INT),
        ("const int32_t", _types.INT),
        ("int8_t", _types.INT),
        ("int", _types.INT),
        ("uint64_t", _types.INT),
        ("bool", _types.BOOL),
        ("const bool", _types.BOOL),
        ("double", _types.FLOAT),
        ("const float", _types.FLOAT),
        ("const char*", _types.STRING),
        ("char*", _types.STRING),
        ("const aclDataType", _types.DTYPE),
        ("aclTensor*", _types.TENSOR),
        ("aclTensorList*", _types.TENSOR_LIST),
    ]
    assert declaration.phase2_prototype == (
        "aclnnStatus aclnnEveryKind(void* workspace, const uint64_t workspaceSize, aclOpExecutor* executor, "
        "const aclrtStream stream);"
    )


def test_a_comment_that_quotes_a_declaration_declares_nothing(folder):
    names = {d.name for d in _headers.Catalogue(folder).declarations()}
    assert "Fake" not in names


def test_the_visibility_attribute_and_one_parameter_a_line_in_a_subfolder(folder):
    declaration = _declaration(folder, "MyOp")
    assert declaration.header == folder / "level2" / "aclnn_my_op.h"
    params = _types.parameters(declaration)
    assert [p.python_name for p in params] == ["x", "from_", "lambda_optional", "out"]
    assert [p.optional for p in params] == [False, False, True, False]
    assert _headers.Catalogue(folder).relative(declaration.header) == "level2/aclnn_my_op.h"


@pytest.mark.parametrize(
    "c_name, python",
    [
        ("keepDims", "keep_dims"),
        ("selfRef", "self_ref"),
        ("from", "from_"),
        ("lambda", "lambda_"),
        ("stream", "stream_"),
        ("x1", "x1"),
        ("gradOutput", "grad_output"),
    ],
)
def test_python_names_of_parameters(c_name, python):
    assert _types.python_parameter_name(c_name) == python


@pytest.mark.parametrize(
    "c_name, python",
    [
        ("Add", "add"),
        ("MaxPool3dWithArgmaxBackward", "max_pool3d_with_argmax_backward"),
        ("GridSampler3DBackward", "grid_sampler3d_backward"),
        ("ForeachAddScalarList", "foreach_add_scalar_list"),
        ("InplaceCopy", "inplace_copy"),
    ],
)
def test_python_names_of_operators(c_name, python):
    assert _types.python_operator_name(c_name) == python


def test_outputs_by_constness_name_and_inplace_rule(folder):
    hardswish = _types.parameters(_declaration(folder, "InplaceHardswish"))
    assert [(p.c.name, p.role) for p in hardswish] == [("self", _types.OUTPUT)]
    roles = {p.c.name: p.role for p in _types.parameters(_declaration(folder, "Roles"))}
    assert roles == {
        "x": _types.INPUT,
        "output": _types.OUTPUT,
        "meanOut": _types.OUTPUT,
        "stateRef": _types.OUTPUT,
        "yOutput": _types.OUTPUT,
        "rstdOutOptional": _types.OUTPUT,
        "outer": _types.INPUT,  # "out" only as the whole name or a suffix
    }
    every = {p.c.name: p.role for p in _types.parameters(_declaration(folder, "EveryKind"))}
    assert every["out"] == every["outList"] == _types.OUTPUT  # not const
    assert every["self"] == every["tensors"] == _types.INPUT


def test_refusals_name_the_reason(folder):
    catalogue = _headers.Catalogue(folder)
    reasons = {d.name: _types.refusal(d) for d in catalogue.declarations()}
    assert (
        reasons["OddType"]
        == "parameter thing has type 'const aclOpaqueThing*', which pyaclnn does not convert"
    )
    assert "no phase 2" in reasons["NoLaunch"]
    assert (
        "phase 2 takes (void* workspace, uint64_t workspaceSize, aclrtStream stream)" in reasons["OddLaunch"]
    )


def test_a_home_of_either_layout_or_the_folder_itself_finds_the_headers(folder, tmp_path):
    home = folder.parents[len(Path(_headers.HEADER_FOLDERS[0]).parts) - 1]
    assert _headers.header_folder(home) == folder
    assert _headers.header_folder(folder) == folder
    split = tmp_path / "split"
    (split / "include" / "aclnnop").mkdir(parents=True)
    (split / "include" / "aclnnop" / "aclnn_roles.h").write_text(ROLES)
    assert _headers.header_folder(split) == split / "include" / "aclnnop"
    with pytest.raises(_headers.HeaderError, match="no operator headers"):
        _headers.header_folder(tmp_path / "nothing")


def test_find_reads_the_header_named_after_the_operator_first(folder):
    catalogue = _headers.Catalogue(folder)
    assert catalogue.find("every_kind").name == "EveryKind"
    assert catalogue._index is None  # found in aclnn_every_kind.h: no other header read
    assert catalogue.find("my_op").name == "MyOp"  # not where its name says: every header's names
    assert catalogue.find("no_such_op") is None


def test_the_first_header_declaring_an_operator_wins(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "aclnn_a.h").write_text(ROLES)
    (tmp_path / "b" / "aclnn_a.h").write_text(
        ROLES.replace("const aclTensor* outer", "const aclTensor* other")
    )
    declaration = {d.name: d for d in _headers.Catalogue(tmp_path).declarations()}["Roles"]
    assert declaration.header == tmp_path / "aclnn_a.h"
    assert declaration.params[-1].name == "outer"


def test_the_listing_in_json_has_every_operator_and_every_refusal(folder):
    report = _listing.describe(_vendors.Layered([], _headers.Catalogue(folder)), str(folder))
    names = [o["name"] for o in report["operators"]]
    assert sorted(names) == ["aclnnEveryKind", "aclnnInplaceHardswish", "aclnnMyOp", "aclnnRoles"]
    add = next(o for o in report["operators"] if o["name"] == "aclnnMyOp")
    assert add == {
        "name": "aclnnMyOp",
        "python": "my_op",
        "header": "level2/aclnn_my_op.h",
        "source": "built-in",
        "params": [
            {"name": "x", "python": "x", "type": "const aclTensor*", "role": "input"},
            {"name": "from", "python": "from_", "type": "int64_t", "role": "input"},
            {
                "name": "lambdaOptional",
                "python": "lambda_optional",
                "type": "const aclTensor*",
                "role": "input",
            },
            {"name": "out", "python": "out", "type": "const aclTensor*", "role": "output"},
        ],
    }
    assert {r["name"] for r in report["refused"]} == {"aclnnOddType", "aclnnNoLaunch", "aclnnOddLaunch"}


def test_the_command_line_lists_a_folder_given_with_headers(folder):
    done = subprocess.run(
        [sys.executable, "-m", "pyaclnn", "ops", "kind", "--headers", str(folder), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["headers"] == str(folder)
    assert [o["python"] for o in report["operators"]] == ["every_kind"]
    text = subprocess.run(
        [sys.executable, "-m", "pyaclnn", "ops", "--headers", str(folder)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "my_op(x, from_, lambda_optional, out, *, stream=None)" in text
    assert "aclnnOddType  [aclnn_refused.h]: parameter thing has type" in text
    missing = subprocess.run(
        [sys.executable, "-m", "pyaclnn", "ops", "--headers", str(folder / "nowhere")],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "no operator headers" in missing.stdout


def test_importing_pyaclnn_reads_no_header():
    code = textwrap.dedent(
        """
        import sys, pyaclnn, pyaclnn.ops
        from pyaclnn.ops import _headers
        print("pycparser" in sys.modules, _headers._cleaned.cache_info().currsize)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "0"]


@pytest.mark.parametrize(
    "c_name, value, error, words",
    [
        ("self", [1.0], TypeError, "self must be a DeviceArray or a NumPy array, got list"),
        ("self", None, TypeError, r"self is required \(const aclTensor\* self\)"),
        ("tensors", (1, 2), TypeError, r"tensors\[0\] must be a DeviceArray or a NumPy array"),
        ("tensors", "ab", TypeError, "tensors must be a sequence of arrays"),
        ("alpha", "1", TypeError, "alpha must be a bool, int, float or NumPy scalar"),
        (
            "alpha",
            2**63,
            OverflowError,
            "alpha = 9223372036854775808 is outside the range of an int64 scalar",
        ),
        ("scalars", [1, "x"], TypeError, r"scalars\[1\] must be a bool, int, float or NumPy scalar"),
        ("dims", [1, 2.5], TypeError, "dims must be a sequence of ints"),
        ("dims", [True], TypeError, "dims must be a sequence of ints"),
        ("mask", [1, 0], TypeError, "mask must be a bool"),
        ("scales", ["a"], TypeError, "scales must be a float"),
        ("dim", 1.0, TypeError, "dim must be an int, got float"),
        (
            "n",
            2**31,
            OverflowError,
            r"n = 2147483648 is outside the range of int32_t \[-2147483648, 2147483647\]",
        ),
        ("small", -129, OverflowError, r"small = -129 is outside the range of int8_t"),
        ("sections", -1, OverflowError, r"sections = -1 is outside the range of uint64_t"),
        ("keep_dims", 1, TypeError, "keep_dims must be a bool, got int"),
        ("eps", "0.1", TypeError, "eps must be a float, got str"),
        ("mode", b"nearest", TypeError, "mode must be a str, got bytes"),
        ("dtype", "no such type", TypeError, "dtype must be a NumPy dtype, pyaclnn.bfloat16 or an ACL_"),
        ("dtype", 12345, ValueError, "dtype = 12345 is not an aclDataType"),
    ],
)
def test_each_kind_refuses_a_wrong_value_naming_the_python_parameter(folder, c_name, value, error, words):
    from pyaclnn.ops import _call

    params = {p.c.name: p for p in _types.parameters(_declaration(folder, "EveryKind"))}
    param = params.get(c_name) or next(p for p in params.values() if p.python_name == c_name)
    with pytest.raises(error, match=words):
        _call.check(param, value)


def test_each_kind_takes_its_python_forms(folder):
    import numpy as np

    from pyaclnn.ops import _call

    params = {p.python_name: p for p in _types.parameters(_declaration(folder, "EveryKind"))}
    assert _call.check(params["alpha"], True)[1] == pyaclnn_constant("ACL_BOOL")
    assert _call.check(params["alpha"], 3)[1] == pyaclnn_constant("ACL_INT64")
    assert _call.check(params["alpha"], 0.5)[1] == pyaclnn_constant("ACL_DOUBLE")
    value, data_type = _call.check(params["alpha"], np.float16(1.5))
    assert data_type == pyaclnn_constant("ACL_FLOAT16") and value.tobytes() == np.float16(1.5).tobytes()
    assert _call.check(params["dims"], np.array([1, 2])) == (1, 2)
    assert _call.check(params["mode"], "nearest") == b"nearest"
    assert _call.check(params["dtype"], np.float16) == pyaclnn_constant("ACL_FLOAT16")
    assert _call.check(params["dtype"], "bfloat16") == pyaclnn_constant("ACL_BF16")
    assert _call.check(params["eps"], 1) == 1.0


def pyaclnn_constant(name: str) -> int:
    import pyaclnn

    return int(getattr(pyaclnn.constants, name))

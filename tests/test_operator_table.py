"""The operator table (pyaclnn/_optable.py) and everything that follows from it agree.

The table is read off include/decl/aclnn_ops.h. Each part that is written by
hand per operator (docs/adding-an-operator.md) is looked up here by the
table's names, so a new prototype fails :func:`missing_parts` until each of its
parts exists; the parts that follow from the table are checked to list exactly
the table's operators.
"""

from __future__ import annotations

import inspect

import operators
import pytest

import pyaclnn
from pyaclnn import _decl, _operators, _optable, aclnn, functional
from pyaclnn.backends.npu._backend import NpuBackend
from pyaclnn.backends.numpy import NumpyBackend

# The four operators as the seed documents give them: C name, parameters (C name, kind).
EXPECTED = {
    "MaxPool3dWithArgmax": [
        ("self", "tensor"),
        ("kernelSize", "int array"),
        ("stride", "int array"),
        ("padding", "int array"),
        ("dilation", "int array"),
        ("ceilMode", "bool"),
        ("out", "output"),
        ("indices", "output"),
    ],
    "MaxPool3dWithArgmaxBackward": [
        ("gradOutput", "tensor"),
        ("self", "tensor"),
        ("indices", "tensor"),
        ("kernelSize", "int array"),
        ("stride", "int array"),
        ("padding", "int array"),
        ("dilation", "int array"),
        ("ceilMode", "bool"),
        ("gradInput", "output"),
    ],
    "GridSampler3D": [
        ("input", "tensor"),
        ("grid", "tensor"),
        ("interpolationMode", "int"),
        ("paddingMode", "int"),
        ("alignCorners", "bool"),
        ("out", "output"),
    ],
    "GridSampler3DBackward": [
        ("gradOutput", "tensor"),
        ("input", "tensor"),
        ("grid", "tensor"),
        ("interpolationMode", "int"),
        ("paddingMode", "int"),
        ("alignCorners", "bool"),
        ("outputMask", "bool array"),
        ("inputGrad", "output"),
        ("gridGrad", "output"),
    ],
}


def test_the_table_reads_the_four_operators_off_the_declarations():
    got = {spec.name: [(p.c_name, p.kind) for p in spec.params] for spec in _optable.operators()}
    assert got == EXPECTED
    assert operators.NAMES == (
        "max_pool3d_with_argmax",
        "max_pool3d_with_argmax_backward",
        "grid_sampler3d",
        "grid_sampler3d_backward",
    )


def test_python_names_follow_the_functional_api():
    spec = _optable.by_name()["grid_sampler3d_backward"]
    assert spec.python_names == {
        "gradOutput": "grad_output",
        "interpolationMode": "interpolation_mode",
        "paddingMode": "padding_mode",
        "alignCorners": "align_corners",
        "outputMask": "output_mask",
        "inputGrad": "out[0] (input_grad)",
        "gridGrad": "out[1] (grid_grad)",
    }
    assert _optable.by_name()["MaxPool3dWithArgmaxBackward"].python_names["self"] == "input"
    assert _optable.by_name()["grid_sampler3d"].python_names.get("out") is None  # "out" is its name


def _prototype(name: str, params: str) -> _decl.Prototype:
    (proto,) = _decl.parse_prototypes(f"aclnnStatus {name}({params});", _optable.DECL_FILE)
    return proto


TAIL = "uint64_t *workspaceSize, aclOpExecutor **executor"
PHASE2 = "void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream"


def test_a_declaration_the_table_cannot_read_is_refused_naming_it():
    phase2 = _prototype("aclnnFoo", PHASE2)
    with pytest.raises(ValueError, match="aclnnFooGetWorkspaceSize must end with"):
        _optable._spec("Foo", _prototype("aclnnFooGetWorkspaceSize", "const aclTensor *self"), phase2)
    with pytest.raises(ValueError, match="parameter scale has type 'float'"):
        _optable._spec("Foo", _prototype("aclnnFooGetWorkspaceSize", f"float scale, {TAIL}"), phase2)
    with pytest.raises(ValueError, match="needs its phase 2"):
        _optable._spec("Foo", _prototype("aclnnFooGetWorkspaceSize", f"const aclTensor *self, {TAIL}"), None)


def missing_parts(spec: _optable.OperatorSpec) -> list[str]:
    """What an operator of the table lacks, of the parts that are looked up by its names."""
    missing = []
    name = spec.python_name
    for what, ok in [
        ("aclnn wrappers (run scripts/generate_interface.py)", hasattr(aclnn, f"{name}_get_workspace_size")),
        ("functional function", name in functional.__all__ and callable(getattr(functional, name, None))),
        ("export in pyaclnn.__all__", name in pyaclnn.__all__),
        ("runtime record", name in _operators.OPERATORS),
        ("npu backend phases", callable(getattr(NpuBackend, spec.phase2_api, None))),
        ("numpy backend phases", callable(getattr(NumpyBackend, spec.phase2_api, None))),
    ]:
        if not ok:
            missing.append(what)
    function = getattr(functional, name, None)
    if function is not None:
        parameters = inspect.signature(function).parameters
        for param in spec.inputs + spec.attributes:
            if param.python_name not in parameters:
                missing.append(f"functional parameter {param.python_name}")
        if spec.outputs and "out" not in parameters:
            missing.append("functional parameter out")
        if f"``{spec.phase1_api.removesuffix('GetWorkspaceSize')}``" not in (function.__doc__ or ""):
            missing.append(f"docstring naming ``aclnn{spec.name}``")
    return missing


@pytest.mark.parametrize("name", operators.NAMES)
def test_every_operator_of_the_table_has_each_part(name):
    assert missing_parts(_optable.by_name()[name]) == []


def test_a_new_declaration_lacks_its_hand_written_parts_until_they_exist():
    foo = _optable._spec(
        "Foo3d",
        _prototype(
            "aclnnFoo3dGetWorkspaceSize", f"const aclTensor *self, int64_t mode, aclTensor *out, {TAIL}"
        ),
        _prototype("aclnnFoo3d", PHASE2),
    )
    assert foo.python_name == "foo3d"
    assert missing_parts(foo) == [
        "aclnn wrappers (run scripts/generate_interface.py)",
        "functional function",
        "export in pyaclnn.__all__",
        "runtime record",
        "npu backend phases",
        "numpy backend phases",
    ]
    with pytest.raises(LookupError, match=rf"no entry for operator\(s\) \['{operators.NAMES[-1]}'\]"):
        operators.per_operator({n: 0 for n in operators.NAMES[:-1]}, "a test's cases")


def test_the_numpy_backend_refuses_a_declaration_without_its_check_and_kernel(monkeypatch):
    """Its phase methods are made from the table: a new prototype without its check or kernel
    stops the backend's import with a message naming the missing part."""
    from pyaclnn.backends.numpy import _ops

    foo = _optable._spec(
        "Foo3d",
        _prototype("aclnnFoo3dGetWorkspaceSize", f"const aclTensor *self, aclTensor *out, {TAIL}"),
        _prototype("aclnnFoo3d", PHASE2),
    )
    table = (*_optable.operators(), foo)
    monkeypatch.setattr(_optable, "operators", lambda: table)
    with pytest.raises(LookupError, match=r"declares aclnnFoo3d, but the numpy backend lacks its check"):
        _ops._phase1("aclnnFoo3dGetWorkspaceSize")
    monkeypatch.setattr(_ops._checks, "foo3d", lambda *args: None, raising=False)
    with pytest.raises(LookupError, match=r"lacks its binder _bind_foo3d \(pyaclnn/backends/numpy/_kernels/"):
        _ops._phase1("aclnnFoo3dGetWorkspaceSize")


def test_lists_derived_from_the_table_hold_exactly_its_operators():
    assert aclnn.__all__ == ["init", "finalize"] + [
        f for n in operators.NAMES for f in (f"{n}_get_workspace_size", n)
    ]
    assert list(_operators.OPERATORS) == list(operators.NAMES)
    assert list(functional.__all__) == list(operators.NAMES)
    for name, op in _operators.OPERATORS.items():
        assert op.phase1 is getattr(aclnn, f"{name}_get_workspace_size")
        assert op.phase2 is getattr(aclnn, name)
    declared = {n for n, p in _decl.prototypes().items() if p.file == _optable.DECL_FILE}
    assert declared == set(operators.APIS)

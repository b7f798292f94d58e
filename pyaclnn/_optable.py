"""The table of aclnn operators, read off ``include/decl/aclnn_ops.h``.

Each operator is a pair of prototypes there, ``aclnn<Name>GetWorkspaceSize(...)``
and ``aclnn<Name>(workspace, workspaceSize, executor, stream)``. The table says,
for every operator, its C name, its Python name and each parameter of phase 1
with its C name, its Python name and its kind (input tensor, int array, bool
array, integer, bool, output tensor). Everything that lists the operators takes
them from here: the ``aclnn`` wrappers, the runtime's operator records, both
backends' phase methods, the functional layer's names in error messages,
selftest, and the tests (``tests/operators.py``). docs/adding-an-operator.md
says what stays hand-written.

Like :mod:`pyaclnn._decl`, this module holds facts every layer may read.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import NamedTuple

from . import _decl

__all__ = [
    "TENSOR",
    "INT_ARRAY",
    "BOOL_ARRAY",
    "INT",
    "BOOL",
    "OUTPUT",
    "Param",
    "OperatorSpec",
    "operators",
    "by_name",
    "snake_case",
]

DECL_FILE = "aclnn_ops.h"

# Parameter kinds, by the C type of the parameter.
TENSOR, INT_ARRAY, BOOL_ARRAY, INT, BOOL, OUTPUT = (
    "tensor",
    "int array",
    "bool array",
    "int",
    "bool",
    "output",
)
_KINDS = {
    "const aclTensor *": TENSOR,
    "const aclIntArray *": INT_ARRAY,
    "const aclBoolArray *": BOOL_ARRAY,
    "int64_t": INT,
    "bool": BOOL,
    "aclTensor *": OUTPUT,
}
# What every phase 1 ends with, and what every phase 2 is.
_PHASE1_TAIL = ("uint64_t *workspaceSize", "aclOpExecutor **executor")
_PHASE2_PARAMS = (
    "void *workspace",
    "uint64_t workspaceSize",
    "aclOpExecutor *executor",
    "aclrtStream stream",
)
#: What phase 1 of every two-phase aclnn operator adds to its phase 2's name.
PHASE1_SUFFIX = "GetWorkspaceSize"
_PARAM = re.compile(r"^(?P<type>.*?[\s\*])(?P<name>\w+)$")
_WORD_START = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    """``MaxPool3dWithArgmax`` -> ``max_pool3d_with_argmax``, ``GridSampler3DBackward`` ->
    ``grid_sampler3d_backward``, ``kernelSize`` -> ``kernel_size``."""
    return _WORD_START.sub("_", name).lower()


class Param(NamedTuple):
    """One parameter of an operator's phase 1 (workspace size and executor left out)."""

    c_name: str  # as include/decl names it: "kernelSize"
    kind: str  # TENSOR, INT_ARRAY, BOOL_ARRAY, INT, BOOL or OUTPUT
    python_name: str  # as the functional API names it: "kernel_size", "out[1] (indices)"


class TwoPhaseNames:
    """The C names of a two-phase operator's functions, from its ``name`` ("MaxPool3dWithArgmax"):
    the one rule for both readings of operators (include/decl here, CANN's headers in ops._headers)."""

    __slots__ = ()
    name: str

    @property
    def phase1_api(self) -> str:
        """The C name of phase 1, as the operator's errors give it."""
        return f"aclnn{self.name}{PHASE1_SUFFIX}"

    @property
    def phase2_api(self) -> str:
        """The C name of phase 2 (the launch)."""
        return f"aclnn{self.name}"


class _OperatorFields(NamedTuple):
    name: str  # "MaxPool3dWithArgmax"
    python_name: str  # "max_pool3d_with_argmax": the functional call and the aclnn wrappers
    params: tuple[Param, ...]


class OperatorSpec(_OperatorFields, TwoPhaseNames):
    """One aclnn operator as include/decl declares it."""

    __slots__ = ()

    @property
    def inputs(self) -> tuple[Param, ...]:
        """The input tensors, in C order."""
        return tuple(p for p in self.params if p.kind == TENSOR)

    @property
    def outputs(self) -> tuple[Param, ...]:
        """The output tensors, in C order."""
        return tuple(p for p in self.params if p.kind == OUTPUT)

    @property
    def attributes(self) -> tuple[Param, ...]:
        """The parameters that are not tensors (arrays and scalars), in C order."""
        return tuple(p for p in self.params if p.kind not in (TENSOR, OUTPUT))

    @property
    def python_names(self) -> Mapping[str, str]:
        """C parameter name -> Python name, for the names that differ (error messages add it)."""
        return {p.c_name: p.python_name for p in self.params if p.python_name != p.c_name}


def _python_name(c_name: str, kind: str, output: int, outputs: int) -> str:
    """The functional API's name of a parameter.

    Inputs and attributes are the C name in snake_case (``self`` is ``input``, as
    in PyTorch); outputs are ``out`` (one output) or ``out[i]`` (several), with the
    C name after it unless it is ``out``.
    """
    if kind != OUTPUT:
        return "input" if c_name == "self" else snake_case(c_name)
    where = "out" if outputs == 1 else f"out[{output}]"
    return where if c_name == "out" else f"{where} ({snake_case(c_name)})"


def _split(param: str, api: str) -> tuple[str, str]:
    match = _PARAM.match(param)
    if match is None:
        raise ValueError(f"include/decl/{DECL_FILE}: {api}: cannot read parameter {param!r}")
    return " ".join(match["type"].split()), match["name"]


def _spec(name: str, phase1: _decl.Prototype, phase2: _decl.Prototype | None) -> OperatorSpec:
    api = phase1.name
    if phase1.params[-2:] != _PHASE1_TAIL:
        raise ValueError(f"include/decl/{DECL_FILE}: {api} must end with {', '.join(_PHASE1_TAIL)}")
    if phase2 is None or phase2.params != _PHASE2_PARAMS:
        raise ValueError(
            f"include/decl/{DECL_FILE}: {api} needs its phase 2, aclnn{name}({', '.join(_PHASE2_PARAMS)})"
        )
    typed = [_split(p, api) for p in phase1.params[:-2]]
    for c_type, c_name in typed:
        if c_type not in _KINDS:
            raise ValueError(
                f"include/decl/{DECL_FILE}: {api}: parameter {c_name} has type {c_type!r}, "
                f"not one of {', '.join(_KINDS)}"
            )
    outputs = sum(_KINDS[t] == OUTPUT for t, _ in typed)
    params = []
    output = 0
    for c_type, c_name in typed:
        kind = _KINDS[c_type]
        params.append(Param(c_name, kind, _python_name(c_name, kind, output, outputs)))
        output += kind == OUTPUT
    return OperatorSpec(name, snake_case(name), tuple(params))


@functools.cache
def operators() -> tuple[OperatorSpec, ...]:
    """Every operator of include/decl/aclnn_ops.h, in declaration order."""
    declared = {p.name: p for p in _decl.prototypes().values() if p.file == DECL_FILE}
    return tuple(
        _spec(api[len("aclnn") : -len(PHASE1_SUFFIX)], proto, declared.get(api[: -len(PHASE1_SUFFIX)]))
        for api, proto in declared.items()
        if api.startswith("aclnn") and api.endswith(PHASE1_SUFFIX)
    )


@functools.cache
def by_name() -> Mapping[str, OperatorSpec]:
    """The operators by Python name (``"max_pool3d_with_argmax"``) and by C name
    (``"MaxPool3dWithArgmax"``)."""
    table: dict[str, OperatorSpec] = {}
    for spec in operators():
        table[spec.python_name] = table[spec.name] = spec
    return table

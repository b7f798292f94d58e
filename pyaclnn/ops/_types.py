"""The one table from C parameter types to what a Python caller passes, and the role rule.

Each C type of an operator's phase 1 maps to a *kind* (a tensor, a list of
tensors, an int of some width, a string, ...) that says how a Python value is
checked and converted; a type outside the table refuses its operator, naming
the type. ``const`` changes nothing here (``int64_t`` and ``const int64_t`` are
one kind) except for the role of a tensor.

The role rule (headers do not say reliably which tensors an operator writes:
aclnnRelu declares ``const aclTensor* out``, aclnnInplaceHardswish writes its
``const aclTensor* self``): a tensor or tensor list is an *output* when its
type is not ``const``, when its C name is ``out`` or ``output`` or ends in
``Out``, ``Ref`` or ``Output`` (``Optional`` after any of them too), or when it
is the first tensor of an ``Inplace`` operator; the others are inputs. Outputs
are what a call returns and what is written back into NumPy arrays. A wrong
guess costs nothing worse: for ordering, every tensor of a generic call counts
as written.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .. import _optable
from ._headers import CParam, Declaration, python_operator_name

# Kinds of parameter.
TENSOR = "tensor"
TENSOR_LIST = "tensor list"
SCALAR = "scalar"
SCALAR_LIST = "scalar list"
INT_ARRAY = "int array"
BOOL_ARRAY = "bool array"
FLOAT_ARRAY = "float array"
INT = "int"
BOOL = "bool"
FLOAT = "float"
STRING = "str"
DTYPE = "dtype"

#: C type (``const`` at the front taken off) -> kind. The C integer types carry their range.
KINDS: dict[str, str] = {
    "aclTensor*": TENSOR,
    "aclTensorList*": TENSOR_LIST,
    "aclScalar*": SCALAR,
    "aclScalarList*": SCALAR_LIST,
    "aclIntArray*": INT_ARRAY,
    "aclBoolArray*": BOOL_ARRAY,
    "aclFloatArray*": FLOAT_ARRAY,
    "int64_t": INT,
    "int32_t": INT,
    "int8_t": INT,
    "int": INT,
    "uint64_t": INT,
    "bool": BOOL,
    "double": FLOAT,
    "float": FLOAT,
    "char*": STRING,
    "aclDataType": DTYPE,
}
#: The range of each C integer type a parameter may have.
INT_RANGES: dict[str, tuple[int, int]] = {
    "int64_t": (-(2**63), 2**63 - 1),
    "int32_t": (-(2**31), 2**31 - 1),
    "int": (-(2**31), 2**31 - 1),
    "int8_t": (-128, 127),
    "uint64_t": (0, 2**64 - 1),
}
#: What a Python caller passes for each kind (the docstrings and the catalogue say it).
PYTHON_FORMS: dict[str, str] = {
    TENSOR: "DeviceArray or ndarray",
    TENSOR_LIST: "sequence of DeviceArray or ndarray",
    SCALAR: "bool, int, float or NumPy scalar",
    SCALAR_LIST: "sequence of scalars",
    INT_ARRAY: "sequence of int",
    BOOL_ARRAY: "sequence of bool",
    FLOAT_ARRAY: "sequence of float",
    INT: "int",
    BOOL: "bool",
    FLOAT: "float",
    STRING: "str",
    DTYPE: "dtype",
}
_TENSOR_KINDS = (TENSOR, TENSOR_LIST)
_OUTPUT_NAME = re.compile(r"^(?:out|output|.*(?:Out|Ref|Output))(?:Optional)?$")
_WORD_START = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")

INPUT, OUTPUT = "input", "output"
__all__ = ["python_operator_name"]  # the rule lives with the reader; the type table re-exports it


def base_type(c_type: str) -> str:
    """``const aclTensor*`` -> ``aclTensor*``; ``const int64_t`` -> ``int64_t``."""
    return c_type.removeprefix("const ")


def kind_of(c_type: str) -> str | None:
    """The kind of a C parameter type; None when pyaclnn has no Python form for it."""
    return KINDS.get(base_type(c_type))


def python_parameter_name(name: str) -> str:
    """``keepDims`` -> ``keep_dims``, ``selfRef`` -> ``self_ref``; a Python keyword gets a trailing
    underscore (``from`` -> ``from_``, ``lambda`` -> ``lambda_``)."""
    snake = _WORD_START.sub("_", name).lower()
    return snake + "_" if keyword.iskeyword(snake) or snake in ("stream",) else snake


@dataclass(frozen=True)
class Parameter:
    """One parameter of a generic operator: its C declaration, kind, role and Python name."""

    c: CParam
    kind: str
    python_name: str
    role: str | None  # INPUT or OUTPUT for tensors and tensor lists; None for the others
    optional: bool  # its C name ends in "Optional": None (NULL) allowed

    @property
    def is_output(self) -> bool:
        return self.role == OUTPUT

    @property
    def int_range(self) -> tuple[int, int]:
        return INT_RANGES[base_type(self.c.type)]

    def describe(self) -> str:
        """``"self : DeviceArray or ndarray (const aclTensor* self), input"``, for the docstring."""
        role = f", {self.role}" if self.role else ""
        optional = ", optional (None)" if self.optional else ""
        return f"{self.python_name} : {PYTHON_FORMS[self.kind]} ({self.c}){role}{optional}"


def refusal(declaration: Declaration) -> str | None:
    """Why a declaration cannot be called (a reading problem, or a type without a Python form)."""
    if declaration.refused is not None:
        return declaration.refused
    for param in declaration.params:
        if kind_of(param.type) is None:
            return f"parameter {param.name} has type {param.type!r}, which pyaclnn does not convert"
    names = [python_parameter_name(p.name) for p in declaration.params]
    if len(set(names)) != len(names):
        return f"two parameters have the same Python name among {', '.join(names)}"
    return None


def _known_outputs(declaration: Declaration) -> set[str] | None:
    """The C names of the outputs where the roles are known (see :func:`parameters`), else None."""
    if declaration.written is not None:  # a custom package's prototype, or load(outputs=...)
        return set(declaration.written)
    known = _optable.by_name().get(declaration.name)
    if known is not None and [p.c_name for p in known.params] == [p.name for p in declaration.params]:
        return {p.c_name for p in known.outputs}
    return None


def roles_known(declaration: Declaration) -> bool:
    """Whether the declaration's inputs are known to be read only (:func:`parameters` knows its
    roles), so that calls reading one array on several streams may run together."""
    return _known_outputs(declaration) is not None


def parameters(declaration: Declaration) -> tuple[Parameter, ...]:
    """The parameters of a callable declaration (:func:`refusal` is None), with kinds and roles.

    Where the roles are known, the rule is not applied: a custom package's operator whose
    prototype (or ``pyaclnn.ops.load(outputs=...)``) names its outputs, and pyaclnn's own
    operators (the table of include/decl; the rule would make max-pool's ``gradOutput`` an
    output).
    """
    known_outputs = _known_outputs(declaration)
    if known_outputs is not None:
        return tuple(
            Parameter(
                c,
                kind,
                python_parameter_name(c.name),
                (OUTPUT if c.name in known_outputs else INPUT) if kind in _TENSOR_KINDS else None,
                c.name.endswith("Optional"),
            )
            for c in declaration.params
            for kind in (KINDS[base_type(c.type)],)
        )
    inplace = declaration.name.startswith("Inplace")
    first_tensor = True
    result = []
    for c in declaration.params:
        kind = kind_of(c.type)
        assert kind is not None, c  # refused declarations are never made into parameters
        role = None
        if kind in _TENSOR_KINDS:
            written = not c.type.startswith("const ") or bool(_OUTPUT_NAME.match(c.name))
            role = OUTPUT if written or (inplace and first_tensor) else INPUT
            first_tensor = False
        result.append(Parameter(c, kind, python_parameter_name(c.name), role, c.name.endswith("Optional")))
    return tuple(result)


def outputs(params: Sequence[Parameter]) -> tuple[Parameter, ...]:
    return tuple(p for p in params if p.is_output)

"""Elementwise references: the arithmetic (Add, Sub, Rsub, Mul, Div, Pow and their scalar and
in-place forms) and Cast, and the table machinery that :mod:`.unary` and :mod:`.comparison` share.

Each operator is one row of a table (:class:`Op`): its name, its header and the parameters of its
CANN 8.1.RC1 declaration, its :class:`Family` and the dtypes it takes. A family is a NumPy function
on arrays already in the compute dtype, with the rule that gives the result dtype; one kernel
(:func:`kernel`) and one check (:func:`check`) run every row, reading the parameters' roles from
the declaration (operands, ``out``/``y``/``result``, the first tensor of an ``Inplace`` operator,
``alpha``, ``mode`` and ``approximate``). The rules are torch's: broadcasting, torch's promotion
(``_rules.promote``) with a scalar promoting a tensor only of a lower kind (an int tensor with a
float scalar computes in float32, a float16 tensor with a float scalar stays float16), the result
cast to the output's dtype when torch's ``canCast`` allows it, fp16 and bf16 computed in float32
and rounded once, ``alpha`` equal to 1 multiplying nothing (ints stay exact).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...constants import ACLNN_ERR_PARAM_NULLPTR
from ._registry import Reference, TensorInfo, register
from ._rules import (
    ARITHMETIC,
    CATEGORY,
    PHASE2,
    PHASE2_CONST,
    TAIL,
    broadcast,
    can_cast,
    compute_dtype,
    convert,
    dtype_in,
    dtype_name,
    fail,
    is_one,
    promote,
    required,
    write,
)

# -- the table's machinery: roles from the declaration, one check and one kernel ----------------


OPERAND, OUT, REF, CONDITION, ATTRIBUTE = "operand", "out", "ref", "condition", "attribute"
_OUT_NAMES = frozenset(("out", "y", "result"))
_ATTRIBUTES = frozenset(("alpha", "mode", "approximate"))
_PARAM = re.compile(r"^(?P<type>.*?)\s*\**\s*(?P<name>\w+)$")
_FLOAT32 = np.dtype(np.float32)

Rule = Callable[[np.dtype, Mapping[str, Any]], np.dtype]


@dataclass(frozen=True)
class Param:
    name: str
    role: str
    tensor: bool  # an aclTensor (else an aclScalar, or an int for an attribute)


@dataclass(frozen=True)
class Family:
    """One kernel for several operators: ``compute`` takes the operands (tensors and scalars) as
    arrays in the compute dtype, and the attributes (alpha, mode, approximate) by keyword; ``rule``
    gives the result dtype from the operands' promoted one (raising :func:`fail` for what the
    operator refuses); ``out_dtypes``, when set, are the outputs' dtypes (else the row's)."""

    compute: Callable[..., Any]
    rule: Rule
    out_dtypes: frozenset[str] | None = None
    float64: bool = False  # computed in float64 (erf), rounded once to the result
    # ``compute(..., out=array)`` writes its result there (reading the operands before it writes
    # ``out``, so ``out`` may be the first operand, an in-place operator's selfRef)
    into: bool = True


@dataclass(frozen=True)
class Op:
    """A row of the table: the operator's name, its header, its phase-1 parameters as declared
    (without the workspace size and executor, unless they are spelt otherwise: ``tail``), its
    family and the dtypes of its tensors."""

    name: str
    header: str
    params: str
    family: Family
    dtypes: frozenset[str]
    phase2: str = PHASE2
    tail: str = TAIL

    @property
    def declaration(self) -> str:
        return (
            f"\nACLNN_API aclnnStatus aclnn{self.name}GetWorkspaceSize({self.params}, {self.tail});\n"
            f"ACLNN_API aclnnStatus aclnn{self.name}({self.phase2});\n"
        )

    @functools.cached_property
    def roles(self) -> tuple[Param, ...]:
        """The phase-1 parameters' roles, by the names CANN gives them: the first tensor of an
        ``Inplace`` operator is read and written, ``out``, ``y`` and ``result`` are written,
        ``condition`` selects, ``alpha``, ``mode`` and ``approximate`` are attributes, the rest
        (tensors and scalars) are the operands."""
        params = []
        for index, text in enumerate(self.params.split(",")):
            match = _PARAM.match(text.strip())
            assert match is not None, text
            name, c_type = match["name"], match["type"]
            tensor = "aclTensor" in c_type
            if index == 0 and self.name.startswith("Inplace"):
                role = REF
            elif name in _OUT_NAMES:
                role = OUT
            elif name == "condition":
                role = CONDITION
            elif name in _ATTRIBUTES:
                role = ATTRIBUTE
            else:
                role = OPERAND
            params.append(Param(name, role, tensor))
        return tuple(params)

    # The positions of the roles, found once: check and kernel run at every call.
    @functools.cached_property
    def tensor_operands(self) -> tuple[int, ...]:
        """The positions of the operand tensors (an ``Inplace`` operator's selfRef too)."""
        return tuple(i for i, p in enumerate(self.roles) if p.role in (OPERAND, REF) and p.tensor)

    @functools.cached_property
    def scalar_operands(self) -> tuple[int, ...]:
        return tuple(i for i, p in enumerate(self.roles) if p.role == OPERAND and not p.tensor)

    @functools.cached_property
    def named(self) -> tuple[tuple[int, str], ...]:
        """(position, name) of the scalars and attributes."""
        return tuple((i, p.name) for i, p in enumerate(self.roles) if not p.tensor)

    @functools.cached_property
    def broadcast_inputs(self) -> tuple[tuple[int, str], ...]:
        """(position, name) of the tensors that broadcast together (all but ``out``)."""
        return tuple((i, p.name) for i, p in enumerate(self.roles) if p.tensor and p.role != OUT)


def _category(value: Any) -> int:
    return CATEGORY.get(dtype_name(np.asarray(value).dtype), 2)


def _promoted(op: Op, values: tuple[Any, ...]) -> np.dtype:
    """torch's result type of the operands: the tensors' promotion, then a scalar of a higher kind
    (bool < int < float) gives that kind's default (int64, float32)."""
    first, *others = op.tensor_operands
    result: np.dtype = values[first].dtype
    for index in others:
        result = promote(result, values[index].dtype)
    for index in op.scalar_operands:
        kind = _category(values[index])
        if kind > CATEGORY[dtype_name(result)]:
            result = _FLOAT32 if kind == 2 else np.dtype(np.int64)
    return result


def _named(op: Op, values: tuple[Any, ...]) -> dict[str, Any]:
    return {name: values[index] for index, name in op.named}


def check(op: Op, *values: Any) -> None:
    """Phase 1 of every row: NULL tensors and scalars (161001), then dtypes, the family's rule,
    ``alpha``'s kind, the cast to the output and the shapes (161002), naming the C parameter."""
    for p, v in zip(op.roles, values):
        if v is None and p.role != ATTRIBUTE:
            kind = "aclTensor" if p.tensor else "aclScalar"
            raise fail(f"{p.name} is a null pointer, it must be an {kind}", ACLNN_ERR_PARAM_NULLPTR)
    outputs = [(p, v) for p, v in zip(op.roles, values) if p.role in (OUT, REF)]
    for p, v in zip(op.roles, values):
        if p.role == OPERAND and p.tensor:
            dtype_in(p.name, v, op.dtypes)
        elif p.role == CONDITION:
            dtype_in(p.name, v, frozenset(("bool",)))
    for p, v in outputs:
        dtype_in(p.name, v, op.family.out_dtypes or op.dtypes)
    promoted = _promoted(op, values)
    named = _named(op, values)
    result = op.family.rule(promoted, named)
    alpha = named.get("alpha")  # torch: no float alpha for ints, a bool alpha only for bools
    if alpha is not None and (
        _category(alpha) > CATEGORY[dtype_name(promoted)] or (_category(alpha) == 0 and promoted != np.bool_)
    ):
        raise fail(f"alpha has type {np.asarray(alpha).dtype.name}, which {promoted.name} cannot take")
    inputs = op.broadcast_inputs
    shape: tuple[int, ...] = values[inputs[0][0]].shape
    for seen, (index, name) in enumerate(inputs[1:], 1):
        if values[index].shape != shape:  # equal shapes (the usual call) need no broadcasting
            shape = broadcast(_names(inputs[:seen]), shape, name, values[index].shape)
    for p, v in outputs:
        if not can_cast(result, v.dtype):
            raise fail(f"{p.name} has dtype {v.dtype.name}, which the result {result.name} cannot be cast to")
        if v.shape != shape:
            raise fail(f"{p.name} has shape {list(v.shape)}; {_names(inputs)} broadcast to {list(shape)}")


def _names(inputs: tuple[tuple[int, str], ...]) -> str:
    return " with ".join(name for _, name in inputs)


def kernel(op: Op, *values: Any) -> None:
    """Every row's kernel: the operands converted to the promoted dtype (a float result's, for
    Div and the float functions of ints) and computed in its compute dtype, the result rounded
    once to the result dtype and converted to the output's."""
    family = op.family
    promoted = _promoted(op, values)
    named = _named(op, values)
    result = family.rule(promoted, named)
    work = result if CATEGORY[dtype_name(result)] == 2 and CATEGORY[dtype_name(promoted)] < 2 else promoted
    compute = compute_dtype(work)
    if family.float64 and CATEGORY[dtype_name(compute)] == 2:
        compute = np.dtype(np.float64)
    operands: list[Any] = []
    attributes: dict[str, Any] = {}
    target: np.ndarray | None = None
    for p, v in zip(op.roles, values):
        if p.role in (OUT, REF):
            target = v
        if p.role == ATTRIBUTE:
            attributes[p.name] = v
        elif p.role == CONDITION:
            operands.append(v)
        elif p.role in (OPERAND, REF):
            if p.tensor:
                # no copy of an operand already in the dtype (a copy per operand cost 1M-element adds 2x)
                operands.append((v if v.dtype == work else convert(v, work)).astype(compute, copy=False))
            else:
                operands.append(np.asarray(v).astype(compute))
    assert target is not None
    with np.errstate(all="ignore"):
        if family.into and target.dtype == result and (compute == result or result == np.bool_):
            if _separate(target, operands):  # straight into the output: no temporary, no copy
                family.compute(*operands, out=target, **attributes)
                return
        value = np.asarray(family.compute(*operands, **attributes))
    if value.dtype != result and target.dtype != result:
        value = convert(value, result)
    write(target, value)  # rounds once to the output's dtype


def _separate(target: np.ndarray, operands: list[Any]) -> bool:
    """Whether ``target`` may be written while ``operands`` are read: it shares no memory with them,
    or is exactly the first (an in-place operator's selfRef, which the computations read first)."""
    return not any(
        isinstance(operand, np.ndarray)
        and not (index == 0 and operand is target)
        and np.may_share_memory(operand, target)
        for index, operand in enumerate(operands)
    )


def register_table(
    table: tuple[Op, ...],
    family: str,
    row_kernel: Callable[..., None] | None = None,
    row_check: Callable[..., None] | None = None,
) -> None:
    """Register each row of ``table`` (rows of the module ``family``) with ``row_kernel`` and
    ``row_check``, called as ``f(op, *values)`` (by default the shared kernel and check)."""
    for op in table:
        register(
            Reference(
                op.name,
                functools.partial(row_kernel or kernel, op),
                op.header,
                op.declaration,
                functools.partial(row_check or check, op),
                op.dtypes,
                family.rsplit(".", 1)[-1],
            )
        )


# -- rules of the result dtype ---------------------------------------------------------------------


def same(promoted: np.dtype, named: Mapping[str, Any]) -> np.dtype:
    return promoted


def floating(promoted: np.dtype, named: Mapping[str, Any]) -> np.dtype:
    """Float results: an int or bool input gives float32 (torch's default dtype)."""
    return promoted if CATEGORY[dtype_name(promoted)] == 2 else _FLOAT32


def boolean(promoted: np.dtype, named: Mapping[str, Any]) -> np.dtype:
    return np.dtype(np.bool_)


def no_bool(promoted: np.dtype, named: Mapping[str, Any]) -> np.dtype:
    """The promoted dtype, which must not be bool (torch refuses ``-`` and ``**`` of bools)."""
    if promoted == np.bool_:
        raise fail("the operands are bool, which this operator does not take")
    return promoted


def _division(promoted: np.dtype, named: Mapping[str, Any]) -> np.dtype:
    mode = named.get("mode", 0)
    if mode not in (0, 1, 2):
        raise fail(f"mode is {mode}; it must be 0 (true division), 1 (trunc) or 2 (floor)")
    return floating(promoted, named) if mode == 0 else no_bool(promoted, named)


def _power(promoted: np.dtype, named: Mapping[str, Any]) -> np.dtype:
    exponent = named.get("exponent")
    if CATEGORY[dtype_name(promoted)] == 1 and exponent is not None and _category(exponent) == 1:
        if exponent < 0:
            raise fail(f"exponent is {exponent}: integers to negative integer powers are not allowed")
    return no_bool(promoted, named)


# -- the computations: NumPy on arrays in the compute dtype ------------------------------------------


def _alpha(function: Callable[..., Any], *, reverse: bool = False) -> Callable[..., Any]:
    """``self op alpha*other`` (``other op alpha*self`` when reversed); alpha 1 multiplies nothing."""

    def compute(a: np.ndarray, b: np.ndarray, alpha: Any = 1, out: np.ndarray | None = None) -> Any:
        if reverse:
            a, b = b, a
        if not is_one(alpha):  # alpha*b into out when b fills it and out is not a (still to be read)
            spare = out if out is not None and out is not a and b.shape == out.shape else None
            b = np.multiply(b, np.asarray(alpha).astype(b.dtype), out=spare)
        return function(a, b, out=out)

    return compute


def into(value: Any, out: np.ndarray | None) -> Any:
    """``value``, written into ``out`` when given (the computations done in several steps)."""
    if out is None:
        return value
    np.copyto(out, value, casting="unsafe")
    return out


def as_row(value: np.ndarray, like: np.ndarray) -> np.ndarray:
    """A 0-d ``value`` as a row as long as ``like``'s last dim (up to 64K), for NumPy's maximum
    and minimum, whose loops are vectorised for two arrays and 4x slower against a scalar."""
    if value.ndim or not like.ndim or not 0 < like.shape[-1] <= 1 << 16:
        return value
    return np.full(like.shape[-1], value, value.dtype)


def _divide(a: np.ndarray, b: np.ndarray, mode: int = 0, out: np.ndarray | None = None) -> Any:
    if mode == 0:
        return np.true_divide(a, b, out=out)
    if CATEGORY[dtype_name(a.dtype)] == 2:
        if mode == 2:
            return np.floor_divide(a, b, out=out)
        return np.trunc(np.true_divide(a, b, out=out), out=out)
    if mode == 2:
        return np.floor_divide(a, b, out=out)
    # toward zero: one more where floor rounded a negative inexact quotient down (found before
    # ``out``, which may be ``a``, is written)
    inexact = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    quotient = np.floor_divide(a, b, out=out)
    return np.add(quotient, inexact, out=quotient, casting="unsafe")


# Float exponents whose power is one correctly rounded operation of its own, as torch computes them:
# x**0.5 is sqrt(x), x**2 is x*x, x**-1 is 1/x.
_EXACT_POWERS: dict[float, Callable[..., Any]] = {
    0.5: np.sqrt,
    2.0: np.square,
    -1.0: np.reciprocal,
}


def _pow(base: np.ndarray, exponent: np.ndarray, out: np.ndarray | None = None) -> Any:
    if CATEGORY[dtype_name(base.dtype)] == 2:
        if exponent.ndim == 0 and float(exponent) in _EXACT_POWERS:
            return _EXACT_POWERS[float(exponent)](base, out=out)
        return np.power(base, exponent, out=out)
    negative = exponent < 0  # integers: 1 and -1 keep a magnitude of 1, the others go to 0
    powered = np.power(base, np.where(negative, 0, exponent).astype(exponent.dtype))
    if not np.any(negative):
        return into(powered, out)
    odd = np.remainder(exponent, 2) != 0
    small = np.where(base == 1, 1, np.where(base == -1, np.where(odd, -1, 1), 0))
    return into(np.where(negative, small.astype(powered.dtype), powered), out)


# -- the families and their dtypes -------------------------------------------------------------------
# Every dtype pyaclnn has: CANN documents integers, floats and bool for Add, Sub, Mul, Div and Pow
# (bfloat16 on Atlas A2); Sub, Rsub, Pow and Div's trunc and floor modes refuse a bool result, as
# torch does.

ADD = Family(_alpha(np.add), same)
SUB = Family(_alpha(np.subtract), no_bool)
RSUB = Family(_alpha(np.subtract, reverse=True), no_bool)
MUL = Family(np.multiply, same)
DIV = Family(_divide, _division)
POW = Family(_pow, _power)


A = ARITHMETIC
# The parameter lists of the rows, as CANN 8.1.RC1's headers declare them (const or not, as written).
TENSOR = "const aclTensor* self, const aclTensor* other, aclTensor* out"
SCALAR = "const aclTensor* self, const aclScalar* other, aclTensor* out"
TENSOR_ALPHA = "const aclTensor* self, const aclTensor* other, const aclScalar* alpha, aclTensor* out"
SCALAR_ALPHA = "const aclTensor* self, const aclScalar* other, const aclScalar* alpha, aclTensor* out"
UNARY = "const aclTensor* self, aclTensor* out"
# In place (only Add's selfRef is const), with a mode, and Pow's
_ADD_IN_PLACE = "const aclTensor* selfRef, const aclTensor* other, const aclScalar* alpha"
_ADDS_IN_PLACE = "const aclTensor* selfRef, const aclScalar* other, const aclScalar* alpha"
_SUB_IN_PLACE = "aclTensor* selfRef, const aclTensor* other, const aclScalar* alpha"
_SUBS_IN_PLACE = "aclTensor* selfRef, const aclScalar* other, const aclScalar* alpha"
_TENSOR_MODE = "const aclTensor* self, const aclTensor* other, int mode, aclTensor* out"
_SCALAR_MODE = "const aclTensor* self, const aclScalar* other, int mode, aclTensor* out"
_POW = "const aclTensor* self, const aclScalar* exponent"
_POW_TENSOR = "const aclTensor* self, const aclTensor* exponent"
_POW_SCALAR = "const aclScalar* self, const aclTensor* exponent, const aclTensor* out"

TABLE: tuple[Op, ...] = (
    Op("Add", "aclnn_add.h", TENSOR_ALPHA, ADD, A),
    Op("Adds", "aclnn_add.h", SCALAR_ALPHA, ADD, A),
    Op("InplaceAdd", "aclnn_add.h", _ADD_IN_PLACE, ADD, A),
    Op("InplaceAdds", "aclnn_add.h", _ADDS_IN_PLACE, ADD, A),
    Op("Mul", "aclnn_mul.h", TENSOR, MUL, A),
    Op("Muls", "aclnn_mul.h", SCALAR, MUL, A),
    Op("InplaceMul", "aclnn_mul.h", "aclTensor* selfRef, const aclTensor* other", MUL, A),
    Op("InplaceMuls", "aclnn_mul.h", "aclTensor* selfRef, const aclScalar* other", MUL, A),
    Op("Sub", "aclnn_sub.h", TENSOR_ALPHA, SUB, A),
    Op("Subs", "aclnn_sub.h", SCALAR_ALPHA, SUB, A),
    Op("InplaceSub", "aclnn_sub.h", _SUB_IN_PLACE, SUB, A),
    Op("InplaceSubs", "aclnn_sub.h", _SUBS_IN_PLACE, SUB, A),
    Op("Rsub", "aclnn_rsub.h", TENSOR_ALPHA, RSUB, A),
    Op("Rsubs", "aclnn_rsub.h", SCALAR_ALPHA, RSUB, A),
    Op("Div", "aclnn_div.h", TENSOR, DIV, A),
    Op("Divs", "aclnn_div.h", SCALAR, DIV, A),
    Op("DivMod", "aclnn_div.h", _TENSOR_MODE, DIV, A),
    Op("DivMods", "aclnn_div.h", _SCALAR_MODE, DIV, A),
    Op("InplaceDiv", "aclnn_div.h", "aclTensor* selfRef, const aclTensor* other", DIV, A),
    Op("InplaceDivs", "aclnn_div.h", "aclTensor* selfRef, const aclScalar* other", DIV, A),
    Op("InplaceDivMod", "aclnn_div.h", "aclTensor* selfRef, const aclTensor* other, int mode", DIV, A),
    Op("InplaceDivMods", "aclnn_div.h", "aclTensor* selfRef, const aclScalar* other, int mode", DIV, A),
    Op("PowTensorScalar", "aclnn_pow.h", f"{_POW}, const aclTensor* out", POW, A, PHASE2_CONST),
    Op("PowTensorTensor", "aclnn_pow_tensor_tensor.h", f"{_POW_TENSOR}, aclTensor* out", POW, A),
    Op("PowScalarTensor", "aclnn_pow.h", _POW_SCALAR, POW, A),
    Op("InplacePowTensorScalar", "aclnn_pow.h", _POW, POW, A),
    Op("InplacePowTensorTensor", "aclnn_pow_tensor_tensor.h", _POW_TENSOR, POW, A),
)

register_table(TABLE, __name__)


# -- Cast ---------------------------------------------------------------------

_CAST_H = """
ACLNN_API aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor* self, const aclDataType dtype,
                                                aclTensor* out, uint64_t* workspaceSize,
                                                aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnCast(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                aclrtStream stream);
"""


def _check_cast(self: TensorInfo, dtype: np.dtype, out: TensorInfo) -> None:
    required(self=self, out=out)
    dtype_in("self", self, ARITHMETIC)
    if dtype_name(dtype) not in ARITHMETIC:
        raise fail(f"dtype {dtype.name} is not one of {', '.join(sorted(ARITHMETIC))}")
    if out.dtype != dtype:
        raise fail(f"out has dtype {out.dtype.name}, but dtype asks for {dtype.name}")
    if out.shape != self.shape:
        raise fail(f"out has shape {list(out.shape)}, self {list(self.shape)}: they must be equal")


def _kernel_cast(self: np.ndarray, dtype: np.dtype, out: np.ndarray) -> None:
    write(out, self)  # float32 -> float16 by the compiled conversion where it takes the call


register(Reference("Cast", _kernel_cast, "aclnn_cast.h", _CAST_H, _check_cast, ARITHMETIC))

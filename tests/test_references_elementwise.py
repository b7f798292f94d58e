"""The CPU fallback's elementwise references (pyaclnn/kernels/references: elementwise, unary,
comparison) against torch.ops.aten, through pyaclnn.ops on the numpy backend.

One table drives the tests: a :class:`Case` per operator (OpInfo-like) says its aten oracle, the
attributes it is called with, where its samples come from and its tolerance; how to call it (which
parameters are tensors, scalars, outputs) comes from the references' own table, the roles read from
the CANN declaration. Every operator runs with broadcast shapes, an empty tensor and a
non-contiguous input in each of float32, float16, bfloat16, int32, int64, int8 and bool: a dtype it
takes matches torch (exactly where the math is exact, else within the family's tolerance), a dtype
it refuses gives ACLNN_ERR_PARAM_INVALID. In-place operators write their NumPy argument back.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import pyaclnn
from pyaclnn import ops
from pyaclnn.kernels.references import comparison, elementwise, unary
from pyaclnn.ops._headers import python_operator_name

BF16 = np.dtype(pyaclnn.bfloat16)
DTYPES = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": BF16,
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "int8": np.dtype(np.int8),
    "bool": np.dtype(np.bool_),
}
FLOATS = {"float32", "float16", "bfloat16"}
NOT_FLOAT = frozenset(set(DTYPES) - FLOATS)
ROWS = {op.name: op for op in (*elementwise.TABLE, *unary.TABLE, *comparison.TABLE, *comparison.FILLS)}

# Tolerances (rtol, atol) by dtype. Exact: integer, bool and selection results, and the float
# arithmetic (one IEEE operation, fp16/bf16 computed in float32 and rounded once as torch does; the
# samples use alpha 2, which doubles exactly, so a fused multiply-add changes nothing).
EXACT: dict[str, tuple[float, float]] = {}
# Transcendental functions and pow: NumPy's and torch's (Sleef) float32 libm differ by an ulp or
# two; fp16 and bf16 by one ulp of theirs after the rounding.
MATH = {"float32": (2e-6, 1e-6), "float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}


@dataclass(frozen=True)
class Case:
    """An operator's test entry: its C name, the aten oracle (called with the header's arguments
    but the outputs, in order, torch tensors for tensors), extra attributes, the samples' range
    ``low``..``high``, the dtypes refused beyond what the reference's table lists, the tolerance."""

    name: str
    oracle: Callable[..., Any]
    attributes: dict[str, Any] = field(default_factory=dict)
    low: float = -3
    high: float = 3
    nonzero: bool = False
    refused: frozenset[str] = frozenset()
    tolerance: dict[str, tuple[float, float]] = field(default_factory=lambda: EXACT)
    label: str = ""

    @property
    def id(self) -> str:
        return self.name + (f"[{self.label}]" if self.label else "")


def _aten() -> Any:
    import torch

    return torch.ops.aten


A = _aten
MODES = {0: None, 1: "trunc", 2: "floor"}
NO_BOOL = frozenset({"bool"})
POSITIVE = {"low": 0.25, "high": 4}
POWER: dict[str, Any] = {"low": 0, "high": 3, "refused": NO_BOOL, "tolerance": MATH}

CASES: tuple[Case, ...] = (
    # Add, Sub, Rsub (self, other, alpha)
    Case("Add", lambda s, o, alpha: A().add.Tensor(s, o, alpha=alpha)),
    Case("Adds", lambda s, o, alpha: A().add.Scalar(s, o, alpha=alpha)),
    Case("InplaceAdd", lambda s, o, alpha: A().add_.Tensor(s, o, alpha=alpha)),
    Case("InplaceAdds", lambda s, o, alpha: A().add_.Scalar(s, o, alpha=alpha)),
    Case("Sub", lambda s, o, alpha: A().sub.Tensor(s, o, alpha=alpha), refused=NO_BOOL),
    Case("Subs", lambda s, o, alpha: A().sub.Scalar(s, o, alpha=alpha), refused=NO_BOOL),
    Case("InplaceSub", lambda s, o, alpha: A().sub_.Tensor(s, o, alpha=alpha), refused=NO_BOOL),
    Case("InplaceSubs", lambda s, o, alpha: A().sub_.Scalar(s, o, alpha=alpha), refused=NO_BOOL),
    Case("Rsub", lambda s, o, alpha: A().rsub.Tensor(s, o, alpha=alpha), refused=NO_BOOL),
    Case("Rsubs", lambda s, o, alpha: A().rsub.Scalar(s, o, alpha=alpha), refused=NO_BOOL),
    # Mul
    Case("Mul", lambda s, o: A().mul.Tensor(s, o)),
    Case("Muls", lambda s, o: A().mul.Scalar(s, o)),
    Case("InplaceMul", lambda s, o: A().mul_.Tensor(s, o)),
    Case("InplaceMuls", lambda s, o: A().mul_.Scalar(s, o)),
    # Div: true division gives a float (an in-place int or bool division is refused); modes
    Case("Div", lambda s, o: A().div.Tensor(s, o), nonzero=True),
    Case("Divs", lambda s, o: A().div.Scalar(s, o), nonzero=True),
    Case("InplaceDiv", lambda s, o: A().div_.Tensor(s, o), nonzero=True, refused=NOT_FLOAT),
    Case("InplaceDivs", lambda s, o: A().div_.Scalar(s, o), nonzero=True, refused=NOT_FLOAT),
    *(
        case
        for mode in (0, 1, 2)
        for case in (
            Case(
                "DivMod",
                lambda s, o, mode: A().div.Tensor_mode(s, o, rounding_mode=MODES[mode]),
                {"mode": mode}, nonzero=True, refused=NO_BOOL if mode else frozenset(), label=f"mode{mode}",
            ),
            Case(
                "DivMods",
                lambda s, o, mode: A().div.Scalar_mode(s, o, rounding_mode=MODES[mode]),
                {"mode": mode}, nonzero=True, refused=NO_BOOL if mode else frozenset(), label=f"mode{mode}",
            ),
            Case(
                "InplaceDivMod",
                lambda s, o, mode: A().div_.Tensor_mode(s, o, rounding_mode=MODES[mode]),
                {"mode": mode}, nonzero=True, refused=NO_BOOL if mode else NOT_FLOAT, label=f"mode{mode}",
            ),
            Case(
                "InplaceDivMods",
                lambda s, o, mode: A().div_.Scalar_mode(s, o, rounding_mode=MODES[mode]),
                {"mode": mode}, nonzero=True, refused=NO_BOOL if mode else NOT_FLOAT, label=f"mode{mode}",
            ),
        )
    ),
    # Pow: positive bases (a negative one to a fractional power is NaN in both); no bool result
    Case("PowTensorScalar", lambda s, e: A().pow.Tensor_Scalar(s, e), **POWER),
    Case("PowTensorTensor", lambda s, e: A().pow.Tensor_Tensor(s, e), **POWER),
    Case("PowScalarTensor", lambda s, e: A().pow.Scalar(s, e), **{**POWER, "low": -2}),
    Case("InplacePowTensorScalar", lambda s, e: A().pow_.Scalar(s, e), **POWER),
    Case("InplacePowTensorTensor", lambda s, e: A().pow_.Tensor(s, e), **POWER),
    # activations and float functions
    Case("Silu", lambda s: A().silu.default(s), tolerance=MATH),
    Case("Gelu", lambda s: A().gelu.default(s), tolerance=MATH),
    Case("GeluV2", lambda x, approximate: A().gelu.default(x, approximate="none"), {"approximate": 0},
         tolerance=MATH, label="none"),
    Case("GeluV2", lambda x, approximate: A().gelu.default(x, approximate="tanh"), {"approximate": 1},
         tolerance=MATH, label="tanh"),
    Case("Relu", lambda s: A().relu.default(s)),
    Case("InplaceRelu", lambda s: A().relu_.default(s)),
    Case("Sigmoid", lambda s: A().sigmoid.default(s), tolerance=MATH),
    Case("InplaceSigmoid", lambda s: A().sigmoid_.default(s), tolerance=MATH),
    Case("Tanh", lambda s: A().tanh.default(s), tolerance=MATH),
    Case("InplaceTanh", lambda s: A().tanh_.default(s), refused=NOT_FLOAT, tolerance=MATH),
    Case("Exp", lambda s: A().exp.default(s), tolerance=MATH),
    Case("InplaceExp", lambda s: A().exp_.default(s), refused=NOT_FLOAT, tolerance=MATH),
    Case("Log", lambda s: A().log.default(s), **POSITIVE, tolerance=MATH),
    Case("InplaceLog", lambda s: A().log_.default(s), **POSITIVE, refused=NOT_FLOAT, tolerance=MATH),
    Case("Sqrt", lambda s: A().sqrt.default(s), **POSITIVE, tolerance=MATH),
    Case("InplaceSqrt", lambda s: A().sqrt_.default(s), **POSITIVE, refused=NOT_FLOAT, tolerance=MATH),
    Case("Rsqrt", lambda s: A().rsqrt.default(s), **POSITIVE, tolerance=MATH),
    Case("InplaceRsqrt", lambda s: A().rsqrt_.default(s), **POSITIVE, refused=NOT_FLOAT, tolerance=MATH),
    Case("Neg", lambda s: A().neg.default(s)),
    Case("InplaceNeg", lambda s: A().neg_.default(s)),
    Case("Abs", lambda s: A().abs.default(s)),
    Case("Sign", lambda s: A().sign.default(s)),
    # Clamp
    Case("Clamp", lambda s, lo, hi: A().clamp.default(s, lo, hi)),
    Case("ClampMin", lambda s, lo: A().clamp_min.default(s, lo)),
    Case("ClampMax", lambda s, hi: A().clamp_max.default(s, hi)),
    Case("ClampTensor", lambda s, lo, hi: A().clamp.Tensor(s, lo, hi)),
    Case("ClampMinTensor", lambda s, lo: A().clamp_min.Tensor(s, lo)),
    Case("ClampMaxTensor", lambda s, hi: A().clamp_max.Tensor(s, hi)),
    Case("InplaceClampMax", lambda s, hi: A().clamp_max_.default(s, hi)),
    # comparisons
    *(
        Case(f"{name}{kind}", lambda s, o, aten=aten, kind=kind: getattr(getattr(A(), aten), kind)(s, o))
        for name, aten in (("Eq", "eq"), ("Ne", "ne"), ("Gt", "gt"), ("Ge", "ge"), ("Lt", "lt"), ("Le", "le"))
        for kind in ("Tensor", "Scalar")
    ),
    Case("SWhere", lambda c, s, o: A().where.self(c, s, o)),
    # fills
    Case("InplaceFillScalar", lambda s, v: A().fill_.Scalar(s, v)),
    Case("InplaceZero", lambda s: A().zero_.default(s)),
    Case("InplaceOne", lambda s: A().fill_.Scalar(s, 1)),
    Case("InplaceFillTensor", lambda s, v: A().fill_.Tensor(s, v)),
)  # fmt: skip


@pytest.fixture(autouse=True)
def numpy_backend():
    previous = pyaclnn.get_backend()
    pyaclnn.set_backend("numpy")
    yield
    pyaclnn.set_backend(previous)


# -- samples and calls --------------------------------------------------------------------------------

# Shapes of the tensors in header order (the first, selfRef for an in-place operator, has the
# result's shape), by layout; the strided layout passes the first as a non-contiguous view.
LAYOUTS = {
    "broadcast": ((2, 3), (3,), (2, 1)),
    "empty": ((0, 3), (3,), (1, 3)),
    "strided": ((2, 3), (2, 3), (1,)),
}


def _sample(rng: np.random.Generator, case: Case, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        values = rng.integers(math.ceil(case.low), math.floor(case.high) + 1, shape)
        if case.nonzero:
            values[values == 0] = 1
        return values.astype(dtype)
    values = rng.uniform(case.low, case.high, shape)
    if case.nonzero:
        values[np.abs(values) < 0.25] = 0.5
    return values.astype(np.float32).astype(dtype)


SCALARS = {"clipValueMin": (-1, -0.5), "clipValueMax": (1, 1.5)}


def _scalar(name: str, dtype: np.dtype) -> Any:
    """A scalar of the tensors' kind, exact in every dtype."""
    if dtype == np.bool_:
        return True
    integer, real = SCALARS.get(name, (2, 0.5))
    return integer if dtype.kind in "iu" else real


def _strided(array: np.ndarray) -> np.ndarray:
    base = np.zeros((array.shape[0], array.shape[1] * 2), array.dtype) if array.ndim == 2 else None
    assert base is not None
    view = base[:, ::2]
    view[...] = array
    assert not view.flags.c_contiguous
    return view


def _to_torch(torch: Any, value: Any) -> Any:
    if not isinstance(value, np.ndarray):
        return value
    if value.dtype == BF16:
        return torch.from_numpy(value.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(value, copy=True))  # a copy: the in-place oracles write it


def _to_numpy(tensor: Any) -> np.ndarray:
    import torch

    if tensor.dtype == torch.bfloat16:
        return tensor.float().numpy().astype(BF16)
    return tensor.numpy()


def _arguments(case: Case, dtype: np.dtype, layout: str, rng: np.random.Generator) -> list[Any]:
    """The call's arguments but the outputs (None in their place), in header order."""
    op = ROWS[case.name]
    shapes = iter(LAYOUTS[layout])
    args: list[Any] = []
    for param in op.roles:
        if param.role == elementwise.OUT:
            args.append(None)
        elif param.role == elementwise.ATTRIBUTE:
            args.append(case.attributes.get(param.name, True if dtype == np.bool_ else 2))
        elif not param.tensor:
            args.append(_scalar(param.name, dtype))
        elif param.role == elementwise.CONDITION:
            args.append(_sample(rng, case, next(shapes), np.dtype(np.bool_)))
        elif case.name == "InplaceFillTensor" and param.name == "value":
            args.append(_sample(rng, case, (), dtype))
        else:
            args.append(_sample(rng, case, next(shapes), dtype))
    first = next(i for i, p in enumerate(op.roles) if p.tensor)
    if layout == "strided":
        args[first] = _strided(args[first])
    return args


def _call(case: Case, args: list[Any], out_dtype: np.dtype, shape: tuple[int, ...]) -> Any:
    op = ROWS[case.name]
    filled = [np.empty(shape, out_dtype) if p.role == elementwise.OUT else a for p, a in zip(op.roles, args)]
    return getattr(ops, python_operator_name(case.name))(*filled)


def _oracle(torch: Any, case: Case, args: list[Any]) -> Any:
    op = ROWS[case.name]
    inputs = [_to_torch(torch, a) for p, a in zip(op.roles, args) if p.role != elementwise.OUT]
    return case.oracle(*inputs)


def _supported(case: Case, dtype_name: str) -> bool:
    return dtype_name in ROWS[case.name].dtypes and dtype_name not in case.refused


# -- every operator, every dtype ----------------------------------------------------------------------


def test_every_case_names_an_operator_of_the_table_and_every_row_has_a_case():
    assert {case.name for case in CASES} == set(ROWS)


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_matches_torch_or_refuses_with_param_invalid(torch, case, dtype_name):
    dtype = DTYPES[dtype_name]
    rng = np.random.default_rng(zlib.crc32(f"{case.id} {dtype_name}".encode()))
    inplace = ROWS[case.name].roles[0].role == elementwise.REF
    if not _supported(case, dtype_name):
        args = _arguments(case, dtype, "broadcast", rng)
        with pytest.raises(pyaclnn.AclnnError) as info:
            _call(case, args, dtype, (2, 3))
        assert info.value.status_name == "ACLNN_ERR_PARAM_INVALID"
        return
    for layout in LAYOUTS:
        args = _arguments(case, dtype, layout, rng)
        before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        want = _to_numpy(_oracle(torch, case, args))
        got = _call(case, args, want.dtype, want.shape)
        if inplace:
            assert got is args[0]
        for a, b in zip(args[1:], before[1:]):  # inputs are left alone
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b)
        assert got.dtype == want.dtype and got.shape == want.shape, (layout, got.dtype, want.dtype)
        rtol, atol = case.tolerance.get(want.dtype.name, (0.0, 0.0))  # by the result dtype
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(got, want, err_msg=layout)
        else:
            np.testing.assert_allclose(
                got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, err_msg=layout
            )


# -- refusals ---------------------------------------------------------------------------------------------


def _status(call: Callable[[], Any]) -> str:
    with pytest.raises(pyaclnn.AclnnError) as info:
        call()
    return str(info.value.status_name)


def test_shapes_that_do_not_broadcast_or_do_not_fit_the_output_are_refused():
    f32 = np.float32
    x, y = np.ones((2, 3), f32), np.ones((4,), f32)
    assert _status(lambda: ops.mul(x, y, np.empty((2, 3), f32))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.eq_tensor(x, x, np.empty((3, 2), bool))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.silu(x, np.empty((2, 4), f32))) == "ACLNN_ERR_PARAM_INVALID"
    # other must broadcast to selfRef, not selfRef to a larger shape
    assert _status(lambda: ops.inplace_add(np.ones(3, f32), x, 1)) == "ACLNN_ERR_PARAM_INVALID"
    cond = np.ones((5, 1), bool)
    assert _status(lambda: ops.s_where(cond, x, x, np.empty((2, 3), f32))) == "ACLNN_ERR_PARAM_INVALID"


def test_attributes_out_of_range_and_casts_torch_refuses():
    f32, i64 = np.float32, np.int64
    x = np.ones((2, 3), f32)
    assert _status(lambda: ops.div_mod(x, x, 3, np.empty_like(x))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.gelu_v2(x, 2, np.empty_like(x))) == "ACLNN_ERR_PARAM_INVALID"
    ints = np.arange(6, dtype=i64).reshape(2, 3)
    # integers to a negative integer power; a float result into an int output; a float alpha for ints
    assert _status(lambda: ops.pow_tensor_scalar(ints, -1, np.empty_like(ints))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.div(ints, ints, np.empty_like(ints))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.add(ints, ints, 0.5, np.empty_like(ints))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.add(ints, ints, True, np.empty_like(ints))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.s_where(ints, x, x, np.empty_like(x))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.inplace_fill_tensor(x, np.ones(2, f32))) == "ACLNN_ERR_PARAM_INVALID"


# -- the rules: promotion, scalars, alpha ---------------------------------------------------------------


def test_a_scalar_promotes_only_a_tensor_of_a_lower_kind(torch):
    ints = np.array([1, 2, 3], np.int32)
    # an int tensor with a float scalar: float32 (torch's default dtype)
    out = ops.adds(ints, 0.5, 1, np.empty(3, np.float32))
    np.testing.assert_array_equal(out, [1.5, 2.5, 3.5])
    assert _status(lambda: ops.adds(ints, 0.5, 1, np.empty(3, np.int32))) == "ACLNN_ERR_PARAM_INVALID"
    # a float16 tensor with a float scalar stays float16 (into float16 out), an int scalar keeps int8
    halves = np.array([1, 2, 3], np.float16)
    expected = torch.ops.aten.mul.Scalar(torch.from_numpy(halves), 1e-3)  # the scalar in float32, as torch
    np.testing.assert_array_equal(ops.muls(halves, 1e-3, np.empty(3, np.float16)), expected.numpy())
    small = np.array([100, -100], np.int8)
    out = ops.adds(small, 100, 1, np.empty(2, np.int8))
    expected = torch.ops.aten.add.Scalar(torch.tensor([100, -100], dtype=torch.int8), 100)
    np.testing.assert_array_equal(out, expected.numpy())
    # an int scalar compared with a float tensor, a float one with ints
    assert ops.gt_scalar(ints, 1.5, np.empty(3, bool)).tolist() == [False, True, True]


def test_tensors_of_different_dtypes_promote_as_torch(torch):
    a = np.array([1, 2, 3], np.int32)
    h = np.array([0.5, 1.5, 2.5], np.float16)
    b = np.array([0.5, 1.5, 2.5], np.float32).astype(BF16)
    np.testing.assert_array_equal(ops.add(a, h, 1, np.empty(3, np.float16)), [1.5, 3.5, 5.5])
    assert _status(lambda: ops.add(h, b, 1, np.empty(3, np.int32))) == "ACLNN_ERR_PARAM_INVALID"
    np.testing.assert_array_equal(ops.mul(h, b, np.empty(3, np.float32)), [0.25, 2.25, 6.25])
    out = ops.s_where(np.array([True, False, True]), a, h, np.empty(3, np.float16))
    np.testing.assert_array_equal(out, [1, 1.5, 3])
    # in place: the promoted result cast back into selfRef when torch's canCast allows it
    ref = h.copy()
    ops.inplace_add(ref, np.array([0.25], np.float32), 1)
    expected = torch.from_numpy(h.copy()).add_(torch.tensor([0.25], dtype=torch.float32))
    np.testing.assert_array_equal(ref, expected.numpy())
    assert _status(lambda: ops.inplace_mul(a.copy(), h)) == "ACLNN_ERR_PARAM_INVALID"
    # a result written into a wider output, and a comparison into an int output
    np.testing.assert_array_equal(ops.sub(a, a, 1, np.empty(3, np.float64)), [0, 0, 0])
    np.testing.assert_array_equal(ops.lt_tensor(a, h, np.empty(3, np.int32)), [0, 0, 0])


def test_alpha_one_keeps_ints_exact_and_alpha_scales_other():
    big = np.array([2**62 + 1], np.int64)
    assert int(ops.add(big, np.array([1], np.int64), 1, np.empty(1, np.int64))[0]) == 2**62 + 2
    assert int(ops.sub(big, np.array([1], np.int64), 1, np.empty(1, np.int64))[0]) == 2**62
    x = np.array([1.0, 2.0], np.float32)
    np.testing.assert_array_equal(ops.rsubs(x, 10.0, 3, np.empty(2, np.float32)), [7.0, 4.0])
    np.testing.assert_array_equal(ops.subs(x, 10.0, 0.5, np.empty(2, np.float32)), [-4.0, -3.0])


# -- values torch gives a meaning to ---------------------------------------------------------------------


def test_special_values_follow_torch(torch):
    f32 = np.float32
    specials = np.array([0.0, -1.0, np.inf, -np.inf, np.nan, 90.0, -90.0, 1e-30], f32)
    t = torch.from_numpy(specials.copy())
    aten = torch.ops.aten
    for name, oracle in (
        ("log", aten.log.default),
        ("sqrt", aten.sqrt.default),
        ("rsqrt", aten.rsqrt.default),
        ("exp", aten.exp.default),
        ("sigmoid", aten.sigmoid.default),
        ("silu", aten.silu.default),
        ("tanh", aten.tanh.default),
        ("relu", aten.relu.default),
    ):  # not gelu: torch's gives NaN at inf, the reference inf (x * Phi(x))
        got = getattr(ops, name)(specials, np.empty_like(specials))
        np.testing.assert_allclose(got, oracle(t).numpy(), rtol=2e-6, atol=1e-37, err_msg=name)
    # Clamp: NaN propagates, a min above the max gives the max
    for low, high in ((-1, 1), (2, 1)):
        got = ops.clamp(specials, low, high, np.empty_like(specials))
        np.testing.assert_array_equal(got, aten.clamp(t, low, high).numpy())
    # int pow: negative exponents of a tensor give 0 but for 1 and -1; 0 ** 0 is 1
    base = np.array([2, 1, -1, -1, 0, 3], np.int64)
    exponent = np.array([-1, -3, -3, -2, 0, 2], np.int64)
    expected = aten.pow.Tensor_Tensor(torch.from_numpy(base), torch.from_numpy(exponent)).numpy()
    np.testing.assert_array_equal(ops.pow_tensor_tensor(base, exponent, np.empty(6, np.int64)), expected)
    # division of ints by modes: toward zero and floor of negative quotients
    a, b = np.array([-7, 7, -7, 7, -6], np.int64), np.array([2, -2, -2, 2, 3], np.int64)
    for mode in (1, 2):
        want = aten.div.Tensor_mode(torch.from_numpy(a), torch.from_numpy(b), rounding_mode=MODES[mode])
        np.testing.assert_array_equal(ops.div_mod(a, b, mode, np.empty(5, np.int64)), want.numpy())


def test_gelu_erf_is_within_float32_rounding_of_the_exact_value():
    x = np.linspace(-12, 12, 4001)
    got = ops.gelu(x.astype(np.float32), np.empty(x.shape, np.float32))
    exact = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float32).astype(float)])
    np.testing.assert_allclose(got, exact.astype(np.float32), rtol=1.2e-7, atol=1e-40)
    z = np.linspace(-26, 26, 5201)
    erfc = unary.erfc(z)
    np.testing.assert_allclose(erfc, [math.erfc(v) for v in z], rtol=1e-12, atol=0)


def test_fills_convert_the_value_to_self_ref_dtype():
    ints = np.zeros((2, 2), np.int32)
    assert ops.inplace_fill_scalar(ints, 2.7) is ints
    np.testing.assert_array_equal(ints, 2)
    flags = np.zeros(3, bool)
    ops.inplace_fill_scalar(flags, 0.5)
    assert flags.all()
    b = np.zeros(2, BF16)
    ops.inplace_fill_tensor(b, np.array([3.0], np.float32))
    np.testing.assert_array_equal(b.astype(np.float32), [3.0, 3.0])
    ops.inplace_zero(b)
    np.testing.assert_array_equal(b.astype(np.float32), [0.0, 0.0])


def test_an_in_place_operator_on_a_device_array_writes_it():
    x = pyaclnn.to_device(np.array([-1.0, 2.0, -3.0], np.float32))
    try:
        assert ops.inplace_relu(x) is x
        ops.inplace_muls(x, 2.0)
        np.testing.assert_array_equal(x.numpy(), [0.0, 4.0, 0.0])
    finally:
        x.close()


def test_an_output_that_is_also_an_input_gets_what_a_separate_output_gets():
    # the references compute straight into the output when they can: one that is also an input
    # (exactly, or overlapping) must not be read after it was written
    rng = np.random.default_rng(7)
    x, y = (rng.uniform(-3, 3, (4, 6)).astype(np.float32) for _ in range(2))
    low, high = y - 1, y
    calls = {
        "add into other": lambda a, b, lo, hi, out: ops.add(a, b, 2, out if out is not None else b),
        "rsub into self": lambda a, b, lo, hi, out: ops.rsub(a, b, 3, out if out is not None else a),
        "clamp_tensor into max": lambda a, b, lo, hi, out: ops.clamp_tensor(
            a, lo, hi, out if out is not None else hi
        ),
        "silu into self": lambda a, b, lo, hi, out: ops.silu(a, out if out is not None else a),
        "div_mod into self": lambda a, b, lo, hi, out: ops.div_mod(a, b, 1, out if out is not None else a),
        "softmax into self": lambda a, b, lo, hi, out: ops.softmax(a, 1, out if out is not None else a),
        "log_softmax into self": lambda a, b, lo, hi, out: ops.log_softmax(
            a, 1, out if out is not None else a
        ),
    }
    for name, call in calls.items():
        want = call(x.copy(), y.copy(), low.copy(), high.copy(), np.empty_like(x)).copy()
        got = call(x.copy(), y.copy(), low.copy(), high.copy(), None)
        np.testing.assert_array_equal(got, want, err_msg=name)
    ints, divisor = np.array([-7, 7, -7, 7, -6], np.int64), np.array([2, -2, -2, 2, 3], np.int64)
    want = ops.div_mod(ints, divisor, 1, np.empty_like(ints))
    got = ints.copy()
    ops.inplace_div_mod(got, divisor, 1)
    np.testing.assert_array_equal(got, want)
    shifted = np.arange(10, dtype=np.float32)  # src a view of selfRef, one element behind it
    ops.inplace_copy(shifted[1:], shifted[:-1])
    np.testing.assert_array_equal(shifted, [0, 0, 1, 2, 3, 4, 5, 6, 7, 8])


def test_pow_exponents_torch_computes_as_one_operation_follow_torch_on_special_values(torch):
    specials = np.array([-0.0, -np.inf, np.inf, np.nan, 4.0, 1e-30, -2.0], np.float32)
    for exponent in (0.5, 2.0, -1.0):
        want = torch.ops.aten.pow.Tensor_Scalar(torch.from_numpy(specials.copy()), exponent).numpy()
        got = ops.pow_tensor_scalar(specials, exponent, np.empty_like(specials))
        np.testing.assert_array_equal(got, want, err_msg=str(exponent))
        numbers = ~np.isnan(want)  # the sign of zero too (a NaN's sign means nothing)
        np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]), str(exponent))

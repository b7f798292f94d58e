"""The CPU fallback's other references (pyaclnn/kernels/references: linalg, reductions, normalization,
movement) against torch.ops.aten, through pyaclnn.ops on the numpy backend.

One table drives the tests: a :class:`Case` per operator (or per form of one: a label) gives its
inputs by layout (broadcast shapes, an empty tensor, a non-contiguous first tensor), its aten oracle
and its tolerance; how to call it (the parameters' order, which are outputs) comes from the
reference's own row. Every case runs in each of float32, float16, bfloat16, int32, int64, int8 and
bool: a dtype the row takes matches torch (exactly for data movement, within the family's tolerance
for the math), a dtype it refuses gives ACLNN_ERR_PARAM_INVALID. In-place operators write their NumPy
argument back.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import pyaclnn
from pyaclnn import ops
from pyaclnn.kernels.references import linalg, movement, normalization, reductions
from pyaclnn.kernels.references._rules import Row
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
TABLES = (
    linalg.MATMUL,
    linalg.CONVOLUTION,
    reductions.TABLE,
    normalization.TABLE,
    movement.ARANGE,
    movement.TRIANGLES,
    movement.GATHERS,
    movement.REPEATS,
    movement.PADS,
)
ROWS: dict[str, Row] = {row.name: row for table in TABLES for row in table}
OUTPUTS = frozenset(("out", "output", "yOut", "rstdOut"))

# Tolerances (rtol, atol) by the result's dtype. Exact: data movement. Products and sums: float32
# accumulation in another order than torch's; fp16 and bf16 within one rounding of theirs.
EXACT: dict[str, tuple[float, float]] = {}
# (torch's CPU addbmm and cumsum round each step in bf16: a few of its roundings.)
SUMS = {"float32": (1e-5, 1e-5), "float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}
# Softmax, norms: exp, log and rsqrt of NumPy's and torch's libm differ by an ulp or two.
NORMS = {"float32": (1e-5, 1e-6), "float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}


def _torch() -> Any:
    import torch

    return torch


def _aten() -> Any:
    return _torch().ops.aten


A = _aten


class Make:
    """Sample tensors in the test's dtype; the first made in the strided layout is a non-contiguous
    view."""

    def __init__(self, rng: np.random.Generator, dtype: np.dtype, layout: str):
        self.rng, self.dtype, self.layout, self.count = rng, dtype, layout, 0

    def __call__(
        self, shape: tuple[int, ...], dtype: Any = None, low: float = -3, high: float = 3
    ) -> np.ndarray:
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        if dtype == np.bool_:
            array = self.rng.integers(0, 2, shape).astype(bool)
        elif dtype.kind in "iu":
            array = self.rng.integers(int(low), int(high) + 1, shape).astype(dtype)
        else:
            array = self.rng.uniform(low, high, shape).astype(np.float32).astype(dtype)
        self.count += 1
        if self.layout == "strided" and self.count == 1 and array.ndim and array.shape[-1] > 1:
            base = np.zeros((*array.shape[:-1], array.shape[-1] * 2), dtype)
            view = base[..., ::2]
            view[...] = array
            assert not view.flags.c_contiguous
            return view
        return array

    def index(self, shape: tuple[int, ...], bound: int) -> np.ndarray:
        return self.rng.integers(0, max(bound, 1), shape).astype(np.int64 if self.count % 2 else np.int32)

    @property
    def float(self) -> bool:
        return self.dtype.kind == "f" or self.dtype == BF16


Inputs = Callable[[Make, str], dict[str, Any]]


@dataclass(frozen=True)
class Case:
    """An operator's test entry: its C name, its inputs (named as in the header, the outputs left
    out) by layout, the aten oracle (given the inputs as torch values, returning the outputs in
    header order; it takes a dict of them), the dtypes refused beyond the row's and the tolerance."""

    name: str
    inputs: Inputs
    oracle: Callable[..., Any]
    tolerance: dict[str, tuple[float, float]] = field(default_factory=lambda: EXACT)
    label: str = ""
    refused: frozenset[str] = frozenset()

    @property
    def id(self) -> str:
        return self.name + (f"[{self.label}]" if self.label else "")


def _shapes(layouts: dict[str, tuple[tuple[int, ...], ...]], *names: str, **fixed: Any) -> Inputs:
    """Inputs of tensors ``names`` with the shapes given by layout (the strided layout reuses the
    broadcast shapes), plus ``fixed`` values."""

    def inputs(make: Make, layout: str) -> dict[str, Any]:
        shapes = layouts.get(layout, layouts["broadcast"])
        return {**{n: make(s, low=-1, high=1) for n, s in zip(names, shapes)}, **fixed}

    return inputs


def _torch_dtype(dtype: np.dtype) -> Any:
    import torch

    return torch.bfloat16 if dtype == BF16 else getattr(torch, dtype.name)


MM = {"cubeMathType": 1}
ADD = {"beta": 0.5, "alpha": 2.0, **MM}
PAIR: dict[str, tuple[tuple[int, ...], ...]] = {"broadcast": ((3, 4), (4, 5)), "empty": ((0, 4), (4, 5))}


def _conv(
    x: tuple[int, ...],
    w: tuple[int, ...],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    groups: int,
    transposed: bool = False,
    output_padding: list[int] | None = None,
) -> Inputs:
    def inputs(make: Make, layout: str) -> dict[str, Any]:
        shape = (0, *x[1:]) if layout == "empty" else x
        out_channels = w[1] * groups if transposed else w[0]
        return {
            "input": make(shape, low=-1, high=1),
            "weight": make(w, low=-1, high=1),
            "bias": make((out_channels,)),
            "stride": stride,
            "padding": padding,
            "dilation": dilation,
            "transposed": transposed,
            "outputPadding": output_padding or [0] * len(stride),
            "groups": groups,
            "cubeMathType": 0,
        }

    return inputs


def _conv_oracle(v: dict[str, Any]) -> Any:
    names = (
        "input",
        "weight",
        "bias",
        "stride",
        "padding",
        "dilation",
        "transposed",
        "outputPadding",
        "groups",
    )
    return A().convolution.default(*(v[n] for n in names))


def _reduce(dims: list[int], keep: bool, dims_name: str = "dims", keep_name: str = "keepDims") -> Inputs:
    def inputs(make: Make, layout: str) -> dict[str, Any]:
        shape = (0, 3, 2) if layout == "empty" else (2, 3, 4)
        return {"self": make(shape, low=-2, high=2), dims_name: dims, keep_name: keep, "dtype": make.dtype}

    return inputs


def _unary(shape: tuple[int, ...], empty: tuple[int, ...], **fixed: Any) -> Inputs:
    return _shapes({"broadcast": (shape,), "empty": (empty,)}, "self", **fixed)


def _rms(make: Make, layout: str) -> dict[str, Any]:
    shape = (0, 3, 4) if layout == "empty" else (2, 3, 4)
    return {"x": make(shape), "gamma": make((3, 4)), "epsilon": 1e-6}


def _rms_oracle(v: dict[str, Any]) -> tuple[Any, Any]:
    x, gamma, epsilon = v["x"], v["gamma"], v["epsilon"]
    dims = tuple(range(-gamma.dim(), 0))
    rstd = _torch().rsqrt(x.float().pow(2).mean(dim=dims, keepdim=True) + epsilon)
    return A().rms_norm.default(x, list(gamma.shape), gamma, epsilon), rstd


def _arange(make: Make, layout: str) -> dict[str, Any]:
    ends = {"broadcast": (0.5, 3.7, 0.3), "empty": (2.0, 2.0, 1.0), "strided": (5.0, -4.0, -0.75)}[layout]
    if not make.float:
        ends = {"broadcast": (-3, 10, 3), "empty": (2, 2, 1), "strided": (5, -4, -2)}[layout]
    return dict(zip(("start", "end", "step"), ends))


def _index(form: str) -> Inputs:
    def inputs(make: Make, layout: str) -> dict[str, Any]:
        self = make((0, 4) if layout == "empty" and form == "gather_v2" else (3, 4))
        count = 0 if layout == "empty" else 3
        if form == "index_select":
            return {"self": self, "dim": 1, "index": make.index((count,), 4)}
        if form == "gather":
            return {"self": self, "dim": -1, "index": make.index((2, count), 4)}
        return {"self": self, "dim": 1, "index": make.index((2, 2), 4)}

    return inputs


def _gather_v2(self: Any, dim: int, index: Any) -> Any:
    """GatherV2 is index_select with the index's dims in place of ``dim``."""
    picked = A().index_select.default(self, dim, index.flatten())
    return picked.reshape(*self.shape[:dim], *index.shape, *self.shape[dim + 1 :])


def _pad(make: Make, layout: str) -> dict[str, Any]:
    value = True if make.dtype == np.bool_ else (0.5 if make.float else 7)
    pad = [1, 2, -1, 1] if layout != "empty" else [0, 1, 1, 1, 2, 0]
    return {"self": make((0, 2, 3) if layout == "empty" else (2, 3, 4)), "pad": pad, "value": value}


def _interleave(make: Make, layout: str) -> dict[str, Any]:
    self = make((0, 3) if layout == "empty" else (2, 3))
    repeats = make.rng.integers(0, 3, self.size).astype(np.int64)
    return {"self": self, "repeats": repeats, "outputSize": int(repeats.sum())}


def _matmul(aten: str, a: str, b: str) -> Callable[[dict[str, Any]], Any]:
    return lambda v: getattr(A(), aten).default(v[a], v[b])


def _add(aten: str, a: str, b: str, c: str) -> Callable[[dict[str, Any]], Any]:
    return lambda v: getattr(A(), aten).default(v[a], v[b], v[c], beta=v["beta"], alpha=v["alpha"])


BMM = {"broadcast": ((2, 3, 4), (2, 4, 5)), "empty": ((0, 3, 4), (0, 4, 5))}
BATCHES = ("batch1", "batch2")

CASES: tuple[Case, ...] = (
    # the matmul family
    Case("Matmul", _shapes({"broadcast": ((2, 1, 3, 4), (3, 4, 5)), "empty": ((0, 3, 4), (4, 5))},
                           "self", "mat2", **MM),
         _matmul("matmul", "self", "mat2"), SUMS, "batched"),
    Case("Matmul", _shapes({"broadcast": ((4,), (2, 4, 3)), "empty": ((0,), (0,)), "strided": ((3, 4), (4,))},
                           "self", "mat2", **MM),
         _matmul("matmul", "self", "mat2"), SUMS, "vectors"),
    Case("BatchMatMul", _shapes(BMM, "self", "mat2", **MM), _matmul("bmm", "self", "mat2"), SUMS),
    Case("Mm", _shapes(PAIR, "self", "mat2", **MM), _matmul("mm", "self", "mat2"), SUMS),
    Case("Mv", _shapes({"broadcast": ((3, 4), (4,)), "empty": ((0, 4), (4,))}, "self", "vec", **MM),
         _matmul("mv", "self", "vec"), SUMS),
    Case("Dot", _shapes({"broadcast": ((5,), (5,)), "empty": ((0,), (0,))}, "self", "tensor"),
         _matmul("dot", "self", "tensor"), SUMS),
    Case("Addmm", _shapes({"broadcast": ((5,), (3, 4), (4, 5)), "empty": ((1, 5), (0, 4), (4, 5))},
                          "self", "mat1", "mat2", **ADD),
         _add("addmm", "self", "mat1", "mat2"), SUMS),
    Case("InplaceAddmm", _shapes({"broadcast": ((3, 5), (3, 4), (4, 5)), "empty": ((0, 5), (0, 4), (4, 5))},
                                 "selfRef", "mat1", "mat2", **ADD),
         _add("addmm_", "selfRef", "mat1", "mat2"), SUMS),
    Case("Baddbmm", _shapes({"broadcast": ((3, 1), (2, 3, 4), (2, 4, 5)),
                             "empty": ((5,), (0, 3, 4), (0, 4, 5))},
                            "self", *BATCHES, **ADD),
         _add("baddbmm", "self", *BATCHES), SUMS),
    Case("InplaceBaddbmm", _shapes({"broadcast": ((2, 3, 5), (2, 3, 4), (2, 4, 5)),
                                    "empty": ((0, 3, 5), (0, 3, 4), (0, 4, 5))}, "selfRef", *BATCHES, **ADD),
         _add("baddbmm_", "selfRef", *BATCHES), SUMS),
    Case("Addbmm", _shapes({"broadcast": ((5,), (2, 3, 4), (2, 4, 5)),
                            "empty": ((3, 5), (0, 3, 4), (0, 4, 5))},
                           "self", *BATCHES, **ADD),
         _add("addbmm", "self", *BATCHES), SUMS),
    # Convolution
    Case("Convolution", _conv((2, 4, 9), (6, 2, 3), [2], [1], [2], 2), _conv_oracle, SUMS, "1d"),
    Case("Convolution", _conv((2, 3, 7, 6), (4, 3, 3, 2), [1, 2], [1, 0], [1, 1], 1),
         _conv_oracle, SUMS, "2d"),
    Case("Convolution", _conv((1, 2, 4, 5, 3), (2, 1, 2, 3, 1), [1, 1, 2], [0, 1, 0], [2, 1, 1], 2),
         _conv_oracle, SUMS, "3d"),
    Case("Convolution", _conv((2, 4, 5, 4), (4, 3, 3, 2), [2, 3], [1, 0], [1, 2], 2, True, [1, 2]),
         _conv_oracle, SUMS, "transposed"),
    # reductions
    Case("ReduceSum", _reduce([0, -1], True),
         lambda v: A().sum.dim_IntList(v["self"], v["dims"], v["keepDims"], dtype=_torch_dtype(v["dtype"])),
         SUMS, "dims"),
    Case("ReduceSum", _reduce([], False),
         lambda v: A().sum.dim_IntList(v["self"], None, v["keepDims"], dtype=_torch_dtype(v["dtype"])),
         SUMS, "all"),
    Case("Mean", _reduce([1], False, "dim", "keepDim"),
         lambda v: A().mean.dim(v["self"], v["dim"], v["keepDim"], dtype=_torch_dtype(v["dtype"])), SUMS),
    Case("Cumsum", lambda make, layout: {**_unary((2, 3, 4), (0, 3), dim=1)(make, layout),
                                        "dtype": make.dtype},
         lambda v: A().cumsum.default(v["self"], v["dim"], dtype=_torch_dtype(v["dtype"])), SUMS,
         refused=frozenset({"bool"})),
    # normalisation
    Case("Softmax", _unary((2, 3, 4), (0, 3), dim=1),
         lambda v: A()._softmax.default(v["self"], v["dim"], False),
         NORMS),
    Case("LogSoftmax", _unary((2, 3, 4), (0, 3), dim=-1),
         lambda v: A()._log_softmax.default(v["self"], v["dim"], False), NORMS),
    Case("RmsNorm", _rms, _rms_oracle, NORMS),
    # data movement
    Case("Arange", _arange, lambda v: _torch().arange(v["start"], v["end"], v["step"], dtype=v["dtype"]),
         NORMS),
    *(
        Case(name, _unary((2, 3, 4), (0, 3, 3), diagonal=diagonal),
             lambda v, aten=aten: getattr(A(), aten).default(v["self"], v["diagonal"]), label=str(diagonal))
        for diagonal in (1, -1)
        for name, aten in (("Tril", "tril"), ("Triu", "triu"))
    ),
    Case("InplaceTril", _shapes({"broadcast": ((3, 4),), "empty": ((3, 0),)}, "selfRef", diagonal=0),
         lambda v: A().tril_.default(v["selfRef"], v["diagonal"])),
    Case("InplaceTriu", _shapes({"broadcast": ((2, 4, 3),), "empty": ((0, 2, 2),)}, "selfRef", diagonal=1),
         lambda v: A().triu_.default(v["selfRef"], v["diagonal"])),
    Case("IndexSelect", _index("index_select"),
         lambda v: A().index_select.default(v["self"], v["dim"], v["index"])),
    Case("Gather", _index("gather"), lambda v: A().gather.default(v["self"], v["dim"], v["index"])),
    Case("GatherV2", _index("gather_v2"), lambda v: _gather_v2(v["self"], v["dim"], v["index"])),
    Case("Repeat", _unary((2, 3), (0, 3), repeats=[2, 1, 2]),
         lambda v: A().repeat.default(v["self"], v["repeats"])),
    Case("RepeatInterleaveIntWithDim", _unary((2, 3), (0, 3), repeats=2, dim=1, outputSize=6),
         lambda v: A().repeat_interleave.self_int(v["self"], v["repeats"], v["dim"],
                                                  output_size=v["outputSize"])),
    Case("RepeatInterleaveInt", _unary((2, 3), (0, 3), repeats=3, outputSize=0),
         lambda v: A().repeat_interleave.self_int(v["self"], v["repeats"])),
    Case("RepeatInterleave", _interleave,
         lambda v: A().repeat_interleave.self_Tensor(v["self"], v["repeats"], output_size=v["outputSize"])),
    Case("ConstantPadNd", _pad, lambda v: A().constant_pad_nd.default(v["self"], v["pad"], v["value"])),
)  # fmt: skip


@pytest.fixture(autouse=True)
def numpy_backend():
    previous = pyaclnn.get_backend()
    pyaclnn.set_backend("numpy")
    yield
    pyaclnn.set_backend(previous)


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


def _call(row: Row, inputs: dict[str, Any], outputs: list[np.ndarray]) -> Any:
    given = iter(outputs)
    args = [next(given) if n in OUTPUTS else inputs[n] for n in row.names]
    return getattr(ops, python_operator_name(row.name))(*args)


def _oracle(torch: Any, case: Case, inputs: dict[str, Any], dtype: np.dtype) -> list[np.ndarray]:
    converted = {n: _to_torch(torch, v) for n, v in inputs.items()}
    if case.name == "Arange":
        converted["dtype"] = _torch_dtype(dtype)
    result = case.oracle(converted)
    return [_to_numpy(t) for t in (result if isinstance(result, tuple) else (result,))]


def _supported(case: Case, dtype_name: str) -> bool:
    return dtype_name in ROWS[case.name].dtypes and dtype_name not in case.refused


def _status(call: Callable[[], Any]) -> str:
    with pytest.raises(pyaclnn.AclnnError) as info:
        call()
    return str(info.value.status_name)


# -- every operator, every dtype ----------------------------------------------------------------------


def test_every_case_names_an_operator_of_the_tables_and_every_row_has_a_case():
    assert {case.name for case in CASES} == set(ROWS)


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_matches_torch_or_refuses_with_param_invalid(torch, case, dtype_name):
    dtype = DTYPES[dtype_name]
    row = ROWS[case.name]
    rng = np.random.default_rng(zlib.crc32(f"{case.id} {dtype_name}".encode()))
    inplace = row.name.startswith("Inplace")
    if not _supported(case, dtype_name):
        inputs = case.inputs(Make(rng, dtype, "broadcast"), "broadcast")
        outputs = [np.empty((2, 3), dtype) for n in row.names if n in OUTPUTS]
        assert _status(lambda: _call(row, inputs, outputs)) == "ACLNN_ERR_PARAM_INVALID"
        return
    for layout in ("broadcast", "empty", "strided"):
        inputs = case.inputs(Make(rng, dtype, layout), layout)
        before = {n: v.copy() for n, v in inputs.items() if isinstance(v, np.ndarray)}
        wants = _oracle(torch, case, inputs, dtype)
        got = _call(row, inputs, [np.empty(w.shape, w.dtype) for w in wants])
        if inplace:
            assert got is inputs["selfRef"]
        for n, b in before.items():  # inputs are left alone
            if not inplace or n != "selfRef":
                np.testing.assert_array_equal(inputs[n], b)
        for g, want in zip(got if isinstance(got, tuple) else (got,), wants):
            assert g.dtype == want.dtype and g.shape == want.shape, (
                layout,
                g.dtype,
                want.dtype,
                g.shape,
                want.shape,
            )
            rtol, atol = case.tolerance.get(want.dtype.name, (0.0, 0.0))
            if rtol == 0 and atol == 0:
                np.testing.assert_array_equal(g, want, err_msg=layout)
            else:
                np.testing.assert_allclose(
                    g.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, err_msg=layout
                )


# -- the rules beyond the table --------------------------------------------------------------------------


def test_beta_zero_ignores_self_so_a_nan_there_does_not_propagate(torch):
    f32 = np.float32
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 4)).astype(f32), rng.standard_normal((4, 5)).astype(f32)
    nan = np.full((3, 5), np.nan, f32)
    got = ops.addmm(nan, a, b, 0.0, 1.0, np.empty((3, 5), f32), 0)
    want = A().addmm.default(torch.from_numpy(nan), torch.from_numpy(a), torch.from_numpy(b), beta=0).numpy()
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    batch1, batch2 = a[None].repeat(2, 0), b[None].repeat(2, 0)
    got = ops.inplace_baddbmm(np.full((2, 3, 5), np.nan, f32), batch1, batch2, 0, 2, 0)
    assert not np.isnan(got).any()


def test_a_null_required_tensor_is_nullptr_and_wrong_shapes_are_param_invalid():
    f32 = np.float32
    x = np.ones((2, 3), f32)
    # a NULL bias is allowed (no bias), a NULL input is not
    out = np.empty((1, 2, 3), f32)
    got = ops.convolution(
        np.ones((1, 1, 5), f32),
        np.ones((2, 1, 3), f32),
        np.zeros(2, f32),
        [1],
        [0],
        [1],
        False,
        [0],
        1,
        out,
        0,
    )
    np.testing.assert_array_equal(got, np.full((1, 2, 3), 3, f32))
    assert (
        _status(lambda: ops.mm(x, np.ones((4, 2), f32), np.empty((2, 2), f32), 0))
        == "ACLNN_ERR_PARAM_INVALID"
    )
    assert _status(lambda: ops.mm(x, x.T, np.empty((2, 3), f32), 0)) == "ACLNN_ERR_PARAM_INVALID"
    assert (
        _status(lambda: ops.mm(x, x.T.astype(np.float16), np.empty((2, 2), f32), 0))
        == "ACLNN_ERR_PARAM_INVALID"
    )
    assert _status(lambda: ops.addmm(np.ones(4, f32), x, x.T, 1, 1, np.empty((2, 2), f32), 0)) == (
        "ACLNN_ERR_PARAM_INVALID"
    )
    assert _status(lambda: ops.softmax(x, 2, np.empty_like(x))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.reduce_sum(x, [0, 0], False, np.float32, np.empty(3, f32))) == (
        "ACLNN_ERR_PARAM_INVALID"
    )
    assert (
        _status(lambda: ops.reduce_sum(x, [0], False, np.float32, np.empty(2, f32)))
        == "ACLNN_ERR_PARAM_INVALID"
    )
    assert (
        _status(lambda: ops.mean(x, [0], False, np.int32, np.empty(3, np.int32))) == "ACLNN_ERR_PARAM_INVALID"
    )
    assert _status(
        lambda: ops.rms_norm(x, np.ones(2, f32), 1e-6, np.empty_like(x), np.empty((2, 1), f32))
    ) == ("ACLNN_ERR_PARAM_INVALID")
    assert _status(lambda: ops.arange(0, 5, 0, np.empty(5, f32))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.arange(0, 5, 1, np.empty(4, f32))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.tril(np.ones(3, f32), 0, np.empty(3, f32))) == "ACLNN_ERR_PARAM_INVALID"
    index = np.zeros(2, np.float32)
    assert _status(lambda: ops.index_select(x, 0, index, np.empty((2, 3), f32))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.repeat(x, [2], np.empty((2, 6), f32))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.constant_pad_nd(x, [1], 0, np.empty((2, 4), f32))) == "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.mm(x, x.T, np.empty((2, 2), f32), 5)) == "ACLNN_ERR_PARAM_INVALID"
    repeats = np.array([1, 2, 0, 1, 1, 1], np.int64)
    invalid = "ACLNN_ERR_PARAM_INVALID"
    assert _status(lambda: ops.repeat_interleave(x, repeats, 6, np.empty(5, f32))) == invalid
    weight = np.ones((2, 2, 3), f32)  # transposed: an output padding not below the stride
    transposed = (x[None], weight, np.zeros(2, f32), [1], [0], [1], True, [1], 1)
    assert _status(lambda: ops.convolution(*transposed, np.empty((1, 2, 6), f32), 0)) == invalid
    conv = (x[None], np.ones((2, 3, 3), f32), np.zeros(2, f32), [1], [0], [1], False, [0], 2)
    assert _status(lambda: ops.convolution(*conv, np.empty((1, 2, 1), f32), 0)) == "ACLNN_ERR_PARAM_INVALID"


def test_a_refused_call_writes_nothing():
    f32 = np.float32
    out = np.full((2, 2), 7, f32)
    with pytest.raises(pyaclnn.AclnnError):
        ops.mm(np.ones((2, 3), f32), np.ones((2, 2), f32), out, 0)
    np.testing.assert_array_equal(out, np.full((2, 2), 7, f32))
    ref = np.full((2, 3), 7, f32)
    with pytest.raises(pyaclnn.AclnnError):
        ops.inplace_addmm(ref, np.ones((2, 3), f32), np.ones((2, 3), f32), 1, 1, 0)
    np.testing.assert_array_equal(ref, np.full((2, 3), 7, f32))


def test_null_tensors_are_param_nullptr():
    from pyaclnn.kernels import references
    from pyaclnn.kernels.checks import CheckFailed
    from pyaclnn.kernels.references import TensorInfo

    f32 = np.dtype(np.float32)
    x = TensorInfo((2, 3), f32)
    calls = {
        "Mm": (None, x, x, 0),
        "Convolution": (None, x, None, (1,), (0,), (1,), False, (0,), 1, x, 0),
        "ReduceSum": (None, (0,), False, f32, x),
        "Softmax": (x, 0, None),
        "RmsNorm": (x, None, 1e-6, x, x),
        "IndexSelect": (x, 0, None, x),
        "ConstantPadNd": (x, (1, 1), 0, None),
    }
    for name, values in calls.items():
        reference = references.get(name)
        assert reference is not None and reference.check is not None
        with pytest.raises(CheckFailed) as info:
            reference.check(*values)
        assert info.value.status == 161001, name


def test_reducing_an_empty_dim_gives_torch_s_zero_sum_and_nan_mean(torch):
    x = np.ones((0, 3), np.float16)
    total = ops.reduce_sum(x, [0], False, np.float32, np.empty(3, np.float32))
    mean = ops.mean(x, [0], True, np.float16, np.empty((1, 3), np.float16))
    tx = torch.from_numpy(x)
    np.testing.assert_array_equal(total, A().sum.dim_IntList(tx, [0], False, dtype=torch.float32).numpy())
    np.testing.assert_array_equal(mean, A().mean.dim(tx, [0], True).numpy())
    assert np.isnan(mean).all()


def test_integer_sums_wrap_as_torch_s_and_a_float_dtype_is_computed_in_it(torch):
    x = np.full((4, 100), 100, np.int8)
    got = ops.reduce_sum(x, [1], False, np.int8, np.empty(4, np.int8))
    want = A().sum.dim_IntList(torch.from_numpy(x), [1], False, dtype=torch.int8).numpy()
    np.testing.assert_array_equal(got, want)
    cumulative = ops.cumsum(x, 1, np.float16, np.empty((4, 100), np.float16))
    expected = A().cumsum.default(torch.from_numpy(x), 1, dtype=torch.float16).numpy()
    np.testing.assert_allclose(cumulative.astype(np.float64), expected.astype(np.float64), rtol=2e-3)


@pytest.mark.parametrize("dtype_name", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("normalized", [(64,), (6, 64)], ids=["one-dim", "two-dims"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dot", ["vecdot", "einsum"])
def test_layer_norm_matches_torch_with_weight_bias_mean_and_rstd(
    torch, monkeypatch, dtype_name, normalized, layout, dot
):
    """The sum of squares is a dot product of each normalized block with itself (np.vecdot, or
    einsum where NumPy has no vecdot): over one and two normalized dims, a non-contiguous input,
    every float dtype, with and without weight and bias."""
    if dot == "einsum":
        monkeypatch.setattr(normalization, "_row_dot", normalization._einsum_dot)
    dtype = DTYPES[dtype_name]
    rng = np.random.default_rng(zlib.crc32(f"{dtype_name}{normalized}{layout}".encode()))
    shape = (5, *normalized)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32).astype(dtype)
    if layout == "transposed":  # the same values, laid out with the first dim innermost
        x = np.ascontiguousarray(x.T).T
        assert not x.flags.c_contiguous
    weight = rng.standard_normal(normalized).astype(np.float32).astype(dtype)
    bias = rng.standard_normal(normalized).astype(np.float32).astype(dtype)
    reduced = (5, *(1,) * len(normalized))
    rtol, atol = NORMS[dtype_name]
    for w, b in ((weight, bias), (None, None)):
        out, mean, rstd = (np.empty(shape, dtype), np.empty(reduced, dtype), np.empty(reduced, dtype))
        ops.layer_norm(x, list(normalized), w, b, 1e-5, out, mean, rstd)
        want = A().native_layer_norm.default(
            _to_torch(torch, x), list(normalized), _to_torch(torch, w), _to_torch(torch, b), 1e-5
        )
        for got, expected in zip((out, mean, rstd), want):
            expected = _to_numpy(expected.to(_torch_dtype(dtype)))
            np.testing.assert_allclose(
                got.astype(np.float64), expected.astype(np.float64).reshape(got.shape), rtol=rtol, atol=atol
            )

"""Every operator rule's message names the argument that broke it, first, on both backends.

For each rule of pyaclnn/kernels/checks.py (each operator's check order is in
docs/operator-semantics.md) the table below has one call that breaks that rule
alone. The test asserts the exception type, the status, and that the Python name
of the faulty argument is the first name of the "(in Python: ...)" note the
functional layer appends (the note lists the parameters the message names, in
its order). A rule is broken through the functional API where it can be; the
rules it cannot reach (the outputs it makes itself fit the inputs; the formats
and null pointers it never passes) run through the low-level API, and the note
is the one the functional layer would append to that message (the same function
makes it).

The table is complete by construction: ``test_every_rule_of_checks_py_has_an_entry``
reads checks.py's rules off its source (every way a check function of an operator
reaches ``_fail``, through the helpers, line by line), runs every entry on the
numpy backend recording which way each one failed, and fails for a rule no entry
breaks. A rule added to checks.py is therefore a failing test until it has its
entry here. (A new name in a loop of one rule, such as one more tensor in a rank
check, is the same rule to this test: give it an entry when you add it.)
"""

from __future__ import annotations

import ast
import functools
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lowlevel as ll
import numpy as np
import pytest
from lowlevel import NCDHW, NDHWC, NULL, Spec
from test_op_checks import BWD_OK, GBWD_OK, GRID_OK, POOL_OK

import pyaclnn
from pyaclnn import AclnnError, constants
from pyaclnn import _operators as _ops
from pyaclnn.kernels import checks

NULLPTR = constants.ACLNN_ERR_PARAM_NULLPTR
INVALID = constants.ACLNN_ERR_PARAM_INVALID
INNER_NULLPTR = constants.ACLNN_ERR_INNER_NULLPTR
F32, F16, F64, I16, I32, I64 = np.float32, np.float16, np.float64, np.int16, np.int32, np.int64
FRACTAL_Z = constants.ACL_FORMAT_FRACTAL_Z
NCHW = constants.ACL_FORMAT_NCHW

CHECKS = Path(checks.__file__)
OPERATORS = (
    "max_pool3d_with_argmax",
    "max_pool3d_with_argmax_backward",
    "grid_sampler3d",
    "grid_sampler3d_backward",
)


@dataclass(frozen=True)
class Rule:
    """One broken rule: the operator (its Python name), the call (functional: ``fn(backend)``;
    low-level: the changes to the valid low-level call), the status and the Python name the
    note must list first."""

    op: str
    call: Callable[[str], Any] | dict[str, Any]
    status: int
    first: str


# -- the calls --------------------------------------------------------------------------------
# Valid inputs of each functional call; each rule changes one thing.

X = np.zeros((1, 2, 4, 4, 4), F32)  # max-pool input; kernel 2 gives (1, 2, 2, 2, 2)
GO = np.ones((1, 2, 2, 2, 2), F32)  # its gradient
IDX = np.zeros((1, 2, 2, 2, 2), I32)  # its indices
GX = np.zeros((1, 2, 3, 4, 5), F32)  # grid-sampler input
GRID = np.zeros((1, 2, 2, 2, 3), F32)  # its grid; the output is (1, 2, 2, 2, 2)
GGO = np.ones((1, 2, 2, 2, 2), F32)  # the output's gradient


def pool(**change: Any) -> Callable[[str], Any]:
    args = {"input": X, "kernel_size": 2, **change}
    return lambda b: pyaclnn.max_pool3d_with_argmax(**args, backend=b)


def pool_backward(**change: Any) -> Callable[[str], Any]:
    args = {"grad_output": GO, "input": X, "indices": IDX, "kernel_size": 2, **change}
    return lambda b: pyaclnn.max_pool3d_with_argmax_backward(**args, backend=b)


def sample(**change: Any) -> Callable[[str], Any]:
    args = {"input": GX, "grid": GRID, **change}
    return lambda b: pyaclnn.grid_sampler3d(**args, backend=b)


def sample_backward(**change: Any) -> Callable[[str], Any]:
    args = {"grad_output": GGO, "input": GX, "grid": GRID, **change}
    return lambda b: pyaclnn.grid_sampler3d_backward(**args, backend=b)


def huge_plane(op: str) -> Callable[[str], Any]:
    """A max-pool call on a (1, 1, 2048, 2048, 1024) input of zero strides: D*H*W = 2**32 over
    one element of memory."""

    def call(backend: str) -> Any:
        with pyaclnn.empty((8,), F32, backend=backend) as base:
            big = pyaclnn.DeviceArray.from_ptr(
                base.ptr, (1, 1, 2048, 2048, 1024), F32, strides=(0,) * 5, backend=backend
            )
            if op == "max_pool3d_with_argmax":
                return pyaclnn.max_pool3d_with_argmax(big, 1, backend=backend)
            return pyaclnn.max_pool3d_with_argmax_backward(big, big, big, 1, backend=backend)

    return call


P, PB, G, GB = OPERATORS
#: The check functions whose rules the table covers: the operators' phase 1, and the host's
#: check of NumPy max-pool indices (the device checks index values only in its kernel).
ROOTS = (*OPERATORS, "indices_in_planes")
HUGE = Spec((1, 1, 2048, 2048, 1024), strides=(0, 0, 0, 0, 0))  # a low-level huge_plane

RULES: dict[str, Rule] = {
    # -- MaxPool3dWithArgmax, in its check order
    "pool: null self": Rule(P, pool(input=None), NULLPTR, "input"),
    "pool: null kernelSize": Rule(P, dict(kernel=NULL), NULLPTR, "kernel_size"),
    "pool: null stride": Rule(P, dict(stride=NULL), NULLPTR, "stride"),
    "pool: null padding": Rule(P, dict(padding=NULL), NULLPTR, "padding"),
    "pool: null dilation": Rule(P, dict(dilation=NULL), NULLPTR, "dilation"),
    "pool: null out": Rule(P, dict(out=NULL), NULLPTR, "out[0]"),
    "pool: null indices": Rule(P, dict(indices=NULL), NULLPTR, "out[1] (indices)"),
    "pool: self float64": Rule(P, pool(input=X.astype(F64)), INVALID, "input"),
    "pool: indices int64": Rule(P, dict(indices=Spec((1, 2, 2, 2, 2), I64)), INVALID, "out[1] (indices)"),
    "pool: out dtype": Rule(P, dict(out=Spec((1, 2, 2, 2, 2), F16)), INVALID, "out[0]"),
    "pool: out format": Rule(P, dict(out=Spec((1, 2, 2, 2, 2), fmt=NCDHW)), INVALID, "out[0]"),
    "pool: indices format": Rule(
        P, dict(indices=Spec((1, 2, 2, 2, 2), I32, fmt=NCDHW)), INVALID, "out[1] (indices)"
    ),
    "pool: NDHWC self": Rule(
        P,
        dict(
            x=Spec((1, 2, 4, 4, 4), fmt=NDHWC),
            out=Spec((1, 2, 2, 2, 2), fmt=NDHWC),
            indices=Spec((1, 2, 2, 2, 2), I32, fmt=NDHWC),
        ),
        INVALID,
        "input",
    ),
    "pool: self rank 3": Rule(P, pool(input=np.zeros((4, 4, 4), F32)), INVALID, "input"),
    "pool: kernel_size length 2": Rule(P, pool(kernel_size=(2, 2)), INVALID, "kernel_size"),
    "pool: kernel_size 0": Rule(P, pool(kernel_size=(2, 0, 2)), INVALID, "kernel_size"),
    "pool: stride length 2": Rule(P, pool(stride=(2, 2)), INVALID, "stride"),
    "pool: stride 0": Rule(P, pool(stride=(2, 2, 0)), INVALID, "stride"),
    "pool: padding length 2": Rule(P, pool(padding=(1, 1)), INVALID, "padding"),
    "pool: padding 2": Rule(P, pool(padding=2), INVALID, "padding"),  # the example
    "pool: padding -1": Rule(P, pool(padding=-1), INVALID, "padding"),
    "pool: dilation length 0": Rule(P, pool(dilation=()), INVALID, "dilation"),
    "pool: dilation 0": Rule(P, pool(dilation=(1, 0, 1)), INVALID, "dilation"),
    "pool: dilation 2": Rule(P, pool(dilation=2), INVALID, "dilation"),
    "pool: out shape": Rule(P, dict(out=Spec((1, 2, 2, 2, 3))), INVALID, "out[0]"),
    "pool: indices shape": Rule(P, dict(indices=Spec((1, 2, 2, 3, 2), I32)), INVALID, "out[1] (indices)"),
    # The functional layer checks the plane before it allocates outputs as large; the operator too.
    "pool: D*H*W above INT32_MAX": Rule(P, huge_plane(P), INNER_NULLPTR, "input"),
    "pool: D*H*W above INT32_MAX, low-level": Rule(
        P,
        dict(
            x=HUGE,
            kernel=(1, 1, 1),
            stride=(1, 1, 1),
            out=HUGE,
            indices=Spec(HUGE.shape, I32, strides=HUGE.strides),
        ),
        INNER_NULLPTR,
        "input",
    ),
    # -- MaxPool3dWithArgmaxBackward
    "pool backward: null gradOutput": Rule(PB, pool_backward(grad_output=None), NULLPTR, "grad_output"),
    "pool backward: null self": Rule(PB, pool_backward(input=None), NULLPTR, "input"),
    "pool backward: null indices": Rule(PB, pool_backward(indices=None), NULLPTR, "indices"),
    "pool backward: null kernelSize": Rule(PB, dict(kernel=NULL), NULLPTR, "kernel_size"),
    "pool backward: null stride": Rule(PB, dict(stride=NULL), NULLPTR, "stride"),
    "pool backward: null padding": Rule(PB, dict(padding=NULL), NULLPTR, "padding"),
    "pool backward: null dilation": Rule(PB, dict(dilation=NULL), NULLPTR, "dilation"),
    "pool backward: null gradInput": Rule(PB, dict(grad_input=NULL), NULLPTR, "out (grad_input)"),
    "pool backward: self float64": Rule(
        PB, pool_backward(grad_output=GO.astype(F64), input=X.astype(F64)), INVALID, "input"
    ),
    "pool backward: indices int16": Rule(PB, pool_backward(indices=IDX.astype(I16)), INVALID, "indices"),
    "pool backward: gradOutput float16": Rule(
        PB, pool_backward(grad_output=GO.astype(F16)), INVALID, "grad_output"
    ),
    "pool backward: gradInput dtype": Rule(
        PB, dict(grad_input=Spec((1, 2, 4, 4, 4), F16)), INVALID, "out (grad_input)"
    ),
    "pool backward: gradOutput format": Rule(
        PB, dict(grad_output=Spec((1, 2, 2, 2, 2), fmt=NCDHW)), INVALID, "grad_output"
    ),
    "pool backward: gradInput format": Rule(
        PB, dict(grad_input=Spec((1, 2, 4, 4, 4), fmt=NCDHW)), INVALID, "out (grad_input)"
    ),
    "pool backward: indices private format": Rule(
        PB, dict(indices=Spec((1, 2, 2, 2, 2), I32, fmt=FRACTAL_Z)), INVALID, "indices"
    ),
    "pool backward: gradOutput rank 3": Rule(
        PB, pool_backward(grad_output=np.ones((2, 2, 2), F32)), INVALID, "grad_output"
    ),
    "pool backward: gradInput rank 3": Rule(
        PB, dict(grad_input=Spec((4, 4, 4))), INVALID, "out (grad_input)"
    ),
    "pool backward: indices rank 6": Rule(
        PB, pool_backward(indices=np.zeros((1, 1, 2, 2, 2, 2), I32)), INVALID, "indices"
    ),
    "pool backward: self rank 6": Rule(
        PB, pool_backward(input=np.zeros((1, 1, 2, 4, 4, 4), F32)), INVALID, "input"
    ),
    "pool backward: kernel_size length 2": Rule(
        PB, pool_backward(kernel_size=(2, 2)), INVALID, "kernel_size"
    ),
    "pool backward: kernel_size 0": Rule(PB, pool_backward(kernel_size=0), INVALID, "kernel_size"),
    "pool backward: stride length 2": Rule(PB, pool_backward(stride=(2, 2)), INVALID, "stride"),
    "pool backward: stride -1": Rule(PB, pool_backward(stride=-1), INVALID, "stride"),
    "pool backward: padding length 2": Rule(PB, pool_backward(padding=(0, 0)), INVALID, "padding"),
    "pool backward: padding 2": Rule(PB, pool_backward(padding=2), INVALID, "padding"),
    "pool backward: dilation length 2": Rule(PB, pool_backward(dilation=(1, 1)), INVALID, "dilation"),
    "pool backward: dilation 0": Rule(PB, pool_backward(dilation=0), INVALID, "dilation"),
    "pool backward: D*H*W above INT32_MAX": Rule(PB, huge_plane(PB), INVALID, "input"),
    "pool backward: D*H*W above INT32_MAX, low-level": Rule(
        PB, dict(x=HUGE, grad_input=HUGE), INVALID, "input"
    ),
    "pool backward: indices shape": Rule(
        PB, pool_backward(indices=np.zeros((1, 2, 2, 2, 1), I32)), INVALID, "indices"
    ),
    "pool backward: gradInput shape": Rule(
        PB, dict(grad_input=Spec((1, 2, 4, 4, 5))), INVALID, "out (grad_input)"
    ),
    "pool backward: gradOutput rank differs from self's": Rule(
        PB,
        pool_backward(grad_output=np.ones((2, 2, 2, 2), F32), indices=np.zeros((2, 2, 2, 2), I32)),
        INVALID,
        "grad_output",
    ),
    # Checked by the host for NumPy indices (on the device only the kernel sees index values).
    "pool backward: NumPy index outside its plane": Rule(
        PB, pool_backward(indices=np.full((1, 2, 2, 2, 2), 64, I32)), INVALID, "indices"
    ),
    "pool backward: gradOutput shape": Rule(
        PB,
        pool_backward(grad_output=np.ones((1, 2, 2, 2, 3), F32), indices=np.zeros((1, 2, 2, 2, 3), I32)),
        INVALID,
        "grad_output",
    ),
    # -- GridSampler3D
    "sample: null input": Rule(G, sample(input=None), NULLPTR, "input"),
    "sample: null grid": Rule(G, sample(grid=None), NULLPTR, "grid"),
    "sample: null out": Rule(G, dict(out=NULL), NULLPTR, "out"),
    "sample: input int32": Rule(G, sample(input=GX.astype(I32), grid=GRID.astype(I32)), INVALID, "input"),
    "sample: grid dtype": Rule(G, sample(grid=GRID.astype(F64)), INVALID, "grid"),
    "sample: out dtype": Rule(G, dict(out=Spec((1, 2, 2, 2, 2), F16)), INVALID, "out"),
    "sample: input format": Rule(G, dict(x=Spec((1, 2, 3, 4, 5), fmt=NCHW)), INVALID, "input"),
    "sample: out format": Rule(G, dict(out=Spec((1, 2, 2, 2, 2), fmt=NCHW)), INVALID, "out"),
    "sample: padding_mode 7": Rule(G, sample(padding_mode=7), INVALID, "padding_mode"),
    "sample: interpolation_mode 2": Rule(G, sample(interpolation_mode=2), INVALID, "interpolation_mode"),
    "sample: input rank 4": Rule(G, sample(input=np.zeros((2, 3, 4, 5), F32)), INVALID, "input"),
    "sample: grid rank 4": Rule(G, sample(grid=np.zeros((1, 2, 2, 3), F32)), INVALID, "grid"),
    "sample: out rank 4": Rule(G, dict(out=Spec((1, 2, 2, 2))), INVALID, "out"),
    "sample: grid N": Rule(G, sample(grid=np.zeros((2, 2, 2, 2, 3), F32)), INVALID, "grid"),
    "sample: out N": Rule(G, dict(out=Spec((2, 2, 2, 2, 2))), INVALID, "out"),
    "sample: out C": Rule(G, dict(out=Spec((1, 3, 2, 2, 2))), INVALID, "out"),
    "sample: out (D, H, W)": Rule(G, dict(out=Spec((1, 2, 2, 2, 1))), INVALID, "out"),
    "sample: input H 0": Rule(G, sample(input=np.zeros((1, 2, 3, 0, 5), F32)), INVALID, "input"),
    "sample: grid last dim 2": Rule(G, sample(grid=np.zeros((1, 2, 2, 2, 2), F32)), INVALID, "grid"),
    # -- GridSampler3DBackward
    "sample backward: null gradOutput": Rule(GB, sample_backward(grad_output=None), NULLPTR, "grad_output"),
    "sample backward: null input": Rule(GB, sample_backward(input=None), NULLPTR, "input"),
    "sample backward: null grid": Rule(GB, sample_backward(grid=None), NULLPTR, "grid"),
    "sample backward: null inputGrad": Rule(GB, dict(input_grad=NULL), NULLPTR, "out[0] (input_grad)"),
    "sample backward: null gridGrad": Rule(GB, dict(grid_grad=NULL), NULLPTR, "out[1] (grid_grad)"),
    "sample backward: input int64": Rule(
        GB,
        sample_backward(grad_output=GGO.astype(I64), input=GX.astype(I64), grid=GRID.astype(I64)),
        INVALID,
        "input",
    ),
    "sample backward: gradOutput dtype": Rule(
        GB, sample_backward(grad_output=GGO.astype(F64)), INVALID, "grad_output"
    ),
    "sample backward: grid dtype": Rule(GB, sample_backward(grid=GRID.astype(F16)), INVALID, "grid"),
    "sample backward: inputGrad dtype": Rule(
        GB, dict(input_grad=Spec((1, 2, 3, 4, 5), F16)), INVALID, "out[0] (input_grad)"
    ),
    "sample backward: gridGrad dtype": Rule(
        GB, dict(grid_grad=Spec((1, 2, 2, 2, 3), F16)), INVALID, "out[1] (grid_grad)"
    ),
    "sample backward: padding_mode 3": Rule(GB, sample_backward(padding_mode=3), INVALID, "padding_mode"),
    "sample backward: interpolation_mode 2": Rule(
        GB, sample_backward(interpolation_mode=2), INVALID, "interpolation_mode"
    ),
    "sample backward: input rank 4": Rule(
        GB, sample_backward(input=np.zeros((2, 3, 4, 5), F32)), INVALID, "input"
    ),
    "sample backward: grid rank 4": Rule(
        GB, sample_backward(grid=np.zeros((1, 2, 2, 3), F32)), INVALID, "grid"
    ),
    "sample backward: gradOutput rank 4": Rule(
        GB, sample_backward(grad_output=np.ones((1, 2, 2, 2), F32)), INVALID, "grad_output"
    ),
    "sample backward: grid N": Rule(
        GB, sample_backward(grid=np.zeros((2, 2, 2, 2, 3), F32)), INVALID, "grid"
    ),
    "sample backward: gradOutput N": Rule(
        GB, sample_backward(grad_output=np.ones((2, 2, 2, 2, 2), F32)), INVALID, "grad_output"
    ),
    "sample backward: gradOutput C": Rule(
        GB, sample_backward(grad_output=np.ones((1, 3, 2, 2, 2), F32)), INVALID, "grad_output"
    ),
    "sample backward: gradOutput (D, H, W)": Rule(
        GB, sample_backward(grad_output=np.ones((1, 2, 2, 1, 2), F32)), INVALID, "grad_output"
    ),
    "sample backward: grid last dim 4": Rule(
        GB,
        sample_backward(grid=np.zeros((1, 2, 2, 2, 4), F32)),
        INVALID,
        "grid",
    ),
    "sample backward: inputGrad shape": Rule(
        GB, dict(input_grad=Spec((1, 2, 3, 4, 4))), INVALID, "out[0] (input_grad)"
    ),
    "sample backward: gridGrad shape": Rule(
        GB, dict(grid_grad=Spec((1, 2, 2, 3, 3))), INVALID, "out[1] (grid_grad)"
    ),
    "sample backward: output_mask length 3": Rule(
        GB, sample_backward(output_mask=(True, True, False)), INVALID, "output_mask"
    ),
}

#: Rules of checks.py that no call can break, each with the reason (a test checks the reason).
UNREACHABLE = {
    # The backward's tiling rule: padding <= ((k-1)*d+1)//2, which pool_params' padding <= k//2
    # already implies for every dilation d >= 1 (test_the_tiling_padding_rule_is_implied).
    ("max_pool3d_with_argmax_backward", "padding {p} on axis"): "implied by padding <= kernelSize/2",
}

_LOW_LEVEL = {
    P: (ll.max_pool3d_with_argmax, POOL_OK),
    PB: (ll.max_pool3d_with_argmax_backward, BWD_OK),
    G: (ll.grid_sampler3d, GRID_OK),
    GB: (ll.grid_sampler3d_backward, GBWD_OK),
}


def _run(rule: Rule, backend: str) -> AclnnError:
    """The error of ``rule``'s call on ``backend``, with the note of the functional layer."""
    spec = _ops.OPERATORS[rule.op].spec
    with pytest.raises(AclnnError) as info:
        if callable(rule.call):
            rule.call(backend)
        else:
            function, valid = _LOW_LEVEL[rule.op]
            try:
                function(backend, **{**valid, **rule.call})
            except AclnnError as exc:
                raise _ops.in_python_terms(exc, spec.params) from None
    return info.value


def _note(text: str) -> list[str]:
    """The Python names of the "(in Python: ...)" note at the end of ``text``."""
    assert text.endswith(")") and "(in Python: " in text, f"no note: {text}"
    names = text.rsplit("(in Python: ", 1)[1][:-1]
    return [n.strip() for n in names.split(", ")] if names else []


@pytest.mark.parametrize("name", RULES, ids=list(RULES))
def test_the_message_names_the_faulty_argument_first(backend, name):
    rule = RULES[name]
    error = _run(rule, backend)
    assert type(error) is AclnnError, error
    assert error.status == rule.status, str(error)
    assert _note(str(error))[0] == rule.first, str(error)


# -- completeness: the rules read off checks.py ------------------------------------------------


@functools.cache
def _static_paths() -> dict[str, set[tuple[tuple[str, int], ...]]]:
    """For each operator's check function, every chain of calls in checks.py that ends in
    ``_fail``: ((function, line of the call), ...), outermost first."""
    tree = ast.parse(CHECKS.read_text(encoding="utf-8"))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    calls = {
        name: sorted(
            {
                (node.lineno, node.func.id)
                for node in ast.walk(fn)
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in functions
            }
        )
        for name, fn in functions.items()
    }

    @functools.cache
    def paths(name: str) -> tuple[tuple[tuple[str, int], ...], ...]:
        if name == "_fail":
            return ((),)
        return tuple(((name, line), *rest) for line, callee in calls[name] for rest in paths(callee))

    return {root: set(paths(root)) for root in ROOTS}


def _source_line(line: int) -> str:
    """The ``_fail(...)`` call at ``line`` of checks.py, on one line."""
    source = CHECKS.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.lineno == line and getattr(node.func, "id", "") == "_fail":
            return " ".join(str(ast.get_source_segment(source, node)).split())
    return source.splitlines()[line - 1].strip()


def test_every_rule_of_checks_py_has_an_entry(monkeypatch):
    seen: dict[str, set[tuple[tuple[str, int], ...]]] = {root: set() for root in ROOTS}
    real_fail = checks._fail

    def recording_fail(message: str, status: int = INVALID) -> checks.CheckFailed:
        frames = [f for f in traceback.extract_stack()[:-1] if Path(f.filename) == CHECKS]
        path = tuple((f.name, f.lineno) for f in frames)
        if path and path[0][0] in seen:
            seen[path[0][0]].add(path)
        return real_fail(message, status)

    monkeypatch.setattr(checks, "_fail", recording_fail)
    for name, rule in RULES.items():
        try:
            _run(rule, "numpy")
        except BaseException as exc:  # reported with the entry's name
            raise AssertionError(f"{name}: {exc}") from exc
    pyaclnn.finalize("numpy")
    unreachable = {
        (op, path)
        for op, paths in _static_paths().items()
        for path in paths
        if any(op == o and start in _source_line(path[-1][1]) for o, start in UNREACHABLE)
    }
    missing = [
        f"{op}: " + " > ".join(f"{f}:{line}" for f, line in path) + f": {_source_line(path[-1][1])}"
        for op, paths in _static_paths().items()
        for path in sorted(paths - seen[op])
        if (op, path) not in unreachable
    ]
    assert not missing, "rules of checks.py no entry of RULES breaks:\n" + "\n".join(missing)
    assert all(seen[root] <= _static_paths()[root] for root in ROOTS), seen  # the reading is right
    assert len(unreachable) == len(UNREACHABLE)  # each listed rule still exists


def test_every_null_pointer_has_an_entry():
    # The null rule is one line of checks.py for every pointer of an operator: one entry each.
    from pyaclnn import _optable

    for op in OPERATORS:
        spec = _ops.OPERATORS[op].spec
        pointers = {
            p.python_name
            for p in spec.params
            if p.kind in (_optable.TENSOR, _optable.OUTPUT, _optable.INT_ARRAY, _optable.BOOL_ARRAY)
        }
        covered = {r.first for r in RULES.values() if r.op == op and r.status == NULLPTR}
        # outputMask: a null mask is a successful no-op before any check (test_op_checks).
        assert pointers - {"output_mask"} == covered, op


def test_the_tiling_padding_rule_is_implied():
    # UNREACHABLE's reason: every padding pool_params accepts (0 <= p <= k//2) passes the
    # backward's tiling rule p <= ((k-1)*d+1)//2 for every dilation d >= 1.
    for k in range(1, 40):
        for d in range(1, 10):
            assert k // 2 <= ((k - 1) * d + 1) // 2


def test_an_indices_dtype_the_device_has_not_is_refused_naming_it(backend):
    # It was passed on, and the op's refusal of its indices output named out[1] (indices).
    with pytest.raises(ValueError, match=r"^indices_dtype must be int32 or int64, got int16$"):
        pyaclnn.max_pool3d_with_argmax(X, 2, indices_dtype=np.int16, backend=backend)

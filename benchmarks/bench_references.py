"""The CPU fallback's NumPy references against the same torch CPU operators, in one run.

Every operator pyaclnn has a reference for is called through ``pyaclnn.ops`` on the numpy backend
(NumPy arrays in, outputs preallocated) and its aten oracle on torch CPU tensors, in turns: the
elementwise families on 1M float32 elements, the matmul family on 512x512 matrices, a 3x3
convolution on (8, 64, 56, 56), reductions and norms on (64, 4096), data movement on about 1M
elements. The oracles and the elementwise arguments come from the tests' tables
(tests/test_references_elementwise.py, tests/test_references_other.py): nothing about an operator is
written twice. Prints each ratio (reference / torch), worst first, their geometric mean (target <=
1.5) and the worst (target: none above 4); ``--strict`` exits 1 when a target is missed. Beside it,
the same reference run alone on the host (``pyaclnn.ops.<name>.reference``: the kernel, without the
call path of ``pyaclnn.ops`` and its phase-1 check) against torch: the part of each ratio that is the
reference's math. Both run on one thread (``--threads``): on a shared 2-core machine torch's thread
pool waits milliseconds for a busy core, which the ratios should not measure.

    python benchmarks/bench_references.py            # about a minute and a half
    python benchmarks/bench_references.py --only Conv --repeat 9
    python benchmarks/bench_references.py --strict   # exit status 1 when a target is missed
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

# one BLAS thread unless asked otherwise (set before NumPy loads its BLAS)
_THREADS = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, _THREADS)

import _common  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(_common.REPO, "tests"))
sys.path.insert(0, _common.REPO)

GEOMEAN_TARGET = 1.5
WORST_TARGET = 4.0
ELEMENTS = (1024, 1024)


# (name, the pyaclnn.ops function, its arguments, the torch call) of a case
Call = tuple[str, Any, list[Any], Callable[[], Any]]


def _elementwise(torch: Any) -> list[Call]:
    """The elementwise cases, on 1M float32 elements."""
    import test_references_elementwise as t

    t.LAYOUTS["bench"] = (ELEMENTS, ELEMENTS, ELEMENTS)
    rng = np.random.default_rng(0)
    seen: set[str] = set()
    calls = []
    for case in t.CASES:
        if case.name in seen:
            continue
        seen.add(case.name)
        dtype = np.dtype(np.float32) if t._supported(case, "float32") else np.dtype(np.int32)
        args = t._arguments(case, dtype, "bench", rng)
        want = t._to_numpy(t._oracle(torch, case, args))
        op = t.ROWS[case.name]
        inputs = [t._to_torch(torch, a) for p, a in zip(op.roles, args) if p.role != t.elementwise.OUT]
        filled = [
            np.empty(want.shape, want.dtype) if p.role == t.elementwise.OUT else a
            for p, a in zip(op.roles, args)
        ]
        function = getattr(t.ops, t.python_operator_name(case.name))
        calls.append((case.name, function, filled, lambda c=case, i=inputs: c.oracle(*i)))  # type: ignore[misc]
    return calls


def _big_inputs(rng: np.random.Generator) -> dict[str, dict[str, Any]]:
    """The inputs of each other operator (by C name), at the benchmark's sizes."""

    def f(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    def i(bound: int, *shape: int) -> np.ndarray:
        return rng.integers(0, bound, shape).astype(np.int64)

    f32 = np.dtype(np.float32)
    mm, add = {"cubeMathType": 0}, {"beta": 0.5, "alpha": 2.0, "cubeMathType": 0}
    rows = f(64, 4096)
    return {
        "Matmul": {"self": f(512, 512), "mat2": f(512, 512), **mm},
        "BatchMatMul": {"self": f(2, 512, 512), "mat2": f(2, 512, 512), **mm},
        "Mm": {"self": f(512, 512), "mat2": f(512, 512), **mm},
        "Mv": {"self": f(512, 512), "vec": f(512), **mm},
        "Dot": {"self": f(1 << 20), "tensor": f(1 << 20)},
        "Addmm": {"self": f(512), "mat1": f(512, 512), "mat2": f(512, 512), **add},
        "InplaceAddmm": {"selfRef": f(512, 512), "mat1": f(512, 512), "mat2": f(512, 512), **add},
        "Baddbmm": {"self": f(512), "batch1": f(2, 512, 512), "batch2": f(2, 512, 512), **add},
        "InplaceBaddbmm": {
            "selfRef": f(2, 512, 512),
            "batch1": f(2, 512, 512),
            "batch2": f(2, 512, 512),
            **add,
        },
        "Addbmm": {"self": f(512), "batch1": f(2, 512, 512), "batch2": f(2, 512, 512), **add},
        "Convolution": {
            "input": f(8, 64, 56, 56),
            "weight": f(64, 64, 3, 3),
            "bias": f(64),
            "stride": [1, 1],
            "padding": [1, 1],
            "dilation": [1, 1],
            "transposed": False,
            "outputPadding": [0, 0],
            "groups": 1,
            "cubeMathType": 0,
        },
        "ReduceSum": {"self": rows, "dims": [1], "keepDims": False, "dtype": f32},
        "Mean": {"self": rows, "dim": [1], "keepDim": False, "dtype": f32},
        "Cumsum": {"self": rows, "dim": 1, "dtype": f32},
        "Softmax": {"self": rows, "dim": -1},
        "LogSoftmax": {"self": rows, "dim": -1},
        "RmsNorm": {"x": rows, "gamma": f(4096), "epsilon": 1e-6},
        "Arange": {"start": 0.5, "end": 0.5 + (1 << 20) * 0.25, "step": 0.25},
        "Tril": {"self": f(1024, 1024), "diagonal": 0},
        "Triu": {"self": f(1024, 1024), "diagonal": 0},
        "InplaceTril": {"selfRef": f(1024, 1024), "diagonal": 0},
        "InplaceTriu": {"selfRef": f(1024, 1024), "diagonal": 0},
        "IndexSelect": {"self": f(4096, 256), "dim": 0, "index": i(4096, 4096)},
        "Gather": {"self": f(1024, 1024), "dim": 1, "index": i(1024, 1024, 1024)},
        "GatherV2": {"self": f(32000, 256), "dim": 0, "index": i(32000, 8, 512)},
        "Repeat": {"self": f(512, 1024), "repeats": [2, 1]},
        "RepeatInterleaveIntWithDim": {"self": f(1024, 512), "repeats": 2, "dim": 1, "outputSize": 1024},
        "RepeatInterleaveInt": {"self": f(1024, 512), "repeats": 2, "outputSize": 1 << 20},
        "RepeatInterleave": {"self": f(1024, 512), "repeats": i(3, 1 << 19), "outputSize": 0},
        "ConstantPadNd": {"self": f(1024, 1024), "pad": [1, 1, 1, 1], "value": 0.5},
    }


def _others(torch: Any) -> list[Call]:
    import test_references_other as t

    inputs = _big_inputs(np.random.default_rng(1))
    repeats = inputs["RepeatInterleave"]
    repeats["outputSize"] = int(repeats["repeats"].sum())
    cases = {}
    for case in t.CASES:
        cases.setdefault(case.name, case)
    calls = []
    for name, values in inputs.items():
        case, row = cases[name], t.ROWS[name]
        converted = {n: t._to_torch(torch, v) for n, v in values.items()}
        if name == "Arange":
            converted["dtype"] = torch.float32
        wants = [t._to_numpy(w) for w in _tuple(case.oracle(converted))]
        outputs = iter([np.empty(w.shape, w.dtype) for w in wants])
        args = [next(outputs) if n in t.OUTPUTS else values[n] for n in row.names]  # as t._call
        function = getattr(t.ops, t.python_operator_name(name))
        calls.append((name, function, args, lambda c=case, v=converted: c.oracle(v)))  # type: ignore[misc]
    return calls


def _tuple(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def _singles(torch: Any) -> list[Call]:
    """The references registered on their own: Cast, InplaceCopy, Cat, LayerNorm."""
    from pyaclnn import ops

    rng = np.random.default_rng(2)
    x = rng.standard_normal(ELEMENTS).astype(np.float32)
    tx = torch.from_numpy(x.copy())
    half, target, th = np.empty(ELEMENTS, np.float16), np.empty(ELEMENTS, np.float32), torch.empty(ELEMENTS)
    parts = [x[:512], x[512:]]
    rows = rng.standard_normal((64, 4096)).astype(np.float32)
    weight, bias = np.ones(4096, np.float32), np.zeros(4096, np.float32)
    trows, tw, tb = torch.from_numpy(rows), torch.from_numpy(weight), torch.from_numpy(bias)
    normed, mean, rstd = np.empty_like(rows), np.empty((64, 1), np.float32), np.empty((64, 1), np.float32)
    return [
        ("Cast", ops.cast, [x, np.float16, half], lambda: tx.to(torch.float16)),
        ("InplaceCopy", ops.inplace_copy, [target, x], lambda: th.copy_(tx)),
        ("Cat", ops.cat, [parts, 0, target], lambda: torch.ops.aten.cat.default([tx[:512], tx[512:]], 0)),
        (
            "LayerNorm",
            ops.layer_norm,
            [rows, [4096], weight, bias, 1e-5, normed, mean, rstd],
            lambda: torch.ops.aten.native_layer_norm.default(trows, [4096], tw, tb, 1e-5),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--repeat", type=int, default=5, help="timed rounds per operator (the fastest is kept)"
    )
    parser.add_argument("--threads", type=int, default=1, help="threads of torch and of NumPy's BLAS")
    parser.add_argument("--only", default="", help="only the operators whose name contains this")
    parser.add_argument("--strict", action="store_true", help="exit status 1 when a target is missed")
    args = parser.parse_args(argv)
    torch = _common.import_torch("bench_references.py")
    torch.set_num_threads(args.threads)
    import pyaclnn

    pyaclnn.set_backend("numpy")
    info = _common.machine(torch)
    _common.print_machine(info)
    calls = [*_elementwise(torch), *_singles(torch), *_others(torch)]
    rows, ratios, alone = [], {}, {}
    for name, function, arguments, oracle in calls:
        if args.only and args.only not in name:
            continue
        contenders = {
            "reference": lambda f=function, a=arguments: f(*a),
            "alone": lambda f=function, a=arguments: f.reference(*a),
            "torch": oracle,
        }
        times = _common.time_interleaved(contenders, args.repeat)
        ours, math, theirs = (min(times[k]) for k in contenders)  # the mins: fair under a shared load
        ratios[name], alone[name] = ours / theirs, math / theirs
        rows.append((name, ours, math, theirs))
    rows.sort(key=lambda row: ratios[row[0]], reverse=True)
    _common.print_table(
        ("operator", "reference ms", "alone ms", "torch ms", "ratio", "alone ratio"),
        [
            (n, f"{o * 1e3:.3f}", f"{m * 1e3:.3f}", f"{t * 1e3:.3f}", f"{ratios[n]:.2f}", f"{alone[n]:.2f}")
            for n, o, m, t in rows
        ],
    )
    geomean = _common.geomean(list(ratios.values()))
    worst = max(ratios, key=ratios.__getitem__)
    print(
        f"\n{len(ratios)} operators; geomean {geomean:.2f}x torch (target <= {GEOMEAN_TARGET}): "
        f"{'met' if geomean <= GEOMEAN_TARGET else 'missed'}; the references alone "
        f"{_common.geomean(list(alone.values())):.2f}x"
    )
    above = sorted((n for n, r in ratios.items() if r > WORST_TARGET), key=ratios.__getitem__, reverse=True)
    print(
        f"worst {worst} {ratios[worst]:.2f}x (target: none above {WORST_TARGET}x): "
        f"{'met' if not above else 'missed by ' + ', '.join(f'{n} {ratios[n]:.1f}x' for n in above)}"
    )
    missed = geomean > GEOMEAN_TARGET or bool(above)
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Make pyaclnn/selftest_golden.npz: every selftest case computed once by PyTorch CPU.

``python -m pyaclnn selftest`` compares each case with these outputs as well
as with the reference kernels, so that on the numpy backend (where the
reference kernels *are* the implementation) the kernels still meet an
independent oracle. Run this again whenever a case or its inputs change; the
selftest says so (each case stores a digest of the inputs its outputs came from).

PyTorch computes float16/bfloat16 cases in float32 from the rounded inputs and
rounds the result once, as the NPU and the kernels do; float64 cases in float64.
Before writing, every golden output is checked against the reference kernels
with the selftest's tolerances: a disagreement stops the script, as it is a
bug in one of the two to look at, not something to ship.

Usage::

    python scripts/make_selftest_golden.py            # write pyaclnn/selftest_golden.npz
    python scripts/make_selftest_golden.py --check    # exit 1 if the shipped file differs from a fresh run
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pyaclnn import selftest

OUTPUT = Path(__file__).resolve().parent.parent / "pyaclnn" / selftest.GOLDEN_FILE
TorchOutputs = dict[str, "np.ndarray | None"]


def _tensor(a: np.ndarray, dtype: np.dtype, grad: bool = False) -> torch.Tensor:
    """``a`` as a contiguous torch tensor in the compute dtype (float64 stays, the rest is float32)."""
    compute = np.float64 if dtype == np.float64 else np.float32
    return torch.from_numpy(np.ascontiguousarray(a, dtype=compute)).requires_grad_(grad)


def _back(t: torch.Tensor | None, dtype: np.dtype) -> np.ndarray | None:
    """A torch result rounded once to the case's dtype."""
    return None if t is None else t.detach().numpy().astype(dtype)


def _pool_kwargs(case: selftest.Case) -> dict[str, Any]:
    return dataclasses.asdict(selftest.pool_params(case))  # stride () is the kernel there


def _pool_forward(case: selftest.Case, inputs: selftest.Arrays) -> TorchOutputs:
    out, indices = torch.nn.functional.max_pool3d(
        _tensor(inputs["x"], case.dtype), return_indices=True, **_pool_kwargs(case)
    )
    return {"out": _back(out, case.dtype), "indices": indices.numpy().astype(case.params["indices_dtype"])}


def _pool_backward(case: selftest.Case, inputs: selftest.Arrays) -> TorchOutputs:
    # torch's own forward and backward: the golden gradient does not use the case's (reference) indices.
    x = _tensor(inputs["x"], case.dtype, grad=True)
    out = torch.nn.functional.max_pool3d(x, **_pool_kwargs(case))
    out.backward(_tensor(inputs["grad_output"], case.dtype))
    return {"grad_input": _back(x.grad, case.dtype)}


def _grid_kwargs(case: selftest.Case) -> dict[str, Any]:
    p = case.params
    return dict(mode=p["interpolation"], padding_mode=p["padding"], align_corners=p["align_corners"])


def _to_layout(a: np.ndarray | None, case: selftest.Case) -> np.ndarray | None:
    return np.moveaxis(a, 1, -1) if a is not None and case.params["layout"] == "NDHWC" else a


def _grid_forward(case: selftest.Case, inputs: selftest.Arrays) -> TorchOutputs:
    x, grid = _tensor(inputs["x"], case.dtype), _tensor(inputs["grid"], case.dtype)
    out = torch.nn.functional.grid_sample(x, grid, **_grid_kwargs(case))
    return {"out": _to_layout(_back(out, case.dtype), case)}


def _grid_backward(case: selftest.Case, inputs: selftest.Arrays) -> TorchOutputs:
    want_input, want_grid = case.params["output_mask"]
    x = _tensor(inputs["x"], case.dtype, grad=want_input)
    grid = _tensor(inputs["grid"], case.dtype, grad=want_grid)
    out = torch.nn.functional.grid_sample(x, grid, **_grid_kwargs(case))
    out.backward(_tensor(inputs["grad_output"], case.dtype))
    return {
        "input_grad": _to_layout(_back(x.grad, case.dtype), case),
        "grid_grad": _back(grid.grad, case.dtype),
    }


#: By the operator table's Python name, as selftest's cases name their operator (Case.operator).
TORCH: dict[str, Callable[[selftest.Case, selftest.Arrays], TorchOutputs]] = {
    "max_pool3d_with_argmax": _pool_forward,
    "max_pool3d_with_argmax_backward": _pool_backward,
    "grid_sampler3d": _grid_forward,
    "grid_sampler3d_backward": _grid_backward,
}


def _stored(a: np.ndarray) -> np.ndarray:
    """What is written for an output: its golden sample, bfloat16 widened to float32 (exactly)."""
    sample = selftest.golden_sample(a)
    return sample.astype(np.float32) if sample.dtype.name == "bfloat16" else sample


def golden_arrays() -> dict[str, np.ndarray]:
    """Every case's golden arrays by key; raises SystemExit when torch and the kernels disagree."""
    missing = sorted({case.operator for case in selftest.cases()} - set(TORCH))
    if missing:
        raise SystemExit(f"no PyTorch computation for {', '.join(missing)}: add it to TORCH")
    arrays: dict[str, np.ndarray] = {}
    disagreements = []
    for case in selftest.cases():
        inputs = case.inputs()
        outputs = TORCH[case.operator](case, inputs)
        check = selftest.Comparison()
        for name, ref in case.reference(inputs).items():
            check.add(name, outputs.get(name), ref, exact=case.exact)
        if not check.within(case.tolerance):
            disagreements.append(f"{case.name}: {check}")
        arrays[f"{case.name}::inputs"] = np.array(selftest.inputs_digest(inputs), dtype=np.uint32)
        for name, value in outputs.items():
            if value is not None:
                arrays[f"{case.name}::{name}"] = _stored(value)
                arrays[f"{case.name}::{name}::shape"] = np.array(value.shape, dtype=np.int64)
    if disagreements:
        raise SystemExit("PyTorch and the reference kernels disagree:\n" + "\n".join(disagreements))
    return arrays


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def _differences(path: Path, arrays: dict[str, np.ndarray]) -> list[str]:
    """How the file at ``path`` differs from ``arrays``; floats may differ within the case's tolerance.

    Another machine's PyTorch may sum in another order, so a fresh run need not
    be bit-identical to the shipped one.
    """
    tolerance = {case.name: case.tolerance for case in selftest.cases()}
    with np.load(path) as shipped:
        found = {key: shipped[key] for key in shipped.files}
    problems = [
        f"{key}: {'missing' if key in arrays else 'not made any more'}"
        for key in sorted(set(found) ^ set(arrays))
    ]
    for key in sorted(set(found) & set(arrays)):
        if arrays[key].dtype.kind != "f":
            same = np.array_equal(found[key], arrays[key])
        else:
            cmp = selftest.Comparison()
            cmp.add(key, found[key], arrays[key])
            same = cmp.within(tolerance[key.split("::")[0]])
        if not same:
            problems.append(f"{key}: differs")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"default: {OUTPUT}")
    parser.add_argument("--check", action="store_true", help="compare with --output instead of writing it")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # summation order independent of the machine's core count
    arrays = golden_arrays()
    if args.check:
        problems = _differences(args.output, arrays) if args.output.is_file() else ["the file is missing"]
        verdict = "DIFFERS from a fresh PyTorch run" if problems else "up to date"
        print(f"{args.output}: {verdict} (torch {torch.__version__})", *problems, sep="\n  ")
        return 1 if problems else 0
    args.output.write_bytes(_npz_bytes(arrays))
    print(
        f"wrote {args.output}: {len(arrays)} arrays, {args.output.stat().st_size / 1024:.0f} KiB "
        f"(torch {torch.__version__})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

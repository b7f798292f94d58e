"""``python -m pyaclnn selftest``: the four operators on a backend against the NumPy reference
kernels and against golden outputs of PyTorch.

Every case builds seeded random inputs, runs one operator through the
functional API on the chosen backend (the NPU, or the numpy backend), and
compares the result twice:

- with the same math run on the host by the reference kernels of
  :mod:`pyaclnn.kernels`, called directly as the numpy backend calls them
  (what an NPU is checked against);
- with golden outputs PyTorch CPU computed once from the same inputs,
  shipped as package data (``selftest_golden.npz``, made by
  ``scripts/make_selftest_golden.py``). On the numpy backend the first
  comparison is the kernels against themselves; this one is an independent
  oracle. Outputs larger than :data:`GOLDEN_MAX_ELEMENTS` are kept as every
  k-th element of the flattened array, to keep the file small.

Error measure: ``max |result - expected| / max |expected|`` (plain
``max |result - expected|`` when the expected values are all zero), computed
in float64. Tolerances, the same for both comparisons:

==================================  ======================================
max-pool forward (values, indices)  exact: identical values, 0 index mismatches
float64                             1e-12
float32                             1e-5
float16                             1e-3  (one fp16 ulp at the largest value is 9.8e-4)
bfloat16                            1e-2  (one bf16 ulp at the largest value is 7.8e-3)
==================================  ======================================

fp16/bf16 are computed in float32 and rounded once on every side, so the
expected values and a correct device differ by at most one rounding step.

The modules, one job each: :mod:`~pyaclnn.selftest.operators` (:class:`Case`,
:class:`~pyaclnn.selftest.operators.Operator` and the registry of every operator's
knowledge), a module per family of operators that registers each operator's inputs,
call, reference kernel on host arrays and cases (:mod:`~pyaclnn.selftest.max_pool3d`,
:mod:`~pyaclnn.selftest.grid_sampler3d`; :mod:`~pyaclnn.selftest.references` imports them
all and re-exports their references),
:mod:`~pyaclnn.selftest.matrix` (:func:`cases`, every operator's cases in table
order, and :func:`check_coverage`), :mod:`~pyaclnn.selftest.compare` (the
measure and :data:`TOLERANCES`), :mod:`~pyaclnn.selftest.goldens` (the golden
file), :mod:`~pyaclnn.selftest.report` (the table and the JSON) and
:mod:`~pyaclnn.selftest.cli` (:func:`run` and the command line). This package
re-exports their public names.
"""

from __future__ import annotations

# references imports each family of operators (registering its cases in operators.OPERATORS);
# its references are re-exported here.
from . import references as _references
from .cli import add_arguments, main, run, run_case
from .compare import TOLERANCES, Arrays, Comparison, Outputs, compare
from .goldens import GOLDEN_FILE, GOLDEN_MAX_ELEMENTS, golden, golden_sample, inputs_digest
from .matrix import cases, check_coverage
from .operators import Case
from .references import *  # noqa: F403
from .report import CaseResult, format_table

__all__ = [
    "GOLDEN_FILE",
    "GOLDEN_MAX_ELEMENTS",
    "TOLERANCES",
    "Arrays",
    "Outputs",
    "Case",
    "CaseResult",
    "Comparison",
    "cases",
    "check_coverage",
    "compare",
    "golden",
    "golden_sample",
    "inputs_digest",
    "format_table",
    "run",
    "run_case",
    "main",
    "add_arguments",
]
__all__ += _references.__all__

"""How the selftest compares outputs with expected values, and the tolerances it accepts.

The measure and the tolerances are those of :mod:`pyaclnn.selftest`'s docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["TOLERANCES", "Arrays", "Outputs", "Comparison", "compare"]

#: Largest accepted max |result - expected| / max |expected| per dtype name
#: (names, not dtypes: bfloat16's dtype needs ml_dtypes, imported only when cases() runs).
TOLERANCES: dict[str, float] = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-3, "bfloat16": 1e-2}

#: A case's inputs by name.
Arrays = dict[str, np.ndarray]
#: Outputs by name; None for one masked out. Any: what the operator returned, checked by the comparison.
Outputs = dict[str, Any]


@dataclass
class Comparison:
    """Worst differences over the outputs of one case against one set of expected values."""

    error: float = 0.0  # max |got - expected| / max |expected|, over all outputs
    index_mismatches: int | None = None  # integer outputs (max-pool indices) only
    exact_mismatches: int | None = None  # values that differ, for exact cases
    notes: list[str] = field(default_factory=list)

    def fail(self, note: str) -> None:
        self.notes.append(note)
        self.error = float("inf")

    def add(self, name: str, got: Any, ref: np.ndarray | None, *, exact: bool = False) -> None:
        if ref is None:
            if got is not None:
                self.fail(f"{name}: expected None (masked out), got an array")
            return
        if got is None or np.shape(got) != ref.shape:
            self.fail(f"{name}: shape {None if got is None else np.shape(got)}, expected {ref.shape}")
            return
        got64 = np.asarray(got).astype(np.float64)
        ref64 = ref.astype(np.float64)
        if np.issubdtype(ref.dtype, np.integer):
            mismatches = int(np.count_nonzero(got64 != ref64))
            self.index_mismatches = (self.index_mismatches or 0) + mismatches
            return
        same_nan = np.isnan(got64) & np.isnan(ref64)
        diff = np.where(same_nan, 0.0, np.abs(got64 - ref64))
        worst = float(np.max(diff, initial=0.0))
        if np.isnan(worst) or np.any(np.isnan(got64) != np.isnan(ref64)):
            worst = float("inf")
        scale = float(np.max(np.abs(np.where(np.isnan(ref64), 0.0, ref64)), initial=0.0))
        self.error = max(self.error, worst / scale if scale > 0 else worst)
        if exact:
            self.exact_mismatches = (self.exact_mismatches or 0) + int(np.count_nonzero(diff))

    def within(self, tolerance: float) -> bool:
        return (
            self.error <= tolerance
            and not self.index_mismatches
            and not self.exact_mismatches
            and not self.notes
        )


def _check_dtypes(outputs: Outputs, expected: Outputs, cmp: Comparison) -> None:
    for name, got in outputs.items():
        ref = expected.get(name)
        if got is not None and ref is not None and np.dtype(got.dtype) != ref.dtype:
            cmp.fail(f"{name}: dtype {got.dtype}, expected {ref.dtype}")


def compare(outputs: Outputs, expected: Outputs, *, exact: bool = False) -> Comparison:
    """Every expected output against the one of the same name, then their dtypes."""
    cmp = Comparison()
    for name, ref in expected.items():
        cmp.add(name, outputs.get(name), ref, exact=exact)
    _check_dtypes(outputs, expected, cmp)
    return cmp
